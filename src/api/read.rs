//! get and list: wait until the cache is fresh enough for the request's resourceVersion,
//! take a snapshot, and write its pre-encoded objects.

use std::sync::Arc;

use super::query::{ContinueToken, GetQuery, ListQuery, RvMatch, RvParam, Selectors};
use super::status::ApiError;
use crate::config;
use crate::source::RevisionReader;
use crate::store::{Cache, CachedObject, ObjectRef, ResourceStore, Snapshot};
use crate::Revision;

/// What reads need: the cache, and etcd's current revision for consistent reads.
pub struct ReadContext {
    /// The cache.
    pub cache: Arc<Cache>,
    /// Linearizable reads of etcd's revision.
    pub revisions: RevisionReader,
    /// How often an idle watch that allows bookmarks gets one.
    pub bookmark_interval: std::time::Duration,
}

/// One page of a list: the objects to send and the list metadata.
pub struct ListPage {
    /// The list's resourceVersion.
    pub revision: Revision,
    /// The objects, in key order.
    pub items: Vec<ObjectRef>,
    /// The token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// Objects after this page (only without selectors, only when more remain).
    pub remaining_item_count: Option<usize>,
}

/// Waits until the cache reflects what `rv` asks for, and returns the applied revision
/// loaded after the wait (to be passed to [`ResourceStore::view`]).
pub async fn wait_fresh(state: &ReadContext, rv: RvParam) -> Result<Revision, ApiError> {
    let target = match rv {
        RvParam::Any => return Ok(state.cache.applied()),
        RvParam::At(n) => n,
        RvParam::Unset => state
            .revisions
            .current(config::CONSISTENT_READ_TIMEOUT)
            .await
            .map_err(|e| ApiError::Timeout {
                message: format!(
                    "Timeout: cannot read etcd's current revision for a consistent read: {e}"
                ),
                too_large_rv: false,
                retry_after: 1,
            })?,
    };
    if !state
        .cache
        .wait_applied(target, config::RESOURCE_VERSION_WAIT)
        .await
    {
        return Err(ApiError::too_large_resource_version(
            target.0,
            config::RESOURCE_VERSION_WAIT,
        ));
    }
    Ok(state.cache.applied())
}

/// Whether an object passes a request's namespace and selectors.
pub fn matches(obj: &CachedObject, selectors: &Selectors) -> bool {
    selectors.labels.matches(|k| obj.labels.get(k)) && selectors.fields.matches(|f| obj.field(f))
}

/// Serves a get of one object.
pub async fn get(
    state: &ReadContext,
    store: &ResourceStore,
    namespace: Option<&str>,
    name: &str,
    q: GetQuery,
) -> Result<ObjectRef, ApiError> {
    let applied = wait_fresh(state, q.rv).await?;
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
        (Some(_), Some(_)) => state.cache.applied(),
        _ => wait_fresh(state, q.rv).await?,
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
    let (snapshot, revision) = list_source(state, store, q).await?;
    let start = q.continue_from.as_ref().map(|t| t.start.as_str());
    let limit = q.limit.unwrap_or(usize::MAX);
    let mut items = Vec::new();
    let mut count = 0usize;
    let mut more = false;
    let mut iter = snapshot
        .range(namespace, start)
        .filter(|o| matches(o, &q.selectors));
    for obj in iter.by_ref() {
        if count == limit {
            more = true;
            break;
        }
        items.push(obj.clone());
        count += 1;
    }
    let (mut continue_token, mut remaining_item_count) = (None, None);
    if let (true, Some(last)) = (more, items.last()) {
        continue_token = Some(ContinueToken::encode(
            revision,
            &format!("{}\u{0}", last.key()),
        ));
        if q.selectors.is_empty() {
            // The object that ended the page is counted too: it was consumed by `break`.
            remaining_item_count = Some(1 + iter.count());
        }
    }
    Ok(ListPage {
        revision,
        items,
        continue_token,
        remaining_item_count,
    })
}
