//! The upstream source: a Kubernetes API server (kube-apiserver, or another watchd) read
//! through its API, for clusters whose etcd is out of reach, and for tiers of watchd.
//!
//! Each resource the cache serves is followed on its own, in the reflector's loop
//! (`reflector.rs`): a streaming list (a watch with
//! `sendInitialEvents=true`, ended by the `k8s.io/initial-events-end` bookmark) where the
//! upstream offers it, else a paged list; then a watch from the list's resourceVersion
//! with bookmarks, resumed from the last resourceVersion seen after a disconnect or the
//! end of its `timeoutSeconds`, re-listed (a new epoch of that resource) on 410. Objects
//! are the upstream's JSON, and resourceVersions the upstream's, so a client can move
//! between watchd and the upstream with its last resourceVersion. A resource the
//! upstream does not serve (404, 403, 405 on its first list) is dropped from the cache,
//! so its requests pass through. CustomResourceDefinitions are followed like any
//! resource, and the resources they define are followed as they appear and dropped as
//! they go.
//!
//! Each resource has its own applied revision (events of different resources arrive on
//! different streams, in no common order). A consistent read asks the upstream for its
//! current list resourceVersion (`limit=1`) and waits until the resource's watch passed
//! it. A quiet resource's watch says nothing, so when a reader waits, a short probe
//! watch from the resource's applied revision (with bookmarks, `timeoutSeconds=3`, whose
//! bookmark both kube-apiserver and watchd send two seconds before its end) proves which
//! events lie before the upstream's current revision; once the main watch applied them,
//! the resource's applied revision moves to the bookmark's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::watch;

mod probe;
mod wire;

use self::probe::probe_loop;
use self::wire::{
    error_end, parse_rv, percent_encode, read_event, status_end, status_message,
    watch_timeout_seconds, with_type_meta, LineReader, ListBody, Meta, ObjectHead,
};
use super::reflector::{self, Attempt, End, Follow};
use super::{BoxFuture, RangePage, ReadError, Source, SourceError, SourceReader};
use crate::client::upstream::UpstreamClient;
use crate::registry::ResourceInfo;
use crate::store::ingest::{Ingestor, ObjectChange};
use crate::store::{Cache, ResourceStore};
use crate::Revision;

/// Items per page of a list (client-go's reflector pages by 500).
const LIST_PAGE: usize = 500;
/// Largest list page or error body read.
const MAX_BODY: usize = 512 << 20;
/// How long one list page may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a streaming list may send nothing before its end bookmark: an upstream that
/// ignores `sendInitialEvents` sends nothing at all.
const STREAM_LIST_SILENCE: Duration = Duration::from_secs(15);
/// How often the supervisor looks for resources added or removed.
const SUPERVISE_EVERY: Duration = Duration::from_millis(100);
/// How long a reader's wait may go unanswered by the main watch before a probe starts.
const PROBE_GRACE: Duration = Duration::from_millis(20);
/// A probe watch's `timeoutSeconds`: the shortest whose pre-timeout bookmark both
/// kube-apiserver and watchd send (two seconds before the end).
const PROBE_TIMEOUT_SECONDS: u64 = 3;
/// The accept header of every read: JSON, which the cache keeps and splices.
const JSON: &str = "application/json";

/// The path of a resource's collection across all namespaces.
pub fn collection_path(info: &ResourceInfo) -> String {
    if info.group.is_empty() {
        format!("/api/{}/{}", info.version, info.resource)
    } else {
        format!("/apis/{}/{}/{}", info.group, info.version, info.resource)
    }
}

/// Feeds a per-resource cache ([`Cache::per_resource`]) from the upstream.
pub struct UpstreamSource {
    client: Arc<UpstreamClient>,
}

impl UpstreamSource {
    /// A source reading `client`'s server.
    pub fn new(client: Arc<UpstreamClient>) -> UpstreamSource {
        UpstreamSource { client }
    }
}

impl Source for UpstreamSource {
    fn run(
        self: Box<Self>,
        cache: Arc<Cache>,
        shutdown: watch::Receiver<bool>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(supervise(self.client, cache, shutdown))
    }
}

/// What the supervisor sees of one follower.
#[derive(Default)]
struct FollowState {
    /// Its first list was loaded (or the resource was dropped).
    loaded: AtomicBool,
    /// Its watch is established.
    live: AtomicBool,
}

struct Running {
    store: Arc<ResourceStore>,
    state: Arc<FollowState>,
    task: tokio::task::JoinHandle<()>,
}

/// Runs one follower per served resource, starting them for resources added (a new
/// CRD) and stopping them for resources removed; marks the cache synced once every
/// resource was loaded, and the watch live while every follower's watch is up.
async fn supervise(
    client: Arc<UpstreamClient>,
    cache: Arc<Cache>,
    mut shutdown: watch::Receiver<bool>,
) {
    tracing::info!(upstream = %client.server(), "reading from the upstream API server");
    let ingestor = Arc::new(Mutex::new(Ingestor::new(cache.clone())));
    let streaming = Arc::new(AtomicBool::new(true));
    let mut running: Vec<Running> = Vec::new();
    // Every follower writes under the ingestor's lock, so the sweep of the history past
    // its window takes it too; when a follower holds it (a list loading), the next
    // round sweeps, rather than this task waiting on a runtime thread.
    let mut swept = tokio::time::Instant::now();
    loop {
        if swept.elapsed() >= cache.history_sweep_interval() {
            let locked = match ingestor.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(mut ingestor) = locked {
                swept = tokio::time::Instant::now();
                ingestor.expire_history(std::time::Instant::now());
            }
        }
        let index = cache.resources();
        running.retain(|r| {
            let served = index.stores().iter().any(|s| Arc::ptr_eq(s, &r.store));
            if !served {
                r.task.abort();
            }
            served
        });
        for store in index.stores() {
            if running.iter().any(|r| Arc::ptr_eq(&r.store, store)) {
                continue;
            }
            let state = Arc::new(FollowState::default());
            let follower = Follower {
                client: client.clone(),
                cache: cache.clone(),
                store: store.clone(),
                ingestor: ingestor.clone(),
                state: state.clone(),
                streaming: streaming.clone(),
            };
            running.push(Running {
                store: store.clone(),
                state,
                task: tokio::spawn(follower.run()),
            });
        }
        if !cache.is_synced()
            && running
                .iter()
                .all(|r| r.state.loaded.load(Ordering::Acquire))
        {
            cache.set_synced(true);
            tracing::info!(
                resources = running.len(),
                "initial sync from the upstream done"
            );
        }
        cache.set_watch_live(
            running
                .iter()
                .all(|r| r.state.live.load(Ordering::Acquire) || r.task.is_finished()),
        );
        tokio::select! {
            _ = tokio::time::sleep(SUPERVISE_EVERY) => {}
            _ = shutdown.changed() => break,
        }
    }
    for r in running {
        r.task.abort();
    }
}

/// One resource followed by the reflector's loop.
struct Reflecting<'f> {
    f: &'f Follower,
    /// The resource's collection path.
    path: String,
}

impl Follow for Reflecting<'_> {
    fn attempt<'a>(&'a mut self, resume: &'a mut Option<Revision>) -> Attempt<'a> {
        let (f, path) = (self.f, self.path.as_str());
        Box::pin(async move {
            match *resume {
                Some(rv) => f.watch(path, rv, resume).await,
                None if f.streaming.load(Ordering::Acquire) => f.stream_list(path, resume).await,
                None => match f.list(path).await {
                    Ok(rv) => {
                        *resume = Some(rv);
                        f.watch(path, rv, resume).await
                    }
                    Err(end) => end,
                },
            }
        })
    }

    fn lost(&mut self) {
        self.f.state.live.store(false, Ordering::Release);
    }

    fn relisting(&mut self, end: &End, resume: Option<Revision>) {
        let resource = self.f.name();
        tracing::info!(%resource, ?resume, why = ?end, "the upstream no longer has the resourceVersion to resume from; re-listing");
        metrics::counter!("watchd_upstream_relists_total", "resource" => resource).increment(1);
    }

    fn retrying(&mut self, end: &End, resume: Option<Revision>, backoff: Duration) {
        let resource = self.f.name();
        match end {
            End::NotServed(code, message) => {
                tracing::warn!(%resource, code, error = %message, retry_in = ?backoff, "upstream read refused")
            }
            End::Failed(e) => {
                tracing::warn!(%resource, error = %e, retry_in = ?backoff, ?resume, "upstream watch lost")
            }
            other => {
                tracing::warn!(%resource, end = ?other, retry_in = ?backoff, "upstream watch ended")
            }
        }
        metrics::counter!("watchd_upstream_reconnects_total", "resource" => resource).increment(1);
    }

    fn not_served(&mut self, code: u16, message: &str) -> bool {
        if self.f.state.loaded.load(Ordering::Acquire) {
            return false;
        }
        let resource = self.f.name();
        tracing::warn!(%resource, code, %message, "the upstream does not serve this resource to watchd: not cached; its requests pass through");
        self.f.cache.unregister_store(&self.f.store);
        self.f.state.loaded.store(true, Ordering::Release);
        true
    }

    fn no_streaming_list(&mut self, why: &SourceError) {
        if self.f.streaming.swap(false, Ordering::AcqRel) {
            tracing::info!(reason = %why, "the upstream does not offer streaming lists; listing and watching");
        }
    }
}

/// Follows one resource.
struct Follower {
    client: Arc<UpstreamClient>,
    cache: Arc<Cache>,
    store: Arc<ResourceStore>,
    ingestor: Arc<Mutex<Ingestor>>,
    state: Arc<FollowState>,
    /// Shared by every follower: whether to try streaming lists.
    streaming: Arc<AtomicBool>,
}

impl Follower {
    fn name(&self) -> String {
        self.store.info.qualified_name()
    }

    async fn run(self) {
        let probe = probe_loop(self.client.clone(), self.store.clone());
        tokio::select! {
            _ = self.follow() => {}
            _ = probe => {}
        }
    }

    async fn follow(&self) {
        // Followers end by being aborted (their resource is no longer served, or the
        // supervisor stops): a shutdown signal that never comes.
        let (_never, shutdown) = watch::channel(false);
        let path = collection_path(&self.store.info);
        // Exported from the start, at zero: an alert on their increase sees the first one.
        for name in [
            "watchd_upstream_relists_total",
            "watchd_upstream_reconnects_total",
        ] {
            metrics::counter!(name, "resource" => self.name()).increment(0);
        }
        reflector::reflect(Reflecting { f: self, path }, shutdown).await;
    }

    /// A paged list: loads the resource at the first page's resourceVersion.
    async fn list(&self, path: &str) -> Result<Revision, End> {
        let mut items = Vec::new();
        let mut revision = None;
        let mut token = String::new();
        loop {
            let mut q = format!("{path}?limit={LIST_PAGE}");
            if !token.is_empty() {
                q.push_str("&continue=");
                q.push_str(&percent_encode(&token));
            }
            let (status, body) = self
                .client
                .get_body(&q, JSON, MAX_BODY, LIST_TIMEOUT)
                .await
                .map_err(SourceError::from)?;
            if status != 200 {
                return Err(status_end(status, &body));
            }
            let page: ListBody =
                serde_json::from_slice(&body).map_err(|source| SourceError::Undecodable {
                    what: "list",
                    source,
                })?;
            if revision.is_none() {
                revision = Some(parse_rv(&page.metadata.resource_version)?);
            }
            for item in page.items {
                let head: ObjectHead = serde_json::from_str(item.get()).map_err(|source| {
                    SourceError::Undecodable {
                        what: "list item",
                        source,
                    }
                })?;
                let rv = parse_rv(&head.metadata.resource_version)?;
                let key = self.object_key(&head.metadata);
                items.push((key, with_type_meta(item.get(), &head, &self.store.info), rv));
            }
            token = page.metadata.cont;
            if token.is_empty() {
                break;
            }
        }
        let revision = revision.unwrap_or_default();
        self.load(revision, items);
        Ok(revision)
    }

    fn load(&self, revision: Revision, items: Vec<(String, Vec<u8>, Revision)>) {
        let mut ingestor = self.ingestor.lock().unwrap_or_else(|e| e.into_inner());
        ingestor.load_resource(&self.store, revision, items);
        drop(ingestor);
        self.state.loaded.store(true, Ordering::Release);
    }

    /// A streaming list, then the same stream as the watch.
    async fn stream_list(&self, path: &str, resume: &mut Option<Revision>) -> End {
        let q = format!(
            "{path}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={}",
            watch_timeout_seconds()
        );
        // A 400 or 422 (an upstream that does not know the parameters refuses them) is
        // already a `NoStreamingList`.
        let mut lines = match self.open(&q).await {
            Ok(l) => l,
            Err(end) => return end,
        };
        let mut items = Vec::new();
        loop {
            let batch = match tokio::time::timeout(STREAM_LIST_SILENCE, lines.next_lines()).await {
                Err(_) => return End::NoStreamingList(SourceError::NoEndBookmark),
                Ok(Err(e)) => return End::Failed(e),
                Ok(Ok(None)) => return End::NoStreamingList(SourceError::EndedBeforeBookmark),
                Ok(Ok(Some(b))) => b,
            };
            let mut rest = batch.into_iter();
            for line in rest.by_ref() {
                match self.event(&line) {
                    Ok(Event::Change(c)) if c.value.is_some() => {
                        if let Some(v) = c.value {
                            items.push((c.object_key, v, c.revision));
                        }
                    }
                    Ok(Event::Bookmark(rv, true)) => {
                        self.load(rv, std::mem::take(&mut items));
                        *resume = Some(rv);
                        self.state.live.store(true, Ordering::Release);
                        break;
                    }
                    Ok(Event::Bookmark(..)) => {}
                    Ok(Event::Change(_)) => {
                        return End::Failed(SourceError::DeletionInInitialEvents)
                    }
                    Ok(Event::Error(code, message)) => return error_end(code, message),
                    Err(e) => return End::Failed(e),
                }
            }
            if resume.is_some() {
                // What followed the end bookmark in the same read.
                let left: Vec<Bytes> = rest.collect();
                if let Some(end) = self.apply_lines(left, resume) {
                    return end;
                }
                return self.pump(lines, resume).await;
            }
        }
    }

    /// A watch from `from`.
    async fn watch(&self, path: &str, from: Revision, resume: &mut Option<Revision>) -> End {
        let q = format!(
            "{path}?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={}",
            from.0,
            watch_timeout_seconds()
        );
        let lines = match self.open(&q).await {
            Ok(l) => l,
            Err(e) => return e,
        };
        self.state.live.store(true, Ordering::Release);
        self.pump(lines, resume).await
    }

    /// Opens a watch: the line reader of its body, or how it was refused.
    async fn open(&self, q: &str) -> Result<LineReader, End> {
        let resp = self.client.get(q, JSON).await.map_err(SourceError::from)?;
        let status = resp.status().as_u16();
        if status != 200 {
            let body = http_body_util::Limited::new(resp.into_body(), 1 << 20)
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            return Err(status_end(status, &body));
        }
        Ok(LineReader::new(resp.into_body()))
    }

    /// Applies a watch's events until it ends.
    async fn pump(&self, mut lines: LineReader, resume: &mut Option<Revision>) -> End {
        loop {
            let batch = match lines.next_lines().await {
                Ok(Some(b)) => b,
                Ok(None) => return End::Closed,
                Err(e) => return End::Failed(e),
            };
            if let Some(end) = self.apply_lines(batch, resume) {
                return end;
            }
        }
    }

    /// Applies the events of one read, in order; an ERROR event ends the watch (after
    /// the events before it are applied).
    fn apply_lines(&self, lines: Vec<Bytes>, resume: &mut Option<Revision>) -> Option<End> {
        let mut changes = Vec::new();
        let mut progress = Revision::ZERO;
        let mut end = None;
        for line in lines {
            match self.event(&line) {
                Ok(Event::Change(c)) => {
                    progress = progress.max(c.revision);
                    changes.push(c);
                }
                Ok(Event::Bookmark(rv, _)) => progress = progress.max(rv),
                Ok(Event::Error(code, message)) => {
                    end = Some(error_end(code, message));
                    break;
                }
                Err(e) => {
                    end = Some(End::Failed(e));
                    break;
                }
            }
        }
        if progress > Revision::ZERO {
            let mut ingestor = self.ingestor.lock().unwrap_or_else(|e| e.into_inner());
            ingestor.apply_resource(&self.store, changes, progress);
            *resume = Some(resume.unwrap_or_default().max(progress));
        }
        end
    }

    fn object_key(&self, meta: &Meta) -> String {
        if self.store.info.namespaced {
            format!("{}/{}", meta.namespace, meta.name)
        } else {
            meta.name.clone()
        }
    }

    /// One line of a watch.
    fn event(&self, line: &[u8]) -> Result<Event, SourceError> {
        let (ev, head) = read_event(line)?;
        if ev.kind == "ERROR" {
            return Ok(Event::Error(head.code, head.message));
        }
        let rv = parse_rv(&head.metadata.resource_version)?;
        if ev.kind == "BOOKMARK" {
            let end = head
                .metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .is_some_and(|v| v == "true");
            return Ok(Event::Bookmark(rv, end));
        }
        let value = with_type_meta(ev.object.get(), &head, &self.store.info);
        let object_key = self.object_key(&head.metadata);
        Ok(Event::Change(match ev.kind.as_str() {
            "ADDED" | "MODIFIED" => ObjectChange {
                object_key,
                value: Some(value),
                prev_value: None,
                revision: rv,
            },
            "DELETED" => ObjectChange {
                object_key,
                value: None,
                prev_value: Some(value),
                revision: rv,
            },
            other => return Err(SourceError::UnknownEventType(other.to_string())),
        }))
    }
}

/// One watch line, understood.
enum Event {
    Change(ObjectChange),
    /// A bookmark's resourceVersion, and whether it ends the initial events.
    Bookmark(Revision, bool),
    /// An ERROR event's Status code and message.
    Error(u16, String),
}

/// What the read path asks of the upstream.
pub struct UpstreamReader {
    client: Arc<UpstreamClient>,
}

impl UpstreamReader {
    /// A reader of `client`'s server.
    pub fn new(client: Arc<UpstreamClient>) -> UpstreamReader {
        UpstreamReader { client }
    }
}

impl SourceReader for UpstreamReader {
    /// The resourceVersion of a one-item list of the resource: the upstream's current
    /// revision as a consistent list sees it.
    fn current_revision<'a>(
        &'a self,
        store: &'a ResourceStore,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Revision, ReadError>> {
        Box::pin(async move {
            let q = format!("{}?limit=1", collection_path(&store.info));
            let accept =
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json";
            let (status, body) = self
                .client
                .get_body(&q, accept, MAX_BODY, timeout)
                .await
                .map_err(SourceError::from)?;
            if status != 200 {
                return Err(SourceError::Refused {
                    code: status,
                    message: status_message(&body),
                }
                .into());
            }
            let list: ListBody =
                serde_json::from_slice(&body).map_err(|source| SourceError::Undecodable {
                    what: "the upstream's list",
                    source,
                })?;
            Ok(parse_rv(&list.metadata.resource_version)?)
        })
    }

    /// Reads of a resource still loading go to the upstream (the same answer, sooner
    /// than a 429).
    fn reads_unready(&self) -> bool {
        false
    }

    fn range(
        &self,
        _start: Vec<u8>,
        _end: Vec<u8>,
        _limit: i64,
        _revision: Option<Revision>,
        _timeout: Duration,
    ) -> BoxFuture<'_, Result<RangePage, ReadError>> {
        Box::pin(async {
            Err(ReadError::Unsupported(
                "storage is (re)initializing: the resource is being loaded from the upstream API server".into(),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtin::find as info;

    #[test]
    fn collections_are_addressed_as_the_api_addresses_them() {
        assert_eq!(collection_path(&info("", "pods")), "/api/v1/pods");
        assert_eq!(
            collection_path(&info("apps", "deployments")),
            "/apis/apps/v1/deployments"
        );
    }
}
