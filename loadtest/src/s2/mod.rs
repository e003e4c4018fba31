//! Scenario S2, node-scoped watchers: W watchers each watching the pods of
//! one node (`fieldSelector=spec.nodeName=<node>`, as every kubelet does)
//! plus 50 watchers of every pod, while the pods are updated at a fixed
//! rate spread over the nodes; the pods are stored as Kubernetes protobuf.
//!
//! Three phases, each on a fresh etcd (and watchd), in this order:
//!
//! 1. watchd at the small scale (`--baseline-nodes`, 50): the same pods, the
//!    same updates, the same 50 all-pods watchers, but only 50 nodes, so
//!    each update still reaches one node watcher and every all-pods watcher
//!    (51 deliveries) while 99 % fewer watchers sit idle;
//! 2. watchd at full scale (`--nodes`, 5 000): the figure is watchd's CPU
//!    per update against phase 1's (target ≤ 1.5×: an update must cost the
//!    watchers it reaches, not the watchers there are);
//! 3. etcd direct: etcd cannot filter on `spec.nodeName`, so a node would
//!    watch every pod; `--etcd-watchers` (100 by default: 5 000 firehose
//!    watchers at 500 updates/s are 2.5 M deliveries/s, far past what this
//!    machine serves) watch the pods prefix, and etcd's CPU per delivery is
//!    scaled to 5 050 watchers as an estimate.
//!
//! Every watcher is checked against exactly the updates it should receive:
//! a node watcher those of its node's pods, the others all of them.

pub mod phase;
mod report;

use std::time::{Duration, Instant};

use crate::demo::Storage;
use crate::endpoint::Protocol;
use crate::http::Accept;
use crate::s1::MAX_STREAMS_PER_CONNECTION;
use crate::scenario::report::{MachineStart, Report};
use crate::scenario::servers::ServerSetup;
pub use phase::Phase;

/// Settings of an S2 run.
#[derive(Clone, Debug)]
pub struct S2Config {
    /// Nodes, one node-scoped watcher each, at full scale.
    pub nodes: usize,
    /// Nodes of the small-scale baseline phase (0: no baseline phase).
    pub baseline_nodes: usize,
    /// Watchers of every pod (in both watchd phases).
    pub all_watchers: usize,
    /// Watchers of the pods prefix on etcd direct (0: no etcd phase).
    pub etcd_watchers: usize,
    /// Pods, spread round-robin over the nodes.
    pub pods: usize,
    /// Namespaces the pods are spread over.
    pub namespaces: usize,
    /// Pod updates per second, round-robin over the pods.
    pub updates_per_sec: f64,
    /// Seconds of updates per phase.
    pub duration: Duration,
    /// Stored size of a pod (0: as built, about 1.3 KB as protobuf).
    pub pod_bytes: usize,
    /// How pods are stored.
    pub storage: Storage,
    /// What the watchd watchers ask for (kubelets ask for protobuf).
    pub accept: Accept,
    /// HTTP/1.1 (a connection per watcher) or HTTP/2.
    pub protocol: Protocol,
    /// With HTTP/2, watch streams per connection (etcd direct alike).
    pub streams_per_connection: usize,
    /// Longest wait for every watcher to have its last update.
    pub drain_timeout: Duration,
    /// The servers.
    pub setup: ServerSetup,
    /// etcd key prefix.
    pub prefix: String,
    /// The pod field each keyed watcher selects one value of.
    pub key_field: KeyField,
}

/// The field S2's keyed watchers select: `spec.nodeName` (a kubelet each, watchd's
/// default index) or `spec.serviceAccountName` (indexed by watchd only when started
/// with `--index-field=pods:spec.serviceAccountName`, which the run adds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyField {
    #[default]
    #[value(name = "spec.nodeName")]
    NodeName,
    #[value(name = "spec.serviceAccountName")]
    ServiceAccountName,
}

impl KeyField {
    /// The field selector's field.
    pub fn name(self) -> &'static str {
        match self {
            KeyField::NodeName => "spec.nodeName",
            KeyField::ServiceAccountName => "spec.serviceAccountName",
        }
    }

    /// The flag watchd needs to index the field (none for its default).
    pub fn watchd_arg(self) -> Option<String> {
        match self {
            KeyField::NodeName => None,
            KeyField::ServiceAccountName => Some(format!("--index-field=pods:{}", self.name())),
        }
    }
}

impl Default for S2Config {
    fn default() -> Self {
        Self {
            nodes: 5000,
            baseline_nodes: 50,
            all_watchers: 50,
            etcd_watchers: 100,
            pods: 10_000,
            namespaces: 10,
            updates_per_sec: 500.0,
            duration: Duration::from_secs(20),
            pod_bytes: 0,
            storage: Storage::Protobuf,
            accept: Accept::Protobuf,
            protocol: Protocol::Http1,
            streams_per_connection: 100,
            drain_timeout: Duration::from_secs(15),
            setup: ServerSetup::default(),
            prefix: "/registry".into(),
            key_field: KeyField::NodeName,
        }
    }
}

impl S2Config {
    /// Rejects settings that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > 50_000 {
            return Err("--nodes must be 1..=50000".into());
        }
        if self.baseline_nodes > self.nodes {
            return Err("--baseline-nodes must be at most --nodes".into());
        }
        if self.pods < self.nodes || self.pods > 1_000_000 {
            return Err(
                "--pods must be at least --nodes (every node has a pod) and at most 1000000".into(),
            );
        }
        if self.all_watchers + self.etcd_watchers > 100_000 {
            return Err("--all-watchers and --etcd-watchers must be at most 100000".into());
        }
        if !(self.updates_per_sec > 0.0 && self.updates_per_sec <= 100_000.0) {
            return Err("--updates-per-sec must be in (0, 100000]".into());
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(600) {
            return Err("--duration must be 1..=600 s".into());
        }
        if self.namespaces == 0 {
            return Err("--namespaces must be positive".into());
        }
        if !(1..=MAX_STREAMS_PER_CONNECTION).contains(&self.streams_per_connection) {
            return Err(format!(
                "--streams-per-connection must be 1..={MAX_STREAMS_PER_CONNECTION}"
            ));
        }
        if self.accept == Accept::Protobuf && self.storage != Storage::Protobuf {
            return Err("--accept=protobuf needs --storage=protobuf".into());
        }
        Ok(())
    }

    /// gRPC connections of the etcd watchers: 4, or as HTTP/2 multiplexes.
    pub fn etcd_connections(&self) -> usize {
        match self.protocol {
            Protocol::Http1 => 4,
            Protocol::Http2 => self.etcd_watchers.div_ceil(self.streams_per_connection),
        }
    }
}

/// Runs the phases and builds the report.
pub async fn run(cfg: &S2Config) -> Result<Report, String> {
    cfg.validate()?;
    let t = Instant::now();
    let machine = MachineStart::now();
    let small = if cfg.baseline_nodes > 0 {
        let label = format!("watchd W={}", cfg.baseline_nodes);
        Some(phase::run(cfg, cfg.baseline_nodes, false, &label).await?)
    } else {
        None
    };
    let full = phase::run(cfg, cfg.nodes, false, &format!("watchd W={}", cfg.nodes)).await?;
    let etcd = if cfg.etcd_watchers > 0 {
        Some(phase::run(cfg, cfg.nodes, true, "etcd direct").await?)
    } else {
        None
    };
    let mut r = report::build(cfg, &full, small.as_ref(), etcd.as_ref());
    r.machine = machine.end();
    r.elapsed_s = t.elapsed().as_secs_f64();
    Ok(r)
}
