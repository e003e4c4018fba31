//! The Kubernetes read API over HTTP/1.1: routing, content negotiation, and the response
//! for every outcome (Status objects for errors).

pub mod body;
pub mod discovery;
pub mod encode;
pub mod health;
pub mod query;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::watch as signal;

use self::body::Body;
use self::encode::JsonLines;
use self::query::{ResourcePath, Route};
use crate::api::query::{GetQuery, ListQuery, Params, WatchQuery};
use crate::api::read::{self, ReadContext};
use crate::api::status::ApiError;
use crate::api::watch::{WatchSession, WatchStart};
use crate::store::ResourceStore;

/// What every request handler reads.
pub struct ApiState {
    /// The cache and etcd's revision, for reads (shared with the gRPC API).
    pub read: Arc<ReadContext>,
    /// The metrics renderer.
    pub metrics: Option<PrometheusHandle>,
    /// The address served, for `/api`'s serverAddressByClientCIDRs.
    pub address: String,
}

/// Accepts connections until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ApiState>,
    mut shutdown: signal::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let mut conn_shutdown = shutdown.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, req, peer).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .max_buf_size(crate::config::MAX_REQUEST_HEAD)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, %peer, "connection ended with an error");
                    }
                }
                _ = conn_shutdown.changed() => {}
            }
        });
    }
}

fn json_response(code: u16, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Body::full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn value_response(v: &serde_json::Value) -> Response<Body> {
    json_response(200, serde_json::to_vec(v).unwrap_or_default())
}

/// The response for an error: its Status object with the matching HTTP code.
pub fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = json_response(
        e.code(),
        serde_json::to_vec(&e.to_status()).unwrap_or_default(),
    );
    if let Some(secs) = e.retry_after() {
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    r
}

fn text_response(code: u16, body: String) -> Response<Body> {
    let mut r = Response::new(Body::full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Whether the client accepts plain JSON (the only representation served so far).
fn accepts_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return true;
    };
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let mime = parts.next().unwrap_or("").to_ascii_lowercase();
        let plain = parts.all(|p| !p.to_ascii_lowercase().starts_with("as="));
        plain && matches!(mime.as_str(), "application/json" | "application/*" | "*/*")
    })
}

async fn handle(state: &ApiState, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    let started = Instant::now();
    let (verb, resource, response) = route_request(state, &req).await;
    let code = response.status().as_u16();
    metrics::counter!("watchd_requests_total", "verb" => verb, "resource" => resource.clone(), "code" => code.to_string())
        .increment(1);
    metrics::histogram!("watchd_request_duration_seconds", "verb" => verb, "resource" => resource)
        .record(started.elapsed().as_secs_f64());
    tracing::debug!(%peer, method = %req.method(), uri = %req.uri(), code, verb, "request");
    response
}

async fn route_request(
    state: &ApiState,
    req: &Request<Incoming>,
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
    let result = match route {
        Route::Resource(path) => return serve_resource(state, req, path, &params).await,
        Route::ApiVersions => Ok(value_response(&discovery::api_versions(&state.address))),
        Route::ApiGroupList => Ok(value_response(&discovery::api_group_list(&index))),
        Route::ApiGroup(g) => discovery::api_group(&index, &g).map(|v| value_response(&v)),
        Route::ResourceList { group, version } => {
            discovery::api_resource_list(&index, &group, &version).map(|v| value_response(&v))
        }
        Route::Version => Ok(value_response(&discovery::version())),
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
                .map(|m| m.render())
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

async fn serve_resource(
    state: &ApiState,
    req: &Request<Incoming>,
    path: ResourcePath,
    params: &Params,
) -> (&'static str, String, Response<Body>) {
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
    let is_watch = path.legacy_watch || params.is_watch().unwrap_or(false);
    let verb = match (is_watch, path.name.is_some()) {
        (true, _) => "watch",
        (false, true) => "get",
        (false, false) => "list",
    };
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let response = match serve_verb(state, store, path, params, accept, is_watch).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
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
    params.is_watch()?;
    if !accepts_json(accept) {
        return Err(ApiError::NotAcceptable(format!(
            "only the following media types are accepted: application/json (got {:?})",
            accept.unwrap_or_default()
        )));
    }
    if !state.read.cache.is_synced() {
        return Err(ApiError::Unavailable(
            "the cache is still loading from etcd".into(),
        ));
    }
    let ns = path.namespace.as_deref();
    if is_watch {
        let mut q = WatchQuery::parse(&store.info, params)?;
        if let Some(name) = &path.name {
            // Watching one object by path is a watch with a name field selector.
            let sel = format!("metadata.name={name}");
            q.selectors.fields = crate::selectors::FieldSelector::parse(&sel)
                .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        }
        let start = WatchSession::start(
            &state.read,
            store,
            path.namespace.clone(),
            q,
            JsonLines::default(),
        )
        .await?;
        return Ok(watch_response(start));
    }
    if let Some(name) = &path.name {
        let q = GetQuery::parse(params)?;
        let bytes = read::get(&state.read, &store, ns, name, q).await?;
        return Ok(json_response(200, bytes));
    }
    let q = ListQuery::parse(&store.info, params)?;
    let page = read::list_page(&state.read, &store, ns, &q).await?;
    let mut r = Response::new(encode::list_body(&store.info, page));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

fn watch_response(start: WatchStart<JsonLines>) -> Response<Body> {
    let body = match start {
        WatchStart::Error(e) => Body::full(encode::error_frame(&e)),
        WatchStart::Session(session) => {
            Body::stream(futures_util::stream::unfold(session, |mut s| async move {
                s.next_frame().await.map(|f| (f, s))
            }))
        }
    };
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_acceptable_unless_only_other_forms_are_offered() {
        assert!(accepts_json(None));
        assert!(accepts_json(Some("application/json")));
        assert!(accepts_json(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        )));
        assert!(accepts_json(Some("*/*")));
        assert!(!accepts_json(Some("application/vnd.kubernetes.protobuf")));
        assert!(!accepts_json(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        )));
        assert!(!accepts_json(Some("text/html")));
    }
}
