//! Secure serving with real clients: watchd with TLS, client certificates, a static token
//! file and RBAC read from its own cache; kubectl 1.33 with a client-certificate
//! kubeconfig and with a token kubeconfig, and curl over HTTP/2.

mod support;

use std::path::Path;
use std::process::Command;

use support::kube::put_object_text;
use support::pki::{admin_probe, curl, kubectl, stdout_ok, Pki};
use support::{storage_tests, Etcd, Watchd};

fn pod(ns: &str, name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}","uid":"u-{ns}-{name}","creationTimestamp":"2026-01-02T03:04:05Z"}},"spec":{{"nodeName":"node-1","containers":[{{"name":"c","image":"nginx"}}]}},"status":{{"phase":"Running"}}}}"#
    )
}

/// RBAC objects as a cluster stores them: discovery for every authenticated user, alice
/// and the ServiceAccount ns1/builder may read pods in ns1 only, group `viewers` may read
/// pods everywhere.
const RBAC: &[(&str, &str)] = &[
    (
        "/registry/serviceaccounts/ns1/builder",
        r#"{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"builder","namespace":"ns1","uid":"sa-uid","creationTimestamp":"2026-01-01T00:00:00Z"}}"#,
    ),
    (
        "/registry/rolebindings/ns1/builder-reads-pods",
        r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"builder-reads-pods","namespace":"ns1","uid":"rb2","creationTimestamp":"2026-01-01T00:00:00Z"},"subjects":[{"kind":"ServiceAccount","name":"builder","namespace":"ns1"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"pod-reader"}}"#,
    ),
    (
        "/registry/clusterroles/system:discovery",
        r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"system:discovery","uid":"cr1","creationTimestamp":"2026-01-01T00:00:00Z"},"rules":[{"verbs":["get"],"nonResourceURLs":["/api","/api/*","/apis","/apis/*","/healthz","/livez","/openapi","/openapi/*","/readyz","/version","/version/"]}]}"#,
    ),
    (
        "/registry/clusterrolebindings/system:discovery",
        r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"system:discovery","uid":"crb1","creationTimestamp":"2026-01-01T00:00:00Z"},"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"system:authenticated"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:discovery"}}"#,
    ),
    (
        "/registry/roles/ns1/pod-reader",
        r#"{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"pod-reader","namespace":"ns1","uid":"r1","creationTimestamp":"2026-01-01T00:00:00Z"},"rules":[{"verbs":["get","list","watch"],"apiGroups":[""],"resources":["pods"]}]}"#,
    ),
    (
        "/registry/rolebindings/ns1/alice-reads-pods",
        r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"alice-reads-pods","namespace":"ns1","uid":"rb1","creationTimestamp":"2026-01-01T00:00:00Z"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"alice"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"pod-reader"}}"#,
    ),
    (
        "/registry/clusterroles/pod-viewer",
        r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"pod-viewer","uid":"cr2","creationTimestamp":"2026-01-01T00:00:00Z"},"rules":[{"verbs":["get","list","watch"],"apiGroups":[""],"resources":["pods"]}]}"#,
    ),
    (
        "/registry/clusterrolebindings/viewers",
        r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"viewers","uid":"crb2","creationTimestamp":"2026-01-01T00:00:00Z"},"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"viewers"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"pod-viewer"}}"#,
    ),
];

/// A FIFO at `path` and its read end, opened without blocking and not read yet: watchd's
/// open for writing succeeds, and its writes stall once the pipe (64 KiB) is full.
fn stalled_fifo(path: &Path) -> std::fs::File {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path only.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .expect("the FIFO's read end")
}

/// Reads `fifo` into `text` until `done(text)` or `wait` passed.
fn drain_fifo(
    fifo: &mut std::fs::File,
    text: &mut String,
    wait: std::time::Duration,
    done: impl Fn(&str) -> bool,
) {
    use std::io::Read as _;
    let deadline = std::time::Instant::now() + wait;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match fifo.read(&mut buf) {
            Ok(n) if n > 0 => {
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                continue;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("read the audit FIFO: {e}"),
        }
        if done(text) || std::time::Instant::now() > deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The audit line's requestURI of the `i`th request of the audit tests.
fn audited_uri(i: usize) -> String {
    format!("\"requestURI\":\"/api/v1/namespaces/audit-{i}/configmaps\"")
}

/// Sends `n` list requests at once, each on its own connection.
fn audited_requests(
    base: &str,
    n: usize,
) -> tokio::task::JoinSet<Result<support::http::Response, String>> {
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..n {
        let url = format!("{base}/api/v1/namespaces/audit-{i}/configmaps");
        requests.spawn(async move {
            support::http::try_request("GET", &url, &[], bytes::Bytes::new()).await
        });
    }
    requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_file_is_created_0600() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let etcd = Etcd::start();
    let audit = format!("--audit-log-path={}", path.display());
    let w = Watchd::start(&etcd.client_url(), &[&audit]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "audit log created with mode {mode:o}");
    let r = support::http::get(
        &format!("{}/api/v1/namespaces/audit-0/configmaps", w.base_url()),
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&path)
        .unwrap_or_default()
        .contains(&audited_uri(0))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the request's line reaches the file"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_log_blocking_mode_loses_no_line_while_its_writer_is_stalled() {
    const N: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let fifo_path = dir.path().join("audit.fifo");
    let mut fifo = stalled_fifo(&fifo_path);
    let etcd = Etcd::start();
    let audit = format!("--audit-log-path={}", fifo_path.display());
    // Blocking is the default mode.
    let w = Watchd::start(
        &etcd.client_url(),
        &[&audit, "--audit-log-batch-buffer-size=4"],
    );
    let mut requests = audited_requests(&w.base_url(), N);
    // The pipe, the writer's buffer and the queue take a few hundred lines at most; the
    // other requests wait for room.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let mut answered = 0;
    while let Some(r) = requests.try_join_next() {
        assert_eq!(r.unwrap().expect("an answer").status, 200);
        answered += 1;
    }
    assert!(
        answered < N,
        "all {N} requests were answered while the audit log could take no line"
    );
    // Once the file is read, every request is answered and every line arrives, once.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        drain_fifo(
            &mut fifo,
            &mut text,
            std::time::Duration::from_secs(60),
            |t| (0..N).all(|i| t.contains(&audited_uri(i))),
        );
        text
    });
    while let Some(r) = requests.join_next().await {
        let r = r.unwrap().expect("answered once the audit log is read");
        assert_eq!(r.status, 200);
    }
    let text = reader.join().unwrap();
    for i in 0..N {
        assert_eq!(
            text.matches(&audited_uri(i)).count(),
            1,
            "request {i}'s audit line, once ({answered} of {N} were answered while stalled)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_log_batch_mode_drops_and_counts_lines_while_its_writer_is_stalled() {
    const N: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let fifo_path = dir.path().join("audit.fifo");
    let mut fifo = stalled_fifo(&fifo_path);
    let etcd = Etcd::start();
    let audit = format!("--audit-log-path={}", fifo_path.display());
    let w = Watchd::start(
        &etcd.client_url(),
        &[
            &audit,
            "--audit-log-mode=batch",
            "--audit-log-batch-buffer-size=4",
        ],
    );
    // Every request is answered though the audit log takes no line.
    let mut requests = audited_requests(&w.base_url(), N);
    while let Some(r) = requests.join_next().await {
        let r = r.unwrap().expect("answered while the audit log is stalled");
        assert_eq!(r.status, 200);
    }
    let metrics = support::http::get(&format!("{}/metrics", w.base_url()), &[])
        .await
        .text();
    let dropped = support::kube::metric(&metrics, "watchd_audit_events_dropped_total", &[])
        .map(|v| v as usize)
        .unwrap_or_else(|| panic!("no watchd_audit_events_dropped_total in\n{metrics}"));
    assert!(dropped > 0, "lines were dropped: the queue was full");
    // What was not dropped arrives once the file is read: kept + dropped = requests.
    let kept = |t: &str| (0..N).filter(|&i| t.contains(&audited_uri(i))).count();
    let mut text = String::new();
    drain_fifo(
        &mut fifo,
        &mut text,
        std::time::Duration::from_secs(30),
        |t| kept(t) + dropped >= N,
    );
    drain_fifo(
        &mut fifo,
        &mut text,
        std::time::Duration::from_secs(1),
        |_| false,
    );
    assert_eq!(kept(&text) + dropped, N, "{dropped} lines dropped");
    for i in 0..N {
        assert!(text.matches(&audited_uri(i)).count() <= 1, "line {i} once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_over_tls_with_certificates_and_tokens_as_rbac_allows() {
    let pki = Pki::new();
    pki.issue("alice", "alice", Some("dev"), false);
    pki.issue("admin", "root", Some("system:masters"), false);
    pki.issue("proxy", "front-proxy-client", None, false);
    std::fs::write(
        pki.path("tokens.csv"),
        "bob-token,bob,uid-bob,\"viewers\"\n",
    )
    .unwrap();
    let sa_key = rcgen::KeyPair::generate().unwrap();
    std::fs::write(pki.path("sa.pub"), sa_key.public_key_pem()).unwrap();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for (ns, name) in [("ns1", "p1"), ("ns2", "p2")] {
        put_object_text(
            &mut kv,
            &format!("/registry/pods/{ns}/{name}"),
            &pod(ns, name),
        )
        .await;
    }
    for (key, json) in RBAC {
        put_object_text(&mut kv, key, json).await;
    }
    let args = [
        pki.arg("tls-cert-file", "server.crt"),
        pki.arg("tls-private-key-file", "server.key"),
        pki.arg("client-ca-file", "ca.crt"),
        pki.arg("token-auth-file", "tokens.csv"),
        pki.arg("service-account-key-file", "sa.pub"),
        // One CA for users and the front proxy here; the allowed name tells them apart.
        pki.arg("requestheader-client-ca-file", "ca.crt"),
        "--requestheader-allowed-names=front-proxy-client".to_string(),
        "--requestheader-username-headers=X-Remote-User".to_string(),
        "--requestheader-group-headers=X-Remote-Group".to_string(),
        format!("--service-account-issuer={SA_ISSUER}"),
        "--authorization-mode=RBAC".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let watchd = Watchd::start_with_probe(&etcd.client_url(), &args, Some(admin_probe(&pki)));
    let server = format!("https://127.0.0.1:{}", watchd.http_addr().port());
    let cache = tempfile::tempdir().unwrap();

    // A client certificate: alice reads pods in ns1, and is refused in ns2 with
    // kube-apiserver's wording.
    let alice = pki.kubeconfig("alice.kubeconfig", &server, Some("alice"), None);
    let out = kubectl(
        &alice,
        cache.path(),
        &["get", "pods", "-n", "ns1", "-o", "name"],
    );
    assert_eq!(stdout_ok(&out, "alice lists ns1").trim(), "pod/p1");
    let out = kubectl(&alice, cache.path(), &["get", "pods", "-n", "ns2"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "ns2""#),
        "{err}"
    );
    let out = kubectl(
        &alice,
        cache.path(),
        &[
            "get",
            "pod",
            "p1",
            "-n",
            "ns1",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    assert_eq!(stdout_ok(&out, "alice gets p1"), "u-ns1-p1");

    // A bearer token from the token file: bob's group may read pods everywhere, not
    // nodes.
    let bob = pki.kubeconfig("bob.kubeconfig", &server, None, Some("bob-token"));
    let out = kubectl(&bob, cache.path(), &["get", "pods", "-A", "-o", "name"]);
    assert_eq!(stdout_ok(&out, "bob lists all").trim(), "pod/p1\npod/p2");
    let out = kubectl(&bob, cache.path(), &["get", "nodes"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope"#),
        "{err}"
    );

    kube_rs_reads_with_the_token_kubeconfig(&bob).await;

    // No credentials and a wrong token: 401 with kube-apiserver's Status.
    let ca = pki.path("ca.crt");
    let ca = ca.to_str().unwrap();
    let url = format!("{server}/api/v1/pods");
    for extra in [&[][..], &["-H", "Authorization: Bearer nope"][..]] {
        let mut args = vec!["--cacert", ca, url.as_str()];
        args.extend_from_slice(extra);
        let out = curl(&args);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(status["code"], 401, "{status}");
        assert_eq!(status["reason"], "Unauthorized");
        assert_eq!(status["message"], "Unauthorized");
    }

    // HTTP/2 by ALPN.
    let (cert, key) = (pki.path("admin.crt"), pki.path("admin.key"));
    let out = curl(&[
        "--http2",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version} %{http_code}",
        "--cacert",
        ca,
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2 200");

    front_proxy_headers_are_trusted_only_from_the_front_proxy(&pki, &url);
    python_reads_with_a_token(&pki, &server).await;
    grpc_is_secured_the_same_way(&pki, &watchd).await;

    // A bound ServiceAccount token, verified with the public key and the cache: valid
    // while its ServiceAccount and pod exist.
    let claims = serde_json::json!({
        "iss": SA_ISSUER, "aud": [SA_ISSUER], "sub": "system:serviceaccount:ns1:builder",
        "iat": now() - 10, "nbf": now() - 10, "exp": now() + 3600,
        "kubernetes.io": {"namespace": "ns1", "serviceaccount": {"name": "builder", "uid": "sa-uid"},
                          "pod": {"name": "p1", "uid": "u-ns1-p1"}},
    });
    let signer = jsonwebtoken::EncodingKey::from_ec_pem(sa_key.serialize_pem().as_bytes()).unwrap();
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
        &claims,
        &signer,
    )
    .unwrap();
    let sa = pki.kubeconfig("sa.kubeconfig", &server, None, Some(&token));
    let out = kubectl(
        &sa,
        cache.path(),
        &["get", "pods", "-n", "ns1", "-o", "name"],
    );
    assert_eq!(
        stdout_ok(&out, "the service account lists ns1").trim(),
        "pod/p1"
    );
    etcd_delete(&mut kv, "/registry/pods/ns1/p1").await;
    let refused = support::poll_until(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(100),
        || {
            let out = kubectl(&sa, cache.path(), &["get", "pods", "-n", "ns1"]);
            String::from_utf8_lossy(&out.stderr)
                .contains("Unauthorized")
                .then_some(())
        },
    );
    assert!(
        refused.is_some(),
        "a token bound to a deleted pod is refused"
    );
}

const SA_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn etcd_delete(kv: &mut etcd_client::Client, key: &str) {
    kv.delete(key, None).await.expect("etcd delete");
}

/// `X-Remote-User` names the user only on a connection with the front proxy's
/// certificate; from alice's it is ignored (alice stays alice).
fn front_proxy_headers_are_trusted_only_from_the_front_proxy(pki: &Pki, url: &str) {
    let get = |cert: &str| {
        let (ca, crt, key) = (
            pki.path("ca.crt"),
            pki.path(&format!("{cert}.crt")),
            pki.path(&format!("{cert}.key")),
        );
        let out = curl(&[
            "--cacert",
            ca.to_str().unwrap(),
            "--cert",
            crt.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "-H",
            "X-Remote-User: bob",
            "-H",
            "X-Remote-Group: viewers",
            url,
        ]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let via_proxy = get("proxy");
    assert_eq!(via_proxy["kind"], "PodList", "{via_proxy}");
    assert_eq!(via_proxy["items"].as_array().unwrap().len(), 2);
    let spoofed = get("alice");
    assert_eq!(spoofed["code"], 403, "{spoofed}");
    assert!(
        spoofed["message"]
            .as_str()
            .unwrap()
            .contains(r#"User "alice""#),
        "{spoofed}"
    );
}

/// kube-rs (rustls) from the same kubeconfig kubectl used: bob's pods, and a refused
/// list as the Status kube-apiserver would send.
async fn kube_rs_reads_with_the_token_kubeconfig(kubeconfig: &Path) {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Api, ListParams};
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config from kubeconfig");
    let client = kube::Client::try_from(config).expect("kube client");
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("bob lists pods with kube-rs");
    let names: Vec<_> = pods
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["p1", "p2"]);
    let err = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert_eq!(status.reason, "Forbidden", "{status:?}");
        }
        other => panic!("expected a 403 Status, got {other:?}"),
    }
}

/// The official Python client over https with bob's token: his pods, and the Status of
/// a refused list as its ApiException.
async fn python_reads_with_a_token(pki: &Pki, server: &str) {
    use support::clients::{python_command, ClientProcess};
    let wait = std::time::Duration::from_secs(60);
    let ca = pki.path("ca.crt");
    let cmd = python_command(
        "python_client.py",
        &[
            "secure-list",
            server,
            "ns1",
            "bob-token",
            ca.to_str().unwrap(),
        ],
    );
    let mut client = ClientProcess::spawn("python_client.py", cmd);
    let (list, _) = client.expect_op("secure_list", wait).await;
    let (forbidden, _) = client.expect_op("forbidden", wait).await;
    client.expect_op("done", wait).await;
    client.finish(wait).await;
    assert_eq!(list["type"], "V1PodList", "{list}");
    assert_eq!(list["items"][0]["name"], "p1", "{list}");
    assert_eq!(forbidden["status"], 403, "{forbidden}");
    assert_eq!(forbidden["body"]["reason"], "Forbidden", "{forbidden}");
    assert_eq!(
        forbidden["body"]["message"],
        r#"nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope"#
    );
    assert_eq!(forbidden["body"]["details"]["kind"], "nodes", "{forbidden}");
}

/// The gRPC address: the same TLS, authenticators and authorization.
async fn grpc_is_secured_the_same_way(pki: &Pki, watchd: &Watchd) {
    use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
    use watchd::api::grpc::pb::watchd_client::WatchdClient;
    use watchd::api::grpc::pb::{Collection, ListRequest};

    let read = |name: &str| std::fs::read(pki.path(name)).unwrap();
    let url = format!("https://127.0.0.1:{}", watchd.grpc_addr().port());
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read("ca.crt")))
        .domain_name("localhost");
    let list = |ns: &str| ListRequest {
        collection: Some(Collection {
            version: "v1".into(),
            resource: "pods".into(),
            namespace: ns.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    // A client that connects and never starts its handshake holds up no other: the
    // calls below are answered while the server still waits for it (up to 10 s).
    let mut stalled = std::net::TcpStream::connect(watchd.grpc_addr()).unwrap();
    let channel = Channel::from_shared(url.clone())
        .unwrap()
        .tls_config(tls.clone())
        .unwrap()
        .connect()
        .await
        .expect("gRPC over TLS");
    let mut anonymous = WatchdClient::new(channel.clone());
    let e = anonymous.list(list("")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    stalled.set_nonblocking(true).unwrap();
    match std::io::Read::read(&mut stalled, &mut [0u8; 1]) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the stalled handshake ended before the call was answered: {other:?}"),
    }
    drop(stalled);

    let mut req = tonic::Request::new(list(""));
    req.metadata_mut()
        .insert("authorization", "Bearer bob-token".parse().unwrap());
    let pods = anonymous
        .list(req)
        .await
        .expect("bob lists pods")
        .into_inner();
    assert_eq!(pods.items.len(), 2);

    let alice = Channel::from_shared(url)
        .unwrap()
        .tls_config(tls.identity(Identity::from_pem(read("alice.crt"), read("alice.key"))))
        .unwrap()
        .connect()
        .await
        .expect("gRPC with a client certificate");
    let mut alice = WatchdClient::new(alice);
    let pods = alice
        .list(list("ns1"))
        .await
        .expect("alice lists ns1")
        .into_inner();
    assert_eq!(pods.items.len(), 1);
    let e = alice.list(list("ns2")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let status: serde_json::Value = serde_json::from_slice(e.details()).unwrap();
    assert_eq!(status["reason"], "Forbidden");

    // Calls across collections are allowed only if every collection is.
    use watchd::api::grpc::pb::{
        ListResourcesRequest, Selection, SnapshotRequest, WatchManyRequest,
    };
    let selections = |namespaces: &[&str]| -> Vec<Selection> {
        namespaces
            .iter()
            .map(|ns| Selection {
                collection: list(ns).collection,
                ..Default::default()
            })
            .collect()
    };
    let snapshot = alice
        .snapshot(SnapshotRequest {
            selections: selections(&["ns1"]),
            ..Default::default()
        })
        .await
        .expect("alice's snapshot of ns1")
        .into_inner();
    assert_eq!(snapshot.items.len(), 1);
    let e = alice
        .snapshot(SnapshotRequest {
            selections: selections(&["ns1", "ns2"]),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let e = alice
        .watch_many(WatchManyRequest {
            selections: selections(&["ns2", "ns1"]),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let e = anonymous
        .list_resources(ListResourcesRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    let resources = alice
        .list_resources(ListResourcesRequest {})
        .await
        .expect("alice lists resources")
        .into_inner();
    assert!(resources.resources.iter().any(|r| r.resource == "pods"));
}

#[test]
fn a_public_address_without_tls_and_authentication_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_watchd"))
        .args([
            "serve",
            "--etcd-servers=http://127.0.0.1:1",
            "--http-address=0.0.0.0:0",
            "--grpc-address=127.0.0.1:0",
        ])
        .output()
        .expect("run watchd");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-cert-file"), "{err}");
    assert!(err.contains("--insecure-allow-any-address"), "{err}");
}

/// `curl -N` watching `url` with the client certificate `cert` (or the bearer `token`):
/// the process and a channel of its output lines.
fn watch_lines(
    pki: &Pki,
    url: &str,
    cert: Option<&str>,
    token: Option<&str>,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-N", "--max-time", "60", "--cacert"])
        .arg(pki.path("ca.crt"));
    if let Some(c) = cert {
        cmd.arg("--cert")
            .arg(pki.path(&format!("{c}.crt")))
            .arg("--key")
            .arg(pki.path(&format!("{c}.key")));
    }
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let mut child = cmd
        .arg(url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn curl");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn next_json(rx: &std::sync::mpsc::Receiver<String>, what: &str) -> serde_json::Value {
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(15))
        .unwrap_or_else(|e| panic!("{what}: no line ({e})"));
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"))
}

/// alice's pod watch, no longer allowed: one 403 ERROR event in kube-apiserver's words,
/// then the end of the stream.
fn alice_watch_ends_forbidden(lines: &std::sync::mpsc::Receiver<String>, what: &str) {
    let ev = next_json(lines, what);
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 403, "{ev}");
    assert!(
        ev["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"pods is forbidden: User "alice" cannot watch resource "pods""#),
        "{ev}"
    );
    assert_eq!(
        lines.recv_timeout(std::time::Duration::from_secs(10)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected),
        "the stream ends after the ERROR event"
    );
}

/// A gRPC watch of pods in `ns` (all namespaces when empty) as the client certificate
/// `cert` or with the bearer `token`.
async fn grpc_watch_call(
    pki: &Pki,
    watchd: &Watchd,
    cert: Option<&str>,
    token: Option<&str>,
    ns: &str,
) -> Result<tonic::Streaming<watchd::api::grpc::pb::WatchResponse>, tonic::Status> {
    use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
    use watchd::api::grpc::pb::watchd_client::WatchdClient;
    use watchd::api::grpc::pb::{Collection, WatchRequest};
    let read = |name: &str| std::fs::read(pki.path(name)).unwrap();
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read("ca.crt")))
        .domain_name("localhost");
    if let Some(c) = cert {
        tls = tls.identity(Identity::from_pem(
            read(&format!("{c}.crt")),
            read(&format!("{c}.key")),
        ));
    }
    let channel = Channel::from_shared(format!("https://127.0.0.1:{}", watchd.grpc_addr().port()))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .expect("gRPC over TLS");
    let mut req = tonic::Request::new(WatchRequest {
        collection: Some(Collection {
            version: "v1".into(),
            resource: "pods".into(),
            namespace: ns.into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    Ok(WatchdClient::new(channel).watch(req).await?.into_inner())
}

/// [`grpc_watch_call`], opened and past its first ADDED event.
async fn grpc_watch(
    pki: &Pki,
    watchd: &Watchd,
    cert: Option<&str>,
    token: Option<&str>,
    ns: &str,
) -> tonic::Streaming<watchd::api::grpc::pb::WatchResponse> {
    let mut stream = grpc_watch_call(pki, watchd, cert, token, ns)
        .await
        .expect("gRPC watch");
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), stream.message())
        .await
        .expect("a first gRPC message")
        .unwrap()
        .unwrap();
    assert_eq!(
        first.events[0].r#type,
        watchd::api::grpc::pb::EventType::Added as i32
    );
    stream
}

/// The Status of the next ERROR event of a gRPC watch.
async fn grpc_error_event(
    stream: &mut tonic::Streaming<watchd::api::grpc::pb::WatchResponse>,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let msg = tokio::time::timeout_at(deadline, stream.message())
            .await
            .expect("an ERROR event in time")
            .unwrap()
            .expect("the stream is open");
        let error = msg
            .events
            .iter()
            .find(|e| e.r#type == watchd::api::grpc::pb::EventType::Error as i32);
        if let Some(e) = error {
            return serde_json::from_slice(&e.status).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_ends_with_403_when_its_binding_goes_and_watches_are_limited_per_user() {
    let pki = Pki::new();
    pki.issue("alice", "alice", Some("dev"), false);
    pki.issue("admin", "root", Some("system:masters"), false);
    std::fs::write(pki.path("tokens.csv"), "bob-token,bob,uid-bob,viewers\n").unwrap();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(&mut kv, "/registry/pods/ns1/p1", &pod("ns1", "p1")).await;
    for (key, json) in RBAC {
        put_object_text(&mut kv, key, json).await;
    }
    let args = [
        pki.arg("tls-cert-file", "server.crt"),
        pki.arg("tls-private-key-file", "server.key"),
        pki.arg("client-ca-file", "ca.crt"),
        pki.arg("token-auth-file", "tokens.csv"),
        "--max-watches-per-user=2".to_string(),
        pki.arg("audit-log-path", "audit.log"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let watchd = Watchd::start_with_probe(&etcd.client_url(), &args, Some(admin_probe(&pki)));
    let base = format!("https://127.0.0.1:{}", watchd.http_addr().port());

    // alice's watch runs while her RoleBinding exists, and ends with a 403 ERROR event
    // when it is deleted.
    let url = format!("{base}/api/v1/namespaces/ns1/pods?watch=true");
    let (mut alice, lines) = watch_lines(&pki, &url, Some("alice"), None);
    let ev = next_json(&lines, "alice's first event");
    assert_eq!(ev["type"], "ADDED", "{ev}");
    // The same over gRPC; bob's gRPC watch counts towards his limit below.
    let mut alice_grpc = grpc_watch(&pki, &watchd, Some("alice"), None, "ns1").await;
    let mut bob_grpc = grpc_watch(&pki, &watchd, None, Some("bob-token"), "").await;
    etcd_delete(&mut kv, "/registry/rolebindings/ns1/alice-reads-pods").await;
    alice_watch_ends_forbidden(&lines, "alice's watch after the binding is deleted");
    let _ = alice.kill();
    let _ = alice.wait();
    let status = grpc_error_event(&mut alice_grpc).await;
    assert_eq!(status["code"], 403, "{status}");
    assert_eq!(status["reason"], "Forbidden", "{status}");
    assert!(
        tokio::time::timeout(std::time::Duration::from_secs(10), alice_grpc.message())
            .await
            .expect("the gRPC stream ends")
            .unwrap()
            .is_none(),
        "nothing after the ERROR event"
    );

    // bob may have two watches open (one over gRPC); the third is 429 with Retry-After,
    // and so is a second gRPC one.
    let url = format!("{base}/api/v1/pods?watch=true");
    let mut open = Vec::new();
    for i in 0..1 {
        let (child, lines) = watch_lines(&pki, &url, None, Some("bob-token"));
        let ev = next_json(&lines, &format!("bob's watch {i}"));
        assert_eq!(ev["type"], "ADDED", "{ev}");
        open.push((child, lines));
    }
    let e = grpc_watch_call(&pki, &watchd, None, Some("bob-token"), "")
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    let out = curl(&[
        "-i",
        "--cacert",
        pki.path("ca.crt").to_str().unwrap(),
        "-H",
        "Authorization: Bearer bob-token",
        &url,
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(text.starts_with("http/2 429"), "{text}");
    assert!(text.contains("retry-after: 1"), "{text}");
    assert!(text.contains("too many requests"), "{text}");
    for (mut child, _) in open {
        let _ = child.kill();
        let _ = child.wait();
    }
    // Still open: nothing to read, and no end of stream.
    let next = tokio::time::timeout(std::time::Duration::from_millis(300), bob_grpc.message());
    assert!(next.await.is_err(), "bob's gRPC watch is still open");
    drop(bob_grpc);

    // The audit log has a line per request, in audit.k8s.io/v1 Event shape.
    // (Written by a thread of its own: wait for the last request's line.)
    let read = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(pki.path("audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let lines = support::poll_until(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(50),
        || {
            let lines = read();
            lines
                .iter()
                .any(|l| l["responseStatus"]["code"] == 429)
                .then_some(lines)
        },
    )
    .expect("the refused watch reaches the audit log");
    let alice_watch = lines
        .iter()
        .find(|l| l["user"]["username"] == "alice" && l["verb"] == "watch")
        .expect("alice's watch is audited");
    assert_eq!(alice_watch["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(alice_watch["stage"], "ResponseStarted");
    assert_eq!(alice_watch["objectRef"]["resource"], "pods");
    assert_eq!(alice_watch["objectRef"]["namespace"], "ns1");
    assert_eq!(alice_watch["sourceIPs"][0], "127.0.0.1");
    let refused = lines
        .iter()
        .find(|l| l["user"]["username"] == "bob" && l["responseStatus"]["code"] == 429)
        .expect("bob's refused watch is audited");
    assert_eq!(refused["verb"], "watch");
    assert_eq!(refused["requestURI"], "/api/v1/pods?watch=true");
}

// Revoked ServiceAccount tokens, as kube-apiserver 1.34 refuses them
// (`pkg/serviceaccount/legacy.go`, `claims.go`): each scenario runs with the objects
// stored as JSON and as protobuf (whose JSON watchd renders itself).
storage_tests! {
    multi_thread:
    legacy_token_is_refused_once_its_secret_holds_another_token,
    legacy_token_is_refused_while_its_secret_is_being_deleted,
    legacy_token_is_refused_while_its_service_account_is_being_deleted,
    legacy_token_is_refused_while_its_secret_is_labelled_invalid_since,
    bound_token_of_a_pod_being_deleted_works_until_a_minute_after_its_deletion_timestamp,
    bound_token_is_refused_a_minute_after_its_service_account_began_deletion,
    bound_token_is_refused_a_minute_after_its_secret_began_deletion,
    bound_token_is_refused_a_minute_after_its_node_began_deletion,
    bound_tokens_are_refused_once_what_they_are_bound_to_is_gone,
}

const SA_KEY: &str = "/registry/serviceaccounts/ns1/builder";
const SECRET_KEY: &str = "/registry/secrets/ns1/builder-token";
const POD_KEY: &str = "/registry/pods/ns1/p1";
const NODE_KEY: &str = "/registry/minions/n1";
const INVALID_SINCE: &str = "kubernetes.io/legacy-token-invalid-since";

/// watchd with TLS, the ServiceAccount key and AlwaysAllow: a request answers 200 when its
/// token authenticates and 401 when it does not. (Fields drop in order: watchd, then
/// etcd.)
struct TokenServer {
    watchd: Watchd,
    kv: etcd_client::Client,
    _etcd: Etcd,
    pki: Pki,
    signer: jsonwebtoken::EncodingKey,
}

impl TokenServer {
    /// Starts etcd with `objects` (etcd key, object) in the scenario's storage format, and
    /// watchd on it.
    async fn start(objects: &[(&str, serde_json::Value)]) -> TokenServer {
        let pki = Pki::new();
        pki.issue("admin", "root", Some("system:masters"), false);
        let key = rcgen::KeyPair::generate().unwrap();
        std::fs::write(pki.path("sa.pub"), key.public_key_pem()).unwrap();
        let etcd = Etcd::start();
        let mut kv = etcd.client().await;
        for (key, object) in objects {
            support::kube::put_object(&mut kv, key, object).await;
        }
        let args = [
            pki.arg("tls-cert-file", "server.crt"),
            pki.arg("tls-private-key-file", "server.key"),
            pki.arg("client-ca-file", "ca.crt"),
            pki.arg("service-account-key-file", "sa.pub"),
            format!("--service-account-issuer={SA_ISSUER}"),
            "--authorization-mode=AlwaysAllow".to_string(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let watchd = Watchd::start_with_probe(&etcd.client_url(), &args, Some(admin_probe(&pki)));
        let signer =
            jsonwebtoken::EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap();
        TokenServer {
            watchd,
            kv,
            _etcd: etcd,
            pki,
            signer,
        }
    }

    fn sign(&self, claims: &serde_json::Value) -> String {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
            claims,
            &self.signer,
        )
        .unwrap()
    }

    /// curl's answer to `path` with `credentials` (as curl arguments): status code and body.
    fn curl(&self, path: &str, credentials: &[&str]) -> (u16, String) {
        let url = format!("https://127.0.0.1:{}{path}", self.watchd.http_addr().port());
        let ca = self.pki.path("ca.crt");
        let mut args = vec!["-w", "\n%{http_code}", "--cacert", ca.to_str().unwrap()];
        args.extend_from_slice(credentials);
        args.push(&url);
        let out = curl(&args);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.parse().unwrap_or(0), body.to_string())
    }

    /// The status of a read with `token`.
    fn status(&self, token: &str) -> u16 {
        let auth = format!("Authorization: Bearer {token}");
        self.curl("/api/v1/namespaces/ns1/configmaps", &["-H", &auth])
            .0
    }

    /// The API path of the object at etcd `key`.
    fn api_path(key: &str) -> String {
        let parts: Vec<&str> = key.trim_start_matches("/registry/").split('/').collect();
        match parts[..] {
            ["minions", name] => format!("/api/v1/nodes/{name}"),
            [resource, ns, name] => format!("/api/v1/namespaces/{ns}/{resource}/{name}"),
            _ => panic!("no API path for {key}"),
        }
    }

    /// The resourceVersion watchd serves the object at etcd `key` with (read as the
    /// admin), None while it serves a 404.
    fn served_revision(&self, key: &str) -> Option<i64> {
        let (cert, private) = (self.pki.path("admin.crt"), self.pki.path("admin.key"));
        let (code, body) = self.curl(
            &Self::api_path(key),
            &[
                "--cert",
                cert.to_str().unwrap(),
                "--key",
                private.to_str().unwrap(),
            ],
        );
        if code == 404 {
            return None;
        }
        let object: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {key}: {code} {e}: {body}"));
        Some(support::kube::rv(&object))
    }

    /// Writes `object` at `key` in the scenario's format and waits until watchd serves it.
    async fn put(&mut self, key: &str, object: &serde_json::Value) {
        let rev = support::kube::put_object(&mut self.kv, key, object).await;
        let served = support::poll_until(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_millis(50),
            || (self.served_revision(key) >= Some(rev)).then_some(()),
        );
        assert!(served.is_some(), "watchd serves {key} at {rev}");
    }

    /// Deletes `key` from etcd and waits until watchd serves a 404 for it.
    async fn delete(&mut self, key: &str) {
        etcd_delete(&mut self.kv, key).await;
        let gone = support::poll_until(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_millis(50),
            || self.served_revision(key).is_none().then_some(()),
        );
        assert!(gone.is_some(), "watchd serves 404 for {key}");
    }

    /// Asserts that `token` is answered `code`; the cache serves the last write already.
    fn expect(&self, token: &str, code: u16, what: &str) {
        assert_eq!(self.status(token), code, "{what}");
    }
}

fn service_account() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "builder", "namespace": "ns1", "uid": "sa-uid",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
    })
}

/// The legacy token Secret of ns1/builder, holding `token` (base64 in `data`).
fn token_secret(token: &str) -> serde_json::Value {
    use base64::Engine as _;
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "builder-token", "namespace": "ns1", "uid": "secret-uid",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"kubernetes.io/service-account.name": "builder",
                                     "kubernetes.io/service-account.uid": "sa-uid"}},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": base64::engine::general_purpose::STANDARD.encode(token),
                 "namespace": base64::engine::general_purpose::STANDARD.encode("ns1")},
    })
}

fn bound_pod() -> serde_json::Value {
    serde_json::from_str(&pod("ns1", "p1")).unwrap()
}

fn bound_node() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "uid": "node-uid", "creationTimestamp": "2026-01-01T00:00:00Z"},
    })
}

/// `object` being deleted: a finalizer holds it, and its deletionTimestamp is `at` (Unix
/// seconds).
fn being_deleted(mut object: serde_json::Value, at: u64) -> serde_json::Value {
    let at = k8s_openapi::jiff::Timestamp::from_second(at as i64).unwrap();
    object["metadata"]["deletionTimestamp"] = serde_json::json!(at.to_string());
    object["metadata"]["deletionGracePeriodSeconds"] = serde_json::json!(0);
    object["metadata"]["finalizers"] = serde_json::json!(["example.com/hold"]);
    object
}

/// The claims of a legacy (Secret) token of ns1/builder; `extra` added.
fn legacy_claims(extra: serde_json::Value) -> serde_json::Value {
    let mut c = serde_json::json!({
        "iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ns1:builder",
        "kubernetes.io/serviceaccount/namespace": "ns1",
        "kubernetes.io/serviceaccount/secret.name": "builder-token",
        "kubernetes.io/serviceaccount/service-account.name": "builder",
        "kubernetes.io/serviceaccount/service-account.uid": "sa-uid",
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// The claims of a bound token of ns1/builder, bound to `bound` (`kubernetes.io` members).
fn bound_claims(bound: serde_json::Value) -> serde_json::Value {
    let mut c = serde_json::json!({
        "iss": SA_ISSUER, "aud": [SA_ISSUER], "sub": "system:serviceaccount:ns1:builder",
        "iat": now() - 10, "nbf": now() - 10, "exp": now() + 3600, "jti": "j-1",
        "kubernetes.io": {"namespace": "ns1", "serviceaccount": {"name": "builder", "uid": "sa-uid"}},
    });
    for (k, v) in bound.as_object().unwrap() {
        c["kubernetes.io"][k] = v.clone();
    }
    c
}

/// A legacy token server: the ServiceAccount and its Secret holding the token returned.
async fn legacy_server() -> (TokenServer, String) {
    let mut server = TokenServer::start(&[(SA_KEY, service_account())]).await;
    let token = server.sign(&legacy_claims(serde_json::json!({})));
    server.put(SECRET_KEY, &token_secret(&token)).await;
    server.expect(&token, 200, "the legacy token of an existing Secret");
    (server, token)
}

async fn legacy_token_is_refused_once_its_secret_holds_another_token() {
    let (mut server, token) = legacy_server().await;
    // The Secret's token replaced (rotated): the old one no longer matches the server's
    // copy, the new one does.
    let rotated = server.sign(&legacy_claims(serde_json::json!({"jti": "rotated"})));
    server.put(SECRET_KEY, &token_secret(&rotated)).await;
    server.expect(&token, 401, "the token the Secret no longer holds");
    server.expect(&rotated, 200, "the token the Secret holds now");
    // A Secret without the token: nothing matches.
    let mut emptied = token_secret(&rotated);
    emptied["data"].as_object_mut().unwrap().remove("token");
    server.put(SECRET_KEY, &emptied).await;
    server.expect(&rotated, 401, "a Secret without data.token");
}

async fn legacy_token_is_refused_while_its_secret_is_being_deleted() {
    let (mut server, token) = legacy_server().await;
    // Legacy tokens have no grace: any deletionTimestamp refuses, even one ahead.
    server
        .put(SECRET_KEY, &being_deleted(token_secret(&token), now() + 30))
        .await;
    server.expect(&token, 401, "the Secret is being deleted");
    server.put(SECRET_KEY, &token_secret(&token)).await;
    server.expect(&token, 200, "the Secret kept after all");
}

async fn legacy_token_is_refused_while_its_service_account_is_being_deleted() {
    let (mut server, token) = legacy_server().await;
    server
        .put(SA_KEY, &being_deleted(service_account(), now() + 30))
        .await;
    server.expect(&token, 401, "the ServiceAccount is being deleted");
    server.put(SA_KEY, &service_account()).await;
    server.expect(&token, 200, "the ServiceAccount kept after all");
}

async fn legacy_token_is_refused_while_its_secret_is_labelled_invalid_since() {
    let (mut server, token) = legacy_server().await;
    // The legacy token cleaner's label (a label, as legacy.go reads it).
    let mut marked = token_secret(&token);
    marked["metadata"]["labels"] = serde_json::json!({INVALID_SINCE: "2025-10-27"});
    server.put(SECRET_KEY, &marked).await;
    server.expect(&token, 401, "the Secret is labelled invalid");
    // The same as an annotation is not the label: accepted.
    let mut annotated = token_secret(&token);
    annotated["metadata"]["annotations"][INVALID_SINCE] = serde_json::json!("2025-10-27");
    server.put(SECRET_KEY, &annotated).await;
    server.expect(&token, 200, "the label removed, as the message says to");
}

async fn bound_token_of_a_pod_being_deleted_works_until_a_minute_after_its_deletion_timestamp() {
    let mut server =
        TokenServer::start(&[(SA_KEY, service_account()), (POD_KEY, bound_pod())]).await;
    let token = server.sign(&bound_claims(
        serde_json::json!({"pod": {"name": "p1", "uid": "u-ns1-p1"}}),
    ));
    server.expect(&token, 200, "the pod exists");
    // The pod's deletion began 50 s ago: still within kube-apiserver's minute.
    let deleted_at = now() - 50;
    server
        .put(POD_KEY, &being_deleted(bound_pod(), deleted_at))
        .await;
    server.expect(
        &token,
        200,
        "within a minute of the pod's deletionTimestamp",
    );
    // Refused once the minute has passed, and not before: the first refusal is answered
    // after deleted_at + 60 s.
    let refused = support::poll_until(
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(200),
        || {
            let refused = server.status(&token) == 401;
            let answered = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            refused.then_some(answered)
        },
    )
    .expect("the token is refused a minute after the pod's deletionTimestamp");
    assert!(
        refused > (deleted_at + 60) as f64,
        "refused at {refused}, before the minute from {deleted_at} ended"
    );
}

/// A bound token server with the ServiceAccount, its Secret, the pod and the node; and a
/// token bound to `bound`.
async fn bound_server(bound: serde_json::Value) -> (TokenServer, String) {
    let server = TokenServer::start(&[
        (SA_KEY, service_account()),
        (SECRET_KEY, token_secret("unused")),
        (POD_KEY, bound_pod()),
        (NODE_KEY, bound_node()),
    ])
    .await;
    let token = server.sign(&bound_claims(bound));
    server.expect(&token, 200, "everything the token names exists");
    (server, token)
}

async fn bound_token_is_refused_a_minute_after_its_service_account_began_deletion() {
    let (mut server, token) = bound_server(serde_json::json!({})).await;
    server
        .put(SA_KEY, &being_deleted(service_account(), now() - 5))
        .await;
    server.expect(&token, 200, "within the minute");
    server
        .put(SA_KEY, &being_deleted(service_account(), now() - 120))
        .await;
    server.expect(
        &token,
        401,
        "the ServiceAccount's deletion began two minutes ago",
    );
}

async fn bound_token_is_refused_a_minute_after_its_secret_began_deletion() {
    let (mut server, token) =
        bound_server(serde_json::json!({"secret": {"name": "builder-token", "uid": "secret-uid"}}))
            .await;
    server
        .put(
            SECRET_KEY,
            &being_deleted(token_secret("unused"), now() - 5),
        )
        .await;
    server.expect(&token, 200, "within the minute");
    server
        .put(
            SECRET_KEY,
            &being_deleted(token_secret("unused"), now() - 120),
        )
        .await;
    server.expect(&token, 401, "the Secret's deletion began two minutes ago");
}

async fn bound_token_is_refused_a_minute_after_its_node_began_deletion() {
    let (mut server, token) =
        bound_server(serde_json::json!({"node": {"name": "n1", "uid": "node-uid"}})).await;
    server
        .put(NODE_KEY, &being_deleted(bound_node(), now() - 5))
        .await;
    server.expect(&token, 200, "within the minute");
    server
        .put(NODE_KEY, &being_deleted(bound_node(), now() - 120))
        .await;
    server.expect(&token, 401, "the node's deletion began two minutes ago");
}

async fn bound_tokens_are_refused_once_what_they_are_bound_to_is_gone() {
    let (mut server, by_pod) = bound_server(serde_json::json!({
        "pod": {"name": "p1", "uid": "u-ns1-p1"},
        // A pod-bound token names its node too: kube-apiserver only reports it.
        "node": {"name": "n1", "uid": "node-uid"},
    }))
    .await;
    let by_secret = server.sign(&bound_claims(
        serde_json::json!({"secret": {"name": "builder-token", "uid": "secret-uid"}}),
    ));
    let by_node = server.sign(&bound_claims(
        serde_json::json!({"node": {"name": "n1", "uid": "node-uid"}}),
    ));
    let plain = server.sign(&bound_claims(serde_json::json!({})));
    for t in [&by_secret, &by_node, &plain] {
        server.expect(t, 200, "everything the token names exists");
    }
    server.delete(NODE_KEY).await;
    server.expect(&by_node, 401, "the node is gone");
    server.expect(&by_pod, 200, "a pod-bound token's node is not checked");
    server.delete(POD_KEY).await;
    server.expect(&by_pod, 401, "the pod is gone");
    server.delete(SECRET_KEY).await;
    server.expect(&by_secret, 401, "the Secret is gone");
    server.expect(&plain, 200, "the ServiceAccount is still there");
    server.delete(SA_KEY).await;
    server.expect(&plain, 401, "the ServiceAccount is gone");
}

/// RBAC of the review's smaller findings: `metrics-reader` may get `/metrics`, `/apis`
/// and pods everywhere; `carol` is bound to nothing, not even discovery.
const REVIEW_RBAC: &[(&str, &str)] = &[
    (
        "/registry/clusterroles/metrics-reader",
        r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"metrics-reader","uid":"cr-m","creationTimestamp":"2026-01-01T00:00:00Z"},"rules":[{"verbs":["get"],"nonResourceURLs":["/metrics","/apis"]},{"verbs":["get","list"],"apiGroups":[""],"resources":["pods"]}]}"#,
    ),
    (
        "/registry/clusterrolebindings/metrics-reader",
        r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"metrics-reader","uid":"crb-m","creationTimestamp":"2026-01-01T00:00:00Z"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"metrics-reader"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"metrics-reader"}}"#,
    ),
];

/// A gRPC request with a bearer token.
fn as_user<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

/// curl's arguments for the client certificate `name` of `pki`.
fn cert_args(pki: &Pki, name: &str) -> Vec<String> {
    vec![
        "--cert".into(),
        pki.path(&format!("{name}.crt")).display().to_string(),
        "--key".into(),
        pki.path(&format!("{name}.key")).display().to_string(),
    ]
}

/// curl's status code for `path` with `extra` arguments (a token or a certificate).
fn curl_code(pki: &Pki, base: &str, path: &str, extra: &[&str]) -> String {
    let ca = pki.path("ca.crt");
    let url = format!("{base}{path}");
    let mut args = vec![
        "--path-as-is",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--cacert",
        ca.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push(&url);
    String::from_utf8_lossy(&curl(&args).stdout).into_owned()
}

/// The review's smaller findings, each as a client meets it:
/// - a non-resource path is authorized as routing serves it (`/%6detrics` and
///   `//metrics` are `/metrics`), not as spelled;
/// - gRPC `ListResources` is discovery, authorized as a `get` of `/apis`;
/// - a name or namespace never reaches another key (`ns1/p1` asked of pods without a
///   namespace over gRPC, `a%2Fb` over HTTP);
/// - a client certificate is checked per request: one that expires stops working on the
///   HTTP connection a client keeps open;
/// - the client CA file is reloaded: a rotated CA's certificates start working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_paths_and_discovery_are_checked_as_kube_apiserver_checks_them() {
    use tonic::transport::{Certificate, Channel, ClientTlsConfig};
    use watchd::api::grpc::pb::watchd_client::WatchdClient;
    use watchd::api::grpc::pb::{Collection, GetRequest, ListResourcesRequest};

    let pki = Pki::new();
    pki.issue("admin", "root", Some("system:masters"), false);
    std::fs::copy(pki.path("ca.crt"), pki.path("client-ca.crt")).unwrap();
    std::fs::write(
        pki.path("tokens.csv"),
        "m-token,metrics-reader,uid-m\nc-token,carol,uid-c\n",
    )
    .unwrap();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(&mut kv, "/registry/pods/ns1/p1", &pod("ns1", "p1")).await;
    for (key, json) in REVIEW_RBAC {
        put_object_text(&mut kv, key, json).await;
    }
    let args = [
        pki.arg("tls-cert-file", "server.crt"),
        pki.arg("tls-private-key-file", "server.key"),
        pki.arg("client-ca-file", "client-ca.crt"),
        pki.arg("token-auth-file", "tokens.csv"),
        "--authorization-mode=RBAC".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let watchd = Watchd::start_with_probe(&etcd.client_url(), &args, Some(admin_probe(&pki)));
    let base = format!("https://127.0.0.1:{}", watchd.http_addr().port());
    let m = ["-H", "Authorization: Bearer m-token"];
    let c = ["-H", "Authorization: Bearer c-token"];

    // Non-resource paths: allowed as served, refused as served.
    for path in ["/metrics", "/%6detrics", "//metrics"] {
        assert_eq!(curl_code(&pki, &base, path, &m), "200", "{path}");
        assert_eq!(curl_code(&pki, &base, path, &c), "403", "{path}");
    }
    // A name that is two path segments once decoded is refused, not looked up.
    assert_eq!(
        curl_code(&pki, &base, "/api/v1/namespaces/ns1/pods/a%2Fb", &m),
        "400"
    );

    // gRPC: discovery needs `get /apis`; a name with a slash is not a key.
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(
            std::fs::read(pki.path("ca.crt")).unwrap(),
        ))
        .domain_name("localhost");
    let channel = Channel::from_shared(format!("https://127.0.0.1:{}", watchd.grpc_addr().port()))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .expect("gRPC over TLS");
    let mut grpc = WatchdClient::new(channel);
    let e = grpc
        .list_resources(as_user("c-token", ListResourcesRequest {}))
        .await
        .expect_err("carol may not discover");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let listed = grpc
        .list_resources(as_user("m-token", ListResourcesRequest {}))
        .await
        .expect("metrics-reader may discover")
        .into_inner();
    assert!(listed.resources.iter().any(|r| r.resource == "pods"));
    let pods = || {
        Some(Collection {
            version: "v1".into(),
            resource: "pods".into(),
            ..Default::default()
        })
    };
    let e = grpc
        .get(as_user(
            "m-token",
            GetRequest {
                collection: pods(),
                name: "ns1/p1".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("a namespaced object without its namespace");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");

    // A certificate that expires while its client keeps the connection open: kube-rs
    // keeps it in its pool, and the request after the expiry is a 401 on it (a new
    // connection would fail its handshake instead).
    pki.issue_expiring(
        "short",
        "short-lived",
        "system:masters",
        std::time::Duration::from_secs(4),
    );
    let kubeconfig = pki.kubeconfig("short.kubeconfig", &base, Some("short"), None);
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config from kubeconfig");
    let client = kube::Client::try_from(config).expect("kube client");
    let api = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, "ns1");
    let listed = api
        .list(&kube::api::ListParams::default())
        .await
        .expect("the certificate is valid");
    assert_eq!(listed.items.len(), 1);
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    match api.list(&kube::api::ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 401, "{status:?}"),
        other => panic!("expected a 401 on the open connection, got {other:?}"),
    }

    // The client CA file rotated to another CA: its certificates work once it is read
    // again (checked every 10 s), and the old CA's no longer do.
    let next = Pki::new();
    next.issue("rotated", "rotated-admin", Some("system:masters"), false);
    let rotated = cert_args(&next, "rotated");
    let rotated: Vec<&str> = rotated.iter().map(String::as_str).collect();
    assert_ne!(
        curl_code(&pki, &base, "/api/v1/namespaces/ns1/pods", &rotated),
        "200"
    );
    std::fs::copy(next.path("ca.crt"), pki.path("client-ca.crt")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if curl_code(&pki, &base, "/api/v1/namespaces/ns1/pods", &rotated) == "200" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated client CA was not loaded\n{}",
            watchd.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let admin = cert_args(&pki, "admin");
    let admin: Vec<&str> = admin.iter().map(String::as_str).collect();
    assert_ne!(
        curl_code(&pki, &base, "/api/v1/namespaces/ns1/pods", &admin),
        "200",
        "the old CA's certificate after the rotation"
    );
}

/// A RoleBinding of Role ns1/pod-reader to the users `users`.
fn pod_reader_binding(name: &str, users: &[&str]) -> String {
    let subjects: Vec<serde_json::Value> = users
        .iter()
        .map(|u| serde_json::json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u}))
        .collect();
    serde_json::json!({
        "kind": "RoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": name, "namespace": "ns1", "uid": format!("rb-{name}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "subjects": subjects,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
    })
    .to_string()
}

/// `/metrics`, read as the admin.
fn metrics_text(pki: &Pki, base: &str) -> String {
    let (cert, key) = (pki.path("admin.crt"), pki.path("admin.key"));
    let out = curl(&[
        "--cacert",
        pki.path("ca.crt").to_str().unwrap(),
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        &format!("{base}/metrics"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("watchd_"), "no metrics: {text}");
    text
}

/// `watchd_watch_permission_rechecks_total` (0 before the first re-check).
fn watch_rechecks(pki: &Pki, base: &str) -> f64 {
    let text = metrics_text(pki, base);
    support::kube::metric(&text, "watchd_watch_permission_rechecks_total", &[]).unwrap_or(0.0)
}

/// The RBAC lines of `/metrics`, for failure messages.
fn rbac_metrics(pki: &Pki, base: &str) -> String {
    metrics_text(pki, base)
        .lines()
        .filter(|l| l.starts_with("watchd_rbac") || l.starts_with("watchd_watch"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until the re-check count reaches `want`, then for three re-check intervals more,
/// and asserts it stayed `want`: no other watch was checked again.
async fn expect_rechecks(pki: &Pki, base: &str, want: f64, what: &str) {
    let reached = support::poll_until(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(100),
        || (watch_rechecks(pki, base) >= want).then_some(()),
    );
    assert!(
        reached.is_some(),
        "{what}: {} re-checks, want {want}\n{}",
        watch_rechecks(pki, base),
        rbac_metrics(pki, base)
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(watch_rechecks(pki, base), want, "{what}");
}

/// An RBAC change re-runs the authorizer only for the open watches of the users it
/// concerns: a change to carol's binding checks carol's watch again and not alice's; a
/// change to the Role both are bound through checks both; deleting alice's binding ends
/// her watch with a 403 ERROR event and leaves carol's open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_watch_is_checked_again_only_when_an_rbac_change_concerns_its_user() {
    let pki = Pki::new();
    pki.issue("alice", "alice", Some("dev"), false);
    pki.issue("admin", "root", Some("system:masters"), false);
    std::fs::write(pki.path("tokens.csv"), "carol-token,carol,uid-carol\n").unwrap();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(&mut kv, "/registry/pods/ns1/p1", &pod("ns1", "p1")).await;
    for (key, json) in RBAC {
        put_object_text(&mut kv, key, json).await;
    }
    const CAROL: &str = "/registry/rolebindings/ns1/carol-reads-pods";
    put_object_text(
        &mut kv,
        CAROL,
        &pod_reader_binding("carol-reads-pods", &["carol"]),
    )
    .await;
    let args = [
        pki.arg("tls-cert-file", "server.crt"),
        pki.arg("tls-private-key-file", "server.key"),
        pki.arg("client-ca-file", "ca.crt"),
        pki.arg("token-auth-file", "tokens.csv"),
        "--authorization-mode=RBAC".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let watchd = Watchd::start_with_probe(&etcd.client_url(), &args, Some(admin_probe(&pki)));
    let base = format!("https://127.0.0.1:{}", watchd.http_addr().port());

    let url = format!("{base}/api/v1/namespaces/ns1/pods?watch=true");
    let (mut alice, alice_lines) = watch_lines(&pki, &url, Some("alice"), None);
    assert_eq!(
        next_json(&alice_lines, "alice's first event")["type"],
        "ADDED"
    );
    let (mut carol, carol_lines) = watch_lines(&pki, &url, None, Some("carol-token"));
    assert_eq!(
        next_json(&carol_lines, "carol's first event")["type"],
        "ADDED"
    );
    let quiet = |lines: &std::sync::mpsc::Receiver<String>, who: &str| {
        assert_eq!(
            lines.recv_timeout(std::time::Duration::from_millis(300)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout),
            "{who}'s watch is open and sent nothing"
        );
    };
    assert_eq!(watch_rechecks(&pki, &base), 0.0);

    // carol's binding changes (she stays bound; dave is added): only her watch is
    // checked again. (Before the index, every open watch was: 2.)
    put_object_text(
        &mut kv,
        CAROL,
        &pod_reader_binding("carol-reads-pods", &["carol", "dave"]),
    )
    .await;
    expect_rechecks(
        &pki,
        &base,
        1.0,
        "a change to carol's binding checks carol's watch only",
    )
    .await;
    quiet(&alice_lines, "alice");
    quiet(&carol_lines, "carol");

    // The Role both bindings grant changes: both watches are checked, both still allowed.
    put_object_text(
        &mut kv,
        "/registry/roles/ns1/pod-reader",
        r#"{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"pod-reader","namespace":"ns1","uid":"r1","creationTimestamp":"2026-01-01T00:00:00Z"},"rules":[{"verbs":["get","list","watch"],"apiGroups":[""],"resources":["pods","configmaps"]}]}"#,
    )
    .await;
    expect_rechecks(&pki, &base, 3.0, "a change to the Role checks both watches").await;
    quiet(&alice_lines, "alice");
    quiet(&carol_lines, "carol");

    // alice's binding goes: her watch is checked and ends with a 403 ERROR event;
    // carol's is not checked and stays open.
    etcd_delete(&mut kv, "/registry/rolebindings/ns1/alice-reads-pods").await;
    alice_watch_ends_forbidden(&alice_lines, "alice's watch after her binding is deleted");
    expect_rechecks(
        &pki,
        &base,
        4.0,
        "deleting alice's binding checks alice's watch only",
    )
    .await;
    quiet(&carol_lines, "carol");
    for child in [&mut alice, &mut carol] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Health probes depend on nothing they report on (`--authorization-always-allow-paths`,
/// as kube-controller-manager's): with TLS, tokens and RBAC, and no RBAC object at all,
/// `/healthz`, `/readyz` and `/livez` answer without credentials and for a user RBAC
/// grants nothing; other paths still need both; a path of the API's resources cannot be
/// exempted; the flag replaces the default list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_paths_need_neither_credentials_nor_rbac() {
    let pki = Pki::new();
    pki.issue("admin", "root", Some("system:masters"), false);
    std::fs::write(pki.path("tokens.csv"), "n-token,nobody,uid-n\n").unwrap();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(&mut kv, "/registry/pods/ns1/p1", &pod("ns1", "p1")).await;
    let start = |extra: &[&str]| {
        let mut args = vec![
            pki.arg("tls-cert-file", "server.crt"),
            pki.arg("tls-private-key-file", "server.key"),
            pki.arg("client-ca-file", "ca.crt"),
            pki.arg("token-auth-file", "tokens.csv"),
            "--authorization-mode=RBAC".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Watchd::start_with_probe(&etcd.client_url(), &args, Some(admin_probe(&pki)))
    };
    let watchd = start(&[]);
    let base = format!("https://127.0.0.1:{}", watchd.http_addr().port());
    let nobody = ["-H", "Authorization: Bearer n-token"];
    for path in ["/healthz", "/readyz", "/livez", "/readyz?verbose"] {
        assert_eq!(curl_code(&pki, &base, path, &[]), "200", "{path} anonymous");
        assert_eq!(
            curl_code(&pki, &base, path, &nobody),
            "200",
            "{path} nobody"
        );
    }
    // Exact paths: a named check is not exempt, nor is anything else.
    for path in ["/readyz/shutdown", "/metrics", "/api/v1/pods", "/version"] {
        assert_eq!(curl_code(&pki, &base, path, &[]), "401", "{path} anonymous");
        assert_eq!(
            curl_code(&pki, &base, path, &nobody),
            "403",
            "{path} nobody"
        );
    }
    drop(watchd);

    // The flag replaces the list; a prefix exempts its subpaths; resources never are.
    let watchd = start(&["--authorization-always-allow-paths=/readyz*,/metrics,/api/*"]);
    let base = format!("https://127.0.0.1:{}", watchd.http_addr().port());
    for path in ["/readyz", "/readyz/shutdown", "/metrics"] {
        assert_eq!(curl_code(&pki, &base, path, &[]), "200", "{path}");
    }
    for path in ["/livez", "/api/v1/pods", "/api/v1/namespaces/ns1/pods/p1"] {
        assert_eq!(curl_code(&pki, &base, path, &[]), "401", "{path}");
    }
}
