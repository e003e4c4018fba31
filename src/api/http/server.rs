//! Listening: the accept loop, TLS handshakes, and one HTTP/1.1 or HTTP/2 connection per
//! peer. Plain connections go to [`super::h1`], which hands HTTP/2 with prior knowledge
//! (recognised by its preface) to [`super::conn`]; over TLS, ALPN decides there.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch as signal;

use super::conn::{serve_connection, Connection, Connections};
use super::write_deadline::WriteDeadline;
use super::ApiState;

/// Accepts connections until `shutdown` turns true, then stops as kube-apiserver's server
/// does: no new connections, the open watches ended (each writes its end), every
/// connection told to drain (HTTP/2: a GOAWAY, then its open streams go on; HTTP/1.1:
/// closed once its response in flight is written, at once if idle), and the requests in
/// flight (a list streaming) given up to [`crate::config::STOP_DRAIN_TIMEOUT`] to finish
/// before what is left is aborted. TLS when `tls` is given (HTTP/2 or HTTP/1.1 as ALPN
/// chose), else plain HTTP/1.1 or HTTP/2 with prior knowledge (h2c).
///
/// Each connection learns of the stop from a oneshot of its own ([`Connections`]).
pub async fn serve(
    listener: TcpListener,
    state: Arc<ApiState>,
    tls: Option<crate::tls::TlsServing>,
    mut shutdown: signal::Receiver<bool>,
) {
    let mut connections = Connections::default();
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
            () = connections.reap() => continue,
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let shard = crate::api::watch::next_shard();
        let write_timeout = state.write_timeout;
        let state = state.clone();
        let tls = tls.clone();
        // Each path boxed apart: the task is sized by the path it takes, not by the
        // largest (it stays that size for as long as the connection's watches last).
        connections.spawn(|drained| async move {
            let io = WriteDeadline::new(stream, write_timeout);
            match tls {
                None => {
                    let conn = Connection {
                        peer,
                        shard,
                        peer_chain: None,
                    };
                    Box::pin(super::h1::serve(io, state, conn, drained)).await
                }
                Some(tls) => Box::pin(serve_tls(io, peer, shard, tls, state, drained)).await,
            }
        });
    }
    drop(listener);
    // The watches still open end now (with a grace period they have ended already).
    state.read.cache.drain_watches(std::time::Duration::ZERO);
    let open = connections.drain();
    let drained =
        tokio::time::timeout(crate::config::STOP_DRAIN_TIMEOUT, connections.ended()).await;
    match drained {
        Ok(()) => tracing::info!(connections = open, "HTTP connections drained"),
        Err(_) => {
            tracing::warn!(
                left = connections.len(),
                timeout = ?crate::config::STOP_DRAIN_TIMEOUT,
                "HTTP requests still in flight at the stop's end were aborted"
            );
            connections.abort();
        }
    }
}

/// Serves a TLS connection: the handshake, then HTTP/2 or HTTP/1.1 as ALPN chose.
async fn serve_tls(
    io: WriteDeadline<tokio::net::TcpStream>,
    peer: std::net::SocketAddr,
    shard: usize,
    tls: crate::tls::TlsServing,
    state: Arc<ApiState>,
    drain: tokio::sync::oneshot::Receiver<()>,
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
    Box::pin(serve_connection(stream, h2, state, conn, drain)).await;
}
