//! Secure serving with real clients: watchd with TLS, client certificates, a static token
//! file and RBAC read from its own cache; kubectl 1.33 with a client-certificate
//! kubeconfig and with a token kubeconfig, and curl over HTTP/2.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use support::kube::put_object_text;
use support::{Etcd, Watchd};

const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// A CA, the serving certificate, and client certificates, written as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "watchd-test-ca");
        let ca = params.self_signed(&key).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("watchd-test-pki-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        let pki = Pki {
            dir,
            issuer: rcgen::Issuer::new(params, key),
        };
        pki.issue("server", "watchd", None, true);
        pki
    }

    /// Writes `<name>.crt` and `<name>.key`: a server certificate for 127.0.0.1, or a
    /// client certificate for user `cn` in group `org`.
    fn issue(&self, name: &str, cn: &str, org: Option<&str>, server: bool) {
        let key = rcgen::KeyPair::generate().unwrap();
        let sans = if server {
            vec!["localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            vec![]
        };
        let mut params = rcgen::CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        if let Some(o) = org {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, o);
        }
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(self.path(&format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn arg(&self, flag: &str, name: &str) -> String {
        format!("--{flag}={}", self.path(name).display())
    }

    /// A kubeconfig for `server` authenticating with the client certificate `name`, or
    /// with `token`.
    fn kubeconfig(
        &self,
        file: &str,
        server: &str,
        cert: Option<&str>,
        token: Option<&str>,
    ) -> PathBuf {
        let mut user = String::new();
        if let Some(name) = cert {
            user += &format!(
                "    client-certificate: {}\n    client-key: {}\n",
                self.path(&format!("{name}.crt")).display(),
                self.path(&format!("{name}.key")).display()
            );
        }
        if let Some(t) = token {
            user += &format!("    token: {t}\n");
        }
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: watchd\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n{user}contexts:\n- name: c\n  context:\n    cluster: watchd\n    user: u\ncurrent-context: c\n",
            self.path("ca.crt").display()
        );
        let path = self.path(file);
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("run curl")
}

fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Output {
    assert!(Path::new(KUBECTL).exists(), "{KUBECTL} is required");
    Command::new(KUBECTL)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cache-dir={}", cache.display()))
        .arg("--request-timeout=30s")
        .args(args)
        .output()
        .expect("run kubectl")
}

fn stdout_ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

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

/// A ready probe: `GET /readyz` over TLS as the cluster admin.
fn admin_probe(pki: &Pki) -> support::watchd::Probe {
    let (ca, cert, key) = (
        pki.path("ca.crt"),
        pki.path("admin.crt"),
        pki.path("admin.key"),
    );
    Arc::new(move |addr| {
        let out = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--cacert",
            ca.to_str().unwrap(),
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            &format!("https://127.0.0.1:{}/readyz", addr.port()),
        ]);
        out.stdout == b"200"
    })
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

    // bob may have two watches open; the third is 429 with Retry-After.
    let url = format!("{base}/api/v1/pods?watch=true");
    let mut open = Vec::new();
    for i in 0..2 {
        let (child, lines) = watch_lines(&pki, &url, None, Some("bob-token"));
        let ev = next_json(&lines, &format!("bob's watch {i}"));
        assert_eq!(ev["type"], "ADDED", "{ev}");
        open.push((child, lines));
    }
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
