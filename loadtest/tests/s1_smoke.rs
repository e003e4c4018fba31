//! S1 at a tiny scale against both targets (W=5, E=20/s, 3 s): every watcher
//! must see every write exactly once, and a complete result must come out.
//! Then once more, shorter, with the values stored as protobuf: watchd
//! watched as protobuf frames, and etcd direct.
//!
//! It starts its own etcd and watchd (killed by PID at the end). The watchd
//! binary is the newest of `target/{debug,release}/watchd` (the target dir of
//! this test, then the workspace's `target/`), or `$WATCHD_BIN`; if there is
//! none it is built with `cargo build -p watchd` into a separate target dir,
//! bounded in time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use watchd_loadtest::demo::Storage;
use watchd_loadtest::http::Accept;
use watchd_loadtest::s1::report::S1Result;
use watchd_loadtest::s1::{self, S1Config, Target};

const BUILD_TIMEOUT: Duration = Duration::from_secs(900);

/// `<target>` of the running test executable (`<target>/<profile>/deps/x`).
fn this_target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.to_path_buf())
}

fn newest(paths: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    paths.into_iter().filter(|p| p.is_file()).max_by_key(|p| {
        p.metadata()
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    })
}

fn candidates(target: &Path) -> Vec<PathBuf> {
    ["debug", "release"]
        .iter()
        .map(|profile| target.join(profile).join("watchd"))
        .collect()
}

/// Builds watchd (debug) into `target_dir`, killing the build by PID if it
/// overruns [`BUILD_TIMEOUT`].
fn build_watchd(workspace: &Path, target_dir: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut child = Command::new(cargo)
        .current_dir(workspace)
        .args(["build", "-p", "watchd", "--bin", "watchd", "--target-dir"])
        .arg(target_dir)
        .spawn()
        .expect("spawn cargo build -p watchd");
    let deadline = Instant::now() + BUILD_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for cargo") {
            assert!(status.success(), "cargo build -p watchd failed: {status}");
            break;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cargo build -p watchd took longer than {BUILD_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    target_dir.join("debug").join("watchd")
}

fn watchd_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("WATCHD_BIN") {
        return PathBuf::from(bin);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let mut all = Vec::new();
    if let Some(t) = this_target_dir() {
        all.extend(candidates(&t));
    }
    all.extend(candidates(&workspace.join("target")));
    if let Some(found) = newest(all) {
        return found;
    }
    // A separate target dir: the one of this test run may be locked by cargo.
    let own = this_target_dir()
        .unwrap_or_else(|| workspace.join("target"))
        .join("loadtest-watchd");
    newest(candidates(&own)).unwrap_or_else(|| build_watchd(&workspace, &own))
}

fn tiny_config(target: Target, secs: u64, bin: &Path) -> S1Config {
    let mut cfg = S1Config::new(target, 5, 20.0, Duration::from_secs(secs));
    cfg.objects = 10;
    cfg.namespace_count = 3;
    cfg.watchd_bin = bin.to_path_buf();
    cfg.drain_timeout = Duration::from_secs(5);
    cfg
}

async fn run(cfg: &S1Config) -> S1Result {
    s1::run(cfg).await.unwrap_or_else(|e| {
        panic!(
            "s1 against {} (storage {}, accept {}): {e}",
            cfg.target.name(),
            cfg.storage.name(),
            cfg.accept.name()
        )
    })
}

/// Every write reached every watcher once, and the result is complete.
fn assert_clean(r: &S1Result, target: Target, min_writes: u64) {
    let shown = serde_json::to_string_pretty(r).expect("result serializes");
    assert!(
        r.is_clean(),
        "{} lost or repeated events:\n{shown}",
        target.name()
    );
    assert!(r.caught_up, "{shown}");
    assert!(
        r.writes.ok >= min_writes,
        "too few writes acknowledged:\n{shown}"
    );
    assert_eq!(r.accounting.delivered, 5 * r.writes.ok, "{shown}");
    assert_eq!(r.expected_deliveries, r.accounting.delivered, "{shown}");
    assert_eq!(r.latency_ms.samples, r.accounting.delivered, "{shown}");
    assert!(
        r.latency_ms.p99.is_some() && r.delivered_per_sec > 0.0,
        "{shown}"
    );
    assert_eq!(r.server.process, target.name());
    assert!(
        r.server.pid.is_some() && r.server.cpu_s.is_some(),
        "{shown}"
    );
    assert!(r.server.peak_rss_bytes.unwrap_or(0) > 0, "{shown}");
    assert!(r.generator.cpu_s.is_some(), "{shown}");
    assert_eq!(
        r.backing_etcd.is_some(),
        target == Target::Watchd,
        "{shown}"
    );
    let v = serde_json::to_value(r).expect("to JSON");
    assert_eq!(v["target"], target.name());
    assert_eq!(v["missed"], 0);
    assert_eq!(v["duplicates"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_tiny_on_both_targets_loses_nothing() {
    let bin = watchd_bin();
    for target in [Target::Etcd, Target::Watchd] {
        let r = run(&tiny_config(target, 3, &bin)).await;
        assert_clean(&r, target, 40);
        assert_eq!(r.storage, "json");
        assert_eq!(
            r.accept.as_deref(),
            (target == Target::Watchd).then_some("json")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_tiny_with_protobuf_storage_loses_nothing() {
    let bin = watchd_bin();
    for (target, accept) in [
        (Target::Watchd, Accept::Protobuf),
        (Target::Etcd, Accept::Json),
    ] {
        let mut cfg = tiny_config(target, 2, &bin);
        cfg.storage = Storage::Protobuf;
        cfg.accept = accept;
        let r = run(&cfg).await;
        assert_clean(&r, target, 30);
        assert_eq!(r.storage, "protobuf");
        assert!(
            r.stored_bytes > 0 && r.stored_bytes < r.object_bytes,
            "protobuf is smaller than the JSON size: {} of {}",
            r.stored_bytes,
            r.object_bytes
        );
        assert_eq!(
            r.accept.as_deref(),
            (target == Target::Watchd).then_some("protobuf")
        );
    }
}
