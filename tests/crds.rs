//! CustomResourceDefinitions (as kube-apiserver stores them, and as protobuf) and their lifecycle:
//! added, changed and removed definitions take effect without a restart.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::http;
use support::{Etcd, Watchd};

const CRD_KEY: &str =
    "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com";

fn field(n: u32, b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut tag = u64::from(n << 3 | 2);
    let mut len = b.len() as u64;
    for v in [&mut tag, &mut len] {
        while *v >= 0x80 {
            out.push((*v as u8) | 0x80);
            *v >>= 7;
        }
        out.push(*v as u8);
    }
    out.extend_from_slice(b);
    out
}

/// A protobuf CRD for widgets.example.com, served at v1, optionally selectable by spec.color.
fn crd_protobuf(selectable_color: bool) -> Vec<u8> {
    let names = [
        field(1, b"widgets"),
        field(2, b"widget"),
        field(4, b"Widget"),
    ]
    .concat();
    let mut v1 = [field(1, b"v1"), vec![2 << 3, 1, 3 << 3, 1]].concat();
    if selectable_color {
        v1.extend(field(9, &field(1, b".spec.color")));
    }
    let spec = [
        field(1, b"example.com"),
        field(3, &names),
        field(4, b"Namespaced"),
        field(7, &v1),
    ]
    .concat();
    let meta = field(1, b"widgets.example.com");
    let raw = [field(1, &meta), field(2, &spec)].concat();
    let type_meta = [
        field(1, b"apiextensions.k8s.io/v1"),
        field(2, b"CustomResourceDefinition"),
    ]
    .concat();
    let mut value = b"k8s\x00".to_vec();
    value.extend(field(1, &type_meta));
    value.extend(field(2, &raw));
    value
}

fn widget(name: &str, color: &str) -> String {
    format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"{name}","namespace":"a"}},"spec":{{"color":"{color}"}}}}"#
    )
}

async fn poll<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn protobuf_crds_are_served_and_their_changes_and_removal_take_effect() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    kv.put(CRD_KEY, crd_protobuf(false), None)
        .await
        .expect("put crd");
    kv.put(
        "/registry/example.com/widgets/a/w1",
        widget("w1", "red"),
        None,
    )
    .await
    .expect("put");
    kv.put(
        "/registry/example.com/widgets/a/w2",
        widget("w2", "blue"),
        None,
    )
    .await
    .expect("put");
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();
    let widgets = format!("{base}/apis/example.com/v1/namespaces/a/widgets");
    let list = http::get(&widgets, &[]).await.json();
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
    // Not selectable by spec.color yet.
    assert_eq!(
        http::get(&format!("{widgets}?fieldSelector=spec.color%3Dred"), &[])
            .await
            .status,
        400
    );

    // Change the definition: watchers of the old one end with 410, objects stay served.
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let mut old_watch = http::watch(&format!("{widgets}?watch=1&resourceVersion={rv}"), &[]).await;
    kv.put(CRD_KEY, crd_protobuf(true), None)
        .await
        .expect("change crd");
    let ev = old_watch
        .next_event(Duration::from_secs(10))
        .await
        .expect("an event");
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 410);
    let red = http::get(&format!("{widgets}?fieldSelector=spec.color%3Dred"), &[]).await;
    assert_eq!(red.status, 200, "{}", red.text());
    let red: Value = red.json();
    let names: Vec<&str> = red["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["w1"]);

    // Remove it: no longer discovered or served; its watchers end.
    let mut watch = http::watch(&format!("{widgets}?watch=1&resourceVersion=0"), &[]).await;
    let _initial = watch.next_events(2, Duration::from_secs(10)).await;
    kv.delete(CRD_KEY, None).await.expect("delete crd");
    let ev = watch
        .next_event(Duration::from_secs(10))
        .await
        .expect("an event");
    assert_eq!(ev["object"]["code"], 410, "{ev}");
    poll("widgets are gone", || {
        let url = widgets.clone();
        async move { http::get(&url, &[]).await.status == 404 }
    })
    .await;
    let groups = http::get(&format!("{base}/apis"), &[]).await.json();
    assert!(!groups.to_string().contains("example.com"), "{groups}");
}

/// A CRD as kube-apiserver 1.34 stores it (JSON, apiextensions.k8s.io/v1beta1, what all
/// versions share hoisted to the top level): its custom resources are served with the
/// hoisted printer columns and selectable fields, and the CRD itself as v1.
#[tokio::test]
async fn crds_stored_as_kube_apiserver_stores_them_define_their_resources() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let crd = serde_json::json!({
        "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1beta1",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {"group": "example.org", "version": "v1",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                 "scope": "Namespaced",
                 "versions": [{"name": "v1", "served": true, "storage": true}],
                 "additionalPrinterColumns": [{"name": "Size", "type": "integer", "JSONPath": ".spec.size"}],
                 "selectableFields": [{"jsonPath": ".spec.size"}],
                 "conversion": {"strategy": "None"}, "preserveUnknownFields": false},
        "status": {"storedVersions": ["v1"]}
    });
    let key = "/registry/apiextensions.k8s.io/customresourcedefinitions/gadgets.example.org";
    kv.put(key, serde_json::to_vec(&crd).unwrap(), None)
        .await
        .expect("put crd");
    for (name, size) in [("g1", 1), ("g2", 2)] {
        let g = serde_json::json!({"apiVersion": "example.org/v1", "kind": "Gadget",
            "metadata": {"name": name, "namespace": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"size": size}});
        kv.put(
            format!("/registry/example.org/gadgets/a/{name}"),
            serde_json::to_vec(&g).unwrap(),
            None,
        )
        .await
        .expect("put gadget");
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();
    let served = http::get(
        &format!(
            "{base}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.org"
        ),
        &[],
    )
    .await
    .json();
    assert_eq!(served["apiVersion"], "apiextensions.k8s.io/v1");
    assert!(served["spec"].get("version").is_none(), "{served}");
    assert_eq!(
        served["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"],
        ".spec.size"
    );

    let gadgets = format!("{base}/apis/example.org/v1/namespaces/a/gadgets");
    let two = http::get(&format!("{gadgets}?fieldSelector=spec.size%3D2"), &[]).await;
    assert_eq!(two.status, 200, "{}", two.text());
    let names: Vec<String> = two.json()["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
        .collect();
    assert_eq!(names, ["g2"]);
    let table = http::get(
        &gadgets,
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
    )
    .await
    .json();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(columns.contains(&"Size"), "{table}");
    let size_at = columns.iter().position(|c| *c == "Size").unwrap();
    assert_eq!(table["rows"][1]["cells"][size_at], 2, "{table}");
}
