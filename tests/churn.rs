//! The core invariant, checked against a real etcd: every watcher receives, in revision
//! order, exactly the events after its start revision that match its filter — no gap, no
//! duplicate, no reordering — across an etcd kill -9 and restart, and across a compaction
//! past watchd's resume revision (which ends old watchers with 410 and forces a re-list).
//!
//! The expected history is etcd's own: an etcd watch over the same prefix from the same
//! start revision. The same holds for watchers of a second tier (a watchd fed by a
//! watchd), across a restart of the middle tier. Each test runs with the ConfigMaps stored as JSON and as protobuf (as
//! kube-apiserver stores built-in kinds).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, WatchOptions};
use serde_json::Value;

use support::http::{self, WatchStream};
use support::{Etcd, Rng, Watchd};

const PREFIX: &str = "/registry/configmaps/";
const NAMESPACES: usize = 4;
const NAMES: usize = 30;

/// One event as a watcher should see it: (type, namespace/name, resourceVersion, the
/// object's `data.i`: which of the writer's writes its body is).
type Seen = (String, String, i64, String);

/// How the writer stores the ConfigMaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Protobuf,
}

fn configmap(ns: &str, name: &str, i: usize, format: Format) -> Vec<u8> {
    let json = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","uid":"u-{ns}-{name}","labels":{{"churn":"yes"}}}},"data":{{"i":"{i}"}}}}"#
    );
    match format {
        Format::Json => json.into_bytes(),
        Format::Protobuf => {
            let value: Value = serde_json::from_str(&json).expect("valid JSON");
            support::kubepb::encode(&value)
        }
    }
}

/// Random creates, updates and deletes on a fixed set of keys; tracks which exist.
struct Writer {
    rng: Rng,
    format: Format,
    exists: BTreeMap<String, bool>,
    /// Every `i` written to each key, so a value read from etcd can be told by its bytes.
    written: BTreeMap<String, Vec<usize>>,
    ops: usize,
}

impl Writer {
    fn new(seed: u64, format: Format) -> Writer {
        Writer {
            rng: Rng(seed),
            format,
            exists: BTreeMap::new(),
            written: BTreeMap::new(),
            ops: 0,
        }
    }

    /// Performs `n` operations; each retries (bounded) while etcd is unreachable.
    async fn run(&mut self, client: &mut Client, n: usize) {
        for _ in 0..n {
            let ns = format!("churn-{}", self.rng.below(NAMESPACES));
            let name = format!("cm-{}", self.rng.below(NAMES));
            let key = format!("{PREFIX}{ns}/{name}");
            let present = self.exists.get(&key).copied().unwrap_or(false);
            let delete = present && self.rng.below(10) < 3;
            self.ops += 1;
            if !delete {
                self.written.entry(key.clone()).or_default().push(self.ops);
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let res = if delete {
                    client.delete(key.clone(), None).await.map(|_| ())
                } else {
                    client
                        .put(
                            key.clone(),
                            configmap(&ns, &name, self.ops, self.format),
                            None,
                        )
                        .await
                        .map(|_| ())
                };
                match res {
                    Ok(()) => break,
                    Err(e) if Instant::now() < deadline => {
                        let _ = e;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => panic!("etcd write failed for 20 s: {e}"),
                }
            }
            self.exists.insert(key, !delete);
        }
    }
}

async fn current_revision(client: &mut Client) -> i64 {
    let r = client.get("x", None).await.expect("etcd get");
    r.header().expect("header").revision()
}

impl Writer {
    /// Which write `value` (as etcd holds it under `key`) is: the `i` whose bytes the
    /// writer wrote are exactly these. Told by the writer's own bytes, not by decoding.
    fn which(&self, key: &str, value: &[u8]) -> String {
        let (ns, name) = key.split_once('/').expect("namespace/name");
        self.written
            .get(&format!("{PREFIX}{key}"))
            .and_then(|is| {
                is.iter()
                    .find(|&&i| configmap(ns, name, i, self.format) == value)
            })
            .map_or_else(|| format!("unknown value of {key}"), |i| i.to_string())
    }
}

/// etcd's own history of the prefix in (from, to], as watch events, each object's body
/// told by the bytes etcd holds (a deletion's by the value it deleted).
async fn etcd_history(client: &mut Client, from: i64, to: i64, writer: &Writer) -> Vec<Seen> {
    let opts = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(from + 1);
    let mut stream = client.watch(PREFIX, Some(opts)).await.expect("etcd watch");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.last().is_none_or(|(_, _, rv, _): &Seen| *rv < to) {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, stream.message())
            .await
            .expect("etcd history in time")
            .expect("etcd watch message")
            .expect("etcd watch open");
        for ev in msg.events() {
            let kv = ev.kv().expect("kv");
            let key = kv.key_str().expect("utf8 key");
            let obj = key.strip_prefix(PREFIX).expect("prefix").to_string();
            let (t, body) = match ev.event_type() {
                EventType::Delete => ("DELETED", ev.prev_kv().map(|p| p.value())),
                EventType::Put if kv.create_revision() == kv.mod_revision() => {
                    ("ADDED", Some(kv.value()))
                }
                EventType::Put => ("MODIFIED", Some(kv.value())),
            };
            let i = body.map_or_else(|| "no value".into(), |b| writer.which(&obj, b));
            out.push((t.to_string(), obj, kv.mod_revision(), i));
        }
        if msg.events().is_empty() && out.is_empty() && to <= from {
            break;
        }
    }
    out.retain(|(_, _, rv, _)| *rv <= to);
    out
}

fn seen(ev: &Value) -> Seen {
    let t = ev["type"].as_str().unwrap_or_default().to_string();
    let m = &ev["object"]["metadata"];
    let key = format!(
        "{}/{}",
        m["namespace"].as_str().unwrap_or_default(),
        m["name"].as_str().unwrap_or_default()
    );
    let rv = m["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1);
    let i = ev["object"]["data"]["i"]
        .as_str()
        .unwrap_or("no data.i")
        .to_string();
    (t, key, rv, i)
}

/// A watcher under test: its filter and its stream.
struct Watcher {
    namespace: Option<String>,
    name: Option<String>,
    stream: WatchStream,
}

impl Watcher {
    async fn open(base: &str, namespace: Option<&str>, name: Option<&str>, from: i64) -> Watcher {
        let path = match namespace {
            Some(ns) => format!("{base}/api/v1/namespaces/{ns}/configmaps"),
            None => format!("{base}/api/v1/configmaps"),
        };
        let by_name = name
            .map(|n| format!("&fieldSelector=metadata.name%3D{n}"))
            .unwrap_or_default();
        let url = format!("{path}?watch=true&resourceVersion={from}{by_name}");
        let stream = http::watch(&url, &[]).await;
        assert_eq!(stream.status(), 200);
        Watcher {
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            stream,
        }
    }

    fn wants(&self, s: &Seen) -> bool {
        let in_ns = self
            .namespace
            .as_deref()
            .is_none_or(|ns| s.1.starts_with(&format!("{ns}/")));
        let named = self
            .name
            .as_deref()
            .is_none_or(|n| s.1.ends_with(&format!("/{n}")));
        in_ns && named
    }

    /// Reads until `n` events arrived (or an ERROR ended the stream), then checks that
    /// nothing more follows for a short while.
    async fn collect(&mut self, n: usize) -> (Vec<Seen>, Option<Value>) {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.len() < n && Instant::now() < deadline {
            match self.stream.next_event(Duration::from_secs(10)).await {
                Some(ev) if ev["type"] == "ERROR" => return (got, Some(ev)),
                Some(ev) => got.push(seen(&ev)),
                None => break,
            }
        }
        if let Some(extra) = self.stream.next_event(Duration::from_millis(300)).await {
            if extra["type"] == "ERROR" {
                return (got, Some(extra));
            }
            got.push(seen(&extra));
        }
        (got, None)
    }
}

async fn list_rv(base: &str) -> i64 {
    let r = http::get(&format!("{base}/api/v1/configmaps"), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .parse()
        .expect("numeric rv")
}

async fn open_watchers(base: &str, from: i64) -> Vec<Watcher> {
    let mut watchers = Vec::new();
    for i in 0..12 {
        let ns = (i % 3 != 0).then(|| format!("churn-{}", i % NAMESPACES));
        watchers.push(Watcher::open(base, ns.as_deref(), None, from).await);
    }
    // Found by name through the wake index, in all namespaces and in one.
    watchers.push(Watcher::open(base, None, Some("cm-3"), from).await);
    watchers.push(Watcher::open(base, Some("churn-1"), Some("cm-7"), from).await);
    watchers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_see_exactly_etcds_history_across_an_etcd_restart() {
    history_across_an_etcd_restart(Format::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_see_exactly_etcds_history_across_an_etcd_restart_protobuf() {
    history_across_an_etcd_restart(Format::Protobuf).await;
}

async fn history_across_an_etcd_restart(format: Format) {
    let mut etcd = Etcd::start();
    let mut client = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0001, format);
    writer.run(&mut client, 100).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let start = list_rv(&base).await;
    let mut watchers = open_watchers(&base, start).await;

    writer.run(&mut client, 1200).await;
    etcd.kill9();
    etcd.restart();
    let mut client = etcd.client().await;
    writer.run(&mut client, 1200).await;
    let end = current_revision(&mut client).await;

    let history = etcd_history(&mut client, start, end, &writer).await;
    assert!(
        history.len() >= 2400,
        "etcd history has {} events",
        history.len()
    );
    for (i, w) in watchers.iter_mut().enumerate() {
        let expected: Vec<Seen> = history.iter().filter(|s| w.wants(s)).cloned().collect();
        let (got, error) = w.collect(expected.len()).await;
        assert!(error.is_none(), "watcher {i} got an error: {error:?}");
        assert_eq!(
            got.len(),
            expected.len(),
            "watcher {i} ({:?}) event count",
            w.namespace
        );
        assert_eq!(
            got, expected,
            "watcher {i} ({:?}) saw a different history",
            w.namespace
        );
    }
    // A list at the final revision equals etcd's range at that revision.
    assert_list_equals_etcd(&base, &mut client).await;
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    let reconnects = metrics
        .lines()
        .find_map(|l| l.strip_prefix("watchd_etcd_reconnects_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(
        reconnects >= 1.0,
        "watchd never lost etcd, so the restart was not exercised"
    );
}

fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(name))
        .filter_map(|v| v.trim().rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Two tiers, etcd → watchd → watchd: every watcher of the second tier sees exactly
/// etcd's history, across a kill -9 and restart of the middle tier while the writer goes
/// on (the restarted tier replays etcd's history, so the second tier resumes its watches
/// instead of re-listing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_tier_watchers_see_exactly_etcds_history_across_a_restart_of_the_middle_tier() {
    let etcd = Etcd::start();
    let mut client = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0003, Format::Protobuf);
    writer.run(&mut client, 100).await;
    let mut tier1 = Watchd::start(&etcd.client_url(), &[]);
    let tier2 = Watchd::start_upstream(&tier1.base_url(), &[]);
    let base = tier2.base_url();
    let start = list_rv(&base).await;
    let mut watchers = open_watchers(&base, start).await;

    writer.run(&mut client, 800).await;
    tier1.kill9();
    writer.run(&mut client, 300).await;
    tier1.restart();
    writer.run(&mut client, 800).await;
    let end = current_revision(&mut client).await;

    let history = etcd_history(&mut client, start, end, &writer).await;
    assert!(
        history.len() >= 1900,
        "etcd history has {} events",
        history.len()
    );
    for (i, w) in watchers.iter_mut().enumerate() {
        let expected: Vec<Seen> = history.iter().filter(|s| w.wants(s)).cloned().collect();
        let (got, error) = w.collect(expected.len()).await;
        assert!(
            error.is_none(),
            "tier-2 watcher {i} got an error: {error:?}"
        );
        assert_eq!(
            got, expected,
            "tier-2 watcher {i} ({:?}) saw a different history",
            w.namespace
        );
    }
    assert_list_equals_etcd(&base, &mut client).await;
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert!(
        counter(
            &metrics,
            "watchd_upstream_reconnects_total{resource=\"configmaps\"}"
        ) >= 1.0,
        "tier 2 never lost tier 1, so the restart was not exercised:\n{}",
        tier2.log()
    );
    assert_eq!(
        counter(&metrics, "watchd_upstream_relists_total"),
        0.0,
        "tier 2 resumed rather than re-listed"
    );
}

async fn assert_list_equals_etcd(base: &str, client: &mut Client) {
    let r = http::get(&format!("{base}/api/v1/configmaps"), &[]).await;
    let v = r.json();
    let rv: i64 = v["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .parse()
        .expect("rv");
    let items: Vec<(String, i64)> = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            let s = seen(&serde_json::json!({"type": "", "object": o}));
            (s.1, s.2)
        })
        .collect();
    let opts = etcd_client::GetOptions::new()
        .with_prefix()
        .with_revision(rv);
    let resp = client.get(PREFIX, Some(opts)).await.expect("etcd range");
    let expected: Vec<(String, i64)> = resp
        .kvs()
        .iter()
        .map(|kv| {
            let k = kv
                .key_str()
                .expect("key")
                .strip_prefix(PREFIX)
                .expect("prefix");
            (k.to_string(), kv.mod_revision())
        })
        .collect();
    assert_eq!(
        items, expected,
        "list at {rv} differs from etcd's range at {rv}"
    );
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill {sig} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_past_the_resume_revision_ends_watchers_with_410_and_relists() {
    compaction_past_the_resume_revision(Format::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_past_the_resume_revision_ends_watchers_with_410_and_relists_protobuf() {
    compaction_past_the_resume_revision(Format::Protobuf).await;
}

async fn compaction_past_the_resume_revision(format: Format) {
    let mut etcd = Etcd::start();
    let mut client = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0002, format);
    writer.run(&mut client, 100).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let start = list_rv(&base).await;
    let mut watchers = open_watchers(&base, start).await;
    writer.run(&mut client, 500).await;
    let before_gap = current_revision(&mut client).await;
    let history = etcd_history(&mut client, start, before_gap, &writer).await;
    for (i, w) in watchers.iter_mut().enumerate() {
        let expected: Vec<Seen> = history.iter().filter(|s| w.wants(s)).cloned().collect();
        let (got, error) = w.collect(expected.len()).await;
        assert!(error.is_none(), "watcher {i}: {error:?}");
        assert_eq!(got, expected, "watcher {i} before the gap");
    }

    // Freeze watchd, break its etcd connection, and compact past where it will resume.
    signal(watchd.pid(), "-STOP");
    etcd.kill9();
    etcd.restart();
    let mut client = etcd.client().await;
    writer.run(&mut client, 300).await;
    let compact_at = current_revision(&mut client).await;
    client.compact(compact_at, None).await.expect("compact");
    signal(watchd.pid(), "-CONT");

    // Old-epoch watchers end the Kubernetes way: one ERROR with a 410 Status.
    for (i, w) in watchers.iter_mut().enumerate() {
        let (extra, error) = w.collect(usize::MAX).await;
        let error = error.unwrap_or_else(|| {
            panic!("watcher {i} was not ended; saw {} more events", extra.len())
        });
        assert_eq!(error["object"]["code"], 410, "watcher {i}: {error}");
        assert_eq!(error["object"]["reason"], "Expired");
        assert!(
            extra.is_empty(),
            "watcher {i} saw events across the gap: {extra:?}"
        );
    }

    // Clients re-list (watchd re-listed at a revision at or after the compaction) and
    // watch again from the list's revision: again exactly etcd's history.
    let relist = list_rv(&base).await;
    assert!(
        relist >= compact_at,
        "re-list at {relist} before compaction at {compact_at}"
    );
    assert_list_equals_etcd(&base, &mut client).await;
    let mut watchers = open_watchers(&base, relist).await;
    writer.run(&mut client, 400).await;
    let end = current_revision(&mut client).await;
    let history = etcd_history(&mut client, relist, end, &writer).await;
    for (i, w) in watchers.iter_mut().enumerate() {
        let expected: Vec<Seen> = history.iter().filter(|s| w.wants(s)).cloned().collect();
        let (got, error) = w.collect(expected.len()).await;
        assert!(error.is_none(), "watcher {i} after re-list: {error:?}");
        assert_eq!(got, expected, "watcher {i} after re-list");
    }
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(
        counter(&metrics, "watchd_relists_total "),
        1.0,
        "one re-list:\n{metrics}"
    );
}

/// A watch that catches up on many large revisions (the history replayed at start) comes
/// from etcd in fragments, which watchd asks for so that no message passes etcd's
/// `--max-request-bytes`: a fragment may end inside a revision, and watchd applies each
/// revision whole. A watcher from before the writes sees exactly etcd's history, each
/// transaction's eight events at its revision, and the list is etcd's state. Once caught
/// up, watchd opens its etcd watch again (the large responses grew its receive buffer),
/// and a write after that reaches the watcher too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_sent_in_fragments_is_applied_a_whole_revision_at_a_time() {
    use etcd_client::{Txn, TxnOp};
    let etcd = Etcd::start_with(&["--max-request-bytes=393216"]);
    let mut client = etcd.client().await;
    let first = current_revision(&mut client).await;
    let filler = "x".repeat(6000);
    let mut want = Vec::new();
    // 30 transactions of 8 ConfigMaps of 6 KB: 48 KB each (under the 384 KiB limit on a
    // request), 1.4 MB of history, which etcd must send in fragments of up to 384 KiB,
    // past watchd's 256 KiB mark of a grown receive buffer.
    for t in 0..30 {
        let ops: Vec<TxnOp> = (0..8)
            .map(|k| {
                let name = format!("cm-{t:02}-{k}");
                let value = serde_json::json!({
                    "kind": "ConfigMap", "apiVersion": "v1",
                    "metadata": {"name": name, "namespace": "frag"},
                    "data": {"i": format!("{t}-{k}"), "filler": filler},
                });
                TxnOp::put(
                    format!("{PREFIX}frag/{name}"),
                    serde_json::to_vec(&value).expect("JSON"),
                    None,
                )
            })
            .collect();
        let resp = client
            .txn(Txn::new().and_then(ops))
            .await
            .expect("etcd txn");
        let rv = resp.header().expect("header").revision();
        want.extend((0..8).map(|k| {
            (
                "ADDED".to_string(),
                format!("frag/cm-{t:02}-{k}"),
                rv,
                format!("{t}-{k}"),
            )
        }));
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    let base = w.base_url();
    let url =
        format!("{base}/api/v1/namespaces/frag/configmaps?watch=true&resourceVersion={first}");
    let mut stream = http::watch(&url, &[]).await;
    assert_eq!(stream.status(), 200);
    let got: Vec<Seen> = stream
        .next_events(want.len(), Duration::from_secs(30))
        .await
        .iter()
        .map(seen)
        .collect();
    assert_eq!(got, want);
    let list = http::get(&format!("{base}/api/v1/namespaces/frag/configmaps"), &[]).await;
    assert_eq!(list.status, 200);
    let list = list.json();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(want.len()));
    assert_eq!(
        list["metadata"]["resourceVersion"],
        want.last().map(|s| s.2.to_string()).expect("writes")
    );
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert!(
        counter(&metrics, "watchd_etcd_watch_fragments_total") > 0.0,
        "etcd sent no fragments: the test proves nothing\n{metrics}"
    );
    // Opened again right after the last revision was applied: wait for it, bounded.
    let mut metrics = metrics;
    for _ in 0..100 {
        if counter(&metrics, "watchd_etcd_watch_reopens_total") > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    }
    assert_eq!(
        counter(&metrics, "watchd_etcd_watch_reopens_total"),
        1.0,
        "caught up once after large responses\n{metrics}"
    );
    // The reopened watch goes on from the next revision: nothing between is lost.
    let value = serde_json::json!({
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "after", "namespace": "frag"},
        "data": {"i": "after"},
    });
    let rv = client
        .put(
            format!("{PREFIX}frag/after"),
            serde_json::to_vec(&value).expect("JSON"),
            None,
        )
        .await
        .expect("etcd put")
        .header()
        .expect("header")
        .revision();
    let got: Vec<Seen> = stream
        .next_events(1, Duration::from_secs(10))
        .await
        .iter()
        .map(seen)
        .collect();
    let after = (
        "ADDED".to_string(),
        "frag/after".to_string(),
        rv,
        "after".to_string(),
    );
    assert_eq!(got, [after]);
}

/// Reads what each watcher's replica sent until its stream ended (no ERROR among it),
/// then opens the watcher again on `to` from the last revision it saw (`start` if none),
/// as a reflector resumes: the events each got before the move.
async fn move_watchers(watchers: &mut [Watcher], to: &str, start: i64) -> Vec<Vec<Seen>> {
    let mut before = Vec::new();
    for w in watchers {
        let mut got = Vec::new();
        while let Some(ev) = w.stream.next_event(Duration::from_secs(10)).await {
            assert_ne!(ev["type"], "ERROR", "the first replica sent {ev}");
            got.push(seen(&ev));
        }
        assert!(w.stream.is_ended(), "the first replica's stream ended");
        let from = got.last().map_or(start, |s| s.2);
        let (ns, name) = (w.namespace.clone(), w.name.clone());
        *w = Watcher::open(to, ns.as_deref(), name.as_deref(), from).await;
        before.push(got);
    }
    before
}

/// Checks that what each watcher got before its move (`before`) and after it equals
/// `history` filtered as it asked; returns how many got events on both sides.
async fn assert_moved_histories(
    watchers: &mut [Watcher],
    before: Vec<Vec<Seen>>,
    history: &[Seen],
) -> usize {
    let mut from_both = 0;
    for (i, (w, got)) in watchers.iter_mut().zip(before).enumerate() {
        let expected: Vec<Seen> = history.iter().filter(|s| w.wants(s)).cloned().collect();
        assert!(
            got.len() <= expected.len(),
            "watcher {i} got more than etcd has"
        );
        let (after, error) = w.collect(expected.len() - got.len()).await;
        assert!(
            error.is_none(),
            "watcher {i} on the second replica: {error:?}"
        );
        if !got.is_empty() && !after.is_empty() {
            from_both += 1;
        }
        let all: Vec<Seen> = got.into_iter().chain(after).collect();
        assert_eq!(
            all, expected,
            "watcher {i} ({:?}) across the move",
            w.namespace
        );
    }
    from_both
}

/// Two replicas behind one etcd: every watcher of one that is killed (SIGKILL) while the
/// writer goes on watches again on the other from the last resourceVersion it received
/// (as client-go's reflector does, without listing), and what it received from both
/// equals etcd's history. The second replica starts after the writes began: it replays
/// etcd's history at start, so it resumes watches from revisions before it existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_fail_over_to_a_second_replica_with_their_resource_version() {
    let etcd = Etcd::start();
    let mut client = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0005, Format::Protobuf);
    writer.run(&mut client, 100).await;
    let mut first = Watchd::start(&etcd.client_url(), &[]);
    let start = list_rv(&first.base_url()).await;
    let mut watchers = open_watchers(&first.base_url(), start).await;
    // One whose object never changes: it resumes from the list's revision, from before
    // the second replica existed.
    watchers.push(Watcher::open(&first.base_url(), Some("churn-0"), Some("quiet"), start).await);

    writer.run(&mut client, 400).await;
    let second_born = current_revision(&mut client).await;
    let second = Watchd::start(&etcd.client_url(), &[]);
    writer.run(&mut client, 400).await;
    first.kill9();

    // Each watcher reads what the first replica sent before it died, then watches the
    // second from the last revision it saw.
    let before = move_watchers(&mut watchers, &second.base_url(), start).await;
    let from_before_second = before
        .iter()
        .filter(|got| got.last().map_or(start, |s| s.2) < second_born)
        .count();
    writer.run(&mut client, 400).await;
    let end = current_revision(&mut client).await;

    let history = etcd_history(&mut client, start, end, &writer).await;
    assert!(
        history.len() >= 1200,
        "etcd history has {} events",
        history.len()
    );
    let from_both = assert_moved_histories(&mut watchers, before, &history).await;
    assert!(
        from_both >= 10,
        "only {from_both} watchers got events from both replicas"
    );
    assert!(
        from_before_second >= 1,
        "no watcher resumed from a revision before the second replica started"
    );
    assert_list_equals_etcd(&second.base_url(), &mut client).await;
}

/// Graceful shutdown under churn with a second replica: SIGTERM to the first
/// (`--shutdown-delay-duration`, then `--shutdown-watch-termination-grace-period`). Reads
/// are answered 200 during the delay, its watches end cleanly (no ERROR) over the grace
/// period, each watcher watches the second replica from its last resourceVersion, and
/// what every watcher received from both equals etcd's history: nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_shutting_down_hands_its_watchers_to_another_without_loss() {
    let etcd = Etcd::start();
    let mut client = etcd.client().await;
    let mut writer = Writer::new(0x5eed_0007, Format::Json);
    writer.run(&mut client, 100).await;
    let mut first = Watchd::start(
        &etcd.client_url(),
        &[
            "--shutdown-delay-duration=1s",
            "--shutdown-watch-termination-grace-period=2s",
        ],
    );
    let second = Watchd::start(&etcd.client_url(), &[]);
    let start = list_rv(&first.base_url()).await;
    let mut watchers = open_watchers(&first.base_url(), start).await;

    writer.run(&mut client, 300).await;
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &first.pid().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    // Reads go on during the delay, answered.
    let list = http::get(&format!("{}/api/v1/configmaps", first.base_url()), &[]).await;
    assert_eq!(list.status, 200, "a list during the shutdown delay");
    writer.run(&mut client, 300).await;

    let before = move_watchers(&mut watchers, &second.base_url(), start).await;
    let exited = tokio::task::block_in_place(|| first.wait_exit(Duration::from_secs(30)));
    assert_eq!(exited.and_then(|s| s.code()), Some(0), "a clean exit");
    writer.run(&mut client, 300).await;
    let end = current_revision(&mut client).await;

    let history = etcd_history(&mut client, start, end, &writer).await;
    assert_moved_histories(&mut watchers, before, &history).await;
}
