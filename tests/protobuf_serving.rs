//! Kubernetes protobuf responses (`Accept: application/vnd.kubernetes.protobuf`) for
//! built-in objects stored as protobuf, against a real etcd: get, list, watch frames, and
//! the fallbacks for JSON-stored objects and custom resources.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use k8s_pb::api::core::v1::Pod;
use support::kube::*;
use support::kubepb;
use support::{http, Etcd, Watchd};

const PB: &str = "application/vnd.kubernetes.protobuf";
const PB_OR_JSON: &str = "application/vnd.kubernetes.protobuf, application/json";
const POD_KEY: &str = "/registry/pods/namespaceValue/nameValue";

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

/// A minimal protobuf reader: the length-delimited and varint fields of a message.
#[derive(Debug, Clone, Copy, PartialEq)]
enum F<'a> {
    Len(&'a [u8]),
    Int(u64),
}

fn varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in 0..10 {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << (7 * shift);
        if byte & 0x80 == 0 {
            break;
        }
    }
    v
}

fn fields(b: &[u8]) -> Vec<(u64, F<'_>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let tag = varint(b, &mut pos);
        let v = match tag & 7 {
            0 => F::Int(varint(b, &mut pos)),
            2 => {
                let n = varint(b, &mut pos) as usize;
                pos += n;
                F::Len(&b[pos - n..pos])
            }
            1 => {
                pos += 8;
                F::Int(0)
            }
            5 => {
                pos += 4;
                F::Int(0)
            }
            w => panic!("wire type {w}"),
        };
        out.push((tag >> 3, v));
    }
    out
}

fn all_len(b: &[u8], n: u64) -> Vec<&[u8]> {
    fields(b)
        .into_iter()
        .filter_map(|(k, v)| match v {
            F::Len(x) if k == n => Some(x),
            _ => None,
        })
        .collect()
}

fn len(b: &[u8], n: u64) -> Option<&[u8]> {
    all_len(b, n).into_iter().next()
}

fn string(b: &[u8], n: u64) -> Option<String> {
    len(b, n).map(|x| String::from_utf8(x.to_vec()).unwrap())
}

/// (apiVersion, kind, raw) of an enveloped value.
fn envelope(b: &[u8]) -> (String, String, &[u8]) {
    let body = b.strip_prefix(b"k8s\0").expect("k8s magic");
    let tm = len(body, 1).expect("typeMeta");
    (
        string(tm, 1).unwrap_or_default(),
        string(tm, 2).unwrap_or_default(),
        len(body, 2).expect("raw"),
    )
}

/// metadata.resourceVersion of an object's raw message.
fn object_rv(raw: &[u8]) -> String {
    string(len(raw, 1).expect("metadata"), 6).expect("resourceVersion")
}

fn transcoded(body: &[u8]) -> Value {
    let (v, k, raw) = envelope(body);
    let r = watchd::codec::pbjson::render(&v, &k, raw, None).expect("transcode");
    serde_json::from_slice(&r.json).unwrap()
}

async fn start_with_pods() -> (Etcd, etcd_client::Client, Watchd, i64, i64) {
    let dir = fixtures();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let pb = std::fs::read(dir.join("core.v1.Pod.pb")).unwrap();
    let pod_rv = put_raw(&mut kv, POD_KEY, pb).await;
    let json_rv = put_pod(&mut kv, "default", "web", &[("app", "web")]).await;
    // etcd's history before the pods is gone, so watchd's (replayed from etcd's oldest
    // revision) starts at them: a watch from resourceVersion 1 is too old.
    kv.compact(json_rv, None).await.expect("etcd compact");
    let w = Watchd::start(&etcd.client_url(), &[]);
    (etcd, kv, w, pod_rv, json_rv)
}

#[tokio::test]
async fn protobuf_get_and_list_of_protobuf_stored_pods() {
    let (_etcd, _kv, w, pod_rv, _) = start_with_pods().await;
    let base = w.base_url();
    let url = format!("{base}/api/v1/namespaces/namespaceValue/pods/nameValue");
    let resp = http::get(&url, &[("accept", PB)]).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some(PB));
    let (v, k, raw) = envelope(&resp.body);
    assert_eq!((v.as_str(), k.as_str()), ("v1", "Pod"));
    assert_eq!(object_rv(raw), pod_rv.to_string());
    // The stored message, with its resourceVersion, read by the tests' own decoder.
    let fixture = std::fs::read(fixtures().join("core.v1.Pod.pb")).unwrap();
    let (_, mut stored): (_, Pod) = kubepb::decode(&fixture);
    stored.metadata.as_mut().unwrap().resource_version = Some(pod_rv.to_string());
    let (type_meta, served): (_, Pod) = kubepb::decode(&resp.body);
    assert_eq!(type_meta, ("v1".to_string(), "Pod".to_string()));
    assert!(served == stored, "served {served:#?}\nstored {stored:#?}");
    // And JSON and protobuf are the same object.
    let json_get = http::get(&url, &[]).await.json();
    assert_eq!(transcoded(&resp.body), json_get);

    // A small protobuf body is sent as it is to a client that accepts gzip, as
    // kube-apiserver sends it (large ones: `http_content`).
    let gz = http::get(&url, &[("accept", PB), ("accept-encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), None);
    assert_eq!(gz.body, resp.body);

    // A list of protobuf-stored pods.
    let list = http::get(
        &format!("{base}/api/v1/namespaces/namespaceValue/pods"),
        &[("accept", PB)],
    )
    .await;
    assert_eq!(list.status, 200, "{}", list.text());
    assert_eq!(list.header("content-type"), Some(PB));
    let (v, k, raw) = envelope(&list.body);
    assert_eq!((v.as_str(), k.as_str()), ("v1", "PodList"));
    let list_json = http::get(
        &format!("{base}/api/v1/namespaces/namespaceValue/pods"),
        &[],
    )
    .await
    .json();
    let list_meta = len(raw, 1).expect("ListMeta");
    assert_eq!(
        string(list_meta, 2).unwrap(),
        list_json["metadata"]["resourceVersion"].as_str().unwrap()
    );
    let items = all_len(raw, 2);
    assert_eq!(items.len(), 1);
    assert_eq!(object_rv(items[0]), pod_rv.to_string());
    let whole = transcoded(&list.body);
    assert_eq!(whole["kind"], "PodList");
    assert_eq!(
        whole["metadata"]["resourceVersion"],
        list_json["metadata"]["resourceVersion"]
    );
    assert_eq!(whole["items"][0]["metadata"]["name"], "nameValue");
    let item = watchd::codec::pbjson::render("v1", "Pod", items[0], None).unwrap();
    let item: Value = serde_json::from_slice(&item.json).unwrap();
    assert_eq!(item, json_get);

    // Paging: continue and remainingItemCount are in ListMeta.
    let dir = fixtures();
    let mut kv = _kv;
    let pb = std::fs::read(dir.join("core.v1.Pod.pb")).unwrap();
    put_raw(&mut kv, "/registry/pods/namespaceValue/zzz", pb).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let page = http::get(
        &format!("{base}/api/v1/namespaces/namespaceValue/pods?limit=1"),
        &[("accept", PB)],
    )
    .await;
    let (_, _, raw) = envelope(&page.body);
    let list_meta = len(raw, 1).unwrap();
    assert!(string(list_meta, 3).is_some_and(|c| !c.is_empty()));
    assert!(fields(list_meta).contains(&(4, F::Int(1))), "{list_meta:?}");
    assert_eq!(all_len(raw, 2).len(), 1);
}

#[test]
fn rewriting_to_the_stored_resource_version_keeps_the_bytes() {
    let dir = fixtures();
    for file in ["core.v1.Pod.pb", "core.v1.Node.pb", "apps.v1.Deployment.pb"] {
        let stored = std::fs::read(dir.join(file)).unwrap();
        let (_, _, raw) = envelope(&stored);
        let rv = object_rv(raw);
        let out = watchd::codec::protobuf::rewrite_raw(raw, &rv).unwrap();
        assert!(out == raw, "{file}: bytes changed");
        let out = watchd::codec::protobuf::rewrite_raw(raw, "12345678901").unwrap();
        assert_eq!(object_rv(&out), "12345678901");
        assert_eq!(out.len(), raw.len() - rv.len() + 11);
    }
}

/// `url` cannot be had as protobuf alone (406), and with a JSON fallback is labelled JSON.
/// A custom resource has no protobuf form: protobuf alone is 406, with JSON offered too
/// the answer is JSON.
async fn assert_served_as_json_only(url: &str) {
    let resp = http::get(url, &[("accept", PB)]).await;
    assert_status(&resp, 406, "NotAcceptable");
    let resp = http::get(url, &[("accept", PB_OR_JSON)]).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    resp.json();
}

#[tokio::test]
async fn json_stored_objects_are_served_as_protobuf() {
    let (_etcd, _kv, w, pod_rv, json_rv) = start_with_pods().await;
    let base = w.base_url();
    let resp = http::get(
        &format!("{base}/api/v1/namespaces/default/pods/web"),
        &[("accept", PB)],
    )
    .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some(PB));
    // kube-apiserver's answer: the stored JSON decoded and encoded again.
    let written = pod("default", "web", &[("app", "web")]);
    kubepb::assert_protobuf_as_written(&resp.body, &written, json_rv);
    // A list mixing protobuf- and JSON-stored pods is one protobuf list.
    let list = http::get(&format!("{base}/api/v1/pods"), &[("accept", PB)]).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let (_, kind, raw) = envelope(&list.body);
    assert_eq!(kind, "PodList");
    let rvs: Vec<String> = all_len(raw, 2).into_iter().map(object_rv).collect();
    assert_eq!(rvs, [json_rv.to_string(), pod_rv.to_string()]);
    // And a watch of the namespace holding the JSON-stored pod streams protobuf.
    let url = format!(
        "{base}/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&timeoutSeconds=1"
    );
    let stream = http::watch(&url, &[("accept", PB)]).await;
    assert_eq!(stream.status(), 200);
    let body = stream.rest(Duration::from_secs(20)).await;
    let added: Vec<(String, String)> = frames(&body)
        .into_iter()
        .map(|(t, obj)| (t, object_rv(envelope(&obj).2)))
        .collect();
    assert_eq!(added, [("ADDED".to_string(), json_rv.to_string())]);
}

fn frames(mut body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while body.len() >= 4 {
        let n = u32::from_be_bytes(body[..4].try_into().unwrap()) as usize;
        let ev = &body[4..4 + n];
        let t = string(ev, 1).expect("type");
        let obj = len(len(ev, 2).expect("object"), 1).expect("raw").to_vec();
        out.push((t, obj));
        body = &body[4 + n..];
    }
    assert!(body.is_empty(), "trailing bytes");
    out
}

#[tokio::test]
async fn protobuf_watch_frames() {
    let (_etcd, mut kv, w, _, json_rv) = start_with_pods().await;
    let dir = fixtures();
    let base = w.base_url();
    let url = format!(
        "{base}/api/v1/namespaces/namespaceValue/pods?watch=true&resourceVersion={json_rv}&allowWatchBookmarks=true&timeoutSeconds=3"
    );
    let stream = http::watch(&url, &[("accept", PB)]).await;
    assert_eq!(stream.status(), 200);
    assert_eq!(
        stream
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    let pb = std::fs::read(dir.join("core.v1.Pod.pb")).unwrap();
    let r2 = put_raw(&mut kv, POD_KEY, pb).await;
    let r3 = delete_key(&mut kv, POD_KEY).await;
    let body = stream.rest(Duration::from_secs(20)).await;
    let events: Vec<_> = frames(&body)
        .into_iter()
        .filter(|(t, _)| t != "BOOKMARK")
        .collect();
    let got: Vec<(String, String, String)> = events
        .iter()
        .map(|(t, obj)| {
            let (_, kind, raw) = envelope(obj);
            (t.clone(), kind, object_rv(raw))
        })
        .collect();
    assert_eq!(
        got,
        [
            ("MODIFIED".into(), "Pod".into(), r2.to_string()),
            ("DELETED".into(), "Pod".into(), r3.to_string()),
        ]
    );

    // A watch from resourceVersion 0 starts with synthetic ADDED frames of the objects.
    let pb = std::fs::read(dir.join("core.v1.Pod.pb")).unwrap();
    let r4 = put_raw(&mut kv, POD_KEY, pb).await;
    // Wait until the cache holds r4 (a get not older than it), so the watch below starts
    // from a cache with the pod in it: its ADDED is synthetic, not r4's event arriving
    // after the watch began.
    let held = http::get(
        &format!("{base}/api/v1/namespaces/namespaceValue/pods/nameValue?resourceVersion={r4}"),
        &[],
    )
    .await;
    assert_eq!(held.status, 200, "{}", held.text());
    let url = format!(
        "{base}/api/v1/namespaces/namespaceValue/pods?watch=true&resourceVersion=0&timeoutSeconds=1"
    );
    let body = http::watch(&url, &[("accept", PB)])
        .await
        .rest(Duration::from_secs(20))
        .await;
    let added: Vec<(String, String, String)> = frames(&body)
        .into_iter()
        .map(|(t, obj)| {
            let (_, kind, raw) = envelope(&obj);
            (t, kind, object_rv(raw))
        })
        .collect();
    assert_eq!(added, [("ADDED".into(), "Pod".into(), r4.to_string())]);

    // A watch from before the cache's window: one ERROR frame carrying a v1 Status.
    let url = format!("{base}/api/v1/namespaces/namespaceValue/pods?watch=true&resourceVersion=1");
    let stream = http::watch(&url, &[("accept", PB)]).await;
    let body = stream.rest(Duration::from_secs(20)).await;
    let fr = frames(&body);
    assert_eq!(fr.len(), 1);
    assert_eq!(fr[0].0, "ERROR");
    let (v, k, raw) = envelope(&fr[0].1);
    assert_eq!((v.as_str(), k.as_str()), ("v1", "Status"));
    assert_eq!(string(raw, 2).as_deref(), Some("Failure"));
    assert_eq!(string(raw, 4).as_deref(), Some("Expired"));
    assert!(fields(raw).contains(&(6, F::Int(410))), "{raw:?}");
}

#[tokio::test]
async fn bookmarks_carry_the_kind_and_resource_version() {
    let (_etcd, _kv, w, _, _) = start_with_pods().await;
    let base = w.base_url();
    let url = format!(
        "{base}/api/v1/namespaces/namespaceValue/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2"
    );
    let stream = http::watch(&url, &[("accept", PB)]).await;
    assert_eq!(stream.status(), 200);
    let body = stream.rest(Duration::from_secs(20)).await;
    let fr = frames(&body);
    assert_eq!(fr[0].0, "ADDED");
    let (_, kind, raw) = envelope(&fr[1].1);
    assert_eq!((fr[1].0.as_str(), kind.as_str()), ("BOOKMARK", "Pod"));
    let meta = len(raw, 1).unwrap();
    assert!(string(meta, 6).is_some());
    let entry = len(meta, 12).expect("annotation");
    assert_eq!(string(entry, 1).unwrap(), "k8s.io/initial-events-end");
    assert_eq!(string(entry, 2).unwrap(), "true");
}

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.net", "uid": "uid-crd-gizmos"},
        "spec": {
            "group": "example.net",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

#[tokio::test]
async fn custom_resources_are_json_only() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_json(
        &mut kv,
        "/registry/apiextensions.k8s.io/customresourcedefinitions/gizmos.example.net",
        &crd(),
    )
    .await;
    put_json(
        &mut kv,
        "/registry/example.net/gizmos/default/g1",
        &json!({"apiVersion": "example.net/v1", "kind": "Gizmo",
            "metadata": {"name": "g1", "namespace": "default", "uid": "uid-g1"}}),
    )
    .await;
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();
    for path in [
        "/apis/example.net/v1/namespaces/default/gizmos",
        "/apis/example.net/v1/namespaces/default/gizmos/g1",
    ] {
        assert_served_as_json_only(&format!("{base}{path}")).await;
    }
}

/// `watchd_protobuf_json_renders_total` from `/metrics` (0 before the first render).
async fn json_renders(base: &str) -> f64 {
    let text = http::get(&format!("{base}/metrics"), &[]).await.text();
    metric(&text, "watchd_protobuf_json_renders_total", &[]).unwrap_or(0.0)
}

#[tokio::test]
async fn json_of_protobuf_objects_is_rendered_once_on_first_use() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for name in ["a", "b", "c"] {
        let value = kubepb::encode(&pod("lazy", name, &[("app", name)]));
        put_raw(&mut kv, &pod_key("lazy", name), value).await;
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();
    let pods = format!("{base}/api/v1/namespaces/lazy/pods");

    // Protobuf readers (a list and a watch with events) never need the JSON.
    let list = http::get(&pods, &[("accept", PB)]).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let (_, _, raw) = envelope(&list.body);
    assert_eq!(all_len(raw, 2).len(), 3);
    let list_rv = string(len(raw, 1).expect("ListMeta"), 2).expect("resourceVersion");
    let stream = http::watch(
        &format!("{pods}?watch=true&resourceVersion={list_rv}&timeoutSeconds=2"),
        &[("accept", PB)],
    )
    .await;
    let value = kubepb::encode(&pod("lazy", "b", &[("app", "b2")]));
    let b2 = put_raw(&mut kv, &pod_key("lazy", "b"), value).await;
    let gone = delete_key(&mut kv, &pod_key("lazy", "c")).await;
    let got: Vec<(String, String)> = frames(&stream.rest(Duration::from_secs(20)).await)
        .into_iter()
        .map(|(t, obj)| (t, object_rv(envelope(&obj).2)))
        .collect();
    assert_eq!(
        got,
        [
            ("MODIFIED".to_string(), b2.to_string()),
            ("DELETED".to_string(), gone.to_string())
        ]
    );
    assert_eq!(
        json_renders(&base).await,
        0.0,
        "protobuf reads rendered JSON"
    );
    let rendered_bytes = |text: String| metric(&text, "watchd_rendered_json_bytes", &[]);
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(rendered_bytes(metrics).unwrap_or(0.0), 0.0);

    // The first JSON read of a revision renders it; later reads share that rendering.
    let a = get_json(&format!("{pods}/a")).await;
    assert_eq!(a["metadata"]["labels"]["app"], "a");
    assert_eq!(json_renders(&base).await, 1.0);
    get_json(&format!("{pods}/a")).await;
    assert_eq!(json_renders(&base).await, 1.0);
    let list = get_json(&pods).await;
    assert_eq!(item_names(&list), ["a", "b"]);
    assert_eq!(item(&list, "b")["metadata"]["labels"]["app"], "b2");
    assert_eq!(rv(item(&list, "b")), b2);
    assert_eq!(
        json_renders(&base).await,
        2.0,
        "only b's new revision was new"
    );
    // The renderings kept are exactly the two bodies a get serves.
    let mut kept = 0;
    for name in ["a", "b"] {
        kept += http::get(&format!("{pods}/{name}"), &[]).await.body.len();
    }
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(rendered_bytes(metrics), Some(kept as f64));
    get_json(&pods).await;
    assert_eq!(json_renders(&base).await, 2.0);
}

#[tokio::test]
async fn metadata_readers_render_metadata_alone_once() {
    const META_LIST: &str =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut written = Vec::new();
    for name in ["a", "b"] {
        let object = pod("meta", name, &[("app", name)]);
        let value = kubepb::encode(&object);
        let r = put_raw(&mut kv, &pod_key("meta", name), value).await;
        written.push((object, r));
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();
    let pods = format!("{base}/api/v1/namespaces/meta/pods");
    let counters = |text: &str| {
        (
            metric(text, "watchd_protobuf_metadata_renders_total", &[]).unwrap_or(0.0),
            metric(text, "watchd_protobuf_json_renders_total", &[]).unwrap_or(0.0),
        )
    };

    let list = http::get(&pods, &[("accept", META_LIST)]).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let list = list.json();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    for (i, (object, r)) in written.iter().enumerate() {
        // Exactly the `metadata` written, with its resourceVersion: every ObjectMeta field
        // is omitempty, so Go's JSON adds no zero values to it.
        let mut metadata = object["metadata"].clone();
        metadata["resourceVersion"] = json!(r.to_string());
        assert_eq!(list["items"][i]["metadata"], metadata);
    }
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(counters(&metrics), (2.0, 0.0), "metadata alone, once each");

    // Read again: shared, not rendered again.
    http::get(&pods, &[("accept", META_LIST)]).await;
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(counters(&metrics), (2.0, 0.0));
}
