//! get and list: wait until the cache is fresh enough for the request's resourceVersion,
//! take a snapshot, and write its pre-encoded objects.

use std::ops::Bound;
use std::sync::Arc;

use super::query::{
    check_path_segment, ContinueToken, GetQuery, ListQuery, RvMatch, RvParam, Selectors,
};
use super::status::ApiError;
use crate::config;
use crate::source::{self, RangePage, ReadError, SourceReader};
use crate::store::{
    Cache, CachedObject, ObjectRef, Readiness, ResourceStore, Snapshot, Unreadable,
};
use crate::Revision;

/// What reads need: the cache, and the source's current revision for consistent reads.
pub struct ReadContext {
    /// The cache.
    pub cache: Arc<Cache>,
    /// What the read path asks of the source (etcd, or an upstream API server).
    pub source: Arc<dyn SourceReader>,
    /// How often an idle watch that allows bookmarks gets one.
    pub bookmark_interval: std::time::Duration,
    /// `--watch-batch-window`: how long a watch holds its first ready event for more to
    /// join it in the same write (zero: written at once).
    pub watch_batch_window: std::time::Duration,
    /// `--memory-limit`: whether new full lists and watches are admitted.
    pub memory: Arc<crate::memory::MemoryGuard>,
}

/// One page of a list: the objects to send and the list metadata.
pub struct ListPage {
    /// The list's resourceVersion.
    pub revision: Revision,
    /// The objects, in key order.
    pub items: ListItems,
    /// The token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// Objects after this page (only without selectors, only when more remain).
    pub remaining_item_count: Option<usize>,
    /// The request's shard selector, normalized: `metadata.shardInfo.selector`.
    pub shard_info: Option<String>,
    /// What the response's body counts as it is written.
    pub meter: ListMeter,
}

/// Counts what a list response sends, and records it when its body ends:
/// `watchd_list_objects_total`, `watchd_list_bytes_total` and
/// `watchd_list_duration_seconds` (from the page's making to the end of its body, as the
/// client took it), per resource. A response its client abandons is not recorded.
pub struct ListMeter(Box<Meter>);

/// What a [`ListMeter`] counts (boxed: a list page stays small).
struct Meter {
    resource: String,
    started: std::time::Instant,
    objects: u64,
    bytes: u64,
}

impl ListMeter {
    /// A meter of a list of `store`, started now.
    pub fn new(store: &ResourceStore) -> ListMeter {
        ListMeter(Box::new(Meter {
            resource: store.info.qualified_name(),
            started: std::time::Instant::now(),
            objects: 0,
            bytes: 0,
        }))
    }

    /// One more frame of `objects` objects in `bytes` bytes.
    pub fn add(&mut self, objects: usize, bytes: usize) {
        self.0.objects += objects as u64;
        self.0.bytes += bytes as u64;
    }

    /// The body ended: records the list.
    pub fn done(&self) {
        let m = &self.0;
        let resource = m.resource.clone();
        metrics::counter!("watchd_list_objects_total", "resource" => resource.clone())
            .increment(m.objects);
        metrics::counter!("watchd_list_bytes_total", "resource" => resource.clone())
            .increment(m.bytes);
        metrics::histogram!("watchd_list_duration_seconds", "resource" => resource)
            .record(m.started.elapsed().as_secs_f64());
    }
}

/// The objects of a list: a bounded page collected while the page was cut, or every
/// object of a snapshot that passes the request's scope and selectors, read a batch at
/// a time as the response is written (a full list holds its snapshot, not a copy).
pub enum ListItems {
    /// A page (`limit` or a server bound): its objects.
    Page(Vec<ObjectRef>),
    /// Every matching object from `start` on, read from the snapshot.
    Whole(Box<WholeList>),
}

/// A full list's source: the snapshot, the namespace, the selectors, where it resumes.
pub struct WholeList {
    snapshot: Arc<Snapshot>,
    namespace: Option<Box<str>>,
    selectors: Selectors,
    /// The resource's selectable fields.
    field_names: Arc<[String]>,
    /// Where the next read starts: the list's start (included) before anything was
    /// read, then just after the last key read.
    next: Bound<Arc<str>>,
}

impl WholeList {
    /// The matching objects from where the next read starts.
    fn iter(&self) -> impl Iterator<Item = &ObjectRef> + '_ {
        self.snapshot
            .range_from(self.namespace.as_deref(), self.next.clone())
            .filter(|o| matches(o, &self.selectors, &self.field_names))
    }
}

impl ListItems {
    /// The objects not taken yet, in key order, without taking them.
    pub fn iter(&self) -> Box<dyn Iterator<Item = &ObjectRef> + '_> {
        match self {
            ListItems::Page(v) => Box::new(v.iter()),
            ListItems::Whole(w) => Box::new(w.iter()),
        }
    }

    /// Takes the next objects, at most `max_items` (at least one); empty at the end.
    pub fn next_batch(&mut self, max_items: usize) -> Vec<ObjectRef> {
        let max_items = max_items.max(1);
        let w = match self {
            ListItems::Page(v) => {
                let n = v.len().min(max_items);
                return v.drain(..n).collect();
            }
            ListItems::Whole(w) => w,
        };
        let out: Vec<ObjectRef> = w.iter().take(max_items).cloned().collect();
        match out.last() {
            Some(last) => w.next = Bound::Excluded(Arc::from(last.key())),
            // The end: the snapshot is let go.
            None => *self = ListItems::Page(Vec::new()),
        }
        out
    }
}

/// Waits until the cache of `store` reflects what `rv` asks for, and returns the applied
/// revision loaded after the wait (to be passed to [`ResourceStore::view`]).
pub async fn wait_fresh(
    state: &ReadContext,
    store: &ResourceStore,
    rv: RvParam,
) -> Result<Revision, ApiError> {
    let mut consistent_since = None;
    let target = match rv {
        RvParam::Any => return Ok(state.cache.progress().of(store)),
        RvParam::At(n) => n,
        RvParam::Unset => {
            consistent_since = Some(std::time::Instant::now());
            let current = state
                .source
                .current_revision(store, config::CONSISTENT_READ_TIMEOUT)
                .await
                .map_err(|e| ApiError::Timeout {
                    message: format!(
                        "Timeout: cannot read the source's current revision for a consistent read: {e}"
                    ),
                    too_large_rv: false,
                    retry_after: 1,
                })?;
            if let Err(e) = source_not_behind(store, current, state.cache.progress().of(store)) {
                state.cache.report_source_behind();
                return Err(e);
            }
            current
        }
    };
    if !state
        .cache
        .progress()
        .wait(store, target, config::RESOURCE_VERSION_WAIT)
        .await
    {
        return Err(ApiError::too_large_resource_version(
            target.0,
            config::RESOURCE_VERSION_WAIT,
        ));
    }
    if let Some(started) = consistent_since {
        metrics::histogram!("watchd_consistent_read_wait_seconds", "resource" => store.info.qualified_name())
            .record(started.elapsed().as_secs_f64());
    }
    Ok(state.cache.progress().of(store))
}

/// A consistent read must see the source's current state. A source whose current revision
/// is below what the cache applied from it has gone back in time: an etcd restored from a
/// backup or replaced, which ingestion notices when its watch resumes and answers with a
/// re-list (the read wakes it: [`Cache::report_source_behind`]). Until then the cache holds
/// a state the source does not have, so the read is refused as kube-apiserver refuses
/// reads of a cache (re)initializing; the client retries after a second.
fn source_not_behind(
    store: &ResourceStore,
    current: Revision,
    applied: Revision,
) -> Result<(), ApiError> {
    if current >= applied {
        return Ok(());
    }
    metrics::counter!("watchd_consistent_reads_source_behind_total").increment(1);
    tracing::warn!(
        resource = %store.info.resource,
        current = current.0,
        applied = applied.0,
        "a consistent read found the source behind the cache (restored or replaced?); refused until it re-lists"
    );
    Err(ApiError::TooManyRequests {
        message: format!(
            "storage is (re)initializing: the source's current revision {} is below the {} the cache applied (restored or replaced); it is being read again",
            current.0, applied.0
        ),
        retry_after: 1,
    })
}

/// Whether an object passes a request's selectors; `field_names` are its resource's
/// selectable fields (its store's).
pub fn matches(obj: &CachedObject, selectors: &Selectors, field_names: &[String]) -> bool {
    in_shard(obj, selectors)
        && selectors.labels.matches(|k| obj.labels().get(k))
        && selectors.fields.matches(|f| obj.field(field_names, f))
}

/// Whether an object is in the request's shards (KEP-5866): the hash of its uid, or of
/// its namespace ("" when cluster-scoped), in one of the selector's ranges.
fn in_shard(obj: &CachedObject, selectors: &Selectors) -> bool {
    use crate::selectors::shard::ShardField;
    selectors.shard.as_deref().is_none_or(|s| match s.field {
        ShardField::Uid => s.matches(&obj.facts().uid),
        ShardField::Namespace => s.matches(obj.namespace().unwrap_or("")),
    })
}

/// Waits until every one of `stores` reflects what `rv` asks for (the source is asked
/// once for all of them, or per resource when each has its own stream:
/// [`crate::store::Progress::to_ask`]), and returns the revision all of them have applied.
pub async fn wait_fresh_all(
    read: &ReadContext,
    stores: &[Arc<ResourceStore>],
    rv: RvParam,
) -> Result<Revision, ApiError> {
    let progress = read.cache.progress();
    for store in progress.to_ask(stores) {
        wait_fresh(read, store, rv).await?;
    }
    Ok(progress.of_all(stores.iter().map(|s| &**s)))
}

/// The 429 kube-apiserver answers for a resource whose cache is not ready.
pub fn not_ready(readiness: &Readiness) -> ApiError {
    ApiError::TooManyRequests {
        message: readiness.message(),
        retry_after: readiness.retry_after(std::time::Instant::now()),
    }
}

/// Whether a resource is pending: always before the initial sync; after it, checked
/// once the request has waited for the revision it must see (a write it must see may have
/// healed, or broken, the resource).
fn pending(store: &ResourceStore) -> Option<Readiness> {
    match store.health.readiness() {
        Readiness::Ready => None,
        r => Some(r),
    }
}

/// Serves a get of one object: from the cache, or from etcd while the resource is not
/// ready (as kube-apiserver reads etcd then).
pub async fn get(
    state: &ReadContext,
    store: &ResourceStore,
    namespace: Option<&str>,
    name: &str,
    q: GetQuery,
) -> Result<ObjectRef, ApiError> {
    check_object_path(store, namespace, name)?;
    if !state.cache.is_synced() {
        return get_from_etcd(state, store, namespace, name, q).await;
    }
    let applied = wait_fresh(state, store, q.rv).await?;
    if pending(store).is_some() {
        return get_from_etcd(state, store, namespace, name, q).await;
    }
    let view = store.view(applied);
    let key = match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    };
    view.snapshot
        .objects
        .get(key.as_str())
        .cloned()
        .ok_or_else(|| ApiError::NotFound {
            group: store.info.group.clone(),
            resource: store.info.resource.clone(),
            name: name.to_string(),
        })
}

/// What kube-apiserver's key function checks before a name becomes a key: a namespaced
/// resource's object needs its namespace, and neither may reach another key.
fn check_object_path(
    store: &ResourceStore,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    match namespace {
        None | Some("") if store.info.namespaced => {
            return Err(ApiError::BadRequest("Namespace parameter required.".into()));
        }
        Some(ns) => check_path_segment("Namespace", ns)?,
        None => {}
    }
    check_path_segment("Name", name)
}

/// The snapshot and revision a list is served from.
async fn list_source(
    state: &ReadContext,
    store: &ResourceStore,
    q: &ListQuery,
) -> Result<(Arc<Snapshot>, Revision), ApiError> {
    let exact = match (&q.continue_from, q.rv, q.rv_match, q.limit) {
        (Some(t), _, _, _) => Some(Revision(t.rv)),
        (None, RvParam::At(n), RvMatch::Exact, _) => Some(n),
        (None, RvParam::At(n), RvMatch::Unset, Some(_)) => Some(n),
        _ => None,
    };
    let applied = match (exact, &q.continue_from) {
        (Some(_), Some(_)) => state.cache.progress().of(store),
        _ => wait_fresh(state, store, q.rv).await?,
    };
    let view = store.view(applied);
    let Some(n) = exact else {
        return Ok((view.snapshot, view.revision));
    };
    if n > view.revision {
        return Err(ApiError::too_large_resource_version(
            n.0,
            config::RESOURCE_VERSION_WAIT,
        ));
    }
    match view.snapshot.as_of(n) {
        Some(s) => Ok((s, n)),
        None if q.continue_from.is_some() => Err(ApiError::Expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
        )),
        None => Err(ApiError::too_old(n.0, oldest_revision(&view.snapshot).0)),
    }
}

fn oldest_revision(s: &Arc<Snapshot>) -> Revision {
    let mut cur = s.clone();
    while let Some(older) = cur.older() {
        cur = older;
    }
    cur.revision
}

/// Reads one page of a list from the snapshot the query asks for.
#[allow(clippy::explicit_counter_loop)] // `count` outlives the loop: it decides `more`.
pub async fn list_page(
    state: &ReadContext,
    store: &ResourceStore,
    namespace: Option<&str>,
    q: &ListQuery,
) -> Result<ListPage, ApiError> {
    let not_synced = (!state.cache.is_synced()).then(|| store.health.readiness());
    let source = match not_synced {
        Some(r) => Err(r),
        None => {
            let (snapshot, revision) = list_source(state, store, q).await?;
            pending(store).map_or(Ok((snapshot, revision)), Err)
        }
    };
    let (snapshot, revision) = match source {
        Ok(s) => s,
        // kube-apiserver: only a paginated list without selectors goes to etcd.
        Err(_) if q.limit.is_some_and(|l| l > 0) && q.selectors.is_empty() => {
            return list_from_etcd(state, store, namespace, q).await;
        }
        Err(r) => return Err(not_ready(&r)),
    };
    let start = q.continue_from.as_ref().map(|t| t.start_key(namespace));
    let limit = q
        .limit
        .unwrap_or(usize::MAX)
        .min(q.bound.map_or(usize::MAX, |b| b.items));
    let byte_bound = q.bound.map_or(usize::MAX, |b| b.bytes);
    if limit == usize::MAX && byte_bound == usize::MAX {
        state.memory.admit(crate::memory::Admission::FullList)?;
        return Ok(ListPage {
            revision,
            items: ListItems::Whole(Box::new(WholeList {
                snapshot,
                namespace: namespace.map(Box::from),
                selectors: q.selectors.clone(),
                field_names: store.field_names.clone(),
                next: start.map_or(Bound::Unbounded, |k| Bound::Included(Arc::from(k))),
            })),
            continue_token: None,
            remaining_item_count: None,
            shard_info: shard_info(&q.selectors),
            meter: ListMeter::new(store),
        });
    }
    let mut items = Vec::new();
    let mut count = 0usize;
    let mut bytes = 0usize;
    let mut more = false;
    let mut iter = snapshot
        .range(namespace, start.as_deref())
        .filter(|o| matches(o, &q.selectors, &store.field_names));
    for obj in iter.by_ref() {
        // Only a bounded page measures its objects (JSON rendered on first use).
        let size = match q.bound {
            Some(b) if byte_bound < usize::MAX => (b.size)(obj),
            _ => 0,
        };
        if count == limit || (count > 0 && bytes.saturating_add(size) > byte_bound) {
            more = true;
            break;
        }
        bytes += size;
        items.push(obj.clone());
        count += 1;
    }
    let (mut continue_token, mut remaining_item_count) = (None, None);
    if let (true, Some(last)) = (more, items.last()) {
        continue_token = Some(ContinueToken::after(revision, namespace, last.key()));
        if q.selectors.is_empty() {
            // The object that ended the page is counted too: it was consumed by `break`.
            remaining_item_count = Some(1 + iter.count());
        }
    }
    Ok(ListPage {
        revision,
        items: ListItems::Page(items),
        continue_token,
        remaining_item_count,
        shard_info: shard_info(&q.selectors),
        meter: ListMeter::new(store),
    })
}

/// What a list echoes of its shard selector (`metadata.shardInfo.selector`).
fn shard_info(selectors: &Selectors) -> Option<String> {
    selectors.shard.as_ref().map(|s| s.to_string())
}

/// `<prefix>/<dir>/`: where a resource's keys start.
fn dir_prefix(state: &ReadContext, store: &ResourceStore) -> String {
    format!("{}/{}/", state.cache.prefix(), store.info.etcd_dir)
}

fn etcd_error(e: ReadError, asked: Option<Revision>, continuing: bool) -> ApiError {
    match e {
        ReadError::Compacted if continuing => ApiError::Expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
        ),
        ReadError::Compacted => {
            ApiError::Expired("The resourceVersion for the provided list is too old.".into())
        }
        ReadError::Future => ApiError::too_large_resource_version(
            asked.map_or(0, |r| r.0),
            std::time::Duration::ZERO,
        ),
        ReadError::Failed(e) => ApiError::Timeout {
            message: format!("Timeout: cannot read etcd: {e}"),
            too_large_rv: false,
            retry_after: 1,
        },
        ReadError::Unsupported(message) => ApiError::TooManyRequests {
            message,
            retry_after: 1,
        },
    }
}

/// Decodes one value read from etcd for `store`, as ingestion decodes it; an unreadable
/// value is kube-apiserver's storage read error, naming the key.
fn decode_read(
    store: &ResourceStore,
    object_key: &str,
    (key, value, rev): (&[u8], &[u8], Revision),
) -> Result<ObjectRef, ApiError> {
    match store.decode.decode((object_key, key), value, rev) {
        Ok(d) => Ok(Arc::new(CachedObject::new(rev, d))),
        Err(error) => {
            let u = Unreadable {
                etcd_key: String::from_utf8_lossy(key).into_owned(),
                error,
                revision: rev,
            };
            Err(ApiError::Internal(u.storage_error()))
        }
    }
}

/// A get read from etcd.
async fn get_from_etcd(
    state: &ReadContext,
    store: &ResourceStore,
    namespace: Option<&str>,
    name: &str,
    q: GetQuery,
) -> Result<ObjectRef, ApiError> {
    let object_key = match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    };
    let key = format!("{}{object_key}", dir_prefix(state, store)).into_bytes();
    let mut end = key.clone();
    end.push(0);
    let page = state
        .source
        .range(key, end, 1, None, config::CONSISTENT_READ_TIMEOUT)
        .await
        .map_err(|e| etcd_error(e, None, false))?;
    if let RvParam::At(n) = q.rv {
        if page.revision < n {
            return Err(ApiError::too_large_resource_version(
                n.0,
                std::time::Duration::ZERO,
            ));
        }
    }
    match page.kvs.first() {
        Some((k, v, rev)) => decode_read(store, &object_key, (k, v, *rev)),
        None => Err(ApiError::NotFound {
            group: store.info.group.clone(),
            resource: store.info.resource.clone(),
            name: name.to_string(),
        }),
    }
}

/// A list page read from etcd (a paginated list without selectors, while the resource is
/// not ready): the revision the query asks for, one range of `limit` keys.
async fn list_from_etcd(
    state: &ReadContext,
    store: &ResourceStore,
    namespace: Option<&str>,
    q: &ListQuery,
) -> Result<ListPage, ApiError> {
    let dir = dir_prefix(state, store);
    let range = match namespace {
        Some(ns) => format!("{dir}{ns}/"),
        None => dir.clone(),
    };
    // The token's key is relative to the request's scope and put back behind its
    // prefix, so the range never starts outside the scope it ends in.
    let start = match &q.continue_from {
        Some(t) => format!("{dir}{}", t.start_key(namespace)),
        None => range.clone(),
    };
    let at = match (&q.continue_from, q.rv, q.rv_match) {
        (Some(t), _, _) => Some(Revision(t.rv)),
        (None, RvParam::At(n), RvMatch::Exact | RvMatch::Unset) => Some(n),
        _ => None,
    };
    let limit = q.limit.unwrap_or(0) as i64;
    let end = source::prefix_end(range.as_bytes());
    let page: RangePage = state
        .source
        .range(
            start.into_bytes(),
            end,
            limit,
            at,
            config::CONSISTENT_READ_TIMEOUT,
        )
        .await
        .map_err(|e| etcd_error(e, at, q.continue_from.is_some()))?;
    if let (RvParam::At(n), RvMatch::NotOlderThan) = (q.rv, q.rv_match) {
        if page.revision < n {
            return Err(ApiError::too_large_resource_version(
                n.0,
                std::time::Duration::ZERO,
            ));
        }
    }
    let revision = at.unwrap_or(page.revision);
    let mut items = Vec::with_capacity(page.kvs.len());
    for (key, value, rev) in &page.kvs {
        // Every key etcd returns lies in the scope (the range is inside it); one that
        // does not is refused without naming it, never served.
        if !key.starts_with(range.as_bytes()) {
            tracing::error!(
                resource = %store.info.resource,
                "an etcd range returned a key outside the requested scope; refused"
            );
            return Err(ApiError::Internal(
                "an etcd range returned a key outside the requested scope".into(),
            ));
        }
        let object_key = std::str::from_utf8(key)
            .ok()
            .and_then(|k| k.strip_prefix(dir.as_str()))
            .filter(|k| crate::registry::split_object_key(k, store.info.namespaced).is_some());
        if let Some(object_key) = object_key {
            items.push(decode_read(store, object_key, (key, value, *rev))?);
        }
    }
    let (mut continue_token, mut remaining_item_count) = (None, None);
    if let (true, Some(last)) = (page.more, items.last()) {
        continue_token = Some(ContinueToken::after(revision, namespace, last.key()));
        let left = page.count - page.kvs.len() as i64;
        remaining_item_count = (left > 0).then_some(left as usize);
    }
    Ok(ListPage {
        revision,
        items: ListItems::Page(items),
        continue_token,
        remaining_item_count,
        shard_info: shard_info(&q.selectors),
        meter: ListMeter::new(store),
    })
}
