//! The `consistent_copy` example (`examples/consistent_copy/`) against a real etcd and
//! watchd: its local copy of pods and nodes, kept by one WatchMany stream while pods and
//! nodes are created, changed, moved and deleted, equals etcd's state at the copy's
//! revision after every message, with no pod ever on a node the copy does not hold
//! (the writer keeps every pod on an existing node at every etcd revision, moving or
//! deleting a node's pods in the transaction that deletes it); across a watchd restart
//! it resumes from its revision without listing again, and when its revision was
//! compacted away meanwhile, it starts over with a new list. And `LocalCopy::apply`
//! alone, on messages built by hand: whole messages or nothing.
//!
//! Pods and nodes are stored as JSON only: the test is about the client's stream,
//! resume and re-list, not about decoding (watchd serves both formats as the same JSON).

mod support;

#[allow(dead_code)]
#[path = "../examples/consistent_copy/local_copy.rs"]
mod local_copy;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, GetOptions, Txn, TxnOp};
use serde_json::{json, Value};
use tokio::time::Instant;
use tonic::transport::Endpoint;
use watchd::api::grpc::pb::watchd_client::WatchdClient;
use watchd::api::grpc::pb::{self, EventType};

use local_copy::{LocalCopy, Moment, Stats};
use support::kube::{delete_key, etcd_revision, node, pod, pod_key, put_json, put_raw};
use support::{Etcd, Rng, Watchd};

const PODS: &str = "/registry/pods/";
const NODES: &str = "/registry/minions/";
/// How long the example may take to sync, or to catch up with etcd after the writes.
const CATCH_UP: Duration = Duration::from_secs(60);
/// The most states of the copy kept for comparison with etcd.
const MAX_SAMPLES: usize = 1000;

/// One of `items`, or None if there are none.
fn pick<'a, T: 'a>(
    rng: &mut Rng,
    mut items: impl ExactSizeIterator<Item = &'a T>,
) -> Option<&'a T> {
    match items.len() {
        0 => None,
        n => items.nth(rng.below(n)),
    }
}

/// A pod on `node` (unscheduled without one), labelled with the op that wrote it.
fn pod_on(key: &str, node: Option<&str>, op: usize) -> Vec<u8> {
    let (ns, name) = key.split_once('/').expect("namespace/name");
    let mut p = pod(ns, name, &[("op", &op.to_string())]);
    match node {
        Some(n) => p["spec"]["nodeName"] = json!(n),
        None => {
            p["spec"].as_object_mut().expect("spec").remove("nodeName");
        }
    }
    serde_json::to_vec(&p).expect("JSON")
}

fn node_value(name: &str, op: usize) -> Vec<u8> {
    let mut n = node(name);
    n["metadata"]["labels"] = json!({ "op": op.to_string() });
    serde_json::to_vec(&n).expect("JSON")
}

/// Creates, updates, moves and deletes pods and nodes, one etcd revision per op, such
/// that at every revision every scheduled pod's node exists: a node is deleted in one
/// transaction with its pods (each moved to another node or deleted), and a new node
/// and the pod first moved to it are written in one transaction.
struct Writer {
    rng: Rng,
    /// The nodes in etcd.
    nodes: BTreeSet<String>,
    /// The pods in etcd (`namespace/name`) and their nodes.
    pods: BTreeMap<String, Option<String>>,
    ops: usize,
    /// Ops of each kind, to check the mix covered them all.
    kinds: [usize; 8],
}

impl Writer {
    fn new(seed: u64) -> Writer {
        Writer {
            rng: Rng(seed),
            nodes: BTreeSet::new(),
            pods: BTreeMap::new(),
            ops: 0,
            kinds: [0; 8],
        }
    }

    /// An existing node, or None (unscheduled) one time in eight or without nodes.
    fn some_node(&mut self) -> Option<String> {
        if self.rng.below(8) == 0 {
            return None;
        }
        pick(&mut self.rng, self.nodes.iter()).cloned()
    }

    async fn run(&mut self, kv: &mut Client, n: usize) {
        for _ in 0..n {
            self.ops += 1;
            let op = self.ops;
            let kind = self.rng.below(8);
            self.kinds[kind] += 1;
            match kind {
                // Create or change a pod, often moving it to another node.
                0..=2 => {
                    let key = format!("ns-{}/pod-{}", self.rng.below(3), self.rng.below(30));
                    let node = self.some_node();
                    put_raw(
                        kv,
                        &format!("{PODS}{key}"),
                        pod_on(&key, node.as_deref(), op),
                    )
                    .await;
                    self.pods.insert(key, node);
                }
                3 => match pick(&mut self.rng, self.pods.keys()).cloned() {
                    Some(key) => {
                        kv.delete(format!("{PODS}{key}"), None)
                            .await
                            .expect("delete pod");
                        self.pods.remove(&key);
                    }
                    None => self.kinds[3] -= 1,
                },
                // Create or change a node.
                4 => {
                    let name = format!("node-{}", self.rng.below(8));
                    put_raw(kv, &format!("{NODES}{name}"), node_value(&name, op)).await;
                    self.nodes.insert(name);
                }
                // Delete a node, and move (mostly) or delete its pods, at one revision.
                5 => {
                    let Some(gone) = pick(&mut self.rng, self.nodes.iter()).cloned() else {
                        self.kinds[5] -= 1;
                        continue;
                    };
                    self.nodes.remove(&gone);
                    let mut ops = vec![TxnOp::delete(format!("{NODES}{gone}"), None)];
                    let on_it: Vec<String> = self
                        .pods
                        .iter()
                        .filter(|(_, n)| n.as_deref() == Some(gone.as_str()))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in on_it {
                        let to = pick(&mut self.rng, self.nodes.iter()).cloned();
                        if to.is_some() && self.rng.below(4) != 0 {
                            ops.push(TxnOp::put(
                                format!("{PODS}{key}"),
                                pod_on(&key, to.as_deref(), op),
                                None,
                            ));
                            self.pods.insert(key, to);
                        } else {
                            ops.push(TxnOp::delete(format!("{PODS}{key}"), None));
                            self.pods.remove(&key);
                        }
                    }
                    kv.txn(Txn::new().and_then(ops)).await.expect("txn");
                }
                // A new node and a pod moved onto it, at one revision.
                6 => {
                    let name = format!("node-{}", self.rng.below(8));
                    let key = match pick(&mut self.rng, self.pods.keys()).cloned() {
                        Some(k) if !self.nodes.contains(&name) => k,
                        _ => {
                            self.kinds[6] -= 1;
                            continue;
                        }
                    };
                    let txn = Txn::new().and_then([
                        TxnOp::put(format!("{NODES}{name}"), node_value(&name, op), None),
                        TxnOp::put(format!("{PODS}{key}"), pod_on(&key, Some(&name), op), None),
                    ]);
                    kv.txn(txn).await.expect("txn");
                    self.nodes.insert(name.clone());
                    self.pods.insert(key, Some(name));
                }
                // A write the stream does not select: a revision without its events.
                _ => {
                    put_json(
                        kv,
                        "/registry/configmaps/default/noise",
                        &support::kube::configmap("default", "noise", &op.to_string()),
                    )
                    .await;
                }
            }
        }
    }
}

impl Writer {
    /// Creates `n` unscheduled pods in namespace `ns`, which no later op touches: a
    /// change the copy misses stays missing.
    async fn create_lasting(&mut self, kv: &mut Client, ns: &str, n: usize) {
        for i in 0..n {
            self.ops += 1;
            let key = format!("{ns}/pod-{i}");
            put_raw(kv, &format!("{PODS}{key}"), pod_on(&key, None, self.ops)).await;
        }
    }
}

/// Pods (`namespace/name` → node, resource version) and nodes (name → resource
/// version): what the copy holds, and what etcd holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    pods: BTreeMap<String, (Option<String>, i64)>,
    nodes: BTreeMap<String, i64>,
}

fn state_of(copy: &LocalCopy) -> State {
    State {
        pods: copy
            .pods
            .iter()
            .map(|(k, p)| (k.clone(), (p.node.clone(), p.resource_version)))
            .collect(),
        nodes: copy
            .nodes
            .iter()
            .map(|(k, n)| (k.clone(), n.resource_version))
            .collect(),
    }
}

/// etcd's pods and nodes at revision `at`.
async fn etcd_state(kv: &mut Client, at: i64) -> State {
    let range = |prefix: &'static str| {
        let mut kv = kv.clone();
        async move {
            kv.get(
                prefix,
                Some(GetOptions::new().with_prefix().with_revision(at)),
            )
            .await
            .unwrap_or_else(|e| panic!("etcd range {prefix} at {at}: {e}"))
        }
    };
    let mut state = State {
        pods: BTreeMap::new(),
        nodes: BTreeMap::new(),
    };
    for item in range(PODS).await.kvs() {
        let key = item.key_str().expect("utf8")[PODS.len()..].to_string();
        let v: Value = serde_json::from_slice(item.value()).expect("a JSON pod");
        let node = v["spec"]["nodeName"].as_str().map(str::to_string);
        state.pods.insert(key, (node, item.mod_revision()));
    }
    for item in range(NODES).await.kvs() {
        let key = item.key_str().expect("utf8")[NODES.len()..].to_string();
        state.nodes.insert(key, item.mod_revision());
    }
    state
}

/// What the test sees of the example while it runs.
#[derive(Default)]
struct Observed {
    /// The copy's state after messages (up to [`MAX_SAMPLES`]), with its revision.
    samples: Vec<(i64, State)>,
    /// Revisions at which the copy held a pod on a node it did not hold.
    unknown_nodes: Vec<(i64, usize)>,
    /// Revisions at which the copy's revision went backwards: (before, after).
    backwards: Vec<(i64, i64)>,
    last_revision: i64,
    moments: Vec<String>,
    stats: Stats,
}

/// The example's loop running in the background against one watchd.
struct Running {
    observed: Arc<Mutex<Observed>>,
    /// The loop returns once the copy reaches this revision.
    target: Arc<AtomicI64>,
    handle: tokio::task::JoinHandle<(LocalCopy, Stats)>,
}

impl Running {
    fn start(watchd: &Watchd) -> Running {
        let channel = Endpoint::from_shared(watchd.grpc_url())
            .expect("gRPC URL")
            .connect_timeout(Duration::from_secs(5))
            .connect_lazy();
        let client = WatchdClient::new(channel);
        let observed = Arc::new(Mutex::new(Observed::default()));
        let target = Arc::new(AtomicI64::new(i64::MAX));
        let (o, t) = (observed.clone(), target.clone());
        let config = local_copy::Config {
            // Every wait below is shorter: the loop ends by itself at worst.
            bound: Some(Duration::from_secs(240)),
            authorization: None,
            tick: None,
        };
        let handle = tokio::spawn(async move {
            let on = move |copy: &LocalCopy, stats: &Stats, m: Moment<'_>| {
                observe(&o, &t, copy, stats, m)
            };
            local_copy::run(client, &config, LocalCopy::default(), on).await
        });
        Running {
            observed,
            target,
            handle,
        }
    }

    fn diagnostics(&self, watchd: &Watchd) -> String {
        diagnostics(&self.observed, watchd)
    }

    /// Waits (bounded) until the copy reaches `revision`.
    async fn wait_revision(&self, watchd: &Watchd, revision: i64) {
        let deadline = Instant::now() + CATCH_UP;
        while self.observed.lock().unwrap().last_revision < revision {
            assert!(
                Instant::now() < deadline,
                "the example did not reach {revision} in {CATCH_UP:?}: {}",
                self.diagnostics(watchd)
            );
            assert!(!self.handle.is_finished(), "{}", self.diagnostics(watchd));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) until the copy synced once.
    async fn wait_synced(&self, watchd: &Watchd) {
        let deadline = Instant::now() + CATCH_UP;
        while self.observed.lock().unwrap().stats.syncs == 0 {
            assert!(
                Instant::now() < deadline,
                "the example did not sync in {CATCH_UP:?}: {}",
                self.diagnostics(watchd)
            );
            assert!(!self.handle.is_finished(), "{}", self.diagnostics(watchd));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the loop once the copy reaches `target` (bounded), and returns the copy,
    /// the stats and what was observed.
    async fn finish(self, watchd: &Watchd, target: i64) -> (LocalCopy, Stats, Observed) {
        let Running {
            observed,
            target: stop_at,
            mut handle,
        } = self;
        stop_at.store(target, Ordering::SeqCst);
        let (copy, stats) = match tokio::time::timeout(CATCH_UP, &mut handle).await {
            Ok(r) => r.expect("the example's loop"),
            Err(_) => {
                handle.abort();
                panic!(
                    "the example did not reach revision {target} in {CATCH_UP:?}: {}",
                    diagnostics(&observed, watchd)
                )
            }
        };
        let observed = std::mem::take(&mut *observed.lock().unwrap());
        (copy, stats, observed)
    }
}

/// The example's callback: records the copy's state after each message, and stops the
/// loop once the copy reaches `stop_at`.
fn observe(
    observed: &Mutex<Observed>,
    stop_at: &AtomicI64,
    copy: &LocalCopy,
    stats: &Stats,
    m: Moment<'_>,
) -> ControlFlow<()> {
    let mut o = observed.lock().unwrap();
    o.stats = *stats;
    match m {
        Moment::Synced | Moment::Applied => {
            if copy.revision < o.last_revision {
                let before = o.last_revision;
                o.backwards.push((before, copy.revision));
            }
            o.last_revision = copy.revision;
            let unknown = copy.join().on_unknown_nodes;
            if unknown > 0 {
                o.unknown_nodes.push((copy.revision, unknown));
            }
            if o.samples.len() < MAX_SAMPLES {
                o.samples.push((copy.revision, state_of(copy)));
            }
            if m == Moment::Synced {
                o.moments.push(format!("synced at {}", copy.revision));
            }
        }
        Moment::Tick => {}
        other => o
            .moments
            .push(format!("{other:?} at revision {}", copy.revision)),
    }
    if copy.revision >= stop_at.load(Ordering::SeqCst) {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

/// What the example did, and the tail of watchd's log, for failure messages.
fn diagnostics(observed: &Mutex<Observed>, watchd: &Watchd) -> String {
    let o = observed.lock().unwrap();
    format!(
        "copy at {}; {:?}; moments: {:?}\nwatchd log (tail):\n{}",
        o.last_revision,
        o.stats,
        o.moments,
        support::tail_file(&watchd.log_path(), 30)
    )
}

/// Every state the copy was seen in equals etcd's at its revision, none has a pod on
/// an unknown node, and the revision never went backwards.
async fn assert_consistent(kv: &mut Client, observed: &Observed, diagnostics: &str) {
    assert!(
        observed.unknown_nodes.is_empty(),
        "pods on nodes the copy does not hold, (revision, count): {:?}\n{diagnostics}",
        observed.unknown_nodes
    );
    assert!(
        observed.backwards.is_empty(),
        "the copy's revision went backwards: {:?}\n{diagnostics}",
        observed.backwards
    );
    assert!(!observed.samples.is_empty(), "{diagnostics}");
    for (rev, state) in &observed.samples {
        let etcd = etcd_state(kv, *rev).await;
        assert_eq!(
            state, &etcd,
            "the copy at revision {rev} differs from etcd's state\n{diagnostics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_copy_equals_etcd_at_every_message_and_resumes_across_a_watchd_restart() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut writer = Writer::new(0x00c0_ffee);
    writer.run(&mut kv, 120).await;
    let mut watchd = Watchd::start(&etcd.client_url(), &["--bookmark-interval=300ms"]);
    let running = Running::start(&watchd);
    running.wait_synced(&watchd).await;

    writer.run(&mut kv, 150).await;
    // watchd goes away mid-stream; etcd changes meanwhile (first pods that stay as they
    // are, so that a revision skipped on resuming would show); the new watchd replays
    // etcd's history, so the example resumes from its revision.
    watchd.kill9();
    writer.create_lasting(&mut kv, "outage", 5).await;
    writer.run(&mut kv, 40).await;
    let outage_end = etcd_revision(&mut kv).await;
    tokio::task::block_in_place(|| watchd.restart());
    // Caught up before more changes: the first state after resuming is compared with
    // etcd's at the end of the outage.
    running.wait_revision(&watchd, outage_end).await;
    writer.run(&mut kv, 150).await;
    let end = etcd_revision(&mut kv).await;

    let (copy, stats, observed) = running.finish(&watchd, end).await;
    let diagnostics = format!("{stats:?}; moments: {:?}", observed.moments);
    assert!(
        writer.kinds.iter().all(|&n| n > 0),
        "ops of each kind: {:?}",
        writer.kinds
    );
    assert!(copy.revision >= end, "{diagnostics}");
    assert_eq!(
        state_of(&copy),
        etcd_state(&mut kv, end).await,
        "the final copy differs from etcd\n{diagnostics}"
    );
    assert!(!copy.pods.is_empty() && !copy.nodes.is_empty());
    assert_consistent(&mut kv, &observed, &diagnostics).await;
    // One list, synced once; resumed after the restart without listing again.
    assert_eq!(
        (stats.lists, stats.syncs, stats.expired, stats.violations),
        (1, 1, 0, 0),
        "{diagnostics}"
    );
    assert!(stats.resumes >= 1, "{diagnostics}");
    assert!(stats.failures >= 1, "{diagnostics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_copy_starts_over_when_its_revision_was_compacted_away() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut writer = Writer::new(0x0bad_5eed);
    writer.run(&mut kv, 80).await;
    let mut watchd = Watchd::start(&etcd.client_url(), &["--bookmark-interval=300ms"]);
    let running = Running::start(&watchd);
    running.wait_synced(&watchd).await;
    writer.create_lasting(&mut kv, "gone", 3).await;
    writer.run(&mut kv, 40).await;
    running
        .wait_revision(&watchd, etcd_revision(&mut kv).await)
        .await;

    // watchd goes away; etcd changes (pods the copy holds among them are deleted) and
    // compacts those changes away, so the new watchd has no history back to the
    // example's revision: 410, and a new list, which replaces the copy's maps.
    watchd.kill9();
    for i in 0..3 {
        delete_key(&mut kv, &pod_key("gone", &format!("pod-{i}"))).await;
    }
    writer.run(&mut kv, 40).await;
    let compacted = etcd_revision(&mut kv).await;
    kv.compact(compacted, None).await.expect("etcd compact");
    tokio::task::block_in_place(|| watchd.restart());
    writer.run(&mut kv, 40).await;
    let end = etcd_revision(&mut kv).await;

    let (copy, stats, observed) = running.finish(&watchd, end).await;
    let diagnostics = format!("{stats:?}; moments: {:?}", observed.moments);
    assert_eq!(
        state_of(&copy),
        etcd_state(&mut kv, end).await,
        "the final copy differs from etcd\n{diagnostics}"
    );
    // Samples from before the compaction cannot be read back from etcd any more.
    let observed = Observed {
        samples: observed
            .samples
            .into_iter()
            .filter(|(rev, _)| *rev >= compacted)
            .collect(),
        ..observed
    };
    assert_consistent(&mut kv, &observed, &diagnostics).await;
    assert!(stats.expired >= 1, "{diagnostics}");
    assert!(stats.syncs >= 2, "{diagnostics}");
    assert_eq!(stats.violations, 0, "{diagnostics}");
}

/// A pod or node event of a stream over [pods, nodes], objects in JSON.
fn event(t: EventType, rv: i64, selection: u32, name: &str, node_name: &str) -> pb::WatchEvent {
    let (namespace, raw) = match selection {
        local_copy::PODS => (
            "ns",
            json!({"metadata": {"name": name}, "spec": {"nodeName": node_name}}),
        ),
        _ => ("", json!({"metadata": {"name": name}})),
    };
    pb::WatchEvent {
        r#type: t as i32,
        resource_version: rv,
        selection,
        object: Some(pb::Object {
            metadata: Some(pb::ObjectMeta {
                namespace: namespace.into(),
                name: name.into(),
                resource_version: rv,
                ..Default::default()
            }),
            encoding: pb::Encoding::Json as i32,
            raw: serde_json::to_vec(&raw).unwrap().into(),
        }),
        ..Default::default()
    }
}

fn bookmark(rv: i64, initial_events_end: bool) -> pb::WatchEvent {
    pb::WatchEvent {
        r#type: EventType::Bookmark as i32,
        resource_version: rv,
        initial_events_end,
        ..Default::default()
    }
}

fn message(events: Vec<pb::WatchEvent>) -> pb::WatchManyResponse {
    pb::WatchManyResponse { events }
}

/// `apply` without a server: initial events replace the maps at their bookmark, a
/// message is applied whole or not at all, and ERROR events say whether to list again.
#[test]
fn apply_takes_whole_messages_and_replaces_the_maps_at_the_initial_bookmark() {
    use local_copy::{Applied, NODES, PODS};
    let mut copy = LocalCopy::default();
    copy.start_loading();
    let initial = message(vec![
        event(EventType::Added, 3, PODS, "a", "n1"),
        event(EventType::Added, 4, NODES, "n1", ""),
    ]);
    assert_eq!(copy.apply(&initial), Ok(Applied::Loading));
    assert!(!copy.is_synced() && copy.pods.is_empty());
    assert_eq!(
        copy.apply(&message(vec![bookmark(5, true)])),
        Ok(Applied::Synced)
    );
    assert_eq!(
        (copy.revision, copy.pods.len(), copy.nodes.len()),
        (5, 1, 1)
    );

    // One revision with a node and the pod moved onto it, then a later one.
    let moved = message(vec![
        event(EventType::Added, 7, NODES, "n2", ""),
        event(EventType::Modified, 7, PODS, "a", "n2"),
        event(EventType::Deleted, 8, NODES, "n1", ""),
    ]);
    assert_eq!(copy.apply(&moved), Ok(Applied::Changes));
    assert_eq!(copy.revision, 8);
    assert_eq!(copy.pods["ns/a"].node.as_deref(), Some("n2"));
    assert_eq!(
        copy.join().per_node,
        BTreeMap::from([("n2".to_string(), 1)])
    );
    assert_eq!(
        copy.apply(&message(vec![bookmark(12, false)])),
        Ok(Applied::Changes)
    );
    assert_eq!(copy.revision, 12);

    // Out of order, or at a revision applied already: nothing of the message is taken.
    let before = (copy.pods.clone(), copy.nodes.clone(), copy.revision);
    for bad in [
        vec![
            event(EventType::Added, 14, PODS, "b", ""),
            event(EventType::Added, 13, PODS, "c", ""),
        ],
        vec![event(EventType::Added, 12, PODS, "b", "")],
        vec![event(EventType::Added, 14, 2, "x", "")],
    ] {
        assert!(copy.apply(&message(bad)).is_err());
        assert_eq!(
            (copy.pods.clone(), copy.nodes.clone(), copy.revision),
            before
        );
    }

    // An ERROR ends the stream; the events before it in its message are not applied.
    let status = |code: i64| pb::WatchEvent {
        r#type: EventType::Error as i32,
        status: serde_json::to_vec(
            &json!({"kind": "Status", "code": code, "reason": "R", "message": "m"}),
        )
        .unwrap()
        .into(),
        ..Default::default()
    };
    let expired = message(vec![
        event(EventType::Added, 14, PODS, "b", ""),
        status(410),
    ]);
    assert!(matches!(copy.apply(&expired), Ok(Applied::Expired(_))));
    assert!(matches!(
        copy.apply(&message(vec![status(403)])),
        Ok(Applied::Failed(_))
    ));
    assert_eq!(
        (copy.pods.clone(), copy.nodes.clone(), copy.revision),
        before
    );
}
