//! Field selectors per resource, as kube-apiserver defines them, on lists and watches,
//! against a real etcd.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::http;
use support::kube::put_object_text;
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf (custom
// resources are JSON in both).
storage_tests! {
    pods_list_by_node_name_and_phase,
    node_scoped_pod_watch_sees_pods_arrive_and_leave_its_node,
    events_secrets_nodes_and_custom_resources_have_their_fields,
}

fn pod(ns: &str, name: &str, node: &str, phase: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}"}},"spec":{{"nodeName":"{node}","restartPolicy":"Always","containers":[{{"name":"c","image":"i"}}]}},"status":{{"phase":"{phase}","podIP":"10.0.0.1"}}}}"#
    )
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

async fn pods_list_by_node_name_and_phase() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(
        &mut kv,
        "/registry/pods/a/p1",
        &pod("a", "p1", "node-1", "Running"),
    )
    .await;
    put_object_text(
        &mut kv,
        "/registry/pods/a/p2",
        &pod("a", "p2", "node-2", "Running"),
    )
    .await;
    put_object_text(
        &mut kv,
        "/registry/pods/b/p3",
        &pod("b", "p3", "node-1", "Pending"),
    )
    .await;
    put_object_text(
        &mut kv,
        "/registry/pods/b/p4",
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p4","namespace":"b"},"spec":{}}"#,
    )
    .await;
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();
    let list = |q: &str| {
        let url = format!("{base}/api/v1/pods?fieldSelector={q}");
        async move { http::get(&url, &[]).await }
    };
    assert_eq!(
        names(&list("spec.nodeName%3Dnode-1").await.json()),
        vec!["p1", "p3"]
    );
    assert_eq!(
        names(
            &list("spec.nodeName%3Dnode-1,status.phase%3DPending")
                .await
                .json()
        ),
        vec!["p3"]
    );
    assert_eq!(
        names(&list("status.phase!%3DRunning").await.json()),
        vec!["p3", "p4"]
    );
    // An unscheduled pod has an empty nodeName, as upstream's field set.
    assert_eq!(names(&list("spec.nodeName%3D").await.json()), vec!["p4"]);
    assert_eq!(
        names(&list("spec.restartPolicy%3DAlways").await.json()),
        vec!["p1", "p2", "p3"]
    );
    let bad = list("spec.color%3Dred").await;
    assert_eq!(bad.status, 400);
    assert_eq!(
        bad.json()["message"],
        "field label not supported: spec.color"
    );
}

async fn node_scoped_pod_watch_sees_pods_arrive_and_leave_its_node() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(
        &mut kv,
        "/registry/pods/a/p1",
        &pod("a", "p1", "node-2", "Pending"),
    )
    .await;
    let w = Watchd::start(&etcd.client_url(), &[]);
    let url = format!(
        "{}/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dnode-1",
        w.base_url()
    );
    let mut stream = http::watch(&url, &[]).await;
    let moved = put_object_text(
        &mut kv,
        "/registry/pods/a/p1",
        &pod("a", "p1", "node-1", "Running"),
    )
    .await;
    put_object_text(
        &mut kv,
        "/registry/pods/a/other",
        &pod("a", "other", "node-2", "Running"),
    )
    .await;
    let left = put_object_text(
        &mut kv,
        "/registry/pods/a/p1",
        &pod("a", "p1", "node-3", "Running"),
    )
    .await;
    let wait = Duration::from_secs(10);
    let added = stream.next_event(wait).await.expect("ADDED");
    assert_eq!(added["type"], "ADDED");
    assert_eq!(
        added["object"]["metadata"]["resourceVersion"],
        moved.to_string()
    );
    let gone = stream.next_event(wait).await.expect("DELETED");
    assert_eq!(gone["type"], "DELETED");
    assert_eq!(gone["object"]["metadata"]["name"], "p1");
    // The last state that matched, at the revision it stopped matching.
    assert_eq!(gone["object"]["spec"]["nodeName"], "node-1");
    assert_eq!(
        gone["object"]["metadata"]["resourceVersion"],
        left.to_string()
    );
    assert!(
        stream
            .next_event(Duration::from_millis(300))
            .await
            .is_none(),
        "pods of other nodes leaked"
    );
}

async fn events_secrets_nodes_and_custom_resources_have_their_fields() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let event = r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e1","namespace":"a"},"involvedObject":{"kind":"Pod","name":"p1","namespace":"a"},"reason":"Started","type":"Normal","source":{"component":"kubelet"}}"#;
    put_object_text(&mut kv, "/registry/events/a/e1", event).await;
    let secret = r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1","namespace":"a"},"type":"kubernetes.io/tls"}"#;
    put_object_text(&mut kv, "/registry/secrets/a/s1", secret).await;
    put_object_text(
        &mut kv,
        "/registry/minions/n1",
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"spec":{}}"#,
    )
    .await;
    put_object_text(&mut kv, "/registry/minions/n2", r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"},"spec":{"unschedulable":true}}"#).await;
    let crd = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},"versions":[{"name":"v1","served":true,"storage":true,"selectableFields":[{"jsonPath":".spec.color"}]}]}}"#;
    put_object_text(
        &mut kv,
        "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
        crd,
    )
    .await;
    for (name, color) in [("w1", "red"), ("w2", "blue")] {
        let w = format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"{name}","namespace":"a"}},"spec":{{"color":"{color}"}}}}"#
        );
        put_object_text(
            &mut kv,
            &format!("/registry/example.com/widgets/a/{name}"),
            &w,
        )
        .await;
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    let get = |path: String| async move { http::get(&path, &[]).await.json() };
    let base = w.base_url();
    let ev = get(format!("{base}/api/v1/events?fieldSelector=involvedObject.name%3Dp1,source%3Dkubelet,reason%3DStarted")).await;
    assert_eq!(names(&ev), vec!["e1"]);
    let none = get(format!("{base}/api/v1/events?fieldSelector=type%3DWarning")).await;
    assert!(names(&none).is_empty());
    let tls = get(format!(
        "{base}/api/v1/secrets?fieldSelector=type%3Dkubernetes.io/tls"
    ))
    .await;
    assert_eq!(names(&tls), vec!["s1"]);
    let schedulable = get(format!(
        "{base}/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse"
    ))
    .await;
    assert_eq!(names(&schedulable), vec!["n1"]);
    let red = get(format!(
        "{base}/apis/example.com/v1/widgets?fieldSelector=spec.color%3Dred"
    ))
    .await;
    assert_eq!(names(&red), vec!["w1"]);
}

/// Watchers woken by dispatch passes so far (every dispatch thread's).
fn wakes(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("watchd_dispatch_wakes_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Watchers woken when one event is written for one of `WATCHERS` event watchers, each
/// selecting its own `involvedObject.name`, in a watchd started with `args`.
async fn wakes_for_one_event(etcd: &Etcd, args: &[&str], round: usize) -> f64 {
    const WATCHERS: usize = 20;
    let w = Watchd::start(&etcd.client_url(), args);
    let mut streams = Vec::new();
    for i in 0..WATCHERS {
        let url = format!(
            "{}/api/v1/namespaces/a/events?watch=1&fieldSelector=involvedObject.name%3Dobj-{i}",
            w.base_url()
        );
        streams.push(http::watch(&url, &[]).await);
    }
    // Every watch has subscribed and idles.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let metrics_url = format!("{}/metrics", w.base_url());
    let before = wakes(&http::get(&metrics_url, &[]).await.text());
    let mut kv = etcd.client().await;
    let event = format!(
        r#"{{"apiVersion":"v1","kind":"Event","metadata":{{"name":"e-{round}","namespace":"a","uid":"u-e-{round}"}},"involvedObject":{{"kind":"Pod","namespace":"a","name":"obj-0"}},"reason":"Test"}}"#
    );
    put_object_text(&mut kv, &format!("/registry/events/a/e-{round}"), &event).await;
    let seen = streams[0]
        .next_event(Duration::from_secs(10))
        .await
        .expect("the event's watcher gets it");
    assert_eq!(seen["object"]["involvedObject"]["name"], "obj-0");
    assert!(
        streams[1]
            .next_event(Duration::from_millis(200))
            .await
            .is_none(),
        "another object's watcher got it"
    );
    wakes(&http::get(&metrics_url, &[]).await.text()) - before
}

/// `--index-field=events:involvedObject.name`: a watcher of one object's events is woken
/// by that object's events only, where without the index every watcher of the namespace
/// is (and reads past events it does not want).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_field_wakes_only_the_watchers_of_its_value() {
    let etcd = Etcd::start();
    let unindexed = wakes_for_one_event(&etcd, &[], 0).await;
    let indexed =
        wakes_for_one_event(&etcd, &["--index-field=events:involvedObject.name"], 1).await;
    assert!(unindexed >= 20.0, "without the index: {unindexed} wakes");
    assert!(
        (1.0..=2.0).contains(&indexed),
        "with the index: {indexed} wakes (20 without)"
    );
}
