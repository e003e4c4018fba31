//! The consistency check (`--consistency-check-interval`, issue #24 item 3): a cache that
//! lost an event is found different from etcd, logged with the resource and the object,
//! counted, and re-listed into a new epoch (its open watches end with 410 and its lists
//! serve etcd's state again); a cache that follows etcd under churn is never found
//! different.
//!
//! The divergence is real: the `watchd` binary tests run has the test hooks
//! (`src/source/test_hooks.rs`), and `WATCHD_TEST_DROP_EVENT` makes its etcd watch drop
//! the first change of a key, as a watch that lost it would.

mod support;

use std::time::{Duration, Instant};

use support::http;
use support::kube::{
    configmap, delete_key, expect_410, get_json, item_names, metric, put_json, rv,
};
use support::{Etcd, Watchd};

const WAIT: Duration = Duration::from_secs(40);

fn key(ns: &str, name: &str) -> String {
    format!("/registry/configmaps/{ns}/{name}")
}

async fn metrics_text(base: &str) -> String {
    http::get(&format!("{base}/metrics"), &[]).await.text()
}

fn checks(text: &str, resource: &str, result: &str) -> f64 {
    let resource = format!("resource=\"{resource}\"");
    let result = format!("result=\"{result}\"");
    metric(
        text,
        "watchd_storage_consistency_checks_total",
        &[&resource, &result],
    )
    .unwrap_or(0.0)
}

/// Polls `/metrics` until `done` holds of it (bounded); returns that text.
async fn wait_metrics(base: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = metrics_text(base).await;
        if done(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not seen in {WAIT:?}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_event_is_found_logged_and_the_resource_re_listed() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_json(
        &mut kv,
        &key("default", "a"),
        &configmap("default", "a", "1"),
    )
    .await;
    let watchd = Watchd::start_with_env(
        &etcd.client_url(),
        &["--consistency-check-interval=300ms"],
        &[("WATCHD_TEST_DROP_EVENT", "/configmaps/default/lost")],
    );
    let base = watchd.base_url();
    let cms = format!("{base}/api/v1/namespaces/default/configmaps");
    // Checked and found equal before anything is lost.
    wait_metrics(&base, "configmaps checked and equal", |t| {
        checks(t, "configmaps", "match") >= 1.0
    })
    .await;
    let list = get_json(&cms).await;
    let mut watch =
        support::kube::open_watch(&format!("{cms}?watch=1&resourceVersion={}", rv(&list))).await;

    // The hook drops this write's event: the cache no longer holds what etcd holds once
    // it applied the next revision.
    let lost = put_json(
        &mut kv,
        &key("default", "lost"),
        &configmap("default", "lost", "1"),
    )
    .await;
    put_json(
        &mut kv,
        &key("default", "b"),
        &configmap("default", "b", "1"),
    )
    .await;
    let text = wait_metrics(&base, "a mismatch of configmaps", |t| {
        checks(t, "configmaps", "mismatch") >= 1.0
    })
    .await;
    assert_eq!(checks(&text, "configmaps", "error"), 0.0, "{text}");
    let log = watchd.log();
    assert!(
        log.contains("test hook: watch event dropped"),
        "the hook dropped the event: {log}"
    );
    let line = log
        .lines()
        .find(|l| l.contains("the cache differs from etcd"))
        .unwrap_or_else(|| panic!("an error line for the mismatch: {log}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("resource=configmaps"), "{line}");
    assert!(
        line.contains(&format!(
            "default/lost (revision {lost}) is in etcd, not in the cache"
        )),
        "{line}"
    );

    // Re-listed into a new epoch: the open watch ends with 410, and lists hold the
    // object at its revision.
    expect_410(&mut watch).await;
    let deadline = Instant::now() + WAIT;
    let list = loop {
        let list = get_json(&cms).await;
        if item_names(&list) == ["a", "b", "lost"] {
            break list;
        }
        assert!(Instant::now() < deadline, "re-listed: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let item = list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["metadata"]["name"] == "lost"))
        .expect("lost is listed");
    assert_eq!(rv(item), lost);
    assert!(
        watchd.log().contains("resource re-listed from etcd"),
        "the re-list is logged"
    );

    // Equal again afterwards, and found different only once.
    let before = checks(&metrics_text(&base).await, "configmaps", "match");
    let text = wait_metrics(&base, "configmaps equal again", |t| {
        checks(t, "configmaps", "match") > before
    })
    .await;
    assert_eq!(checks(&text, "configmaps", "mismatch"), 1.0, "{text}");
    // A change after the re-list is served as any other.
    let after = put_json(
        &mut kv,
        &key("default", "a"),
        &configmap("default", "a", "2"),
    )
    .await;
    let deadline = Instant::now() + WAIT;
    loop {
        let got = get_json(&format!("{cms}/a")).await;
        if rv(&got) == after {
            break;
        }
        assert!(Instant::now() < deadline, "the change after the re-list");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// No false alarm: checks every 100 ms while objects are created, changed and deleted
/// find the cache equal to etcd every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_that_follows_etcd_under_churn_is_never_found_different() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &["--consistency-check-interval=100ms"]);
    let base = watchd.base_url();
    let started = Instant::now();
    let mut rounds = 0u32;
    let mut held = std::collections::BTreeSet::new();
    // Bounded: 400 writes, at most 20 s.
    for i in 0..400u32 {
        let ns = ["default", "kube-system", "team-a"][(i % 3) as usize];
        let k = key(ns, &format!("cm-{}", i % 37));
        if i % 5 == 4 && held.remove(&k) {
            delete_key(&mut kv, &k).await;
        } else {
            let name = k.rsplit('/').next().unwrap_or_default().to_string();
            put_json(&mut kv, &k, &configmap(ns, &name, &i.to_string())).await;
            held.insert(k);
        }
        if i % 40 == 0 {
            rounds += 1;
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    assert!(rounds > 0);
    let text = wait_metrics(&base, "configmaps checked several times", |t| {
        checks(t, "configmaps", "match") >= 5.0
    })
    .await;
    let mismatches: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("watchd_storage_consistency_checks_total"))
        .filter(|l| l.contains("result=\"mismatch\"") || l.contains("result=\"error\""))
        .collect();
    assert!(mismatches.is_empty(), "{mismatches:?}");
    assert!(
        !watchd.log().contains("the cache differs from etcd"),
        "no mismatch logged"
    );
}
