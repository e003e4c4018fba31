//! `kubectl auth whoami`, `kubectl auth can-i` and `kubectl auth can-i --list` (kubectl
//! 1.33, unmodified) against watchd answering SelfSubjectReview,
//! SelfSubjectAccessReview and SelfSubjectRulesReview from its own token authenticator
//! and RBAC, and without authentication; the reviews in protobuf, and bad ones refused
//! as kube-apiserver refuses them.

mod support;

use serde_json::{json, Value};

use support::http::request;
use support::kube::put_object;
use support::pki::{curl, kubectl, start_tls_with_tokens, stdout_ok, token_kubeconfig, Pki};
use support::{Etcd, Watchd};

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": name}, "rules": rules})
}

fn binding(kind: &str, ns: &str, name: &str, role: (&str, &str), subject: (&str, &str)) -> Value {
    let mut meta = json!({"name": name});
    if !ns.is_empty() {
        meta["namespace"] = json!(ns);
    }
    json!({"kind": kind, "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.0, "name": role.1},
        "subjects": [{"kind": subject.0, "name": subject.1,
            "apiGroup": "rbac.authorization.k8s.io"}]})
}

/// bob (group `viewers`) may create the reviews and read pods in ns1, where one of his
/// bindings names a Role that is missing; every authenticated user may get `/version`;
/// carol may do nothing else.
async fn policy(kv: &mut etcd_client::Client) {
    let reviews = json!([{"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
        "resources": ["selfsubjectreviews"]}]);
    let objects = [
        (
            "clusterroles/basic-user",
            cluster_role("basic-user", reviews),
        ),
        (
            "clusterroles/public-info",
            cluster_role(
                "public-info",
                json!([{"verbs": ["get"], "nonResourceURLs": ["/version"]}]),
            ),
        ),
        (
            "clusterrolebindings/basic-user",
            binding(
                "ClusterRoleBinding",
                "",
                "basic-user",
                ("ClusterRole", "basic-user"),
                ("Group", "viewers"),
            ),
        ),
        (
            "clusterrolebindings/public-info",
            binding(
                "ClusterRoleBinding",
                "",
                "public-info",
                ("ClusterRole", "public-info"),
                ("Group", "system:authenticated"),
            ),
        ),
        (
            "roles/ns1/pod-reader",
            json!({"kind": "Role", "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": {"name": "pod-reader", "namespace": "ns1"},
                "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""],
                    "resources": ["pods"]}]}),
        ),
        (
            "rolebindings/ns1/bob",
            binding(
                "RoleBinding",
                "ns1",
                "bob",
                ("Role", "pod-reader"),
                ("User", "bob"),
            ),
        ),
        (
            "rolebindings/ns1/ghost",
            binding(
                "RoleBinding",
                "ns1",
                "ghost",
                ("Role", "gone"),
                ("User", "bob"),
            ),
        ),
    ];
    for (key, object) in objects {
        put_object(kv, &format!("/registry/{key}"), &object).await;
    }
}

/// kubectl's output and exit status.
fn can_i(kubeconfig: &std::path::Path, cache: &std::path::Path, args: &[&str]) -> (String, bool) {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = kubectl(kubeconfig, cache, &all);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (text, out.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_is_answered_from_watchds_own_authentication_and_rbac() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    policy(&mut kv).await;
    // kubectl sends a token over TLS only.
    let pki = Pki::new();
    let (_watchd, server) = start_tls_with_tokens(
        &pki,
        &etcd.client_url(),
        "bob-token,bob,uid-bob,\"viewers\"\ncarol-token,carol,uid-carol\n",
        &[],
    );
    let bob = pki.kubeconfig("bob.kubeconfig", &server, None, Some("bob-token"));
    let carol = pki.kubeconfig("carol.kubeconfig", &server, None, Some("carol-token"));
    let cache = pki.path("cache");

    let out = kubectl(&bob, &cache, &["auth", "whoami", "-o", "json"]);
    let review: Value = serde_json::from_str(&stdout_ok(&out, "bob's whoami")).unwrap();
    assert_eq!(review["kind"], "SelfSubjectReview");
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "bob", "uid": "uid-bob",
            "groups": ["viewers", "system:authenticated"]})
    );
    let out = kubectl(&bob, &cache, &["auth", "whoami"]);
    let table = stdout_ok(&out, "bob's whoami table");
    assert!(
        table.contains("Username") && table.contains("bob"),
        "{table}"
    );

    assert_eq!(
        can_i(&bob, &cache, &["list", "pods", "-n", "ns1"]),
        ("yes".into(), true)
    );
    assert_eq!(
        can_i(&bob, &cache, &["watch", "pods", "-n", "ns2"]),
        ("no".into(), false)
    );
    // RBAC names the missing role as its reason, and kubectl prints it.
    assert_eq!(
        can_i(&bob, &cache, &["list", "secrets", "-n", "ns1"]),
        (
            r#"no - RBAC: role.rbac.authorization.k8s.io "gone" not found"#.into(),
            false
        )
    );
    assert_eq!(
        can_i(&bob, &cache, &["get", "/version"]),
        ("yes".into(), true)
    );
    assert_eq!(
        can_i(&bob, &cache, &["get", "/metrics"]),
        ("no".into(), false)
    );

    let (list, ok) = can_i(&bob, &cache, &["--list", "-n", "ns1"]);
    assert!(ok, "{list}");
    let row = |resource: &str| {
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(resource))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    assert_eq!(row("pods").as_deref(), Some("pods [] [] [get list watch]"));
    assert_eq!(
        row("selfsubjectaccessreviews.authorization.k8s.io").as_deref(),
        Some("selfsubjectaccessreviews.authorization.k8s.io [] [] [create]")
    );
    assert!(list.contains("[/version]"), "{list}");
    let (list, _) = can_i(&bob, &cache, &["--list", "-n", "ns2"]);
    assert!(!list.lines().any(|l| l.starts_with("pods ")), "{list}");

    // Impersonation is refused, not answered for the caller (kubectl's whoami words any
    // refusal its own way).
    for (args, says) in [
        (
            &["auth", "can-i", "list", "pods", "--as=alice"][..],
            "impersonation is not supported",
        ),
        (
            &["auth", "whoami", "--as=alice"][..],
            "you do not have permission",
        ),
    ] {
        let out = kubectl(&bob, &cache, args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }

    // carol may not create reviews: kube-apiserver's 403, as kubectl prints it.
    let out = kubectl(&carol, &cache, &["auth", "can-i", "list", "pods"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"selfsubjectaccessreviews.authorization.k8s.io is forbidden: User "carol" cannot create resource "selfsubjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope"#),
        "{err}"
    );

    // The rules review reports the missing role; the access review, in protobuf.
    let ca = pki.path("ca.crt");
    let post = |path: &str, content_type: &str, body: &str| {
        let out = curl(&[
            "--cacert",
            ca.to_str().unwrap(),
            "-H",
            "Authorization: Bearer bob-token",
            "-H",
            &format!("Content-Type: {content_type}"),
            "-H",
            &format!("Accept: {content_type}"),
            "--data-binary",
            body,
            "-w",
            "\n%{http_code}",
            &format!("{server}{path}"),
        ]);
        let mut out = out.stdout;
        let code_at = out.iter().rposition(|&b| b == b'\n').unwrap();
        let code = String::from_utf8_lossy(&out[code_at + 1..]).to_string();
        out.truncate(code_at);
        (code, out)
    };
    let (code, rules) = post(
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        "application/json",
        r#"{"spec":{"namespace":"ns1"}}"#,
    );
    assert_eq!(code, "201", "{}", String::from_utf8_lossy(&rules));
    let rules: Value = serde_json::from_slice(&rules).unwrap();
    assert_eq!(rules["status"]["incomplete"], false);
    assert_eq!(
        rules["status"]["evaluationError"],
        r#"role.rbac.authorization.k8s.io "gone" not found"#
    );
    let ssar = json!({"kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {"resourceAttributes": {"namespace": "ns1", "verb": "get", "resource": "pods"}}});
    let body = pki.path("ssar.pb");
    std::fs::write(&body, watchd::codec::pbjson::encode_stored(&ssar).unwrap()).unwrap();
    let (code, answer) = post(
        SSAR,
        "application/vnd.kubernetes.protobuf",
        &format!("@{}", body.display()),
    );
    assert_eq!(code, "201");
    let env = watchd::codec::envelope::parse(&answer).unwrap();
    assert_eq!(
        (env.api_version, env.kind),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview")
    );
    let rendered = watchd::codec::pbjson::render(env.api_version, env.kind, env.raw, None).unwrap();
    let answered: Value = serde_json::from_slice(&rendered.json).unwrap();
    assert_eq!(answered["status"]["allowed"], true);
    assert_eq!(answered["spec"], ssar["spec"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_authentication_the_reviews_report_the_anonymous_user_allowed_everything() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    // Over plain HTTP kubectl sends no token: the request is anonymous.
    token_kubeconfig(&kubeconfig, &watchd.base_url(), "unsent");
    let cache = dir.path().join("cache");
    let out = kubectl(&kubeconfig, &cache, &["auth", "whoami", "-o", "json"]);
    let review: Value = serde_json::from_str(&stdout_ok(&out, "whoami")).unwrap();
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "system:anonymous", "groups": ["system:unauthenticated"]})
    );
    assert_eq!(
        can_i(&kubeconfig, &cache, &["delete", "nodes"]),
        ("yes".into(), true)
    );
    let (list, ok) = can_i(&kubeconfig, &cache, &["--list"]);
    assert!(ok, "{list}");
    assert!(list.contains("*.*"), "{list}");

    // Refused as kube-apiserver refuses them.
    let url = format!("{}{SSAR}", watchd.base_url());
    let post = |headers: &'static [(&'static str, &'static str)], body: Vec<u8>| {
        let url = url.clone();
        async move { request("POST", &url, headers, body).await }
    };
    let json_body: &[(&str, &str)] = &[("content-type", "application/json")];
    let r = post(json_body, br#"{"spec":{}}"#.to_vec()).await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(
        r.json()["details"]["causes"][0]["field"],
        "spec.resourceAttributes"
    );
    let both =
        br#"{"spec":{"resourceAttributes":{"verb":"get"},"nonResourceAttributes":{"path":"/"}}}"#;
    let r = post(json_body, both.to_vec()).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["details"]["causes"][0]["field"],
        "spec.nonResourceAttributes"
    );
    let r = post(json_body, br#"{"kind":"Pod","apiVersion":"v1"}"#.to_vec()).await;
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (400, json!("BadRequest"))
    );
    let r = post(json_body, b"{".to_vec()).await;
    assert_eq!(r.status, 400);
    let r = post(
        &[("content-type", "application/yaml")],
        b"spec: {}".to_vec(),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (415, json!("UnsupportedMediaType"))
    );
    let r = post(json_body, vec![b' '; (3 << 20) + 1]).await;
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (413, json!("RequestEntityTooLarge"))
    );
    let rules = format!(
        "{}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        watchd.base_url()
    );
    let r = request("POST", &rules, json_body, r#"{"spec":{}}"#).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "no namespace on request");
    // Other writes are still refused.
    let r = request(
        "POST",
        &format!("{}/api/v1/namespaces/default/pods", watchd.base_url()),
        json_body,
        "{}",
    )
    .await;
    assert_eq!(r.status, 405);
}
