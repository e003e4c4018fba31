//! End-to-end tests of the demo writer against a real etcd that each test
//! starts itself (free loopback ports, temporary data dir, killed at the end).
//! They fail with a message naming `scripts/install-deps.sh` when `/usr/bin/etcd` is not
//! installed: a test that cannot run must not pass.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use watchd_loadtest::demo::{self, DemoConfig, StopReason, Storage};

#[path = "demo_etcd/checks.rs"]
mod checks;
#[path = "demo_etcd/etcd.rs"]
mod etcd;

use checks::{check_cluster, check_cluster_without_events, check_event_leases, keys_under};
use etcd::Etcd;

fn small_config(endpoint: String) -> DemoConfig {
    DemoConfig {
        etcd_servers: vec![endpoint],
        namespaces: 2,
        nodes: 3,
        pods_per_namespace: 5,
        configmaps_per_namespace: 2,
        changes_per_second: 50.0,
        duration: Some(Duration::from_secs(60)),
        once: true,
        ..DemoConfig::default()
    }
}
async fn pods_per_namespace(etcd: &Etcd) -> Vec<usize> {
    let dump = etcd.dump().await;
    ["demo-1", "demo-2"]
        .iter()
        .map(|ns| keys_under(&dump, &format!("/registry/pods/{ns}/")).len())
        .collect()
}

#[tokio::test]
async fn demo_once_fills_etcd_idempotently_then_churns() {
    once_then_churn(Storage::Protobuf).await;
}

#[tokio::test]
async fn demo_once_fills_etcd_idempotently_then_churns_json() {
    once_then_churn(Storage::Json).await;
}

async fn once_then_churn(storage: Storage) {
    let etcd = Etcd::start(&format!("once-{storage:?}")).await;
    let cfg = DemoConfig {
        storage,
        ..small_config(etcd.endpoint())
    };

    let first = demo::run(&cfg, std::future::pending()).await.expect("run");
    assert_eq!(first.stop, StopReason::Filled);
    assert_eq!((first.changes, first.renewals), (0, 0));
    let dump = etcd.dump_as(Some(storage)).await;
    // A fresh etcd: every key was created once, none deleted.
    assert_eq!(first.store.creates as usize, dump.len());
    assert_eq!(
        first.events as usize,
        keys_under(&dump, "/registry/events/").len()
    );
    check_cluster(&dump, &cfg);
    check_event_leases(&etcd, 3660).await;

    // Re-running adopts everything and writes nothing.
    let second = demo::run(&cfg, std::future::pending())
        .await
        .expect("rerun");
    assert_eq!((second.store.creates, second.store.updates), (0, 0));
    assert_eq!(etcd.dump().await, dump);

    // Churn for a moment: changes happen, the controllers follow, leases are
    // renewed, sizes stay at their targets.
    let churn = DemoConfig {
        once: false,
        duration: Some(Duration::from_millis(1500)),
        lease_renew_period: Duration::from_millis(300),
        ..cfg.clone()
    };
    let renewed_before = etcd.renew_times().await;
    let third = demo::run(&churn, std::future::pending())
        .await
        .expect("churn");
    assert_eq!(third.stop, StopReason::Duration);
    assert!(third.changes >= 20, "only {} changes", third.changes);
    assert!(third.store.updates > 0 && third.store.failures == 0);
    assert!(third.events > 0, "{third:?}");
    // 3 node Leases and 2 leader-election ones, every 300 ms for 1.5 s: each at least
    // once (how many more depends on how busy the machine is, so it is not asserted).
    assert!(third.renewals >= 5, "only {} renewals", third.renewals);
    let after = etcd.dump_as(Some(storage)).await;
    check_cluster(&after, &cfg);
    assert_ne!(after, dump);
    for (node, renewed) in etcd.renew_times().await {
        assert!(renewed > renewed_before[&node], "{node}: {renewed}");
    }
    check_event_leases(&etcd, 3660).await;

    // A stop signal ends the run cleanly too.
    let stop = tokio::time::sleep(Duration::from_millis(500));
    let fourth = demo::run(&churn, stop).await.expect("stopped run");
    assert_eq!(fourth.stop, StopReason::Stopped);
    check_cluster(&etcd.dump().await, &cfg);
}

/// Leases are renewed every period (renewTime advances across two periods
/// and again across the next two), and Events expire with their etcd lease.
#[tokio::test]
async fn leases_are_renewed_and_events_expire() {
    let etcd = Etcd::start("leases").await;
    let ttl = Duration::from_secs(2);
    let cfg = DemoConfig {
        event_ttl: ttl,
        ..small_config(etcd.endpoint())
    };
    demo::run(&cfg, std::future::pending()).await.expect("fill");
    let filled = Instant::now();
    // etcd rounds a TTL up to its minimum (about 2 s); 2 s + 5 % is 2 s.
    check_event_leases(&etcd, 2).await;

    let period = Duration::from_millis(200);
    let renewing = DemoConfig {
        once: false,
        changes_per_second: 0.0,
        lease_renew_period: period,
        duration: Some(Duration::from_secs(2)),
        ..cfg.clone()
    };
    let run = tokio::spawn(async move { demo::run(&renewing, std::future::pending()).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut samples = vec![etcd.renew_times().await];
    for _ in 0..2 {
        tokio::time::sleep(2 * period).await;
        samples.push(etcd.renew_times().await);
    }
    for pair in samples.windows(2) {
        assert_eq!(pair[0].len(), 3);
        for (node, renewed) in &pair[1] {
            assert!(renewed > &pair[0][node], "{node} not renewed: {renewed}");
        }
    }
    let summary = run.await.expect("join").expect("run");
    assert_eq!(summary.events, 0, "no changes, no events");
    // Renewals only: every Lease about once per period.
    assert!(summary.renewals >= 5 * 5, "{summary:?}");

    // etcd checks expiries every 500 ms.
    let deadline = filled + ttl + Duration::from_secs(3);
    loop {
        let left = etcd.leases_under("/registry/events/").await.len();
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} events outlived their lease"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    check_cluster_without_events(&etcd.dump().await, &cfg);
}

#[tokio::test]
async fn demo_survives_etcd_restart() {
    let mut etcd = Etcd::start("restart").await;
    let cfg = DemoConfig {
        once: false,
        duration: Some(Duration::from_secs(7)),
        ..small_config(etcd.endpoint())
    };
    let run = tokio::spawn({
        let cfg = cfg.clone();
        async move { demo::run(&cfg, std::future::pending()).await }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    etcd.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    etcd.spawn().await;
    let summary = run.await.expect("join").expect("run");
    assert_eq!(summary.stop, StopReason::Duration);
    assert!(summary.store.failures > 0, "{summary:?}");
    assert!(summary.store.reconnects > 0, "{summary:?}");
    assert!(summary.changes > 50, "{summary:?}");
    assert_eq!(pods_per_namespace(&etcd).await, [5, 5]);
    check_cluster(&etcd.dump().await, &cfg);
}

#[tokio::test]
async fn binary_exits_zero() {
    let etcd = Etcd::start("binary").await;
    let bin = env!("CARGO_BIN_EXE_watchd-loadtest");
    let endpoint = format!("--etcd-servers={}", etcd.endpoint());
    let status = |args: &[&str]| {
        Command::new(bin)
            .arg("demo")
            .arg(&endpoint)
            .args(["--namespaces=2", "--nodes=3", "--pods-per-namespace=5"])
            .args(["--configmaps-per-namespace=2"])
            .args(args)
            .stderr(Stdio::null())
            .status()
            .expect("run binary")
    };
    assert!(status(&["--once"]).success());
    let churn = [
        "--duration=1",
        "--changes-per-second=20",
        "--lease-renew-seconds=0.2",
    ];
    assert!(status(&churn).success());
    let dump = etcd.dump_as(Some(Storage::Protobuf)).await;
    check_cluster(&dump, &small_config(etcd.endpoint()));
    // Objects written as JSON are adopted and kept up to date by a protobuf run.
    let json = Etcd::start("binary-json").await;
    let json_endpoint = format!("--etcd-servers={}", json.endpoint());
    let run = |args: &[&str]| {
        Command::new(bin)
            .args(["demo", &json_endpoint, "--namespaces=2", "--nodes=3"])
            .args(["--pods-per-namespace=5", "--configmaps-per-namespace=2"])
            .args(args)
            .stderr(Stdio::null())
            .status()
            .expect("run binary")
    };
    assert!(run(&["--once", "--storage=json", "--event-ttl-seconds=600"]).success());
    check_event_leases(&json, 630).await;
    check_cluster(
        &json.dump_as(Some(Storage::Json)).await,
        &small_config(json.endpoint()),
    );
    assert!(run(&["--duration=1", "--changes-per-second=20"]).success());
    check_cluster(&json.dump().await, &small_config(json.endpoint()));
    let bad = Command::new(bin)
        .args(["demo", "--etcd-servers=https://127.0.0.1:1", "--once"])
        .stderr(Stdio::null())
        .status()
        .expect("run binary");
    assert_eq!(bad.code(), Some(2));
}
