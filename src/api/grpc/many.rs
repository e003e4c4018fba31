//! WatchMany: the changes to several collections in one stream, in etcd's revision
//! order, from one starting revision: the request read into a merged watch session
//! ([`crate::api::watch::merged`]) written with the gRPC encoder.

use super::events::GrpcEvents;
use super::{flag, objects, params, pb, positive, Selected};
use crate::api::query::WatchQuery;
use crate::api::read::ReadContext;
use crate::api::status::ApiError;
use crate::api::watch::merged::{Collection, MergedSession};

/// Reads the request (its selections already resolved and checked, at least one) and
/// starts the session. The outer error is answered as the call's status; the inner one
/// is sent as the stream's only (ERROR) event.
pub async fn start(
    read: &ReadContext,
    selections: Vec<Selected>,
    r: &pb::WatchManyRequest,
    max_message_bytes: usize,
) -> Result<Result<MergedSession<GrpcEvents>, ApiError>, ApiError> {
    let timeout = positive(r.timeout_seconds);
    let send_initial = flag(r.send_initial_events);
    let rv_match = if r.send_initial_events.is_some() {
        "NotOlderThan"
    } else {
        ""
    };
    // The stream's parameters, validated as a watch's (the selectors were already).
    let q = WatchQuery::parse(
        &selections[0].store.info,
        &params(&[
            ("resourceVersion", &r.resource_version),
            ("resourceVersionMatch", rv_match),
            ("sendInitialEvents", &send_initial),
            (
                "allowWatchBookmarks",
                if r.allow_watch_bookmarks { "true" } else { "" },
            ),
            ("timeoutSeconds", &timeout),
        ]),
    )?;
    let collections = selections
        .into_iter()
        .map(|s| Collection {
            store: s.store,
            namespace: s.namespace,
            selectors: s.selectors,
        })
        .collect();
    let encoder = GrpcEvents::new(max_message_bytes, objects::encoding(r.encoding));
    MergedSession::start(read, collections, &q, encoder).await
}
