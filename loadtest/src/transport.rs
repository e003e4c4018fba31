//! HTTP connections to an [`Endpoint`] on hyper's connection API: HTTP/1.1
//! (one connection per [`Conn`], as an informer without HTTP/2 has) or
//! HTTP/2 (a connection whose [`Conn::stream`] handles each carry their own
//! requests as streams, as client-go multiplexes every watch of a process),
//! over TCP or TLS. Every request carries the endpoint's `Authorization`.
//!
//! The HTTP/2 client advertises large flow-control windows, so that the
//! generator, not the server, is never what a stream waits for; the
//! connection's frames are read by its own driver task, and each response
//! body by the task that owns it, so one slow stream does not stall the
//! others.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::endpoint::{Endpoint, Protocol};
use crate::http::Accept;

/// HTTP/2 receive window of each stream: 4 MiB, twice hyper's client
/// default and 64 times the protocol's, so a stream is never held back by
/// the generator while its task is busy.
pub const H2_STREAM_WINDOW: u32 = 4 << 20;
/// HTTP/2 receive window of each connection: 256 MiB (up to 100 streams
/// each with a full window, plus room).
pub const H2_CONNECTION_WINDOW: u32 = 256 << 20;

enum Sender {
    H1(http1::SendRequest<Empty<Bytes>>),
    H2(http2::SendRequest<Empty<Bytes>>),
}

/// One connection (HTTP/1.1: requests one after another) or one handle on
/// an HTTP/2 connection (requests are streams, concurrent with those of the
/// other handles).
pub struct Conn {
    endpoint: Arc<Endpoint>,
    sender: Sender,
}

impl Conn {
    /// Connects to `endpoint` speaking `protocol` (TCP_NODELAY, like
    /// client-go; TLS for `https://`, where the server must agree to the
    /// protocol by ALPN), all within `timeout`.
    pub async fn open(
        endpoint: &Arc<Endpoint>,
        protocol: Protocol,
        timeout: Duration,
    ) -> Result<Self, String> {
        let base = endpoint.url.base();
        let connect = async {
            let tcp = TcpStream::connect(endpoint.addr)
                .await
                .map_err(|e| format!("connect {base} ({}): {e}", endpoint.addr))?;
            let _ = tcp.set_nodelay(true);
            let Some(tls) = &endpoint.tls else {
                return handshake(tcp, protocol).await;
            };
            let stream = TlsConnector::from(tls.config(protocol))
                .connect(tls.server_name.clone(), tcp)
                .await
                .map_err(|e| format!("TLS handshake with {base}: {e}"))?;
            let alpn = stream.get_ref().1.alpn_protocol();
            if protocol == Protocol::Http2 && alpn != Some(protocol.alpn()) {
                return Err(format!(
                    "{base} did not agree to HTTP/2 by ALPN (it chose {:?})",
                    alpn.map(String::from_utf8_lossy)
                ));
            }
            handshake(stream, protocol).await
        };
        let sender = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| format!("connect {base}: timed out after {timeout:?}"))?
            .map_err(|e| format!("{protocol} to {base}: {e}"))?;
        Ok(Self {
            endpoint: endpoint.clone(),
            sender,
        })
    }

    /// The protocol spoken.
    pub fn protocol(&self) -> Protocol {
        match self.sender {
            Sender::H1(_) => Protocol::Http1,
            Sender::H2(_) => Protocol::Http2,
        }
    }

    /// Another handle on the same HTTP/2 connection, whose requests are
    /// further streams on it; `None` for HTTP/1.1.
    pub fn stream(&self) -> Option<Conn> {
        match &self.sender {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Conn {
                endpoint: self.endpoint.clone(),
                sender: Sender::H2(s.clone()),
            }),
        }
    }

    /// Sends `GET path_and_query` asking for JSON and returns the response
    /// head; the body streams afterwards.
    pub async fn get(&mut self, path_and_query: &str) -> Result<Response<Incoming>, String> {
        self.get_as(path_and_query, Accept::Json).await
    }

    /// Sends `GET path_and_query` (under the URL's path prefix) with
    /// `Accept: <accept's media type>` and the endpoint's credentials, and
    /// returns the response head; the body streams afterwards.
    pub async fn get_as(
        &mut self,
        path_and_query: &str,
        accept: Accept,
    ) -> Result<Response<Incoming>, String> {
        self.get_encoded(path_and_query, accept, None).await
    }

    /// [`Conn::get_as`] with `Accept-Encoding: <encoding>` when given (`gzip`: the server
    /// may compress the body, which the caller then decodes).
    pub async fn get_encoded(
        &mut self,
        path_and_query: &str,
        accept: Accept,
        encoding: Option<&str>,
    ) -> Result<Response<Incoming>, String> {
        let url = &self.endpoint.url;
        let path = format!("{}{path_and_query}", url.path_prefix);
        let closed = |e: hyper::Error| format!("GET {path}: connection closed: {e}");
        // HTTP/1.1 sends the origin form and `Host`; HTTP/2 takes its
        // `:scheme` and `:authority` from an absolute URI.
        let mut req = match self.sender {
            Sender::H1(_) => Request::get(&path).header(hyper::header::HOST, url.authority()),
            Sender::H2(_) => {
                Request::get(format!("{}://{}{path}", url.scheme.name(), url.authority()))
            }
        }
        .header(hyper::header::ACCEPT, accept.media_type());
        if let Some(e) = encoding {
            req = req.header(hyper::header::ACCEPT_ENCODING, e);
        }
        if let Some(auth) = &self.endpoint.authorization {
            req = req.header(hyper::header::AUTHORIZATION, auth.clone());
        }
        let req = req
            .body(Empty::new())
            .map_err(|e| format!("GET {path}: {e}"))?;
        let sent = match &mut self.sender {
            Sender::H1(s) => {
                s.ready().await.map_err(closed)?;
                s.send_request(req).await
            }
            Sender::H2(s) => {
                s.ready().await.map_err(closed)?;
                s.send_request(req).await
            }
        };
        sent.map_err(|e| format!("GET {path}: {e}"))
    }

    /// `GET` with the whole body collected, within `timeout`.
    pub async fn get_body(
        &mut self,
        path_and_query: &str,
        timeout: Duration,
    ) -> Result<(u16, Bytes), String> {
        let fetch = async {
            let resp = self.get(path_and_query).await?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("GET {path_and_query}: body: {e}"))?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, fetch)
            .await
            .map_err(|_| format!("GET {path_and_query}: timed out after {timeout:?}"))?
    }
}

/// The HTTP handshake on an open transport; the connection is driven by a
/// task of its own until every handle and body is dropped.
async fn handshake<I>(io: I, protocol: Protocol) -> Result<Sender, String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match protocol {
        Protocol::Http1 => {
            let (sender, conn) = http1::handshake(TokioIo::new(io))
                .await
                .map_err(|e| format!("handshake: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Sender::H1(sender))
        }
        Protocol::Http2 => {
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(H2_STREAM_WINDOW)
                .initial_connection_window_size(H2_CONNECTION_WINDOW)
                .handshake(TokioIo::new(io))
                .await
                .map_err(|e| format!("handshake: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Sender::H2(sender))
        }
    }
}

/// One `GET` on a fresh connection: (status, body).
pub async fn get_once(
    endpoint: &Arc<Endpoint>,
    protocol: Protocol,
    path_and_query: &str,
    timeout: Duration,
) -> Result<(u16, Bytes), String> {
    let mut conn = Conn::open(endpoint, protocol, timeout).await?;
    conn.get_body(path_and_query, timeout).await
}
