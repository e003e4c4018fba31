//! Pass-through to the upstream API server (`--upstream-url`, `--upstream-kubeconfig`):
//! every request the cache does not answer — writes, subresources other than `status`,
//! upgrades (exec, attach, port-forward), APIs it does not cache, OpenAPI, `/version`,
//! anything unknown — goes upstream unchanged and its response comes back unchanged,
//! streamed both ways. Discovery is the upstream's too (a superset of what the cache
//! serves; `/apis` gains any group only the cache serves), or the cache's own when the
//! upstream cannot answer it.
//!
//! Identity: with authentication configured, the user watchd authenticated is carried
//! upstream in impersonation headers under watchd's own credentials (its user needs the
//! `impersonate` verb: `deploy/upstream-rbac.yaml`); a request that itself impersonates
//! is refused, since its impersonation could not be checked. Without authentication the
//! request goes with the client's own `Authorization` and none of watchd's credentials.
//! Never both.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::body::{Body, BufList};
use super::query::{self as route, Route};
use crate::api::status::ApiError;
use crate::auth::UserInfo;
use crate::client::upstream::{empty_body, Credentials, StreamBody, UpstreamClient};
use crate::store::Cache;

/// A request body the proxy can forward.
pub trait ForwardBody: Sized {
    /// The body as a stream for the upstream request.
    fn into_stream_body(self) -> StreamBody;

    /// Reads and drops what the client sends of a body it will not be asked for (at
    /// most 1 MiB, for at most a second): an HTTP/2 stream whose body is dropped unread
    /// is reset, which some clients (curl) take as a failure of the answer sent before.
    fn discard(self) -> impl std::future::Future<Output = ()> + Send {
        let mut body = self.into_stream_body();
        async move {
            let read = async {
                let mut seen = 0usize;
                while let Some(Ok(frame)) = body.frame().await {
                    seen += frame.data_ref().map_or(0, |d| d.len());
                    if seen > DISCARD_LIMIT {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(DISCARD_WAIT, read).await;
        }
    }
}

/// Most of an unwanted request body read before it is dropped.
const DISCARD_LIMIT: usize = 1 << 20;
/// Longest wait for an unwanted request body.
const DISCARD_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl ForwardBody for () {
    fn into_stream_body(self) -> StreamBody {
        empty_body()
    }
}

impl ForwardBody for Incoming {
    fn into_stream_body(self) -> StreamBody {
        self.map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            .boxed_unsync()
    }
}

/// The pass-through.
pub struct Proxy {
    client: Arc<UpstreamClient>,
    /// Whether users are authenticated here (and so impersonated upstream).
    impersonate: bool,
}

/// What to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The cache answers it.
    No,
    /// The upstream answers it.
    Yes,
    /// Discovery: the upstream's, or the cache's if the upstream cannot be reached.
    Discovery,
}

/// Headers that belong to one connection, never forwarded (RFC 9110, 7.6.1), plus
/// `Host` (the upstream's comes from its URL).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

impl Proxy {
    /// A pass-through to `client`'s server; `impersonate` when watchd authenticates users.
    pub fn new(client: Arc<UpstreamClient>, impersonate: bool) -> Proxy {
        Proxy {
            client,
            impersonate,
        }
    }

    /// Whether the cache answers a request, or the upstream does. Reads of a resource
    /// still loading pass through when the source cannot answer them itself
    /// (`reads_unready` false: the upstream is the source, and its answer comes sooner
    /// than a 429).
    pub fn decide<B>(req: &Request<B>, cache: &Cache, reads_unready: bool) -> Pass {
        let index = cache.resources();
        let read = req.method() == Method::GET || req.method() == Method::HEAD;
        if !read || req.headers().contains_key(header::UPGRADE) {
            return Pass::Yes;
        }
        match route::route(req.uri().path()) {
            Err(_) | Ok(Route::Unknown | Route::Version | Route::OpenApi(_)) => Pass::Yes,
            Ok(Route::Health { .. } | Route::Metrics) => Pass::No,
            Ok(Route::ApiVersions | Route::ApiGroupList | Route::ApiGroup(_)) => Pass::Discovery,
            Ok(Route::ResourceList { .. }) => Pass::Discovery,
            Ok(Route::Resource(path)) => {
                let Some(store) = index.by_api(&path.group, &path.version, &path.resource) else {
                    return Pass::Yes;
                };
                let other_sub = path.subresource.as_deref().is_some_and(|s| s != "status");
                let scope = store.info.namespaced != path.namespace.is_some()
                    && !(store.info.namespaced && path.name.is_none());
                let loading = !reads_unready
                    && !matches!(store.health.readiness(), crate::store::Readiness::Ready);
                if other_sub || scope || loading {
                    Pass::Yes
                } else {
                    Pass::No
                }
            }
        }
    }

    /// Sends `req` upstream and streams back the answer; a failure to reach the upstream
    /// is a 503 Status (None for discovery, which the caller then serves itself).
    pub async fn forward<B: ForwardBody>(
        &self,
        mut req: Request<B>,
        user: Option<&UserInfo>,
        peer: SocketAddr,
        pass: Pass,
    ) -> Option<Response<Body>> {
        let upgrade = req.headers().contains_key(header::UPGRADE);
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        let (parts, body) = req.into_parts();
        let target = parts
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_string();
        let uri = match self.client.uri(&target) {
            Ok(u) => u,
            Err(e) => {
                body.discard().await;
                return Some(error(&ApiError::BadRequest(format!(
                    "bad request target: {e}"
                ))));
            }
        };
        let mut headers = parts.headers;
        strip_hop_by_hop(&mut headers, upgrade);
        append_forwarded_for(&mut headers, peer);
        let credentials = if self.impersonate {
            if headers
                .keys()
                .any(|n| n.as_str().starts_with("impersonate-"))
            {
                body.discard().await;
                return Some(error(&forbidden(
                    "impersonation is not supported through watchd: send requests that impersonate to the API server itself".into(),
                )));
            }
            headers.remove(header::AUTHORIZATION);
            let Some(user) = user else {
                body.discard().await;
                return Some(error(&ApiError::Unauthorized));
            };
            if let Err(e) = impersonate(&mut headers, user) {
                body.discard().await;
                return Some(error(&e));
            }
            Credentials::Own
        } else {
            Credentials::None
        };
        let mut upstream_req = Request::new(body.into_stream_body());
        *upstream_req.method_mut() = parts.method.clone();
        *upstream_req.uri_mut() = uri;
        *upstream_req.headers_mut() = headers;
        let started = std::time::Instant::now();
        let mut resp = match self.client.send(upstream_req, credentials).await {
            Ok(r) => r,
            Err(e) => {
                metrics::counter!("watchd_proxy_requests_total", "code" => "<error>").increment(1);
                tracing::warn!(method = %parts.method, target = %target, error = %e, "the upstream API server cannot be reached");
                if pass == Pass::Discovery {
                    return None;
                }
                return Some(error(&ApiError::Unavailable(format!(
                    "the upstream API server cannot be reached: {e}"
                ))));
            }
        };
        let status = resp.status();
        metrics::counter!("watchd_proxy_requests_total", "code" => status.as_str().to_string())
            .increment(1);
        metrics::histogram!("watchd_proxy_response_head_seconds")
            .record(started.elapsed().as_secs_f64());
        if status == StatusCode::SWITCHING_PROTOCOLS {
            let upstream_upgrade = hyper::upgrade::on(&mut resp);
            if let Some(client_upgrade) = client_upgrade {
                tokio::spawn(splice(client_upgrade, upstream_upgrade, target.clone()));
            }
            let (mut parts, _) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers, true);
            parts
                .headers
                .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
            return Some(Response::from_parts(parts, Body::full(Bytes::new())));
        }
        let (mut parts, body) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers, false);
        // The body is re-framed here (chunked, or HTTP/2 DATA frames).
        parts.headers.remove(header::CONTENT_LENGTH);
        let frames = body.into_data_stream().scan((), |_, chunk| {
            std::future::ready(match chunk {
                Ok(data) => {
                    let mut list = BufList::new();
                    list.push(data);
                    Some(list)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "upstream response body ended with an error");
                    None
                }
            })
        });
        let body =
            if parts.status == StatusCode::NOT_MODIFIED || parts.status == StatusCode::NO_CONTENT {
                Body::full(Bytes::new())
            } else {
                Body::stream(frames)
            };
        Some(Response::from_parts(parts, body))
    }
}

/// Copies both ways between the client's and the upstream's upgraded connections.
async fn splice(
    client: hyper::upgrade::OnUpgrade,
    upstream: hyper::upgrade::OnUpgrade,
    target: String,
) {
    let (client, upstream) = match tokio::try_join!(client, upstream) {
        Ok(both) => both,
        Err(e) => {
            tracing::debug!(%target, error = %e, "upgrade failed");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut upstream = TokioIo::new(upstream);
    metrics::gauge!("watchd_proxy_upgraded_connections").increment(1.0);
    let copied = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    metrics::gauge!("watchd_proxy_upgraded_connections").decrement(1.0);
    if let Err(e) = copied {
        tracing::debug!(%target, error = %e, "upgraded connection ended with an error");
    }
}

fn forbidden(message: String) -> ApiError {
    ApiError::Forbidden {
        group: String::new(),
        resource: String::new(),
        name: String::new(),
        message,
    }
}

fn error(e: &ApiError) -> Response<Body> {
    super::error_response(e)
}

/// Removes the headers of one hop (and those `Connection` names); an upgrade keeps
/// `Upgrade` and says `Connection: Upgrade` again. Also what an HTTP/2 response head must
/// not carry (`h2_conn`).
pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .filter(|n| *n != header::UPGRADE)
        .collect();
    for n in named {
        headers.remove(n);
    }
    for n in HOP_BY_HOP {
        headers.remove(n);
    }
    headers.remove(header::HOST);
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    } else {
        headers.remove(header::UPGRADE);
    }
}

/// Adds the client's address to `X-Forwarded-For` (kube-apiserver's audit log reads
/// the source IPs from it).
fn append_forwarded_for(headers: &mut HeaderMap, peer: SocketAddr) {
    let ip = peer.ip().to_string();
    let value = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(prior) => format!("{prior}, {ip}"),
        None => ip,
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert("x-forwarded-for", v);
    }
}

/// Carries `user` upstream as kube-apiserver's impersonation headers read it: the name,
/// each group, the uid, and each extra value (`Impersonate-Extra-<key>`, the key
/// percent-encoded).
fn impersonate(headers: &mut HeaderMap, user: &UserInfo) -> Result<(), ApiError> {
    let value = |s: &str| {
        HeaderValue::from_str(s).map_err(|_| {
            forbidden(format!(
                "user {:?} cannot be carried upstream in a header",
                user.name
            ))
        })
    };
    headers.insert("impersonate-user", value(&user.name)?);
    for g in &user.groups {
        headers.append("impersonate-group", value(g)?);
    }
    if !user.uid.is_empty() {
        headers.insert("impersonate-uid", value(&user.uid)?);
    }
    for (key, values) in &user.extra {
        let name = format!("impersonate-extra-{}", percent_encode_key(key));
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| forbidden(format!("extra {key:?} cannot be carried upstream")))?;
        for v in values {
            headers.append(name.clone(), value(v)?);
        }
    }
    Ok(())
}

/// A header-name-safe form of an extra key, as client-go writes it: bytes outside the
/// token characters (and `%`) are percent-encoded.
fn percent_encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        let token = b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b);
        if token {
            out.push(b.to_ascii_lowercase() as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn req(method: Method, target: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(target)
            .body(())
            .unwrap()
    }

    fn index() -> Arc<Cache> {
        Cache::new("/registry", crate::store::StoreConfig::small())
    }

    #[test]
    fn resources_still_loading_from_the_upstream_are_read_upstream() {
        let cache = Cache::per_resource("/registry", crate::store::StoreConfig::small());
        let pods = req(Method::GET, "/api/v1/pods");
        // An upstream source does not read resources that are not ready.
        assert_eq!(
            Proxy::decide(&pods, &cache, false),
            Pass::Yes,
            "not loaded yet"
        );
        let store = cache.resources().by_api("", "v1", "pods").unwrap().clone();
        store.health.loaded(imbl::OrdMap::new());
        assert_eq!(Proxy::decide(&pods, &cache, false), Pass::No, "loaded");
        // A cache fed by etcd answers itself while it loads (reading etcd).
        let etcd_fed = index();
        assert_eq!(Proxy::decide(&pods, &etcd_fed, true), Pass::No);
    }

    #[test]
    fn the_cache_answers_reads_of_what_it_holds_and_the_upstream_the_rest() {
        let index = index();
        let cases = [
            (Method::GET, "/api/v1/pods", Pass::No),
            (Method::GET, "/api/v1/namespaces/d/pods/p", Pass::No),
            (Method::GET, "/api/v1/namespaces/d/pods/p/status", Pass::No),
            (Method::GET, "/apis/apps/v1/deployments?watch=1", Pass::No),
            (Method::GET, "/api/v1/namespaces/d/pods?watch=1", Pass::No),
            (Method::GET, "/healthz", Pass::No),
            (Method::GET, "/metrics", Pass::No),
            (Method::POST, "/api/v1/namespaces/d/pods", Pass::Yes),
            (Method::DELETE, "/api/v1/namespaces/d/pods/p", Pass::Yes),
            (
                Method::PATCH,
                "/api/v1/namespaces/d/pods/p/status",
                Pass::Yes,
            ),
            (Method::GET, "/api/v1/namespaces/d/pods/p/log", Pass::Yes),
            (
                Method::GET,
                "/apis/apps/v1/namespaces/d/deployments/x/scale",
                Pass::Yes,
            ),
            (Method::GET, "/apis/metrics.k8s.io/v1beta1/pods", Pass::Yes),
            (Method::GET, "/openapi/v2", Pass::Yes),
            (Method::GET, "/openapi/v3/apis/apps/v1?hash=A", Pass::Yes),
            (Method::GET, "/version", Pass::Yes),
            (Method::GET, "/logs/", Pass::Yes),
            (Method::GET, "/api", Pass::Discovery),
            (Method::GET, "/apis", Pass::Discovery),
            (Method::GET, "/apis/apps/v1", Pass::Discovery),
        ];
        for (method, target, want) in cases {
            assert_eq!(
                Proxy::decide(&req(method.clone(), target), &index, true),
                want,
                "{method} {target}"
            );
        }
        let mut exec = req(Method::GET, "/api/v1/namespaces/d/pods/p/exec?command=ls");
        exec.headers_mut()
            .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert_eq!(Proxy::decide(&exec, &index, true), Pass::Yes);
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert(header::HOST, HeaderValue::from_static("watchd:8080"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        strip_hop_by_hop(&mut h, false);
        let left: Vec<_> = h.keys().map(|k| k.as_str().to_string()).collect();
        assert_eq!(left, ["content-type"]);

        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h.get(header::UPGRADE).unwrap(), "SPDY/3.1");
        assert_eq!(h.get(header::CONNECTION).unwrap(), "Upgrade");
    }

    #[test]
    fn connection_specific_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("close, x-hop"));
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::CONTENT_TYPE));
    }

    #[test]
    fn users_are_carried_in_impersonation_headers() {
        let user = UserInfo {
            name: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: BTreeMap::from([(
                "authentication.kubernetes.io/pod-name".to_string(),
                vec!["p".to_string()],
            )]),
        };
        let mut h = HeaderMap::new();
        impersonate(&mut h, &user).unwrap();
        assert_eq!(h.get("impersonate-user").unwrap(), "alice");
        let groups: Vec<_> = h.get_all("impersonate-group").iter().collect();
        assert_eq!(groups, ["dev", "system:authenticated"]);
        assert_eq!(h.get("impersonate-uid").unwrap(), "u-1");
        assert_eq!(
            h.get("impersonate-extra-authentication.kubernetes.io%2Fpod-name")
                .unwrap(),
            "p"
        );
    }

    #[test]
    fn forwarded_for_names_every_hop() {
        let peer: SocketAddr = "127.0.0.7:5000".parse().unwrap();
        let mut h = HeaderMap::new();
        append_forwarded_for(&mut h, peer);
        assert_eq!(h.get("x-forwarded-for").unwrap(), "127.0.0.7");
        append_forwarded_for(&mut h, peer);
        assert_eq!(h.get("x-forwarded-for").unwrap(), "127.0.0.7, 127.0.0.7");
    }
}
