//! Setting up a connection once its transport is known: the `Connection` a request
//! came on, and HTTP/2 ([`super::h2_conn`]) or HTTP/1.1 (hyper) on it. The listener
//! (`server.rs`) and the plain HTTP/1.1 server (`h1.rs`, which hands over what it does
//! not serve) both start connections here.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};

use super::{handle, ApiState};

/// The connection a request came on: the peer's address and, over TLS, its client
/// certificate.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The peer's address.
    pub peer: SocketAddr,
    /// Its dispatch shard hint: the watches served on it are woken (and, over plain
    /// HTTP/1.1, written) by that shard's thread.
    pub shard: usize,
    /// The chain the client presented in the handshake, with the verifiers that
    /// classify it for each request ([`Connection::certificate`]).
    pub peer_chain: Option<(
        Vec<rustls::pki_types::CertificateDer<'static>>,
        crate::tls::ClientCertVerifiers,
    )>,
}

impl Connection {
    /// The client certificate, classified by the roots it chains to now: checked per
    /// request, so one that expires, or whose CA is removed, stops authenticating on a
    /// connection that stays open.
    pub fn certificate(&self) -> Option<crate::tls::PeerCertificate> {
        let (chain, verifiers) = self.peer_chain.as_ref()?;
        verifiers.classify(chain)
    }
}

/// The connection preface of HTTP/2 with prior knowledge (RFC 9113, 3.4).
pub(super) const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves a connection: HTTP/2 ([`super::h2_conn`]) or HTTP/1.1 with hyper, until it
/// ends, or drained once `drain` resolves (the server stopping).
pub(super) async fn serve_connection<I>(
    io: I,
    h2: bool,
    state: Arc<ApiState>,
    conn: Connection,
    drain: tokio::sync::oneshot::Receiver<()>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if h2 {
        let settings = super::h2_conn::Settings {
            max_streams: crate::config::HTTP2_MAX_STREAMS,
            drain: Some(drain),
        };
        return super::h2_conn::serve(io, state, conn, settings).await;
    }
    let peer = conn.peer;
    let conn = Arc::new(conn);
    let svc = service_fn(move |req| {
        let state = state.clone();
        let conn = conn.clone();
        // Boxed: the request's future is large and done once it answers.
        async move { Ok::<_, Infallible>(Box::pin(handle(&state, req, &conn)).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(crate::config::HTTP1_IDLE_TIMEOUT)
        .max_buf_size(crate::config::MAX_REQUEST_HEAD)
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades();
    if let Err(e) = drained(served, drain).await {
        tracing::debug!(error = %e, %peer, "connection ended with an error");
    }
}

/// Runs a hyper HTTP/1.1 connection; once `drain` resolves, it ends after the response
/// in flight (at once if idle).
async fn drained<I, S>(
    served: hyper::server::conn::http1::UpgradeableConnection<I, S>,
    drain: tokio::sync::oneshot::Receiver<()>,
) -> hyper::Result<()>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::pin!(served);
    tokio::select! {
        r = served.as_mut() => r,
        _ = drain => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    }
}
