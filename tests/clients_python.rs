//! The official Python client (`kubernetes`, pinned in scripts/install-clients.sh) against
//! watchd: `CoreV1Api` lists and reads, `watch.Watch().stream()` with bookmarks, and the
//! client's handling of a 410 for a too old resourceVersion.
//!
//! The client program is tests/clients/python_client.py; every request it sends goes
//! through a recording proxy, so failures show exactly what the client asked for.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::clients::{python_command, ClientProcess};
use support::kube::{delete_key, etcd_revision, get_json, pod, pod_key, put_json, put_object};
use support::proxy::RecordingProxy;
use support::{storage_tests, Etcd, Watchd};

// The list and watch scenarios run with the pods stored as JSON and as protobuf.
storage_tests! {
    multi_thread:
    python_client_lists_pods_in_all_namespaces_and_in_one_namespace,
    python_watch_stream_receives_added_modified_deleted_then_bookmark_before_timeout,
}

/// Bound for one client run (the watch scenario lasts its 5 s timeout plus start-up).
const RUN_WAIT: Duration = Duration::from_secs(45);

/// The watch's `timeout_seconds`; watchd sends a bookmark 2 s before it ends.
const WATCH_TIMEOUT_SECONDS: &str = "5";

fn python(args: &[&str]) -> ClientProcess {
    ClientProcess::spawn("python_client.py", python_command("python_client.py", args))
}

/// `(namespace, name, resourceVersion)` of each item of a list line.
fn items(list: &Value) -> Vec<(String, String, String)> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {list}"))
        .iter()
        .map(|i| {
            (
                i["namespace"].as_str().unwrap_or_default().to_string(),
                i["name"].as_str().unwrap_or_default().to_string(),
                i["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn triple(ns: &str, name: &str, rv: i64) -> (String, String, String) {
    (ns.to_string(), name.to_string(), rv.to_string())
}

/// A pod with `phase` instead of the default `Running`.
fn pod_in_phase(ns: &str, name: &str, phase: &str) -> Value {
    let mut p = pod(ns, name, &[("app", "web")]);
    p["status"]["phase"] = json!(phase);
    p
}

async fn python_client_lists_pods_in_all_namespaces_and_in_one_namespace() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let a = put_object(&mut kv, &pod_key("apps", "a"), &pod("apps", "a", &[])).await;
    let b = put_object(&mut kv, &pod_key("apps", "b"), &pod("apps", "b", &[])).await;
    let c = put_object(&mut kv, &pod_key("other", "c"), &pod("other", "c", &[])).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;
    let now = etcd_revision(&mut kv).await;

    let mut client = python(&["list", &proxy.base_url(), "apps"]);
    let (all, _) = client.expect_op("list_all", RUN_WAIT).await;
    let (one, _) = client.expect_op("list_namespace", RUN_WAIT).await;
    let (missing, _) = client.expect_op("read_missing", RUN_WAIT).await;
    let (read, _) = client.expect_op("read", RUN_WAIT).await;
    client.expect_op("done", RUN_WAIT).await;
    client.finish(RUN_WAIT).await;
    let requests = proxy.describe();

    // Deserialized into the client's models, with resourceVersions = etcd revisions.
    assert_eq!(all["type"], "V1PodList", "{all}\n{requests}");
    assert_eq!(all["kind"], "PodList", "{all}");
    assert_eq!(all["apiVersion"], "v1", "{all}");
    assert_eq!(all["resourceVersion"], now.to_string(), "{all}");
    assert_eq!(
        items(&all),
        vec![
            triple("apps", "a", a),
            triple("apps", "b", b),
            triple("other", "c", c)
        ],
        "{all}"
    );
    assert_eq!(one["type"], "V1PodList", "{one}");
    assert_eq!(one["resourceVersion"], now.to_string(), "{one}");
    assert_eq!(
        items(&one),
        vec![triple("apps", "a", a), triple("apps", "b", b)],
        "{one}"
    );
    // Fields beyond metadata survive the client's model validation.
    let first = &one["items"][0];
    assert_eq!(first["uid"], "uid-apps-a", "{first}");
    assert_eq!(first["creationTimestamp"], "2024-01-02T03:04:05+00:00");
    assert_eq!(first["containers"], json!(["main"]), "{first}");
    assert_eq!(first["phase"], "Running", "{first}");

    // A missing object is the client's ApiException carrying the Status.
    assert_eq!(missing["status"], 404, "{missing}");
    assert_eq!(missing["body"]["kind"], "Status", "{missing}");
    assert_eq!(missing["body"]["reason"], "NotFound", "{missing}");
    assert_eq!(
        missing["body"]["message"], "pods \"does-not-exist\" not found",
        "{missing}"
    );
    assert_eq!(read["type"], "V1Pod", "{read}");
    assert_eq!(read["pod"]["name"], "a", "{read}");
    assert_eq!(read["pod"]["resourceVersion"], a.to_string(), "{read}");

    let seen = proxy.requests();
    assert_eq!(seen.len(), 5, "{requests}");
    assert_eq!(seen[0].target, "/api/v1/pods", "{requests}");
    assert_eq!(seen[1].target, "/api/v1/namespaces/apps/pods", "{requests}");
    assert_eq!(
        seen[2].target, "/api/v1/namespaces/apps/pods/does-not-exist",
        "{requests}"
    );
    assert!(seen.iter().all(|r| r.method == "GET"), "{requests}");
}

async fn python_watch_stream_receives_added_modified_deleted_then_bookmark_before_timeout() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let seed = put_object(&mut kv, &pod_key("apps", "seed"), &pod("apps", "seed", &[])).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;

    let mut client = python(&["watch", &proxy.base_url(), "apps", WATCH_TIMEOUT_SECONDS]);
    let (ready, _) = client.expect_op("ready", RUN_WAIT).await;
    assert_eq!(ready["resourceVersion"], seed.to_string(), "{ready}");
    assert_eq!(ready["names"], json!(["seed"]), "{ready}");

    // Changes made while the client streams (from the list's resourceVersion).
    let key = pod_key("apps", "web-1");
    let added = put_object(&mut kv, &key, &pod_in_phase("apps", "web-1", "Pending")).await;
    let modified = put_object(&mut kv, &key, &pod_in_phase("apps", "web-1", "Running")).await;
    let deleted = delete_key(&mut kv, &key).await;
    // Another namespace: not part of this watch, but it moves the revision on.
    let elsewhere = put_object(&mut kv, &pod_key("other", "x"), &pod("other", "x", &[])).await;

    let (end, lines) = client.expect_op("watch_end", RUN_WAIT).await;
    client.finish(RUN_WAIT).await;
    let events: Vec<&Value> = lines.iter().filter(|l| l["op"] == "event").collect();
    let requests = proxy.describe();
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        types,
        vec!["ADDED", "MODIFIED", "DELETED", "BOOKMARK"],
        "events: {events:?}\n{requests}"
    );
    for (event, rv, phase) in [
        (events[0], added, "Pending"),
        (events[1], modified, "Running"),
        (events[2], deleted, "Running"),
    ] {
        assert_eq!(event["objectType"], "V1Pod", "{event}");
        assert_eq!(event["name"], "web-1", "{event}");
        assert_eq!(event["namespace"], "apps", "{event}");
        assert_eq!(event["resourceVersion"], rv.to_string(), "{event}");
        assert_eq!(event["phase"], phase, "{event}");
    }
    // The bookmark: kind and apiVersion set, at the newest revision watchd has seen.
    let bookmark = events[3];
    assert_eq!(bookmark["kind"], "Pod", "{bookmark}");
    assert_eq!(bookmark["apiVersion"], "v1", "{bookmark}");
    assert_eq!(
        bookmark["resourceVersion"],
        elsewhere.to_string(),
        "{bookmark}"
    );
    // The client resumes from the bookmark's resourceVersion.
    assert_eq!(end["resourceVersion"], elsewhere.to_string(), "{end}");

    let seen = proxy.requests();
    assert_eq!(seen.len(), 2, "{requests}");
    let watch = &seen[1];
    assert_eq!(watch.path(), "/api/v1/namespaces/apps/pods", "{requests}");
    assert_eq!(watch.query("watch"), Some("true"), "{requests}");
    assert_eq!(
        watch.query("allowWatchBookmarks"),
        Some("true"),
        "{requests}"
    );
    assert_eq!(
        watch.query("resourceVersion"),
        Some(seed.to_string().as_str()),
        "{requests}"
    );
    assert_eq!(
        watch.query("timeoutSeconds"),
        Some(WATCH_TIMEOUT_SECONDS),
        "{requests}"
    );
}

/// Starts watchd with a 1 s history and makes `from` too old to watch from: the event
/// right after it is evicted. Returns (etcd, watchd, from).
async fn expired_resource_version() -> (Etcd, Watchd, i64) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &["--history-window=1s"]);
    let key = pod_key("apps", "churn");
    let from = put_json(&mut kv, &key, &pod_in_phase("apps", "churn", "Pending")).await;
    let running = put_json(&mut kv, &key, &pod_in_phase("apps", "churn", "Running")).await;
    // The window is measured from when the cache took an event: wait until it took each
    // write (a get not older than its revision) rather than assume it did at once.
    let cached = |rev: i64| {
        let url = format!(
            "{}/api/v1/namespaces/apps/pods/churn?resourceVersion={rev}",
            watchd.base_url()
        );
        async move { get_json(&url).await }
    };
    cached(running).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let last = put_json(&mut kv, &key, &pod_in_phase("apps", "churn", "Succeeded")).await;
    cached(last).await;
    (etcd, watchd, from)
}

// One storage format: the 410 path is the same whatever the objects' format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_watch_from_expired_resource_version_raises_api_exception_410() {
    let (_etcd, watchd, from) = expired_resource_version().await;
    let proxy = RecordingProxy::start(watchd.http_addr()).await;
    let from_s = from.to_string();

    // With timeout_seconds the client does not retry: the ERROR event becomes the exception.
    let mut client = python(&["watch-expired", &proxy.base_url(), "apps", &from_s]);
    let (exc, _) = client.expect_op("exception", RUN_WAIT).await;
    client.finish(RUN_WAIT).await;
    let requests = proxy.describe();
    assert_eq!(exc["status"], 410, "{exc}\n{requests}");
    let reason = exc["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(&format!("Expired: too old resource version: {from} (")),
        "{exc}"
    );
    assert_eq!(exc["events"], json!([]), "{exc}");
    let seen = proxy.requests();
    assert_eq!(seen.len(), 1, "{requests}");
    assert_eq!(
        seen[0].query("resourceVersion"),
        Some(from_s.as_str()),
        "{requests}"
    );
}

// One storage format: the 410 path is the same whatever the objects' format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_watch_without_timeout_retries_once_after_410_then_raises() {
    let (_etcd, watchd, from) = expired_resource_version().await;
    let proxy = RecordingProxy::start(watchd.http_addr()).await;
    let from_s = from.to_string();

    // Without timeout_seconds the client retries once from its last resourceVersion
    // (still the expired one) after the stream closes, then raises.
    let mut client = python(&[
        "watch-expired",
        &proxy.base_url(),
        "apps",
        &from_s,
        "--no-timeout",
    ]);
    let (exc, _) = client.expect_op("exception", RUN_WAIT).await;
    client.finish(RUN_WAIT).await;
    let requests = proxy.describe();
    assert_eq!(exc["status"], 410, "{exc}\n{requests}");
    assert!(
        exc["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Expired: too old resource version: "),
        "{exc}"
    );
    let seen = proxy.requests();
    assert_eq!(seen.len(), 2, "{requests}");
    for r in &seen {
        assert_eq!(r.query("watch"), Some("true"), "{requests}");
        assert_eq!(
            r.query("resourceVersion"),
            Some(from_s.as_str()),
            "{requests}"
        );
        assert_eq!(r.query("timeoutSeconds"), None, "{requests}");
    }
}
