//! Sharded list and watch (`shardSelector`, KEP-5866; issue #24 item 4): an object is in
//! a `shardRange` when the FNV-1a 64 hash of its uid (or namespace) lies in the range.
//! Which shard each object is in is computed here by Python's own FNV-1a (an
//! implementation independent of watchd's), and lists, watches and gRPC must agree with
//! it: the shards of a split partition the objects, lists echo the selector in
//! `metadata.shardInfo`, and a bad selector is a 400 with kube-apiserver's words.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::http;
use support::kube::{get_json, item_names, next_event, put_pod, rv};
use support::{storage_tests, Etcd, Watchd};
use watchd::api::grpc::pb::watchd_client::WatchdClient;
use watchd::api::grpc::pb::{Collection, EventType, ListRequest, WatchRequest};

storage_tests! {
    multi_thread:
    lists_of_a_split_partition_the_objects_by_their_uid_hash,
    a_sharded_watch_gets_only_its_shards_events,
    grpc_lists_and_watches_take_a_shard_selector,
}

/// FNV-1a 64 of each string, computed by Python (not by watchd's code).
fn python_fnv1a64(values: &[String]) -> BTreeMap<String, u64> {
    const PROGRAM: &str = r#"
import json, sys
out = {}
for v in json.load(sys.stdin):
    h = 0xcbf29ce484222325
    for b in v.encode():
        h ^= b
        h = (h * 0x100000001b3) % (1 << 64)
    out[v] = h
print(json.dumps({k: str(h) for k, h in out.items()}))
"#;
    let mut child = Command::new("python3")
        .args(["-c", PROGRAM])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().expect("stdin");
        stdin
            .write_all(serde_json::to_string(values).expect("json").as_bytes())
            .expect("write to python3");
    }
    let out = child.wait_with_output().expect("python3 ends");
    assert!(out.status.success(), "python3: {out:?}");
    let map: BTreeMap<String, String> = serde_json::from_slice(&out.stdout).expect("python3 JSON");
    map.into_iter()
        .map(|(k, v)| (k, v.parse().expect("a u64")))
        .collect()
}

/// `n` equal ranges of the hash space, as a sharded informer's selectors.
fn split(n: u128, field: &str) -> Vec<(u64, u128, String)> {
    let step = (1u128 << 64) / n;
    (0..n)
        .map(|i| {
            let (start, end) = (i * step, if i + 1 == n { 1 << 64 } else { (i + 1) * step });
            let selector = format!("shardRange({field}, '0x{start:016x}', '0x{end:016x}')");
            (start as u64, end, selector)
        })
        .collect()
}

fn query(selector: &str) -> String {
    let mut out = String::new();
    for b in selector.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The pods, by name: 40 across four namespaces.
async fn write_pods(kv: &mut etcd_client::Client) -> Vec<(String, String)> {
    let mut pods = Vec::new();
    for i in 0..40 {
        let ns = format!("ns-{}", i % 4);
        let name = format!("pod-{i}");
        put_pod(kv, &ns, &name, &[("app", "web")]).await;
        pods.push((ns, name));
    }
    pods
}

fn uid(ns: &str, name: &str) -> String {
    // support::kube::pod's uid.
    format!("uid-{ns}-{name}")
}

async fn lists_of_a_split_partition_the_objects_by_their_uid_hash() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let pods = write_pods(&mut kv).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let uids: Vec<String> = pods.iter().map(|(ns, n)| uid(ns, n)).collect();
    let hashes = python_fnv1a64(&uids);

    let mut seen = BTreeSet::new();
    for (start, end, selector) in split(4, "object.metadata.uid") {
        let list = get_json(&format!(
            "{base}/api/v1/pods?shardSelector={}",
            query(&selector)
        ))
        .await;
        assert_eq!(
            list["metadata"]["shardInfo"]["selector"],
            selector.as_str(),
            "{list}"
        );
        let want: BTreeSet<String> = pods
            .iter()
            .filter(|(ns, n)| {
                let h = u128::from(hashes[&uid(ns, n)]);
                u128::from(start) <= h && h < end
            })
            .map(|(_, n)| n.clone())
            .collect();
        let got: BTreeSet<String> = item_names(&list).into_iter().collect();
        assert_eq!(got, want, "{selector}");
        for name in got {
            assert!(seen.insert(name), "a pod in two shards");
        }
    }
    assert_eq!(seen.len(), pods.len(), "the shards cover every pod");

    // Two ranges with ||, written loosely, echoed normalized; by namespace too.
    let halves = split(2, "object.metadata.namespace");
    let both = format!(
        "  shardRange( object.metadata.namespace,\"0x{:016x}\", '0x{:016x}' ) ||{}",
        halves[0].0, halves[0].1, halves[1].2
    );
    let list = get_json(&format!(
        "{base}/api/v1/pods?shardSelector={}",
        query(&both)
    ))
    .await;
    assert_eq!(
        list["metadata"]["shardInfo"]["selector"],
        format!("{} || {}", halves[0].2, halves[1].2).as_str()
    );
    assert_eq!(item_names(&list).len(), pods.len());
    let namespaces: Vec<String> = (0..4).map(|i| format!("ns-{i}")).collect();
    let ns_hashes = python_fnv1a64(&namespaces);
    let (start, end, selector) = &halves[1];
    let list = get_json(&format!(
        "{base}/api/v1/pods?shardSelector={}",
        query(selector)
    ))
    .await;
    let want: BTreeSet<String> = pods
        .iter()
        .filter(|(ns, _)| {
            let h = u128::from(ns_hashes[ns]);
            u128::from(*start) <= h && h < *end
        })
        .map(|(_, n)| n.clone())
        .collect();
    assert_eq!(item_names(&list).into_iter().collect::<BTreeSet<_>>(), want);

    // With other selectors: both apply. Paged: no remainingItemCount, the selector
    // echoed on every page, the pages together are the shard.
    let (_, _, first) = &split(2, "object.metadata.uid")[0];
    let full = get_json(&format!(
        "{base}/api/v1/pods?shardSelector={}",
        query(first)
    ))
    .await;
    let none = get_json(&format!(
        "{base}/api/v1/pods?labelSelector=app%3Ddb&shardSelector={}",
        query(first)
    ))
    .await;
    assert_eq!(item_names(&none).len(), 0);
    let mut names = Vec::new();
    let mut next = String::new();
    for _ in 0..50 {
        let page = get_json(&format!(
            "{base}/api/v1/pods?limit=3&shardSelector={}{next}",
            query(first)
        ))
        .await;
        assert!(page["metadata"]["remainingItemCount"].is_null(), "{page}");
        assert_eq!(page["metadata"]["shardInfo"]["selector"], first.as_str());
        names.extend(item_names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(token) if !token.is_empty() => next = format!("&continue={}", query(token)),
            _ => break,
        }
    }
    assert_eq!(names, item_names(&full));

    // As protobuf: ListMeta's field 5, ShardInfo, whose field 1 is the selector (wire
    // bytes: tag 5 length-delimited, its length, tag 1 length-delimited, its length).
    let resp = http::get(
        &format!("{base}/api/v1/pods?shardSelector={}", query(first)),
        &[("accept", "application/vnd.kubernetes.protobuf")],
    )
    .await;
    assert_eq!(resp.status, 200);
    let n = first.len();
    assert!(n < 126, "one-byte lengths");
    let mut want = vec![0x2a, (n + 2) as u8, 0x0a, n as u8];
    want.extend_from_slice(first.as_bytes());
    assert!(
        resp.body.windows(want.len()).any(|w| w == want.as_slice()),
        "ListMeta.shardInfo in the protobuf list"
    );

    // No selector: no shardInfo. An empty one is none.
    let plain = get_json(&format!("{base}/api/v1/pods?shardSelector=")).await;
    assert!(plain["metadata"]["shardInfo"].is_null(), "{plain}");
    assert_eq!(item_names(&plain).len(), pods.len());

    // Refused as kube-apiserver words it.
    for (bad, words) in [
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "invalid shard selector: must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
        ),
        (
            "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
            "invalid shard selector: unsupported field path \"object.metadata.name\"",
        ),
    ] {
        for path in ["/api/v1/pods?", "/api/v1/pods?watch=1&"] {
            let resp = http::get(&format!("{base}{path}shardSelector={}", query(bad)), &[]).await;
            assert_eq!(resp.status, 400, "{}", resp.text());
            let status = resp.json();
            assert_eq!(status["reason"], "BadRequest");
            let message = status["message"].as_str().unwrap_or_default();
            assert!(message.starts_with(words), "{message}");
        }
    }
}

async fn a_sharded_watch_gets_only_its_shards_events() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let pods = write_pods(&mut kv).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let shards = split(2, "object.metadata.uid");
    let list = get_json(&format!("{base}/api/v1/pods")).await;
    let from = rv(&list);
    // Each shard: a watch from the list's revision, and a streaming list.
    let mut watches = Vec::new();
    let mut streams = Vec::new();
    for (_, _, selector) in &shards {
        watches.push(
            support::kube::open_watch(&format!(
                "{base}/api/v1/pods?watch=1&resourceVersion={from}&shardSelector={}",
                query(selector)
            ))
            .await,
        );
        streams.push(
            support::kube::open_watch(&format!(
                "{base}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector={}",
                query(selector)
            ))
            .await,
        );
    }
    let mut new = Vec::new();
    for i in 0..12 {
        let (ns, name) = (format!("ns-{}", i % 3), format!("new-{i}"));
        put_pod(&mut kv, &ns, &name, &[]).await;
        new.push((ns, name));
    }
    let all: Vec<String> = pods.iter().chain(&new).map(|(ns, n)| uid(ns, n)).collect();
    let hashes = python_fnv1a64(&all);
    let in_shard = |s: usize, ns: &str, n: &str| {
        let h = u128::from(hashes[&uid(ns, n)]);
        u128::from(shards[s].0) <= h && h < shards[s].1
    };
    for (s, watch) in watches.iter_mut().enumerate() {
        let want: Vec<String> = new
            .iter()
            .filter(|(ns, n)| in_shard(s, ns, n))
            .map(|(_, n)| n.clone())
            .collect();
        let mut got = Vec::new();
        for _ in 0..want.len() {
            let ev = next_event(watch).await;
            assert_eq!(ev["type"], "ADDED", "{ev}");
            got.push(
                ev["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        assert_eq!(got, want, "shard {s}");
        // Nothing else: the other shard's pods were never sent.
        assert!(
            watch.next_line(Duration::from_millis(300)).await.is_none(),
            "shard {s} got an event of the other"
        );
    }
    for (s, stream) in streams.iter_mut().enumerate() {
        let mut got = BTreeSet::new();
        loop {
            let ev: Value = next_event(stream).await;
            if ev["type"] == "BOOKMARK" {
                let annotations = &ev["object"]["metadata"]["annotations"];
                if annotations["k8s.io/initial-events-end"] == "true" {
                    break;
                }
                continue;
            }
            assert_eq!(ev["type"], "ADDED", "{ev}");
            got.insert(
                ev["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        // The initial events are the shard's pods at the stream's start (some of the new
        // ones may have been written by then): every old one of the shard, none of the
        // other shard's.
        for (ns, n) in &pods {
            assert_eq!(got.contains(n), in_shard(s, ns, n), "{n} in shard {s}");
        }
        for (ns, n) in &new {
            assert!(
                !got.contains(n) || in_shard(s, ns, n),
                "{n} not in shard {s}"
            );
        }
    }
}

async fn grpc_lists_and_watches_take_a_shard_selector() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let pods = write_pods(&mut kv).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let mut client = WatchdClient::connect(watchd.grpc_url())
        .await
        .expect("gRPC connect");
    let uids: Vec<String> = pods.iter().map(|(ns, n)| uid(ns, n)).collect();
    let hashes = python_fnv1a64(&uids);
    let (start, end, selector) = split(2, "object.metadata.uid").remove(1);
    let pods_collection = || {
        Some(Collection {
            version: "v1".into(),
            resource: "pods".into(),
            ..Default::default()
        })
    };
    let list = client
        .list(ListRequest {
            collection: pods_collection(),
            shard_selector: selector.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.shard_selector, selector);
    let got: BTreeSet<String> = list
        .items
        .iter()
        .filter_map(|o| o.metadata.as_ref().map(|m| m.uid.clone()))
        .collect();
    let want: BTreeSet<String> = uids
        .iter()
        .filter(|u| {
            let h = u128::from(hashes[*u]);
            u128::from(start) <= h && h < end
        })
        .cloned()
        .collect();
    assert_eq!(got, want);

    // A watch from the list's revision sees only its shard's new pods.
    let mut stream = client
        .watch(WatchRequest {
            collection: pods_collection(),
            resource_version: list.resource_version.to_string(),
            shard_selector: selector.clone(),
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner();
    let mut new = Vec::new();
    for i in 0..10 {
        let name = format!("new-{i}");
        put_pod(&mut kv, "ns-0", &name, &[]).await;
        new.push(uid("ns-0", &name));
    }
    let new_hashes = python_fnv1a64(&new);
    let want: Vec<String> = new
        .iter()
        .filter(|u| {
            let h = u128::from(new_hashes[*u]);
            u128::from(start) <= h && h < end
        })
        .cloned()
        .collect();
    let mut got = Vec::new();
    while got.len() < want.len() {
        let msg = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an event in time")
            .expect("the stream")
            .expect("a message");
        for ev in msg.events {
            assert_eq!(ev.r#type(), EventType::Added);
            let uid = ev.object.and_then(|o| o.metadata).map(|m| m.uid);
            got.push(uid.unwrap_or_default());
        }
    }
    assert_eq!(got, want);

    // A bad selector: INVALID_ARGUMENT with the same words.
    let err = client
        .list(ListRequest {
            collection: pods_collection(),
            shard_selector: "shardRange(object.metadata.uid, '0x0', '0x1')".into(),
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().starts_with("invalid shard selector"),
        "{err:?}"
    );
}
