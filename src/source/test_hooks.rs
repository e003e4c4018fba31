//! Faults for tests, compiled only into the builds tests use: the package's own
//! dev-dependency on itself turns on the `test-hooks` feature, so `cargo test` builds the
//! `watchd` binary with these and `cargo build` never does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::store::ingest::KvChange;

/// `WATCHD_TEST_DROP_EVENT=TEXT`: the first etcd watch change whose key contains TEXT is
/// dropped, as if the watch had lost it, so that the cache differs from etcd.
pub(crate) fn drop_event(changes: &mut Vec<KvChange>) {
    static TEXT: OnceLock<Option<String>> = OnceLock::new();
    static DONE: AtomicBool = AtomicBool::new(false);
    let Some(text) = TEXT.get_or_init(|| std::env::var("WATCHD_TEST_DROP_EVENT").ok()) else {
        return;
    };
    if DONE.load(Ordering::Relaxed) {
        return;
    }
    let Some(at) = changes
        .iter()
        .position(|c| String::from_utf8_lossy(&c.key).contains(text.as_str()))
    else {
        return;
    };
    DONE.store(true, Ordering::Relaxed);
    let dropped = changes.remove(at);
    tracing::warn!(key = %String::from_utf8_lossy(&dropped.key), revision = %dropped.revision,
        "test hook: watch event dropped (WATCHD_TEST_DROP_EVENT)");
}

/// `WATCHD_TEST_RECONNECT_BACKOFF=DURATION`: every reconnect waits this long, without
/// jitter, so that a test knows ingestion is asleep when its source comes back.
pub(crate) fn reconnect_backoff() -> Option<std::time::Duration> {
    static FIXED: OnceLock<Option<std::time::Duration>> = OnceLock::new();
    *FIXED.get_or_init(|| {
        std::env::var("WATCHD_TEST_RECONNECT_BACKOFF")
            .ok()
            .and_then(|v| crate::config::parse_duration(&v).ok())
    })
}
