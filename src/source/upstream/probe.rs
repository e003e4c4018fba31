//! Progress probes: a quiet resource's watch says nothing, so while a reader waits for a
//! revision the follower's main watch has not passed, a short watch proves which events
//! lie before it (see the parent module's docs).

use std::sync::Arc;
use std::time::Duration;

use super::wire::{parse_rv, read_event, LineReader};
use super::{collection_path, JSON, PROBE_GRACE, PROBE_TIMEOUT_SECONDS};
use crate::client::upstream::UpstreamClient;
use crate::store::ResourceStore;
use crate::Revision;

/// Proves progress of a quiet resource while readers wait for it (see the module docs).
pub(super) async fn probe_loop(client: Arc<UpstreamClient>, store: Arc<ResourceStore>) {
    let mut wanted = store.subscribe_wanted();
    let path = collection_path(&store.info);
    loop {
        if wanted.changed().await.is_err() {
            return;
        }
        loop {
            let want = *wanted.borrow_and_update();
            if store.progress() >= want || store.progress() == Revision::ZERO {
                break;
            }
            tokio::time::sleep(PROBE_GRACE).await;
            let from = store.progress();
            if from >= want {
                break;
            }
            let bound = Duration::from_secs(PROBE_TIMEOUT_SECONDS + 2);
            let proof = tokio::time::timeout(bound, prove(&client, &path, from)).await;
            let Ok(Some((last_event, bookmark))) = proof else {
                metrics::counter!("watchd_upstream_progress_probes_total", "result" => "unproven")
                    .increment(1);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            // The events before the bookmark are the main watch's to apply; once it has,
            // nothing lies between them and the bookmark.
            let mut progress = store.subscribe_progress();
            // (The guard `wait_for` returns is a read lock of the progress: dropped here,
            // before the progress is written.)
            let applied = matches!(
                tokio::time::timeout(bound, progress.wait_for(|p| *p >= last_event)).await,
                Ok(Ok(_))
            );
            if applied {
                store.set_progress(bookmark);
                metrics::counter!("watchd_upstream_progress_probes_total", "result" => "proven")
                    .increment(1);
            }
        }
    }
}

/// A short watch from `from` until its bookmark: the last event's resourceVersion before
/// it (or `from`) and the bookmark's.
async fn prove(
    client: &UpstreamClient,
    path: &str,
    from: Revision,
) -> Option<(Revision, Revision)> {
    let q = format!(
        "{path}?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={PROBE_TIMEOUT_SECONDS}",
        from.0
    );
    let resp = client.get(&q, JSON).await.ok()?;
    if resp.status() != 200 {
        return None;
    }
    let mut lines = LineReader::new(resp.into_body());
    let mut last = from;
    while let Some(batch) = lines.next_lines().await.ok()? {
        for line in batch {
            let (ev, head) = read_event(&line).ok()?;
            if ev.kind == "ERROR" {
                return None;
            }
            let rv = parse_rv(&head.metadata.resource_version).ok()?;
            if ev.kind == "BOOKMARK" {
                return Some((last, rv));
            }
            last = last.max(rv);
        }
    }
    None
}
