//! The Kubernetes read API over HTTP/1.1 and HTTP/2, plain or TLS: authentication and
//! authorization, routing, content negotiation, and the response
//! for every outcome (Status objects for errors).

mod audit;
pub mod body;
pub mod coalesce;
mod conn;
mod direct;
pub mod discovery;
pub mod encode;
pub mod encode_protobuf;
pub mod encode_table;
mod gzip;
pub mod h1;
pub(crate) mod h2_conn;
mod h2_watch;
pub mod health;
pub mod negotiate;
mod openapi;
pub mod proxy;
pub mod query;
mod response;
mod reviews;
mod routes;
pub mod server;
mod socket;
pub mod write_deadline;

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::api::read::ReadContext;
use crate::auth::Security;

pub use self::conn::Connection;
pub(crate) use self::conn::Connections;
pub use self::response::error_response;
use self::routes::handle;
pub use self::server::serve;

/// What every request handler reads.
pub struct ApiState {
    /// The cache and etcd's revision, for reads (shared with the gRPC API).
    pub read: Arc<ReadContext>,
    /// The metrics renderer.
    pub metrics: Option<PrometheusHandle>,
    /// The address served, for `/api`'s serverAddressByClientCIDRs.
    pub address: String,
    /// Authentication and authorization; None serves everyone (loopback without TLS).
    pub security: Option<Arc<Security>>,
    /// `--audit-log-path`.
    pub audit: Option<Arc<crate::auth::audit::AuditLog>>,
    /// `--write-timeout`: a connection whose peer reads nothing for this long is closed
    /// (zero: never).
    pub write_timeout: std::time::Duration,
    /// The pass-through to the upstream API server, if there is one and `--proxy`.
    pub proxy: Option<proxy::Proxy>,
}
