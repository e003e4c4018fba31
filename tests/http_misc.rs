//! Everything around get/list/watch, against a real etcd: errors for requests watchd
//! does not serve, content negotiation, discovery, health and metrics, values it cannot
//! read, protobuf and custom resources, and kubectl itself.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::kube::*;
use support::{http, storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf (custom
// resources are JSON in both).
storage_tests! {
    table_accept_with_json_fallback_returns_json,
    metrics_expose_the_applied_revision,
    custom_resources_of_a_crd_stored_before_start_are_served,
    crd_created_after_start_becomes_served,
    kubectl_get_pods_in_all_namespaces_lists_them,
    kubectl_get_pods_as_json_has_the_items,
    kubectl_get_pods_in_chunks_returns_every_pod,
    kubectl_get_nodes_lists_them,
    kubectl_get_one_pod_by_name,
}

/// kubectl as installed on these machines (Google Cloud SDK component).
const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// Upper bound for one kubectl run.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// An etcd with a few pods, nodes and namespaces (in the scenario's storage format), and
/// a watchd serving it.
struct Fixture {
    watchd: Watchd,
    kv: etcd_client::Client,
    /// Kept alive for the test's duration; dropped last.
    _etcd: Etcd,
}

impl Fixture {
    async fn start(args: &[&str]) -> Fixture {
        let etcd = Etcd::start();
        let mut kv = etcd.client().await;
        put_pod(&mut kv, "default", "web", &[("app", "web")]).await;
        put_pod(&mut kv, "kube-system", "dns", &[]).await;
        put_object(&mut kv, "/registry/minions/node-1", &node("node-1")).await;
        put_object(
            &mut kv,
            "/registry/namespaces/default",
            &namespace("default"),
        )
        .await;
        let watchd = Watchd::start(&etcd.client_url(), args);
        Fixture {
            watchd,
            kv,
            _etcd: etcd,
        }
    }

    fn base(&self) -> String {
        self.watchd.base_url()
    }
}

// One storage format: the 405s come before any object is read.
#[tokio::test]
async fn write_methods_are_method_not_allowed() {
    let f = Fixture::start(&[]).await;
    let base = f.base();
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        for path in [
            "/api/v1/namespaces/default/pods",
            "/api/v1/namespaces/default/pods/web",
            "/api/v1/nodes/node-1",
        ] {
            let resp = http::request(
                method,
                &format!("{base}{path}"),
                &[("content-type", "application/json")],
                "{}",
            )
            .await;
            let status = assert_status(&resp, 405, "MethodNotAllowed");
            assert!(
                status["message"].as_str().unwrap().contains(method),
                "{method} {path}: {status}"
            );
        }
    }
    // Nothing changed.
    let mut kv = f.kv.clone();
    let stored = mod_revision(&mut kv, &pod_key("default", "web")).await;
    let web = get_json(&format!("{base}/api/v1/namespaces/default/pods/web")).await;
    assert_eq!(rv(&web), stored);
}

// One storage format: paths that name no resource read no object.
#[tokio::test]
async fn unknown_paths_and_resources_are_not_found_status() {
    let f = Fixture::start(&[]).await;
    let base = f.base();
    for path in [
        "/nope",
        "/api/v2",
        "/api/v1/widgets",
        "/api/v1/namespaces/default/widgets",
        "/apis/apps/v1/pods",
        "/apis/nope.example/v1/things",
        "/apis/nope.example/v1",
        "/api/v1/namespaces/default/pods/web/bogus",
    ] {
        let status = get_status(&format!("{base}{path}"), 404, "NotFound").await;
        assert!(!status["message"].as_str().unwrap().is_empty(), "{path}");
    }
}

// JSON storage only: its 406s are for JSON-stored pods (the protobuf case writes a fixture raw).
#[tokio::test]
async fn protobuf_only_accept_is_not_acceptable() {
    let mut f = Fixture::start(&[]).await;
    let base = f.base();
    for path in ["/api/v1/pods", "/api/v1/namespaces/default/pods/web"] {
        let resp = http::get(&format!("{base}{path}"), &[("accept", "text/html")]).await;
        assert_status(&resp, 406, "NotAcceptable");
        // Built-ins stored as JSON (this fixture's pods) are encoded, as kube-apiserver does.
        let pb = "application/vnd.kubernetes.protobuf";
        let resp = http::get(&format!("{base}{path}"), &[("accept", pb)]).await;
        assert_eq!(resp.status, 200, "{path}: {}", resp.text());
        assert!(resp.body.starts_with(b"k8s\0"), "{path}");
    }
    // A built-in stored as protobuf (as kube-apiserver stores it) is served as protobuf.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/k8s-api-testdata/v1.34.0/core.v1.Pod.pb");
    // The fixture comes with ../shared and CI always has it: its absence fails.
    let pb = std::fs::read(&fixture)
        .unwrap_or_else(|e| panic!("fixture {} is unreadable: {e}", fixture.display()));
    let rev = put_raw(&mut f.kv, "/registry/pods/namespaceValue/nameValue", pb).await;
    let url = format!("{base}/api/v1/namespaces/namespaceValue/pods/nameValue?resourceVersion={rev}&resourceVersionMatch=NotOlderThan");
    let resp = http::get(&url, &[("accept", "application/vnd.kubernetes.protobuf")]).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("application/vnd.kubernetes.protobuf")
    );
    assert!(resp.body.starts_with(b"k8s\0"));
    // Custom resources are JSON only.
    put_json(
        &mut f.kv,
        "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
        &crd("example.com", "widgets", "Widget", "Namespaced"),
    )
    .await;
    let url = format!("{base}/apis/example.com/v1/namespaces/default/widgets");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let resp = http::get(&url, &[("accept", "application/vnd.kubernetes.protobuf")]).await;
        if resp.status == 406 || Instant::now() > deadline {
            assert_status(&resp, 406, "NotAcceptable");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn table_accept_with_json_fallback_returns_json() {
    let f = Fixture::start(&[]).await;
    let base = f.base();
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let resp = http::get(
        &format!("{base}/api/v1/namespaces/default/pods"),
        &[("accept", accept)],
    )
    .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json")));
    let body = resp.json();
    match body["kind"].as_str() {
        Some("PodList") => assert_eq!(item_names(&body), ["web"]),
        Some("Table") => {
            assert_eq!(body["apiVersion"], "meta.k8s.io/v1");
            assert_eq!(body["rows"][0]["cells"][0], "web", "{body}");
        }
        other => panic!("expected a PodList or a Table, got {other:?}: {body}"),
    }
}

// One storage format: the 400s come from the query alone, before any object is read.
#[tokio::test]
async fn malformed_query_parameters_are_bad_requests() {
    let f = Fixture::start(&[]).await;
    let base = f.base();
    for query in [
        "/api/v1/pods?limit=abc",
        "/api/v1/pods?resourceVersion=xyz",
        "/api/v1/pods?resourceVersion=-3",
        "/api/v1/namespaces/default/pods/web?resourceVersion=xyz",
        "/api/v1/pods?watch=true&timeoutSeconds=soon",
        "/api/v1/pods?watch=maybe",
    ] {
        let status = get_status(&format!("{base}{query}"), 400, "BadRequest").await;
        assert!(!status["message"].as_str().unwrap().is_empty(), "{query}");
    }
}

/// Sends `GET target` on a raw connection (the `http` crate refuses URIs over 64 KiB) and
/// returns the status code and body; bounded by [`http::REQUEST_TIMEOUT`].
async fn raw_get(addr: std::net::SocketAddr, target: &str) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let head = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        conn.write_all(head.as_bytes()).await.expect("send request");
        let mut response = Vec::new();
        conn.read_to_end(&mut response)
            .await
            .expect("read response");
        response
    };
    let response = tokio::time::timeout(http::REQUEST_TIMEOUT, exchange)
        .await
        .expect("no complete response: the server hung on a long request line");
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response head");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line: {head}"));
    (code, response[split + 4..].to_vec())
}

// One storage format: it is about the request line's length, not objects.
#[tokio::test]
async fn oversized_query_string_is_bad_request() {
    let f = Fixture::start(&[]).await;
    // Past watchd's own limit (32 KiB) but within what HTTP/1 parsing accepts: a Status.
    let selector = vec!["a=b"; 12_000].join(",");
    assert!(selector.len() > 40_000);
    let (code, body) = raw_get(
        f.watchd.http_addr(),
        &format!("/api/v1/pods?labelSelector={selector}"),
    )
    .await;
    assert_eq!(code, 400, "body: {}", String::from_utf8_lossy(&body));
    let status: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "body is not a Status ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    });
    check_status(&status, 400, "BadRequest");
    // Past 64 KiB the HTTP parser itself answers 414 URI Too Long at once (hyper's fixed
    // limit, before any handler runs): still a clear answer, never a hang.
    let huge = vec!["a=b"; 26_000].join(",");
    let (code, _) = raw_get(
        f.watchd.http_addr(),
        &format!("/api/v1/pods?labelSelector={huge}"),
    )
    .await;
    assert_eq!(code, 414);
    // The server is still answering.
    get_json(&format!("{}/api/v1/pods", f.base())).await;
}

// One storage format: discovery does not depend on stored objects.
#[tokio::test]
async fn discovery_documents_list_served_groups_and_resources() {
    let f = Fixture::start(&[]).await;
    let base = f.base();
    let api = get_json(&format!("{base}/api")).await;
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));

    let apis = get_json(&format!("{base}/apis")).await;
    assert_eq!(apis["kind"], "APIGroupList");
    let apps = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "apps")
        .expect("apps group");
    assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
    assert!(
        apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["name"] != ""),
        "no core group in /apis"
    );

    let v1 = get_json(&format!("{base}/api/v1")).await;
    assert_eq!(v1["kind"], "APIResourceList");
    assert_eq!(v1["groupVersion"], "v1");
    let resource = |list: &Value, name: &str| -> Value {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {list}"))
    };
    let pods = resource(&v1, "pods");
    assert_eq!(pods["kind"], "Pod");
    assert_eq!(pods["namespaced"], true);
    assert_eq!(pods["verbs"], json!(["get", "list", "watch"]));
    assert!(
        pods["shortNames"]
            .as_array()
            .unwrap()
            .contains(&json!("po")),
        "{pods}"
    );
    let nodes = resource(&v1, "nodes");
    assert_eq!(
        (nodes["kind"].as_str(), nodes["namespaced"].as_bool()),
        (Some("Node"), Some(false))
    );

    let apps_v1 = get_json(&format!("{base}/apis/apps/v1")).await;
    assert_eq!(apps_v1["groupVersion"], "apps/v1");
    let deployments = resource(&apps_v1, "deployments");
    assert_eq!(deployments["kind"], "Deployment");
    assert_eq!(deployments["namespaced"], true);
    assert_eq!(deployments["verbs"], json!(["get", "list", "watch"]));

    let version = get_json(&format!("{base}/version")).await;
    assert_eq!(version["major"], "1");
    assert!(
        version["minor"].as_str().is_some_and(|m| !m.is_empty()),
        "{version}"
    );
    assert!(
        version["gitVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.")),
        "{version}"
    );
}

// One storage format: health checks do not depend on how objects are stored.
#[tokio::test]
async fn health_endpoints_report_their_checks() {
    let f = Fixture::start(&[]).await;
    let base = f.base();
    for path in [
        "/livez",
        "/readyz",
        "/healthz",
        "/readyz/etcd-watch",
        "/readyz/initial-sync",
        "/healthz?exclude=initial-sync",
    ] {
        let resp = http::get(&format!("{base}{path}"), &[]).await;
        assert_eq!((resp.status, resp.text().as_str()), (200, "ok"), "{path}");
    }
    let resp = http::get(&format!("{base}/readyz?verbose"), &[]).await;
    assert_eq!(resp.status, 200);
    let text = resp.text();
    let lines: Vec<&str> = text.lines().collect();
    for check in ["ping", "initial-sync", "etcd-watch"] {
        assert!(lines.contains(&format!("[+]{check} ok").as_str()), "{text}");
    }
    assert_eq!(lines.last(), Some(&"readyz check passed"), "{text}");
    let text = http::get(&format!("{base}/healthz?verbose&exclude=initial-sync"), &[])
        .await
        .text();
    assert!(
        text.lines().any(|l| l == "[+]initial-sync excluded: ok"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l == "[+]initial-sync ok"), "{text}");

    get_status(&format!("{base}/readyz/nope"), 404, "NotFound").await;
}

async fn metrics_expose_the_applied_revision() {
    let f = Fixture::start(&[]).await;
    let base = f.base();
    let mut kv = f.kv.clone();
    let last = put_pod(&mut kv, "default", "another", &[]).await;
    get_json(&format!("{base}/api/v1/pods")).await;
    let resp = http::get(&format!("{base}/metrics"), &[]).await;
    assert_eq!(resp.status, 200);
    let text = resp.text();
    let applied = metric(&text, "watchd_applied_revision", &[])
        .unwrap_or_else(|| panic!("no watchd_applied_revision in\n{text}"));
    assert!(
        applied >= last as f64,
        "applied {applied} < last write {last}"
    );
    // What operators of kube-apiserver's cache look at: the history per resource, how
    // long consistent reads waited (the list above was one), which build runs.
    let pods = ["resource=\"pods\""];
    let held = metric(&text, "watchd_history_events", &pods).unwrap_or_else(|| panic!("{text}"));
    assert!(held >= 1.0, "the pod's event is in the history: {held}");
    let oldest =
        metric(&text, "watchd_history_oldest_revision", &pods).unwrap_or_else(|| panic!("{text}"));
    assert!(
        oldest > 0.0 && oldest < last as f64,
        "oldest {oldest}, last {last}"
    );
    let waited = metric(&text, "watchd_consistent_read_wait_seconds_count", &pods)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(waited >= 1.0, "{waited}");
    assert!(
        text.contains("watchd_consistent_read_wait_seconds_bucket{resource=\"pods\",le=\"60\"}"),
        "buckets up to a minute"
    );
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    assert_eq!(metric(&text, "watchd_build_info", &[&version]), Some(1.0));
    // The list above, counted once its body ended.
    let listed =
        metric(&text, "watchd_list_objects_total", &pods).unwrap_or_else(|| panic!("{text}"));
    assert!(listed >= 1.0, "{listed}");
    let bytes = metric(&text, "watchd_list_bytes_total", &pods).unwrap_or_else(|| panic!("{text}"));
    assert!(bytes > 100.0, "{bytes}");
    let lists = metric(&text, "watchd_list_duration_seconds_count", &pods)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(lists >= 1.0, "{lists}");
    let init =
        metric(&text, "watchd_resource_init_seconds", &pods).unwrap_or_else(|| panic!("{text}"));
    assert!(
        init > 0.0 && init < 60.0,
        "pods loaded {init} s after the start"
    );
    // The process metrics Prometheus's client libraries export.
    for (name, floor) in [
        ("process_resident_memory_bytes", 1e6),
        ("process_virtual_memory_bytes", 1e6),
        ("process_open_fds", 3.0),
        ("process_max_fds", 3.0),
        ("process_start_time_seconds", 1.7e9),
    ] {
        let v = metric(&text, name, &[]).unwrap_or_else(|| panic!("no {name}"));
        assert!(v >= floor, "{name} {v}");
    }
    assert!(metric(&text, "process_cpu_seconds_total", &[]).is_some());
}

/// The count of values of `resource` skipped for `reason`, from `/metrics`.
/// Appends a protobuf length-delimited field.
fn pb_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    pb_varint(out, field << 3 | 2);
    pb_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A pod as kube-apiserver stores it: `k8s\0` + runtime.Unknown{typeMeta, raw: Pod}.
fn protobuf_pod(ns: &str, name: &str, labels: &[(&str, &str)], created: u64) -> Vec<u8> {
    let mut meta = Vec::new();
    pb_field(&mut meta, 1, name.as_bytes());
    pb_field(&mut meta, 3, ns.as_bytes());
    pb_field(&mut meta, 5, format!("uid-{name}").as_bytes());
    let mut time = Vec::new();
    pb_varint(&mut time, 1 << 3); // seconds, varint
    pb_varint(&mut time, created);
    pb_field(&mut meta, 8, &time);
    for (k, v) in labels {
        let mut entry = Vec::new();
        pb_field(&mut entry, 1, k.as_bytes());
        pb_field(&mut entry, 2, v.as_bytes());
        pb_field(&mut meta, 11, &entry);
    }
    let mut pod = Vec::new();
    pb_field(&mut pod, 1, &meta);
    pb_field(&mut pod, 2, &[]); // spec
    pb_field(&mut pod, 3, &[]); // status
    let mut type_meta = Vec::new();
    pb_field(&mut type_meta, 1, b"v1");
    pb_field(&mut type_meta, 2, b"Pod");
    let mut value = b"k8s\x00".to_vec();
    pb_field(&mut value, 1, &type_meta);
    pb_field(&mut value, 2, &pod);
    pb_field(&mut value, 3, b""); // contentEncoding
    pb_field(&mut value, 4, b""); // contentType
    value
}

// One storage format: it writes its protobuf pods raw, next to no other objects.
#[tokio::test]
async fn protobuf_pod_is_served_with_its_metadata() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let labels = [("app", "proto"), ("app.kubernetes.io/part-of", "demo")];
    let r1 = put_raw(
        &mut kv,
        &pod_key("pb", "stored-before"),
        protobuf_pod("pb", "stored-before", &labels, 1_700_000_000),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let r2 = put_raw(
        &mut kv,
        &pod_key("pb", "stored-after"),
        protobuf_pod("pb", "stored-after", &labels[..1], 1_700_000_000),
    )
    .await;

    let list = get_json(&format!(
        "{base}/api/v1/namespaces/pb/pods?labelSelector=app%3Dproto"
    ))
    .await;
    assert_eq!(item_names(&list), ["stored-after", "stored-before"]);
    for (name, revision, n_labels) in [("stored-before", r1, 2), ("stored-after", r2, 1)] {
        let pod = item(&list, name);
        assert_eq!(pod["kind"], "Pod", "{pod}");
        assert_eq!(pod["apiVersion"], "v1", "{pod}");
        assert_eq!(pod["metadata"]["namespace"], "pb", "{pod}");
        assert_eq!(pod["metadata"]["uid"], format!("uid-{name}"), "{pod}");
        assert_eq!(
            pod["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z",
            "{pod}"
        );
        assert_eq!(pod["metadata"]["labels"]["app"], "proto", "{pod}");
        assert_eq!(
            pod["metadata"]["labels"].as_object().map(|l| l.len()),
            Some(n_labels),
            "{pod}"
        );
        assert_eq!(rv(pod), revision, "{pod}");
    }
    let got = get_json(&format!("{base}/api/v1/namespaces/pb/pods/stored-before")).await;
    assert_eq!(
        got["metadata"]["labels"]["app.kubernetes.io/part-of"],
        "demo"
    );
    assert_eq!(rv(&got), r1);
}

fn crd(group: &str, plural: &str, kind: &str, scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}"), "uid": format!("uid-crd-{plural}")},
        "spec": {
            "group": group,
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "scope": scope,
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

fn custom_object(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "uid": format!("uid-{name}")}, "spec": {"size": 3}});
    if let Some(ns) = ns {
        o["metadata"]["namespace"] = json!(ns);
    }
    o
}

async fn custom_resources_of_a_crd_stored_before_start_are_served() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let crd_key = "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com";
    put_object(
        &mut kv,
        crd_key,
        &crd("example.com", "widgets", "Widget", "Namespaced"),
    )
    .await;
    let w1_key = "/registry/example.com/widgets/default/w1";
    let r1 = put_object(
        &mut kv,
        w1_key,
        &custom_object("example.com/v1", "Widget", Some("default"), "w1"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let list = get_json(&format!(
        "{base}/apis/example.com/v1/namespaces/default/widgets"
    ))
    .await;
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(list["apiVersion"], "example.com/v1");
    assert_eq!(item_names(&list), ["w1"]);
    let w1 = item(&list, "w1");
    assert_eq!(
        (w1["kind"].as_str(), w1["apiVersion"].as_str()),
        (Some("Widget"), Some("example.com/v1"))
    );
    assert_eq!(w1["spec"]["size"], 3);
    assert_eq!(rv(w1), r1);
    let all = get_json(&format!("{base}/apis/example.com/v1/widgets")).await;
    assert_eq!(item_names(&all), ["w1"]);
    let got = get_json(&format!(
        "{base}/apis/example.com/v1/namespaces/default/widgets/w1"
    ))
    .await;
    assert_eq!(rv(&got), r1);
    let status = get_status(
        &format!("{base}/apis/example.com/v1/namespaces/default/widgets/w2"),
        404,
        "NotFound",
    )
    .await;
    assert_eq!(status["message"], "widgets.example.com \"w2\" not found");

    let discovery = get_json(&format!("{base}/apis/example.com/v1")).await;
    let widgets = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap_or_else(|| panic!("{discovery}"));
    assert_eq!(widgets["kind"], "Widget");
    assert_eq!(widgets["namespaced"], true);
    assert_eq!(widgets["verbs"], json!(["get", "list", "watch"]));
    let apis = get_json(&format!("{base}/apis")).await;
    assert!(
        apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "example.com" && g["preferredVersion"]["version"] == "v1"),
        "{apis}"
    );
}

async fn crd_created_after_start_becomes_served() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    get_status(
        &format!("{base}/apis/example.org/v1/gadgets"),
        404,
        "NotFound",
    )
    .await;
    let crd_key = "/registry/apiextensions.k8s.io/customresourcedefinitions/gadgets.example.org";
    put_object(
        &mut kv,
        crd_key,
        &crd("example.org", "gadgets", "Gadget", "Cluster"),
    )
    .await;

    let discovery_url = format!("{base}/apis/example.org/v1");
    let mut discovery = None;
    for _ in 0..100 {
        let resp = http::get(&discovery_url, &[]).await;
        if resp.status == 200 {
            discovery = Some(resp.json());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let discovery =
        discovery.expect("/apis/example.org/v1 not served within 10 s of creating the CRD");
    let gadgets = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gadgets")
        .unwrap_or_else(|| panic!("{discovery}"));
    assert_eq!(
        (gadgets["kind"].as_str(), gadgets["namespaced"].as_bool()),
        (Some("Gadget"), Some(false))
    );

    let r1 = put_object(
        &mut kv,
        "/registry/example.org/gadgets/g1",
        &custom_object("example.org/v1", "Gadget", None, "g1"),
    )
    .await;
    let list = get_json(&format!("{base}/apis/example.org/v1/gadgets")).await;
    assert_eq!(list["kind"], "GadgetList");
    assert_eq!(item_names(&list), ["g1"]);
    assert_eq!(rv(item(&list, "g1")), r1);
    assert_eq!(
        rv(&get_json(&format!("{base}/apis/example.org/v1/gadgets/g1")).await),
        r1
    );
}

/// What one kubectl run printed.
struct KubectlRun {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs kubectl 1.33 against `base` (no kubeconfig, private cache), bounded by
/// [`KUBECTL_TIMEOUT`]; panics with a clear message if kubectl is not installed.
async fn kubectl(base: &str, args: &[&str]) -> KubectlRun {
    assert!(
        Path::new(KUBECTL).is_file(),
        "kubectl not found at {KUBECTL}: these tests need kubectl 1.33 from the Google Cloud SDK \
         (apt package google-cloud-cli-kubectl or `gcloud components install kubectl`)"
    );
    let base = base.to_string();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || run_kubectl(&base, &args))
        .await
        .expect("kubectl thread")
}

fn run_kubectl(base: &str, args: &[String]) -> KubectlRun {
    let dir = tempfile::tempdir().expect("temp dir for kubectl");
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    let out = std::fs::File::create(&out_path).expect("create kubectl stdout file");
    let err = std::fs::File::create(&err_path).expect("create kubectl stderr file");
    let mut child = Command::new(KUBECTL)
        .arg(format!("--server={base}"))
        .arg("--request-timeout=20s")
        .arg(format!(
            "--cache-dir={}",
            dir.path().join("cache").display()
        ))
        .args(args)
        .env("HOME", dir.path())
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {KUBECTL}: {e}"));
    let deadline = Instant::now() + KUBECTL_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for kubectl") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kubectl {args:?} did not finish within {KUBECTL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    KubectlRun {
        success: status.success(),
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// The cells of kubectl's table output, row by row (header first); every row has a cell.
fn table_rows(out: &str) -> Vec<Vec<String>> {
    let rows: Vec<Vec<String>> = out
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|cells| !cells.is_empty())
        .collect();
    assert!(
        rows.len() > 1 && rows.iter().all(|r| r.len() >= 2),
        "not a table:\n{out}"
    );
    rows
}

/// Runs kubectl and asserts it succeeded; returns its stdout.
async fn kubectl_ok(base: &str, args: &[&str]) -> String {
    let run = kubectl(base, args).await;
    assert!(
        run.success,
        "kubectl {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    run.stdout
}

async fn kubectl_get_pods_in_all_namespaces_lists_them() {
    let f = Fixture::start(&[]).await;
    let out = kubectl_ok(&f.base(), &["get", "pods", "-A"]).await;
    let rows = table_rows(&out);
    assert_eq!(rows[0][..2], ["NAMESPACE", "NAME"], "{out}");
    assert!(rows.iter().any(|r| r[..2] == ["default", "web"]), "{out}");
    assert!(
        rows.iter().any(|r| r[..2] == ["kube-system", "dns"]),
        "{out}"
    );
    assert_eq!(rows.len(), 3, "a header and two pods: {out}");
}

async fn kubectl_get_pods_as_json_has_the_items() {
    let f = Fixture::start(&[]).await;
    let out = kubectl_ok(&f.base(), &["get", "pods", "-n", "default", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("kubectl -o json output is not JSON ({e}):\n{out}"));
    assert_eq!(list["kind"], "List");
    assert_eq!(item_names(&list), ["web"]);
    let mut kv = f.kv.clone();
    assert_eq!(
        rv(&list["items"][0]),
        mod_revision(&mut kv, &pod_key("default", "web")).await
    );
    assert_eq!(list["items"][0]["metadata"]["labels"]["app"], "web");
}

async fn kubectl_get_pods_in_chunks_returns_every_pod() {
    let f = Fixture::start(&[]).await;
    let mut kv = f.kv.clone();
    for i in 0..5 {
        put_pod(&mut kv, "chunks", &format!("pod-{i}"), &[]).await;
    }
    let out = kubectl_ok(
        &f.base(),
        &[
            "get",
            "pods",
            "-n",
            "chunks",
            "--chunk-size=2",
            "-o",
            "name",
        ],
    )
    .await;
    let names: Vec<&str> = out.lines().collect();
    assert_eq!(
        names,
        [
            "pod/pod-0",
            "pod/pod-1",
            "pod/pod-2",
            "pod/pod-3",
            "pod/pod-4"
        ],
        "{out}"
    );
    let out = kubectl_ok(
        &f.base(),
        &["get", "pods", "-n", "chunks", "--chunk-size=2"],
    )
    .await;
    let names: Vec<String> = table_rows(&out)
        .iter()
        .skip(1)
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(
        names,
        ["pod-0", "pod-1", "pod-2", "pod-3", "pod-4"],
        "{out}"
    );
}

async fn kubectl_get_nodes_lists_them() {
    let f = Fixture::start(&[]).await;
    let out = kubectl_ok(&f.base(), &["get", "nodes"]).await;
    let rows = table_rows(&out);
    assert_eq!(rows[0][0], "NAME", "{out}");
    assert_eq!(
        rows[1..].iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ["node-1"],
        "{out}"
    );
}

async fn kubectl_get_one_pod_by_name() {
    let f = Fixture::start(&[]).await;
    let out = kubectl_ok(&f.base(), &["get", "pod", "web", "-n", "default"]).await;
    let rows = table_rows(&out);
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(
        (rows[0][0].as_str(), rows[1][0].as_str()),
        ("NAME", "web"),
        "{out}"
    );
    let run = kubectl(&f.base(), &["get", "pod", "missing", "-n", "default"]).await;
    assert!(!run.success, "{}", run.stdout);
    assert!(
        run.stderr.contains("pods \"missing\" not found"),
        "{}",
        run.stderr
    );
}

/// `--memory-limit` below what watchd holds: past its soft mark, new full lists and new
/// watches are refused 429 with Retry-After (gRPC Watch: RESOURCE_EXHAUSTED), while gets
/// and paginated lists go on; metrics and the log say so. With a limit far above, the
/// same requests are served. (No cgroup limit can be set on these machines: the flag
/// stands in for one.)
#[tokio::test]
async fn past_its_memory_limit_watchd_refuses_new_full_lists_and_watches() {
    use watchd::api::grpc::pb::watchd_client::WatchdClient;
    use watchd::api::grpc::pb::{Collection, WatchRequest};
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for i in 0..3 {
        put_pod(&mut kv, "mem", &format!("p{i}"), &[]).await;
    }
    let w = Watchd::start(&etcd.client_url(), &["--memory-limit=1Mi"]);
    let base = w.base_url();
    let metrics = || async { http::get(&format!("{base}/metrics"), &[]).await.text() };
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&metrics().await, "watchd_memory_pressure", &[]) != Some(1.0) {
        assert!(
            Instant::now() < deadline,
            "pressure never reported:\n{}",
            metrics().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let list = http::get(&format!("{base}/api/v1/namespaces/mem/pods"), &[]).await;
    let status = assert_status(&list, 429, "TooManyRequests");
    assert_eq!(list.header("retry-after"), Some("1"));
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("memory") && m.contains("new full lists are refused")),
        "{status}"
    );
    let watch = http::get(&format!("{base}/api/v1/pods?watch=1&timeoutSeconds=1"), &[]).await;
    assert_status(&watch, 429, "TooManyRequests");
    assert_eq!(watch.header("retry-after"), Some("1"));
    let mut grpc = WatchdClient::connect(w.grpc_url())
        .await
        .expect("gRPC connect");
    let refused = grpc
        .watch(WatchRequest {
            collection: Some(Collection {
                version: "v1".into(),
                resource: "pods".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect_err("a gRPC watch is refused");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused}");

    // What a client retrying needs still works.
    let page = get_json(&format!("{base}/api/v1/namespaces/mem/pods?limit=2")).await;
    assert_eq!(item_names(&page), ["p0", "p1"]);
    let one = get_json(&format!("{base}/api/v1/namespaces/mem/pods/p2")).await;
    assert_eq!(one["metadata"]["name"], "p2");

    let text = metrics().await;
    assert_eq!(
        metric(&text, "watchd_memory_limit_bytes", &[]),
        Some(1048576.0)
    );
    assert!(metric(&text, "watchd_memory_resident_bytes", &[]).is_some_and(|b| b > 1048576.0));
    for kind in ["kind=\"list\"", "kind=\"watch\""] {
        assert!(
            metric(&text, "watchd_memory_refusals_total", &[kind]).is_some_and(|n| n >= 1.0),
            "{kind}: {text}"
        );
    }
    assert!(w.log().contains("memory past the soft mark"), "{}", w.log());

    let roomy = Watchd::start(&etcd.client_url(), &["--memory-limit=64Gi"]);
    let list = get_json(&format!("{}/api/v1/namespaces/mem/pods", roomy.base_url())).await;
    assert_eq!(item_names(&list), ["p0", "p1", "p2"]);
    let text = http::get(&format!("{}/metrics", roomy.base_url()), &[])
        .await
        .text();
    assert_eq!(metric(&text, "watchd_memory_pressure", &[]), Some(0.0));
}

/// `--rendered-json-bytes`: the JSON of protobuf-stored objects rendered for JSON readers
/// is kept up to the budget, the renderings beyond it given up and rendered again when
/// read; every list is still whole and right. Without the flag the budget follows the
/// cache. Past `--memory-limit`'s soft mark none is kept at all.
#[tokio::test]
async fn rendered_json_is_kept_within_its_budget_and_not_at_all_under_memory_pressure() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut revisions = Vec::new();
    for i in 0..40 {
        let name = format!("p{i:02}");
        let value = Storage::Protobuf.encode(&pod("budget", &name, &[("app", "web")]));
        revisions.push(put_raw(&mut kv, &pod_key("budget", &name), value).await);
    }
    let w = Watchd::start(&etcd.client_url(), &["--rendered-json-bytes=4000"]);
    let base = w.base_url();
    let metrics = || async { http::get(&format!("{base}/metrics"), &[]).await.text() };
    let want: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
    let mut sizes = Vec::new();
    for _ in 0..3 {
        let list = get_json(&format!("{base}/api/v1/namespaces/budget/pods")).await;
        assert_eq!(item_names(&list), want);
        for (item, rv) in list["items"]
            .as_array()
            .expect("items")
            .iter()
            .zip(&revisions)
        {
            assert_eq!(item["metadata"]["resourceVersion"], rv.to_string());
            assert_eq!(item["spec"]["nodeName"], "node-1");
            sizes.push(item.to_string().len());
        }
        let text = metrics().await;
        let kept = metric(&text, "watchd_rendered_json_bytes", &[]).expect("kept bytes");
        assert!(kept <= 4000.0, "{kept} bytes kept past the budget");
        assert!(kept > 0.0, "some renderings are kept");
    }
    // 40 pods of about 330 bytes each do not fit in 4000: renderings were given up, and
    // each list rendered again what it needed.
    assert!(sizes.iter().sum::<usize>() / 3 > 8_000, "{sizes:?}");
    let text = metrics().await;
    assert!(
        metric(&text, "watchd_rendered_json_evictions_total", &[]).is_some_and(|n| n >= 40.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "watchd_rendered_json_budget_bytes", &[]),
        Some(4000.0)
    );
    assert!(
        metric(&text, "watchd_protobuf_json_renders_total", &[]).is_some_and(|n| n >= 80.0),
        "{text}"
    );

    // Without the flag or a memory limit the budget follows the cache: a quarter of the
    // cached bytes, and at least 16 MiB, which these 40 pods are far below: all kept.
    // (`--memory-limit=0`: none, whatever cgroup the test runs in.)
    let plain = Watchd::start(&etcd.client_url(), &["--memory-limit=0"]);
    let list = get_json(&format!(
        "{}/api/v1/namespaces/budget/pods",
        plain.base_url()
    ))
    .await;
    assert_eq!(item_names(&list), want);
    let text = http::get(&format!("{}/metrics", plain.base_url()), &[])
        .await
        .text();
    assert_eq!(
        metric(&text, "watchd_rendered_json_budget_bytes", &[]),
        Some(16.0 * 1024.0 * 1024.0)
    );
    assert!(
        metric(&text, "watchd_rendered_json_bytes", &[]).is_some_and(|n| n > 8_000.0),
        "{text}"
    );
    drop(plain);

    // Under memory pressure a get is still served as JSON, and nothing is kept.
    let pressed = Watchd::start(&etcd.client_url(), &["--memory-limit=1Mi"]);
    let pbase = pressed.base_url();
    let pmetrics = || async { http::get(&format!("{pbase}/metrics"), &[]).await.text() };
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&pmetrics().await, "watchd_memory_pressure", &[]) != Some(1.0) {
        assert!(Instant::now() < deadline, "pressure never reported");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for name in ["p00", "p01", "p02"] {
        let one = get_json(&format!("{pbase}/api/v1/namespaces/budget/pods/{name}")).await;
        assert_eq!(one["metadata"]["name"], name);
    }
    let text = pmetrics().await;
    assert_eq!(metric(&text, "watchd_rendered_json_bytes", &[]), Some(0.0));
    assert!(
        metric(&text, "watchd_rendered_json_evictions_total", &[]).is_some_and(|n| n >= 3.0),
        "{text}"
    );
}
