//! Command-line entry point of `watchd-loadtest`.
//!
//! ```text
//! watchd-loadtest demo --etcd-servers=http://127.0.0.1:2379 [--once] ...
//! watchd-loadtest s1 --target=watchd|etcd --watchers=W --writes-per-sec=E --duration=S
//! watchd-loadtest s1-compare --watchers=W --writes-per-sec=E --duration=S [--runs=3]
//! watchd-loadtest read-latency --requests=N [--objects=K]
//! ```
//!
//! Logs go to stderr; set `RUST_LOG=debug` to see every change.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tracing::{error, info, warn};
use tracing_subscriber::EnvFilter;
use watchd_loadtest::demo::{self, DemoConfig, Storage};

mod scenarios;
use scenarios::{ReadLatencyArgs, S1Args, S1CompareArgs};

/// Load and demo data generator for watchd.
#[derive(Debug, Parser)]
#[command(name = "watchd-loadtest", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a realistic demo cluster into etcd and keep it changing.
    Demo(DemoArgs),
    /// S1 broadcast: W watchers of every ConfigMap while a writer puts E/s.
    S1(S1Args),
    /// S1 against etcd direct and watchd in one invocation, side by side.
    #[command(name = "s1-compare")]
    S1Compare(S1CompareArgs),
    /// Latency a consistent list adds over resourceVersion=0 on an idle cache.
    ReadLatency(ReadLatencyArgs),
}

/// Flags of the `demo` subcommand.
#[derive(Debug, Args)]
struct DemoArgs {
    /// etcd endpoints, comma separated (http://host:port).
    #[arg(long, value_delimiter = ',', required = true)]
    etcd_servers: Vec<String>,
    /// Key prefix kube-apiserver uses (its --etcd-prefix).
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// Number of demo-N namespaces (default, kube-system, kube-public and
    /// kube-node-lease are always created).
    #[arg(long, default_value_t = 5)]
    namespaces: usize,
    /// Number of node-N nodes.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// Pods in each demo namespace.
    #[arg(long, default_value_t = 8)]
    pods_per_namespace: usize,
    /// Config maps in each demo namespace.
    #[arg(long, default_value_t = 3)]
    configmaps_per_namespace: usize,
    /// Random changes per second after the fill (0 = none); the status,
    /// endpoint and event writes that follow a change come on top.
    #[arg(long, default_value_t = 5.0)]
    changes_per_second: f64,
    /// Renew every Lease (one per node, as its kubelet does, and the leader
    /// elections') once per this many seconds, spread evenly (0 = never).
    #[arg(long, default_value = "10", value_parser = seconds)]
    lease_renew_seconds: Duration,
    /// Seconds Events live: the TTL of the etcd lease they are written with
    /// (kube-apiserver's --event-ttl).
    #[arg(long, default_value = "3600", value_parser = seconds)]
    event_ttl_seconds: Duration,
    /// Seed for names, uids and the choice of changes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds (0 = run until Ctrl-C).
    #[arg(long, default_value_t = 0)]
    duration: u64,
    /// Fill the cluster, then exit without making changes.
    #[arg(long)]
    once: bool,
    /// How objects are stored: `protobuf` (as kube-apiserver stores built-in kinds) or
    /// `json`.
    #[arg(long, default_value = "protobuf")]
    storage: Storage,
}

impl From<DemoArgs> for DemoConfig {
    fn from(a: DemoArgs) -> Self {
        Self {
            etcd_servers: a.etcd_servers,
            etcd_prefix: a.etcd_prefix,
            namespaces: a.namespaces,
            nodes: a.nodes,
            pods_per_namespace: a.pods_per_namespace,
            configmaps_per_namespace: a.configmaps_per_namespace,
            changes_per_second: a.changes_per_second,
            lease_renew_period: a.lease_renew_seconds,
            event_ttl: a.event_ttl_seconds,
            seed: a.seed,
            duration: (a.duration > 0).then(|| Duration::from_secs(a.duration)),
            once: a.once,
            storage: a.storage,
        }
    }
}

/// Parses a non-negative number of seconds (fractions allowed).
fn seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is not a duration in seconds"))
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM; never resolves if no handler
/// could be installed.
async fn shutdown_signal() {
    let ctrl_c = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => info!("received Ctrl-C, stopping"),
            Err(err) => {
                warn!(error = %err, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
                info!("received SIGTERM, stopping");
            }
            Err(err) => {
                warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    match cli.command {
        Command::S1(args) => scenarios::run_or_stop(scenarios::s1(args), shutdown_signal()).await,
        Command::S1Compare(args) => {
            scenarios::run_or_stop(scenarios::s1_compare(args), shutdown_signal()).await
        }
        Command::ReadLatency(args) => {
            scenarios::run_or_stop(scenarios::read_latency(args), shutdown_signal()).await
        }
        Command::Demo(args) => {
            let cfg = DemoConfig::from(args);
            match demo::run(&cfg, shutdown_signal()).await {
                Ok(_) => ExitCode::SUCCESS,
                Err(err) => {
                    error!("{err}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
                Ok(Command::S1(a)) => Ok((a.load.storage, a.load.accept)),
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
                Cli::try_parse_from(["watchd-loadtest", "demo", "--etcd-servers=a:1", bad])
                    .is_err()
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
}
