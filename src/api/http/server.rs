//! Listening: the accept loop, TLS handshakes, and one HTTP/1.1 or HTTP/2 connection per
//! peer. Plain connections go to [`super::h1`], which hands HTTP/2 with prior knowledge
//! (recognised by its preface) to [`super::conn`]; over TLS, ALPN decides there.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch as signal;

use super::conn::{serve_connection, Connection};
use super::write_deadline::WriteDeadline;
use super::ApiState;

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
        let shard = crate::api::watch::next_shard();
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
