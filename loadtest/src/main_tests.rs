//! Tests of the command line: the subcommands' flags as they parse, and
//! the run settings they make.

use super::*;
use clap::CommandFactory;
use watchd_loadtest::s1::{S1Config, WatchProtocol};

#[test]
fn cli_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn s1_storage_and_accept_flags_parse() {
    use watchd_loadtest::http::Accept;
    let parse = |extra: &[&str]| {
        let mut argv = vec!["watchd-loadtest", "s1", "--target=watchd"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::S1(a)) => {
                let c = a
                    .load
                    .config(watchd_loadtest::s1::Target::Watchd, a.load.protocol)
                    .expect("config");
                Ok((c.storage, c.accept))
            }
            Ok(_) => panic!("not s1"),
            Err(e) => Err(e),
        }
    };
    assert_eq!(parse(&[]).ok(), Some((Storage::Json, Accept::Json)));
    assert_eq!(
        parse(&["--storage=protobuf", "--accept=protobuf"]).ok(),
        Some((Storage::Protobuf, Accept::Protobuf))
    );
    assert!(parse(&["--storage=yaml"]).is_err());
    assert!(parse(&["--accept=xml"]).is_err());
    let cli = Cli::try_parse_from([
        "watchd-loadtest",
        "s1-compare",
        "--storage=protobuf",
        "--accept=protobuf",
    ])
    .expect("parses");
    let Command::S1Compare(args) = cli.command else {
        panic!("not s1-compare");
    };
    let (etcd, watchd) = args.load.compare_configs().expect("valid");
    assert_eq!(
        (etcd.storage, etcd.accept),
        (Storage::Protobuf, Accept::Json)
    );
    assert_eq!(
        (watchd.storage, watchd.accept),
        (Storage::Protobuf, Accept::Protobuf)
    );
    let cli = Cli::try_parse_from(["watchd-loadtest", "s1-compare", "--accept=protobuf"])
        .expect("parses");
    let Command::S1Compare(args) = cli.command else {
        panic!("not s1-compare");
    };
    let e = args.load.compare_configs().expect_err("JSON storage");
    assert!(e.contains("--storage=protobuf"), "{e}");
}

fn compare_args(extra: &[&str]) -> Result<scenarios::S1CompareArgs, clap::Error> {
    let mut argv = vec!["watchd-loadtest", "s1-compare"];
    argv.extend_from_slice(extra);
    match Cli::try_parse_from(argv)?.command {
        Command::S1Compare(a) => Ok(a),
        _ => panic!("not s1-compare"),
    }
}

#[test]
fn baselines_default_to_the_floor_and_etcd() {
    use scenarios::Baseline::{Etcd, Floor};
    let a = compare_args(&[]).expect("parses");
    assert_eq!(a.baselines, [Floor, Etcd]);
    assert!(a.plot_with.is_empty());
    let a = compare_args(&["--baselines=etcd", "--plot-with=a.json,b.json"]).unwrap();
    assert_eq!(a.baselines, [Etcd]);
    assert_eq!(a.plot_with.len(), 2);
    assert!(compare_args(&["--baselines=proxy"]).is_err());
}

#[test]
fn target_url_tls_and_token_flags_parse() {
    use watchd_loadtest::endpoint::Protocol;
    use watchd_loadtest::s1::WatchProtocol;
    let a = compare_args(&[
        "--target-url=https://localhost:6443",
        "--ca-file=/tmp/ca.pem",
        "--token-file=/tmp/token",
        "--protocol=http2",
        "--streams-per-connection=50",
    ])
    .expect("parses");
    assert_eq!(a.load.target_url.as_deref(), Some("https://localhost:6443"));
    assert_eq!(a.load.protocol, WatchProtocol::Http2);
    let (etcd, watchd) = a.load.compare_configs().expect("valid");
    assert_eq!(watchd.protocol, Protocol::Http2);
    assert_eq!(watchd.streams_per_connection, 50);
    assert_eq!(watchd.tls.ca_file.as_deref(), Some("/tmp/ca.pem".as_ref()));
    assert!(watchd.token.is_some() && watchd.multiplexing().tls);
    // The HTTP side's URL, TLS and token do not reach etcd direct.
    assert!(etcd.target_url.is_none() && etcd.token.is_none() && !etcd.tls.is_set());
    // --watchd-url still works, as an alias.
    let a = compare_args(&["--watchd-url=http://127.0.0.1:8080"]).expect("parses");
    assert_eq!(a.load.target_url.as_deref(), Some("http://127.0.0.1:8080"));
    assert_eq!(a.load.protocol, WatchProtocol::Http1, "HTTP/1.1 by default");
    assert_eq!(a.load.streams_per_connection, 100);
    // Refused at parse time: a token twice, an unknown protocol.
    assert!(compare_args(&["--token=a", "--token-file=/tmp/t"]).is_err());
    assert!(compare_args(&["--protocol=h2"]).is_err());
    // Refused before any run: TLS flags without https, https without them.
    let a = compare_args(&["--ca-file=/tmp/ca.pem"]).expect("parses");
    assert!(a.load.compare_configs().is_err());
    let a = compare_args(&["--target-url=https://127.0.0.1:6443"]).expect("parses");
    let e = a.load.compare_configs().unwrap_err();
    assert!(e.contains("--ca-file"), "{e}");
    let a = compare_args(&["--streams-per-connection=0", "--protocol=http2"]).unwrap();
    assert!(a.load.compare_configs().is_err());
}

/// Protocol, connections and most streams on one connection of etcd
/// direct, then of each watchd side.
fn shapes(etcd: &S1Config, watchd: &[S1Config]) -> Vec<(String, usize, usize)> {
    std::iter::once(etcd)
        .chain(watchd)
        .map(|c| {
            let m = c.multiplexing();
            (m.protocol, m.connections, m.streams_per_connection)
        })
        .collect()
}

#[test]
fn protocols_run_side_by_side_with_etcd_multiplexed_alike() {
    use watchd_loadtest::s1::WatchProtocol::{Http1, Http2};
    let a = compare_args(&["--protocols=http1,http2", "--watchers=1000"]).expect("parses");
    let protocols = a.protocols.clone().expect("given");
    assert_eq!(protocols, [Http1, Http2]);
    let (etcd, watchd) = a.load.compare_configs_for(&protocols).expect("valid");
    assert_eq!(
        shapes(&etcd, &watchd),
        [
            ("grpc".to_string(), 10, 100),
            ("http1".to_string(), 1000, 1),
            ("http2".to_string(), 10, 100),
        ]
    );
    // HTTP/1.1 alone leaves etcd direct on --etcd-connections.
    let a = compare_args(&["--etcd-connections=8", "--watchers=1000"]).unwrap();
    let (etcd, _) = a.load.compare_configs_for(&[Http1]).expect("valid");
    assert_eq!(etcd.multiplexing().connections, 8);
    // With HTTP/2 an explicit etcd connection count would be unfair.
    let e = a.load.compare_configs_for(&[Http1, Http2]).unwrap_err();
    assert!(e.contains("--etcd-connections"), "{e}");
    // Each protocol once; --protocol and --protocols do not mix.
    let a = compare_args(&["--protocols=http2,http2"]).expect("parses");
    let e = a
        .load
        .compare_configs_for(a.protocols.as_deref().unwrap())
        .unwrap_err();
    assert!(e.contains("each once"), "{e}");
    assert!(compare_args(&["--protocols=http1", "--protocol=http2"]).is_err());
    assert!(compare_args(&["--protocols=http1,spdy"]).is_err());
    // "grpc" is etcd direct's label, not a watchd protocol.
    assert!(compare_args(&["--protocols=http1,grpc"]).is_err());
    // `s1` with etcd direct refuses the HTTP side's flags.
    let cli = Cli::try_parse_from([
        "watchd-loadtest",
        "s1",
        "--target=etcd",
        "--token=t",
        "--target-url=http://127.0.0.1:1",
    ])
    .expect("parses");
    let Command::S1(args) = cli.command else {
        panic!("not s1");
    };
    let cfg = args
        .load
        .config(watchd_loadtest::s1::Target::Etcd, args.load.protocol)
        .expect("builds");
    assert!(cfg.validate().unwrap_err().contains("not to etcd direct"));
}

#[test]
fn grpc_watchd_runs_beside_http_in_one_comparison() {
    use watchd_loadtest::endpoint::Protocol;
    use watchd_loadtest::s1::{WatchApi, WatchProtocol};
    let a =
        compare_args(&["--protocols=http1,http2,grpc-watchd", "--watchers=1000"]).expect("parses");
    let protocols = a.protocols.clone().expect("given");
    assert_eq!(
        protocols,
        [
            WatchProtocol::Http1,
            WatchProtocol::Http2,
            WatchProtocol::GrpcWatchd
        ]
    );
    let (etcd, watchd) = a.load.compare_configs_for(&protocols).expect("valid");
    assert_eq!(
        shapes(&etcd, &watchd),
        [
            ("grpc".to_string(), 10, 100),
            ("http1".to_string(), 1000, 1),
            ("http2".to_string(), 10, 100),
            ("grpc-watchd".to_string(), 10, 100),
        ]
    );
    let grpc = &watchd[2];
    assert_eq!((grpc.api, grpc.protocol), (WatchApi::Grpc, Protocol::Http2));
    assert_eq!(etcd.api, WatchApi::Http);
    // gRPC alone beside etcd: etcd multiplexed alike, --etcd-connections
    // refused as with HTTP/2.
    let a = compare_args(&["--protocol=grpc-watchd", "--watchers=250"]).unwrap();
    assert_eq!(a.load.protocol, WatchProtocol::GrpcWatchd);
    let (etcd, watchd) = a.load.compare_configs().expect("valid");
    assert_eq!(etcd.multiplexing().connections, 3);
    assert_eq!(
        watchd.multiplexing().to_string(),
        "watchd gRPC (h2c), 3 connections x <=84 streams"
    );
    let a = compare_args(&["--protocol=grpc-watchd", "--etcd-connections=2"]).unwrap();
    let e = a.load.compare_configs().unwrap_err();
    assert!(e.contains("--etcd-connections"), "{e}");
    // It needs the watchd the run starts, and --accept=protobuf needs
    // protobuf storage as over HTTP.
    let a = compare_args(&["--protocol=grpc-watchd", "--target-url=http://127.0.0.1:1"]).unwrap();
    assert!(a
        .load
        .compare_configs()
        .unwrap_err()
        .contains("--target-url"));
    let a = compare_args(&["--protocols=grpc-watchd", "--accept=protobuf"]).unwrap();
    let e = a.load.compare_configs_for(a.protocols.as_deref().unwrap());
    assert!(e.unwrap_err().contains("--storage=protobuf"));
    let a = compare_args(&["--protocols=grpc-watchd,http1,grpc-watchd"]).unwrap();
    let e = a.load.compare_configs_for(a.protocols.as_deref().unwrap());
    assert!(e.unwrap_err().contains("each once"));
    // `s1` takes it for watchd and refuses it for etcd direct.
    let parse_s1 = |target: &str| {
        let cli = Cli::try_parse_from([
            "watchd-loadtest",
            "s1",
            target,
            "--protocol=grpc-watchd",
            "--streams-per-connection=2",
            "--watchers=5",
        ])
        .expect("parses");
        let Command::S1(args) = cli.command else {
            panic!("not s1");
        };
        args
    };
    let args = parse_s1("--target=watchd");
    let cfg = args
        .load
        .config(watchd_loadtest::s1::Target::Watchd, args.load.protocol)
        .expect("builds");
    assert!(cfg.validate().is_ok());
    assert_eq!(cfg.multiplexing().connections, 3);
    let args = parse_s1("--target=etcd");
    let cfg = args
        .load
        .config(watchd_loadtest::s1::Target::Etcd, args.load.protocol)
        .expect("builds");
    assert!(cfg.validate().unwrap_err().contains("etcd direct"));
}

#[test]
fn scenario_subcommands_parse_with_their_defaults() {
    let parse = |argv: &[&str]| Cli::try_parse_from(argv).map(|c| c.command);
    let Ok(Command::S2(a)) = parse(&["watchd-loadtest", "s2", "--nodes=10", "--out=r.json"]) else {
        panic!("s2");
    };
    assert_eq!(
        (a.nodes, a.baseline_nodes, a.all_watchers, a.pods),
        (10, 50, 50, 10_000)
    );
    assert_eq!(a.common.out.as_deref(), Some("r.json".as_ref()));
    let Ok(Command::S3(a)) = parse(&["watchd-loadtest", "s3", "--accept=protobuf"]) else {
        panic!("s3");
    };
    assert_eq!((a.pods, a.concurrency, a.accept.len()), (50_000, 200, 1));
    assert!(
        matches!(parse(&["watchd-loadtest", "s4"]), Ok(Command::S4(a)) if a.watchers == 10_000)
    );
    assert!(
        matches!(parse(&["watchd-loadtest", "s5"]), Ok(Command::S5(a)) if a.http1_watchers.is_none())
    );
    assert!(
        matches!(parse(&["watchd-loadtest", "s6"]), Ok(Command::S6(a)) if a.events == 1_000_000)
    );
    assert!(
        matches!(parse(&["watchd-loadtest", "s7", "--storage=json"]), Ok(Command::S7(a)) if a.storage.len() == 1)
    );
    assert!(parse(&["watchd-loadtest", "s7", "--storage=yaml"]).is_err());
}

#[test]
fn demo_flags_parse() {
    let cli = Cli::try_parse_from([
        "watchd-loadtest",
        "demo",
        "--etcd-servers=http://a:2379,http://b:2379",
        "--namespaces=2",
        "--changes-per-second=0.5",
        "--duration=3",
        "--once",
    ])
    .expect("parses");
    let Command::Demo(args) = cli.command else {
        panic!("not demo");
    };
    let cfg = DemoConfig::from(args);
    assert_eq!(cfg.etcd_servers, ["http://a:2379", "http://b:2379"]);
    assert_eq!(cfg.etcd_prefix, "/registry");
    assert_eq!(cfg.namespaces, 2);
    assert_eq!(cfg.nodes, 4);
    assert_eq!(cfg.pods_per_namespace, 8);
    assert_eq!(cfg.configmaps_per_namespace, 3);
    assert_eq!(cfg.seed, 1);
    assert_eq!(cfg.duration, Some(Duration::from_secs(3)));
    assert!(cfg.once);
    assert_eq!(cfg.storage, Storage::Protobuf);
    assert_eq!(cfg.lease_renew_period, Duration::from_secs(10));
    assert_eq!(cfg.event_ttl, Duration::from_secs(3600));
    assert!(Cli::try_parse_from(["watchd-loadtest", "demo"]).is_err());
    let cli = Cli::try_parse_from([
        "watchd-loadtest",
        "demo",
        "--etcd-servers=a:1",
        "--lease-renew-seconds=0.25",
        "--event-ttl-seconds=60",
    ])
    .expect("parses");
    let Command::Demo(args) = cli.command else {
        panic!("not demo");
    };
    let cfg = DemoConfig::from(args);
    assert_eq!(cfg.lease_renew_period, Duration::from_millis(250));
    assert_eq!(cfg.event_ttl, Duration::from_secs(60));
    for bad in ["--lease-renew-seconds=-1", "--event-ttl-seconds=soon"] {
        assert!(
            Cli::try_parse_from(["watchd-loadtest", "demo", "--etcd-servers=a:1", bad]).is_err()
        );
    }
    let cli = Cli::try_parse_from([
        "watchd-loadtest",
        "demo",
        "--etcd-servers=a:1",
        "--storage=json",
    ])
    .expect("parses");
    let Command::Demo(args) = cli.command else {
        panic!("not demo");
    };
    assert_eq!(DemoConfig::from(args).storage, Storage::Json);
    assert!(Cli::try_parse_from([
        "watchd-loadtest",
        "demo",
        "--etcd-servers=a:1",
        "--storage=yaml"
    ])
    .is_err());
}

#[test]
fn an_informer_implies_protobuf_storage_and_asks_for_protobuf() {
    use watchd_loadtest::http::Accept;
    use watchd_loadtest::s1::Target;
    use WatchProtocol::{Http1, Http2, Informer};
    // Alone: protobuf stored, protobuf asked for, HTTPS multiplexed.
    let a = compare_args(&["--protocols=informer", "--watchers=250"]).unwrap();
    let (etcd, watchd) = a.load.compare_configs_for(&[Informer]).expect("valid");
    assert_eq!(etcd.storage, Storage::Protobuf);
    let i = &watchd[0];
    assert_eq!((i.storage, i.accept), (Storage::Protobuf, Accept::Protobuf));
    assert_eq!(i.watch_protocol(), Informer);
    let m = i.multiplexing();
    assert_eq!(
        (m.protocol.as_str(), m.connections, m.tls),
        ("informer", 3, true)
    );
    // Beside http1 and http2: every side stores protobuf, --accept (JSON
    // by default) applies to the others, etcd direct is multiplexed.
    let a = compare_args(&["--protocols=http1,http2,informer", "--watchers=1000"]).unwrap();
    let (etcd, watchd) = a
        .load
        .compare_configs_for(&[Http1, Http2, Informer])
        .expect("valid");
    assert_eq!(etcd.multiplexing().connections, 10);
    let got: Vec<(Storage, Accept)> = watchd.iter().map(|c| (c.storage, c.accept)).collect();
    assert_eq!(
        got,
        [
            (Storage::Protobuf, Accept::Json),
            (Storage::Protobuf, Accept::Json),
            (Storage::Protobuf, Accept::Protobuf)
        ]
    );
    // Without an informer the default storage stays JSON.
    let a = compare_args(&["--protocols=http1,http2"]).unwrap();
    let (_, watchd) = a.load.compare_configs_for(&[Http1, Http2]).unwrap();
    assert_eq!(watchd[0].storage, Storage::Json);
    // What contradicts it is refused, with the reason.
    let a = compare_args(&["--protocols=http1,informer", "--storage=json"]).unwrap();
    let e = a.load.compare_configs_for(&[Http1, Informer]).unwrap_err();
    assert!(e.contains("--storage=protobuf"), "{e}");
    let a = compare_args(&["--protocol=informer", "--accept=json"]).unwrap();
    let e = a.load.compare_configs_for(&[Informer]).unwrap_err();
    assert!(e.contains("an informer asks for protobuf"), "{e}");
    let a = compare_args(&["--protocols=http2,informer", "--accept=json"]).unwrap();
    assert!(a.load.compare_configs_for(&[Http2, Informer]).is_ok());
    let a = compare_args(&["--protocol=informer", "--target-url=http://127.0.0.1:1"]).unwrap();
    let e = a.load.config(Target::Watchd, Informer).unwrap().validate();
    assert!(e.unwrap_err().contains("not https://"));
    let Ok(Command::S1Saturate(_)) = Cli::try_parse_from([
        "watchd-loadtest",
        "s1-saturate",
        "--sides=floor,etcd,http1,http2,informer",
    ])
    .map(|c| c.command) else {
        panic!("informer is a side of s1-saturate");
    };
}

#[test]
fn a_kubeconfig_replaces_the_target_flags() {
    use watchd_loadtest::s1::Target;
    let dir = std::env::temp_dir().join(format!("lt-main-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config");
    std::fs::write(
        &path,
        "clusters:\n- name: a\n  cluster:\n    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\n- name: b\n  cluster:\n    server: http://127.0.0.1:8080\nusers:\n- name: u\n  user:\n    token: kc-token\ncontexts:\n- name: one\n  context: {cluster: a, user: u}\n- name: two\n  context: {cluster: b, user: u}\ncurrent-context: one\n",
    )
    .unwrap();
    let kc = format!("--kubeconfig={}", path.display());
    let a = compare_args(&[&kc, "--protocol=informer"]).unwrap();
    let c = a
        .load
        .config(Target::Watchd, WatchProtocol::Informer)
        .unwrap();
    assert_eq!(c.target_url.as_deref(), Some("https://127.0.0.1:6443"));
    assert!(c.tls.insecure_skip_verify);
    assert_eq!(c.tls.kubeconfig.as_deref(), Some(path.as_path()));
    assert!(c.validate().is_ok(), "{:?}", c.validate());
    assert!(c.multiplexing().tls);
    let a = compare_args(&[&kc, "--context=two"]).unwrap();
    let c = a.load.config(Target::Watchd, WatchProtocol::Http1).unwrap();
    assert_eq!(c.target_url.as_deref(), Some("http://127.0.0.1:8080"));
    assert!(!c.multiplexing().tls);
    // The etcd side of a comparison keeps none of it.
    let (etcd, _) = a.load.compare_configs().unwrap();
    assert!(etcd.target_url.is_none() && etcd.token.is_none());
    // Not with the flags it replaces; --context only with it.
    for clash in [
        "--target-url=http://127.0.0.1:1",
        "--token=x",
        "--ca-file=ca.pem",
        "--insecure-skip-tls-verify",
    ] {
        assert!(compare_args(&[&kc, clash]).is_err(), "{clash}");
    }
    assert!(compare_args(&["--context=two"]).is_err());
    let a = compare_args(&[&kc, "--context=three"]).unwrap();
    let e = a
        .load
        .config(Target::Watchd, WatchProtocol::Http1)
        .unwrap_err();
    assert!(e.contains("\"three\" is not among the contexts"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
