//! Kubernetes-shaped test data in etcd, and checks of what the API answers.
//!
//! Objects are written where kube-apiserver keeps them (`/registry/pods/<ns>/<name>`,
//! `/registry/minions/<name>`, ...) with `kind`, `apiVersion` and `metadata` but no
//! `resourceVersion`. Every write returns the etcd revision it created, which is the
//! `resourceVersion` watchd must serve for the object.
//!
//! [`put_object`] (and the builders on it, such as [`put_pod`]) writes in the running
//! scenario's [`Storage`] format: compact JSON, or Kubernetes protobuf (`k8s\0` + the
//! `runtime.Unknown` envelope) as kube-apiserver stores built-in kinds, encoded by the
//! tests' own [`kubepb`](super::kubepb), never by watchd's codec. Custom resources have no
//! protobuf form and are JSON in both. [`put_json`] always writes JSON and [`put_raw`]
//! writes the bytes given. [`assert_served`] checks a served object against the one
//! written, in either format.

use std::future::Future;
use std::time::Duration;

use super::http::{self, Response, WatchStream};
use super::kubepb;
use etcd_client::Client;
use serde_json::{json, Map, Value};

/// How a scenario stores built-in objects in etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// Compact JSON (how custom resources are always stored).
    Json,
    /// Kubernetes protobuf: `k8s\0` and a `runtime.Unknown` envelope, as kube-apiserver
    /// stores built-in kinds.
    Protobuf,
}

tokio::task_local! {
    /// The storage format of the running scenario; set by [`Storage::scope`].
    static STORAGE: Storage;
}

impl Storage {
    /// The running scenario's format: the one its [`Storage::scope`] set (as the
    /// `storage_tests!` macro does), JSON outside any scope. A task-local is not inherited
    /// by spawned tasks: a task a scenario spawns to write objects must be wrapped in
    /// `Storage::current().scope(...)` itself.
    pub fn current() -> Storage {
        STORAGE.try_with(|s| *s).unwrap_or(Storage::Json)
    }

    /// Runs `fut` with `self` as the storage format of every write it makes.
    pub async fn scope<F: Future>(self, fut: F) -> F::Output {
        STORAGE.scope(self, fut).await
    }

    /// The bytes `object` is stored as in this format. In protobuf, a kind without a
    /// protobuf form (a custom resource) stays JSON, as kube-apiserver stores it.
    pub fn encode(self, object: &Value) -> Vec<u8> {
        match self {
            Storage::Protobuf if has_protobuf_form(object) => kubepb::encode(object),
            _ => serde_json::to_vec(object).expect("serialize test object"),
        }
    }

    /// Whether `value` (as stored in etcd) is in this format: protobuf values start with
    /// the `k8s\0` magic, JSON values with `{`.
    pub fn is_format_of(self, value: &[u8]) -> bool {
        match self {
            Storage::Json => value.first() == Some(&b'{'),
            Storage::Protobuf => value.starts_with(b"k8s\0"),
        }
    }
}

/// Whether kube-apiserver would store `object` as protobuf: a built-in kind
/// ([`kubepb::stored_as_protobuf`]).
pub fn has_protobuf_form(object: &Value) -> bool {
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    kubepb::stored_as_protobuf(api_version.unwrap_or(""))
}

/// Asserts that `served` (JSON from watchd) is `written`, stored in the running scenario's
/// format at revision `resource_version`. From JSON, exactly the object as written with
/// `metadata.resourceVersion`. From protobuf, kube-apiserver's rendering of the decoded
/// object, in which Go's JSON adds and drops zero values (a container's
/// `"resources":{}`), so [`kubepb::assert_json_as_written`] compares all but zero values.
pub fn assert_served(served: &Value, written: &Value, resource_version: i64) {
    if Storage::current() == Storage::Protobuf && has_protobuf_form(written) {
        kubepb::assert_json_as_written(served, written, resource_version);
    } else {
        let mut expected = written.clone();
        expected["metadata"]["resourceVersion"] = json!(resource_version.to_string());
        assert_eq!(*served, expected);
    }
}

/// How long a test waits for one watch event before giving up.
pub const EVENT_WAIT: Duration = Duration::from_secs(10);

/// The etcd key of a pod.
pub fn pod_key(ns: &str, name: &str) -> String {
    format!("/registry/pods/{ns}/{name}")
}

fn labels_json(labels: &[(&str, &str)]) -> Value {
    let map: Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    Value::Object(map)
}

/// A pod as kube-apiserver stores it (JSON flavour), with the given labels.
pub fn pod(ns: &str, name: &str, labels: &[(&str, &str)]) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": format!("uid-{ns}-{name}"),
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "labels": labels_json(labels),
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "main", "image": "registry.example/app:1"}],
        },
        "status": {"phase": "Running"},
    })
}

/// A node (stored under `minions`).
pub fn node(name: &str) -> Value {
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "uid": format!("uid-node-{name}"), "creationTimestamp": "2024-01-02T03:04:05Z"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })
}

/// A namespace.
pub fn namespace(name: &str) -> Value {
    json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name, "uid": format!("uid-ns-{name}"), "creationTimestamp": "2024-01-02T03:04:05Z"},
        "status": {"phase": "Active"},
    })
}

/// A config map with one data entry `value`.
pub fn configmap(ns: &str, name: &str, value: &str) -> Value {
    json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-cm-{ns}-{name}")},
        "data": {"value": value},
    })
}

/// Puts raw bytes at `key`; returns the revision of the write (the key's mod_revision).
pub async fn put_raw(kv: &mut Client, key: &str, value: impl Into<Vec<u8>>) -> i64 {
    let resp = kv
        .put(key, value, None)
        .await
        .unwrap_or_else(|e| panic!("etcd put {key}: {e}"));
    resp.header()
        .map(|h| h.revision())
        .unwrap_or_else(|| panic!("etcd put {key}: no response header"))
}

/// Puts `object` as compact JSON at `key`, whatever the scenario's format; returns the
/// revision of the write.
pub async fn put_json(kv: &mut Client, key: &str, object: &Value) -> i64 {
    put_raw(kv, key, Storage::Json.encode(object)).await
}

/// Puts `object` at `key` in the running scenario's [`Storage`] format; returns the
/// revision of the write.
pub async fn put_object(kv: &mut Client, key: &str, object: &Value) -> i64 {
    put_raw(kv, key, Storage::current().encode(object)).await
}

/// [`put_object`] of an object given as JSON text.
pub async fn put_object_text(kv: &mut Client, key: &str, json_text: &str) -> i64 {
    let object: Value = serde_json::from_str(json_text)
        .unwrap_or_else(|e| panic!("test object for {key} is not JSON ({e}): {json_text}"));
    put_object(kv, key, &object).await
}

/// Puts a pod in the scenario's format; returns the revision of the write.
pub async fn put_pod(kv: &mut Client, ns: &str, name: &str, labels: &[(&str, &str)]) -> i64 {
    put_object(kv, &pod_key(ns, name), &pod(ns, name, labels)).await
}

/// The key-value etcd holds at `key` (which must exist).
async fn stored_kv(kv: &mut Client, key: &str) -> etcd_client::KeyValue {
    let resp = kv
        .get(key, None)
        .await
        .unwrap_or_else(|e| panic!("etcd get {key}: {e}"));
    resp.kvs()
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("etcd get {key}: no such key"))
}

/// The value stored at `key` (which must exist).
pub async fn stored_value(kv: &mut Client, key: &str) -> Vec<u8> {
    stored_kv(kv, key).await.value().to_vec()
}

/// Asserts that the value at `key` is stored in the running scenario's format (for a
/// built-in kind): a check that a scenario's writes really took its format.
pub async fn assert_stored_in_current_format(kv: &mut Client, key: &str) {
    let storage = Storage::current();
    let value = stored_value(kv, key).await;
    assert!(
        storage.is_format_of(&value),
        "{key} is not stored as {storage:?}: {:?}",
        String::from_utf8_lossy(&value[..value.len().min(40)])
    );
}

/// Deletes `key` (which must exist); returns the revision of the deletion.
pub async fn delete_key(kv: &mut Client, key: &str) -> i64 {
    let resp = kv
        .delete(key, None)
        .await
        .unwrap_or_else(|e| panic!("etcd delete {key}: {e}"));
    assert_eq!(resp.deleted(), 1, "etcd delete {key}: key did not exist");
    resp.header()
        .map(|h| h.revision())
        .unwrap_or_else(|| panic!("etcd delete {key}: no response header"))
}

/// The mod_revision etcd reports for `key`.
pub async fn mod_revision(kv: &mut Client, key: &str) -> i64 {
    stored_kv(kv, key).await.mod_revision()
}

/// etcd's current revision (its response header's).
pub async fn etcd_revision(kv: &mut Client) -> i64 {
    let resp = kv
        .get("/watchd-test/none", None)
        .await
        .unwrap_or_else(|e| panic!("etcd get: {e}"));
    resp.header()
        .expect("etcd get: no response header")
        .revision()
}

/// `metadata.resourceVersion` of an object or list, as a number.
pub fn rv(object: &Value) -> i64 {
    let s = object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no string metadata.resourceVersion in {object}"));
    s.parse()
        .unwrap_or_else(|e| panic!("resourceVersion {s:?} is not a number: {e}"))
}

/// `metadata.name` of every item of a list, in order; panics if `items` is not an array.
pub fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("list without an items array: {list}"))
        .iter()
        .map(|o| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The item named `name` of a list.
pub fn item<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|o| o["metadata"]["name"] == name))
        .unwrap_or_else(|| panic!("no item {name:?} in {list}"))
}

/// `GET url`, asserting 200 and a JSON body; returns the body.
pub async fn get_json(url: &str) -> Value {
    let resp = http::get(url, &[]).await;
    assert_eq!(resp.status, 200, "GET {url}: {}", resp.text());
    assert_eq!(
        resp.header("content-type")
            .map(|c| c.starts_with("application/json")),
        Some(true),
        "GET {url}: content-type {:?}",
        resp.header("content-type")
    );
    resp.json()
}

/// Checks a `Status` object: kind, apiVersion, status Failure, `code` and `reason`.
pub fn check_status(status: &Value, code: u16, reason: &str) {
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["apiVersion"], "v1", "{status}");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["code"], code, "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    assert!(status["message"].is_string(), "{status}");
}

/// Checks that `resp` is an error `Status` with HTTP status `code` and `reason`; returns it.
pub fn assert_status(resp: &Response, code: u16, reason: &str) -> Value {
    assert_eq!(resp.status, code, "expected HTTP {code}: {}", resp.text());
    let status = resp.json();
    check_status(&status, code, reason);
    status
}

/// `GET url`, expecting an error Status with `code` and `reason`; returns it.
pub async fn get_status(url: &str, code: u16, reason: &str) -> Value {
    let resp = http::get(url, &[]).await;
    let status = assert_status(&resp, code, reason);
    assert_eq!(
        resp.header("content-type"),
        Some("application/json"),
        "GET {url}"
    );
    status
}

/// Reads a watch until its ERROR event (within 40 s), which must be 410 Expired: the
/// end of every watch of an epoch that a re-list replaced.
pub async fn expect_410(stream: &mut WatchStream) {
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = stream
            .next_line(left)
            .await
            .expect("the open watch ends with an ERROR event in time");
        let event: Value = serde_json::from_slice(&line).expect("a JSON line");
        if event["type"] == "ERROR" {
            assert_eq!(event["object"]["code"], 410, "{event}");
            assert_eq!(event["object"]["reason"], "Expired", "{event}");
            return;
        }
    }
}

/// Opens a watch, asserting HTTP 200 and a JSON content type.
pub async fn open_watch(url: &str) -> WatchStream {
    let stream = http::watch(url, &[]).await;
    assert_eq!(stream.status(), 200, "watch {url}");
    let ct = stream
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok());
    assert_eq!(
        ct.map(|c| c.starts_with("application/json")),
        Some(true),
        "watch {url}: content-type {ct:?}"
    );
    stream
}

/// The next event of a watch; panics if none arrives within [`EVENT_WAIT`].
pub async fn next_event(stream: &mut WatchStream) -> Value {
    match stream.next_event(EVENT_WAIT).await {
        Some(ev) => ev,
        None if stream.is_ended() => panic!("watch ended while an event was expected"),
        None => panic!("no watch event within {EVENT_WAIT:?}"),
    }
}

/// Checks an event's type, object name and object resourceVersion.
pub fn check_event(event: &Value, kind: &str, name: &str, resource_version: i64) {
    assert_eq!(event["type"], kind, "{event}");
    assert_eq!(event["object"]["metadata"]["name"], name, "{event}");
    assert_eq!(rv(&event["object"]), resource_version, "{event}");
}

/// Reads events until the server ends the stream (at most `max` events, each within
/// [`EVENT_WAIT`]); panics if it does not end.
pub async fn read_to_end(stream: &mut WatchStream, max: usize) -> Vec<Value> {
    let mut events = Vec::new();
    for _ in 0..=max {
        match stream.next_event(EVENT_WAIT).await {
            Some(ev) => events.push(ev),
            None => {
                assert!(
                    stream.is_ended(),
                    "watch still open after {EVENT_WAIT:?} without events; got {events:?}"
                );
                return events;
            }
        }
    }
    panic!("watch sent more than {max} events: {events:?}");
}

/// The value of the first Prometheus sample of `name` whose labels contain every one of
/// `labels` (each as `key="value"`), or None.
pub fn metric(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(series, _)| {
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            n == name && labels.iter().all(|want| rest.contains(want))
        })
        .and_then(|(_, value)| value.parse().ok())
}
