//! The loopback floor end to end: a few sockets for about two seconds, its
//! receiver a separate `watchd-loadtest floor-receiver` process, and every
//! delivery accounted for; then a tiny `s1-compare` with the floor beside
//! etcd direct and watchd (over HTTP/1.1 and over its own gRPC API), through
//! the command line, with its JSON, Markdown and PNG.
//!
//! Loopback only; every process is ended by its PID (the floor's receiver by
//! the floor, the `s1-compare` process here on timeout), every wait bounded.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use watchd_loadtest::floor::{self, FloorConfig};

#[allow(dead_code)]
#[path = "s1/support.rs"]
mod support;

const BIN: &str = env!("CARGO_BIN_EXE_watchd-loadtest");

fn config(sockets: usize, rate: f64, events_per_write: usize) -> FloorConfig {
    let mut c = FloorConfig::new(sockets, rate, Duration::from_secs(2));
    c.events_per_write = events_per_write;
    c.receiver_bin = PathBuf::from(BIN);
    c.drain_timeout = Duration::from_secs(10);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floor_delivers_every_write_to_every_socket_and_measures_its_cpu() {
    for (sockets, k) in [(8, 1), (5, 4)] {
        let cfg = config(sockets, 50.0, k);
        let r = floor::run(&cfg).await.expect("floor runs");
        let shown = serde_json::to_string_pretty(&r).unwrap();
        assert!(floor::is_clean(&r), "{shown}");
        assert_eq!(r.sockets, sockets, "{shown}");
        assert_eq!(r.ticks, 100, "2 s at 50/s: {shown}");
        assert_eq!(r.abandoned_ticks, 0, "{shown}");
        assert_eq!(r.deliveries_sent, sockets as u64 * r.ticks, "{shown}");
        assert_eq!(r.deliveries_received, r.deliveries_sent, "{shown}");
        assert_eq!(r.lost, 0);
        assert_eq!(
            r.write_syscalls * k as u64,
            r.deliveries_sent,
            "one write() per {k} deliveries: {shown}"
        );
        assert!(
            r.sender.cpu_s_per_million.unwrap_or(0.0) > 0.0,
            "the sender's CPU is measured: {shown}"
        );
        assert!(r.sender.user_share.is_some(), "{shown}");
        assert_eq!(r.latency_ms.samples, r.deliveries_received, "{shown}");
        assert!(r.latency_ms.p99.is_some() && !r.latency_ms.cdf.is_empty());
        assert!(r.receiver.cpu_s.is_some(), "{shown}");
        assert!((1.5..6.0).contains(&r.window_s), "{shown}");
    }
}

/// Runs `watchd-loadtest args...`, killed by PID if it overruns `limit`.
fn run_bin(args: &[String], limit: Duration) -> std::process::ExitStatus {
    let mut child = Command::new(BIN).args(args).spawn().expect("spawn");
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("watchd-loadtest {args:?} took longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn s1_compare_with_the_floor_baseline_writes_ratios_table_and_plot() {
    let bin = support::watchd_bin();
    let dir = std::env::temp_dir().join(format!("floor-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("c.json");
    let args: Vec<String> = [
        "s1-compare",
        "--baselines=floor,etcd",
        "--protocols=http1,grpc-watchd",
        "--watchers=3",
        "--writes-per-sec=20",
        "--duration=2",
        "--objects=10",
        "--namespace-count=3",
        "--drain-timeout=5",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("--watchd-bin={}", bin.display()),
        format!("--temp-dir={}", dir.display()),
        format!("--out={}", out.display()),
    ])
    .collect();
    let status = run_bin(&args, Duration::from_secs(120));
    assert!(status.success(), "s1-compare failed: {status}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let shorts: Vec<&str> = v["sides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["short"].as_str().unwrap())
        .collect();
    assert_eq!(shorts, ["floor", "etcd", "http1", "grpc-watchd"]);
    let labels: Vec<&str> = v["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "etcd/floor",
            "http1/floor",
            "grpc-watchd/floor",
            "http1/etcd",
            "grpc-watchd/etcd",
            "grpc-watchd/http1"
        ]
    );
    // The gRPC side: every write to every watcher, and etcd direct
    // multiplexed like it (3 watchers: one connection each side).
    let grpc = &v["sides"][3];
    assert_eq!(grpc["name"], "watchd grpc");
    assert_eq!(
        (&grpc["protocol"], &grpc["connections"]),
        (&"grpc-watchd".into(), &1.into())
    );
    let run = &grpc["runs"][0];
    assert_eq!(
        (&run["target"], &run["missed"]),
        (&"watchd".into(), &0.into()),
        "{run}"
    );
    assert_eq!(run["delivered"], run["expected_deliveries"], "{run}");
    assert!(run["delivered"].as_u64().unwrap() >= 3 * 30, "{run}");
    assert_eq!(v["sides"][1]["connections"], 1);
    let floor = &v["sides"][0]["runs"][0];
    assert_eq!(floor["target"], "floor");
    assert_eq!(floor["delivered"], 3 * 40, "{floor}");
    assert_eq!(floor["missed"], 0);
    assert!(floor["stored_bytes"].as_u64().unwrap() > 1024, "{floor}");
    let cpu = v["median"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["figure"] == "server CPU-s / 1M deliveries")
        .unwrap();
    assert!(cpu["medians"][0].as_f64().unwrap() > 0.0, "{cpu}");
    assert!(cpu["ratios"][1].as_f64().unwrap() > 0.0, "{cpu}");
    let md = std::fs::read_to_string(dir.join("c.md")).unwrap();
    assert!(
        md.contains("| figure | floor | etcd direct | watchd http1 | watchd grpc |"),
        "{md}"
    );
    assert!(md.contains("CPU per delivery http1/floor"), "{md}");
    assert!(md.contains("CPU per delivery grpc-watchd/etcd"), "{md}");
    assert!(md.contains("- watchd grpc: watchd gRPC (h2c)"), "{md}");
    if std::path::Path::new(watchd_loadtest::plot::DEJAVU_SANS).is_file() {
        let png = std::fs::read(dir.join("c.png")).expect("plot written");
        assert_eq!(&png[1..4], b"PNG");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
