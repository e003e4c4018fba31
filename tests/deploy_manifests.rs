//! The manifests in deploy/ (issue #25, items 1 and 3): each Kustomize overlay rendered
//! by kubectl's own kustomize, and the static Pod, read as Kubernetes reads them: every
//! object is one of its kind to `k8s-openapi` (the 1.34 schema) with no field it does
//! not know (each is read into the typed object and written back, and nothing may be
//! lost: a misspelt or misplaced field would be), and every pod meets Pod Security's
//! "restricted" level where the deployment allows it, with probes, a disruption budget
//! and the shutdown flags a fleet needs. No cluster runs here: what a cluster alone
//! checks (admission, the image) is not checked.

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

mod support;

fn deploy(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `kubectl kustomize deploy/overlays/<overlay>`: what `kubectl apply -k` would apply.
fn render(overlay: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/overlays")
        .join(overlay);
    let out = std::process::Command::new(support::pki::KUBECTL)
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The YAML documents of a file, as JSON values.
fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).expect("a YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// Every member of `written` is in `read` with the same value: what a typed read kept.
fn lost(written: &Value, read: &Value, at: &str, out: &mut Vec<String>) {
    match (written, read) {
        (Value::Object(w), Value::Object(r)) => {
            for (k, v) in w {
                match r.get(k) {
                    Some(rv) => lost(v, rv, &format!("{at}.{k}"), out),
                    None => out.push(format!("{at}.{k}")),
                }
            }
        }
        (Value::Array(w), Value::Array(r)) if w.len() == r.len() => {
            for (i, (a, b)) in w.iter().zip(r).enumerate() {
                lost(a, b, &format!("{at}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{at}: {a} read as {b}")),
    }
}

/// `doc` read as a `T` and written back loses nothing.
fn typed<T: DeserializeOwned + Serialize>(doc: &Value, what: &str) -> T {
    let object: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what}: not a valid object of its kind: {e}"));
    let back = serde_json::to_value(&object).expect("serializes");
    let mut missing = Vec::new();
    lost(doc, &back, "", &mut missing);
    assert!(
        missing.is_empty(),
        "{what}: fields the schema does not know: {missing:?}"
    );
    object
}

/// Reads every object of a rendered overlay by its kind; the Deployments.
fn read_all(file: &str, text: &str) -> Vec<Deployment> {
    let mut deployments = Vec::new();
    for doc in documents(text) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let what = format!("{file}: {kind} {}", doc["metadata"]["name"]);
        match kind.as_str() {
            "Deployment" => deployments.push(typed::<Deployment>(&doc, &what)),
            "Service" => drop(typed::<Service>(&doc, &what)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(&doc, &what)),
            "ConfigMap" => drop(typed::<ConfigMap>(&doc, &what)),
            "ClusterRole" => drop(typed::<ClusterRole>(&doc, &what)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(&doc, &what)),
            "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(&doc, &what)),
            "NetworkPolicy" => drop(typed::<NetworkPolicy>(&doc, &what)),
            "Pod" => drop(typed::<Pod>(&doc, &what)),
            other => panic!("{what}: a kind this test does not read: {other}"),
        }
    }
    deployments
}

fn kinds(text: &str) -> Vec<String> {
    documents(text)
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A container as Pod Security's "restricted" level asks, with the probes and flags a
/// replica in a fleet needs.
fn check_container(c: &Container, what: &str) {
    let sc = c.security_context.as_ref().expect("a securityContext");
    assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
    assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
    let drop = sc.capabilities.as_ref().and_then(|c| c.drop.clone());
    assert_eq!(drop, Some(vec!["ALL".to_string()]), "{what}: capabilities");
    for (probe, path) in [
        (&c.liveness_probe, "/livez"),
        (&c.readiness_probe, "/readyz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("{what}: a probe of {path}"));
        assert_eq!(get.path.as_deref(), Some(path), "{what}");
    }
}

fn check_deployment(d: &Deployment, what: &str, token: bool) {
    let pod = d
        .spec
        .as_ref()
        .expect("a spec")
        .template
        .spec
        .as_ref()
        .expect("a pod spec");
    let sc = pod
        .security_context
        .as_ref()
        .expect("a pod securityContext");
    assert_eq!(sc.run_as_non_root, Some(true), "{what}");
    let seccomp = sc.seccomp_profile.as_ref().map(|p| p.type_.as_str());
    assert_eq!(seccomp, Some("RuntimeDefault"), "{what}");
    assert_eq!(
        pod.automount_service_account_token,
        (!token).then_some(false),
        "{what}: a token only where it is the identity upstream"
    );
    assert!(pod.topology_spread_constraints.is_some(), "{what}: spread");
    let grace = pod.termination_grace_period_seconds.unwrap_or(30);
    for c in &pod.containers {
        check_container(c, what);
        assert!(c.startup_probe.is_some(), "{what}: a startup probe");
        let args = c.args.clone().unwrap_or_default();
        let secs = |flag: &str| {
            args.iter()
                .find_map(|a| a.strip_prefix(&format!("--{flag}=")))
                .and_then(|v| v.strip_suffix('s'))
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or_else(|| panic!("{what}: --{flag}"))
        };
        let stop =
            secs("shutdown-delay-duration") + secs("shutdown-watch-termination-grace-period");
        assert!(
            grace > stop,
            "{what}: terminationGracePeriodSeconds {grace} ≤ {stop}"
        );
        assert!(
            !args.iter().any(|a| a.starts_with("--anonymous-auth=true")),
            "{what}: the probes need no anonymous access"
        );
    }
}

#[test]
fn standalone_is_restricted_fenced_and_kept_available() {
    let text = render("standalone");
    let deployments = read_all("standalone", &text);
    assert_eq!(deployments.len(), 1);
    check_deployment(&deployments[0], "standalone", false);
    let kinds = kinds(&text);
    for kind in [
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Service",
        "ServiceAccount",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "standalone: no {kind}");
    }
    for doc in documents(&text) {
        assert_eq!(doc["metadata"]["namespace"], "kube-system", "{doc}");
    }
}

#[test]
fn upstream_is_restricted_and_kept_available() {
    let text = render("upstream");
    let deployments = read_all("upstream", &text);
    assert_eq!(deployments.len(), 1);
    check_deployment(&deployments[0], "upstream", true);
    let kinds = kinds(&text);
    for kind in [
        "PodDisruptionBudget",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "upstream: no {kind}");
    }
}

/// The static Pod beside kube-apiserver is a file of its own (kubeadm upgrade rewrites
/// kube-apiserver.yaml, not it); root, as the kubeadm key files are root-only.
#[test]
fn the_static_pod_knows_its_fields() {
    let text = deploy("static-pod.yaml");
    let docs = documents(&text);
    assert_eq!(docs.len(), 1);
    let pod: Pod = typed(&docs[0], "static-pod.yaml");
    let spec = pod.spec.expect("a spec");
    assert_eq!(spec.host_network, Some(true));
    let seccomp = spec
        .security_context
        .and_then(|s| s.seccomp_profile)
        .map(|p| p.type_);
    assert_eq!(seccomp.as_deref(), Some("RuntimeDefault"));
    assert_eq!(spec.containers.len(), 1);
    check_container(&spec.containers[0], "static-pod.yaml");
    assert!(spec.containers[0].startup_probe.is_some());
    let args = spec.containers[0].args.clone().unwrap_or_default();
    assert!(!args.iter().any(|a| a.starts_with("--anonymous-auth=true")));
}

/// The check itself: a misspelt field is caught, not dropped silently.
#[test]
fn a_misspelt_field_is_caught() {
    let doc = documents(&render("standalone"))
        .into_iter()
        .find(|d| d["kind"] == "Service")
        .expect("a Service");
    let mut bad = doc.clone();
    bad["spec"]["selectr"] = bad["spec"]["selector"].clone();
    let caught = std::panic::catch_unwind(|| typed::<Service>(&bad, "bad"));
    assert!(caught.is_err(), "a misspelt field passed");
    typed::<Service>(&doc, "good");
}

/// The least-privilege overlay: the upstream one with a ClusterRole that reads every
/// built-in resource but Secrets and impersonates no one, and nothing passed through.
#[test]
fn upstream_least_privilege_reads_no_secret_and_impersonates_no_one() {
    let text = render("upstream-least-privilege");
    let deployments = read_all("upstream-least-privilege", &text);
    assert_eq!(deployments.len(), 1);
    check_deployment(&deployments[0], "upstream-least-privilege", true);
    let pod = deployments[0]
        .spec
        .as_ref()
        .expect("a spec")
        .template
        .spec
        .clone();
    let args = pod.unwrap().containers[0].args.clone().unwrap_or_default();
    assert!(args.iter().any(|a| a == "--proxy=false"), "{args:?}");
    let role = least_privilege_role();
    for rule in &role.rules.clone().unwrap_or_default() {
        assert!(
            !rule.verbs.iter().any(|v| v == "impersonate" || v == "*"),
            "{rule:?}"
        );
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        let core = groups.iter().any(|g| g.is_empty() || g == "*");
        let secrets = resources.iter().any(|r| r == "secrets" || r == "*");
        assert!(!(core && secrets), "a rule that reads Secrets: {rule:?}");
    }
}

fn least_privilege_role() -> ClusterRole {
    let text = render("upstream-least-privilege");
    let doc = documents(&text)
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .expect("a ClusterRole");
    typed(&doc, "upstream-least-privilege: ClusterRole")
}

/// The least-privilege ClusterRole as an API server applies it: a watchd authorizing
/// with RBAC (its own, read from etcd) holds the role bound to watchd's user, and a
/// second watchd fed by it as that user caches pods and every other resource it may
/// read, but not Secrets (its list is refused: not served, nothing passed through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_least_privilege_role_caches_all_but_secrets() {
    use support::kube::{configmap, get_json, pod, put_json};
    let mut role = serde_json::to_value(least_privilege_role()).unwrap();
    role["apiVersion"] = "rbac.authorization.k8s.io/v1".into();
    role["kind"] = "ClusterRole".into();
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "watchd-upstream"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "watchd-upstream"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
            "name": "watchd"}],
    });
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "token", "namespace": "default", "uid": "s-1"},
        "data": {"k": "dg=="},
    });
    let etcd = support::Etcd::start();
    let mut kv = etcd.client().await;
    put_json(&mut kv, "/registry/clusterroles/watchd-upstream", &role).await;
    put_json(
        &mut kv,
        "/registry/clusterrolebindings/watchd-upstream",
        &binding,
    )
    .await;
    put_json(
        &mut kv,
        "/registry/pods/default/web",
        &pod("default", "web", &[]),
    )
    .await;
    put_json(
        &mut kv,
        "/registry/configmaps/default/c",
        &configmap("default", "c", "v"),
    )
    .await;
    put_json(&mut kv, "/registry/secrets/default/token", &secret).await;

    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "watchd-token,watchd,uid-w\nadmin-token,admin,uid-a,system:masters\n",
    )
    .unwrap();
    let tokens_arg = format!("--token-auth-file={}", tokens.display());
    let apiserver = support::Watchd::start(
        &etcd.client_url(),
        &[tokens_arg.as_str(), "--authorization-mode=RBAC"],
    );
    let kubeconfig = dir.path().join("upstream.kubeconfig");
    support::pki::token_kubeconfig(&kubeconfig, &apiserver.base_url(), "watchd-token");
    let kubeconfig_arg = format!("--upstream-kubeconfig={}", kubeconfig.display());
    let tier =
        support::Watchd::start_with_probe("", &[kubeconfig_arg.as_str(), "--proxy=false"], None);
    let base = tier.base_url();
    let pods = get_json(&format!("{base}/api/v1/namespaces/default/pods")).await;
    assert_eq!(support::kube::item_names(&pods), ["web"]);
    let cms = get_json(&format!("{base}/api/v1/namespaces/default/configmaps")).await;
    assert_eq!(support::kube::item_names(&cms), ["c"]);
    let r = support::http::get(&format!("{base}/api/v1/namespaces/default/secrets"), &[]).await;
    assert_eq!(r.status, 404, "Secrets are not served: {}", r.text());
    assert!(
        tier.log()
            .contains("does not serve this resource to watchd"),
        "the log says why: {}",
        tier.log()
    );
}
