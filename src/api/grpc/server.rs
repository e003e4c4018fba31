//! The gRPC server: the API beside the standard health service (following the cache's
//! readiness) and server reflection, plain or over TLS, with the connection limits.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch as signal;
use tokio_stream::wrappers::TcpListenerStream;

use super::pb::{self, watchd_server::WatchdServer};
use super::GrpcApi;
use crate::api::read::ReadContext;
use crate::auth::Security;
use crate::tls::TlsServing;

/// How often the health service looks at the cache's readiness.
const HEALTH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Keeps the health service's statuses (the server's, "", and the API's) equal to the
/// cache's readiness until `shutdown`; then NOT_SERVING.
async fn report_health(
    reporter: tonic_health::server::HealthReporter,
    cache: Arc<crate::store::Cache>,
    mut shutdown: signal::Receiver<bool>,
) {
    use tonic_health::ServingStatus;
    let mut last = None;
    loop {
        let ready = !*shutdown.borrow() && cache.is_synced() && cache.is_watch_live();
        if last != Some(ready) {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            for name in [
                "",
                <WatchdServer<GrpcApi> as tonic::server::NamedService>::NAME,
            ] {
                reporter.set_service_status(name, status).await;
            }
            last = Some(ready);
        }
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(HEALTH_EVERY) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Connections whose handshake ended, waiting for the server to take them.
const ACCEPTED_QUEUE: usize = 64;

/// Accepts TCP connections and shakes hands with each in a task of its own, so that a
/// client that never finishes its handshake holds up no other (as the HTTP API's
/// listener does); hands the connections to the server as their handshakes end, until
/// it stops taking them.
async fn accept_tls(
    listener: TcpListener,
    tls: TlsServing,
    accepted: tokio::sync::mpsc::Sender<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>,
) {
    let tls = Arc::new(tls);
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "gRPC accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = accepted.closed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let (tls, accepted) = (tls.clone(), accepted.clone());
        tokio::spawn(async move {
            if let Some(stream) = tls.handshake(tcp, peer).await {
                let _ = accepted.send(stream).await;
            }
        });
    }
}

/// Serves the gRPC API on `listener` until `shutdown` turns true: over TLS when `tls` is
/// given; authenticating and authorizing every call as the HTTP API does when `security`
/// is given (credentials: a client certificate, or `authorization: Bearer` metadata).
/// List responses and requests stay under `max_message_bytes`; a connection carries at
/// most `max_streams` calls at once (more wait for one to end) and is pinged as the
/// HTTP/2 API's are, so a dead peer's watches end.
pub async fn serve(
    listener: TcpListener,
    read: Arc<ReadContext>,
    tls: Option<TlsServing>,
    security: Option<Arc<Security>>,
    max_message_bytes: usize,
    max_streams: u32,
    mut shutdown: signal::Receiver<bool>,
) {
    let verifiers = tls
        .as_ref()
        .map(|t| t.verifiers.clone())
        .unwrap_or_default();
    let (reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(report_health(
        reporter,
        read.cache.clone(),
        shutdown.clone(),
    ));
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    // Each builder adds its own reflection service; each is given the other's, so that
    // either lists both (as grpc-go's do).
    let (reflection_v1, reflection_v1alpha) = match (
        reflection()
            .register_encoded_file_descriptor_set(
                tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
            )
            .build_v1(),
        reflection()
            .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
            .build_v1alpha(),
    ) {
        (Ok(v1), Ok(v1alpha)) => (v1, v1alpha),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "gRPC reflection cannot be built; the gRPC API is not served");
            return;
        }
    };
    let service = WatchdServer::new(GrpcApi {
        read,
        security,
        verifiers,
        max_message_bytes,
    })
    .max_decoding_message_size(max_message_bytes)
    // A message over the limit (one object larger than it) fails its call with
    // ResourceExhausted here rather than at a client that would refuse it anyway.
    .max_encoding_message_size(max_message_bytes);
    let server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(crate::config::HTTP2_PING_INTERVAL))
        .http2_keepalive_timeout(Some(crate::config::HTTP2_PING_TIMEOUT))
        .max_concurrent_streams(Some(max_streams))
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service);
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    let result = match tls {
        None => {
            // tonic leaves its own nodelay setting aside for a given listener: without
            // it, Nagle held small watch messages for tens of milliseconds.
            use futures_util::StreamExt;
            let incoming = TcpListenerStream::new(listener).map(|accepted| {
                accepted.inspect(|tcp| {
                    let _ = tcp.set_nodelay(true);
                })
            });
            server.serve_with_incoming_shutdown(incoming, stop).await
        }
        Some(tls) => {
            let (tx, rx) = tokio::sync::mpsc::channel(ACCEPTED_QUEUE);
            tokio::spawn(accept_tls(listener, tls, tx));
            let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|s| (Ok::<_, std::io::Error>(s), rx))
            });
            server.serve_with_incoming_shutdown(incoming, stop).await
        }
    };
    if let Err(e) = result {
        tracing::error!(error = %e, "gRPC server stopped");
    }
}
