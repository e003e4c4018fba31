//! Routing: what answers a request (the cache's reads and watches, health, discovery,
//! metrics, or the upstream), in its connection's dispatch shard, with its
//! authentication, authorization, audit and metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};

use super::body::{Body, BufList};
use super::encode::{JsonLines, MetadataView};
use super::encode_table::{IncludeObject, TableView};
use super::negotiate::{DiscoveryOutput, Output};
use super::query::{ResourcePath, Route};
use super::{
    audit, discovery, encode, encode_protobuf, encode_table, health, negotiate, openapi, proxy,
    query, reviews,
};
use super::{ApiState, Connection};
use crate::api::access;
use crate::api::guarded::{Guarded, GuardedWatch};
use crate::api::query::{GetQuery, ListQuery, Params, WatchQuery};
use crate::api::read;
use crate::api::status::ApiError;
use crate::api::watch::WatchSession;
use crate::auth::{Attributes, UserInfo};
use crate::store::ResourceStore;

use super::response::{
    aggregated_response, compress, compress_watch, error_response, text_response, typed_response,
    value_response, watch_response,
};

/// Answers one request, in the dispatch shard of its connection: from the cache (whose
/// requests are reads: the body is not read), or, with a pass-through, from the
/// upstream.
pub(super) async fn handle<B: proxy::ForwardBody>(
    state: &ApiState,
    req: Request<B>,
    conn: &Connection,
) -> Response<Body> {
    crate::api::watch::in_shard(conn.shard, handle_in_shard(state, req, conn)).await
}

async fn handle_in_shard<B: proxy::ForwardBody>(
    state: &ApiState,
    mut req: Request<B>,
    conn: &Connection,
) -> Response<Body> {
    let started = Instant::now();
    let peer = conn.peer;
    let exempt = state.security.as_deref().is_some_and(|sec| {
        sec.always_allows(req.uri().path())
            && !matches!(query::route(req.uri().path()), Ok(Route::Resource(_)))
    });
    let user = match &state.security {
        None => None,
        // A health probe: no credentials asked, no authorizer consulted.
        Some(_) if exempt => None,
        Some(sec) => match sec
            .authenticator
            .authenticate(
                conn.certificate().as_ref(),
                req.headers_mut(),
                std::time::SystemTime::now(),
            )
            .await
        {
            Ok((user, method)) => {
                metrics::counter!("watchd_authentications_total", "method" => method.label(), "result" => "success").increment(1);
                Some(user)
            }
            Err(refused) => {
                metrics::counter!("watchd_authentications_total", "method" => "none", "result" => "failure").increment(1);
                tracing::info!(%peer, uri = %req.uri(), reason = %refused.0, "unauthorized");
                let response = error_response(&ApiError::Unauthorized);
                if let Some(audit) = &state.audit {
                    audit::audit_request(audit, &req, None, &response, conn, started);
                }
                record(&req, "unknown", String::new(), &response, started, peer);
                req.into_body().discard().await;
                return response;
            }
        },
    };
    let audit_user = state.audit.as_ref().and(user.clone());
    // Reviews of oneself are answered here when watchd authenticates (or has no upstream
    // to ask); an upstream answers them otherwise.
    if let Some(review) = reviews::Review::of(req.method(), req.uri().path()) {
        if state.security.is_some() || state.proxy.is_none() {
            let (parts, body) = req.into_parts();
            let head = Request::from_parts(parts, ());
            let security = state.security.as_deref();
            let response = reviews::answer(security, review, &head, body, user).await;
            if let Some(audit) = &state.audit {
                audit::audit_request(audit, &head, audit_user, &response, conn, started);
            }
            record(
                &head,
                "create",
                review.qualified(),
                &response,
                started,
                peer,
            );
            return response;
        }
    }
    if let Some(proxy) = &state.proxy {
        let pass = proxy::Proxy::decide(&req, &state.read.cache, state.read.source.reads_unready());
        if pass != proxy::Pass::No {
            let mut head = Request::new(());
            *head.method_mut() = req.method().clone();
            *head.uri_mut() = req.uri().clone();
            *head.version_mut() = req.version();
            *head.headers_mut() = req.headers().clone();
            let forwarded = proxy.forward(req, user.as_ref(), peer, pass).await;
            let forwarded = match forwarded {
                Some(r) if pass == proxy::Pass::Discovery => {
                    discovery::merge_discovery(state, head.uri().path(), r).await
                }
                r => r,
            };
            if let Some(response) = forwarded {
                if let Some(audit) = &state.audit {
                    audit::audit_request(audit, &head, audit_user, &response, conn, started);
                }
                record(&head, "proxy", String::new(), &response, started, peer);
                return response;
            }
            // Discovery the upstream cannot answer: the cache's own.
            let (verb, resource, response) = route_request(state, &head, user).await;
            if let Some(audit) = &state.audit {
                audit::audit_request(audit, &head, audit_user, &response, conn, started);
            }
            record(&head, verb, resource, &response, started, peer);
            return response;
        }
    }
    let (verb, resource, response) = route_request(state, &req, user).await;
    if let Some(audit) = &state.audit {
        audit::audit_request(audit, &req, audit_user, &response, conn, started);
    }
    record(&req, verb, resource, &response, started, peer);
    if req.method() != Method::GET && req.method() != Method::HEAD {
        req.into_body().discard().await;
    }
    response
}

fn record<B>(
    req: &Request<B>,
    verb: &'static str,
    resource: String,
    response: &Response<Body>,
    started: Instant,
    peer: SocketAddr,
) {
    let code = response.status().as_u16();
    metrics::counter!("watchd_requests_total", "verb" => verb, "resource" => resource.clone(), "code" => code.to_string())
        .increment(1);
    metrics::histogram!("watchd_request_duration_seconds", "verb" => verb, "resource" => resource)
        .record(started.elapsed().as_secs_f64());
    tracing::debug!(%peer, method = %req.method(), uri = %req.uri(), code, verb, "request");
}

async fn route_request<B>(
    state: &ApiState,
    req: &Request<B>,
    user: Option<UserInfo>,
) -> (&'static str, String, Response<Body>) {
    let none = String::new();
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let e = ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource: watchd serves get, list and watch only (got {})",
            req.method()
        ));
        return ("write", none, error_response(&e));
    }
    let route = match query::route(req.uri().path()) {
        Ok(r) => r,
        Err(e) => return ("unknown", none, error_response(&e)),
    };
    let params = match Params::parse(req.uri().query()) {
        Ok(p) => p,
        Err(e) => return ("unknown", none, error_response(&e)),
    };
    let index = state.read.cache.resources();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    if let (Some(user), false) = (&user, matches!(route, Route::Resource(_))) {
        // The path routing read, not the raw one (`route` succeeded, so this does too).
        let path = query::canonical_path(req.uri().path()).unwrap_or_default();
        let attrs = Attributes::non_resource(user.clone(), req.method(), &path);
        if let Err(e) = access::authorize(state.security.as_deref(), &attrs).await {
            return ("discovery", none, error_response(&e));
        }
    }
    let result = match route {
        Route::Resource(path) => return serve_resource(state, req, path, &params, user).await,
        Route::ApiVersions => match negotiate::negotiate_discovery(accept) {
            Ok(DiscoveryOutput::Legacy) => {
                Ok(value_response(&discovery::api_versions(&state.address)))
            }
            Ok(DiscoveryOutput::Aggregated(v)) => Ok(aggregated_response(
                &discovery::aggregated(&index, v, true),
                v,
            )),
            Err(e) => Err(e),
        },
        Route::ApiGroupList => match negotiate::negotiate_discovery(accept) {
            Ok(DiscoveryOutput::Legacy) => Ok(value_response(&discovery::api_group_list(&index))),
            Ok(DiscoveryOutput::Aggregated(v)) => Ok(aggregated_response(
                &discovery::aggregated(&index, v, false),
                v,
            )),
            Err(e) => Err(e),
        },
        Route::ApiGroup(g) => discovery::api_group(&index, &g).map(|v| value_response(&v)),
        Route::ResourceList { group, version } => {
            discovery::api_resource_list(&index, &group, &version).map(|v| value_response(&v))
        }
        Route::Version => Ok(value_response(&discovery::version())),
        Route::OpenApi(path) => {
            // Rendering takes tens of milliseconds (more with many CRDs), and waits for
            // a render under way: off the threads that serve other connections.
            let (hash, headers) = (
                params.get("hash").map(str::to_string),
                req.headers().clone(),
            );
            let index = index.clone();
            let served = tokio::task::spawn_blocking(move || {
                openapi::serve(&path, hash.as_deref(), &headers, &index)
            })
            .await;
            let r = match served {
                Ok(r) => r,
                Err(e) => error_response(&ApiError::Internal(format!(
                    "rendering the OpenAPI document failed: {e}"
                ))),
            };
            let r = if accepts_gzip(req) && r.status() == StatusCode::OK {
                compress(r).await
            } else {
                r
            };
            return ("openapi", none, r);
        }
        Route::Health { endpoint, check } => {
            match health::evaluate(endpoint, check.as_deref(), &params, &state.read.cache) {
                Some((code, body)) => Ok(text_response(code, body)),
                None => Err(ApiError::PathNotFound(format!(
                    "no such health check: {}",
                    check.unwrap_or_default()
                ))),
            }
        }
        Route::Metrics => Ok(text_response(
            200,
            state
                .metrics
                .as_ref()
                .map(|m| {
                    crate::metrics::record_process();
                    m.render()
                })
                .unwrap_or_default(),
        )),
        Route::Unknown => Err(ApiError::PathNotFound(format!(
            "the server could not find the requested resource: {}",
            req.uri().path()
        ))),
    };
    (
        "discovery",
        none,
        result.unwrap_or_else(|e| error_response(&e)),
    )
}

/// Whether the request's `Accept-Encoding` takes gzip.
fn accepts_gzip<B>(req: &Request<B>) -> bool {
    negotiate::accepts_gzip(
        req.headers()
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    )
}

async fn serve_resource<B>(
    state: &ApiState,
    req: &Request<B>,
    path: ResourcePath,
    params: &Params,
    user: Option<UserInfo>,
) -> (&'static str, String, Response<Body>) {
    let verb = path.verb(params);
    let is_watch = verb == "watch";
    let mut guard = None;
    let mut permit = None;
    if let Some(user) = user {
        let attrs = path.attributes(user, params);
        let checked = match access::authorize(state.security.as_deref(), &attrs).await {
            Ok(()) => access::permit(state.security.as_deref(), &attrs),
            Err(e) => Err(e),
        };
        match checked {
            Ok(p) => permit = p,
            Err(e) => return (verb, String::new(), error_response(&e)),
        }
        guard = state.security.clone().map(|sec| (sec, attrs));
    }
    let index = state.read.cache.resources();
    let Some(store) = index
        .by_api(&path.group, &path.version, &path.resource)
        .cloned()
    else {
        let e = ApiError::PathNotFound(format!(
            "the server could not find the requested resource ({} {})",
            path.resource,
            if path.group.is_empty() {
                path.version.clone()
            } else {
                format!("{}/{}", path.group, path.version)
            }
        ));
        return ("unknown", String::new(), error_response(&e));
    };
    let resource = store.info.qualified_name();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let gzip = accepts_gzip(req);
    let response = match serve_verb(state, store, path, params, accept, is_watch).await {
        Ok(r) if gzip && !is_watch => compress(r).await,
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    // A watch keeps its permit and has its permission checked again while it runs; a
    // list's permit is returned here.
    let response = match guard {
        Some((sec, attrs)) if is_watch => {
            let (parts, body) = response.into_parts();
            let protobuf = parts.headers.get(header::CONTENT_TYPE)
                == Some(&HeaderValue::from_static(
                    encode_protobuf::WATCH_CONTENT_TYPE,
                ));
            let on_revoked = move |e: &ApiError| {
                BufList::from(if protobuf {
                    encode_protobuf::error_frame(e)
                } else {
                    encode::error_frame(e)
                })
            };
            // A stepped watch stays one, so the frontends that write watches from their
            // wake-ups (HTTP/2, plain HTTP/1.1) keep doing so under authorization.
            let body = match body {
                Body::Watch(inner) => Body::Watch(Box::new(GuardedWatch::new(
                    inner,
                    sec,
                    attrs,
                    permit.take(),
                    on_revoked,
                ))),
                body => match body.into_stream() {
                    Ok(inner) => {
                        Body::stream(Guarded::new(inner, sec, attrs, permit.take(), on_revoked))
                    }
                    Err(complete) => complete,
                },
            };
            Response::from_parts(parts, body)
        }
        _ => response,
    };
    // A watch list is gzipped as kube-apiserver 1.37 gzips it, after the guard so that a
    // revocation's error frame is compressed with the rest.
    let response = if gzip && is_watch && params.is_watch_list() {
        compress_watch(response)
    } else {
        response
    };
    drop(permit);
    (verb, resource, response)
}

fn check_scope(store: &ResourceStore, path: &ResourcePath) -> Result<(), ApiError> {
    let bad_sub = path.subresource.as_deref().is_some_and(|s| s != "status");
    let scope_mismatch = !store.info.namespaced && path.namespace.is_some();
    let namespaced_by_name =
        store.info.namespaced && path.namespace.is_none() && path.name.is_some();
    if bad_sub || scope_mismatch || namespaced_by_name {
        return Err(ApiError::PathNotFound(format!(
            "the server could not find the requested resource ({})",
            store.info.qualified_name()
        )));
    }
    Ok(())
}

async fn serve_verb(
    state: &ApiState,
    store: Arc<ResourceStore>,
    path: ResourcePath,
    params: &Params,
    accept: Option<&str>,
    is_watch: bool,
) -> Result<Response<Body>, ApiError> {
    check_scope(&store, &path)?;
    if path.name.is_none() {
        params.is_watch()?;
    }
    let list = !is_watch && path.name.is_none();
    let protobuf = store.info.origin == crate::registry::Origin::Builtin;
    let output = negotiate::negotiate_with(accept, list, protobuf)?;
    let ns = path.namespace.as_deref();
    if is_watch {
        let mut q = WatchQuery::parse(&store.info, params)?;
        if let Some(name) = &path.name {
            q.selectors.require_name(name)?;
        }
        let ns = path.namespace.clone();
        return Ok(match output {
            Output::Table(v) => {
                let include = IncludeObject::parse(params.get("includeObject"))?;
                let enc = JsonLines::new(TableView::new(store.info.clone(), v, include));
                let start = WatchSession::start(&state.read, store, ns, q, enc).await?;
                watch_response(start, output)
            }
            Output::Metadata(v) => {
                let start =
                    WatchSession::start(&state.read, store, ns, q, JsonLines::new(MetadataView(v)))
                        .await?;
                watch_response(start, output)
            }
            // JSON-stored objects are encoded as protobuf on first use; one whose JSON its
            // kind's schema cannot read has no protobuf form, and then the collection is
            // served in the client's other offers, as for lists. The snapshot counts
            // JSON-stored objects, so a resource with none is not scanned.
            Output::Protobuf
                if {
                    let snap = store.snapshot();
                    snap.json_objects > 0
                        && snap
                            .range(ns.as_deref(), None)
                            .any(|o| !encode_protobuf::capable(o))
                } =>
            {
                if negotiate::negotiate(accept, false)? != Output::Json {
                    return Err(ApiError::NotAcceptable(
                        "objects of this collection have no protobuf form; watch them as application/json".into(),
                    ));
                }
                let start =
                    WatchSession::start(&state.read, store, ns, q, JsonLines::default()).await?;
                watch_response(start, Output::Json)
            }
            Output::Protobuf => {
                let enc = encode_protobuf::ProtobufFrames::default();
                let start = WatchSession::start(&state.read, store, ns, q, enc).await?;
                watch_response(start, output)
            }
            _ => {
                let start =
                    WatchSession::start(&state.read, store, ns, q, JsonLines::default()).await?;
                watch_response(start, output)
            }
        });
    }
    if let Some(name) = &path.name {
        let q = GetQuery::parse(params)?;
        let obj = read::get(&state.read, &store, ns, name, q).await?;
        // An object without a protobuf form: the client's other offers.
        let output = match output {
            Output::Protobuf if !encode_protobuf::capable(&obj) => {
                negotiate::negotiate(accept, false)?
            }
            o => o,
        };
        let body = match output {
            Output::Metadata(v) => encode::partial_metadata_body(v, &obj),
            Output::Table(v) => {
                let include = IncludeObject::parse(params.get("includeObject"))?;
                encode_table::object_table(&store.info, v, include, &obj)
            }
            Output::Json => Body::full(obj.json()),
            Output::Protobuf => encode_protobuf::object_body(&obj)?,
        };
        return Ok(typed_response(body, output, false));
    }
    let q = ListQuery::parse(&store.info, params)?;
    let include = match output {
        Output::Table(_) => IncludeObject::parse(params.get("includeObject"))?,
        _ => IncludeObject::Metadata,
    };
    let mut page = read::list_page(&state.read, &store, ns, &q).await?;
    let mut output = output;
    if output == Output::Protobuf {
        match encode_protobuf::list_body(&store.info, page) {
            Ok(body) => return Ok(typed_response(body, output, true)),
            // An object without a protobuf form: the list in the next media type the
            // client accepts.
            Err(p) => {
                page = p;
                output = negotiate::negotiate(accept, true)?;
            }
        }
    }
    let body = match output {
        Output::Metadata(v) => encode::partial_metadata_list_body(v, page),
        Output::Table(v) => encode_table::list_table(&store.info, v, include, page),
        Output::Protobuf => {
            return Err(ApiError::Internal(format!(
                "a {} list has objects with no protobuf form",
                store.info.resource
            )))
        }
        Output::Json => encode::list_body(&store.info, page),
    };
    Ok(typed_response(body, output, true))
}
