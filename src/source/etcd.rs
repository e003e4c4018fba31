//! The etcd source. Reads etcd: one paged range over the prefix at a fixed revision R, then one watch of
//! the whole keyspace from R+1. Keys outside the prefix only advance the applied
//! revision, which is what lets consistent reads know when the cache has caught up
//! without progress notifications (broken in etcd 3.4). The watch asks for no previous
//! values (`prev_kv`): etcd 3.4 reads one from its store for every change but a creation,
//! in the one loop that sends the stream's responses, and sends it too. The cache holds
//! the last state of what it deletes; for an object it never held, the deletion reads it
//! at the revision before.
//!
//! It runs in the reflector's loop (`reflector.rs`): on any error it reconnects with
//! backoff to any endpoint and resumes from the last applied revision; when etcd
//! compacted past that revision, or is not the etcd the cache followed, it re-lists and
//! starts a new epoch.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{GetOptions, WatchOptions};
use tokio::sync::{mpsc, watch};

use super::client::{EtcdClient, EtcdConfig};
use super::reflector::{self, Attempt, End, Follow};
use super::revision_flight::RevisionFlight;
use super::{failed, BoxFuture, RangePage, ReadError, Source, SourceError, SourceReader};
use crate::config;
use crate::store::ingest::{Ingestor, KvChange};
use crate::store::{Cache, ResourceStore};
use crate::Revision;

/// The etcd source: kube-apiserver's storage read directly, every revision applied.
pub struct EtcdSource {
    /// How to reach etcd.
    pub config: EtcdConfig,
    /// How often the cache is compared with etcd (`consistency.rs`); zero: never.
    pub check_interval: Duration,
}

impl Source for EtcdSource {
    fn run(
        self: Box<Self>,
        cache: Arc<Cache>,
        shutdown: watch::Receiver<bool>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            // The check asks ingestion, the one writer, to re-list a resource it finds
            // different from etcd.
            let (relist_tx, relist_rx) = mpsc::channel(64);
            let check = (!self.check_interval.is_zero()).then(|| {
                tokio::spawn(super::consistency::run(
                    self.config.clone(),
                    cache.clone(),
                    self.check_interval,
                    relist_tx,
                    shutdown.clone(),
                ))
            });
            run(self.config, cache, shutdown, relist_rx).await;
            if let Some(check) = check {
                check.abort();
            }
        })
    }
}

/// How the etcd answering differs from the one the cache followed: what a log says of a
/// restore or a replacement.
#[derive(Debug)]
enum Divergence {
    /// A resume found another cluster ID.
    Cluster { found: u64, followed: u64 },
    /// A watch response carried another cluster ID.
    WatchCluster { found: u64, followed: u64 },
    /// etcd's current revision is below the applied one.
    Behind {
        current: Revision,
        applied: Revision,
    },
    /// etcd's history does not hold the last change applied, at its revision.
    History { revision: Revision, key: Vec<u8> },
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Divergence::Cluster { found, followed } => write!(
                f,
                "its cluster ID is {found:x}, the cache followed {followed:x}"
            ),
            Divergence::WatchCluster { found, followed } => write!(
                f,
                "its watch answers for cluster {found:x}, the cache followed {followed:x}"
            ),
            Divergence::Behind { current, applied } => write!(
                f,
                "its revision is {current}, the cache applied up to {applied}"
            ),
            Divergence::History { revision, key } => write!(
                f,
                "at revision {revision} its history does not hold the change the cache applied to {}",
                String::from_utf8_lossy(key)
            ),
        }
    }
}

/// Runs ingestion until `shutdown` turns true; each etcd directory received on `relist`
/// (a resource the consistency check found different) is read again and loaded into a
/// new epoch.
pub async fn run(
    config: EtcdConfig,
    cache: Arc<Cache>,
    shutdown: watch::Receiver<bool>,
    relist: mpsc::Receiver<String>,
) {
    // Exported from the start, at zero: an alert on their increase sees the first one.
    for name in [
        "watchd_etcd_reconnects_total",
        "watchd_etcd_replaced_total",
        "watchd_relists_total",
    ] {
        metrics::counter!(name).increment(0);
    }
    let follow = EtcdFollow {
        ingestor: Ingestor::new(cache.clone()),
        config,
        cache,
        replay: true,
        sync_at: None,
        followed: Followed::default(),
        relist,
    };
    reflector::reflect(follow, shutdown).await;
}

/// etcd in the reflector's loop: the whole keyspace, listed under the prefix and
/// watched from the listed revision.
struct EtcdFollow {
    config: EtcdConfig,
    cache: Arc<Cache>,
    ingestor: Ingestor,
    /// The first list replays etcd's recent history (so watches from before a restart
    /// resume).
    replay: bool,
    /// The cache is synced once the replay reached the revision etcd had.
    sync_at: Option<Revision>,
    /// Which etcd the cache follows: its cluster, and the last change applied.
    followed: Followed,
    /// Directories the consistency check asks to be read again.
    relist: mpsc::Receiver<String>,
}

impl Follow for EtcdFollow {
    fn attempt<'a>(&'a mut self, resume: &'a mut Option<Revision>) -> Attempt<'a> {
        Box::pin(async move {
            let cache = self.cache.clone();
            let resuming = resume.is_some();
            let attempt = async {
                let mut client = self.config.connect().await?;
                if let Some(applied) = *resume {
                    if let Some(why) = self.followed.replaced(&mut client, applied).await? {
                        return Ok(End::Replaced(why.to_string()));
                    }
                } else {
                    let (listed, current, cluster) =
                        initial_list(&mut client, &mut self.ingestor, self.replay).await?;
                    self.replay = false;
                    *resume = Some(listed);
                    self.followed = Followed {
                        cluster,
                        last: None,
                    };
                    if listed >= current {
                        cache.set_synced(true);
                    } else {
                        self.sync_at = Some(current);
                    }
                }
                let from = resume.unwrap_or_default().next();
                let end = watch(
                    &mut client,
                    from,
                    &mut self.ingestor,
                    (resume, &mut self.followed),
                    &mut self.sync_at,
                    &mut self.relist,
                )
                .await;
                Ok::<_, SourceError>(end)
            };
            tokio::select! {
                r = attempt => r.unwrap_or_else(End::Failed),
                // A read found etcd behind the cache while the watch runs: etcd may answer
                // reads as another cluster, so check it now, as at a reconnect.
                _ = cache.source_behind_reported(), if resuming => End::Recheck,
            }
        })
    }

    fn lost(&mut self) {
        self.cache.set_watch_live(false);
    }

    fn relisting(&mut self, end: &End, resume: Option<Revision>) {
        match end {
            End::Replaced(why) => {
                tracing::error!(
                    applied = ?resume,
                    %why,
                    "etcd is not the one the cache followed (restored from a backup, or replaced): \
                     ending every watch with 410 and re-listing"
                );
                metrics::counter!("watchd_etcd_replaced_total").increment(1);
            }
            other => {
                tracing::warn!(?resume, why = ?other, "etcd compacted past the resume revision; re-listing");
            }
        }
        metrics::counter!("watchd_relists_total").increment(1);
    }

    fn retrying(&mut self, end: &End, resume: Option<Revision>, backoff: Duration) {
        match end {
            End::Recheck => {
                tracing::warn!(?resume, "a consistent read found etcd's revision below the applied one; checking etcd now");
            }
            other => {
                let error = match other {
                    End::Failed(e) => e.to_string(),
                    _ => format!("{other:?}"),
                };
                tracing::warn!(%error, retry_in = ?backoff, ?resume, "etcd connection lost");
                metrics::counter!("watchd_etcd_reconnects_total").increment(1);
            }
        }
    }

    fn retry_now(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        // etcd is back, and a read found it behind the cache: check it now.
        Box::pin(async {
            self.cache.source_behind_reported().await;
            tracing::info!("a consistent read reached etcd first; reconnecting now");
        })
    }
}

/// Reads everything under the prefix at one revision, page by page, and loads it as a
/// new epoch. With `replay`, that revision is up to [`config::STARTUP_REPLAY_REVISIONS`]
/// back, as far as etcd still has history, so that the watch that follows replays the
/// changes since into the event log: a watch a client opened on a watchd that restarted
/// (or on the watchd below this one, in a tier) resumes instead of re-listing. Returns
/// the revision listed and etcd's current one.
async fn initial_list(
    client: &mut EtcdClient,
    ingestor: &mut Ingestor,
    replay: bool,
) -> Result<(Revision, Revision, u64), SourceError> {
    let (current, cluster) = current_header(client).await.map_err(failed("list"))?;
    let revision = if replay {
        replay_start(client, current).await
    } else {
        current
    };
    let revision = revision.0;
    let prefix = format!("{}/", ingestor.cache().prefix());
    let kvs = list_prefix(client, &prefix, Revision(revision), "list").await?;
    let count = kvs.len();
    ingestor.load_epoch(Revision(revision), kvs);
    tracing::info!(revision, current = %current, keys = count, prefix = %prefix, "initial list done");
    if revision < current.0 {
        tracing::info!(from = revision, to = %current, "replaying etcd's history since the list into the event log");
    }
    Ok((Revision(revision), current, cluster))
}

/// Every key under `prefix` at `revision`, with its value and mod_revision, read page by
/// page (`during`: the step a failure names).
async fn list_prefix(
    client: &mut EtcdClient,
    prefix: &str,
    revision: Revision,
    during: &'static str,
) -> Result<Vec<(Vec<u8>, Vec<u8>, Revision)>, SourceError> {
    let end = super::prefix_end(prefix.as_bytes());
    let mut start = prefix.as_bytes().to_vec();
    let mut kvs = Vec::new();
    loop {
        let opts = GetOptions::new()
            .with_range(end.clone())
            .with_limit(config::INITIAL_LIST_PAGE)
            .with_revision(revision.0);
        let mut resp = client
            .kv
            .get(start.clone(), Some(opts))
            .await
            .map_err(failed(during))?;
        let more = resp.more();
        let page = resp.take_kvs();
        let Some(last) = page.last() else { break };
        start = last.key().to_vec();
        start.push(0);
        for kv in page {
            let rev = Revision(kv.mod_revision());
            let (k, v) = kv.into_key_value();
            kvs.push((k, v, rev));
        }
        if !more {
            break;
        }
    }
    Ok(kvs)
}

/// Reads one etcd directory at the applied revision and loads it into a new epoch of the
/// resources it feeds: the consistency check found the cache different from etcd.
async fn relist_dir(
    client: &mut EtcdClient,
    ingestor: &mut Ingestor,
    dir: &str,
) -> Result<(), SourceError> {
    let cache = ingestor.cache().clone();
    let at = cache.progress().applied();
    let prefix = format!("{}/{dir}/", cache.prefix());
    let kvs = list_prefix(client, &prefix, at, "re-list").await?;
    metrics::counter!("watchd_relists_total").increment(1);
    ingestor.load_dir(dir, at, kvs);
    Ok(())
}

/// What tells the etcd the cache follows from another: its cluster ID, and the last
/// change applied (its key, its revision, whether it was a deletion).
#[derive(Debug, Default)]
struct Followed {
    cluster: u64,
    last: Option<(Vec<u8>, Revision, bool)>,
}

impl Followed {
    /// Whether `cluster` (from a response header) is another cluster than the one
    /// followed; an unknown ID (0) on either side tells nothing.
    fn is_other(&self, cluster: u64) -> bool {
        self.cluster != 0 && cluster != 0 && cluster != self.cluster
    }

    /// Why the etcd `client` reaches is not the one the cache applied up to `applied`
    /// from, if it is not: another cluster ID (a new cluster), a current revision below
    /// `applied` (restored from an older backup, or a new empty etcd), or a last change
    /// that etcd's history does not hold at its revision (restored, then written past
    /// `applied`). A history compacted past that revision proves nothing (the watch
    /// that follows re-lists).
    async fn replaced(
        &self,
        client: &mut EtcdClient,
        applied: Revision,
    ) -> Result<Option<Divergence>, SourceError> {
        let (current, cluster) = current_header(client).await.map_err(failed("resume"))?;
        if self.is_other(cluster) {
            return Ok(Some(Divergence::Cluster {
                found: cluster,
                followed: self.cluster,
            }));
        }
        if current < applied {
            return Ok(Some(Divergence::Behind { current, applied }));
        }
        let Some((key, rev, deleted)) = &self.last else {
            return Ok(None);
        };
        let opts = GetOptions::new().with_revision(rev.0);
        let held = match client.kv.get(key.clone(), Some(opts)).await {
            Ok(r) => r.kvs().first().map(|kv| Revision(kv.mod_revision())),
            Err(e) if is_compacted(&e) => return Ok(None),
            Err(e) => return Err(failed("resume")(e)),
        };
        let agrees = match (deleted, held) {
            (false, Some(r)) => r == *rev,
            (true, None) => true,
            _ => false,
        };
        Ok((!agrees).then(|| Divergence::History {
            revision: *rev,
            key: key.clone(),
        }))
    }
}

/// Where a replaying list starts: [`config::STARTUP_REPLAY_REVISIONS`] before `current`,
/// or etcd's oldest revision if it compacted later. A watch of every key from there
/// tells which: every revision up to `current` changed some key, so it either sends
/// events (the history is there) or is cancelled with the compaction revision. `current`
/// if etcd does not say in time.
async fn replay_start(client: &mut EtcdClient, current: Revision) -> Revision {
    let floor = (current.0 - config::STARTUP_REPLAY_REVISIONS).max(1);
    if floor >= current.0 {
        return current;
    }
    let probe = async {
        // In fragments: only the first response with events is read, but without them
        // etcd sends its first batch of history (up to 1 000 revisions) as one message:
        // all 100 000 objects of a start whose objects were written 100 per transaction,
        // a 99 MiB receive buffer and as much again decoded (the start's peak heap).
        let opts = WatchOptions::new()
            .with_all_keys()
            .with_start_revision(floor)
            .with_fragment();
        let mut stream = client.watch.watch(vec![0u8], Some(opts)).await.ok()?;
        loop {
            let resp = stream.message().await.ok()??;
            if resp.compact_revision() > 0 {
                return Some(Revision(resp.compact_revision().max(floor)));
            }
            if resp.canceled() {
                return None;
            }
            if !resp.events().is_empty() {
                return Some(Revision(floor));
            }
        }
    };
    match tokio::time::timeout(std::time::Duration::from_secs(5), probe).await {
        Ok(Some(start)) => start.min(current),
        _ => current,
    }
}

async fn watch(
    client: &mut EtcdClient,
    from: Revision,
    ingestor: &mut Ingestor,
    (resume, followed): (&mut Option<Revision>, &mut Followed),
    sync_at: &mut Option<Revision>,
    relist: &mut mpsc::Receiver<String>,
) -> End {
    // Fragments: without them etcd sends a watch that catches up (a replay, a resume
    // after a gap) up to 1 000 revisions in one message, which tonic's receive buffer
    // grows to hold and then keeps for the stream's life (47 MB after replaying 20 000
    // JSON pods written 100 per transaction). With them no message passes etcd's
    // --max-request-bytes (1.5 MiB by default).
    let opts = |from: Revision| {
        WatchOptions::new()
            .with_all_keys()
            .with_start_revision(from.0)
            .with_fragment()
    };
    let mut stream = match client.watch.watch(vec![0u8], Some(opts(from))).await {
        Ok(s) => s,
        Err(e) => return End::Failed(failed("watch")(e)),
    };
    let cache = ingestor.cache().clone();
    // The changes of a revision that a fragment split: applied with the rest of it.
    let mut held: Vec<KvChange> = Vec::new();
    // Whether the stream caught up through large responses since it opened: tonic's
    // receive buffer grew to hold them (to 4 MiB for etcd's 1.5 MiB fragments) and
    // keeps that size. When the stream was last opened again for that.
    let mut grown = false;
    let mut from = from;
    let mut reopened: Option<tokio::time::Instant> = None;
    // This loop is the cache's one writer: it also drops the history past the window
    // of resources that stopped changing.
    let mut sweep = tokio::time::interval(cache.history_sweep_interval());
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let message = tokio::select! {
            m = stream.message() => m,
            _ = sweep.tick() => {
                ingestor.expire_history(std::time::Instant::now());
                continue;
            }
            Some(dir) = relist.recv() => {
                // Between two responses the cache holds every revision up to the applied
                // one, whole: the directory read at that revision replaces it there.
                if let Err(e) = relist_dir(client, ingestor, &dir).await {
                    return End::Failed(e);
                }
                continue;
            }
        };
        let mut resp = match message {
            Ok(Some(r)) => r,
            Ok(None) => return End::Failed(SourceError::WatchEnded),
            Err(e) => return End::Failed(failed("watch")(e)),
        };
        if resp.compact_revision() > 0 {
            return End::Expired(format!("compacted at {}", resp.compact_revision()));
        }
        if resp.canceled() {
            return End::Failed(SourceError::WatchCanceled(resp.cancel_reason().to_string()));
        }
        if resp.created() {
            cache.set_watch_live(true);
            if reopened.is_none() {
                tracing::info!(from = %from, "watching etcd");
            }
        }
        let header_rev = resp.header().map_or(0, |h| h.revision());
        let cluster = resp.header().map_or(0, |h| h.cluster_id());
        if followed.is_other(cluster) {
            return End::Replaced(
                Divergence::WatchCluster {
                    found: cluster,
                    followed: followed.cluster,
                }
                .to_string(),
            );
        }
        // A large response of a stream catching up (etcd ahead of its last event, or a
        // response in fragments): not a large revision of a stream that keeps up, whose
        // responses are not measured at all.
        let catching_up = resp.0.fragment
            || resp
                .0
                .events
                .last()
                .and_then(|e| e.kv.as_ref())
                .is_some_and(|kv| kv.mod_revision < header_rev);
        if catching_up && !grown {
            let kv_bytes = |kv: &Option<etcd_client::proto::PbKeyValue>| {
                kv.as_ref().map_or(0, |kv| kv.key.len() + kv.value.len())
            };
            let bytes: usize = resp.0.events.iter().map(|e| kv_bytes(&e.kv)).sum();
            grown = bytes >= config::WATCH_RECEIVE_KEEP_BYTES;
        }
        let mut changes = std::mem::take(&mut held);
        changes.extend(
            std::mem::take(&mut resp.0.events)
                .into_iter()
                .filter_map(into_change),
        );
        if resp.0.fragment {
            metrics::counter!("watchd_etcd_watch_fragments_total").increment(1);
            // More of this response follows, and its last revision may go on there: a
            // revision is applied whole or not at all.
            if let Some(last) = changes.last().map(|c| c.revision) {
                let split = changes.partition_point(|c| c.revision < last);
                held = changes.split_off(split);
            }
        }
        #[cfg(feature = "test-hooks")]
        super::test_hooks::drop_event(&mut changes);
        if let Err(e) = last_states_of_unheld(client, ingestor, &mut changes).await {
            // Nothing of this response is applied: the watch resumes before it.
            return End::Failed(e);
        }
        if let Some(last) = changes.last() {
            *resume = Some(last.revision);
            followed.last = Some((last.key.clone(), last.revision, last.value.is_none()));
        }
        ingestor.apply(changes);
        let applied = cache.progress().applied();
        if sync_at.is_some_and(|at| applied >= at) {
            *sync_at = None;
            cache.set_synced(true);
            tracing::info!(%applied, "history replayed: the cache is synced");
        }
        metrics::gauge!("watchd_etcd_revision").set(header_rev as f64);
        metrics::gauge!("watchd_revision_lag").set((header_rev - applied.0).max(0) as f64);
        let due = reopened.is_none_or(|at| at.elapsed() >= config::WATCH_REOPEN_MIN_INTERVAL);
        if grown && due && held.is_empty() && applied.0 >= header_rev {
            // Caught up after large responses (a replay, a resume after a gap): a new
            // stream from the next revision, on the same connection, gives the grown
            // receive buffer back. Nothing is lost: the old stream's later responses
            // are dropped with it, and the new one starts where they would have.
            grown = false;
            from = applied.next();
            match client.watch.watch(vec![0u8], Some(opts(from))).await {
                Ok(s) => {
                    stream = s;
                    reopened = Some(tokio::time::Instant::now());
                    metrics::counter!("watchd_etcd_watch_reopens_total").increment(1);
                    tracing::debug!(%from, "caught up: etcd watch opened again to give back its receive buffer");
                }
                Err(e) => return End::Failed(failed("watch")(e)),
            }
        }
    }
}

/// Reads, at the revision before, the last state of each object these changes delete
/// that the cache neither holds nor creates earlier in them: its DELETED event carries
/// it. Rare (an object lost, or one some resource could not hold), so read one by one.
/// One etcd compacted meanwhile is deleted without it, logged and counted; any other
/// failure is the watch's, which then resumes before these changes.
async fn last_states_of_unheld(
    client: &mut EtcdClient,
    ingestor: &Ingestor,
    changes: &mut [KvChange],
) -> Result<(), SourceError> {
    // Only deletions are looked at; the keys put before one, only once one is unheld.
    let mut unheld = Vec::new();
    let (mut put, mut put_before) = (std::collections::HashSet::<&[u8]>::new(), 0);
    for (i, c) in changes.iter().enumerate() {
        if c.value.is_some() || c.revision.0 <= 1 || ingestor.holds(&c.key) {
            continue;
        }
        let earlier = &changes[put_before..i];
        put.extend(
            earlier
                .iter()
                .filter(|p| p.value.is_some())
                .map(|p| &p.key[..]),
        );
        put_before = i;
        if !put.contains(&c.key[..]) {
            unheld.push(i);
        }
    }
    for i in unheld {
        let c = &mut changes[i];
        let opts = GetOptions::new().with_revision(c.revision.0 - 1);
        match client.kv.get(c.key.clone(), Some(opts)).await {
            Ok(mut resp) => {
                if let Some(kv) = resp.take_kvs().into_iter().next() {
                    c.prev_revision = Revision(kv.mod_revision());
                    c.prev_value = Some(kv.into_key_value().1);
                }
            }
            Err(e) if is_compacted(&e) => {
                metrics::counter!("watchd_deletions_without_last_state_total").increment(1);
                tracing::warn!(key = %String::from_utf8_lossy(&c.key), revision = %c.revision, error = %e,
                    "an object the cache never held was deleted, and etcd compacted its last state: its watchers get no DELETED event for it");
            }
            Err(e) => return Err(failed("read the last state of a deleted object")(e)),
        }
    }
    Ok(())
}

/// Whether etcd refused a read because the revision asked for was compacted.
fn is_compacted(e: &etcd_client::Error) -> bool {
    e.to_string()
        .contains("required revision has been compacted")
}

fn into_change(ev: etcd_client::proto::PbEvent) -> Option<KvChange> {
    // mvccpb.Event.EventType.
    const PUT: i32 = 0;
    const DELETE: i32 = 1;
    let kv = ev.kv?;
    // The values are taken from etcd's response, not copied. A deletion's last state is
    // read only where the cache never held it (`last_states_of_unheld`).
    let value = match ev.r#type {
        PUT => Some(kv.value),
        DELETE => None,
        other => {
            tracing::error!(event_type = other, key = %String::from_utf8_lossy(&kv.key),
                "etcd sent a watch event of an unknown type; skipped");
            return None;
        }
    };
    Some(KvChange {
        key: kv.key,
        value,
        revision: Revision(kv.mod_revision),
        prev_value: None,
        prev_revision: Revision::ZERO,
    })
}

/// Asks etcd for its current revision with a linearizable read: what a consistent read
/// must wait for.
pub async fn current_revision(client: &mut EtcdClient) -> Result<Revision, etcd_client::Error> {
    current_header(client).await.map(|(r, _)| r)
}

/// etcd's current revision (a linearizable read) and its cluster ID.
async fn current_header(client: &mut EtcdClient) -> Result<(Revision, u64), etcd_client::Error> {
    // Any key works; the header carries the store revision. count_only keeps it cheap.
    let resp = client
        .kv
        .get(
            vec![0u8],
            Some(GetOptions::new().with_count_only().with_limit(1)),
        )
        .await?;
    let header = resp.header();
    Ok((
        Revision(header.map_or(0, |h| h.revision())),
        header.map_or(0, |h| h.cluster_id()),
    ))
}

/// Reads of etcd for request handlers: its current revision (what a consistent read
/// waits for), and ranges and keys for the resources whose cache is not ready (kube-
/// apiserver reads etcd for those too). The read path asks these questions of a source,
/// not of an etcd client.
#[derive(Clone)]
pub struct EtcdReader {
    config: EtcdConfig,
    client: Arc<tokio::sync::Mutex<Option<EtcdClient>>>,
    /// The current-revision request shared by concurrent consistent reads.
    flight: Arc<RevisionFlight>,
}

impl EtcdReader {
    /// A reader connecting lazily with `config`.
    pub fn new(config: EtcdConfig) -> Self {
        EtcdReader {
            config,
            client: Arc::new(tokio::sync::Mutex::new(None)),
            flight: Arc::default(),
        }
    }

    async fn client(&self) -> Result<EtcdClient, ReadError> {
        let mut guard = self.client.lock().await;
        if let Some(c) = guard.as_ref() {
            return Ok(c.clone());
        }
        let c = self.config.connect().await?;
        *guard = Some(c.clone());
        Ok(c)
    }

    /// Runs `read` with a client, bounded by `timeout`; a failed connection is dropped so
    /// the next read reconnects.
    async fn with_client<T, F, Fut>(&self, timeout: Duration, read: F) -> Result<T, ReadError>
    where
        F: FnOnce(EtcdClient) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let fut = async {
            let client = self.client().await?;
            match read(client).await {
                Ok(v) => Ok(v),
                Err(e) => {
                    if is_compacted(&e) {
                        return Err(ReadError::Compacted);
                    }
                    let text = e.to_string();
                    if text.contains("required revision is a future revision") {
                        return Err(ReadError::Future);
                    }
                    *self.client.lock().await = None;
                    Err(failed("range read")(e).into())
                }
            }
        };
        tokio::time::timeout(timeout, fut)
            .await
            .unwrap_or_else(|_| Err(SourceError::EtcdTimeout.into()))
    }

    /// etcd's current revision, via a linearizable range request that started after this
    /// call, shared with the calls that wait for it (bounded by `timeout`).
    pub async fn current(&self, timeout: Duration) -> Result<Revision, ReadError> {
        let reader = self.clone();
        let shared = self.flight.current(move || async move {
            reader
                .with_client(
                    timeout,
                    |mut c| async move { current_revision(&mut c).await },
                )
                .await
                .map_err(|e| e.to_string())
        });
        match tokio::time::timeout(timeout, shared).await {
            Ok(Ok(revision)) => Ok(revision),
            Ok(Err(message)) => Err(SourceError::Shared(message).into()),
            Err(_) => Err(SourceError::EtcdTimeout.into()),
        }
    }

    /// Keys in [`start`, `end`) at `revision` (None: the current one, read
    /// linearizably), at most `limit` (0: all).
    pub async fn range(
        &self,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: i64,
        revision: Option<Revision>,
        timeout: Duration,
    ) -> Result<RangePage, ReadError> {
        self.with_client(timeout, |mut c| async move {
            let mut opts = GetOptions::new().with_range(end).with_limit(limit);
            if let Some(r) = revision {
                opts = opts.with_revision(r.0);
            }
            let mut resp = c.kv.get(start, Some(opts)).await?;
            let revision = Revision(resp.header().map_or(0, |h| h.revision()));
            let (more, count) = (resp.more(), resp.count());
            let kvs = resp
                .take_kvs()
                .into_iter()
                .map(|kv| {
                    let rev = Revision(kv.mod_revision());
                    let (k, v) = kv.into_key_value();
                    (k, v, rev)
                })
                .collect();
            Ok(RangePage {
                kvs,
                more,
                count,
                revision,
            })
        })
        .await
    }
}

impl SourceReader for EtcdReader {
    /// etcd's revision, whatever the resource: the watch covers the whole keyspace, so
    /// the cache reaches any revision etcd has.
    fn current_revision<'a>(
        &'a self,
        _store: &'a ResourceStore,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Revision, ReadError>> {
        Box::pin(self.current(timeout))
    }

    fn range(
        &self,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: i64,
        revision: Option<Revision>,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<RangePage, ReadError>> {
        Box::pin(EtcdReader::range(
            self, start, end, limit, revision, timeout,
        ))
    }
}
