//! The client of the upstream Kubernetes API server watchd fronts (`--upstream-url`,
//! `--upstream-kubeconfig`): requests with streamed bodies both ways, sent either with
//! watchd's own credentials (its reads as a source, and requests it passes through on
//! behalf of a user it authenticated, impersonated) or with none of them (requests passed
//! through with the client's own `Authorization`). Connection upgrades (exec, attach,
//! port-forward) go over HTTP/1.1 connections of their own, since an HTTP/2 connection
//! cannot be upgraded.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{header, Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::{CallError, Endpoint, KubeconfigError, TokenSource};

/// A request or response body of any origin, streamed.
pub type StreamBody = UnsyncBoxBody<Bytes, Box<dyn StdError + Send + Sync>>;

/// An empty [`StreamBody`].
pub fn empty_body() -> StreamBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// Whose credentials a request carries upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credentials {
    /// watchd's own (the kubeconfig's client certificate or token).
    Own,
    /// None of watchd's: the request carries only what its client sent.
    None,
}

type HttpClient = Client<HttpsConnector<HttpConnector>, StreamBody>;

/// One connection pool per (credentials, upgradable).
struct Pools {
    any: HttpClient,
    http1: HttpClient,
}

impl Pools {
    fn new(endpoint: &Endpoint) -> Result<Pools, KubeconfigError> {
        let build = |http1_only: bool| -> Result<HttpClient, KubeconfigError> {
            let mut tcp = HttpConnector::new();
            tcp.set_nodelay(true);
            tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
            let connector = super::connector(endpoint, http1_only, tcp)?;
            Ok(Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .build(connector))
        };
        Ok(Pools {
            any: build(false)?,
            http1: build(true)?,
        })
    }
}

/// How long connecting to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The upstream API server.
pub struct UpstreamClient {
    base: Uri,
    own: Pools,
    anonymous: Pools,
    token: Option<TokenSource>,
    server: String,
}

impl UpstreamClient {
    /// A client of `endpoint`; fails on an unusable URL, certificate or key.
    pub fn new(endpoint: &Endpoint) -> Result<UpstreamClient, KubeconfigError> {
        let base: Uri = endpoint
            .server
            .parse()
            .map_err(|source| KubeconfigError::ServerUrl {
                server: endpoint.server.clone(),
                source,
            })?;
        match base.scheme_str() {
            Some("http" | "https") if base.authority().is_some() => {}
            _ => return Err(KubeconfigError::NotHttpUrl(endpoint.server.clone())),
        }
        let without_user = Endpoint {
            client_cert: None,
            token: None,
            ..endpoint.clone()
        };
        Ok(UpstreamClient {
            base,
            own: Pools::new(endpoint)?,
            anonymous: Pools::new(&without_user)?,
            token: endpoint.token.as_ref().map(TokenSource::new),
            server: endpoint.server.clone(),
        })
    }

    /// The server URL, for logs.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The URI of `path_and_query` on the upstream (after the server URL's own path).
    pub fn uri(&self, path_and_query: &str) -> Result<Uri, CallError> {
        let bad = |source: http::Error| CallError::Request {
            target: path_and_query.to_string(),
            source,
        };
        let prefix = self.base.path().trim_end_matches('/');
        let pq: PathAndQuery = format!("{prefix}{path_and_query}")
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(e.into()))?;
        let mut parts = self.base.clone().into_parts();
        parts.path_and_query = Some(pq);
        Uri::from_parts(parts).map_err(|e| bad(e.into()))
    }

    /// Sends `req` (its URI already made with [`UpstreamClient::uri`]) with `credentials`;
    /// the response head, its body still streaming. An upgrade request goes over an
    /// HTTP/1.1 connection.
    pub async fn send(
        &self,
        mut req: Request<StreamBody>,
        credentials: Credentials,
    ) -> Result<Response<Incoming>, CallError> {
        let pools = match credentials {
            Credentials::Own => {
                if let Some(token) = &self.token {
                    req.headers_mut()
                        .insert(header::AUTHORIZATION, token.header()?);
                }
                &self.own
            }
            Credentials::None => &self.anonymous,
        };
        let upgrade = req.headers().contains_key(header::UPGRADE);
        let http = if upgrade { &pools.http1 } else { &pools.any };
        if upgrade {
            *req.version_mut() = http::Version::HTTP_11;
        }
        http.request(req)
            .await
            .map_err(|e| CallError::Transport(Box::new(e)))
    }

    /// GETs `path_and_query` with watchd's credentials, accepting `accept`.
    pub async fn get(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<Response<Incoming>, CallError> {
        let req = Request::get(self.uri(path_and_query)?)
            .header(header::ACCEPT, accept)
            .header(
                header::USER_AGENT,
                concat!("watchd/", env!("CARGO_PKG_VERSION")),
            )
            .body(empty_body())
            .map_err(|source| CallError::Request {
                target: path_and_query.to_string(),
                source,
            })?;
        self.send(req, Credentials::Own).await
    }

    /// GETs `path_and_query` and reads the whole body (at most `limit` bytes), within
    /// `timeout`: the status and the body.
    pub async fn get_body(
        &self,
        path_and_query: &str,
        accept: &str,
        limit: usize,
        timeout: Duration,
    ) -> Result<(u16, Bytes), CallError> {
        let call = async {
            let resp = self.get(path_and_query, accept).await?;
            let status = resp.status().as_u16();
            let body = http_body_util::Limited::new(resp.into_body(), limit)
                .collect()
                .await
                .map_err(CallError::Body)?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| CallError::Timeout(timeout))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_joined_after_the_servers_own_path() {
        let plain = Endpoint {
            server: "http://127.0.0.1:8080".into(),
            ..Endpoint::default()
        };
        let c = UpstreamClient::new(&plain).unwrap();
        assert_eq!(
            c.uri("/api/v1/pods?watch=1").unwrap().to_string(),
            "http://127.0.0.1:8080/api/v1/pods?watch=1"
        );
        let behind = Endpoint {
            server: "https://example.test:6443/k8s/".into(),
            ..Endpoint::default()
        };
        let c = UpstreamClient::new(&behind).unwrap();
        assert_eq!(
            c.uri("/apis").unwrap().to_string(),
            "https://example.test:6443/k8s/apis"
        );
    }

    #[test]
    fn a_server_that_is_not_an_http_url_is_refused() {
        for server in ["127.0.0.1:8080", "ftp://x", "/just/a/path"] {
            let e = Endpoint {
                server: server.into(),
                ..Endpoint::default()
            };
            assert!(UpstreamClient::new(&e).is_err(), "{server}");
        }
    }
}
