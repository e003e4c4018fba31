//! S5 at a tiny scale: 300 idle watchers over HTTP/2 (50 streams per
//! connection), 60 over HTTP/1.1, 200 on etcd direct: watchd counts every
//! watch, and the RSS per watcher is reported for each.

use std::time::Duration;

use watchd_loadtest::s5::{http1_fit, run, S5Config};

#[path = "scenarios/tiny.rs"]
mod tiny;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s5_tiny_counts_every_idle_watcher() {
    let cfg = S5Config {
        watchers: 300,
        streams_per_connection: 50,
        http1_watchers: Some(60),
        etcd_watchers: 200,
        namespaces: 7,
        settle: Duration::from_millis(500),
        setup: tiny::setup(),
    };
    let r = run(&cfg).await.expect("s5 runs");
    let v = tiny::checked_json(&r);
    assert!(r.clean, "{}\n{v:#}", r.table());
    let h2 = &v["details"]["http2"];
    assert_eq!(h2["watchers"], 300);
    assert_eq!(h2["connections"], 6);
    // The one warm-up watch has ended; all 300 are counted.
    assert!(h2["server_counted"].as_f64().unwrap() >= 300.0, "{h2}");
    assert!(h2["rss_after"].as_u64().unwrap() > 0);
    assert_eq!(v["details"]["http1"]["watchers"], 60);
    assert_eq!(v["details"]["etcd"]["watchers"], 200);
    assert_eq!(v["details"]["etcd"]["connections"], 4);
    let per = tiny::figure(&r, "watchd RSS per idle watcher, HTTP/2, 300 (KiB)");
    assert_eq!(per.baseline_name.as_deref(), Some("etcd direct x200"));
    assert!(http1_fit(None) > 1000, "the open-files limit leaves room");
}
