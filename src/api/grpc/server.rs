//! The gRPC server: the API beside the standard health service (following the cache's
//! readiness) and server reflection, plain or over TLS, with the connection limits, on
//! the HTTP API's HTTP/2 connections ([`h2_conn`]) rather than tonic's transport, so
//! that watch streams are written by the dispatch pass.

use std::sync::Arc;

use http_body_util::BodyExt;
use tokio::net::TcpListener;
use tokio::sync::watch as signal;
use tonic::service::Routes;

use super::pb::{self, watchd_server::WatchdServer};
use super::{GrpcApi, WatchSlot};
use crate::api::http::h2_conn::{self, BoxError, Reply, RequestBody, Service};
use crate::api::http::{Connection, Connections};
use crate::api::read::ReadContext;
use crate::auth::Security;
use crate::tls::TlsServing;

/// Keeps the health service's statuses (the server's, "", and the API's) equal to the
/// cache's readiness ([`crate::store::Cache::watch_ready`], the state `/readyz` reports)
/// as it changes, until `shutdown`; then NOT_SERVING.
async fn report_health(
    reporter: tonic_health::server::HealthReporter,
    cache: Arc<crate::store::Cache>,
    mut shutdown: signal::Receiver<bool>,
) {
    use tonic_health::ServingStatus;
    let mut last = None;
    let mut readiness = cache.watch_ready();
    loop {
        let ready = !*shutdown.borrow() && *readiness.borrow_and_update();
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
            _ = shutdown.changed() => {}
            _ = readiness.changed() => {}
        }
    }
}

/// The gRPC API on a connection: Watch and WatchMany calls written by the dispatch pass
/// (the service leaves the session in the request's [`WatchSlot`]), every other call as
/// tonic's routes answer it.
struct GrpcService {
    routes: Routes,
}

impl Service for GrpcService {
    async fn answer(
        &self,
        mut req: http::Request<RequestBody>,
        conn: &Arc<Connection>,
    ) -> http::Response<Reply> {
        let slot = WatchSlot::default();
        req.extensions_mut().insert(slot.clone());
        req.extensions_mut().insert(conn.clone());
        let method: Arc<str> = Arc::from(req.uri().path());
        let mut routes = self.routes.clone();
        let response = match tower_service::Service::call(&mut routes, req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let (head, body) = response.into_parts();
        // A call is counted once, by the status it ends with: in the headers of a
        // trailers-only answer (an error), else in its trailers.
        if let Some(status) = head.headers.get("grpc-status") {
            count_call(&method, Some(status));
        }
        let counted = head.headers.contains_key("grpc-status");
        let reply = match slot.take() {
            Some((watch, end)) => Reply::Watch(
                watch,
                Box::new(move || {
                    let trailers = end();
                    count_call(&method, trailers.get("grpc-status"));
                    trailers
                }),
            ),
            None => Reply::Trailed(
                body.map_frame(move |frame| {
                    if let (Some(trailers), false) = (frame.trailers_ref(), counted) {
                        count_call(&method, trailers.get("grpc-status"));
                    }
                    frame
                })
                .map_err(|e| Box::new(e) as BoxError)
                .boxed_unsync(),
            ),
        };
        http::Response::from_parts(head, reply)
    }
}

/// Counts a gRPC call in `watchd_grpc_calls_total` by its method (`/package.Service/Method`)
/// and the code of its `grpc-status` (as gRPC names it: OK, NOT_FOUND, ...).
fn count_call(method: &str, status: Option<&http::HeaderValue>) {
    const CODES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    let code = status
        .and_then(|s| s.to_str().ok())
        .and_then(|s| s.parse::<usize>().ok())
        .and_then(|n| CODES.get(n).copied())
        .unwrap_or("UNKNOWN");
    metrics::counter!("watchd_grpc_calls_total", "method" => method.to_string(), "code" => code)
        .increment(1);
}

/// Serves the gRPC API on `listener` until `shutdown` turns true: over TLS when `tls` is
/// given; authenticating and authorizing every call as the HTTP API does when `security`
/// is given (credentials: a client certificate, or `authorization: Bearer` metadata).
/// List responses and requests stay under `max_message_bytes`; a connection carries at
/// most `max_streams` calls at once (its SETTINGS say so: clients wait for one to end)
/// and is pinged as the HTTP/2 API's
/// are, so a dead peer's watches end. Connections are served as the HTTP API's HTTP/2
/// connections are ([`h2_conn`]).
pub async fn serve(
    listener: TcpListener,
    read: Arc<ReadContext>,
    tls: Option<TlsServing>,
    security: Option<Arc<Security>>,
    max_message_bytes: usize,
    max_streams: u32,
    mut shutdown: signal::Receiver<bool>,
) {
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
    let api = WatchdServer::new(GrpcApi {
        read,
        security,
        max_message_bytes,
    })
    .max_decoding_message_size(max_message_bytes)
    // A message over the limit (one object larger than it) fails its call with
    // ResourceExhausted here rather than at a client that would refuse it anyway.
    .max_encoding_message_size(max_message_bytes);
    let routes = Routes::new(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(api);
    let service = Arc::new(GrpcService { routes });
    let tls = tls.map(Arc::new);
    let mut connections = Connections::default();
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
            // Finished connections are reaped as they end.
            () = connections.reap() => continue,
            _ = shutdown.changed() => break,
        };
        // Without it, Nagle holds small watch messages for tens of milliseconds.
        let _ = tcp.set_nodelay(true);
        let shard = crate::api::watch::next_shard();
        let (service, tls) = (service.clone(), tls.clone());
        // Each connection shakes hands in its own task, so that a client that never
        // finishes its handshake holds up no other.
        connections.spawn(|drained| async move {
            let settings = h2_conn::Settings {
                max_streams,
                drain: Some(drained),
            };
            let mut conn = Connection {
                peer,
                shard,
                peer_chain: None,
            };
            match tls {
                None => Box::pin(h2_conn::serve(tcp, service, conn, settings)).await,
                Some(tls) => {
                    let Some(stream) = tls.handshake(tcp, peer).await else {
                        return;
                    };
                    conn.peer_chain = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .filter(|chain| !chain.is_empty())
                        .map(|chain| (chain.to_vec(), tls.verifiers.clone()));
                    Box::pin(h2_conn::serve(stream, service, conn, settings)).await
                }
            }
        });
    }
    // As tonic's server shuts down: no new connections, a GOAWAY on each open one (so
    // clients start no new calls on it), its calls served until they end; the process
    // stops waiting for them after a while.
    drop(listener);
    connections.drain();
    connections.ended().await;
}
