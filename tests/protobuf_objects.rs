//! Built-in objects stored as Kubernetes protobuf, exactly as kube-apiserver writes them
//! (upstream's own encodings from the shared fixtures), served through the HTTP API as the
//! JSON kube-apiserver would serve, against a real etcd.

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::http;
use support::{Etcd, Watchd};

/// The v1.34.0 fixture folder. It comes with `../shared` and CI always has it, so its
/// absence is a failure naming the path, never a silent pass.
fn fixtures() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/k8s-api-testdata/v1.34.0");
    assert!(
        dir.is_dir(),
        "fixture folder {} is absent (it comes with ../shared; CI always has it)",
        dir.display()
    );
    dir
}

fn read(dir: &std::path::Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The fixture's JSON as watchd must serve it: resourceVersion = the etcd revision.
fn expected(dir: &std::path::Path, name: &str, rv: i64) -> Value {
    let mut v: Value = serde_json::from_slice(&read(dir, name)).expect("fixture JSON");
    v["metadata"]["resourceVersion"] = Value::from(rv.to_string());
    v
}

#[tokio::test]
async fn protobuf_pods_nodes_and_deployments_are_served_as_kube_apiserver_json() {
    let dir = fixtures();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut revs = Vec::new();
    for (key, file) in [
        ("/registry/pods/namespaceValue/nameValue", "core.v1.Pod.pb"),
        ("/registry/minions/nameValue", "core.v1.Node.pb"),
        (
            "/registry/deployments/namespaceValue/nameValue",
            "apps.v1.Deployment.pb",
        ),
    ] {
        let resp = kv.put(key, read(&dir, file), None).await.expect("put");
        revs.push(resp.header().expect("header").revision());
    }
    let (pod_rv, node_rv, deploy_rv) = (revs[0], revs[1], revs[2]);
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();

    let pod = http::get(
        &format!("{base}/api/v1/namespaces/namespaceValue/pods/nameValue"),
        &[],
    )
    .await
    .json();
    assert_eq!(pod, expected(&dir, "core.v1.Pod.json", pod_rv));
    let node = http::get(&format!("{base}/api/v1/nodes/nameValue"), &[])
        .await
        .json();
    assert_eq!(node, expected(&dir, "core.v1.Node.json", node_rv));
    let deploy = http::get(
        &format!("{base}/apis/apps/v1/namespaces/namespaceValue/deployments/nameValue"),
        &[],
    )
    .await
    .json();
    assert_eq!(deploy, expected(&dir, "apps.v1.Deployment.json", deploy_rv));

    // Field selectors read the transcoded object.
    let on_node = http::get(
        &format!("{base}/api/v1/pods?fieldSelector=spec.nodeName%3DnodeNameValue"),
        &[],
    )
    .await
    .json();
    assert_eq!(on_node["items"].as_array().map(Vec::len), Some(1));
    let elsewhere = http::get(
        &format!("{base}/api/v1/pods?fieldSelector=spec.nodeName%3Dother"),
        &[],
    )
    .await
    .json();
    assert_eq!(elsewhere["items"].as_array().map(Vec::len), Some(0));
}

#[tokio::test]
async fn protobuf_watch_events_carry_the_transcoded_object_and_the_delete_revision() {
    let dir = fixtures();
    let etcd = Etcd::start();
    let w = Watchd::start(&etcd.client_url(), &[]);
    let list = http::get(&format!("{}/api/v1/configmaps", w.base_url()), &[])
        .await
        .json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let url = format!(
        "{}/api/v1/configmaps?watch=1&resourceVersion={rv}",
        w.base_url()
    );
    let mut stream = http::watch(&url, &[]).await;
    let mut kv = etcd.client().await;
    let key = "/registry/configmaps/namespaceValue/nameValue";
    let put_rv = kv
        .put(key, read(&dir, "core.v1.ConfigMap.pb"), None)
        .await
        .expect("put")
        .header()
        .expect("h")
        .revision();
    let del_rv = kv
        .delete(key, None)
        .await
        .expect("delete")
        .header()
        .expect("h")
        .revision();
    let wait = std::time::Duration::from_secs(10);
    let added = stream.next_event(wait).await.expect("ADDED");
    assert_eq!(added["type"], "ADDED");
    assert_eq!(
        added["object"],
        expected(&dir, "core.v1.ConfigMap.json", put_rv)
    );
    let deleted = stream.next_event(wait).await.expect("DELETED");
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(
        deleted["object"],
        expected(&dir, "core.v1.ConfigMap.json", del_rv)
    );
}
