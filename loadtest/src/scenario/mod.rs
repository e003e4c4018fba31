//! What the scenarios from S2 on share: their servers ([`servers`]: etcd
//! and watchd started for the run or given, CPU marks, open-files limits),
//! the result with each figure beside its baseline ([`report`]), the
//! per-second progress line and peak-RSS sampler ([`progress`]), fast
//! batched etcd writes ([`fill`]), the scenarios' pods with an in-place
//! send stamp ([`pods`]), and Prometheus `/metrics` readings of etcd and
//! watchd ([`prom`]), and the result's PNG ([`plot`]).

pub mod fill;
pub mod plot;
pub mod pods;
pub mod progress;
pub mod prom;
pub mod report;
pub mod servers;
