//! watchd-loadtest: writes a realistic demo Kubernetes cluster into etcd,
//! laid out exactly as kube-apiserver stores it, so that watchd (or anything
//! else reading kube-apiserver's etcd keyspace) has data to serve.
//!
//! * [`objects`]: builders for namespaces, nodes, pods and config maps, and
//!   the etcd key layout ([`objects::key_for`]).
//! * [`demo`]: the `demo` subcommand (fill, then keep changing).
//! * [`store`]: the reconnecting etcd writer with kube-apiserver-style
//!   conditional transactions.
//! * [`rng`]: the seeded PRNG and timestamp helpers the builders use.

pub mod demo;
pub mod objects;
pub mod rng;
pub mod store;
