//! Delegated authentication and authorization with real clients: watchd asks a
//! TokenReview and a SubjectAccessReview service (an HTTPS server in this test, reached
//! through kubeconfig files with a CA and a bearer token of watchd's own), and kubectl
//! reads through it with a token kubeconfig.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use support::kube::put_object_text;
use support::pki::{curl, kubectl, stdout_ok, Pki};
use support::{Etcd, Watchd};

/// The token watchd presents to the review service.
const WEBHOOK_TOKEN: &str = "watchd-to-webhook";

/// What the review service was asked: (path, review) in order.
type Asked = Arc<Mutex<Vec<(String, Value)>>>;

/// jane's token names jane (group dev); the authorizer lets jane read pods in ns1,
/// denies everyone secrets, fails for user "flaky", and has no opinion otherwise;
/// discovery is allowed to every authenticated user.
fn review(path: &str, req: &Value) -> (u16, Value) {
    let spec = &req["spec"];
    if path == "/authenticate" {
        let status = match spec["token"].as_str() {
            Some("jane-token") => json!({"authenticated": true,
                "user": {"username": "jane", "uid": "j-1", "groups": ["dev"]}}),
            Some("flaky-token") => json!({"authenticated": true,
                "user": {"username": "flaky"}}),
            _ => json!({"authenticated": false}),
        };
        return (
            200,
            json!({"apiVersion": req["apiVersion"], "kind": "TokenReview", "status": status}),
        );
    }
    let ra = &spec["resourceAttributes"];
    let user = spec["user"].as_str().unwrap_or_default();
    let status = if user == "flaky" {
        return (503, json!({"kind": "Status", "code": 503}));
    } else if !spec["nonResourceAttributes"].is_null() {
        json!({"allowed": true})
    } else if ra["resource"] == "secrets" {
        json!({"allowed": false, "denied": true, "reason": "secrets are not for reading here"})
    } else if user == "jane" && ra["resource"] == "pods" && ra["namespace"] == "ns1" {
        json!({"allowed": true})
    } else {
        json!({"allowed": false, "reason": "no rule for this"})
    };
    (
        200,
        json!({"apiVersion": req["apiVersion"], "kind": "SubjectAccessReview", "status": status}),
    )
}

/// Serves [`review`] over HTTPS with the PKI's server certificate; requests without
/// watchd's token get 401.
async fn review_service(pki: &Pki) -> (u16, Asked) {
    use rustls::pki_types::pem::PemObject;
    let chain = rustls::pki_types::CertificateDer::pem_file_iter(pki.path("server.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(pki.path("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked: Asked = Arc::default();
    let log = asked.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let log = log.clone();
                        async move {
                            let path = req.uri().path().to_string();
                            let authorized = req
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok())
                                == Some(&format!("Bearer {WEBHOOK_TOKEN}"));
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let (code, out) = if authorized {
                                let v: Value = serde_json::from_slice(&body).unwrap();
                                let answer = review(&path, &v);
                                log.lock().unwrap().push((path, v));
                                answer
                            } else {
                                (401, json!({"kind": "Status", "code": 401}))
                            };
                            let mut r =
                                http::Response::new(Full::new(Bytes::from(out.to_string())));
                            *r.status_mut() = http::StatusCode::from_u16(code).unwrap();
                            Ok::<_, std::convert::Infallible>(r)
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (port, asked)
}

/// A webhook kubeconfig: the service at `url`, verified with the PKI's CA, and watchd's
/// token, in a cluster/user/context layout as kube-apiserver's docs show it.
fn webhook_kubeconfig(pki: &Pki, file: &str, url: &str) -> String {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: reviews\n  cluster:\n    server: {url}\n    certificate-authority: ca.crt\nusers:\n- name: watchd\n  user:\n    token: {WEBHOOK_TOKEN}\ncontexts:\n- name: webhook\n  context:\n    cluster: reviews\n    user: watchd\ncurrent-context: webhook\n"
    );
    std::fs::write(pki.path(file), text).unwrap();
    pki.path(file).display().to_string()
}

fn count(asked: &Asked, path: &str) -> usize {
    asked
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == path)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_with_a_webhook_token_as_the_webhook_authorizer_decides() {
    let pki = Pki::new();
    pki.issue("admin", "root", Some("system:masters"), false);
    let (port, asked) = review_service(&pki).await;
    let authn = webhook_kubeconfig(
        &pki,
        "authn.kubeconfig",
        &format!("https://127.0.0.1:{port}/authenticate"),
    );
    let authz = webhook_kubeconfig(
        &pki,
        "authz.kubeconfig",
        &format!("https://localhost:{port}/authorize"),
    );

    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for (ns, name) in [("ns1", "p1"), ("ns2", "p2")] {
        let pod = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}","uid":"u-{name}","creationTimestamp":"2026-01-02T03:04:05Z"}},"spec":{{"containers":[{{"name":"c","image":"nginx"}}]}}}}"#
        );
        put_object_text(&mut kv, &format!("/registry/pods/{ns}/{name}"), &pod).await;
    }
    let args = [
        pki.arg("tls-cert-file", "server.crt"),
        pki.arg("tls-private-key-file", "server.key"),
        pki.arg("client-ca-file", "ca.crt"),
        format!("--authentication-token-webhook-config-file={authn}"),
        "--authorization-mode=Webhook".to_string(),
        format!("--authorization-webhook-config-file={authz}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let probe = support::pki::admin_probe(&pki);
    let watchd = Watchd::start_with_probe(&etcd.client_url(), &args, Some(probe));
    let server = format!("https://127.0.0.1:{}", watchd.http_addr().port());
    let cache = tempfile::tempdir().unwrap();

    // jane's token is reviewed once; her reads are allowed by the webhook.
    let jane = pki.kubeconfig("jane.kubeconfig", &server, None, Some("jane-token"));
    let out = kubectl(
        &jane,
        cache.path(),
        &["get", "pods", "-n", "ns1", "-o", "name"],
    );
    assert_eq!(stdout_ok(&out, "jane lists ns1").trim(), "pod/p1");
    let out = kubectl(
        &jane,
        cache.path(),
        &["get", "pod", "p1", "-n", "ns1", "-o", "name"],
    );
    assert_eq!(stdout_ok(&out, "jane gets p1").trim(), "pod/p1");
    assert_eq!(
        count(&asked, "/authenticate"),
        1,
        "the TokenReview answer is cached"
    );

    // No opinion is a 403 with the webhook's reason; a denial too.
    let out = kubectl(&jane, cache.path(), &["get", "pods", "-n", "ns2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "ns2": no rule for this"#),
        "{err}"
    );
    let out = kubectl(&jane, cache.path(), &["get", "secrets", "-n", "ns1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("secrets are not for reading here"), "{err}");

    // What watchd sent by default: v1 TokenReviews and SubjectAccessReviews (with
    // `groups`), the versions kube-apiserver serves (v1beta1 is gone since 1.22).
    {
        let asked = asked.lock().unwrap();
        let (_, tr) = asked.iter().find(|(p, _)| p == "/authenticate").unwrap();
        assert_eq!(tr["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(tr["spec"]["token"], "jane-token");
        let sar = asked
            .iter()
            .map(|(_, v)| v)
            .find(|v| v["spec"]["resourceAttributes"]["namespace"] == "ns2")
            .unwrap();
        assert_eq!(sar["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(
            sar["spec"],
            json!({"resourceAttributes": {"namespace": "ns2", "verb": "list", "version": "v1",
                "resource": "pods"}, "user": "jane", "uid": "j-1",
                "groups": ["dev", "system:authenticated"]})
        );
    }

    // An unknown token is 401; an authorizer that fails is 500, as kube-apiserver.
    let ca = pki.path("ca.crt");
    let ca = ca.to_str().unwrap();
    let url = format!("{server}/api/v1/namespaces/ns1/pods");
    let status = |token: &str| -> Value {
        let out = curl(&[
            "--cacert",
            ca,
            "-H",
            &format!("Authorization: Bearer {token}"),
            &url,
        ]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let s = status("who-knows");
    assert_eq!(
        (s["code"].as_i64(), s["reason"].as_str()),
        (Some(401), Some("Unauthorized"))
    );
    let s = status("flaky-token");
    assert_eq!(
        (s["code"].as_i64(), s["reason"].as_str()),
        (Some(500), Some("InternalError")),
        "{s}"
    );
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("Internal error occurred: "),
        "{s}"
    );

    // Metrics count the calls by answer code.
    let metrics = curl(&[
        "--cacert",
        ca,
        "--cert",
        pki.path("admin.crt").to_str().unwrap(),
        "--key",
        pki.path("admin.key").to_str().unwrap(),
        &format!("{server}/metrics"),
    ]);
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    let by_code: BTreeMap<&str, &str> = metrics
        .lines()
        .filter(|l| l.starts_with("watchd_webhook_requests_total{"))
        .filter_map(|l| l.split_once(' '))
        .collect();
    assert!(
        by_code.keys().any(|k| k.contains("code=\"503\"")),
        "{metrics}"
    );
    assert!(
        by_code.keys().any(|k| k.contains("code=\"200\"")),
        "{metrics}"
    );
}
