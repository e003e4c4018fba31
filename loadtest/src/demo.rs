//! The `demo` subcommand: writes a small but realistic cluster into etcd and
//! then keeps it changing, as kube-apiserver, the controllers, the scheduler
//! and the kubelets of a real cluster would.
//!
//! Layout and values follow kube-apiserver (see [`crate::objects`]). The fill
//! (`fill.rs`) writes namespaces, nodes and their Leases, ServiceAccounts and
//! Secrets, the `kubernetes` Service, the kube-proxy DaemonSet with one pod per
//! node, the demo CRDs, and in every `demo-N` namespace one Deployment,
//! ReplicaSet, Service, EndpointSlice and Endpoints per application, the
//! pods, config maps and widgets. It is idempotent: objects that already exist
//! are adopted rather than overwritten, and pods already present count towards
//! their application's replicas, so re-running against the same etcd
//! converges to the requested size instead of growing.
//!
//! After the fill (unless `once`), three timers run:
//!
//! * one random change per tick of `changes_per_second` (`changes.rs`): pod
//!   status updates (phase, readiness, restart count), pod relabels
//!   (`track=stable|canary`), pod deletes (the replacement pod, with a new name
//!   and uid, is created on the next tick), config map and widget updates.
//!   What the cluster's components would write in response follows at once:
//!   ReplicaSet and Deployment status, EndpointSlice and Endpoints
//!   (`controllers.rs`), and Events (`events.rs`, with an etcd lease of
//!   `event_ttl`);
//! * Lease renewals (`heartbeats.rs`): every Lease once per
//!   `lease_renew_period`, spread evenly, as kubelets renew theirs every 10 s;
//! * a progress line at info every 10 s. Every change is logged at debug level.
//!
//! Updates and deletes are conditional on the `mod_revision` last seen (as
//! kube-apiserver does), so a concurrent writer is detected and its version
//! adopted instead of being overwritten. A stop (duration or signal) lets the
//! write in flight finish and creates a pending replacement pod, each within
//! a short timeout, so the cluster is left at its target size.
//!
//! The PRNG is seeded with `seed` on a fresh etcd, making runs reproducible,
//! and with `seed` mixed with the starting etcd revision otherwise, so that a
//! re-run never repeats the names or uids of an earlier one (see [`run_seed`]).
//! Names that must be found again by a re-run (ReplicaSets, EndpointSlices,
//! token Secrets, kube-proxy pods) derive from `seed` alone.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::{pin, Pin};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::time::{Interval, MissedTickBehavior};
use tracing::{debug, info, warn};

mod changes;
mod config;
mod controllers;
mod events;
mod fill;
mod heartbeats;

pub use config::{
    configmap_name, demo_namespace_names, node_names, DemoConfig, DemoError, StopReason, Storage,
    Summary,
};

use crate::objects::{key_for, now_rfc3339, Rng};
use crate::rng::fnv1a;
use crate::store::{Current, Outcome, Store};
use controllers::App;
use events::Recorder;

/// Applications whose Deployment-style pods populate each demo namespace.
pub const APPS: [&str; 3] = ["web", "api", "worker"];
/// Namespaces every cluster has; created alongside `demo-1..N`.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];
/// Label toggled by relabel changes.
pub const TRACK_LABEL: &str = "track";
/// Highest accepted `changes_per_second`.
pub const MAX_CHANGES_PER_SECOND: f64 = 100_000.0;
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_NAME_ATTEMPTS: usize = 5;

/// Runs the demo until the fill completes (`once`), `duration` elapses or
/// `stop` resolves. etcd outages are retried, so the only errors are bad
/// settings.
pub async fn run(cfg: &DemoConfig, stop: impl Future<Output = ()>) -> Result<Summary, DemoError> {
    cfg.validate()?;
    let started = Instant::now();
    let endpoints = cfg.endpoints()?;
    info!(
        endpoints = %endpoints.join(","),
        prefix = %cfg.etcd_prefix,
        namespaces = cfg.namespaces,
        nodes = cfg.nodes,
        pods_per_namespace = cfg.pods_per_namespace,
        configmaps_per_namespace = cfg.configmaps_per_namespace,
        changes_per_second = cfg.changes_per_second,
        lease_renew_period_s = cfg.lease_renew_period.as_secs_f64(),
        event_ttl_s = cfg.event_ttl.as_secs(),
        seed = cfg.seed,
        "starting demo cluster writer"
    );
    let mut store = Store::open(endpoints).await.map_err(DemoError::Connect)?;
    let mut demo = Demo::new(cfg);
    let deadline = async {
        match cfg.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let mut stopped = pin!(async {
        tokio::select! {
            () = deadline => StopReason::Duration,
            () = stop => StopReason::Stopped,
        }
    });
    // The fill is idempotent, so it may be cut anywhere; a re-run completes it.
    let filled = tokio::select! {
        () = demo.fill(&mut store) => None,
        reason = stopped.as_mut() => Some(reason),
    };
    let stop_reason = match filled {
        Some(reason) => reason,
        None => {
            info!(
                creates = store.stats.creates,
                adopted = demo.adopted,
                pods = demo.pods.len(),
                configmaps = demo.configmaps.len(),
                widgets = demo.widgets.len(),
                leases = demo.leases.len(),
                events = demo.events.written,
                "demo cluster filled"
            );
            if cfg.once {
                StopReason::Filled
            } else {
                let reason = demo.churn(&mut store, stopped.as_mut()).await;
                // Leave the cluster at its target size: finish a replacement
                // whose delete already happened, but never wait long for it.
                let flush = demo.flush(&mut store);
                if tokio::time::timeout(FLUSH_TIMEOUT, flush).await.is_err() {
                    warn!("could not finish pending creates before exiting");
                }
                reason
            }
        }
    };
    let summary = Summary {
        stop: stop_reason,
        changes: demo.changes,
        renewals: demo.renewals,
        events: demo.events.written,
        store: store.stats,
        pods: demo.pods.len(),
        configmaps: demo.configmaps.len(),
        elapsed: started.elapsed(),
    };
    info!(
        reason = ?summary.stop,
        changes = summary.changes,
        renewals = summary.renewals,
        events = summary.events,
        creates = summary.store.creates,
        updates = summary.store.updates,
        deletes = summary.store.deletes,
        conflicts = summary.store.conflicts,
        failures = summary.store.failures,
        elapsed_s = summary.elapsed.as_secs_f64(),
        "demo finished"
    );
    Ok(summary)
}

/// An object the writer manages, with the revision it was last seen at.
struct Tracked {
    key: String,
    ns: String,
    value: Value,
    rev: i64,
}

/// Work deferred to the next tick.
enum Pending {
    /// Create a replacement pod for application `app` (an index into `apps`).
    Pod { app: usize },
    /// Re-create an object that vanished under us.
    Recreate {
        which: Which,
        key: String,
        ns: String,
        value: Value,
    },
}

/// Kind of object the random changes pick from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Pod,
    ConfigMap,
    Widget,
}

/// What a tick of the churn loop does.
enum Work {
    /// One random change (or a pending create).
    Change,
    /// Renew the next Lease.
    Renew,
}

/// State of a run: the objects being changed and what is still to do.
struct Demo<'a> {
    cfg: &'a DemoConfig,
    rng: Rng,
    nodes: Vec<String>,
    pods: Vec<Tracked>,
    configmaps: Vec<Tracked>,
    widgets: Vec<Tracked>,
    /// The demo applications, one per (namespace, app), in fill order.
    apps: Vec<App>,
    /// Objects whose later writes the cluster's components make (status,
    /// endpoints, lease renewals), by key.
    owned: BTreeMap<String, Tracked>,
    /// Keys (in `owned`) of the Leases renewed round-robin.
    leases: Vec<String>,
    next_lease: usize,
    events: Recorder,
    pending: VecDeque<Pending>,
    next_node: usize,
    changes: u64,
    renewals: u64,
    adopted: u64,
}

impl<'a> Demo<'a> {
    fn new(cfg: &'a DemoConfig) -> Self {
        Self {
            cfg,
            rng: Rng::new(cfg.seed),
            nodes: node_names(cfg.nodes),
            pods: Vec::new(),
            configmaps: Vec::new(),
            widgets: Vec::new(),
            apps: Vec::new(),
            owned: BTreeMap::new(),
            leases: Vec::new(),
            next_lease: 0,
            events: Recorder::new(&cfg.etcd_prefix, cfg.storage, cfg.event_ttl),
            pending: VecDeque::new(),
            next_node: 0,
            changes: 0,
            renewals: 0,
            adopted: 0,
        }
    }

    fn key(&self, resource: &str, ns: Option<&str>, name: &str) -> String {
        key_for(&self.cfg.etcd_prefix, resource, ns, name)
    }

    /// Creates `value` under `key` unless it exists; returns what is stored
    /// and whether this call created it.
    async fn ensure(
        &mut self,
        store: &mut Store,
        key: String,
        ns: &str,
        value: Value,
    ) -> Option<(Tracked, bool)> {
        let tracked = |value, rev| Tracked {
            key: key.clone(),
            ns: ns.to_owned(),
            value,
            rev,
        };
        match store.create(&key, self.cfg.storage.encode(&value)).await {
            Outcome::Applied { revision } => {
                debug!(op = "create", %key, rev = revision, "write");
                Some((tracked(value, revision), true))
            }
            Outcome::Conflict { current: Some(cur) } => {
                debug!(op = "adopt", %key, rev = cur.mod_revision, "already present");
                self.adopted += 1;
                parse(&cur).map(|v| (tracked(v, cur.mod_revision), false))
            }
            Outcome::Conflict { current: None } => None,
        }
    }

    /// [`Demo::ensure`], then keeps the object in `owned` for later writes.
    async fn ensure_owned(
        &mut self,
        store: &mut Store,
        key: String,
        ns: &str,
        value: Value,
    ) -> Option<(Value, i64, bool)> {
        let (t, created) = self.ensure(store, key, ns, value).await?;
        let out = (t.value.clone(), t.rev, created);
        self.owned.insert(t.key.clone(), t);
        Some(out)
    }

    /// Makes changes, renews leases and logs progress until `stop` resolves.
    /// A write in flight when that happens gets [`FLUSH_TIMEOUT`] to finish,
    /// so that a delete is not left unaccounted for.
    async fn churn<S>(&mut self, store: &mut Store, mut stop: Pin<&mut S>) -> StopReason
    where
        S: Future<Output = StopReason>,
    {
        let cps = self.cfg.changes_per_second;
        let mut ticker = interval(Duration::from_secs_f64(1.0 / cps.max(1e-9)));
        let renew_every = self.renew_interval();
        // Never polled when renewals are off; any period will do then.
        let mut renewals = interval(renew_every.unwrap_or(PROGRESS_EVERY));
        let mut progress = interval(PROGRESS_EVERY);
        progress.tick().await;
        let mut last = (Instant::now(), self.changes);
        loop {
            let work = tokio::select! {
                reason = stop.as_mut() => return reason,
                _ = ticker.tick(), if cps > 0.0 => Work::Change,
                _ = renewals.tick(), if renew_every.is_some() => Work::Renew,
                _ = progress.tick() => {
                    let rate = (self.changes - last.1) as f64 / last.0.elapsed().as_secs_f64();
                    last = (Instant::now(), self.changes);
                    self.log_progress(store, rate);
                    continue;
                }
            };
            let mut task = pin!(self.work(store, work));
            tokio::select! {
                () = task.as_mut() => {}
                reason = stop.as_mut() => {
                    if tokio::time::timeout(FLUSH_TIMEOUT, task).await.is_err() {
                        warn!("gave up on the write in flight");
                    }
                    return reason;
                }
            }
        }
    }

    async fn work(&mut self, store: &mut Store, work: Work) {
        match work {
            Work::Change => self.change(store).await,
            Work::Renew => self.renew_next_lease(store).await,
        }
    }

    fn log_progress(&self, store: &Store, rate: f64) {
        info!(
            changes = self.changes,
            rate = format!("{rate:.1}/s"),
            renewals = self.renewals,
            events = self.events.written,
            creates = store.stats.creates,
            updates = store.stats.updates,
            deletes = store.stats.deletes,
            conflicts = store.stats.conflicts,
            failures = store.stats.failures,
            pods = self.pods.len(),
            configmaps = self.configmaps.len(),
            "demo progress"
        );
    }

    async fn flush(&mut self, store: &mut Store) {
        while let Some(p) = self.pending.pop_front() {
            self.create_pending(store, p).await;
        }
    }

    async fn create_pending(&mut self, store: &mut Store, p: Pending) {
        match p {
            Pending::Pod { app } => {
                let node = self.nodes[self.rng.index(self.nodes.len())].clone();
                let running = !self.rng.chance(0.3);
                self.create_pod(store, app, &node, running).await;
                if let Some(a) = self.apps.get(app) {
                    let (ns, name) = (a.ns.clone(), a.name.clone());
                    self.reconcile(store, &ns, &name).await;
                }
            }
            Pending::Recreate {
                which,
                key,
                ns,
                value,
            } => {
                if let Some((t, _)) = self.ensure(store, key, &ns, value).await {
                    self.list(which).push(t);
                }
            }
        }
    }
}

/// A ticker that skips ahead instead of bursting after a slow write.
fn interval(period: Duration) -> Interval {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

/// PRNG seed of a run: `seed` itself on a fresh etcd (revision 1), so runs
/// are reproducible there, and mixed with the starting revision otherwise so
/// that re-runs against a populated etcd never replay names or uids.
pub fn run_seed(seed: u64, start_revision: i64) -> u64 {
    if start_revision <= 1 {
        seed
    } else {
        seed ^ fnv1a(&format!("revision/{start_revision}"))
    }
}

/// A stored value (protobuf or JSON) as a JSON object.
fn parse(cur: &Current) -> Option<Value> {
    Storage::decode(&cur.value)
}

/// Data entries of a demo config map at a given generation.
fn configmap_data(app: &str, generation: u64) -> Vec<(&'static str, String)> {
    vec![
        ("LOG_LEVEL", "info".to_owned()),
        (
            "FEATURE_FLAGS",
            "search,recommendations,dark-mode".to_owned(),
        ),
        (
            "app.properties",
            format!("service.name={app}\nserver.shutdown=graceful\ncache.ttl=300s\nretries=3\n"),
        ),
        ("generation", generation.to_string()),
        ("updated-at", now_rfc3339()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_settings_fail_fast() {
        let cfg = DemoConfig {
            etcd_servers: vec!["https://127.0.0.1:1".into()],
            ..DemoConfig::default()
        };
        let err = run(&cfg, std::future::pending())
            .await
            .expect_err("must fail");
        assert!(err.to_string().contains("TLS"), "{err}");
    }

    #[test]
    fn run_seed_is_plain_on_fresh_etcd_and_mixed_otherwise() {
        assert_eq!(run_seed(7, 1), 7);
        assert_ne!(run_seed(7, 100), 7);
        assert_ne!(run_seed(7, 100), run_seed(7, 101));
        assert_eq!(run_seed(7, 100), run_seed(7, 100));
    }

    #[test]
    fn configmap_data_bumps_generation() {
        let data = configmap_data("api", 7);
        assert!(data.iter().any(|(k, v)| *k == "generation" && v == "7"));
        assert!(data
            .iter()
            .any(|(k, v)| *k == "app.properties" && v.contains("service.name=api")));
    }
}
