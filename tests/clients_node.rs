//! The official JavaScript client (`@kubernetes/client-node`, pinned in
//! scripts/install-clients.sh) against watchd: a `makeInformer` on the pods of one
//! namespace lists, watches, and reports `add`, `update` and `delete` for changes made in
//! etcd; its cache ends equal to etcd's state.
//!
//! The client program is tests/clients/node_informer.mjs; every request it sends goes
//! through a recording proxy, so failures show exactly what the client asked for.

mod support;

use std::time::Duration;

use etcd_client::GetOptions;
use serde_json::{json, Value};
use support::clients::{node_command, ClientProcess};
use support::kube::{delete_key, etcd_revision, pod, pod_key, put_object};
use support::proxy::RecordingProxy;
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with the pods stored as JSON and as protobuf.
storage_tests! {
    multi_thread:
    node_informer_reports_add_update_delete_for_changes_made_in_etcd,
    node_informer_starts_on_an_empty_namespace_and_sees_first_pod,
}

/// Bound for the informer to start, and for each expected batch of events.
const WAIT: Duration = Duration::from_secs(30);

fn informer(url: &str, namespace: &str) -> ClientProcess {
    ClientProcess::spawn(
        "node_informer.mjs",
        node_command("node_informer.mjs", &[url, namespace]),
    )
}

/// `(type, name, resourceVersion)` of each `event` line.
fn events(lines: &[Value]) -> Vec<(String, String, String)> {
    lines
        .iter()
        .filter(|l| l["op"] == "event")
        .map(|l| {
            (
                l["type"].as_str().unwrap_or_default().to_string(),
                l["name"].as_str().unwrap_or_default().to_string(),
                l["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn ev(t: &str, name: &str, rv: i64) -> (String, String, String) {
    (t.to_string(), name.to_string(), rv.to_string())
}

/// `(name, mod_revision)` of every key under `/registry/pods/<ns>/`, by name.
async fn etcd_pods(kv: &mut etcd_client::Client, ns: &str) -> Vec<(String, String)> {
    let prefix = format!("/registry/pods/{ns}/");
    let resp = kv
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .unwrap_or_else(|e| panic!("etcd range {prefix}: {e}"));
    let mut pods: Vec<(String, String)> = resp
        .kvs()
        .iter()
        .map(|kv| {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let name = key.strip_prefix(&prefix).unwrap_or(&key).to_string();
            (name, kv.mod_revision().to_string())
        })
        .collect();
    pods.sort();
    pods
}

async fn node_informer_reports_add_update_delete_for_changes_made_in_etcd() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let a = put_object(&mut kv, &pod_key("web", "a"), &pod("web", "a", &[])).await;
    let b = put_object(&mut kv, &pod_key("web", "b"), &pod("web", "b", &[])).await;
    put_object(&mut kv, &pod_key("other", "z"), &pod("other", "z", &[])).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;
    let listed_at = etcd_revision(&mut kv).await;

    let mut client = informer(&proxy.base_url(), "web");
    let (ready, before) = client.expect_op("ready", WAIT).await;
    // The initial list is reported as adds, with the objects' resourceVersions.
    assert_eq!(
        events(&before),
        vec![ev("add", "a", a), ev("add", "b", b)],
        "{before:?}\n{}",
        proxy.describe()
    );
    assert_eq!(ready["names"], json!(["a", "b"]), "{ready}");
    assert_eq!(ready["resourceVersion"], listed_at.to_string(), "{ready}");

    // Changes in etcd after the informer has listed and started its watch.
    let created = put_object(&mut kv, &pod_key("web", "c"), &pod("web", "c", &[])).await;
    let updated = put_object(
        &mut kv,
        &pod_key("web", "a"),
        &pod("web", "a", &[("version", "2")]),
    )
    .await;
    let deleted = delete_key(&mut kv, &pod_key("web", "b")).await;
    put_object(&mut kv, &pod_key("other", "y"), &pod("other", "y", &[])).await;
    let updated_c = put_object(
        &mut kv,
        &pod_key("web", "c"),
        &pod("web", "c", &[("version", "2")]),
    )
    .await;

    let lines = client
        .read_until(WAIT, |lines| events(lines).len() >= 4)
        .await;
    let requests = proxy.describe();
    assert_eq!(
        events(&lines),
        vec![
            ev("add", "c", created),
            ev("update", "a", updated),
            // The deleted object's last state, at the revision of the deletion.
            ev("delete", "b", deleted),
            ev("update", "c", updated_c),
        ],
        "{lines:?}\n{requests}"
    );
    let update = lines
        .iter()
        .find(|l| l["op"] == "event" && l["type"] == "update" && l["name"] == "a")
        .expect("update line");
    assert_eq!(update["labels"], json!({"version": "2"}), "{update}");
    assert!(
        !lines.iter().any(|l| l["op"] == "informer_error"),
        "{lines:?}\n{requests}"
    );

    // The informer's cache equals etcd's state of the namespace.
    client.send_line("stop").await;
    let (state, _) = client.expect_op("state", WAIT).await;
    let cached: Vec<(String, String)> = state["items"]
        .as_array()
        .expect("state items")
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap_or_default().to_string(),
                i["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(cached, etcd_pods(&mut kv, "web").await, "{state}");
    assert_eq!(state["resourceVersion"], updated_c.to_string(), "{state}");
    client.finish(WAIT).await;

    // One list, then one watch from the list's resourceVersion.
    let seen = proxy.requests();
    assert_eq!(seen.len(), 2, "{requests}");
    assert_eq!(seen[0].target, "/api/v1/namespaces/web/pods", "{requests}");
    assert_eq!(seen[1].path(), "/api/v1/namespaces/web/pods", "{requests}");
    assert_eq!(seen[1].query("watch"), Some("true"), "{requests}");
    assert_eq!(
        seen[1].query("resourceVersion"),
        Some(listed_at.to_string().as_str()),
        "{requests}"
    );
}

async fn node_informer_starts_on_an_empty_namespace_and_sees_first_pod() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object(&mut kv, &pod_key("other", "z"), &pod("other", "z", &[])).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;

    let mut client = informer(&proxy.base_url(), "empty");
    let (ready, before) = client.expect_op("ready", WAIT).await;
    assert!(events(&before).is_empty(), "{before:?}");
    assert_eq!(ready["names"], json!([]), "{ready}");

    let created = put_object(
        &mut kv,
        &pod_key("empty", "first"),
        &pod("empty", "first", &[]),
    )
    .await;
    let lines = client.read_until(WAIT, |l| !events(l).is_empty()).await;
    assert_eq!(
        events(&lines),
        vec![ev("add", "first", created)],
        "{lines:?}\n{}",
        proxy.describe()
    );
    client.send_line("stop").await;
    let (state, _) = client.expect_op("state", WAIT).await;
    assert_eq!(
        state["items"],
        json!([{"name": "first", "resourceVersion": created.to_string()}]),
        "{state}"
    );
    client.finish(WAIT).await;
}
