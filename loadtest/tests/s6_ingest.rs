//! S6 at a tiny scale: 3 000 pod events (500 pods) replayed into etcd one
//! per transaction and applied by watchd, then a second watchd's initial load of the 500 pods.

use watchd_loadtest::s6::{run, S6Config};

#[path = "scenarios/tiny.rs"]
mod tiny;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_tiny_applies_every_event_and_reloads() {
    let cfg = S6Config {
        events: 3000,
        pods: 500,
        ops_per_txn: 1,
        concurrency: 16,
        setup: tiny::setup(),
        ..S6Config::default()
    };
    let r = run(&cfg).await.expect("s6 runs");
    let v = tiny::checked_json(&r);
    assert!(r.clean, "{}\n{v:#}", r.table());
    let d = &v["details"];
    assert_eq!(d["replay"]["keys"], 3000);
    assert_eq!(d["replay"]["txns"], 3000, "one put per transaction");
    assert!(d["applied_revision"].as_i64() >= d["replay"]["last_revision"].as_i64());
    assert!(d["reload_ready_s"].as_f64().unwrap() > 0.0);
    assert!(d["etcd_range_s"].as_f64().unwrap() > 0.0);
    assert!(
        tiny::figure(&r, "events per watchd CPU-second (one core)")
            .value
            .unwrap()
            > 0.0
    );
    let e2e = tiny::figure(&r, "end to end: events/s applied by watchd");
    assert_eq!(
        e2e.baseline_name.as_deref(),
        Some("etcd puts/s acknowledged")
    );
}
