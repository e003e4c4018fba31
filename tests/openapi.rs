//! OpenAPI v3 and v2 as kube-apiserver serves them, read by kubectl 1.33 unmodified:
//! `kubectl explain` of a built-in, a field path and a custom resource (v3, and v2 through
//! its protobuf), and `kubectl apply --dry-run=client --validate=strict` of good and bad
//! manifests (client-side validation against the v2 protobuf document). Over HTTP: the
//! hash-addressed v3 documents, their caching headers and redirects, and a CRD change
//! reaching its document and no other.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::http::get;
use support::kube::put_object;
use support::pki::{kubectl, kubectl_at, start_tls_with_tokens, stdout_ok, Pki};
use support::{Etcd, Watchd};

const CRD_KEY: &str =
    "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com";

/// widgets.example.com, served at v1, with a schema; `extra` adds a property to its spec.
fn widget_crd(extra: Option<&str>) -> Value {
    let mut spec_props = json!({
        "color": {"type": "string", "enum": ["red", "blue"], "description": "Color of the widget, as its maker names it."},
        "size": {"type": "integer", "description": "Size in centimetres."},
    });
    if let Some(name) = extra {
        spec_props[name] = json!({"type": "string", "description": format!("The {name}.")});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "uid": "crd-1"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "Widget is a thing the demo makes.",
                    "properties": {"spec": {"type": "object", "description": "WidgetSpec says what a widget is.",
                        "required": ["color"], "properties": spec_props}}}}}]}
    })
}

async fn cluster() -> (Etcd, Watchd, tempfile::TempDir) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    kv.put(CRD_KEY, widget_crd(None).to_string(), None)
        .await
        .expect("put CRD");
    let w = Watchd::start(&etcd.client_url(), &[]);
    wait_for_served(&w, "/apis/example.com/v1/widgets").await;
    (etcd, w, tempfile::tempdir().expect("tempdir"))
}

async fn wait_for_served(w: &Watchd, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if get(&format!("{}{path}", w.base_url()), &[]).await.status == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "{path} never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn kubectl_ok(server: &str, cache: &Path, args: &[&str]) -> String {
    stdout_ok(
        &kubectl_at(server, cache, args),
        &format!("kubectl {args:?}"),
    )
}

fn assert_has(out: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(out.contains(w), "missing {w:?} in:\n{out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_explain_reads_builtins_field_paths_and_custom_resources() {
    let (_etcd, w, cache) = cluster().await;
    let server = w.base_url();
    let c = cache.path();

    let pods = kubectl_ok(&server, c, &["explain", "pods"]);
    assert_has(
        &pods,
        &[
            "KIND:       Pod\n",
            "VERSION:    v1\n",
            "Pod is a collection of containers that can run on a host.",
            "metadata\t<ObjectMeta>",
            "spec\t<PodSpec>",
        ],
    );
    assert!(!pods.contains("GROUP:"), "the core group has none:\n{pods}");

    let containers = kubectl_ok(&server, c, &["explain", "pods.spec.containers"]);
    assert_has(
        &containers,
        &[
            "FIELD: containers <[]Container>",
            "List of containers belonging to the pod.",
            "image\t<string>",
            "name\t<string> -required-",
        ],
    );

    let deploy = kubectl_ok(&server, c, &["explain", "deployments.spec.replicas"]);
    assert_has(
        &deploy,
        &[
            "GROUP:      apps\n",
            "KIND:       Deployment\n",
            "FIELD: replicas <integer>",
        ],
    );

    let widgets = kubectl_ok(&server, c, &["explain", "widgets"]);
    assert_has(
        &widgets,
        &[
            "GROUP:      example.com\n",
            "KIND:       Widget\n",
            "Widget is a thing the demo makes.",
            "spec\t<Object>",
        ],
    );
    let color = kubectl_ok(&server, c, &["explain", "widgets.spec.color"]);
    assert_has(
        &color,
        &[
            "FIELD: color <string>",
            "Color of the widget, as its maker names it.",
        ],
    );

    // JSONSchemaProps has fields named like keywords (`$ref`, `allOf`): fields still.
    let props = kubectl_ok(
        &server,
        c,
        &["explain", "crd.spec.versions.schema.openAPIV3Schema"],
    );
    assert_has(&props, &["$ref\t<string>", "allOf\t<[]JSONSchemaProps>"]);

    // The v2 document, which kubectl reads as gnostic protobuf.
    let v2 = kubectl_ok(
        &server,
        c,
        &["explain", "pods.spec", "--output=plaintext-openapiv2"],
    );
    assert_has(
        &v2,
        &[
            "KIND:     Pod",
            "RESOURCE: spec <Object>",
            "containers\t<[]Object> -required-",
        ],
    );

    let missing = kubectl_at(&server, c, &["explain", "pods.spec.nosuchfield"]);
    assert!(!missing.status.success());
    assert_has(
        &String::from_utf8_lossy(&missing.stderr),
        &["field \"nosuchfield\" does not exist"],
    );
}

const GOOD_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: good
  namespace: default
spec:
  containers:
  - name: web
    image: nginx
    ports:
    - containerPort: 80
"#;

const BAD_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: bad
  namespace: default
spec:
  containers:
  - name: web
    image: nginx
    imagePullPolicyy: Always
    ports:
    - containerPort: "eighty"
"#;

const GOOD_WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: default
spec:
  color: blue
  size: 3
"#;

const BAD_WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w2
  namespace: default
spec:
  colour: blue
"#;

fn apply(server: &str, cache: &Path, manifest: &str) -> Output {
    let file = cache.join("manifest.yaml");
    std::fs::write(&file, manifest).expect("write manifest");
    let path = file.display().to_string();
    kubectl_at(
        server,
        cache,
        &[
            "apply",
            "--dry-run=client",
            "--validate=strict",
            "-f",
            &path,
        ],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_apply_validates_strictly_on_the_client_against_the_v2_document() {
    let (_etcd, w, cache) = cluster().await;
    let server = w.base_url();
    let c = cache.path();

    for (manifest, created) in [
        (GOOD_POD, "pod/good created (dry run)"),
        (GOOD_WIDGET, "widget.example.com/w1 created (dry run)"),
    ] {
        let out = apply(&server, c, manifest);
        assert!(
            out.status.success(),
            "{manifest}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_has(&String::from_utf8_lossy(&out.stdout), &[created]);
    }

    let bad = apply(&server, c, BAD_POD);
    assert!(!bad.status.success(), "a bad pod passed validation");
    assert_has(
        &String::from_utf8_lossy(&bad.stderr),
        &[
            "error validating data",
            "unknown field \"imagePullPolicyy\" in io.k8s.api.core.v1.Container",
            "invalid type for io.k8s.api.core.v1.ContainerPort.containerPort: got \"string\", expected \"integer\"",
        ],
    );

    let bad = apply(&server, c, BAD_WIDGET);
    assert!(!bad.status.success(), "a bad widget passed validation");
    assert_has(
        &String::from_utf8_lossy(&bad.stderr),
        &[
            "unknown field \"colour\" in com.example.v1.Widget.spec",
            "missing required field \"color\" in com.example.v1.Widget.spec",
        ],
    );
}

/// `protoc --decode` of `bytes` as `message` of `proto` in tests/data (gnostic's
/// messages), checked to hold no field the message does not define.
fn protoc_decode(bytes: &[u8], proto: &str, message: &str) -> String {
    use std::io::Write;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut child = Command::new("protoc")
        .arg(format!("--proto_path={}", data.display()))
        .arg(format!("--decode={message}"))
        .arg(proto)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protoc (scripts/install-deps.sh installs it)");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("protoc");
    writer.join().expect("writer").expect("write to protoc");
    assert!(
        out.status.success(),
        "protoc --decode: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoded = String::from_utf8_lossy(&out.stdout).into_owned();
    let unknown: Vec<&str> = decoded
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(
        unknown.is_empty(),
        "fields gnostic's {message} does not define: {unknown:?}"
    );
    decoded
}

fn hash_of(root: &Value, gv: &str) -> String {
    let url = root["paths"][gv]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("no {gv} in {root}"));
    let (path, hash) = url.split_once("?hash=").expect("hash in the URL");
    assert_eq!(path, format!("/openapi/v3/{gv}"));
    hash.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn v3_documents_are_hash_addressed_and_follow_crd_changes() {
    let (etcd, w, _cache) = cluster().await;
    let base = w.base_url();

    let root = get(&format!("{base}/openapi/v3"), &[]).await;
    assert_eq!(root.status, 200);
    assert_eq!(root.header("content-type"), Some("application/json"));
    let root = root.json();
    for gv in [
        "api/v1",
        "apis/apps/v1",
        "apis/resource.k8s.io/v1",
        "apis/example.com/v1",
    ] {
        hash_of(&root, gv);
    }
    let core = hash_of(&root, "api/v1");
    let widgets = hash_of(&root, "apis/example.com/v1");

    // The current hash: immutable, a year's caching, the hash as ETag.
    let url = format!("{base}/openapi/v3/api/v1?hash={core}");
    let doc = get(&url, &[]).await;
    assert_eq!(doc.status, 200);
    assert_eq!(doc.header("cache-control"), Some("public, immutable"));
    assert!(doc.header("expires").is_some());
    assert_eq!(doc.header("etag"), Some(format!("\"{core}\"").as_str()));
    let body = doc.json();
    assert_eq!(body["openapi"], "3.0.0");
    let pod = &body["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "Pod", "version": "v1"}])
    );
    assert_eq!(
        body["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"]
            ["x-kubernetes-group-version-kind"],
        json!({"group": "", "kind": "Pod", "version": "v1"})
    );

    // Revalidation, and the same document without a hash (not immutable).
    let etag = format!("\"{core}\"");
    let again = get(&url, &[("if-none-match", &etag)]).await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    let plain = get(&format!("{base}/openapi/v3/api/v1"), &[]).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("cache-control"), Some("no-cache, private"));
    assert_eq!(plain.body, doc.body);

    // gzip past 128 KiB, as every other body.
    let gz = get(&url, &[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert!(
        gz.body.len() * 2 < doc.body.len(),
        "gzip: {} of {} bytes",
        gz.body.len(),
        doc.body.len()
    );

    // Each is JSON or gnostic protobuf; protoc reads the v3 protobuf with gnostic's
    // message definitions, every field known.
    let refused = get(&url, &[("accept", "application/yaml")]).await;
    assert_eq!(refused.status, 406);
    let pb = get(
        &url,
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v3.v1.0+protobuf",
        )],
    )
    .await;
    assert_eq!(pb.status, 200);
    assert_eq!(
        pb.header("content-type"),
        Some("application/com.github.proto-openapi.spec.v3.v1.0+protobuf")
    );
    assert_eq!(pb.header("etag"), Some(etag.as_str()));
    let decoded = protoc_decode(&pb.body, "gnostic_openapi_v3.proto", "openapi.v3.Document");
    assert_has(
        &decoded,
        &[
            "openapi: \"3.0.0\"",
            "name: \"/api/v1/namespaces/{namespace}/pods\"",
            "operation_id: \"listCoreV1NamespacedPod\"",
            "name: \"io.k8s.api.core.v1.Pod\"",
            "_ref: \"#/components/schemas/io.k8s.api.core.v1.PodSpec\"",
            "name: \"x-kubernetes-group-version-kind\"",
        ],
    );
    // The custom resource's document too: enums, required fields, extensions.
    let crd_url = format!("{base}/openapi/v3/apis/example.com/v1?hash={widgets}");
    let pb = get(
        &crd_url,
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
        )],
    )
    .await;
    assert_eq!(pb.status, 200);
    let decoded = protoc_decode(&pb.body, "gnostic_openapi_v3.proto", "openapi.v3.Document");
    assert_has(
        &decoded,
        &[
            "name: \"com.example.v1.Widget\"",
            "required: \"color\"",
            "yaml: \"\\\"blue\\\"\"",
            "operation_id: \"listExampleComV1NamespacedWidget\"",
        ],
    );
    // The discovery document is JSON whatever is asked for.
    let root_pb = get(
        &format!("{base}/openapi/v3"),
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v3.v1.0+protobuf",
        )],
    )
    .await;
    assert_eq!(root_pb.status, 200);
    assert_eq!(root_pb.header("content-type"), Some("application/json"));
    let v2 = get(&format!("{base}/openapi/v2"), &[]).await;
    assert_eq!(v2.status, 200);
    let v2 = v2.json();
    assert_eq!(v2["swagger"], "2.0");
    assert_eq!(
        v2["definitions"]["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    let pb = get(
        &format!("{base}/openapi/v2"),
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )],
    )
    .await;
    assert_eq!(pb.status, 200);
    assert_eq!(
        pb.header("content-type"),
        Some("application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    );
    let decoded = protoc_decode(&pb.body, "gnostic_openapi_v2.proto", "openapi.v2.Document");
    assert_has(
        &decoded,
        &[
            "swagger: \"2.0\"",
            "name: \"io.k8s.api.apps.v1.Deployment\"",
            "_ref: \"#/definitions/io.k8s.api.apps.v1.DeploymentSpec\"",
            "name: \"com.example.v1.Widget\"",
            "name: \"x-kubernetes-group-version-kind\"",
        ],
    );
    assert_eq!(
        get(&format!("{base}/openapi/v3/apis/nosuch.io/v1"), &[])
            .await
            .status,
        404
    );

    // A changed CRD: its document gets a new hash, the old one redirects there, and the
    // built-ins' documents keep theirs.
    let mut watch =
        support::http::watch(&format!("{base}/apis/example.com/v1/widgets?watch=1"), &[]).await;
    let mut kv = etcd.client().await;
    kv.put(CRD_KEY, widget_crd(Some("shape")).to_string(), None)
        .await
        .expect("put CRD");
    let deadline = Instant::now() + Duration::from_secs(20);
    let root = loop {
        let root = get(&format!("{base}/openapi/v3"), &[]).await.json();
        if hash_of(&root, "apis/example.com/v1") != widgets {
            break root;
        }
        assert!(
            Instant::now() < deadline,
            "the CRD change never reached /openapi/v3"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(hash_of(&root, "api/v1"), core);
    let current = hash_of(&root, "apis/example.com/v1");
    let stale = get(
        &format!("{base}/openapi/v3/apis/example.com/v1?hash={widgets}"),
        &[],
    )
    .await;
    assert_eq!(stale.status, 301);
    assert_eq!(
        stale.header("etag"),
        Some(format!("\"{current}\"").as_str())
    );
    assert_eq!(stale.header("cache-control"), Some("no-cache, private"));
    assert_eq!(
        stale.header("location"),
        Some(format!("/openapi/v3/apis/example.com/v1?hash={current}").as_str())
    );
    // A change of schema alone keeps what is served: the watch opened before it goes on.
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default", "uid": "w-1"}, "spec": {"color": "red"}});
    kv.put(
        "/registry/example.com/widgets/default/w1",
        widget.to_string(),
        None,
    )
    .await
    .expect("put widget");
    let event = watch
        .next_event(Duration::from_secs(10))
        .await
        .expect("the watch opened before the schema change sees the new widget");
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], "w1");
    let doc = get(
        &format!("{base}/openapi/v3/apis/example.com/v1?hash={current}"),
        &[],
    )
    .await
    .json();
    assert_eq!(
        doc["components"]["schemas"]["com.example.v1.Widget"]["properties"]["spec"]["properties"]
            ["shape"]["description"],
        "The shape."
    );
}

/// A ClusterRole of non-resource URLs, bound to one user.
async fn grant_urls(kv: &mut etcd_client::Client, user: &str, urls: &[&str]) {
    let role = json!({"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": user}, "rules": [{"verbs": ["get"], "nonResourceURLs": urls}]});
    let binding = json!({"kind": "ClusterRoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]});
    put_object(kv, &format!("/registry/clusterroles/{user}"), &role).await;
    put_object(
        kv,
        &format!("/registry/clusterrolebindings/{user}"),
        &binding,
    )
    .await;
}

/// Over TLS with tokens and RBAC, as a cluster serves it: the documents are non-resource
/// URLs, readable by whom `system:discovery`'s rule (`/openapi`, `/openapi/*`) is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_over_tls_with_a_token_needs_the_openapi_urls() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let discovery = ["/api", "/api/*", "/apis", "/apis/*", "/version"];
    let mut with_openapi = discovery.to_vec();
    with_openapi.extend(["/openapi", "/openapi/*"]);
    grant_urls(&mut kv, "bob", &with_openapi).await;
    grant_urls(&mut kv, "carol", &discovery).await;
    let pki = Pki::new();
    let (_watchd, server) = start_tls_with_tokens(
        &pki,
        &etcd.client_url(),
        "bob-token,bob,uid-bob\ncarol-token,carol,uid-carol\n",
        &[],
    );
    let bob = pki.kubeconfig("bob.kubeconfig", &server, None, Some("bob-token"));
    let carol = pki.kubeconfig("carol.kubeconfig", &server, None, Some("carol-token"));

    let out = kubectl(
        &bob,
        &pki.path("cache-bob"),
        &["explain", "pods.spec.nodeName"],
    );
    assert_has(
        &stdout_ok(&out, "bob's explain"),
        &["KIND:       Pod\n", "FIELD: nodeName <string>"],
    );
    let out = kubectl(&carol, &pki.path("cache-carol"), &["explain", "pods"]);
    assert!(!out.status.success(), "carol may not read /openapi");
    // kube-apiserver's Status for v3 and v2 alike; kubectl, falling back to v2 and
    // reading it as protobuf, prints no more than this.
    assert_has(
        &String::from_utf8_lossy(&out.stderr),
        &["Error from server (Forbidden)"],
    );
}
