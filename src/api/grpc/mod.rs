//! watchd's native gRPC API (`proto/watchd.proto`): get, list and watch with the same
//! queries, validation and watch sessions as the HTTP API, objects as Kubernetes JSON
//! sent from the cache's shared bytes. Beside it, the standard health service
//! (`grpc.health.v1.Health`: SERVING once the cache is synced and its source's watch is
//! live, NOT_SERVING before and while the server drains) and server reflection (v1 and
//! v1alpha), so generic tools (grpcurl, grpc-health-probe, kubelet's gRPC probes) work
//! without the `.proto` file. Neither needs credentials, as kube-apiserver's `/readyz`
//! and discovery need none.

use std::pin::Pin;
use std::sync::Arc;

use futures_util::Stream;
use tonic::{Request, Response, Status};

use crate::api::access;
use crate::api::guarded::GuardedWatch;
use crate::api::http::body::BufList;
use crate::api::http::h2_conn::EndTrailers;
use crate::api::http::Connection;
use crate::api::query::{check_path_segment, GetQuery, ListQuery, PageBound, Params, WatchQuery};
use crate::api::read::{self, ReadContext};
use crate::api::status::ApiError;
use crate::api::watch::{SteppedWatch, WatchSession, WatchStart};
use crate::auth::limits::Permit;
use crate::auth::{Attributes, Security, UserInfo};
use crate::store::ResourceStore;

mod events;
mod many;
mod objects;
mod server;
mod snapshot;

pub use events::GrpcEvents;
use events::GrpcFrames;
pub use server::serve;

/// The generated protobuf messages and service.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("watchd.v1");

    /// The encoded descriptors of `watchd.proto`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("watchd_descriptor");
}

use pb::watchd_server::Watchd;

/// Most collections in one Snapshot or WatchMany.
pub const MAX_SELECTIONS: usize = 64;

/// One selection of a Snapshot or WatchMany, resolved.
pub struct Selected {
    /// The resource.
    pub store: Arc<ResourceStore>,
    /// The namespace, if the collection is one namespace's.
    pub namespace: Option<String>,
    /// The selectors as given (for list queries).
    pub label_selector: String,
    /// The field selector as given.
    pub field_selector: String,
    /// The shard selector as given.
    pub shard_selector: String,
    /// The selectors, parsed.
    pub selectors: crate::api::query::Selectors,
}

/// The gRPC service.
pub struct GrpcApi {
    read: Arc<ReadContext>,
    security: Option<Arc<Security>>,
    max_message_bytes: usize,
}

/// Where a Watch call leaves its session for the connection to write from the dispatch
/// pass ([`crate::api::http::h2_conn`]), with the trailers that end its stream; the
/// call's own response stream is then empty. Put in each request by the server.
#[derive(Clone, Default)]
pub(crate) struct WatchSlot(Arc<std::sync::Mutex<Option<HandedOver>>>);

/// A watch call's frames and the trailers that end its stream.
pub(crate) type HandedOver = (Box<dyn SteppedWatch<BufList>>, EndTrailers);

impl WatchSlot {
    /// The slot the server put in `req`: a watch call is served only on the server's
    /// connections, which write it.
    fn of<T>(req: &Request<T>) -> Result<WatchSlot, Status> {
        req.extensions()
            .get::<WatchSlot>()
            .cloned()
            .ok_or_else(|| Status::internal("watch calls are served only by watchd's server"))
    }

    fn put(&self, watch: Box<dyn SteppedWatch<BufList>>, end: EndTrailers) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((watch, end));
    }

    /// The session a Watch call left, if it left one.
    pub(crate) fn take(&self) -> Option<HandedOver> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The connection a call came on (its shard, its client certificate), put in each
/// request by the server.
fn connection<T>(req: &Request<T>) -> Option<&Arc<Connection>> {
    req.extensions().get::<Arc<Connection>>()
}

/// The dispatch shard of a call's watches: its connection's, so that every call of one
/// connection is in one shard.
fn shard_of<T>(req: &Request<T>) -> usize {
    connection(req).map_or_else(crate::api::watch::next_shard, |c| c.shard)
}

/// Objects in a List page when the client gives no limit (client-go pages by 500).
pub const DEFAULT_LIST_LIMIT: usize = 500;
/// The default `--grpc-max-message-bytes`: what gRPC clients accept by default.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;
/// What a List response holds besides its objects (resourceVersion, continue token,
/// remaining count), bounded generously.
const LIST_ENVELOPE_BYTES: usize = 4096;

/// The bound a List page is held to: `limit` objects if the client gave none, and a
/// message under `max_message_bytes` with objects in `encoding`.
fn list_bound(client_limit: i64, max_message_bytes: usize, encoding: pb::Encoding) -> PageBound {
    PageBound {
        items: if client_limit > 0 {
            usize::MAX
        } else {
            DEFAULT_LIST_LIMIT
        },
        bytes: max_message_bytes.saturating_sub(LIST_ENVELOPE_BYTES),
        size: objects::sizer(encoding),
    }
}

/// Maps a Kubernetes error to the gRPC code that means the same, with the Status JSON as
/// the details.
fn to_status(e: &ApiError) -> Status {
    use tonic::Code;
    let code = match e.code() {
        400 | 406 | 422 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        405 => Code::Unimplemented,
        410 => Code::OutOfRange,
        429 => Code::ResourceExhausted,
        503 => Code::Unavailable,
        504 => Code::DeadlineExceeded,
        _ => Code::Internal,
    };
    let details = serde_json::to_vec(&e.to_status()).unwrap_or_default();
    Status::with_details(code, e.message(), details.into())
}

/// A number as a query parameter: empty (absent) unless positive.
fn positive(n: i64) -> String {
    if n > 0 {
        n.to_string()
    } else {
        String::new()
    }
}

/// An optional flag as a query parameter: empty (absent) when unset.
fn flag(b: Option<bool>) -> String {
    b.map(|b| b.to_string()).unwrap_or_default()
}

/// Query parameters from request fields, empty ones left out.
fn params(pairs: &[(&str, &str)]) -> Params {
    Params::from_pairs(
        pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, *v)),
    )
}

impl GrpcApi {
    /// Authenticates the caller, authorizes `verb` on the collection (and `name`) and
    /// takes the user's permit of a list or watch: what a watch needs to stay guarded
    /// (None without authentication).
    async fn check<T>(
        &self,
        req: &Request<T>,
        verb: &str,
        c: Option<&pb::Collection>,
        name: &str,
        field_selector: &str,
    ) -> Result<Option<(Attributes, Option<Permit>)>, Status> {
        let Some(user) = self.authenticate(req).await? else {
            return Ok(None);
        };
        self.admit(user, verb, c, name, field_selector).await
    }

    /// The caller, from its client certificate or `authorization` metadata (None
    /// without authentication configured).
    async fn authenticate<T>(&self, req: &Request<T>) -> Result<Option<UserInfo>, Status> {
        let Some(sec) = &self.security else {
            return Ok(None);
        };
        let certificate = connection(req).and_then(|c| c.certificate());
        let mut headers = req.metadata().clone().into_headers();
        match sec
            .authenticator
            .authenticate(
                certificate.as_ref(),
                &mut headers,
                std::time::SystemTime::now(),
            )
            .await
        {
            Ok((user, _)) => Ok(Some(user)),
            Err(refused) => {
                tracing::info!(reason = %refused.0, "gRPC call unauthorized");
                Err(to_status(&ApiError::Unauthorized))
            }
        }
    }

    /// Authorizes `user` for `verb` on the collection (and `name`) and takes the user's
    /// permit: [`GrpcApi::check`] after authentication.
    async fn admit(
        &self,
        user: UserInfo,
        verb: &str,
        c: Option<&pb::Collection>,
        name: &str,
        field_selector: &str,
    ) -> Result<Option<(Attributes, Option<Permit>)>, Status> {
        let (Some(sec), Some(c)) = (&self.security, c) else {
            return Ok(None);
        };
        let attrs = Attributes::resource(
            user,
            verb,
            &c.group,
            &c.version,
            &c.resource,
            None,
            (!c.namespace.is_empty()).then_some(c.namespace.as_str()),
            (!name.is_empty()).then_some(name),
            (!field_selector.is_empty()).then_some(field_selector),
        );
        access::authorize(Some(sec), &attrs)
            .await
            .and_then(|()| access::permit(Some(sec), &attrs))
            .map(|permit| Some((attrs, permit)))
            .map_err(|e| to_status(&e))
    }

    /// [`GrpcApi::check`] for every selection of a Snapshot or WatchMany, the caller
    /// authenticated once; the admissions of those that need guarding.
    async fn check_selections<T>(
        &self,
        req: &Request<T>,
        verb: &str,
        selections: &[pb::Selection],
    ) -> Result<Vec<(Attributes, Option<Permit>)>, Status> {
        if selections.is_empty() {
            let e = ApiError::BadRequest("selections: at least one is required".into());
            return Err(to_status(&e));
        }
        if selections.len() > MAX_SELECTIONS {
            let e = ApiError::BadRequest(format!(
                "selections: at most {MAX_SELECTIONS} are allowed, got {}",
                selections.len()
            ));
            return Err(to_status(&e));
        }
        let Some(user) = self.authenticate(req).await? else {
            return Ok(Vec::new());
        };
        let mut admitted = Vec::new();
        for s in selections {
            let c = s.collection.as_ref();
            if let Some(a) = self
                .admit(user.clone(), verb, c, "", &s.field_selector)
                .await?
            {
                admitted.push(a);
            }
        }
        Ok(admitted)
    }

    /// The stores, namespaces and selectors of a request's selections.
    fn selections(&self, selections: &[pb::Selection]) -> Result<Vec<Selected>, ApiError> {
        selections
            .iter()
            .map(|s| {
                let (store, namespace) = self.collection(s.collection.as_ref())?;
                let selectors = crate::api::query::Selectors::parse(
                    &params(&[
                        ("labelSelector", &s.label_selector),
                        ("fieldSelector", &s.field_selector),
                        ("shardSelector", &s.shard_selector),
                    ]),
                    &store.info,
                )?;
                Ok(Selected {
                    store,
                    namespace,
                    label_selector: s.label_selector.clone(),
                    field_selector: s.field_selector.clone(),
                    shard_selector: s.shard_selector.clone(),
                    selectors,
                })
            })
            .collect()
    }

    /// Hands a watch call's session to the connection through `slot`, to be written by
    /// the dispatch pass ([`WatchSlot`]): framed as gRPC messages, guarded by each of
    /// `admitted` (losing any permission ends it with `revoked`'s message).
    fn hand_over<M: prost::Message + 'static>(
        &self,
        slot: &WatchSlot,
        session: Box<dyn SteppedWatch<BufList>>,
        admitted: Vec<(Attributes, Option<Permit>)>,
        revoked: fn(&ApiError) -> M,
    ) {
        let (frames, end) = GrpcFrames::new(session, self.max_message_bytes);
        let mut watch: Box<dyn SteppedWatch<BufList>> = Box::new(frames);
        if let Some(sec) = &self.security {
            for (attrs, permit) in admitted {
                let on_revoked = move |e: &ApiError| events::framed(&revoked(e));
                watch = Box::new(GuardedWatch::new(
                    watch,
                    sec.clone(),
                    attrs,
                    permit,
                    on_revoked,
                ));
            }
        }
        slot.put(watch, end);
    }

    fn collection(
        &self,
        c: Option<&pb::Collection>,
    ) -> Result<(Arc<ResourceStore>, Option<String>), ApiError> {
        let c = c.ok_or_else(|| ApiError::BadRequest("collection is required".into()))?;
        let index = self.read.cache.resources();
        let store = index
            .by_api(&c.group, &c.version, &c.resource)
            .cloned()
            .ok_or_else(|| {
                ApiError::PathNotFound(format!(
                    "no resource {:?} in {:?}/{:?}",
                    c.resource, c.group, c.version
                ))
            })?;
        let ns = (!c.namespace.is_empty()).then(|| c.namespace.clone());
        if let Some(ns) = &ns {
            check_path_segment("Namespace", ns)?;
        }
        if ns.is_some() && !store.info.namespaced {
            return Err(ApiError::BadRequest(format!(
                "{} is not namespaced",
                store.info.qualified_name()
            )));
        }
        Ok((store, ns))
    }
}

/// The stream of a watch.
type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchResponse, Status>> + Send>>;
/// The stream of a WatchMany.
type WatchManyStream = Pin<Box<dyn Stream<Item = Result<pb::WatchManyResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Watchd for GrpcApi {
    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        let g = req.get_ref();
        self.check(&req, "get", g.collection.as_ref(), &g.name, "")
            .await?;
        let r = req.into_inner();
        let result = async {
            let (store, ns) = self.collection(r.collection.as_ref())?;
            let q = GetQuery::parse(&params(&[("resourceVersion", &r.resource_version)]))?;
            read::get(&self.read, &store, ns.as_deref(), &r.name, q).await
        };
        match result.await {
            Ok(obj) => Ok(Response::new(pb::GetResponse {
                object: Some(objects::object(&obj, objects::encoding(r.encoding))),
            })),
            Err(e) => Err(to_status(&e)),
        }
    }

    async fn list(
        &self,
        req: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let l = req.get_ref();
        // The permit is held until the page is built.
        let _admitted = self
            .check(&req, "list", l.collection.as_ref(), "", &l.field_selector)
            .await?;
        let r = req.into_inner();
        let encoding = objects::encoding(r.encoding);
        let limit = positive(r.limit);
        let result = async {
            let (store, ns) = self.collection(r.collection.as_ref())?;
            let q = ListQuery::parse(
                &store.info,
                &params(&[
                    ("resourceVersion", &r.resource_version),
                    ("resourceVersionMatch", &r.resource_version_match),
                    ("limit", &limit),
                    ("continue", &r.r#continue),
                    ("labelSelector", &r.label_selector),
                    ("fieldSelector", &r.field_selector),
                    ("shardSelector", &r.shard_selector),
                ]),
            )?;
            let q = ListQuery {
                bound: Some(list_bound(r.limit, self.max_message_bytes, encoding)),
                ..q
            };
            read::list_page(&self.read, &store, ns.as_deref(), &q).await
        };
        match result.await {
            Ok(page) => Ok(Response::new(pb::ListResponse {
                resource_version: page.revision.0,
                items: page
                    .items
                    .iter()
                    .map(|o| objects::object(o, encoding))
                    .collect(),
                r#continue: page.continue_token.unwrap_or_default(),
                remaining_item_count: page.remaining_item_count.map(|n| n as i64),
                shard_selector: page.shard_info.unwrap_or_default(),
            })),
            Err(e) => Err(to_status(&e)),
        }
    }

    type WatchStream = WatchStream;

    async fn watch(&self, req: Request<pb::WatchRequest>) -> Result<Response<WatchStream>, Status> {
        let w = req.get_ref();
        let admitted = self
            .check(&req, "watch", w.collection.as_ref(), "", &w.field_selector)
            .await?;
        let shard = shard_of(&req);
        let slot = WatchSlot::of(&req)?;
        let r = req.into_inner();
        let timeout = positive(r.timeout_seconds);
        let send_initial = flag(r.send_initial_events);
        let result = async {
            let (store, ns) = self.collection(r.collection.as_ref())?;
            let q = WatchQuery::parse(
                &store.info,
                &params(&[
                    ("resourceVersion", &r.resource_version),
                    ("resourceVersionMatch", &r.resource_version_match),
                    ("sendInitialEvents", &send_initial),
                    (
                        "allowWatchBookmarks",
                        if r.allow_watch_bookmarks { "true" } else { "" },
                    ),
                    ("labelSelector", &r.label_selector),
                    ("fieldSelector", &r.field_selector),
                    ("shardSelector", &r.shard_selector),
                    ("timeoutSeconds", &timeout),
                ]),
            )?;
            WatchSession::start(
                &self.read,
                store,
                ns,
                q,
                GrpcEvents::new(self.max_message_bytes, objects::encoding(r.encoding)),
            )
            .await
        };
        let result = crate::api::watch::in_shard(shard, result);
        match result.await.map_err(|e| to_status(&e))? {
            WatchStart::Error(e) => Ok(Response::new(Box::pin(futures_util::stream::iter([Ok(
                pb::WatchResponse {
                    events: GrpcEvents::error_message(&e),
                },
            )])))),
            WatchStart::Session(session) => {
                let revoked = |e: &ApiError| pb::WatchResponse {
                    events: GrpcEvents::error_message(e),
                };
                self.hand_over(&slot, session, admitted.into_iter().collect(), revoked);
                Ok(Response::new(Box::pin(futures_util::stream::empty())))
            }
        }
    }

    async fn list_resources(
        &self,
        req: Request<pb::ListResourcesRequest>,
    ) -> Result<Response<pb::ListResourcesResponse>, Status> {
        // Discovery, as kube-apiserver authorizes it: a `get` of `/apis`, which RBAC's
        // `system:discovery` grants to every authenticated user. Authenticated alone is
        // not enough: an authorizer may refuse it.
        if let (Some(user), Some(sec)) = (self.authenticate(&req).await?, &self.security) {
            let attrs = Attributes::non_resource(user, &http::Method::GET, "/apis");
            access::authorize(Some(sec), &attrs)
                .await
                .map_err(|e| to_status(&e))?;
        }
        let index = self.read.cache.resources();
        let mut resources: Vec<pb::ApiResource> = index
            .stores()
            .iter()
            .map(|s| pb::ApiResource {
                group: s.info.group.clone(),
                version: s.info.version.clone(),
                resource: s.info.resource.clone(),
                kind: s.info.kind.clone(),
                namespaced: s.info.namespaced,
                verbs: crate::api::CACHED_VERBS
                    .iter()
                    .map(|v| v.to_string())
                    .collect(),
            })
            .collect();
        resources.sort_by(|a, b| {
            (&a.group, &a.version, &a.resource).cmp(&(&b.group, &b.version, &b.resource))
        });
        Ok(Response::new(pb::ListResourcesResponse { resources }))
    }

    async fn snapshot(
        &self,
        req: Request<pb::SnapshotRequest>,
    ) -> Result<Response<pb::SnapshotResponse>, Status> {
        // The permits are held until the page is built.
        let _admitted = self
            .check_selections(&req, "list", &req.get_ref().selections)
            .await?;
        let r = req.into_inner();
        let selections = self.selections(&r.selections).map_err(|e| to_status(&e))?;
        snapshot::page(&self.read, &selections, &r, self.max_message_bytes)
            .await
            .map(Response::new)
            .map_err(|e| to_status(&e))
    }

    type WatchManyStream = WatchManyStream;

    async fn watch_many(
        &self,
        req: Request<pb::WatchManyRequest>,
    ) -> Result<Response<WatchManyStream>, Status> {
        let admitted = self
            .check_selections(&req, "watch", &req.get_ref().selections)
            .await?;
        let shard = shard_of(&req);
        let slot = WatchSlot::of(&req)?;
        let r = req.into_inner();
        let selections = self.selections(&r.selections).map_err(|e| to_status(&e))?;
        let started = crate::api::watch::in_shard(
            shard,
            many::start(&self.read, selections, &r, self.max_message_bytes),
        );
        match started.await.map_err(|e| to_status(&e))? {
            Err(e) => Ok(Response::new(Box::pin(futures_util::stream::iter([Ok(
                pb::WatchManyResponse {
                    events: GrpcEvents::error_message(&e),
                },
            )])))),
            Ok(session) => {
                let revoked = |e: &ApiError| pb::WatchManyResponse {
                    events: GrpcEvents::error_message(e),
                };
                // Every selection stays guarded: losing any permission ends the stream.
                self.hand_over(&slot, Box::new(session), admitted, revoked);
                Ok(Response::new(Box::pin(futures_util::stream::empty())))
            }
        }
    }
}
