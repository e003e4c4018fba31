//! S2 at a tiny scale: 20 node watchers (4 at the baseline) and 3 all-pods
//! watchers over 40 pods, 40 updates/s for 2 s, and 3 etcd direct watchers:
//! every update reaches exactly its node's watcher and every all-pods
//! watcher, nothing is lost or misrouted, in both media types.

use std::time::Duration;

use watchd_loadtest::http::Accept;
use watchd_loadtest::s2::{run, S2Config};

#[path = "scenarios/tiny.rs"]
mod tiny;

async fn tiny_run(accept: Accept, etcd_watchers: usize) {
    let cfg = S2Config {
        nodes: 20,
        baseline_nodes: 4,
        all_watchers: 3,
        etcd_watchers,
        pods: 40,
        namespaces: 3,
        updates_per_sec: 40.0,
        duration: Duration::from_secs(2),
        accept,
        drain_timeout: Duration::from_secs(10),
        setup: tiny::setup(),
        ..S2Config::default()
    };
    let r = run(&cfg).await.expect("s2 runs");
    let v = tiny::checked_json(&r);
    assert!(r.clean, "{}\n{v:#}", r.table());
    for phase in ["full", "baseline"] {
        let p = &v["details"][phase];
        let writes = p["writes"]["ok"].as_u64().unwrap();
        assert!(writes >= 60, "{phase}: {writes} writes");
        // Each update reaches exactly one node watcher, and every all-pods watcher.
        assert_eq!(p["node"]["delivered"].as_u64(), Some(writes), "{phase}");
        assert_eq!(p["node"]["expected"].as_u64(), Some(writes), "{phase}");
        assert_eq!(p["all"]["delivered"].as_u64(), Some(3 * writes), "{phase}");
        for k in ["missed", "duplicates", "out_of_order", "unexpected"] {
            assert_eq!(p["node"][k], 0, "{phase} {k}");
            assert_eq!(p["all"][k], 0, "{phase} {k}");
        }
        assert!(p["node"]["latency_ms"]["p99"].as_f64().is_some());
    }
    assert_eq!(v["details"]["full"]["node"]["watchers"], 20);
    assert_eq!(v["details"]["baseline"]["node"]["watchers"], 4);
    let cpu = tiny::figure(&r, "watchd CPU-µs / update");
    assert_eq!(cpu.baseline_name.as_deref(), Some("W = 4"));
    assert!(cpu.value.is_some() && cpu.target.is_some());
    if etcd_watchers > 0 {
        let e = &v["details"]["etcd"];
        let writes = e["writes"]["ok"].as_u64().unwrap();
        assert_eq!(e["all"]["delivered"].as_u64(), Some(3 * writes));
        assert_eq!(e["all"]["missed"], 0);
        assert!(tiny::figure(&r, "server CPU-µs / delivery")
            .baseline
            .is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_tiny_routes_every_update_to_its_node_as_protobuf() {
    tiny_run(Accept::Protobuf, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_tiny_routes_every_update_to_its_node_as_json() {
    tiny_run(Accept::Json, 0).await;
}
