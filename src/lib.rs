//! watchd: a read-path cache for Kubernetes.
//!
//! Data flows one way: [`source`] reads etcd (one range at a fixed revision, then one
//! watch), [`codec`] turns each key and value into a cached object, [`store`] keeps
//! per-resource snapshots and event logs, [`dispatch`] wakes the watchers an event
//! concerns, and [`api`] serves the Kubernetes read API from pre-encoded bytes.

pub mod api;
pub mod auth;
pub mod client;
pub mod codec;
pub mod config;
pub mod config_file;
pub mod dispatch;
pub mod memory;
pub mod metrics;
pub mod openapi;
pub mod registry;
pub mod revision;
pub mod selectors;
pub mod source;
pub mod store;
pub mod tls;

pub use revision::Revision;
