//! S7 at a tiny scale: 600 mixed objects in each storage format; every
//! object written, loaded and counted by watchd, RSS over raw bytes
//! reported.

use std::time::Duration;

use watchd_loadtest::s7::{mix, run, S7Config};

#[path = "scenarios/tiny.rs"]
mod tiny;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_tiny_loads_every_object_in_both_formats() {
    let cfg = S7Config {
        objects: 600,
        settle: Duration::from_millis(300),
        setup: tiny::setup(),
        ..S7Config::default()
    };
    let r = run(&cfg).await.expect("s7 runs");
    let v = tiny::checked_json(&r);
    assert!(r.clean, "{}\n{v:#}", r.table());
    let phases = v["details"]["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    let events = mix::MIX[1].2 * 6;
    for p in phases {
        assert_eq!(p["objects"], 600);
        // Events are cached twice (core/v1 and events.k8s.io/v1).
        assert_eq!(
            p["cached_objects"].as_f64(),
            Some((600 + events) as f64),
            "{p}"
        );
        assert!(p["raw_bytes"].as_u64().unwrap() > 600 * 200);
        assert!(p["rss"].as_u64() > p["empty_rss"].as_u64().map(|e| e / 2));
    }
    // Protobuf values are smaller than the same objects as JSON.
    assert!(phases[0]["raw_bytes"].as_u64() < phases[1]["raw_bytes"].as_u64());
    assert!(tiny::figure(&r, "protobuf: RSS / raw bytes")
        .target
        .is_some());
}
