//! The frontends and what they share. `query` parses requests into typed, validated
//! queries; `read` serves get and list pages; `watch` runs watch sessions; `status` maps
//! errors to Kubernetes Status reasons; `access` authorizes and limits a request, and
//! `guarded` keeps checking an open watch's permission. Each frontend (`http`, `grpc`) is thin: it turns
//! its wire format into those queries and encodes the results.

pub mod access;
pub mod filter;
pub mod grpc;
pub mod guarded;
pub mod http;
pub mod query;
pub mod read;
pub mod status;
pub mod table;
pub mod watch;

/// The verbs the cache answers for every resource it holds, as discovery lists them.
pub const CACHED_VERBS: [&str; 3] = ["get", "list", "watch"];
