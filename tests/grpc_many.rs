//! The gRPC API across resources, against a real etcd under churn: WatchMany streams equal
//! etcd's own history of their collections, in revision order, with the events of one
//! etcd transaction in one message, and resume after a disconnect without a gap or a
//! duplicate (as a single-resource Watch does); Snapshot pages hold every collection at
//! one revision, equal to etcd's range at it; ListResources says what is served.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType as EtcdEventType, GetOptions, Txn, TxnOp, WatchOptions};
use serde_json::Value;
use tonic::transport::Channel;
use watchd::api::grpc::pb::watchd_client::WatchdClient;
use watchd::api::grpc::pb::{self, EventType};

use support::kube::etcd_revision;
use support::kubepb;
use support::{Etcd, Rng, Watchd};

const CONFIGMAPS: &str = "/registry/configmaps/";
const NODES: &str = "/registry/minions/";
const SECRETS: &str = "/registry/secrets/";

/// One event as a stream should carry it: (selection, type, key, revision).
type Seen = (u32, String, String, i64);

fn configmap(ns: &str, name: &str, i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","uid":"u-{ns}-{name}","labels":{{"n":"{}"}}}},"data":{{"i":"{i}"}}}}"#,
        i % 3
    )
}

fn node(name: &str, i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}","uid":"u-{name}","labels":{{"n":"{}"}}}},"spec":{{"podCIDR":"10.0.{}.0/24"}}}}"#,
        i % 3,
        i % 250
    )
}

fn secret(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"{name}","namespace":"default","uid":"u-{name}"}},"data":{{"k":"dg=="}}}}"#
    )
}

/// Random creates, updates and deletes of ConfigMaps and Nodes, writes of Secrets (a
/// resource no stream selects), and transactions that write a ConfigMap and a Node at
/// one revision.
struct Writer {
    rng: Rng,
    exists: BTreeMap<String, bool>,
    ops: usize,
}

impl Writer {
    fn new(seed: u64) -> Writer {
        Writer {
            rng: Rng(seed),
            exists: BTreeMap::new(),
            ops: 0,
        }
    }

    fn configmap_key(&mut self) -> (String, String, String) {
        let ns = format!("churn-{}", self.rng.below(4));
        let name = format!("cm-{}", self.rng.below(20));
        (format!("{CONFIGMAPS}{ns}/{name}"), ns, name)
    }

    async fn run(&mut self, kv: &mut Client, n: usize) {
        for _ in 0..n {
            self.ops += 1;
            let i = self.ops;
            match self.rng.below(10) {
                0..=4 => {
                    let (key, ns, name) = self.configmap_key();
                    self.put_or_delete(kv, key, configmap(&ns, &name, i)).await;
                }
                5..=7 => {
                    let name = format!("node-{}", self.rng.below(10));
                    self.put_or_delete(kv, format!("{NODES}{name}"), node(&name, i))
                        .await;
                }
                8 => {
                    let name = format!("s-{}", self.rng.below(5));
                    kv.put(format!("{SECRETS}default/{name}"), secret(&name), None)
                        .await
                        .expect("put secret");
                }
                _ => {
                    let (cm_key, ns, name) = self.configmap_key();
                    let node_name = format!("node-{}", self.rng.below(10));
                    let node_key = format!("{NODES}{node_name}");
                    let txn = Txn::new().and_then([
                        TxnOp::put(cm_key.clone(), configmap(&ns, &name, i), None),
                        TxnOp::put(node_key.clone(), node(&node_name, i), None),
                    ]);
                    kv.txn(txn).await.expect("txn");
                    self.exists.insert(cm_key, true);
                    self.exists.insert(node_key, true);
                }
            }
        }
    }

    async fn put_or_delete(&mut self, kv: &mut Client, key: String, value: String) {
        let present = self.exists.get(&key).copied().unwrap_or(false);
        let delete = present && self.rng.below(10) < 3;
        if delete {
            kv.delete(key.clone(), None).await.expect("delete");
        } else {
            kv.put(key.clone(), value, None).await.expect("put");
        }
        self.exists.insert(key, !delete);
    }
}

/// The selection an etcd key is in, for streams of [configmaps, nodes], and its object key.
fn classify(key: &str) -> Option<(u32, String)> {
    if let Some(k) = key.strip_prefix(CONFIGMAPS) {
        return Some((0, k.to_string()));
    }
    key.strip_prefix(NODES).map(|k| (1, k.to_string()))
}

/// etcd's own history of ConfigMaps and Nodes in (from, to], each event with the value
/// it carries: the value put, or for a delete the value it deleted, as etcd holds it.
async fn etcd_events(kv: &mut Client, from: i64, to: i64) -> Vec<(Seen, Vec<u8>)> {
    let opts = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(from + 1);
    let mut stream = kv
        .watch("/registry/", Some(opts))
        .await
        .expect("etcd watch");
    let mut out = Vec::new();
    let mut last = from;
    let deadline = Instant::now() + Duration::from_secs(30);
    while last < to {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, stream.message())
            .await
            .expect("etcd history in time")
            .expect("etcd watch message")
            .expect("etcd watch open");
        for ev in msg.events() {
            let kv = ev.kv().expect("kv");
            last = last.max(kv.mod_revision());
            let Some((selection, key)) = classify(kv.key_str().expect("utf8 key")) else {
                continue;
            };
            let (t, value) = match ev.event_type() {
                EtcdEventType::Delete => (
                    "DELETED",
                    ev.prev_kv().expect("a delete's previous value").value(),
                ),
                EtcdEventType::Put if kv.create_revision() == kv.mod_revision() => {
                    ("ADDED", kv.value())
                }
                EtcdEventType::Put => ("MODIFIED", kv.value()),
            };
            let seen = (selection, t.to_string(), key, kv.mod_revision());
            out.push((seen, value.to_vec()));
        }
    }
    out.retain(|(s, _)| s.3 <= to);
    out
}

/// etcd's own history of ConfigMaps and Nodes in (from, to], as a [configmaps, nodes]
/// stream must carry it.
async fn etcd_history(kv: &mut Client, from: i64, to: i64) -> Vec<Seen> {
    let events = etcd_events(kv, from, to).await;
    events.into_iter().map(|(seen, _)| seen).collect()
}

/// The object each event of etcd's history of ConfigMaps and Nodes in (from, to] must
/// carry, by (selection, key, revision) (the oracle for objects served as protobuf).
async fn etcd_values(kv: &mut Client, from: i64, to: i64) -> BTreeMap<(u32, String, i64), Value> {
    let events = etcd_events(kv, from, to).await;
    events
        .into_iter()
        .map(|((selection, _, key, rev), value)| {
            let value: Value = serde_json::from_slice(&value).expect("the writer's JSON");
            ((selection, key, rev), value)
        })
        .collect()
}

/// etcd's ConfigMaps and Nodes at revision `at`: (selection, key, mod revision), in the
/// order a Snapshot sends them.
async fn etcd_state(kv: &mut Client, at: i64) -> Vec<(u32, String, i64)> {
    let mut out = Vec::new();
    for prefix in [CONFIGMAPS, NODES] {
        let r = kv
            .get(
                prefix,
                Some(GetOptions::new().with_prefix().with_revision(at)),
            )
            .await
            .expect("etcd range");
        for item in r.kvs() {
            let (selection, key) = classify(item.key_str().expect("utf8")).expect("in a prefix");
            out.push((selection, key, item.mod_revision()));
        }
    }
    out
}

fn collection(resource: &str, namespace: &str) -> Option<pb::Collection> {
    Some(pb::Collection {
        group: String::new(),
        version: "v1".into(),
        resource: resource.into(),
        namespace: namespace.into(),
    })
}

fn selection(resource: &str, namespace: &str, field_selector: &str) -> pb::Selection {
    pb::Selection {
        collection: collection(resource, namespace),
        label_selector: String::new(),
        field_selector: field_selector.into(),
        shard_selector: String::new(),
    }
}

fn both() -> Vec<pb::Selection> {
    vec![selection("configmaps", "", ""), selection("nodes", "", "")]
}

fn object_key(o: &pb::Object) -> String {
    let m = o.metadata.as_ref().expect("metadata as fields");
    if m.namespace.is_empty() {
        m.name.clone()
    } else {
        format!("{}/{}", m.namespace, m.name)
    }
}

async fn client(w: &Watchd) -> WatchdClient<Channel> {
    WatchdClient::connect(w.grpc_url())
        .await
        .expect("gRPC connect")
}

/// What a stream delivered: events, the revisions each message covered, bookmarks.
#[derive(Default)]
struct Received {
    /// Whether the stream starts with initial events (until the bookmark ending them).
    in_initial: bool,
    initial: Vec<(u32, String, i64)>,
    initial_end: Option<i64>,
    events: Vec<Seen>,
    /// For each message with events: the revisions in it.
    messages: Vec<Vec<i64>>,
    /// The objects of `events` that came as Kubernetes protobuf: (selection, key,
    /// revision, the bytes served).
    protobuf: Vec<(u32, String, i64, Vec<u8>)>,
}

impl Received {
    fn take(&mut self, events: Vec<pb::WatchEvent>) {
        let mut revisions = Vec::new();
        for e in events {
            let t = e.r#type();
            match t {
                EventType::Bookmark => {
                    if e.initial_events_end {
                        self.initial_end = Some(e.resource_version);
                        self.in_initial = false;
                    }
                }
                EventType::Error => panic!("ERROR event: {}", String::from_utf8_lossy(&e.status)),
                _ => {
                    let o = e.object.as_ref().expect("an object");
                    let meta = o.metadata.as_ref().expect("metadata");
                    assert_eq!(meta.resource_version, e.resource_version);
                    let key = object_key(o);
                    if self.in_initial {
                        assert_eq!(t, EventType::Added, "initial events are ADDED");
                        self.initial.push((e.selection, key, e.resource_version));
                        continue;
                    }
                    let name = t.as_str_name().to_string();
                    revisions.push(e.resource_version);
                    if o.encoding() == pb::Encoding::Protobuf {
                        self.protobuf.push((
                            e.selection,
                            key.clone(),
                            e.resource_version,
                            o.raw.to_vec(),
                        ));
                    }
                    self.events
                        .push((e.selection, name, key, e.resource_version));
                }
            }
        }
        if !revisions.is_empty() {
            self.messages.push(revisions);
        }
    }

    fn last_revision(&self) -> i64 {
        self.events.last().map_or(0, |s| s.3)
    }
}

/// Reads a WatchMany stream until it delivered an event at `until` or later (or, with
/// `stop_after`, that many events), bounded in time.
async fn read_many(
    stream: &mut tonic::Streaming<pb::WatchManyResponse>,
    got: &mut Received,
    until: i64,
    stop_after: Option<usize>,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.last_revision() < until && stop_after.is_none_or(|n| got.events.len() < n) {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, stream.message())
            .await
            .unwrap_or_else(|_| panic!("events up to {until} in time (at {})", got.last_revision()))
            .expect("stream message")
            .expect("stream open");
        got.take(msg.events);
    }
}

/// Reads a WatchMany stream until the bookmark that ends its initial events, bounded in
/// time.
async fn read_initial(stream: &mut tonic::Streaming<pb::WatchManyResponse>, got: &mut Received) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.initial_end.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, stream.message())
            .await
            .expect("initial events in time")
            .expect("message")
            .expect("open");
        got.take(msg.events);
    }
}

/// Reads a Watch stream until it delivered an event at `until` or later, or `stop`
/// events, bounded in time.
async fn read_watch(
    stream: &mut tonic::Streaming<pb::WatchResponse>,
    seen: &mut Vec<Seen>,
    until: i64,
    stop: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.last().map_or(0, |s| s.3) < until && seen.len() < stop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, stream.message())
            .await
            .expect("watch events in time")
            .expect("message")
            .expect("open");
        for e in msg.events {
            let t = e.r#type();
            assert_ne!(
                t,
                EventType::Error,
                "{}",
                String::from_utf8_lossy(&e.status)
            );
            if t == EventType::Bookmark {
                continue;
            }
            let o = e.object.as_ref().expect("object");
            let name = t.as_str_name().to_string();
            seen.push((0, name, object_key(o), e.resource_version));
        }
    }
}

fn assert_history(name: &str, got: &[Seen], expected: &[Seen]) {
    if got != expected {
        let at = got
            .iter()
            .zip(expected)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(expected.len()));
        let missing: Vec<&Seen> = expected.iter().filter(|e| !got.contains(e)).collect();
        let extra: Vec<&Seen> = got.iter().filter(|e| !expected.contains(e)).collect();
        panic!(
            "{name}: {} events, etcd has {}; first difference at {at}: got {:?}, etcd {:?}; \
             missing {missing:?}; not in etcd {extra:?}",
            got.len(),
            expected.len(),
            got.get(at),
            expected.get(at)
        );
    }
}

/// Every revision's events arrived in one message.
fn assert_revisions_whole(name: &str, messages: &[Vec<i64>]) {
    let mut seen_in: BTreeMap<i64, usize> = BTreeMap::new();
    for (i, revs) in messages.iter().enumerate() {
        for r in revs {
            let first = *seen_in.entry(*r).or_insert(i);
            assert_eq!(
                first, i,
                "{name}: revision {r} split over messages {first} and {i}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_many_streams_equal_etcds_history_in_order_and_resume_without_gap() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0001);
    writer.run(&mut kv, 60).await;
    let watchd = Watchd::start(&etcd.client_url(), &["--history-max-events=100000"]);
    let mut c = client(&watchd).await;
    let start = etcd_revision(&mut kv).await;

    // (a) Everything, from the current state: initial events, then changes.
    let mut all = c
        .watch_many(pb::WatchManyRequest {
            selections: both(),
            allow_watch_bookmarks: true,
            ..Default::default()
        })
        .await
        .expect("WatchMany")
        .into_inner();
    let mut got_all = Received {
        in_initial: true,
        ..Default::default()
    };
    read_initial(&mut all, &mut got_all).await;
    // (b) One namespace's ConfigMaps and one Node, from `start`.
    let mut narrow = c
        .watch_many(pb::WatchManyRequest {
            selections: vec![
                selection("configmaps", "churn-1", ""),
                selection("nodes", "", "metadata.name=node-3"),
            ],
            resource_version: start.to_string(),
            ..Default::default()
        })
        .await
        .expect("WatchMany")
        .into_inner();
    // (c) Everything from `start`, disconnected part way and resumed.
    let mut resumed = c
        .watch_many(pb::WatchManyRequest {
            selections: both(),
            resource_version: start.to_string(),
            encoding: pb::Encoding::Protobuf as i32,
            ..Default::default()
        })
        .await
        .expect("WatchMany")
        .into_inner();
    // (d) A single-resource Watch of ConfigMaps, disconnected and resumed likewise.
    let mut single = c
        .watch(pb::WatchRequest {
            collection: collection("configmaps", ""),
            resource_version: start.to_string(),
            ..Default::default()
        })
        .await
        .expect("Watch")
        .into_inner();

    writer.run(&mut kv, 300).await;
    // Part way: (c) and (d) go away after some events and come back from the last
    // revision each received.
    let mut got_resumed = Received::default();
    read_many(&mut resumed, &mut got_resumed, i64::MAX, Some(100)).await;
    drop(resumed);
    let mut single_seen: Vec<Seen> = Vec::new();
    read_watch(&mut single, &mut single_seen, i64::MAX, 80).await;
    drop(single);
    writer.run(&mut kv, 200).await;
    let mut resumed = c
        .watch_many(pb::WatchManyRequest {
            selections: both(),
            resource_version: got_resumed.last_revision().to_string(),
            encoding: pb::Encoding::Protobuf as i32,
            ..Default::default()
        })
        .await
        .expect("WatchMany resumed")
        .into_inner();
    let mut single = c
        .watch(pb::WatchRequest {
            collection: collection("configmaps", ""),
            resource_version: single_seen.last().map_or(start, |s| s.3).to_string(),
            ..Default::default()
        })
        .await
        .expect("Watch resumed")
        .into_inner();
    writer.run(&mut kv, 100).await;
    let end = etcd_revision(&mut kv).await;

    let history = etcd_history(&mut kv, start, end).await;
    assert!(
        history.len() >= 400,
        "etcd history has {} events",
        history.len()
    );
    assert!(
        history.windows(2).any(|w| w[0].3 == w[1].3),
        "the writer's transactions put two events at one revision"
    );
    let last = |h: &[Seen]| h.last().map_or(0, |s| s.3);

    // (a): the initial state is etcd's at the bookmark's revision, and the events after
    // it are etcd's history since.
    let at = got_all.initial_end.expect("initial events end");
    assert!(at >= start, "initial state at {at}, before {start}");
    let mut expected_state = etcd_state(&mut kv, at).await;
    expected_state.sort();
    let mut initial = got_all.initial.clone();
    initial.sort();
    assert_eq!(initial, expected_state, "(a) initial state at {at}");
    let expected_all: Vec<Seen> = etcd_history(&mut kv, at, end).await;
    read_many(&mut all, &mut got_all, last(&expected_all), None).await;
    assert_history(
        "(a) all from the current state",
        &got_all.events,
        &expected_all,
    );
    assert_revisions_whole("(a)", &got_all.messages);

    // (b)
    let expected_narrow: Vec<Seen> = history
        .iter()
        .filter(|s| match s.0 {
            0 => s.2.starts_with("churn-1/"),
            _ => s.2 == "node-3",
        })
        .cloned()
        .collect();
    assert!(!expected_narrow.is_empty());
    let mut got_narrow = Received::default();
    read_many(&mut narrow, &mut got_narrow, last(&expected_narrow), None).await;
    assert_history(
        "(b) one namespace and one node",
        &got_narrow.events,
        &expected_narrow,
    );

    // (c): the two streams together are etcd's history, nothing missing or twice.
    read_many(&mut resumed, &mut got_resumed, last(&history), None).await;
    assert_history("(c) resumed WatchMany", &got_resumed.events, &history);
    assert_revisions_whole("(c)", &got_resumed.messages);
    // (c) asked for Kubernetes protobuf: every object came so, and decoded with k8s-pb
    // it is exactly the message of the value etcd holds for that event (for a delete,
    // the value deleted), with the event's resourceVersion.
    assert_eq!(
        got_resumed.protobuf.len(),
        got_resumed.events.len(),
        "(c) every object in protobuf"
    );
    let values = etcd_values(&mut kv, start, end).await;
    for (selection, key, rev, raw) in &got_resumed.protobuf {
        let written = values
            .get(&(*selection, key.clone(), *rev))
            .unwrap_or_else(|| panic!("(c) {key}@{rev} is not in etcd's history"));
        kubepb::assert_protobuf_as_written(raw, written, *rev);
    }

    // (d) likewise for one resource's Watch.
    let expected_single: Vec<Seen> = history.iter().filter(|s| s.0 == 0).cloned().collect();
    read_watch(
        &mut single,
        &mut single_seen,
        last(&expected_single),
        usize::MAX,
    )
    .await;
    assert_history("(d) resumed Watch", &single_seen, &expected_single);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_pages_hold_every_collection_at_one_revision_while_writes_go_on() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0002);
    writer.run(&mut kv, 150).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let mut c = client(&watchd).await;

    let page = |c: &mut WatchdClient<Channel>, token: String| {
        let mut c = c.clone();
        async move {
            c.snapshot(pb::SnapshotRequest {
                selections: both(),
                limit: 7,
                r#continue: token,
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
        }
    };
    // Pages read while the writer goes on: each page moves etcd on.
    let mut items = Vec::new();
    let mut first = page(&mut c, String::new()).await.expect("first page");
    let at = first.resource_version;
    let mut pages = 1;
    loop {
        assert_eq!(first.resource_version, at, "every page at one revision");
        assert!(first.items.len() <= 7);
        for i in &first.items {
            let o = i.object.as_ref().expect("object");
            let m = o.metadata.as_ref().expect("metadata");
            items.push((i.selection, object_key(o), m.resource_version));
        }
        if first.r#continue.is_empty() {
            break;
        }
        writer.run(&mut kv, 5).await;
        first = page(&mut c, first.r#continue.clone()).await.expect("page");
        pages += 1;
        assert!(pages < 100, "pages end");
    }
    assert!(pages > 3, "the snapshot spans several pages ({pages})");
    assert!(
        etcd_revision(&mut kv).await > at,
        "etcd moved on while paging"
    );
    assert_eq!(items, etcd_state(&mut kv, at).await, "Snapshot at {at}");

    // The same revision asked for explicitly, in one page.
    let again = c
        .snapshot(pb::SnapshotRequest {
            selections: both(),
            resource_version: at,
            limit: 10_000,
            ..Default::default()
        })
        .await
        .expect("snapshot at a revision")
        .into_inner();
    assert!(again.r#continue.is_empty());
    let again: Vec<(u32, String, i64)> = again
        .items
        .iter()
        .map(|i| {
            let o = i.object.as_ref().expect("object");
            (
                i.selection,
                object_key(o),
                o.metadata.as_ref().map_or(0, |m| m.resource_version),
            )
        })
        .collect();
    assert_eq!(again, items);

    // Refusals: a token this API did not give, no selections, an unknown resource.
    let bad = page(&mut c, "bm90IGEgdG9rZW4".into())
        .await
        .expect_err("bad token");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    let none = c
        .snapshot(pb::SnapshotRequest::default())
        .await
        .expect_err("no selections");
    assert_eq!(none.code(), tonic::Code::InvalidArgument);
    let unknown = c
        .snapshot(pb::SnapshotRequest {
            selections: vec![selection("widgets", "", "")],
            ..Default::default()
        })
        .await
        .expect_err("unknown resource");
    assert_eq!(unknown.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn list_resources_says_what_is_served_and_objects_come_in_the_encoding_asked() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let node_rev = kv
        .put(format!("{NODES}node-1"), node("node-1", 1), None)
        .await
        .expect("put")
        .header()
        .expect("a response header")
        .revision();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let mut c = client(&watchd).await;

    let resources = c
        .list_resources(pb::ListResourcesRequest {})
        .await
        .expect("ListResources")
        .into_inner()
        .resources;
    let find = |group: &str, resource: &str| {
        resources
            .iter()
            .find(|r| r.group == group && r.resource == resource)
            .unwrap_or_else(|| panic!("{group}/{resource} listed"))
            .clone()
    };
    let pods = find("", "pods");
    assert_eq!((pods.version.as_str(), pods.kind.as_str()), ("v1", "Pod"));
    assert!(pods.namespaced);
    assert_eq!(pods.verbs, ["get", "list", "watch"]);
    let nodes = find("", "nodes");
    assert!(!nodes.namespaced);
    let deployments = find("apps", "deployments");
    assert_eq!(deployments.kind, "Deployment");
    assert!(
        resources.len() > 40,
        "every built-in resource ({})",
        resources.len()
    );

    // The same object as JSON and as Kubernetes protobuf, with the same metadata.
    let get = |encoding: pb::Encoding| {
        let mut c = c.clone();
        async move {
            c.get(pb::GetRequest {
                collection: collection("nodes", ""),
                name: "node-1".into(),
                encoding: encoding as i32,
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner()
            .object
            .expect("object")
        }
    };
    let json = get(pb::Encoding::Json).await;
    let proto = get(pb::Encoding::Protobuf).await;
    assert_eq!(json.encoding(), pb::Encoding::Json);
    assert_eq!(proto.encoding(), pb::Encoding::Protobuf);
    assert!(proto.raw.starts_with(b"k8s\0"), "Kubernetes protobuf magic");
    assert_eq!(json.metadata, proto.metadata);
    let meta = json.metadata.expect("metadata");
    assert_eq!(
        (meta.name.as_str(), meta.uid.as_str()),
        ("node-1", "u-node-1")
    );
    assert_eq!(meta.labels.get("n").map(String::as_str), Some("1"));
    assert!(!meta.deleting);
    let value: serde_json::Value = serde_json::from_slice(&json.raw).expect("JSON");
    assert_eq!(value["spec"]["podCIDR"], "10.0.1.0/24");
    // The protobuf object, decoded with k8s-pb (not watchd's codec): a Node with the
    // fields written, and exactly the message of the stored value.
    let (type_meta, decoded): (_, k8s_pb::api::core::v1::Node) = kubepb::decode(&proto.raw);
    assert_eq!(type_meta, ("v1".to_string(), "Node".to_string()));
    let m = decoded.metadata.as_ref().expect("metadata");
    assert_eq!(m.name.as_deref(), Some("node-1"));
    assert_eq!(m.uid.as_deref(), Some("u-node-1"));
    assert_eq!(m.labels.get("n").map(String::as_str), Some("1"));
    assert_eq!(m.resource_version, Some(node_rev.to_string()));
    let spec = decoded.spec.as_ref().expect("spec");
    assert_eq!(spec.pod_cidr.as_deref(), Some("10.0.1.0/24"));
    let written: Value = serde_json::from_str(&node("node-1", 1)).expect("JSON");
    kubepb::assert_protobuf_as_written(&proto.raw, &written, node_rev);
}

/// With an API server as the source each resource is followed on its own stream, at its
/// own revision: WatchMany takes only the revisions every resource reached, so its
/// streams on a second tier (etcd → watchd → watchd) still equal etcd's history in
/// order, and Snapshot still lists one revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_second_tier_watch_many_and_snapshot_are_still_consistent_across_resources() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0003);
    writer.run(&mut kv, 60).await;
    let tier1 = Watchd::start(&etcd.client_url(), &[]);
    let tier2 = Watchd::start_upstream(&tier1.base_url(), &[]);
    let mut c = client(&tier2).await;
    let start = etcd_revision(&mut kv).await;
    // A consistent read waits until both resources reached etcd's revision.
    let first = c
        .snapshot(pb::SnapshotRequest {
            selections: both(),
            ..Default::default()
        })
        .await
        .expect("Snapshot")
        .into_inner();
    assert!(first.resource_version >= start);
    let items: Vec<(u32, String, i64)> = first
        .items
        .iter()
        .map(|i| {
            let o = i.object.as_ref().expect("object");
            let rv = o.metadata.as_ref().map_or(0, |m| m.resource_version);
            (i.selection, object_key(o), rv)
        })
        .collect();
    assert_eq!(items, etcd_state(&mut kv, first.resource_version).await);

    let mut stream = c
        .watch_many(pb::WatchManyRequest {
            selections: both(),
            resource_version: start.to_string(),
            allow_watch_bookmarks: true,
            ..Default::default()
        })
        .await
        .expect("WatchMany")
        .into_inner();
    writer.run(&mut kv, 200).await;
    let end = etcd_revision(&mut kv).await;
    let history = etcd_history(&mut kv, start, end).await;
    assert!(
        history.len() >= 150,
        "etcd history has {} events",
        history.len()
    );
    let mut got = Received::default();
    read_many(
        &mut stream,
        &mut got,
        history.last().map_or(0, |s| s.3),
        None,
    )
    .await;
    assert_history("second tier", &got.events, &history);
    assert_revisions_whole("second tier", &got.messages);
}

/// The initial state always ends with its bookmark (the revision to resume from); other
/// bookmarks come only when allowed, carrying a revision every selected resource reached.
#[tokio::test]
async fn watch_many_bookmarks_name_revisions_to_resume_from() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0004);
    writer.run(&mut kv, 30).await;
    let watchd = Watchd::start(&etcd.client_url(), &["--bookmark-interval=200ms"]);
    let mut c = client(&watchd).await;
    let at = etcd_revision(&mut kv).await;

    let mut quiet = c
        .watch_many(pb::WatchManyRequest {
            selections: both(),
            ..Default::default()
        })
        .await
        .expect("WatchMany")
        .into_inner();
    let mut got = Received {
        in_initial: true,
        ..Default::default()
    };
    read_initial(&mut quiet, &mut got).await;
    assert_eq!(
        got.initial_end,
        Some(at),
        "the initial state is at etcd's revision"
    );
    let mut state = etcd_state(&mut kv, at).await;
    state.sort();
    got.initial.sort();
    assert_eq!(got.initial, state);
    // Without allow_watch_bookmarks nothing else comes while nothing changes.
    let idle = tokio::time::timeout(Duration::from_millis(800), quiet.message()).await;
    assert!(idle.is_err(), "no message on a quiet stream: {idle:?}");

    // A Secret (selected by neither) moves etcd on; a bookmark says both reached it.
    let mut bookmarked = c
        .watch_many(pb::WatchManyRequest {
            selections: both(),
            resource_version: at.to_string(),
            allow_watch_bookmarks: true,
            ..Default::default()
        })
        .await
        .expect("WatchMany")
        .into_inner();
    let moved = kv
        .put(format!("{SECRETS}default/quiet"), secret("quiet"), None)
        .await
        .expect("put")
        .header()
        .expect("header")
        .revision();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, bookmarked.message())
            .await
            .expect("a bookmark at the Secret's revision in time")
            .expect("message")
            .expect("open");
        for e in &msg.events {
            assert_eq!(e.r#type(), EventType::Bookmark, "only bookmarks: {e:?}");
            assert!(e.resource_version >= at);
        }
        if msg.events.iter().any(|e| e.resource_version >= moved) {
            break;
        }
    }
}
