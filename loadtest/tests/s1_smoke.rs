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

use watchd_loadtest::demo::Storage;
use watchd_loadtest::http::Accept;
use watchd_loadtest::s1::Target;

#[allow(dead_code)]
#[path = "s1/support.rs"]
mod support;

use support::{assert_clean, run, tiny_config, watchd_bin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_tiny_on_both_targets_loses_nothing() {
    let bin = watchd_bin();
    for target in [Target::Etcd, Target::Watchd] {
        let r = run(&tiny_config(target, 3, &bin)).await;
        assert_clean(&r, target, 40);
        assert_eq!(r.backing_etcd.is_some(), target == Target::Watchd);
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
        assert_eq!(r.backing_etcd.is_some(), target == Target::Watchd);
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
