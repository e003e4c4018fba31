//! get and list over HTTP against a real etcd: resourceVersion semantics, paging,
//! selectors and the errors of each, as kube-apiserver answers them.

mod support;

use serde_json::{json, Value};
use std::time::Duration;

use support::http;
use support::kube::*;
use support::kubepb;
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf.
storage_tests! {
    stored_values_take_the_scenarios_format_and_are_served_as_kube_apiserver_would,
    get_returns_the_object_with_its_mod_revision_as_resource_version,
    get_of_a_missing_object_is_not_found_status,
    get_of_cluster_scoped_objects_by_name,
    get_with_resource_version_zero_is_served_from_the_cache,
    list_all_namespaces_and_one_namespace,
    empty_list_has_an_empty_items_array,
    list_resource_version_is_not_older_than_the_last_write,
    list_with_limit_pages_through_one_snapshot,
    remaining_item_count_is_omitted_with_a_selector_and_on_the_last_page,
    list_exact_resource_version_returns_the_state_at_that_revision,
    list_exact_resource_version_older_than_kept_snapshots_is_expired,
    list_continue_token_older_than_kept_snapshots_is_expired,
    list_continue_with_explicit_resource_version_is_bad_request,
    label_selector_filters_list,
    field_selector_filters_by_name_and_namespace,
    pod_specific_field_selectors_filter_list,
    full_lists_larger_than_a_batch_have_every_object_once_in_key_order,
    a_full_list_read_slowly_is_the_state_at_its_resource_version,
}

/// The guard of the two formats: a built-in object is stored in the format the test's name
/// says (`json::...` or `protobuf::...`), so a parametrization that wrote JSON twice fails
/// here; a custom resource is JSON in both; watchd serves the object exactly as
/// kube-apiserver would for what is stored, in a get, a list and watch events.
async fn stored_values_take_the_scenarios_format_and_are_served_as_kube_apiserver_would() {
    // libtest runs each test on a thread named after it; a current-thread runtime polls
    // the test's future on that thread.
    let test = std::thread::current()
        .name()
        .unwrap_or_default()
        .to_string();
    let storage = if test.starts_with("json::") {
        Storage::Json
    } else if test.starts_with("protobuf::") {
        Storage::Protobuf
    } else {
        panic!("run through storage_tests!, not as {test:?}");
    };
    assert_eq!(Storage::current(), storage, "{test}");
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let key = pod_key("guard", "web");
    let written = pod("guard", "web", &[("app", "web")]);
    let r = put_pod(&mut kv, "guard", "web", &[("app", "web")]).await;
    let stored = stored_value(&mut kv, &key).await;
    match storage {
        Storage::Json => assert!(stored.starts_with(b"{"), "{test}: {stored:?}"),
        Storage::Protobuf => assert!(stored.starts_with(b"k8s\0"), "{test}: {stored:?}"),
    }
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "guard"}, "spec": {"size": 3}});
    let widget_key = "/registry/example.com/widgets/guard/w";
    put_object(&mut kv, widget_key, &widget).await;
    assert!(stored_value(&mut kv, widget_key).await.starts_with(b"{"));
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let got = get_json(&format!("{base}/api/v1/namespaces/guard/pods/web")).await;
    assert_served(&got, &written, r);
    let list = get_json(&format!("{base}/api/v1/namespaces/guard/pods")).await;
    assert_eq!(item_names(&list), ["web"]);
    assert_served(&list["items"][0], &written, r);
    if storage == Storage::Protobuf {
        // The message itself, read back by the tests' own decoder.
        let resp = http::get(
            &format!("{base}/api/v1/namespaces/guard/pods/web"),
            &[("accept", "application/vnd.kubernetes.protobuf")],
        )
        .await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        kubepb::assert_protobuf_as_written(&resp.body, &written, r);
    }
    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/guard/pods?watch=1&resourceVersion={}",
        rv(&list)
    ))
    .await;
    let changed = pod("guard", "web", &[("app", "v2")]);
    let r2 = put_object(&mut kv, &key, &changed).await;
    let gone = delete_key(&mut kv, &key).await;
    let ev = next_event(&mut stream).await;
    assert_eq!(ev["type"], "MODIFIED", "{ev}");
    assert_served(&ev["object"], &changed, r2);
    // The last state, at the revision of the deletion.
    let ev = next_event(&mut stream).await;
    assert_eq!(ev["type"], "DELETED", "{ev}");
    assert_served(&ev["object"], &changed, gone);
    // The two renderings differ where Go's JSON writes zero values of the decoded object.
    let resources = &got["spec"]["containers"][0]["resources"];
    match storage {
        Storage::Json => assert!(resources.is_null(), "{got}"),
        Storage::Protobuf => assert_eq!(*resources, json!({}), "{got}"),
    }
}

/// The tolerance of [`kubepb::assert_json_as_written`]: zero values go, at any depth, but
/// not from arrays, whose positions matter.
#[test]
fn zero_values_are_dropped_recursively_and_array_positions_kept() {
    let v = json!({"a": 0, "b": {"c": false, "d": {"e": ""}}, "f": [0, {"g": null}], "h": 1});
    assert_eq!(kubepb::without_zeros(&v), json!({"f": [0, {}], "h": 1}));
    let pod = json!({"spec": {"containers": [{"name": "a", "resources": {}}]}, "status": {}});
    assert_eq!(
        kubepb::without_zeros(&pod),
        json!({"spec": {"containers": [{"name": "a"}]}})
    );
}

async fn get_returns_the_object_with_its_mod_revision_as_resource_version() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let before = put_pod(&mut kv, "default", "web", &[("app", "web")]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let after = put_pod(&mut kv, "default", "late", &[]).await;

    let web = get_json(&format!("{base}/api/v1/namespaces/default/pods/web")).await;
    assert_served(&web, &pod("default", "web", &[("app", "web")]), before);
    assert_eq!(
        rv(&web),
        mod_revision(&mut kv, &pod_key("default", "web")).await
    );

    // Written after start: a get with resourceVersion unset is consistent, so it sees it.
    let late = get_json(&format!("{base}/api/v1/namespaces/default/pods/late")).await;
    assert_eq!(late["metadata"]["name"], "late");
    assert_eq!(rv(&late), after);

    let updated = put_pod(&mut kv, "default", "web", &[("app", "web2")]).await;
    let web = get_json(&format!("{base}/api/v1/namespaces/default/pods/web")).await;
    assert_eq!(web["metadata"]["labels"]["app"], "web2");
    assert_eq!(rv(&web), updated);
}

async fn get_of_a_missing_object_is_not_found_status() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "default", "web", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let status = get_status(
        &format!("{base}/api/v1/namespaces/default/pods/x"),
        404,
        "NotFound",
    )
    .await;
    assert_eq!(status["message"], "pods \"x\" not found");
    assert_eq!(status["details"]["name"], "x");
    assert_eq!(status["details"]["kind"], "pods");
    assert!(status["details"].get("group").is_none(), "{status}");

    // Same name in another namespace is not the same object.
    get_status(
        &format!("{base}/api/v1/namespaces/other/pods/web"),
        404,
        "NotFound",
    )
    .await;
    let status = get_status(
        &format!("{base}/apis/apps/v1/namespaces/default/deployments/d"),
        404,
        "NotFound",
    )
    .await;
    assert_eq!(status["message"], "deployments.apps \"d\" not found");
    assert_eq!(status["details"]["group"], "apps");
}

async fn get_of_cluster_scoped_objects_by_name() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let node_rev = put_object(&mut kv, "/registry/minions/node-1", &node("node-1")).await;
    let ns_rev = put_object(&mut kv, "/registry/namespaces/team-a", &namespace("team-a")).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let n = get_json(&format!("{base}/api/v1/nodes/node-1")).await;
    assert_eq!(
        (n["kind"].as_str(), n["metadata"]["name"].as_str()),
        (Some("Node"), Some("node-1"))
    );
    assert_eq!(rv(&n), node_rev);
    assert!(n["metadata"].get("namespace").is_none(), "{n}");

    let ns = get_json(&format!("{base}/api/v1/namespaces/team-a")).await;
    assert_eq!(ns["kind"], "Namespace");
    assert_eq!(rv(&ns), ns_rev);

    let status = get_status(&format!("{base}/api/v1/nodes/node-2"), 404, "NotFound").await;
    assert_eq!(status["message"], "nodes \"node-2\" not found");
    // A cluster-scoped resource has no namespaced path.
    get_status(
        &format!("{base}/api/v1/namespaces/default/nodes/node-1"),
        404,
        "NotFound",
    )
    .await;
}

async fn get_with_resource_version_zero_is_served_from_the_cache() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let rev = put_pod(&mut kv, "default", "web", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let web = get_json(&format!(
        "{base}/api/v1/namespaces/default/pods/web?resourceVersion=0"
    ))
    .await;
    assert_eq!(web["metadata"]["name"], "web");
    assert_eq!(rv(&web), rev);
    // "Not older than N" with N already applied answers at once.
    let web = get_json(&format!(
        "{base}/api/v1/namespaces/default/pods/web?resourceVersion={rev}"
    ))
    .await;
    assert_eq!(rv(&web), rev);
}

async fn list_all_namespaces_and_one_namespace() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "ns1", "a", &[]).await;
    put_pod(&mut kv, "ns1", "b", &[]).await;
    put_pod(&mut kv, "ns2", "c", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    // "ns10" shares the prefix "ns1" but is another namespace.
    let last = put_pod(&mut kv, "ns10", "d", &[]).await;

    let all = get_json(&format!("{base}/api/v1/pods")).await;
    assert_eq!(all["kind"], "PodList");
    assert_eq!(all["apiVersion"], "v1");
    assert_eq!(item_names(&all), ["a", "b", "d", "c"], "etcd key order");
    assert!(rv(&all) >= last);
    for it in all["items"].as_array().unwrap() {
        let key = pod_key(
            it["metadata"]["namespace"].as_str().unwrap(),
            it["metadata"]["name"].as_str().unwrap(),
        );
        assert_eq!(rv(it), mod_revision(&mut kv, &key).await, "{it}");
    }

    let ns1 = get_json(&format!("{base}/api/v1/namespaces/ns1/pods")).await;
    assert_eq!(ns1["kind"], "PodList");
    assert_eq!(item_names(&ns1), ["a", "b"]);
    assert!(ns1["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["metadata"]["namespace"] == "ns1"));
    let ns10 = get_json(&format!("{base}/api/v1/namespaces/ns10/pods")).await;
    assert_eq!(item_names(&ns10), ["d"]);
}

async fn empty_list_has_an_empty_items_array() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object(
        &mut kv,
        "/registry/configmaps/full/cm",
        &configmap("full", "cm", "1"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    for path in [
        "/api/v1/namespaces/empty/configmaps",
        "/apis/apps/v1/deployments",
    ] {
        let list = get_json(&format!("{base}{path}")).await;
        assert_eq!(list["items"], serde_json::json!([]), "{path}: {list}");
        assert!(rv(&list) > 0, "{path}: {list}");
    }
    let list = get_json(&format!("{base}/api/v1/namespaces/empty/configmaps")).await;
    assert_eq!(list["kind"], "ConfigMapList");
    let list = get_json(&format!("{base}/apis/apps/v1/deployments")).await;
    assert_eq!(
        (list["kind"].as_str(), list["apiVersion"].as_str()),
        (Some("DeploymentList"), Some("apps/v1"))
    );
}

async fn list_resource_version_is_not_older_than_the_last_write() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    for i in 0..5 {
        let rev = put_pod(&mut kv, "rv", &format!("p{i}"), &[]).await;
        let list = get_json(&format!("{base}/api/v1/namespaces/rv/pods")).await;
        assert!(
            rv(&list) >= rev,
            "list RV {} older than write {rev}",
            rv(&list)
        );
        assert_eq!(item_names(&list).len(), i + 1);
    }
    // A write to another resource also moves a consistent list forward.
    let other = put_object(
        &mut kv,
        "/registry/configmaps/rv/cm",
        &configmap("rv", "cm", "x"),
    )
    .await;
    let list = get_json(&format!("{base}/api/v1/namespaces/rv/pods")).await;
    assert!(
        rv(&list) >= other,
        "list RV {} older than write {other}",
        rv(&list)
    );
}

async fn list_with_limit_pages_through_one_snapshot() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let mut revs = Vec::new();
    for i in 1..=5 {
        revs.push(put_pod(&mut kv, "page", &format!("p{i}"), &[("v", "old")]).await);
    }
    let url = format!("{base}/api/v1/namespaces/page/pods?limit=2");
    let first = get_json(&url).await;
    let snapshot = rv(&first);
    assert!(snapshot >= revs[4]);
    assert_eq!(item_names(&first), ["p1", "p2"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3, "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue on the first page")
        .to_string();

    // Changes between pages must not show on later pages.
    let new_rev = put_pod(&mut kv, "page", "p6", &[]).await;
    put_pod(&mut kv, "page", "p4", &[("v", "new")]).await;
    delete_key(&mut kv, &pod_key("page", "p5")).await;

    let second = get_json(&format!("{url}&continue={token}")).await;
    assert_eq!(
        rv(&second),
        snapshot,
        "every page shows the first page's RV"
    );
    assert_eq!(item_names(&second), ["p3", "p4"]);
    assert_eq!(item(&second, "p4")["metadata"]["labels"]["v"], "old");
    assert_eq!(rv(item(&second, "p4")), revs[3]);
    assert_eq!(second["metadata"]["remainingItemCount"], 1, "{second}");
    let token = second["metadata"]["continue"]
        .as_str()
        .expect("continue on the second page")
        .to_string();

    let third = get_json(&format!("{url}&continue={token}")).await;
    assert_eq!(rv(&third), snapshot);
    assert_eq!(
        item_names(&third),
        ["p5"],
        "p5 still exists in the snapshot, p6 does not"
    );
    assert!(
        third["metadata"].get("continue").is_none_or(|c| c == ""),
        "{third}"
    );
    assert!(
        third["metadata"].get("remainingItemCount").is_none(),
        "{third}"
    );

    // A new listing sees the changes.
    let fresh = get_json(&format!("{base}/api/v1/namespaces/page/pods")).await;
    assert!(rv(&fresh) > snapshot && rv(&fresh) >= new_rev);
    assert_eq!(item_names(&fresh), ["p1", "p2", "p3", "p4", "p6"]);
    assert_eq!(item(&fresh, "p4")["metadata"]["labels"]["v"], "new");
}

async fn remaining_item_count_is_omitted_with_a_selector_and_on_the_last_page() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for i in 1..=4 {
        put_pod(&mut kv, "sel", &format!("p{i}"), &[("app", "web")]).await;
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    for selector in [
        "labelSelector=app%3Dweb",
        "fieldSelector=metadata.namespace%3Dsel",
    ] {
        let url = format!("{base}/api/v1/pods?limit=3&{selector}");
        let first = get_json(&url).await;
        assert_eq!(item_names(&first), ["p1", "p2", "p3"], "{selector}");
        let token = first["metadata"]["continue"]
            .as_str()
            .unwrap_or_else(|| panic!("{selector}: no continue: {first}"));
        assert!(
            first["metadata"].get("remainingItemCount").is_none(),
            "{selector}: {first}"
        );
        let last = get_json(&format!("{url}&continue={token}")).await;
        assert_eq!(item_names(&last), ["p4"], "{selector}");
        assert!(
            last["metadata"].get("remainingItemCount").is_none(),
            "{selector}: {last}"
        );
        assert!(
            last["metadata"].get("continue").is_none_or(|c| c == ""),
            "{selector}: {last}"
        );
    }
    // Without a selector, a limit covering everything yields a single last page.
    let all = get_json(&format!("{base}/api/v1/pods?limit=4")).await;
    assert_eq!(item_names(&all).len(), 4);
    assert!(all["metadata"].get("remainingItemCount").is_none(), "{all}");
    assert!(
        all["metadata"].get("continue").is_none_or(|c| c == ""),
        "{all}"
    );
}

async fn list_exact_resource_version_returns_the_state_at_that_revision() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let key = "/registry/configmaps/ex/a";
    let r1 = put_object(&mut kv, key, &configmap("ex", "a", "one")).await;
    let r2 = put_object(&mut kv, key, &configmap("ex", "a", "two")).await;
    let r3 = put_object(
        &mut kv,
        "/registry/configmaps/ex/b",
        &configmap("ex", "b", "b"),
    )
    .await;
    let list_url = format!("{base}/api/v1/namespaces/ex/configmaps");
    assert_eq!(item_names(&get_json(&list_url).await), ["a", "b"]);

    let at1 = get_json(&format!(
        "{list_url}?resourceVersion={r1}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(rv(&at1), r1);
    assert_eq!(item_names(&at1), ["a"]);
    assert_eq!(item(&at1, "a")["data"]["value"], "one");
    assert_eq!(rv(item(&at1, "a")), r1);

    let at2 = get_json(&format!(
        "{list_url}?resourceVersion={r2}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(rv(&at2), r2);
    assert_eq!(item_names(&at2), ["a"]);
    assert_eq!(item(&at2, "a")["data"]["value"], "two");

    // With a limit and no resourceVersionMatch, resourceVersion=N is exact too.
    let limited = get_json(&format!("{list_url}?resourceVersion={r1}&limit=10")).await;
    assert_eq!(rv(&limited), r1);
    assert_eq!(item(&limited, "a")["data"]["value"], "one");

    let now = get_json(&format!(
        "{list_url}?resourceVersion={r3}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(item_names(&now), ["a", "b"]);
    // NotOlderThan an old revision may answer with newer state, never older.
    let newer = get_json(&format!(
        "{list_url}?resourceVersion={r1}&resourceVersionMatch=NotOlderThan"
    ))
    .await;
    assert!(rv(&newer) >= r3, "{newer}");
    assert_eq!(item(&newer, "a")["data"]["value"], "two");
}

async fn list_exact_resource_version_older_than_kept_snapshots_is_expired() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &["--snapshot-ring=1"]);
    let base = watchd.base_url();
    let r1 = put_pod(&mut kv, "old", "a", &[("v", "1")]).await;
    put_pod(&mut kv, "old", "a", &[("v", "2")]).await;
    let r3 = put_pod(&mut kv, "old", "a", &[("v", "3")]).await;
    let url = format!("{base}/api/v1/namespaces/old/pods");
    assert_eq!(rv(&get_json(&url).await), r3);

    let status = get_status(
        &format!("{url}?resourceVersion={r1}&resourceVersionMatch=Exact"),
        410,
        "Expired",
    )
    .await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains(&r1.to_string()),
        "{status}"
    );
    // The newest snapshot is still served exactly.
    let at3 = get_json(&format!(
        "{url}?resourceVersion={r3}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(item(&at3, "a")["metadata"]["labels"]["v"], "3");
}

async fn list_continue_token_older_than_kept_snapshots_is_expired() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "old", "a", &[]).await;
    put_pod(&mut kv, "old", "b", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &["--snapshot-ring=1"]);
    let base = watchd.base_url();
    let url = format!("{base}/api/v1/namespaces/old/pods?limit=1");
    let first = get_json(&url).await;
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    put_pod(&mut kv, "old", "c", &[]).await;
    put_pod(&mut kv, "old", "d", &[]).await;
    get_json(&format!("{base}/api/v1/namespaces/old/pods")).await;

    let status = get_status(&format!("{url}&continue={token}"), 410, "Expired").await;
    assert!(
        status["message"].as_str().unwrap().contains("continue"),
        "{status}"
    );
}

// One storage format: the 504 comes before any object is read, whatever its format.
#[tokio::test]
async fn list_resource_version_ahead_of_etcd_times_out_with_retry_after() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "default", "web", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let resp = http::get(
        &format!("{base}/api/v1/pods?resourceVersion=999999999"),
        &[],
    )
    .await;
    let status = assert_status(&resp, 504, "Timeout");
    assert_eq!(resp.header("retry-after"), Some("1"));
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("Too large resource version"), "{status}");
    assert!(message.contains("999999999"), "{status}");
    assert_eq!(
        status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{status}"
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{status}");
}

async fn list_continue_with_explicit_resource_version_is_bad_request() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "c", "a", &[]).await;
    let last = put_pod(&mut kv, "c", "b", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let url = format!("{base}/api/v1/namespaces/c/pods?limit=1");
    let first = get_json(&url).await;
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();

    let status = get_status(
        &format!("{url}&continue={token}&resourceVersion={last}"),
        400,
        "BadRequest",
    )
    .await;
    assert!(
        status["message"].as_str().unwrap().contains("continue"),
        "{status}"
    );
    // resourceVersion=0 with a token is treated as the token's revision.
    let second = get_json(&format!("{url}&continue={token}&resourceVersion=0")).await;
    assert_eq!(item_names(&second), ["b"]);
    assert_eq!(rv(&second), rv(&first));
    // A token that is not one of ours.
    get_status(&format!("{url}&continue=not-a-token"), 400, "BadRequest").await;
}

// One storage format: the 422s come from the query alone, before any object is read.
#[tokio::test]
async fn invalid_resource_version_match_combinations_are_unprocessable() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "default", "web", &[]).await;
    put_pod(&mut kv, "default", "web2", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let first = get_json(&format!("{base}/api/v1/pods?limit=1")).await;
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();

    let cases = [
        (
            "resourceVersionMatch=Exact",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersionMatch=Exact&resourceVersion=0",
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ),
        (
            "resourceVersionMatch=Sometime&resourceVersion=5",
            "Unsupported value: \"Sometime\"",
        ),
        (
            &format!("resourceVersionMatch=NotOlderThan&resourceVersion=0&continue={token}"),
            "resourceVersionMatch is forbidden when continue is provided",
        ),
    ];
    for (query, message) in cases {
        let status = get_status(&format!("{base}/api/v1/pods?{query}"), 422, "Invalid").await;
        assert!(
            status["message"].as_str().unwrap().contains(message),
            "{query}: {status}"
        );
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .starts_with("ListOptions.meta.k8s.io \"\" is invalid"),
            "{query}: {status}"
        );
        assert_eq!(status["details"]["kind"], "ListOptions", "{query}");
        assert_eq!(status["details"]["group"], "meta.k8s.io", "{query}");
        assert_eq!(
            status["details"]["causes"][0]["field"], "resourceVersionMatch",
            "{query}: {status}"
        );
    }
}

async fn label_selector_filters_list() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "ls", "web-1", &[("app", "web"), ("tier", "front")]).await;
    put_pod(&mut kv, "ls", "web-2", &[("app", "web")]).await;
    put_pod(&mut kv, "ls", "db-1", &[("app", "db"), ("tier", "back")]).await;
    put_pod(&mut kv, "ls", "bare", &[]).await;
    put_pod(&mut kv, "ls", "named", &[("app.kubernetes.io/name", "x")]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let cases: &[(&str, &[&str])] = &[
        ("app%3Dweb", &["web-1", "web-2"]),
        ("app%3D%3Dweb", &["web-1", "web-2"]),
        ("app!%3Dweb", &["bare", "db-1", "named"]),
        ("app+in+(web,db)", &["db-1", "web-1", "web-2"]),
        ("app+notin+(web)", &["bare", "db-1", "named"]),
        ("tier", &["db-1", "web-1"]),
        ("!tier", &["bare", "named", "web-2"]),
        ("app%3Dweb,tier%3Dfront", &["web-1"]),
        ("app.kubernetes.io%2Fname%3Dx", &["named"]),
        ("app%3Dnone", &[]),
    ];
    for (selector, want) in cases {
        let list = get_json(&format!(
            "{base}/api/v1/namespaces/ls/pods?labelSelector={selector}"
        ))
        .await;
        assert_eq!(item_names(&list), *want, "labelSelector={selector}");
    }
}

async fn field_selector_filters_by_name_and_namespace() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "ns1", "a", &[]).await;
    put_pod(&mut kv, "ns1", "b", &[]).await;
    put_pod(&mut kv, "ns2", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let list = get_json(&format!(
        "{base}/api/v1/pods?fieldSelector=metadata.name%3Da"
    ))
    .await;
    let pairs: Vec<(String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["namespace"].as_str().unwrap().into(),
                p["metadata"]["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("ns1".to_string(), "a".to_string()),
            ("ns2".into(), "a".into())
        ]
    );

    let cases: &[(&str, &str, &[&str])] = &[
        ("/api/v1/pods", "metadata.namespace%3Dns2", &["a"]),
        ("/api/v1/pods", "metadata.namespace%3D%3Dns1", &["a", "b"]),
        ("/api/v1/namespaces/ns1/pods", "metadata.name!%3Da", &["b"]),
        (
            "/api/v1/pods",
            "metadata.namespace%3Dns1,metadata.name%3Db",
            &["b"],
        ),
        ("/api/v1/pods", "metadata.name%3Dzzz", &[]),
    ];
    for (path, selector, want) in cases {
        let list = get_json(&format!("{base}{path}?fieldSelector={selector}")).await;
        assert_eq!(item_names(&list), *want, "{path}?fieldSelector={selector}");
    }
}

async fn pod_specific_field_selectors_filter_list() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "f", "on-node-1", &[]).await;
    let mut other = pod("f", "on-node-2", &[]);
    other["spec"]["nodeName"] = "node-2".into();
    other["status"]["phase"] = "Pending".into();
    put_object(&mut kv, &pod_key("f", "on-node-2"), &other).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    // What kubelet and kubectl ask for: pods of one node, pods in one phase.
    for (selector, want) in [
        ("spec.nodeName%3Dnode-2", ["on-node-2"]),
        ("status.phase%3DRunning", ["on-node-1"]),
        ("spec.nodeName!%3Dnode-2", ["on-node-1"]),
    ] {
        let list = get_json(&format!("{base}/api/v1/pods?fieldSelector={selector}")).await;
        assert_eq!(item_names(&list), want, "fieldSelector={selector}");
    }
}

// One storage format: the 400s come from the query alone, before any object is read.
#[tokio::test]
async fn malformed_label_selector_is_bad_request() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "default", "web", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    for selector in [
        "app+in+(web",
        "app%3D%3D%3Dx",
        "a+b",
        "-bad-%3Dx",
        "app%3D(x)",
    ] {
        let status = get_status(
            &format!("{base}/api/v1/pods?labelSelector={selector}"),
            400,
            "BadRequest",
        )
        .await;
        assert!(
            !status["message"].as_str().unwrap().is_empty(),
            "{selector}"
        );
    }
    get_status(
        &format!("{base}/api/v1/pods?fieldSelector=metadata.name"),
        400,
        "BadRequest",
    )
    .await;
}

// One storage format: the 400s come from the query alone, before any object is read.
#[tokio::test]
async fn unsupported_field_selector_is_bad_request() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "default", "web", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let status = get_status(
        &format!("{base}/api/v1/pods?fieldSelector=spec.bogus%3Dx"),
        400,
        "BadRequest",
    )
    .await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported: spec.bogus"),
        "{status}"
    );
    let status = get_status(
        &format!("{base}/api/v1/nodes?fieldSelector=status.phase%3DRunning"),
        400,
        "BadRequest",
    )
    .await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported: status.phase"),
        "{status}"
    );
}

/// Pods in the streamed-list scenarios: several of watchd's list batches (128 objects).
const MANY: usize = 300;

/// A full list is read from its snapshot a batch at a time as the client takes it. Over
/// several batches, in every representation and with gzip, it has each object of its scope
/// that passes its selectors exactly once, in etcd key order: what the test wrote is the
/// oracle.
async fn full_lists_larger_than_a_batch_have_every_object_once_in_key_order() {
    use std::io::Read as _;
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut written: Vec<(String, String, bool)> = Vec::new();
    let mut last = 0;
    for i in 0..MANY {
        let ns = ["a", "b", "c"][i % 3];
        let name = format!("p-{i:04}");
        let even = i % 2 == 0;
        let labels: &[(&str, &str)] = if even { &[("even", "yes")] } else { &[] };
        last = put_pod(&mut kv, ns, &name, labels).await;
        written.push((ns.to_string(), name, even));
    }
    written.sort();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let expect = |ns: Option<&str>, even_only: bool| -> Vec<String> {
        written
            .iter()
            .filter(|(n, _, e)| ns.is_none_or(|ns| ns == n) && (!even_only || *e))
            .map(|(_, name, _)| name.clone())
            .collect()
    };
    let cases = [
        ("/api/v1/pods", None, false),
        ("/api/v1/pods?labelSelector=even%3Dyes", None, true),
        ("/api/v1/namespaces/b/pods", Some("b"), false),
        (
            "/api/v1/namespaces/b/pods?labelSelector=even",
            Some("b"),
            true,
        ),
    ];
    for (path, ns, even_only) in cases {
        let want = expect(ns, even_only);
        let url = format!("{base}{path}");
        let list = get_json(&url).await;
        assert_eq!(list["kind"], "PodList", "{path}");
        assert_eq!(item_names(&list), want, "{path}: JSON");

        let names_of = |rows: &Value, at: &str| -> Vec<String> {
            rows.as_array()
                .unwrap_or_else(|| panic!("{path}: no {at} array"))
                .iter()
                .map(|r| {
                    r.pointer(at)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect()
        };
        let table = http::get(
            &url,
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        )
        .await;
        assert_eq!(table.status, 200, "{path}: {}", table.text());
        let table = table.json();
        assert_eq!(table["kind"], "Table", "{path}");
        assert_eq!(names_of(&table["rows"], "/cells/0"), want, "{path}: Table");
        assert_eq!(
            names_of(&table["rows"], "/object/metadata/name"),
            want,
            "{path}: Table rows' objects"
        );

        let meta = http::get(
            &url,
            &[(
                "accept",
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            )],
        )
        .await;
        assert_eq!(meta.status, 200, "{path}: {}", meta.text());
        let meta = meta.json();
        assert_eq!(meta["kind"], "PartialObjectMetadataList", "{path}");
        assert_eq!(item_names(&meta), want, "{path}: PartialObjectMetadata");

        // Gzipped for a client that accepts it exactly when over kube-apiserver's
        // 128 KiB threshold, streamed past its first batch or not.
        let gz = http::get(&url, &[("accept-encoding", "gzip")]).await;
        assert_eq!(gz.status, 200, "{path}");
        let compressed = gz.header("content-encoding") == Some("gzip");
        let mut plain = Vec::new();
        if compressed {
            flate2::read::GzDecoder::new(&gz.body[..])
                .read_to_end(&mut plain)
                .expect("a complete gzip stream");
        } else {
            plain = gz.body.to_vec();
        }
        assert_eq!(
            compressed,
            plain.len() > 128 * 1024,
            "{path}: {} bytes",
            plain.len()
        );
        let unzipped: Value = serde_json::from_slice(&plain).expect("JSON inside gzip");
        assert_eq!(item_names(&unzipped), want, "{path}: gzip");

        let pb = http::get(&url, &[("accept", "application/vnd.kubernetes.protobuf")]).await;
        assert_eq!(pb.status, 200, "{path}");
        assert_eq!(
            pb.header("content-type"),
            Some("application/vnd.kubernetes.protobuf"),
            "{path}"
        );
        let ((api_version, kind), decoded): (_, k8s_pb::api::core::v1::PodList) =
            kubepb::decode(&pb.body);
        assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "PodList"));
        let names: Vec<String> = decoded
            .items
            .iter()
            .map(|p| {
                p.metadata
                    .as_ref()
                    .and_then(|m| m.name.clone())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(names, want, "{path}: protobuf");
        let pb_rv: i64 = decoded
            .metadata
            .and_then(|m| m.resource_version)
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        assert!(
            pb_rv >= last && rv(&list) >= last,
            "{path}: {pb_rv}, {}",
            rv(&list)
        );
    }
}

/// ConfigMaps in the slow-reader scenario, each with a 4 KiB value: about 8 MB of list,
/// far more than the sockets between watchd and the client hold.
const SLOW_ITEMS: usize = 2000;

/// A list request on its own connection (HTTP/1.1: watchd's own writer; HTTP/2: hyper's)
/// whose client reads nothing until asked: the response head and body, unread.
async fn stalled_list(
    w: &Watchd,
    path: &str,
    h2: bool,
) -> (
    hyper::Response<hyper::body::Incoming>,
    tokio::task::JoinHandle<()>,
) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    // A small receive buffer: the list stays in watchd until the test reads it.
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let tcp = socket.connect(w.http_addr()).await.expect("connect");
    let io = hyper_util::rt::TokioIo::new(tcp);
    let req = ::http::Request::get(format!("{}{path}", w.base_url()))
        .header("host", "watchd")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let (resp, driver) = if h2 {
        let (mut sender, conn) =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .initial_stream_window_size(16 * 1024)
                .initial_connection_window_size(16 * 1024)
                .handshake(io)
                .await
                .expect("h2c handshake");
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        (sender.send_request(req).await, driver)
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .expect("HTTP/1.1 handshake");
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        (sender.send_request(req).await, driver)
    };
    let resp = resp.expect("the list's head");
    assert_eq!(resp.status(), 200, "{path}");
    (resp, driver)
}

/// A full list is written from its snapshot as the client reads it. One whose client reads
/// slowly, over HTTP/1.1 and HTTP/2, while objects at the end of its range are changed,
/// deleted and added, is still the state at its resourceVersion: every object as first
/// written, none of the changes; a list made after the changes has them.
async fn a_full_list_read_slowly_is_the_state_at_its_resource_version() {
    use http_body_util::BodyExt as _;
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let value = |i: usize, gen: &str| format!("{gen}-{i}-{}", "x".repeat(4000));
    let key = |i: usize| format!("/registry/configmaps/slow/cm-{i:05}");
    for i in 0..SLOW_ITEMS {
        put_object(
            &mut kv,
            &key(i),
            &configmap("slow", &format!("cm-{i:05}"), &value(i, "v1")),
        )
        .await;
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    let path = "/api/v1/namespaces/slow/configmaps";
    let mut lists = Vec::new();
    for h2 in [false, true] {
        let (resp, driver) = stalled_list(&w, path, h2).await;
        let mut body = resp.into_body();
        // The first bytes only: the rest waits in watchd.
        let first = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("a first frame")
            .expect("a frame")
            .expect("a readable frame")
            .into_data()
            .expect("data");
        lists.push((h2, first, body, driver));
    }

    // Changes at the end of the list's range, where the stalled lists have not read yet.
    let mut changed = 0;
    for i in SLOW_ITEMS - 10..SLOW_ITEMS {
        changed = put_object(
            &mut kv,
            &key(i),
            &configmap("slow", &format!("cm-{i:05}"), &value(i, "v2")),
        )
        .await;
    }
    for i in SLOW_ITEMS - 20..SLOW_ITEMS - 10 {
        delete_key(&mut kv, &key(i)).await;
    }
    put_object(
        &mut kv,
        &key(99_999),
        &configmap("slow", "cm-99999", &value(99_999, "v2")),
    )
    .await;
    // A consistent list waits for the changes: watchd has them while the two are stalled.
    let now = get_json(&format!("{}{path}", w.base_url())).await;
    assert!(rv(&now) >= changed);
    assert_eq!(
        now["items"].as_array().map(Vec::len),
        Some(SLOW_ITEMS - 10 + 1)
    );
    assert!(item(&now, "cm-01999")["data"]["value"]
        .as_str()
        .is_some_and(|v| v.starts_with("v2-")));

    for (h2, first, body, driver) in lists {
        let rest = tokio::time::timeout(Duration::from_secs(120), body.collect())
            .await
            .expect("the list ends")
            .expect("the list reads")
            .to_bytes();
        driver.abort();
        let mut all = first.to_vec();
        all.extend_from_slice(&rest);
        assert!(all.len() > 8_000_000, "h2 {h2}: {} bytes", all.len());
        let list: Value = serde_json::from_slice(&all).expect("the list is JSON");
        let at = rv(&list);
        assert!(
            at < changed,
            "h2 {h2}: the list is as of {at}, before the changes"
        );
        let names = item_names(&list);
        let want: Vec<String> = (0..SLOW_ITEMS).map(|i| format!("cm-{i:05}")).collect();
        assert_eq!(
            names, want,
            "h2 {h2}: every object as of the list, none added"
        );
        for (i, o) in list["items"].as_array().unwrap().iter().enumerate() {
            assert!(rv(o) <= at, "h2 {h2}: {o}");
            let v = o["data"]["value"].as_str().unwrap_or_default();
            assert!(
                v.starts_with(&format!("v1-{i}-")),
                "h2 {h2}: item {i} is {}",
                &v[..v.len().min(20)]
            );
        }
    }
}
