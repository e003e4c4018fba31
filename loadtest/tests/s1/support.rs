//! What the S1 integration tests share: the watchd binary they start
//! (found or built, bounded in time), a tiny S1 configuration, the check
//! that a run lost and repeated nothing, and the check of its transport.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

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

pub fn watchd_bin() -> PathBuf {
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

pub fn tiny_config(target: Target, secs: u64, bin: &Path) -> S1Config {
    let mut cfg = S1Config::new(target, 5, 20.0, Duration::from_secs(secs));
    cfg.objects = 10;
    cfg.namespace_count = 3;
    cfg.watchd_bin = bin.to_path_buf();
    cfg.drain_timeout = Duration::from_secs(5);
    cfg
}

pub async fn run(cfg: &S1Config) -> S1Result {
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
pub fn assert_clean(r: &S1Result, target: Target, min_writes: u64) {
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
    assert_eq!(
        r.accounting.delivered,
        r.watchers as u64 * r.writes.ok,
        "{shown}"
    );
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
    let v = serde_json::to_value(r).expect("to JSON");
    assert_eq!(v["target"], target.name());
    assert_eq!(v["missed"], 0);
    assert_eq!(v["duplicates"], 0);
}

/// The run's watchers went as `(protocol, connections, most streams on one
/// connection, TLS)` says.
pub fn assert_multiplexing(r: &S1Result, want: (&str, usize, usize, bool)) {
    let m = &r.multiplexing;
    assert_eq!(
        (
            m.protocol.as_str(),
            m.connections,
            m.streams_per_connection,
            m.tls
        ),
        want
    );
}
