//! The frontends: the Kubernetes HTTP API (a native gRPC API is planned). A frontend is
//! thin: it parses a request into one query type, reads the store, and writes
//! pre-encoded bytes.

pub mod http;
