//! S4 at a tiny scale: 40 watchers (over HTTP/1.1, then HTTP/2 with 16
//! streams per connection) drop and resume at once while ConfigMaps are
//! written: all resume, nothing is lost or repeated across the resume, and
//! watchd sends no request to etcd for it.

use std::time::Duration;

use watchd_loadtest::endpoint::Protocol;
use watchd_loadtest::s4::{run, S4Config};

#[path = "scenarios/tiny.rs"]
mod tiny;

async fn tiny_run(protocol: Protocol) {
    let cfg = S4Config {
        watchers: 40,
        protocol,
        streams_per_connection: 16,
        objects: 10,
        writes_per_sec: 20.0,
        window: Duration::from_secs(1),
        setup: tiny::setup(),
        ..S4Config::default()
    };
    let r = run(&cfg).await.expect("s4 runs");
    let v = tiny::checked_json(&r);
    assert!(r.clean, "{}\n{v:#}", r.table());
    assert_eq!(tiny::figure(&r, "watchers resumed").value, Some(40.0));
    assert!(tiny::figure(&r, "time until all resumed (s)")
        .value
        .is_some());
    let caused = tiny::figure(&r, "etcd requests caused by the storm");
    assert_eq!(caused.met, Some(true), "{}", r.table());
    let acc = &v["details"]["accounting"];
    let writes = v["details"]["writes"]["ok"].as_u64().unwrap();
    assert!(writes >= 40, "{writes} writes");
    assert_eq!(acc["delivered"].as_u64(), Some(40 * writes));
    assert_eq!(acc["missed"], 0);
    assert_eq!(acc["duplicates"], 0);
    // The writer's puts are seen in both windows, and kept apart.
    assert!(
        v["details"]["etcd_storm_window"]["Put started"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_tiny_http1_resumes_all_without_loss_or_etcd_requests() {
    tiny_run(Protocol::Http1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_tiny_http2_resumes_all_without_loss_or_etcd_requests() {
    tiny_run(Protocol::Http2).await;
}
