//! watchd-loadtest: writes a realistic demo Kubernetes cluster into etcd,
//! laid out exactly as kube-apiserver stores it, so that watchd (or anything
//! else reading kube-apiserver's etcd keyspace) has data to serve.
//!
//! * [`objects`]: builders for every kind the demo writes (namespaces, nodes,
//!   pods, workloads, services and endpoints, leases, events, accounts and
//!   secrets, CRDs and custom resources), the setters the demo's controllers
//!   use, and the etcd key layout ([`objects::key_for`]).
//! * [`demo`]: the `demo` subcommand (fill, then keep changing, as a real
//!   cluster's components would).
//! * [`store`]: the reconnecting etcd writer with kube-apiserver-style
//!   conditional transactions, and etcd leases for objects with a TTL.
//! * [`rng`]: the seeded PRNG and timestamp helpers the builders use.
//!
//! The load scenarios (see `loadtest/README.md`):
//!
//! * [`s1`]: S1 broadcast, W watchers of every ConfigMap against watchd or
//!   etcd direct, with delivery latency, missed/duplicate accounting and
//!   server CPU per delivery; [`s1::report`] has the result and tables.
//! * [`read_latency`]: consistent list vs `resourceVersion=0` on an idle cache.
//! * [`launch`]: starting throwaway etcd and watchd processes.
//! * [`http`], [`stats`], [`procstat`]: the HTTP client, percentiles and
//!   event accounting, and `/proc` readings.

pub mod demo;
pub mod http;
pub mod launch;
pub mod objects;
pub mod procstat;
pub mod read_latency;
pub mod rng;
pub mod s1;
pub mod stats;
pub mod store;
