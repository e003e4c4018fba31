//! The API contract (`api-contract.md`), item by item: one test per contract item that no
//! other test file checks, each named after the item, against a real etcd.
//!
//! `tests/README.md` maps every item of the contract to the test(s) that check it; this
//! file fills the gaps the other files leave. It is long on purpose: its sections follow
//! the contract's (storage format, list, get, watch, selectors, content negotiation,
//! discovery and other endpoints, Status objects, protobuf rendered as JSON), so an item
//! and its test are found in the same place of both documents.
//!
//! Objects are written where kube-apiserver keeps them, without `resourceVersion`; watchd
//! must serve each key's etcd mod_revision. Where no request can wait for a condition (a
//! daemon starting, etcd going away), a bounded poll does; nothing asserts on timing.

mod support;

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use support::http;
use support::kube::*;
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf (custom
// resources are JSON in both); the tests marked below run once.
storage_tests! {
    builtin_group_names_are_omitted_from_etcd_keys,
    services_endpoints_controllers_ingress_keys_are_served,
    etcd_prefix_is_configurable,
    list_rv_0_serves_any,
    list_rv_n_serves_not_older_than_n,
    list_rv_0_with_limit_may_ignore_limit_and_serves_any,
    list_rv_n_with_limit_is_exact_n,
    list_exact_rv_n_with_limit_pages_at_n,
    list_not_older_than_rv_0_serves_any,
    list_not_older_than_rv_n_serves_at_least_n,
    continue_token_is_urlsafe_base64_json_with_rv_and_start,
    list_items_always_present_with_kind_and_api_version,
    get_rv_n_waits_for_not_older_than,
    watch_rv_empty_is_like_unset_synthetic_added_at_consistent_revision,
    watch_rv_0_synthetic_added_from_cache,
    watch_body_is_chunked_single_line_json_per_event_flushed_per_event,
    deleted_carries_delete_revision,
    bookmark_object_has_kind_api_version_and_only_resource_version,
    bookmark_is_sent_shortly_before_timeout_seconds_expires,
    streaming_list_rv_n_serves_at_least_n,
    closed_watch_resumes_from_last_resource_version,
    label_selector_allows_whitespace_around_tokens,
    metadata_name_and_namespace_field_selectors_work_for_every_resource,
    pod_field_selectors_scheduler_name_service_account_name_and_pod_ip,
    event_involved_object_field_selectors,
    protobuf_accept_with_json_fallback_is_answered_with_labelled_json,
    table_default_columns_are_name_and_created_at,
    small_gets_and_plain_watch_streams_are_never_gzipped,
}

// ---- helpers ----------------------------------------------------------------------------

/// `application/json` as client-go asks for built-in types: protobuf first, JSON fallback.
const PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";

/// The Table media type kubectl asks for first.
const TABLE_V1: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// The keys of a JSON object, sorted; panics if `v` is not an object.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not a JSON object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

/// Checks everything the contract says of a Status: kind, apiVersion, empty metadata,
/// `Failure`, a message, the reason, `code` equal to the HTTP status, a JSON content type.
fn assert_full_status(resp: &http::Response, code: u16, reason: &str, what: &str) -> Value {
    assert_eq!(resp.status, code, "{what}: HTTP status: {}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("application/json"),
        "{what}: content-type"
    );
    let status = resp.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["apiVersion"], "v1", "{what}: {status}");
    assert_eq!(status["metadata"], json!({}), "{what}: {status}");
    assert_eq!(status["status"], "Failure", "{what}: {status}");
    assert_eq!(status["reason"], reason, "{what}: {status}");
    assert_eq!(
        status["code"], code,
        "{what}: code must equal the HTTP status"
    );
    assert!(
        status["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {status}"
    );
    if let Some(details) = status.get("details") {
        assert!(details.is_object(), "{what}: {status}");
    }
    status
}

/// Gets `first_url`, then follows `continue` tokens with `next_url&continue=<token>` (the
/// token alone carries the listing's revision: `resourceVersionMatch` is forbidden with
/// it); returns every page. Panics after 50 pages.
async fn all_pages(first_url: &str, next_url: &str) -> Vec<Value> {
    let mut pages = vec![get_json(first_url).await];
    for _ in 0..50 {
        let last = pages.last().expect("a page");
        let Some(token) = last["metadata"]["continue"]
            .as_str()
            .filter(|t| !t.is_empty())
        else {
            return pages;
        };
        let next = get_json(&format!("{next_url}&continue={token}")).await;
        pages.push(next);
    }
    panic!("more than 50 pages from {first_url}");
}

/// The names of every item on every page.
fn names_of_pages(pages: &[Value]) -> Vec<String> {
    pages.iter().flat_map(item_names).collect()
}

/// Polls `GET base+path` until its status is `want`; panics with the last answer after
/// `within`.
async fn poll_status(base: &str, path: &str, want: u16, within: Duration) -> http::Response {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let last = http::try_request("GET", &format!("{base}{path}"), &[], "").await;
        if let Ok(resp) = &last {
            if resp.status == want {
                return resp.clone();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "GET {path} did not answer {want} within {within:?}; last: {:?}",
            last.map(|r| (r.status, r.text()))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads watch events until one satisfies `want` (at most 50 events, each within
/// [`EVENT_WAIT`]); returns it.
async fn event_where(stream: &mut http::WatchStream, want: impl Fn(&Value) -> bool) -> Value {
    let mut seen = Vec::new();
    for _ in 0..50 {
        let ev = next_event(stream).await;
        if want(&ev) {
            return ev;
        }
        seen.push(ev);
    }
    panic!("no matching event among {seen:?}");
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

/// Registers the namespaced `widgets.example.com` CRD (kind `Widget`) under `prefix`.
async fn put_widget_crd(kv: &mut etcd_client::Client, prefix: &str) {
    put_object(
        kv,
        &format!("{prefix}/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"),
        &crd("example.com", "widgets", "Widget", "Namespaced"),
    )
    .await;
}

fn widget(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-w-{name}"), "creationTimestamp": "2024-01-02T03:04:05Z"},
        "spec": {"size": 3},
    })
}

/// A namespaced object of any kind, as stored (no resourceVersion).
fn object(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
    let mut o = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "uid": format!("uid-{kind}-{name}"), "creationTimestamp": "2024-01-02T03:04:05Z"},
    });
    if let Some(ns) = ns {
        o["metadata"]["namespace"] = json!(ns);
    }
    o
}

// ---- Kubernetes protobuf, as kube-apiserver stores built-in types --------------------------

fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (wire type 2).
fn pb_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    pb_varint(out, (field << 3) | 2);
    pb_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A varint field (wire type 0).
fn pb_uint(out: &mut Vec<u8>, field: u64, v: u64) {
    pb_varint(out, field << 3);
    pb_varint(out, v);
}

/// What goes into a protobuf `ObjectMeta`.
#[derive(Default)]
struct PbMeta<'a> {
    name: &'a str,
    namespace: &'a str,
    /// A stale value to check it is not served (kube-apiserver leaves it empty).
    resource_version: &'a str,
    generation: u64,
    /// creationTimestamp seconds; None leaves the field off (Go's zero time).
    created: Option<u64>,
    labels: &'a [(&'a str, &'a str)],
}

/// `k8s\0` + runtime.Unknown{typeMeta{apiVersion, kind}, raw: {1: ObjectMeta, 2: spec,
/// 3: status}, contentEncoding "", contentType ""}.
fn pb_envelope(api_version: &str, kind: &str, m: &PbMeta<'_>) -> Vec<u8> {
    let mut meta = Vec::new();
    pb_bytes(&mut meta, 1, m.name.as_bytes());
    if !m.namespace.is_empty() {
        pb_bytes(&mut meta, 3, m.namespace.as_bytes());
    }
    pb_bytes(&mut meta, 5, format!("uid-{}", m.name).as_bytes());
    if !m.resource_version.is_empty() {
        pb_bytes(&mut meta, 6, m.resource_version.as_bytes());
    }
    if m.generation != 0 {
        pb_uint(&mut meta, 7, m.generation);
    }
    if let Some(seconds) = m.created {
        let mut time = Vec::new();
        pb_uint(&mut time, 1, seconds);
        pb_bytes(&mut meta, 8, &time);
    }
    for (k, v) in m.labels {
        let mut entry = Vec::new();
        pb_bytes(&mut entry, 1, k.as_bytes());
        pb_bytes(&mut entry, 2, v.as_bytes());
        pb_bytes(&mut meta, 11, &entry);
    }
    let mut raw = Vec::new();
    pb_bytes(&mut raw, 1, &meta);
    pb_bytes(&mut raw, 2, &[]);
    pb_bytes(&mut raw, 3, &[]);
    let mut type_meta = Vec::new();
    pb_bytes(&mut type_meta, 1, api_version.as_bytes());
    pb_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut value = b"k8s\x00".to_vec();
    pb_bytes(&mut value, 1, &type_meta);
    pb_bytes(&mut value, 2, &raw);
    pb_bytes(&mut value, 3, b"");
    pb_bytes(&mut value, 4, b"");
    value
}

// ---- Storage format in etcd -----------------------------------------------------------------

async fn builtin_group_names_are_omitted_from_etcd_keys() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let d = put_object(
        &mut kv,
        "/registry/deployments/prod/web",
        &object("apps/v1", "Deployment", Some("prod"), "web"),
    )
    .await;
    let l = put_object(
        &mut kv,
        "/registry/leases/kube-node-lease/n1",
        &object(
            "coordination.k8s.io/v1",
            "Lease",
            Some("kube-node-lease"),
            "n1",
        ),
    )
    .await;
    let r = put_object(
        &mut kv,
        "/registry/clusterroles/admin",
        &object("rbac.authorization.k8s.io/v1", "ClusterRole", None, "admin"),
    )
    .await;
    // With the group in the key it is not where kube-apiserver keeps deployments.
    put_object(
        &mut kv,
        "/registry/apps/deployments/prod/wrong",
        &object("apps/v1", "Deployment", Some("prod"), "wrong"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let got = get_json(&format!(
        "{base}/apis/apps/v1/namespaces/prod/deployments/web"
    ))
    .await;
    assert_eq!(rv(&got), d);
    let got = get_json(&format!(
        "{base}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
    ))
    .await;
    assert_eq!(rv(&got), l);
    let got = get_json(&format!(
        "{base}/apis/rbac.authorization.k8s.io/v1/clusterroles/admin"
    ))
    .await;
    assert_eq!(rv(&got), r);
    let list = get_json(&format!("{base}/apis/apps/v1/deployments")).await;
    assert_eq!(item_names(&list), ["web"], "{list}");
}

async fn services_endpoints_controllers_ingress_keys_are_served() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let cases = [
        (
            "/registry/services/specs/shop/front",
            object("v1", "Service", Some("shop"), "front"),
            "/api/v1/namespaces/shop/services",
        ),
        (
            "/registry/services/endpoints/shop/front",
            object("v1", "Endpoints", Some("shop"), "front"),
            "/api/v1/namespaces/shop/endpoints",
        ),
        (
            "/registry/controllers/shop/legacy",
            object("v1", "ReplicationController", Some("shop"), "legacy"),
            "/api/v1/namespaces/shop/replicationcontrollers",
        ),
        (
            "/registry/ingress/shop/edge",
            object("networking.k8s.io/v1", "Ingress", Some("shop"), "edge"),
            "/apis/networking.k8s.io/v1/namespaces/shop/ingresses",
        ),
    ];
    let mut revisions = Vec::new();
    for (key, obj, _) in &cases {
        revisions.push(put_object(&mut kv, key, obj).await);
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    // Written after start too: the live watch routes these keys as the initial list does.
    for ((key, obj, path), before) in cases.iter().zip(&revisions) {
        let name = obj["metadata"]["name"].as_str().unwrap();
        let mut late = obj.clone();
        late["metadata"]["name"] = json!(format!("{name}-late"));
        let late_key = format!("{key}-late");
        let after = put_object(&mut kv, &late_key, &late).await;

        let list = get_json(&format!("{base}{path}")).await;
        assert_eq!(
            item_names(&list),
            [name.to_string(), format!("{name}-late")],
            "{key}: {list}"
        );
        assert_eq!(
            list["kind"],
            format!("{}List", obj["kind"].as_str().unwrap())
        );
        assert_eq!(rv(item(&list, name)), *before, "{key}");
        assert_eq!(rv(item(&list, &format!("{name}-late"))), after, "{key}");
        let got = get_json(&format!("{base}{path}/{name}")).await;
        assert_eq!(got["kind"], obj["kind"], "{key}");
        assert_eq!(rv(&got), *before, "{key}");
    }
    // Endpoints live below services/ but are not services.
    let services = get_json(&format!("{base}/api/v1/services")).await;
    assert_eq!(item_names(&services), ["front", "front-late"]);
    assert!(services["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["kind"] == "Service"));
}

async fn etcd_prefix_is_configurable() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ours = put_pod_at(&mut kv, "/kube/pods/p/ours", "p", "ours").await;
    put_pod_at(&mut kv, "/registry/pods/p/not-ours", "p", "not-ours").await;
    put_widget_crd(&mut kv, "/kube").await;
    let w = put_object(
        &mut kv,
        "/kube/example.com/widgets/p/w1",
        &widget("p", "w1"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &["--etcd-prefix=/kube"]);
    let base = watchd.base_url();
    let late = put_pod_at(&mut kv, "/kube/pods/p/late", "p", "late").await;
    put_pod_at(
        &mut kv,
        "/registry/pods/p/late-not-ours",
        "p",
        "late-not-ours",
    )
    .await;

    let list = get_json(&format!("{base}/api/v1/namespaces/p/pods")).await;
    assert_eq!(item_names(&list), ["late", "ours"], "{list}");
    assert_eq!(rv(item(&list, "ours")), ours);
    assert_eq!(rv(item(&list, "late")), late);
    let widgets = get_json(&format!("{base}/apis/example.com/v1/namespaces/p/widgets")).await;
    assert_eq!(item_names(&widgets), ["w1"]);
    assert_eq!(rv(item(&widgets, "w1")), w);
}

async fn put_pod_at(kv: &mut etcd_client::Client, key: &str, ns: &str, name: &str) -> i64 {
    put_object(kv, key, &pod(ns, name, &[])).await
}

// One run: it stores one object in each format itself (JSON v1beta2, protobuf v1beta1).
#[tokio::test]
async fn stored_api_version_is_served_as_stored_without_conversion() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut old_json = object("apps/v1beta2", "Deployment", Some("v"), "json-old");
    old_json["spec"] = json!({"replicas": 2});
    let r1 = put_json(&mut kv, "/registry/deployments/v/json-old", &old_json).await;
    let pb = pb_envelope(
        "extensions/v1beta1",
        "Deployment",
        &PbMeta {
            name: "pb-old",
            namespace: "v",
            created: Some(1_700_000_000),
            ..PbMeta::default()
        },
    );
    let r2 = put_raw(&mut kv, "/registry/deployments/v/pb-old", pb).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let list = get_json(&format!("{base}/apis/apps/v1/namespaces/v/deployments")).await;
    assert_eq!(list["kind"], "DeploymentList");
    assert_eq!(list["apiVersion"], "apps/v1");
    assert_eq!(item_names(&list), ["json-old", "pb-old"]);
    for (name, api_version, revision) in [
        ("json-old", "apps/v1beta2", r1),
        ("pb-old", "extensions/v1beta1", r2),
    ] {
        let it = item(&list, name);
        assert_eq!(it["apiVersion"], api_version, "{it}");
        assert_eq!(it["kind"], "Deployment", "{it}");
        assert_eq!(rv(it), revision);
        let got = get_json(&format!(
            "{base}/apis/apps/v1/namespaces/v/deployments/{name}"
        ))
        .await;
        assert_eq!(got["apiVersion"], api_version, "{got}");
    }
    let got = get_json(&format!(
        "{base}/apis/apps/v1/namespaces/v/deployments/json-old"
    ))
    .await;
    assert_eq!(got["spec"]["replicas"], 2, "stored fields are kept: {got}");
}

// One run: it stores a stale resourceVersion in each format itself.
#[tokio::test]
async fn resource_version_is_served_as_mod_revision_even_if_stored() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut stale = pod("rvs", "json", &[]);
    stale["metadata"]["resourceVersion"] = json!("12345");
    let r1 = put_json(&mut kv, &pod_key("rvs", "json"), &stale).await;
    let pb = |rv: &'static str| {
        pb_envelope(
            "v1",
            "Pod",
            &PbMeta {
                name: "proto",
                namespace: "rvs",
                resource_version: rv,
                created: Some(1_700_000_000),
                ..PbMeta::default()
            },
        )
    };
    let r2 = put_raw(&mut kv, &pod_key("rvs", "proto"), pb("777")).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let list = get_json(&format!("{base}/api/v1/namespaces/rvs/pods")).await;
    assert_eq!(rv(item(&list, "json")), r1);
    assert_eq!(rv(item(&list, "proto")), r2);
    // Updated after start: the new mod_revision, whatever the value says.
    let r3 = put_json(&mut kv, &pod_key("rvs", "json"), &stale).await;
    let r4 = put_raw(&mut kv, &pod_key("rvs", "proto"), pb("778")).await;
    for (name, revision) in [("json", r3), ("proto", r4)] {
        let got = get_json(&format!("{base}/api/v1/namespaces/rvs/pods/{name}")).await;
        assert_eq!(rv(&got), revision, "{got}");
        assert_eq!(
            revision,
            mod_revision(&mut kv, &pod_key("rvs", name)).await,
            "{name}"
        );
    }
}

// ---- list: resourceVersion × resourceVersionMatch × paging ----------------------------------

/// Five pods `p1`..`p5` in namespace `ns` written before watchd starts; returns their revisions.
async fn five_pods(kv: &mut etcd_client::Client, ns: &str) -> Vec<i64> {
    let mut revs = Vec::new();
    for i in 1..=5 {
        revs.push(put_pod(kv, ns, &format!("p{i}"), &[("v", "old")]).await);
    }
    revs
}

async fn list_rv_0_serves_any() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let revs = five_pods(&mut kv, "any").await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    // "Any" state the cache has: at least what it loaded before it became ready.
    let list = get_json(&format!(
        "{base}/api/v1/namespaces/any/pods?resourceVersion=0"
    ))
    .await;
    assert_eq!(list["kind"], "PodList");
    assert_eq!(item_names(&list), ["p1", "p2", "p3", "p4", "p5"]);
    assert!(rv(&list) >= revs[4], "{list}");
    for (i, revision) in revs.iter().enumerate() {
        assert_eq!(rv(item(&list, &format!("p{}", i + 1))), *revision);
    }
    assert!(
        list["metadata"].get("continue").is_none_or(|c| c == ""),
        "{list}"
    );
}

async fn list_rv_n_serves_not_older_than_n() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let first = put_pod(&mut kv, "not", "a", &[("v", "1")]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let url = format!("{base}/api/v1/namespaces/not/pods");

    // N was just written: the list waits for it rather than answer older state.
    let n = put_pod(&mut kv, "not", "a", &[("v", "2")]).await;
    let list = get_json(&format!("{url}?resourceVersion={n}")).await;
    assert!(rv(&list) >= n, "{list}");
    assert_eq!(item(&list, "a")["metadata"]["labels"]["v"], "2");
    assert_eq!(rv(item(&list, "a")), n);
    // An older N may be answered with newer state, never with older state.
    let list = get_json(&format!("{url}?resourceVersion={first}")).await;
    assert!(rv(&list) >= n, "{list}");
    assert_eq!(item(&list, "a")["metadata"]["labels"]["v"], "2");
}

async fn list_rv_0_with_limit_may_ignore_limit_and_serves_any() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let revs = five_pods(&mut kv, "any").await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let url = format!("{base}/api/v1/namespaces/any/pods?resourceVersion=0&limit=2");
    let pages = all_pages(&url, &url).await;
    // Either one page with everything (limit ignored) or pages of at most 2 items.
    if pages.len() > 1 {
        for page in &pages {
            assert!(item_names(page).len() <= 2, "{page}");
            assert_eq!(rv(page), rv(&pages[0]), "one snapshot: {page}");
        }
    }
    assert_eq!(names_of_pages(&pages), ["p1", "p2", "p3", "p4", "p5"]);
    assert!(rv(&pages[0]) >= revs[4]);
}

/// Pages `p1`..`p4` at revision `at`, written as five pods of which p2 later changed, p3
/// was deleted and p6 was added; `first_query` asks for the first page at `at`.
async fn check_pages_at_exact_revision(first_query: &str) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let revs = five_pods(&mut kv, "ex").await;
    let at = revs[3];
    put_pod(&mut kv, "ex", "p2", &[("v", "new")]).await;
    delete_key(&mut kv, &pod_key("ex", "p3")).await;
    put_pod(&mut kv, "ex", "p6", &[]).await;

    let query = first_query.replace("{at}", &at.to_string());
    let first = get_json(&format!("{base}/api/v1/namespaces/ex/pods?{query}")).await;
    assert_eq!(rv(&first), at, "{query}: {first}");
    assert_eq!(item_names(&first), ["p1", "p2"], "{query}");
    assert_eq!(item(&first, "p2")["metadata"]["labels"]["v"], "old");
    let token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or_else(|| panic!("{query}: no continue: {first}"));
    // Later pages: the token alone (resourceVersionMatch is forbidden with continue).
    let url = format!("{base}/api/v1/namespaces/ex/pods?limit=2");
    let second = get_json(&format!("{url}&continue={token}")).await;
    assert_eq!(rv(&second), at, "{query}: {second}");
    assert_eq!(item_names(&second), ["p3", "p4"], "{query}");
    assert!(
        second["metadata"].get("continue").is_none_or(|c| c == ""),
        "{query}: p5 did not exist at {at}: {second}"
    );
}

async fn list_rv_n_with_limit_is_exact_n() {
    check_pages_at_exact_revision("resourceVersion={at}&limit=2").await;
}

async fn list_exact_rv_n_with_limit_pages_at_n() {
    check_pages_at_exact_revision("resourceVersion={at}&resourceVersionMatch=Exact&limit=2").await;
}

async fn list_not_older_than_rv_0_serves_any() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let revs = five_pods(&mut kv, "any").await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let url = format!(
        "{base}/api/v1/namespaces/any/pods?resourceVersion=0&resourceVersionMatch=NotOlderThan"
    );
    let list = get_json(&url).await;
    assert_eq!(list["kind"], "PodList");
    assert_eq!(item_names(&list), ["p1", "p2", "p3", "p4", "p5"]);
    assert!(rv(&list) >= revs[4]);
    // With a limit too ("any" paging).
    let pages = all_pages(
        &format!("{url}&limit=2"),
        &format!("{base}/api/v1/namespaces/any/pods?limit=2"),
    )
    .await;
    assert_eq!(names_of_pages(&pages), ["p1", "p2", "p3", "p4", "p5"]);
    assert!(pages.iter().all(|p| rv(p) == rv(&pages[0])));
}

async fn list_not_older_than_rv_n_serves_at_least_n() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let first = put_pod(&mut kv, "not", "a", &[("v", "1")]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let url = format!("{base}/api/v1/namespaces/not/pods");

    let n = put_pod(&mut kv, "not", "b", &[]).await;
    let list = get_json(&format!(
        "{url}?resourceVersion={n}&resourceVersionMatch=NotOlderThan"
    ))
    .await;
    assert!(rv(&list) >= n, "{list}");
    assert_eq!(item_names(&list), ["a", "b"]);
    // An older N, with a limit: pages of one snapshot not older than N.
    let pages = all_pages(
        &format!("{url}?resourceVersion={first}&resourceVersionMatch=NotOlderThan&limit=1"),
        &format!("{url}?limit=1"),
    )
    .await;
    assert_eq!(names_of_pages(&pages), ["a", "b"]);
    for page in &pages {
        assert_eq!(rv(page), rv(&pages[0]), "{page}");
        assert!(rv(page) >= n, "{page}");
    }
    // N ahead of everything: wait, then 504 Timeout with the contract's details.
    let resp = http::get(
        &format!("{url}?resourceVersion=999999999&resourceVersionMatch=NotOlderThan"),
        &[],
    )
    .await;
    let status = assert_full_status(&resp, 504, "Timeout", "NotOlderThan ahead");
    assert_eq!(resp.header("retry-after"), Some("1"));
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Too large resource version"),
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

async fn continue_token_is_urlsafe_base64_json_with_rv_and_start() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for name in ["a", "b", "c"] {
        put_pod(&mut kv, "tok", name, &[]).await;
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let url = format!("{base}/api/v1/namespaces/tok/pods?limit=1");

    let first = get_json(&url).await;
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue on the first page")
        .to_string();
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "URL-safe, unpadded base64: {token}"
    );
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&token)
        .unwrap_or_else(|e| panic!("not URL-safe unpadded base64 ({e}): {token}"));
    let decoded: Value = serde_json::from_slice(&raw)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&raw)));
    assert_eq!(keys(&decoded), ["rv", "start", "v"], "{decoded}");
    assert_eq!(decoded["v"], "meta.k8s.io/v1");
    assert_eq!(decoded["rv"], json!(rv(&first)), "the listing's revision");
    assert!(
        decoded["start"].as_str().is_some_and(|s| !s.is_empty()),
        "{decoded}"
    );
    // It round-trips: used as is (no extra escaping), it yields the next pages.
    let pages = all_pages(&url, &url).await;
    assert_eq!(names_of_pages(&pages), ["a", "b", "c"]);
}

async fn list_items_always_present_with_kind_and_api_version() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "full", "p", &[("app", "x")]).await;
    put_object(
        &mut kv,
        "/registry/leases/full/l",
        &object("coordination.k8s.io/v1", "Lease", Some("full"), "l"),
    )
    .await;
    put_widget_crd(&mut kv, "/registry").await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let empty: &[(&str, &str, &str)] = &[
        ("/api/v1/namespaces/none/pods", "PodList", "v1"),
        ("/api/v1/pods?labelSelector=app%3Dnone", "PodList", "v1"),
        ("/api/v1/namespaces/none/pods?limit=1", "PodList", "v1"),
        ("/api/v1/persistentvolumes", "PersistentVolumeList", "v1"),
        (
            "/apis/coordination.k8s.io/v1/namespaces/none/leases",
            "LeaseList",
            "coordination.k8s.io/v1",
        ),
        (
            "/apis/example.com/v1/widgets",
            "WidgetList",
            "example.com/v1",
        ),
    ];
    for (path, kind, api_version) in empty {
        let resp = http::get(&format!("{base}{path}"), &[]).await;
        assert_eq!(resp.status, 200, "{path}");
        assert!(
            resp.text().contains("\"items\":[]"),
            "{path}: items must be an empty array: {}",
            resp.text()
        );
        let list = resp.json();
        assert_eq!(list["kind"], *kind, "{path}");
        assert_eq!(list["apiVersion"], *api_version, "{path}");
        assert!(rv(&list) > 0, "{path}: {list}");
    }
    for (path, kind, api_version, item_kind) in [
        ("/api/v1/pods", "PodList", "v1", "Pod"),
        (
            "/apis/coordination.k8s.io/v1/leases",
            "LeaseList",
            "coordination.k8s.io/v1",
            "Lease",
        ),
    ] {
        let list = get_json(&format!("{base}{path}")).await;
        assert_eq!(list["kind"], kind, "{path}");
        assert_eq!(list["apiVersion"], api_version, "{path}");
        assert!(rv(&list) > 0, "{path}");
        let items = list["items"].as_array().expect("items");
        assert_eq!(items.len(), 1, "{path}: {list}");
        // Optional on built-in items; right when present.
        for it in items {
            if let Some(k) = it.get("kind") {
                assert_eq!(k, item_kind, "{path}: {it}");
            }
            if let Some(v) = it.get("apiVersion") {
                assert_eq!(v, api_version, "{path}: {it}");
            }
        }
    }
}

// One storage format: custom resources are JSON in both (protobuf CRDs: http_misc, crds).
#[tokio::test]
async fn custom_resources_keep_kind_and_api_version_in_list_items() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_widget_crd(&mut kv, "/registry").await;
    put_json(
        &mut kv,
        "/registry/example.com/widgets/a/w1",
        &widget("a", "w1"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    put_json(
        &mut kv,
        "/registry/example.com/widgets/b/w2",
        &widget("b", "w2"),
    )
    .await;

    for path in [
        "/apis/example.com/v1/widgets",
        "/apis/example.com/v1/widgets?limit=1",
        "/apis/example.com/v1/namespaces/b/widgets",
    ] {
        let list = get_json(&format!("{base}{path}")).await;
        assert_eq!(list["kind"], "WidgetList", "{path}");
        assert_eq!(list["apiVersion"], "example.com/v1", "{path}");
        let items = list["items"].as_array().expect("items");
        assert!(!items.is_empty(), "{path}");
        for it in items {
            assert_eq!(it["kind"], "Widget", "{path}: {it}");
            assert_eq!(it["apiVersion"], "example.com/v1", "{path}: {it}");
        }
    }
    let mut stream = open_watch(&format!(
        "{base}/apis/example.com/v1/widgets?watch=1&resourceVersion=0"
    ))
    .await;
    for _ in 0..2 {
        let ev = next_event(&mut stream).await;
        assert_eq!(ev["object"]["kind"], "Widget", "{ev}");
        assert_eq!(ev["object"]["apiVersion"], "example.com/v1", "{ev}");
    }
}

// ---- get ------------------------------------------------------------------------------------

async fn get_rv_n_waits_for_not_older_than() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "g", "early", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    // Asked for right after the write: the get waits for N instead of answering 404.
    let n = put_pod(&mut kv, "g", "fresh", &[("v", "1")]).await;
    let got = get_json(&format!(
        "{base}/api/v1/namespaces/g/pods/fresh?resourceVersion={n}"
    ))
    .await;
    assert_eq!(rv(&got), n);
    let n2 = put_pod(&mut kv, "g", "fresh", &[("v", "2")]).await;
    let got = get_json(&format!(
        "{base}/api/v1/namespaces/g/pods/fresh?resourceVersion={n2}"
    ))
    .await;
    assert_eq!(got["metadata"]["labels"]["v"], "2", "{got}");
    assert_eq!(rv(&got), n2);
    // An older N may be answered with newer state.
    let got = get_json(&format!(
        "{base}/api/v1/namespaces/g/pods/fresh?resourceVersion={n}"
    ))
    .await;
    assert_eq!(rv(&got), n2);
    // N never reached: 504 Timeout, as for lists.
    let resp = http::get(
        &format!("{base}/api/v1/namespaces/g/pods/early?resourceVersion=999999999"),
        &[],
    )
    .await;
    let status = assert_full_status(&resp, 504, "Timeout", "get ahead");
    assert_eq!(resp.header("retry-after"), Some("1"));
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Too large resource version"),
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

// ---- watch ----------------------------------------------------------------------------------

async fn watch_rv_empty_is_like_unset_synthetic_added_at_consistent_revision() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_pod(&mut kv, "e", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    // Written after start: only a consistent start revision includes it.
    let rb = put_pod(&mut kv, "e", "b", &[]).await;

    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/e/pods?watch=true&resourceVersion="
    ))
    .await;
    check_event(&next_event(&mut stream).await, "ADDED", "a", ra);
    check_event(&next_event(&mut stream).await, "ADDED", "b", rb);
    let rc = put_pod(&mut kv, "e", "c", &[]).await;
    let ra2 = put_pod(&mut kv, "e", "a", &[("v", "2")]).await;
    check_event(&next_event(&mut stream).await, "ADDED", "c", rc);
    check_event(&next_event(&mut stream).await, "MODIFIED", "a", ra2);
}

async fn watch_rv_0_synthetic_added_from_cache() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_pod(&mut kv, "z", "a", &[]).await;
    let rb = put_pod(&mut kv, "z", "b", &[]).await;
    put_pod(&mut kv, "elsewhere", "x", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/z/pods?watch=1&resourceVersion=0"
    ))
    .await;
    check_event(&next_event(&mut stream).await, "ADDED", "a", ra);
    check_event(&next_event(&mut stream).await, "ADDED", "b", rb);
    let rc = put_pod(&mut kv, "z", "c", &[]).await;
    let rb2 = put_pod(&mut kv, "z", "b", &[("v", "2")]).await;
    let gone = delete_key(&mut kv, &pod_key("z", "a")).await;
    check_event(&next_event(&mut stream).await, "ADDED", "c", rc);
    check_event(&next_event(&mut stream).await, "MODIFIED", "b", rb2);
    check_event(&next_event(&mut stream).await, "DELETED", "a", gone);
}

async fn watch_body_is_chunked_single_line_json_per_event_flushed_per_event() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let from = etcd_revision(&mut kv).await;

    let mut stream = http::watch(
        &format!("{base}/api/v1/namespaces/f/pods?watch=true&resourceVersion={from}"),
        &[],
    )
    .await;
    assert_eq!(stream.status(), 200);
    let header = |name: &str| {
        stream
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    assert_eq!(header("transfer-encoding").as_deref(), Some("chunked"));
    assert!(
        header("content-type").is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        header("content-type")
    );
    // One write, then its event, before the next write: each event is flushed on its own.
    for (i, t) in ["ADDED", "MODIFIED", "DELETED"].iter().enumerate() {
        let revision = match *t {
            "DELETED" => delete_key(&mut kv, &pod_key("f", "p")).await,
            _ => put_pod(&mut kv, "f", "p", &[("i", &i.to_string())]).await,
        };
        let line = stream
            .next_line(EVENT_WAIT)
            .await
            .unwrap_or_else(|| panic!("no {t} event flushed within {EVENT_WAIT:?}"));
        let text = String::from_utf8_lossy(&line).into_owned();
        let event: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("one JSON document per line ({e}): {text}"));
        assert_eq!(keys(&event), ["object", "type"], "{text}");
        check_event(&event, t, "p", revision);
        // Compact: no whitespace between tokens (the re-serialised form is as long).
        assert_eq!(
            text.len(),
            serde_json::to_string(&event).unwrap().len(),
            "not compact: {text}"
        );
    }
}

async fn deleted_carries_delete_revision() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let from = etcd_revision(&mut kv).await;
    let mut pods = open_watch(&format!(
        "{base}/api/v1/namespaces/d/pods?watch=1&resourceVersion={from}"
    ))
    .await;
    let mut nodes = open_watch(&format!(
        "{base}/api/v1/nodes?watch=1&resourceVersion={from}"
    ))
    .await;

    let last = put_pod(&mut kv, "d", "p", &[("state", "last")]).await;
    let pod_gone = delete_key(&mut kv, &pod_key("d", "p")).await;
    let node_last = put_object(&mut kv, "/registry/minions/n", &node("n")).await;
    let node_gone = delete_key(&mut kv, "/registry/minions/n").await;

    check_event(&next_event(&mut pods).await, "ADDED", "p", last);
    let ev = next_event(&mut pods).await;
    check_event(&ev, "DELETED", "p", pod_gone);
    assert_ne!(pod_gone, last);
    let object = &ev["object"];
    assert_eq!(object["metadata"]["labels"]["state"], "last", "{ev}");
    assert_eq!(object["metadata"]["uid"], "uid-d-p", "{ev}");
    assert_eq!(object["spec"]["containers"][0]["name"], "main", "{ev}");
    assert_eq!(object["kind"], "Pod", "{ev}");

    check_event(&next_event(&mut nodes).await, "ADDED", "n", node_last);
    let ev = next_event(&mut nodes).await;
    check_event(&ev, "DELETED", "n", node_gone);
    assert_eq!(ev["object"]["status"]["conditions"][0]["type"], "Ready");
}

async fn bookmark_object_has_kind_api_version_and_only_resource_version() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "bm", "a", &[]).await;
    put_object(
        &mut kv,
        "/registry/deployments/bm/d",
        &object("apps/v1", "Deployment", Some("bm"), "d"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &["--bookmark-interval=100ms"]);
    let base = watchd.base_url();
    let from = etcd_revision(&mut kv).await;

    for (path, kind, api_version) in [
        ("/api/v1/namespaces/bm/pods", "Pod", "v1"),
        ("/apis/apps/v1/deployments", "Deployment", "apps/v1"),
    ] {
        let mut stream = open_watch(&format!(
            "{base}{path}?watch=true&allowWatchBookmarks=true&resourceVersion={from}"
        ))
        .await;
        let bookmark = event_where(&mut stream, |e| e["type"] == "BOOKMARK").await;
        let object = &bookmark["object"];
        assert_eq!(
            keys(object),
            ["apiVersion", "kind", "metadata"],
            "{bookmark}"
        );
        assert_eq!(object["kind"], kind, "{bookmark}");
        assert_eq!(object["apiVersion"], api_version, "{bookmark}");
        assert_eq!(keys(&object["metadata"]), ["resourceVersion"], "{bookmark}");
        assert!(rv(object) >= from, "{bookmark}");
    }
}

async fn bookmark_is_sent_shortly_before_timeout_seconds_expires() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_pod(&mut kv, "to", "a", &[]).await;
    // The default interval (60 s) is far beyond the watch's 3 s: only the last bookmark comes.
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/to/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=3"
    ))
    .await;
    let events = read_to_end(&mut stream, 10).await;
    assert!(stream.is_ended(), "timeoutSeconds closes the stream");
    check_event(&events[0], "ADDED", "a", ra);
    let last = events.last().expect("events");
    assert_eq!(last["type"], "BOOKMARK", "{events:?}");
    assert!(rv(&last["object"]) >= ra, "{last}");
}

async fn streaming_list_rv_n_serves_at_least_n() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_pod(&mut kv, "sl", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let rb = put_pod(&mut kv, "sl", "b", &[]).await;
    let n = put_pod(&mut kv, "sl", "a", &[("v", "2")]).await;

    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/sl/pods?watch=true&sendInitialEvents=true\
         &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={n}"
    ))
    .await;
    // Every object, each with its own resourceVersion, from a snapshot not older than N.
    let ev = next_event(&mut stream).await;
    check_event(&ev, "ADDED", "a", n);
    assert_eq!(ev["object"]["metadata"]["labels"]["v"], "2");
    check_event(&next_event(&mut stream).await, "ADDED", "b", rb);
    assert!(n > ra);
    let bookmark = next_event(&mut stream).await;
    assert_eq!(bookmark["type"], "BOOKMARK", "{bookmark}");
    let object = &bookmark["object"];
    assert!(rv(object) >= n, "{bookmark}");
    assert_eq!(
        keys(&object["metadata"]),
        ["annotations", "resourceVersion"],
        "{bookmark}"
    );
    assert_eq!(
        object["metadata"]["annotations"],
        json!({"k8s.io/initial-events-end": "true"}),
        "{bookmark}"
    );
    // Then live events, all after the snapshot.
    let rc = put_pod(&mut kv, "sl", "c", &[]).await;
    let ev = next_event(&mut stream).await;
    check_event(&ev, "ADDED", "c", rc);
    assert!(rc > rv(object));
}

async fn closed_watch_resumes_from_last_resource_version() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let from = etcd_revision(&mut kv).await;
    let url = format!("{base}/api/v1/namespaces/r/pods?watch=true");

    let mut stream = open_watch(&format!("{url}&resourceVersion={from}")).await;
    let ra = put_pod(&mut kv, "r", "a", &[]).await;
    check_event(&next_event(&mut stream).await, "ADDED", "a", ra);
    drop(stream);

    // While nobody watches.
    let rb = put_pod(&mut kv, "r", "b", &[]).await;
    let ra2 = put_pod(&mut kv, "r", "a", &[("v", "2")]).await;
    let mut stream = open_watch(&format!("{url}&resourceVersion={ra}")).await;
    check_event(&next_event(&mut stream).await, "ADDED", "b", rb);
    check_event(&next_event(&mut stream).await, "MODIFIED", "a", ra2);
    let rc = put_pod(&mut kv, "r", "c", &[]).await;
    check_event(&next_event(&mut stream).await, "ADDED", "c", rc);
}

// ---- selectors ------------------------------------------------------------------------------

async fn label_selector_allows_whitespace_around_tokens() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "ws", "front", &[("app", "web"), ("tier", "front")]).await;
    put_pod(&mut kv, "ws", "back", &[("app", "web"), ("tier", "back")]).await;
    put_pod(&mut kv, "ws", "db", &[("app", "db")]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let cases: &[(&str, &[&str])] = &[
        ("%20app%20%3D%20web%20", &["back", "front"]),
        ("app%20%3D%3D%20web%20,%20tier%20!%3D%20back", &["front"]),
        (
            "%20tier%20in%20(%20front%20,%20back%20)%20",
            &["back", "front"],
        ),
        ("app%20notin%20(%20web%20)", &["db"]),
        ("%20!%20tier%20", &["db"]),
        ("%20tier%20,%20app%20%3D%20web", &["back", "front"]),
    ];
    for (selector, want) in cases {
        let list = get_json(&format!(
            "{base}/api/v1/namespaces/ws/pods?labelSelector={selector}"
        ))
        .await;
        assert_eq!(item_names(&list), *want, "labelSelector={selector}");
    }
}

async fn metadata_name_and_namespace_field_selectors_work_for_every_resource() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for (ns, name) in [("a", "one"), ("b", "one"), ("a", "two")] {
        put_object(
            &mut kv,
            &format!("/registry/configmaps/{ns}/{name}"),
            &configmap(ns, name, "x"),
        )
        .await;
    }
    for name in ["n1", "n2"] {
        put_object(&mut kv, &format!("/registry/minions/{name}"), &node(name)).await;
    }
    put_widget_crd(&mut kv, "/registry").await;
    put_object(
        &mut kv,
        "/registry/example.com/widgets/a/w1",
        &widget("a", "w1"),
    )
    .await;
    put_object(
        &mut kv,
        "/registry/example.com/widgets/b/w2",
        &widget("b", "w2"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let cases: &[(&str, &str, &[&str])] = &[
        ("/api/v1/configmaps", "metadata.name%3Done", &["one", "one"]),
        (
            "/api/v1/configmaps",
            "metadata.namespace%3D%3Da",
            &["one", "two"],
        ),
        ("/api/v1/configmaps", "metadata.name!%3Done", &["two"]),
        (
            "/api/v1/configmaps",
            "metadata.namespace%3Db,metadata.name%3Done",
            &["one"],
        ),
        ("/api/v1/nodes", "metadata.name%3Dn2", &["n2"]),
        ("/api/v1/nodes", "metadata.name!%3Dn2", &["n1"]),
        (
            "/apis/example.com/v1/widgets",
            "metadata.namespace%3Db",
            &["w2"],
        ),
        (
            "/apis/example.com/v1/widgets",
            "metadata.name%3Dw1",
            &["w1"],
        ),
    ];
    for (path, selector, want) in cases {
        let list = get_json(&format!("{base}{path}?fieldSelector={selector}")).await;
        assert_eq!(item_names(&list), *want, "{path}?fieldSelector={selector}");
    }

    // Every served resource accepts both fields (cluster-scoped ones: metadata.name).
    let mut group_versions = vec!["v1".to_string()];
    let apis = get_json(&format!("{base}/apis")).await;
    for g in apis["groups"].as_array().expect("groups") {
        for v in g["versions"].as_array().expect("versions") {
            group_versions.push(v["groupVersion"].as_str().expect("gv").to_string());
        }
    }
    let mut checked = 0;
    for gv in &group_versions {
        let root = if gv == "v1" {
            "/api/v1".to_string()
        } else {
            format!("/apis/{gv}")
        };
        let doc = get_json(&format!("{base}{root}")).await;
        for r in doc["resources"].as_array().expect("resources") {
            let name = r["name"].as_str().expect("name");
            if name.contains('/') {
                continue;
            }
            let mut fields = vec!["metadata.name"];
            if r["namespaced"] == true {
                fields.push("metadata.namespace");
            }
            for field in fields {
                let url = format!("{base}{root}/{name}?fieldSelector={field}%3Dno-such-value");
                let list = get_json(&url).await;
                assert_eq!(list["items"], json!([]), "{url}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} resources discovered");
}

async fn pod_field_selectors_scheduler_name_service_account_name_and_pod_ip() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for (name, scheduler, sa, ip) in [
        ("p1", "default-scheduler", "default", "10.0.0.1"),
        ("p2", "custom", "builder", "10.0.0.2"),
    ] {
        let mut p = pod("fs", name, &[]);
        p["spec"]["schedulerName"] = json!(scheduler);
        p["spec"]["serviceAccountName"] = json!(sa);
        p["status"]["podIP"] = json!(ip);
        put_object(&mut kv, &pod_key("fs", name), &p).await;
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let cases: &[(&str, &[&str])] = &[
        ("spec.schedulerName%3Dcustom", &["p2"]),
        ("spec.schedulerName!%3Dcustom", &["p1"]),
        ("spec.serviceAccountName%3D%3Ddefault", &["p1"]),
        ("status.podIP%3D10.0.0.2", &["p2"]),
        (
            "spec.serviceAccountName%3Dbuilder,status.podIP%3D10.0.0.1",
            &[],
        ),
    ];
    for (selector, want) in cases {
        let list = get_json(&format!("{base}/api/v1/pods?fieldSelector={selector}")).await;
        assert_eq!(item_names(&list), *want, "fieldSelector={selector}");
    }
}

async fn event_involved_object_field_selectors() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "a"},
        "involvedObject": {"kind": "Pod", "namespace": "a", "name": "p1", "uid": "u-1",
            "apiVersion": "v1", "resourceVersion": "42", "fieldPath": "spec.containers{c}"},
        "reason": "BackOff", "type": "Warning",
    });
    put_object(&mut kv, "/registry/events/a/e1", &event).await;
    let mut other = event.clone();
    other["metadata"]["name"] = json!("e2");
    other["involvedObject"] = json!({"kind": "Node", "name": "n1"});
    other["type"] = json!("Normal");
    put_object(&mut kv, "/registry/events/a/e2", &other).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let cases: &[(&str, &[&str])] = &[
        ("involvedObject.kind%3DPod", &["e1"]),
        ("involvedObject.namespace%3Da", &["e1"]),
        ("involvedObject.name%3Dn1", &["e2"]),
        ("involvedObject.uid%3Du-1", &["e1"]),
        ("involvedObject.apiVersion%3Dv1", &["e1"]),
        ("involvedObject.resourceVersion%3D42", &["e1"]),
        ("involvedObject.fieldPath%3Dspec.containers%7Bc%7D", &["e1"]),
        ("type%3DNormal", &["e2"]),
        ("reason%3DBackOff,type!%3DWarning", &["e2"]),
    ];
    for (selector, want) in cases {
        let list = get_json(&format!("{base}/api/v1/events?fieldSelector={selector}")).await;
        assert_eq!(item_names(&list), *want, "fieldSelector={selector}");
    }
}

// ---- content negotiation --------------------------------------------------------------------

async fn protobuf_accept_with_json_fallback_is_answered_with_labelled_json() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let r = put_pod(&mut kv, "pj", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let accept = [("accept", PROTOBUF_OR_JSON)];

    // The body is whatever the Content-Type says: protobuf (issue 4) or JSON.
    for (path, kind) in [
        ("/api/v1/namespaces/pj/pods", "PodList"),
        ("/api/v1/namespaces/pj/pods/a", "Pod"),
    ] {
        let resp = http::get(&format!("{base}{path}"), &accept).await;
        assert_eq!(resp.status, 200, "{path}: {}", resp.text());
        match resp.header("content-type") {
            Some("application/vnd.kubernetes.protobuf") => {
                assert!(resp.body.starts_with(b"k8s\x00"), "{path}: not enveloped");
            }
            Some(ct) if ct.starts_with("application/json") => {
                let v = resp.json();
                assert_eq!(v["kind"], kind, "{path}");
            }
            other => panic!("{path}: unexpected content-type {other:?}"),
        }
    }
    let mut stream = http::watch(
        &format!("{base}/api/v1/namespaces/pj/pods?watch=1&resourceVersion=0"),
        &accept,
    )
    .await;
    assert_eq!(stream.status(), 200);
    let ct = stream
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if ct.starts_with("application/json") {
        check_event(&next_event(&mut stream).await, "ADDED", "a", r);
    } else {
        assert_eq!(ct, "application/vnd.kubernetes.protobuf;stream=watch");
    }
}

// One storage format: custom resources are JSON in both (protobuf CRDs: http_misc, crds).
#[tokio::test]
async fn custom_resources_are_json_only() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_widget_crd(&mut kv, "/registry").await;
    put_json(
        &mut kv,
        "/registry/example.com/widgets/a/w1",
        &widget("a", "w1"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    for path in [
        "/apis/example.com/v1/widgets",
        "/apis/example.com/v1/namespaces/a/widgets/w1",
    ] {
        let url = format!("{base}{path}");
        let resp = http::get(&url, &[("accept", "application/vnd.kubernetes.protobuf")]).await;
        assert_full_status(&resp, 406, "NotAcceptable", path);
        let resp = http::get(&url, &[("accept", PROTOBUF_OR_JSON)]).await;
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(
            resp.header("content-type"),
            Some("application/json"),
            "{path}"
        );
        assert!(resp.json()["kind"].as_str().unwrap().starts_with("Widget"));
    }
}

async fn table_default_columns_are_name_and_created_at() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object(
        &mut kv,
        "/registry/roles/t/l1",
        &object("rbac.authorization.k8s.io/v1", "Role", Some("t"), "l1"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    for path in [
        "/apis/rbac.authorization.k8s.io/v1/namespaces/t/roles",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/t/roles/l1",
    ] {
        let resp = http::get(&format!("{base}{path}"), &[("accept", TABLE_V1)]).await;
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.header("content-type"), Some(TABLE_V1), "{path}");
        let table = resp.json();
        assert_eq!(table["kind"], "Table", "{path}");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1", "{path}");
        let cols = table["columnDefinitions"].as_array().expect("columns");
        let summary: Vec<(&str, &str, &str)> = cols
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default(),
                    c["type"].as_str().unwrap_or_default(),
                    c["format"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [("Name", "string", "name"), ("Created At", "date", "")],
            "{path}"
        );
        let row = &table["rows"][0];
        assert_eq!(
            row["cells"],
            json!(["l1", "2024-01-02T03:04:05Z"]),
            "{path}"
        );
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata", "{path}");
        assert_eq!(row["object"]["metadata"]["name"], "l1", "{path}");
    }
}

/// As kube-apiserver: a body up to its gzip threshold (128 KiB, `defaultGzipThresholdBytes`)
/// is sent as it is to a client that accepts gzip (large lists: `http_content`), and a
/// watch that is not a watch list is never compressed.
async fn small_gets_and_plain_watch_streams_are_never_gzipped() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let r = put_pod(&mut kv, "gz", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let gzip = [("accept-encoding", "gzip")];

    let resp = http::get(&format!("{base}/api/v1/namespaces/gz/pods/a"), &gzip).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-encoding"), None);
    assert_eq!(rv(&resp.json()), r);

    let mut stream = http::watch(
        &format!("{base}/api/v1/namespaces/gz/pods?watch=1&resourceVersion=0"),
        &gzip,
    )
    .await;
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers().get("content-encoding").is_none(),
        "{:?}",
        stream.headers()
    );
    check_event(&next_event(&mut stream).await, "ADDED", "a", r);
    let r2 = put_pod(&mut kv, "gz", "b", &[]).await;
    check_event(&next_event(&mut stream).await, "ADDED", "b", r2);
}

// ---- discovery and other endpoints ----------------------------------------------------------

// One storage format: discovery does not depend on stored objects.
#[tokio::test]
async fn discovery_resources_carry_verbs_namespaced_kind_short_names_and_categories() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let find = |doc: &Value, name: &str| -> Value {
        doc["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {doc}"))
    };

    let v1 = get_json(&format!("{base}/api/v1")).await;
    assert_eq!(v1["kind"], "APIResourceList");
    for r in v1["resources"].as_array().expect("resources") {
        assert_eq!(r["verbs"], json!(["get", "list", "watch"]), "{r}");
        assert!(r["namespaced"].is_boolean(), "{r}");
        assert!(r["kind"].as_str().is_some_and(|k| !k.is_empty()), "{r}");
    }
    let pods = find(&v1, "pods");
    assert_eq!(pods["kind"], "Pod");
    assert_eq!(pods["namespaced"], true);
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["categories"], json!(["all"]));
    let services = find(&v1, "services");
    assert_eq!(services["shortNames"], json!(["svc"]));
    assert_eq!(services["categories"], json!(["all"]));
    let nodes = find(&v1, "nodes");
    assert_eq!(nodes["namespaced"], false);
    assert_eq!(nodes["shortNames"], json!(["no"]));

    let apps = get_json(&format!("{base}/apis/apps/v1")).await;
    let deployments = find(&apps, "deployments");
    assert_eq!(deployments["kind"], "Deployment");
    assert_eq!(deployments["shortNames"], json!(["deploy"]));
    assert_eq!(deployments["categories"], json!(["all"]));
    assert_eq!(deployments["verbs"], json!(["get", "list", "watch"]));
}

// One storage format: discovery does not depend on stored objects.
#[tokio::test]
async fn aggregated_discovery_is_labelled_with_the_version_served() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let offer = |v: &str| {
        format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList,application/json")
    };
    for path in ["/api", "/apis"] {
        for version in ["v2", "v2beta1"] {
            let accept = offer(version);
            let resp = http::get(&format!("{base}{path}"), &[("accept", &accept)]).await;
            assert_eq!(resp.status, 200, "{path} {version}");
            assert_eq!(
                resp.header("content-type"),
                Some(
                    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
                        .as_str()
                ),
                "{path} {version}"
            );
            let doc = resp.json();
            assert_eq!(doc["kind"], "APIGroupDiscoveryList", "{path}");
            assert_eq!(
                doc["apiVersion"],
                format!("apidiscovery.k8s.io/{version}"),
                "{path}"
            );
        }
        // Not offered: the legacy document, labelled plain JSON.
        let resp = http::get(&format!("{base}{path}"), &[("accept", "application/json")]).await;
        assert_eq!(resp.header("content-type"), Some("application/json"));
        let kind = resp.json()["kind"].as_str().unwrap_or_default().to_string();
        assert_eq!(
            kind,
            if path == "/api" {
                "APIVersions"
            } else {
                "APIGroupList"
            }
        );
    }
}

// One storage format: no objects. (The contract allows 404; watchd serves them, for
// `kubectl explain` and client-side validation: tests/openapi.rs.)
#[tokio::test]
async fn openapi_documents_are_served_and_unknown_group_versions_are_not_found() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let v2 = http::get(&format!("{base}/openapi/v2"), &[]).await;
    assert_eq!(v2.status, 200);
    assert_eq!(v2.json()["swagger"], "2.0");
    let root = http::get(&format!("{base}/openapi/v3"), &[]).await;
    assert_eq!(root.status, 200);
    let url = root.json()["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .expect("api/v1 in /openapi/v3")
        .to_string();
    let core = http::get(&format!("{base}{url}"), &[]).await;
    assert_eq!(core.status, 200);
    assert_eq!(core.json()["openapi"], "3.0.0");
    let missing = http::get(&format!("{base}/openapi/v3/apis/nosuch.example/v1"), &[]).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.text(), "404 page not found\n");
}

// One storage format: health checks do not depend on how objects are stored.
#[tokio::test]
async fn healthz_verbose_ends_with_check_passed() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    for (endpoint, checks) in [
        ("healthz", &["ping", "initial-sync"][..]),
        ("livez", &["ping"][..]),
        ("readyz", &["ping", "initial-sync", "etcd-watch"][..]),
    ] {
        let resp = http::get(&format!("{base}/{endpoint}?verbose"), &[]).await;
        assert_eq!(resp.status, 200, "{endpoint}");
        let text = resp.text();
        let lines: Vec<&str> = text.lines().collect();
        for check in checks {
            assert!(
                lines.contains(&format!("[+]{check} ok").as_str()),
                "{endpoint}: {text}"
            );
        }
        assert_eq!(
            lines.last().copied(),
            Some(format!("{endpoint} check passed").as_str()),
            "{endpoint}: {text}"
        );
        assert!(
            lines[..lines.len() - 1]
                .iter()
                .all(|l| l.starts_with("[+]")),
            "{endpoint}: {text}"
        );
        // Without ?verbose: just ok.
        let plain = http::get(&format!("{base}/{endpoint}"), &[]).await;
        assert_eq!((plain.status, plain.text().as_str()), (200, "ok"));
    }
}

// One storage format: health checks do not depend on how objects are stored.
#[tokio::test]
async fn readyz_exclude_and_per_check_paths() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    for path in [
        "/readyz/ping",
        "/readyz/initial-sync",
        "/readyz/etcd-watch",
        "/livez/ping",
        "/healthz/ping",
        "/healthz/initial-sync",
        "/readyz?exclude=etcd-watch",
    ] {
        let resp = http::get(&format!("{base}{path}"), &[]).await;
        assert_eq!((resp.status, resp.text().as_str()), (200, "ok"), "{path}");
    }
    let text = http::get(&format!("{base}/readyz?verbose&exclude=etcd-watch"), &[])
        .await
        .text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"[+]etcd-watch excluded: ok"), "{text}");
    assert!(!lines.contains(&"[+]etcd-watch ok"), "{text}");
    assert!(lines.contains(&"[+]ping ok"), "{text}");
    assert_eq!(lines.last(), Some(&"readyz check passed"), "{text}");
    // A check the endpoint does not have.
    for path in ["/readyz/nope", "/livez/etcd-watch"] {
        let resp = http::get(&format!("{base}{path}"), &[]).await;
        assert_full_status(&resp, 404, "NotFound", path);
    }
}

// One storage format: health checks do not depend on how objects are stored.
#[tokio::test]
async fn readyz_exclude_may_be_repeated_as_kube_apiserver_accepts() {
    // kube-apiserver reads every `exclude` parameter (`?exclude=a&exclude=b`).
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let text = http::get(
        &format!("{base}/readyz?verbose&exclude=initial-sync&exclude=etcd-watch"),
        &[],
    )
    .await
    .text();
    let lines: Vec<&str> = text.lines().collect();
    for check in ["initial-sync", "etcd-watch"] {
        assert!(
            lines.contains(&format!("[+]{check} excluded: ok").as_str()),
            "{check} not excluded:\n{text}"
        );
        assert!(
            !lines.contains(&format!("[+]{check} ok").as_str()),
            "{check} still checked:\n{text}"
        );
    }
}

// One storage format: readiness follows the etcd watch, not the objects.
#[tokio::test]
async fn readyz_fails_while_the_etcd_watch_is_down() {
    let mut etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "rd", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    etcd.kill9();
    let resp = poll_status(&base, "/readyz", 500, Duration::from_secs(30)).await;
    let text = resp.text();
    assert!(
        text.lines().any(|l| l.starts_with("[-]etcd-watch failed")),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "[+]initial-sync ok"), "{text}");
    assert_eq!(text.lines().last(), Some("readyz check failed"), "{text}");
    let live = http::get(&format!("{base}/livez"), &[]).await;
    assert_eq!((live.status, live.text().as_str()), (200, "ok"));

    etcd.restart();
    poll_status(&base, "/readyz", 200, Duration::from_secs(30)).await;
    let mut kv = etcd.client().await;
    let rb = put_pod(&mut kv, "rd", "b", &[]).await;
    let list = get_json(&format!("{base}/api/v1/namespaces/rd/pods")).await;
    assert_eq!(item_names(&list), ["a", "b"]);
    assert_eq!(rv(item(&list, "b")), rb);
}

// One storage format: there is no etcd to store anything.
#[tokio::test]
async fn not_ready_until_initial_sync_like_kube_apiservers_watch_cache() {
    // An etcd that never answers: the initial sync cannot finish.
    let nowhere = format!("http://127.0.0.1:{}", support::free_port());
    let watchd = Watchd::spawn(&nowhere, &[]);
    let base = watchd.base_url();
    poll_status(&base, "/livez", 200, Duration::from_secs(30)).await;

    let resp = http::get(&format!("{base}/readyz"), &[]).await;
    assert_eq!(resp.status, 500, "{}", resp.text());
    let text = resp.text();
    assert!(
        text.lines()
            .any(|l| l.starts_with("[-]initial-sync failed")),
        "{text}"
    );
    assert_eq!(text.lines().last(), Some("readyz check failed"), "{text}");
    // kube-apiserver before its watch cache is ready: watches and unpaginated lists 429
    // with Retry-After; gets and paginated lists read etcd (unreachable here: 504).
    for path in ["/api/v1/pods", "/api/v1/pods?watch=1"] {
        let resp = http::get(&format!("{base}{path}"), &[]).await;
        let status = assert_full_status(&resp, 429, "TooManyRequests", path);
        assert_eq!(status["message"], "storage is (re)initializing", "{path}");
        assert_eq!(resp.header("retry-after"), Some("1"), "{path}");
    }
    for path in ["/api/v1/namespaces/default/pods/a", "/api/v1/pods?limit=5"] {
        let resp = http::get(&format!("{base}{path}"), &[]).await;
        assert_full_status(&resp, 504, "Timeout", path);
    }
}

// One storage format: it checks the metrics' text format, not objects.
#[tokio::test]
async fn metrics_are_prometheus_text() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "m", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    get_json(&format!("{base}/api/v1/pods")).await;

    let resp = http::get(&format!("{base}/metrics"), &[]).await;
    assert_eq!(resp.status, 200);
    assert!(
        resp.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain")),
        "{:?}",
        resp.header("content-type")
    );
    let text = resp.text();
    let is_name = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut samples = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.split_whitespace();
            let (Some(what), Some(name)) = (words.next(), words.next()) else {
                panic!("comment without a metric name: {line}");
            };
            assert!(matches!(what, "HELP" | "TYPE"), "{line}");
            assert!(is_name(name), "{line}");
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name = series.split_once('{').map_or(series, |(n, _)| n);
        assert!(is_name(name), "bad metric name in: {line}");
        if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
            assert!(
                labels.starts_with('{') && labels.ends_with('}'),
                "bad labels in: {line}"
            );
        }
        assert!(value.parse::<f64>().is_ok(), "bad value in: {line}");
        samples += 1;
    }
    assert!(samples > 0, "{text}");
    assert!(
        metric(&text, "watchd_requests_total", &["verb=\"list\""]).is_some(),
        "{text}"
    );
}

// ---- Status objects -------------------------------------------------------------------------

/// A request that must fail: method, URL, headers, HTTP status (= `code`), `reason`.
type ErrorCase<'a> = (&'a str, String, &'a [(&'a str, &'a str)], u16, &'a str);

// One storage format: the error Statuses do not depend on how objects are stored.
#[tokio::test]
async fn status_objects_have_kind_status_api_version_v1_metadata_and_code_equal_to_http_status() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &["--snapshot-ring=1"]);
    let base = watchd.base_url();
    let old = put_pod(&mut kv, "st", "a", &[("v", "1")]).await;
    put_pod(&mut kv, "st", "a", &[("v", "2")]).await;
    put_pod(&mut kv, "st", "a", &[("v", "3")]).await;
    get_json(&format!("{base}/api/v1/namespaces/st/pods")).await;

    let pods = format!("{base}/api/v1/namespaces/st/pods");
    let cases: Vec<ErrorCase<'_>> = vec![
        ("GET", format!("{pods}?limit=abc"), &[], 400, "BadRequest"),
        ("GET", format!("{pods}/missing"), &[], 404, "NotFound"),
        ("GET", format!("{base}/no/such/path"), &[], 404, "NotFound"),
        ("DELETE", format!("{pods}/a"), &[], 405, "MethodNotAllowed"),
        ("POST", pods.clone(), &[], 405, "MethodNotAllowed"),
        (
            "GET",
            pods.clone(),
            &[("accept", "text/html")],
            406,
            "NotAcceptable",
        ),
        (
            "GET",
            format!("{pods}?resourceVersion={old}&resourceVersionMatch=Exact"),
            &[],
            410,
            "Expired",
        ),
        (
            "GET",
            format!("{pods}?resourceVersionMatch=Exact"),
            &[],
            422,
            "Invalid",
        ),
        (
            "GET",
            format!("{pods}?resourceVersion=999999999"),
            &[],
            504,
            "Timeout",
        ),
    ];
    for (method, url, headers, code, reason) in cases {
        let resp = http::request(method, &url, headers, "").await;
        let what = format!("{method} {url}");
        let status = assert_full_status(&resp, code, reason, &what);
        if code == 404 && url.ends_with("/missing") {
            assert_eq!(
                status["details"],
                json!({"name": "missing", "kind": "pods"}),
                "{what}"
            );
        }
        if code == 504 {
            assert_eq!(resp.header("retry-after"), Some("1"), "{what}");
        }
    }
}

// ---- Rendering protobuf as JSON -------------------------------------------------------------

// One run: it writes hand-made protobuf values raw.
#[tokio::test]
async fn protobuf_zero_creation_timestamp_is_omitted_and_empty_omitempty_fields_are_omitted() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let bare = pb_envelope(
        "v1",
        "Pod",
        &PbMeta {
            name: "bare",
            namespace: "pz",
            ..PbMeta::default()
        },
    );
    put_raw(&mut kv, &pod_key("pz", "bare"), bare).await;
    let full = pb_envelope(
        "v1",
        "Pod",
        &PbMeta {
            name: "full",
            namespace: "pz",
            generation: 3,
            created: Some(1_700_000_000),
            labels: &[("app", "x")],
            ..PbMeta::default()
        },
    );
    put_raw(&mut kv, &pod_key("pz", "full"), full).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let bare = get_json(&format!("{base}/api/v1/namespaces/pz/pods/bare")).await;
    let meta = &bare["metadata"];
    // A zero metav1.Time renders as null, except ObjectMeta.creationTimestamp: since
    // Kubernetes 1.34 it is tagged `omitempty,omitzero` and a zero value is omitted, which is
    // what kube-apiserver serves (the contract's `creationTimestamp: null` predates that).
    assert!(meta.get("creationTimestamp").is_none(), "{bare}");
    // generation (int64, omitempty) and labels/annotations (maps, omitempty) are omitted.
    for absent in ["generation", "labels", "annotations"] {
        assert!(meta.get(absent).is_none(), "{absent} present: {bare}");
    }
    let full = get_json(&format!("{base}/api/v1/namespaces/pz/pods/full")).await;
    assert_eq!(full["metadata"]["generation"], 3, "{full}");
    assert_eq!(
        full["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z",
        "{full}"
    );
    assert_eq!(full["metadata"]["labels"], json!({"app": "x"}), "{full}");
}
