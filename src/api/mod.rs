//! The frontends and what they share. `query` parses requests into typed, validated
//! queries; `read` serves get and list pages; `watch` runs watch sessions; `status` maps
//! errors to Kubernetes Status reasons. Each frontend (`http`, `grpc`) is thin: it turns
//! its wire format into those queries and encodes the results.

pub mod grpc;
pub mod http;
pub mod query;
pub mod read;
pub mod status;
pub mod watch;
