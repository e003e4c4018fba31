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
    let ev = next_json(&lines, "alice's watch after the binding is deleted");
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
