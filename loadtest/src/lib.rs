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
//! * [`s2`] node-scoped watchers, [`s3`] list storm, [`s4`] reconnect
//!   storm, [`s5`] idle watchers, [`s6`] ingest, [`s7`] cache memory: the
//!   other scenarios of the brief, on the pieces of [`scenario`].
//! * [`launch`]: starting throwaway etcd and watchd processes.
//! * [`endpoint`], [`tls`], [`transport`]: the HTTP target (URL, protocol,
//!   bearer token), rustls client settings, and HTTP/1.1 and HTTP/2
//!   connections over TCP or TLS; [`kubeconfig`]: the target, TLS and
//!   credentials from a kubeconfig; [`grpc`]: connections to watchd's own
//!   gRPC API.
//! * [`http`], [`stats`], [`procstat`]: media types and watch-stream
//!   splitters, percentiles and event accounting, and `/proc` readings.
//! * [`floor`]: the loopback floor, the cheapest possible fan-out server,
//!   measured as a baseline beside watchd and etcd; [`fdlimit`] the
//!   open-files limit its sockets and HTTP/1.1 watchers count against;
//!   [`progress`] the per-second progress line of long runs; [`plot`] the
//!   PNG plots written beside the results.

pub mod check_cost;
pub mod demo;
pub mod endpoint;
pub mod fdlimit;
pub mod floor;
pub mod grpc;
pub mod http;
pub mod kubeconfig;
pub mod launch;
pub mod objects;
pub mod plot;
pub mod procstat;
pub mod progress;
pub mod read_latency;
pub mod rng;
pub mod s1;
pub mod s2;
pub mod s3;
pub mod s4;
pub mod s5;
pub mod s6;
pub mod s7;
pub mod scenario;
pub mod stats;
pub mod store;
pub mod tls;
pub mod transport;
