//! Listening: the accept loop, TLS handshakes, and one HTTP/1.1 or HTTP/2 connection per
//! peer. Plain connections go to [`super::h1`], which hands HTTP/2 with prior knowledge
//! (recognised by its preface) back here; over TLS, ALPN decides. HTTP/2 connections are
//! [`super::h2_conn`]'s.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch as signal;

use super::write_deadline::WriteDeadline;
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

/// Accepts connections until `shutdown` turns true, then ends the open ones: TLS when
/// `tls` is given (HTTP/2 or HTTP/1.1 as ALPN chose), else plain HTTP/1.1 or HTTP/2 with
/// prior knowledge (h2c).
///
/// Connections are tasks of a `JoinSet` aborted at shutdown, rather than each watching
/// the shutdown signal: a signal receiver polled with every poll of every connection
/// would take the signal's lock, shared by all of them, on each.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ApiState>,
    tls: Option<crate::tls::TlsServing>,
    mut shutdown: signal::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
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
            // Finished connections are reaped as they end.
            Some(_) = connections.join_next() => continue,
            _ = shutdown.changed() => {
                connections.abort_all();
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let shard = crate::dispatch::shards::next_hint();
        let write_timeout = state.write_timeout;
        let state = state.clone();
        let tls = tls.clone();
        // Each path boxed apart: the task is sized by the path it takes, not by the
        // largest (it stays that size for as long as the connection's watches last).
        connections.spawn(async move {
            let io = WriteDeadline::new(stream, write_timeout);
            match tls {
                None => {
                    let conn = Connection {
                        peer,
                        shard,
                        peer_chain: None,
                    };
                    Box::pin(super::h1::serve(io, state, conn)).await
                }
                Some(tls) => Box::pin(serve_tls(io, peer, shard, tls, state)).await,
            }
        });
    }
}

/// Serves a TLS connection: the handshake, then HTTP/2 or HTTP/1.1 as ALPN chose.
async fn serve_tls(
    io: WriteDeadline<tokio::net::TcpStream>,
    peer: std::net::SocketAddr,
    shard: usize,
    tls: crate::tls::TlsServing,
    state: Arc<ApiState>,
) {
    let Some(stream) = tls.handshake(io, peer).await else {
        return;
    };
    let peer_chain = stream
        .get_ref()
        .1
        .peer_certificates()
        .filter(|chain| !chain.is_empty())
        .map(|chain| (chain.to_vec(), tls.verifiers.clone()));
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let conn = Connection {
        peer,
        shard,
        peer_chain,
    };
    Box::pin(serve_connection(stream, h2, state, conn)).await;
}

/// The connection preface of HTTP/2 with prior knowledge (RFC 9113, 3.4).
pub(super) const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves a connection: HTTP/2 ([`super::h2_conn`]) or HTTP/1.1 with hyper.
pub(super) async fn serve_connection<I>(io: I, h2: bool, state: Arc<ApiState>, conn: Connection)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if h2 {
        let settings = super::h2_conn::Settings {
            max_streams: crate::config::HTTP2_MAX_STREAMS,
            drain: None,
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
    let result = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(crate::config::HTTP1_IDLE_TIMEOUT)
        .max_buf_size(crate::config::MAX_REQUEST_HEAD)
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades()
        .await;
    if let Err(e) = result {
        tracing::debug!(error = %e, %peer, "connection ended with an error");
    }
}
