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

/// What S2's keyed watchers select: `spec.nodeName` (a kubelet each, watchd's default
/// index), `spec.serviceAccountName` (indexed by watchd only when started with
/// `--index-field=pods:spec.serviceAccountName`, which the run adds), or `shard`: the
/// keyed watchers are sharded informers (KEP-5866), watcher `i` of `W` selecting the
/// `i`-th of `W` equal ranges of the uid hash (`shardSelector=shardRange(
/// object.metadata.uid, ...)`), and pod `i` is given a uid in shard `i % W`; together
/// they split the pods watch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyField {
    #[default]
    #[value(name = "spec.nodeName")]
    NodeName,
    #[value(name = "spec.serviceAccountName")]
    ServiceAccountName,
    #[value(name = "shard")]
    Shard,
}

impl KeyField {
    /// The field selector's field (`shard`: the shard selector's).
    pub fn name(self) -> &'static str {
        match self {
            KeyField::NodeName => "spec.nodeName",
            KeyField::ServiceAccountName => "spec.serviceAccountName",
            KeyField::Shard => "shard of metadata.uid",
        }
    }

    /// The flag watchd needs to index the field (none for its default).
    pub fn watchd_arg(self) -> Option<String> {
        match self {
            KeyField::NodeName | KeyField::Shard => None,
            KeyField::ServiceAccountName => Some(format!("--index-field=pods:{}", self.name())),
        }
    }

    /// The query of keyed watcher `i` of `of`, whose key is `key`.
    pub fn query(self, i: usize, of: usize, key: &str) -> String {
        match self {
            KeyField::Shard => {
                let (start, end) = shard_range(i, of);
                format!(
                    "shardSelector=shardRange%28object.metadata.uid%2C%27{}%27%2C%27{}%27%29",
                    hex(start),
                    hex(end)
                )
            }
            _ => format!("fieldSelector={}%3D{key}", self.name()),
        }
    }
}

/// Range `i` of `of` equal ranges of the 64-bit hash space: [start, end).
pub fn shard_range(i: usize, of: usize) -> (u128, u128) {
    let step = (1u128 << 64) / of.max(1) as u128;
    let start = i as u128 * step;
    let end = if i + 1 >= of { 1 << 64 } else { start + step };
    (start, end)
}

fn hex(v: u128) -> String {
    format!("0x{v:016x}")
}

/// FNV-1a 64 (the load generator's own: the hash a shard range is of).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A uid (`<base>-<n>`) whose hash lies in shard `i` of `of`.
pub fn uid_in_shard(base: &str, i: usize, of: usize) -> String {
    let (start, end) = shard_range(i, of);
    (0u64..)
        .map(|n| format!("{base}-{n}"))
        .find(|u| {
            let h = u128::from(fnv1a64(u.as_bytes()));
            start <= h && h < end
        })
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_ranges_cover_the_hash_space_and_uids_land_in_theirs() {
        // FNV-1a 64 test vectors (Fowler, Noll, Vo).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        for of in [1, 3, 7] {
            assert_eq!(shard_range(0, of).0, 0);
            assert_eq!(shard_range(of - 1, of).1, 1 << 64);
            for i in 1..of {
                assert_eq!(shard_range(i - 1, of).1, shard_range(i, of).0);
            }
            for i in 0..of {
                let uid = uid_in_shard("pod-1", i, of);
                let h = u128::from(fnv1a64(uid.as_bytes()));
                let (start, end) = shard_range(i, of);
                assert!(start <= h && h < end, "{uid} in {i} of {of}");
            }
        }
        assert_eq!(
            KeyField::Shard.query(1, 2, ""),
            "shardSelector=shardRange%28object.metadata.uid%2C%270x8000000000000000%27%2C%270x10000000000000000%27%29"
        );
    }
}
