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

/// A server's open connections, each a task told when to drain: the HTTP and the gRPC
/// listeners keep theirs here. Each connection learns of the stop from a oneshot of its
/// own, held here by its task: not a signal receiver polled with every poll of every
/// connection, which would take the signal's lock, shared by all of them, on each.
#[derive(Default)]
pub(crate) struct Connections {
    tasks: tokio::task::JoinSet<()>,
    drains: std::collections::HashMap<tokio::task::Id, tokio::sync::oneshot::Sender<()>>,
}

impl Connections {
    /// Starts a connection's task: `serve` is given what resolves when it should drain.
    pub(crate) fn spawn<F>(&mut self, serve: impl FnOnce(tokio::sync::oneshot::Receiver<()>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let (drain, drained) = tokio::sync::oneshot::channel();
        let task = self.tasks.spawn(serve(drained));
        self.drains.insert(task.id(), drain);
    }

    /// Waits for a connection to end and forgets it; pending while none is open.
    pub(crate) async fn reap(&mut self) {
        match self.tasks.join_next_with_id().await {
            Some(ended) => {
                self.drains
                    .remove(&ended.map_or_else(|e| e.id(), |(id, ())| id));
            }
            None => std::future::pending().await,
        }
    }

    /// Tells every open connection to drain; how many there are.
    pub(crate) fn drain(&mut self) -> usize {
        self.drains.clear();
        self.tasks.len()
    }

    /// Waits until every connection has ended.
    pub(crate) async fn ended(&mut self) {
        while self.tasks.join_next().await.is_some() {}
    }

    /// How many are still open.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Ends those still open at once.
    pub(crate) fn abort(&mut self) {
        self.tasks.abort_all();
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
