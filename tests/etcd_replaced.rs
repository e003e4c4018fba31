//! An etcd replaced under watchd is noticed: restored from an older snapshot (its
//! revision goes back), restored and written past what watchd applied (its history does
//! not hold the last change watchd applied), replaced by a new empty one, or by a member
//! of another cluster (its cluster ID). Each time watchd logs it, counts it, ends every
//! open watch with 410 Expired and re-lists, so it serves etcd's state, never the old
//! one; a consistent read before that is refused, never served the old state.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::http::{self, WatchStream};
use support::kube::{configmap, expect_410, get_json, item_names, metric, put_json, rv};
use support::{Etcd, Watchd};

const WAIT: Duration = Duration::from_secs(40);

fn key(name: &str) -> String {
    format!("/registry/configmaps/default/{name}")
}

/// Polls the ConfigMaps of `default` until their names are `want` (bounded). Between a
/// restore and the end of the re-list a consistent read may be refused (429, storage
/// re-initializing, as `consistent_reads_never_serve_the_old_state_after_a_restore`
/// checks): that answer is polled through; any other is a failure.
async fn wait_for_names(base: &str, want: &[&str]) -> Value {
    let url = format!("{base}/api/v1/namespaces/default/configmaps");
    let deadline = Instant::now() + WAIT;
    loop {
        let resp = http::get(&url, &[]).await;
        let seen = match resp.status {
            200 => {
                let list = resp.json();
                if item_names(&list) == want {
                    return list;
                }
                format!("names {:?}", item_names(&list))
            }
            429 => {
                let status = resp.json();
                let message = status["message"].as_str().unwrap_or_default();
                assert!(message.contains("storage is (re)initializing"), "{status}");
                format!("refused: {status}")
            }
            other => panic!("GET {url}: {other}: {}", resp.text()),
        };
        assert!(Instant::now() < deadline, "{seen}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn replaced_count(base: &str) -> Option<f64> {
    let text = http::get(&format!("{base}/metrics"), &[]).await.text();
    metric(&text, "watchd_etcd_replaced_total", &[])
}

async fn open_watch(base: &str) -> WatchStream {
    let list = get_json(&format!("{base}/api/v1/namespaces/default/configmaps")).await;
    support::kube::open_watch(&format!(
        "{base}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}",
        rv(&list)
    ))
    .await
}

/// A member of another cluster at the same address is told by its cluster ID, the first
/// of the checks; its own history is served afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_of_another_cluster_is_noticed_by_its_cluster_id() {
    let mut etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for name in ["a", "b"] {
        put_json(&mut kv, &key(name), &configmap("default", name, "old")).await;
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    wait_for_names(&base, &["a", "b"]).await;
    let mut watch = open_watch(&base).await;

    tokio::task::block_in_place(|| etcd.replace_with_other_cluster());
    let mut kv = etcd.client().await;
    let mut last = 0;
    for i in 0..6 {
        let value = configmap("default", "new", &i.to_string());
        last = put_json(&mut kv, &key("new"), &value).await;
    }
    expect_410(&mut watch).await;
    let list = wait_for_names(&base, &["new"]).await;
    assert_eq!(rv(&list["items"][0]), last);
    assert_eq!(replaced_count(&base).await, Some(1.0));
    assert!(
        watchd.log().contains("its cluster ID is"),
        "noticed by the cluster ID"
    );
}

/// An etcd with ConfigMaps a and b, backed up (the snapshot's file), then changed under
/// a watchd that serves it (a changed, b deleted, d created); and the revision of a at
/// the backup.
async fn backed_up_then_changed(
    env: &[(&str, &str)],
) -> (Etcd, Watchd, tempfile::NamedTempFile, i64) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_json(&mut kv, &key("a"), &configmap("default", "a", "1")).await;
    put_json(&mut kv, &key("b"), &configmap("default", "b", "1")).await;
    let snapshot = tempfile::NamedTempFile::new().expect("temp file");
    tokio::task::block_in_place(|| etcd.snapshot_save(snapshot.path()));
    let watchd = Watchd::start_with_env(&etcd.client_url(), &[], env);
    put_json(&mut kv, &key("a"), &configmap("default", "a", "2")).await;
    support::kube::delete_key(&mut kv, &key("b")).await;
    put_json(&mut kv, &key("d"), &configmap("default", "d", "1")).await;
    wait_for_names(&watchd.base_url(), &["a", "d"]).await;
    (etcd, watchd, snapshot, ra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_replaced_by_an_empty_one_ends_watches_and_is_served_as_it_is() {
    let mut etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for name in ["a", "b", "c"] {
        put_json(&mut kv, &key(name), &configmap("default", name, "old")).await;
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    wait_for_names(&base, &["a", "b", "c"]).await;
    let mut watch = open_watch(&base).await;

    tokio::task::block_in_place(|| etcd.replace_with_empty());
    expect_410(&mut watch).await;
    wait_for_names(&base, &[]).await;
    assert_eq!(replaced_count(&base).await, Some(1.0));

    // The new etcd's own history is served from now on.
    let mut kv = etcd.client().await;
    let r = put_json(&mut kv, &key("new"), &configmap("default", "new", "1")).await;
    let list = wait_for_names(&base, &["new"]).await;
    assert_eq!(rv(&list["items"][0]), r);
    assert!(watchd
        .log()
        .contains("etcd is not the one the cache followed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_restored_from_an_older_snapshot_is_served_as_restored() {
    let (mut etcd, watchd, snapshot, ra) = backed_up_then_changed(&[]).await;
    let base = watchd.base_url();
    let mut watch = open_watch(&base).await;

    tokio::task::block_in_place(|| etcd.restore(snapshot.path()));
    expect_410(&mut watch).await;
    let list = wait_for_names(&base, &["a", "b"]).await;
    assert_eq!(rv(&list["items"][0]), ra, "a as it was at the backup");
    assert_eq!(list["items"][0]["data"]["value"], "1");
    assert_eq!(replaced_count(&base).await, Some(1.0));
    assert!(
        watchd.log().contains("the cache applied up to"),
        "noticed by the revision going back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_restored_and_written_past_the_applied_revision_is_noticed() {
    let mut etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_json(&mut kv, &key("a"), &configmap("default", "a", "1")).await;
    let snapshot = tempfile::NamedTempFile::new().expect("temp file");
    tokio::task::block_in_place(|| etcd.snapshot_save(snapshot.path()));
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    for i in 0..5 {
        put_json(
            &mut kv,
            &key("gone"),
            &configmap("default", "gone", &i.to_string()),
        )
        .await;
    }
    wait_for_names(&base, &["a", "gone"]).await;
    let mut watch = open_watch(&base).await;

    // The restored etcd is written past the revision watchd applied before watchd sees
    // it: its revision alone cannot tell.
    let value = serde_json::to_string(&configmap("default", "other", "x")).unwrap();
    let other = key("other");
    let puts: Vec<(&str, &str)> = (0..12).map(|_| (other.as_str(), value.as_str())).collect();
    tokio::task::block_in_place(|| etcd.restore_and_write_unseen(snapshot.path(), &puts));
    expect_410(&mut watch).await;
    wait_for_names(&base, &["a", "other"]).await;
    assert_eq!(replaced_count(&base).await, Some(1.0));
    assert!(
        watchd
            .log()
            .contains("does not hold the change the cache applied"),
        "noticed by the last change applied"
    );
}

/// Between a restore and ingestion noticing it, the cache holds a state etcd does not
/// have. A consistent read then finds etcd's revision below the cache's: it is refused
/// with 429 and Retry-After, never served the old state, until the cache has re-listed.
/// etcd stays down for seconds first, so ingestion's reconnect backoff has grown and
/// reads reach the restored etcd before ingestion does; the first such read wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_reads_never_serve_the_old_state_after_a_restore() {
    // Ingestion waits 20 s between reconnects (a test hook; its jittered backoff would
    // put it anywhere): it is asleep when etcd comes back, so the first read gets there
    // first, whatever the timing.
    let (mut etcd, watchd, snapshot, _) =
        backed_up_then_changed(&[("WATCHD_TEST_RECONNECT_BACKOFF", "20s")]).await;
    let base = watchd.base_url();

    tokio::task::block_in_place(|| etcd.restore_after(snapshot.path(), Duration::from_secs(7)));
    let url = format!("{base}/api/v1/namespaces/default/configmaps");
    let deadline = Instant::now() + WAIT;
    let mut refused = 0;
    loop {
        let resp = http::get(&url, &[]).await;
        match resp.status {
            200 => {
                let list = resp.json();
                assert_eq!(item_names(&list), ["a", "b"], "only the restored state");
                assert_eq!(list["items"][0]["data"]["value"], "1");
                break;
            }
            429 => {
                let status = resp.json();
                let message = status["message"].as_str().unwrap_or_default();
                assert!(message.contains("storage is (re)initializing"), "{status}");
                assert_eq!(resp.header("retry-after"), Some("1"));
                refused += 1;
            }
            other => panic!("{other}: {}", resp.text()),
        }
        assert!(
            Instant::now() < deadline,
            "no answer from the restored state"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // etcd was down for 7 s and ingestion sleeps 20 s between attempts: the first read
    // after the restart reaches the restored etcd before ingestion does, and must be
    // refused. A read that waited for the re-list instead of refusing, or that ingestion
    // always beat, would leave this at 0.
    eprintln!("consistent reads refused before the re-list: {refused}");
    assert!(
        refused > 0,
        "no consistent read was refused between the restore and the re-list\n{}",
        watchd.log()
    );
    let text = http::get(&format!("{base}/metrics"), &[]).await.text();
    let counted = metric(&text, "watchd_consistent_reads_source_behind_total", &[]);
    assert_eq!(
        counted,
        Some(f64::from(refused)),
        "every refusal counted, and only those"
    );
    assert_eq!(replaced_count(&base).await, Some(1.0));
    // The refused read woke ingestion from its backoff.
    assert!(
        watchd
            .log()
            .contains("a consistent read reached etcd first"),
        "{refused} refused, ingestion not woken\n{}",
        watchd.log()
    );
}
