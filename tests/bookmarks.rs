//! Watch bookmarks against a real etcd: sent periodically only when allowed, with
//! kind/apiVersion, and never with a resourceVersion ahead of an event not yet written to
//! that watcher — checked while writes race the bookmarks.

mod support;

use std::time::{Duration, Instant};

use support::http;
use support::kube::{assert_stored_in_current_format, put_object_text, Storage};
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf.
storage_tests! {
    multi_thread:
    bookmarks_arrive_periodically_and_never_run_ahead_of_unsent_events,
}

fn configmap(ns: &str, name: &str, i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}"}},"data":{{"i":"{i}"}}}}"#
    )
}

fn rv(ev: &serde_json::Value) -> i64 {
    ev["object"]["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1)
}

async fn bookmarks_arrive_periodically_and_never_run_ahead_of_unsent_events() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(
        &mut kv,
        "/registry/configmaps/a/seed",
        &configmap("a", "seed", 0),
    )
    .await;
    let w = Watchd::start(&etcd.client_url(), &["--bookmark-interval=200ms"]);
    let list = http::get(
        &format!("{}/api/v1/namespaces/a/configmaps", w.base_url()),
        &[],
    )
    .await;
    assert_eq!(list.status, 200, "{}", list.text());
    let list = list.json();
    let start: i64 = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .parse()
        .expect("rv");
    let url = format!(
        "{}/api/v1/namespaces/a/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion={start}",
        w.base_url()
    );
    let mut stream = http::watch(&url, &[]).await;
    assert_eq!(
        stream.status(),
        200,
        "an error reply must not pass as a quiet stream"
    );
    // A spawned task does not inherit the scenario's storage format: it is passed on.
    let writer = tokio::spawn(Storage::current().scope(async move {
        // Writes in the watched namespace and in another one, racing the bookmarks. The
        // event each write in namespace a must produce, in order: (type, name, data.i,
        // resourceVersion).
        let mut expected = Vec::new();
        for i in 0..150 {
            let ns = if i % 3 == 0 { "b" } else { "a" };
            let name = format!("c{}", i % 7);
            let rev = put_object_text(
                &mut kv,
                &format!("/registry/configmaps/{ns}/{name}"),
                &configmap(ns, &name, i),
            )
            .await;
            if ns == "a" {
                let first = !expected.iter().any(|(_, n, _, _)| *n == name);
                let kind = if first { "ADDED" } else { "MODIFIED" };
                expected.push((kind.to_string(), name, i.to_string(), rev));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = kv.get("x", None).await.expect("get");
        (expected, r.header().expect("header").revision())
    }));
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !writer.is_finished() && Instant::now() < deadline {
        if let Some(ev) = stream.next_event(Duration::from_secs(2)).await {
            seen.push(ev);
        }
    }
    let (expected, last_write) = writer.await.expect("writer");
    assert_stored_in_current_format(&mut etcd.client().await, "/registry/configmaps/a/c1").await;
    // Drain until a bookmark covers the last write.
    while Instant::now() < deadline {
        match stream.next_event(Duration::from_secs(2)).await {
            Some(ev) => {
                let done = ev["type"] == "BOOKMARK" && rv(&ev) >= last_write;
                seen.push(ev);
                if done {
                    break;
                }
            }
            None => break,
        }
    }
    let bookmarks: Vec<usize> = (0..seen.len())
        .filter(|&i| seen[i]["type"] == "BOOKMARK")
        .collect();
    assert!(
        bookmarks.len() >= 5,
        "expected periodic bookmarks, got {} in {} events",
        bookmarks.len(),
        seen.len()
    );
    for &i in &bookmarks {
        let b = &seen[i];
        assert_eq!(b["object"]["kind"], "ConfigMap");
        assert_eq!(b["object"]["apiVersion"], "v1");
        let brv = rv(b);
        assert!(brv >= start);
        // Every event after this bookmark is newer than it: nothing it covered was unsent.
        for later in &seen[i + 1..] {
            if later["type"] != "BOOKMARK" {
                assert!(rv(later) > brv, "event {later} after bookmark at {brv}");
            }
        }
    }
    // Every write in namespace a arrives exactly once, in the order written, as the
    // event it is: a count would pass with one event lost and another sent twice.
    let events: Vec<(String, String, String, i64)> = seen
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&e["type"]),
                text(&e["object"]["metadata"]["name"]),
                text(&e["object"]["data"]["i"]),
                rv(e),
            )
        })
        .collect();
    assert_eq!(expected.len(), 100);
    assert_eq!(
        events, expected,
        "every write in namespace a arrives exactly once, in order"
    );
    assert!(rv(&seen[*bookmarks.last().expect("bookmark")]) >= last_write);
}

// One storage format: it writes no objects.
#[tokio::test]
async fn no_bookmarks_unless_allowed_even_with_a_short_interval() {
    let etcd = Etcd::start();
    let w = Watchd::start(&etcd.client_url(), &["--bookmark-interval=100ms"]);
    let url = format!(
        "{}/api/v1/configmaps?watch=1&resourceVersion=0&timeoutSeconds=2",
        w.base_url()
    );
    let mut stream = http::watch(&url, &[]).await;
    assert_eq!(
        stream.status(),
        200,
        "an error reply must not pass as a quiet stream"
    );
    let mut events = Vec::new();
    while let Some(ev) = stream.next_event(Duration::from_secs(4)).await {
        events.push(ev);
    }
    assert!(stream.is_ended(), "timeoutSeconds ends the stream");
    assert!(events.iter().all(|e| e["type"] != "BOOKMARK"), "{events:?}");
}
