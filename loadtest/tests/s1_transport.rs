//! S1 at a tiny scale over the transports client-go uses: HTTP/2 with the
//! watchers multiplexed as streams over a few connections (h2c), and HTTPS
//! with a bearer token against a watchd serving TLS with a static token
//! file, over HTTP/2 (ALPN h2) and HTTP/1.1; as client-go informers
//! (`--protocol=informer`: HTTPS, token, RBAC, protobuf) against the watchd
//! the run sets up so, and through a kubeconfig with a client certificate;
//! and over watchd's own gRPC API, `Watch` calls multiplexed alike, objects
//! as JSON and as protobuf. Every watcher must see every write exactly
//! once: deliveries == watchers × writes.
//!
//! Each test starts its own etcd and watchd on loopback ports (killed by PID
//! when dropped); the certificate, key and token files are generated in a
//! temp dir removed at the end. The watchd binary is found or built as in
//! `s1_smoke.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use watchd_loadtest::demo::Storage;
use watchd_loadtest::endpoint::{Endpoint, Protocol, TokenSource};
use watchd_loadtest::http::Accept;
use watchd_loadtest::kubeconfig;
use watchd_loadtest::launch::{self, WatchdOptions};
use watchd_loadtest::s1::{self, informer, report, Target, WatchProtocol};
use watchd_loadtest::tls::TlsOptions;
use watchd_loadtest::transport;

#[path = "s1/support.rs"]
mod support;

use support::{assert_clean, assert_multiplexing, run, tiny_config, watchd_bin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_over_http2_multiplexed_loses_nothing() {
    let bin = watchd_bin();
    let mut cfg = tiny_config(Target::Watchd, 3, &bin);
    cfg.protocol = Protocol::Http2;
    // 5 watchers, at most 2 streams each: 3 connections.
    cfg.streams_per_connection = 2;
    let r = run(&cfg).await;
    assert_clean(&r, Target::Watchd, 40);
    assert_multiplexing(&r, ("http2", 3, 2, false));
    let v = serde_json::to_value(&r).expect("to JSON");
    assert_eq!(
        (&v["protocol"], &v["streams_per_connection"], &v["tls"]),
        (&"http2".into(), &2.into(), &false.into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_over_watchd_grpc_multiplexed_loses_nothing() {
    let bin = watchd_bin();
    for (storage, accept, secs, min_writes) in [
        (Storage::Json, Accept::Json, 3, 40),
        (Storage::Protobuf, Accept::Protobuf, 2, 30),
    ] {
        let mut cfg = tiny_config(Target::Watchd, secs, &bin);
        cfg.set_watch_protocol(WatchProtocol::GrpcWatchd);
        cfg.storage = storage;
        cfg.accept = accept;
        // 5 watchers, at most 2 Watch calls each: 3 connections.
        cfg.streams_per_connection = 2;
        let r = run(&cfg).await;
        assert_clean(&r, Target::Watchd, min_writes);
        assert!(r.backing_etcd.is_some(), "watchd's etcd is reported apart");
        assert_eq!(r.accept.as_deref(), Some(accept.name()));
        assert_eq!(r.storage, storage.name());
        assert_multiplexing(&r, ("grpc-watchd", 3, 2, false));
        let v = serde_json::to_value(&r).expect("to JSON");
        assert_eq!(
            (&v["target"], &v["protocol"]),
            (&"watchd".into(), &"grpc-watchd".into())
        );
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA and a serving certificate for 127.0.0.1 and localhost signed by it,
/// written as `ca.crt`, `server.crt` and `server.key` in `dir` (the informer
/// side's own files); with `client`, also a client certificate it signed
/// (`user.crt`, `user.key`) for that common name in the group `system:masters`.
fn write_pki(dir: &Path) {
    write_pki_with(dir, None);
}

fn write_pki_with(dir: &Path, client: Option<&str>) {
    let issuer = informer::write_pki(dir).expect("PKI");
    if let Some(cn) = client {
        let key = rcgen::KeyPair::generate().expect("client key");
        let mut user = rcgen::CertificateParams::new(Vec::<String>::new()).expect("client");
        user.distinguished_name.push(rcgen::DnType::CommonName, cn);
        user.distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        user.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = user.signed_by(&key, &issuer).expect("client certificate");
        std::fs::write(dir.join("user.crt"), cert.pem()).expect("write PEM");
        std::fs::write(dir.join("user.key"), key.serialize_pem()).expect("write PEM");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_over_https_with_a_bearer_token_loses_nothing() {
    let bin = watchd_bin();
    let root = std::env::temp_dir();
    let dir = TempDir(launch::temp_dir(&root, "tls").expect("temp dir"));
    write_pki(&dir.0);
    let token = "loadtest-0123456789abcdef";
    // kube-apiserver's token file: token,user,uid,"group1,group2".
    std::fs::write(
        dir.0.join("tokens.csv"),
        format!("{token},loadtest,uid-loadtest,\"system:masters,loadtesters\"\n"),
    )
    .expect("token file");
    std::fs::write(dir.0.join("token"), format!("{token}\n")).expect("token");
    let arg = |flag: &str, file: &str| format!("--{flag}={}", dir.0.join(file).display());
    let tls = TlsOptions {
        ca_file: Some(dir.0.join("ca.crt")),
        ..TlsOptions::default()
    };
    let token_file = TokenSource::File(dir.0.join("token"));

    let etcd = launch::start_etcd(&root).await.expect("etcd");
    let options = WatchdOptions {
        args: vec![
            arg("tls-cert-file", "server.crt"),
            arg("tls-private-key-file", "server.key"),
            arg("token-auth-file", "tokens.csv"),
        ],
        tls: Some(tls.clone()),
        token: Some(token_file.clone()),
    };
    let watchd = launch::start_watchd_with(&bin, &etcd.endpoint, &root, &options)
        .await
        .expect("watchd with TLS and a token file");
    let url = format!("https://{}", watchd.addr);
    assert_eq!(watchd.endpoint.url.base(), url);

    for (protocol, secs, min_writes) in [(Protocol::Http2, 3, 40), (Protocol::Http1, 2, 30)] {
        let mut cfg = tiny_config(Target::Watchd, secs, &bin);
        cfg.etcd_servers = Some(vec![etcd.endpoint.clone()]);
        cfg.target_url = Some(url.clone());
        cfg.server_pid = Some(watchd.proc.pid());
        cfg.tls = tls.clone();
        cfg.token = Some(token_file.clone());
        cfg.protocol = protocol;
        let r = run(&cfg).await;
        assert_clean(&r, Target::Watchd, min_writes);
        let m = &r.multiplexing;
        let want_connections = match protocol {
            Protocol::Http2 => 1,
            Protocol::Http1 => 5,
        };
        assert_eq!(
            (m.protocol.as_str(), m.connections, m.tls),
            (protocol.name(), want_connections, true)
        );
    }

    // A token watchd does not know is refused before any watch opens.
    let mut cfg = tiny_config(Target::Watchd, 1, &bin);
    cfg.etcd_servers = Some(vec![etcd.endpoint.clone()]);
    cfg.target_url = Some(url.clone());
    cfg.tls = tls.clone();
    cfg.token = Some(TokenSource::Inline("not-a-known-token".into()));
    cfg.protocol = Protocol::Http2;
    let err = s1::run(&cfg).await.expect_err("unknown token");
    assert!(err.contains("401"), "{err}");
    // So is a server the CA did not sign (a fresh CA in another dir).
    let other = TempDir(launch::temp_dir(&root, "tls-other").expect("temp dir"));
    write_pki(&other.0);
    cfg.token = Some(token_file);
    cfg.tls.ca_file = Some(other.0.join("ca.crt"));
    let err = s1::run(&cfg).await.expect_err("untrusted server");
    assert!(err.contains("TLS handshake"), "{err}");
    drop(watchd);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_as_informers_loses_nothing() {
    let bin = watchd_bin();
    let mut cfg = tiny_config(Target::Watchd, 3, &bin);
    cfg.storage = Storage::Protobuf;
    cfg.set_watch_protocol(WatchProtocol::Informer);
    // 5 watchers, at most 2 streams each: 3 TLS connections.
    cfg.streams_per_connection = 2;
    let r = run(&cfg).await;
    assert_clean(&r, Target::Watchd, 40);
    assert_multiplexing(&r, ("informer", 3, 2, true));
    assert_eq!(
        (r.storage.as_str(), r.accept.as_deref()),
        ("protobuf", Some("protobuf"))
    );
    let v = serde_json::to_value(&r).expect("to JSON");
    assert_eq!(
        (&v["protocol"], &v["tls"], &v["accept"]),
        (&"informer".into(), &true.into(), &"protobuf".into())
    );
    // The tokio workers of both sides are recorded: this test's runtime
    // has 2; the watchd the run started, tokio's default.
    let w = &v["machine"]["tokio_workers"];
    assert_eq!(w["generator"], 2, "{w}");
    assert!(w["watchd"].as_u64().unwrap_or(0) >= 1, "{w}");
    assert!(report::single_table(&r).contains("tokio workers: generator 2, watchd"));
    // The generator's own CPU per delivery, beside the server's.
    assert!(r.generator.cpu_s_per_million.is_some(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_informer_s_watchd_serves_tls_and_lets_its_user_read_configmaps_only() {
    let bin = watchd_bin();
    let root = std::env::temp_dir();
    let etcd = launch::start_etcd(&root).await.expect("etcd");
    let (watchd, creds) = informer::start_watchd(&bin, &etcd.endpoint, &root, "/registry", &[])
        .await
        .expect("the informer's watchd");
    let endpoint = &watchd.endpoint;
    assert_eq!(endpoint.url.base(), format!("https://{}", watchd.addr));
    let get = |endpoint: Arc<Endpoint>, path: &'static str| async move {
        transport::get_once(&endpoint, Protocol::Http2, path, Duration::from_secs(10))
            .await
            .map(|(status, _)| status)
            .expect(path)
    };
    // RBAC is on: configmaps, yes; secrets and pods, no; the health
    // endpoints for anyone authenticated.
    assert_eq!(get(endpoint.clone(), "/api/v1/configmaps").await, 200);
    assert_eq!(
        get(
            endpoint.clone(),
            "/api/v1/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1"
        )
        .await,
        200
    );
    assert_eq!(get(endpoint.clone(), "/api/v1/secrets").await, 403);
    assert_eq!(
        get(endpoint.clone(), "/api/v1/namespaces/a/pods").await,
        403
    );
    assert_eq!(get(endpoint.clone(), "/readyz").await, 200);
    // Without the token: 401.
    let anonymous = Endpoint::new(&endpoint.url.base(), &creds.tls, None).expect("endpoint");
    assert_eq!(get(Arc::new(anonymous), "/api/v1/configmaps").await, 401);
    // The role is stored where kube-apiserver keeps it.
    let mut kv = etcd_client::Client::connect([etcd.endpoint.as_str()], None)
        .await
        .expect("etcd client");
    let role = kv
        .get(
            format!("/registry/clusterroles/{}", informer::CLUSTER_ROLE),
            None,
        )
        .await
        .expect("get");
    let role: serde_json::Value = serde_json::from_slice(role.kvs()[0].value()).expect("JSON role");
    assert_eq!(role["rules"][0]["resources"][0], "configmaps");
    let dir = creds.dir().to_path_buf();
    assert!(dir.join("tokens.csv").is_file());
    drop(watchd);
    drop(creds);
    assert!(!dir.exists(), "the PKI dir is removed");
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_through_a_kubeconfig_with_a_client_certificate_loses_nothing() {
    let bin = watchd_bin();
    let root = std::env::temp_dir();
    let dir = TempDir(launch::temp_dir(&root, "kubeconfig").expect("temp dir"));
    let pki = dir.0.join("pki");
    std::fs::create_dir_all(&pki).expect("pki dir");
    write_pki_with(&pki, Some("loadtest-admin"));
    // The readiness probe authenticates with a token (a superuser too).
    let token = "probe-0123456789abcdef";
    std::fs::write(
        pki.join("tokens.csv"),
        format!("{token},probe,uid-probe,\"system:masters\"\n"),
    )
    .expect("token file");
    let etcd = launch::start_etcd(&root).await.expect("etcd");
    let arg = |flag: &str, file: &str| format!("--{flag}={}", pki.join(file).display());
    let options = WatchdOptions {
        args: vec![
            arg("tls-cert-file", "server.crt"),
            arg("tls-private-key-file", "server.key"),
            arg("client-ca-file", "ca.crt"),
            arg("token-auth-file", "tokens.csv"),
            "--authorization-mode=RBAC".into(),
        ],
        tls: Some(TlsOptions {
            ca_file: Some(pki.join("ca.crt")),
            ..TlsOptions::default()
        }),
        token: Some(TokenSource::Inline(token.into())),
    };
    let watchd = launch::start_watchd_with(&bin, &etcd.endpoint, &root, &options)
        .await
        .expect("watchd with client certificates");
    // Paths relative to the kubeconfig's directory; two contexts.
    let kubeconfig = dir.0.join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://{}\n    certificate-authority: pki/ca.crt\nusers:\n- name: admin\n  user:\n    client-certificate: pki/user.crt\n    client-key: pki/user.key\n- name: nobody\n  user:\n    token: not-a-known-token\ncontexts:\n- name: admin\n  context: {{cluster: local, user: admin}}\n- name: nobody\n  context: {{cluster: local, user: nobody}}\ncurrent-context: admin\n",
            watchd.addr
        ),
    )
    .expect("kubeconfig");
    let from = |context: Option<&str>| {
        let k = kubeconfig::load(&kubeconfig, context).expect("kubeconfig");
        let mut cfg = tiny_config(Target::Watchd, 3, &bin);
        cfg.etcd_servers = Some(vec![etcd.endpoint.clone()]);
        cfg.server_pid = Some(watchd.proc.pid());
        cfg.target_url = Some(k.server);
        cfg.tls = k.tls;
        cfg.token = k.token;
        cfg.storage = Storage::Protobuf;
        cfg.set_watch_protocol(WatchProtocol::Informer);
        cfg
    };
    // Informers authenticated by the client certificate alone.
    let cfg = from(None);
    assert!(cfg.token.is_none() && cfg.tls.client_cert.is_some());
    let r = run(&cfg).await;
    assert_clean(&r, Target::Watchd, 40);
    assert_multiplexing(&r, ("informer", 1, 5, true));
    assert_eq!(
        r.machine.tokio_workers.watchd, None,
        "a given watchd's workers are not known"
    );
    // The other context's user is not known to watchd.
    let err = s1::run(&from(Some("nobody")))
        .await
        .expect_err("unknown token");
    assert!(err.contains("401"), "{err}");
    drop(watchd);
    drop(etcd);
}
