//! The `demo` subcommand: writes a small but realistic cluster into etcd and
//! then keeps it changing at a fixed rate.
//!
//! Layout and values follow kube-apiserver (see [`crate::objects`]). The fill
//! is idempotent: objects that already exist are adopted rather than
//! overwritten, and pods already present in a demo namespace count towards
//! `--pods-per-namespace`, so re-running against the same etcd converges to
//! the requested size instead of growing.
//!
//! After the fill (unless `once`), one change is made per tick of
//! `changes_per_second`, each a single etcd put or delete:
//! pod status updates (phase, readiness, restart count), pod relabels
//! (`track=stable|canary`), pod deletes (the replacement pod, with a new name
//! and uid, is created on the next tick) and config map updates. Every change
//! is logged at debug level and a progress line is logged at info every 10 s.
//!
//! Updates and deletes are conditional on the `mod_revision` last seen (as
//! kube-apiserver does), so a concurrent writer is detected and its version
//! adopted instead of being overwritten. A stop (duration or signal) lets the
//! change in flight finish and creates a pending replacement pod, each within
//! a short timeout, so the cluster is left at its target size.
//!
//! The PRNG is seeded with `seed` on a fresh etcd, making runs reproducible,
//! and with `seed` mixed with the starting etcd revision otherwise, so that a
//! re-run never repeats the names or uids of an earlier one (see [`run_seed`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::{pin, Pin};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::time::MissedTickBehavior;
use tracing::{debug, info, warn};

mod changes;
mod config;

pub use config::{
    configmap_name, demo_namespace_names, node_names, DemoConfig, DemoError, StopReason, Storage,
    Summary,
};

use crate::objects::{self, key_for, now_rfc3339, Rng, CONFIGMAPS, NAMESPACES, NODES, PODS};
use crate::rng::{fnv1a, stable_uuid};
use crate::store::{Current, Outcome, Store};

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
        store: store.stats,
        pods: demo.pods.len(),
        configmaps: demo.configmaps.len(),
        elapsed: started.elapsed(),
    };
    info!(
        reason = ?summary.stop,
        changes = summary.changes,
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
    /// Create a replacement pod for `app` in `ns` from ReplicaSet `hash`.
    Pod {
        ns: String,
        app: String,
        hash: String,
    },
    /// Re-create a config map that vanished under us.
    Recreate {
        key: String,
        ns: String,
        value: Value,
    },
}

/// Kind of tracked object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Pod,
    ConfigMap,
}

/// State of a run: the objects being changed and what is still to do.
struct Demo<'a> {
    cfg: &'a DemoConfig,
    rng: Rng,
    nodes: Vec<String>,
    pods: Vec<Tracked>,
    configmaps: Vec<Tracked>,
    pending: VecDeque<Pending>,
    next_node: usize,
    changes: u64,
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
            pending: VecDeque::new(),
            next_node: 0,
            changes: 0,
            adopted: 0,
        }
    }

    fn key(&self, resource: &str, ns: Option<&str>, name: &str) -> String {
        key_for(&self.cfg.etcd_prefix, resource, ns, name)
    }

    /// Creates `value` under `key` unless it exists; returns what is stored.
    async fn ensure(
        &mut self,
        store: &mut Store,
        key: String,
        ns: &str,
        value: Value,
    ) -> Option<Tracked> {
        let tracked = |value, rev| Tracked {
            key: key.clone(),
            ns: ns.to_owned(),
            value,
            rev,
        };
        match store.create(&key, self.cfg.storage.encode(&value)).await {
            Outcome::Applied { revision } => {
                debug!(op = "create", %key, rev = revision, "write");
                Some(tracked(value, revision))
            }
            Outcome::Conflict { current: Some(cur) } => {
                debug!(op = "adopt", %key, rev = cur.mod_revision, "already present");
                self.adopted += 1;
                parse(&cur).map(|v| tracked(v, cur.mod_revision))
            }
            Outcome::Conflict { current: None } => None,
        }
    }

    async fn fill(&mut self, store: &mut Store) {
        let revision = store.revision().await;
        self.rng = Rng::new(run_seed(self.cfg.seed, revision));
        debug!(revision, "connected to etcd");
        let demo_namespaces = demo_namespace_names(self.cfg.namespaces);
        let all = SYSTEM_NAMESPACES
            .iter()
            .map(|s| (*s).to_owned())
            .chain(demo_namespaces.clone());
        for name in all.collect::<Vec<_>>() {
            let obj = objects::namespace(&name, &mut self.rng);
            let key = self.key(NAMESPACES, None, &name);
            self.ensure(store, key, "", obj).await;
        }
        for name in self.nodes.clone() {
            let obj = objects::node(&name, &mut self.rng);
            let key = self.key(NODES, None, &name);
            self.ensure(store, key, "", obj).await;
        }
        for ns in demo_namespaces {
            let prefix = self.key(PODS, Some(&ns), "");
            for entry in store.list(&prefix).await {
                let cur = Current {
                    value: entry.value,
                    mod_revision: entry.mod_revision,
                };
                match parse(&cur) {
                    Some(v) if v["kind"] == "Pod" && objects::label(&v, "app").is_some() => {
                        debug!(key = %entry.key, "adopting existing pod");
                        self.adopted += 1;
                        self.pods.push(Tracked {
                            key: entry.key,
                            ns: ns.clone(),
                            value: v,
                            rev: cur.mod_revision,
                        });
                    }
                    _ => debug!(key = %entry.key, "ignoring foreign pod"),
                }
            }
            for i in self.pods_in(&ns)..self.cfg.pods_per_namespace {
                let node = self.nodes[self.next_node % self.nodes.len()].clone();
                self.next_node += 1;
                let phase = if self.rng.chance(0.1) {
                    "Pending"
                } else {
                    "Running"
                };
                let app = APPS[i % APPS.len()];
                let hash = self.template_hash(&ns, app);
                self.create_pod(store, &ns, app, &hash, &node, phase).await;
            }
            for i in 1..=self.cfg.configmaps_per_namespace {
                let name = configmap_name(i);
                let app = name.split('-').next().unwrap_or("web").to_owned();
                let data = configmap_data(&app, 1);
                let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let obj = objects::configmap(&ns, &name, &[("app", &app)], &data, &mut self.rng);
                let key = self.key(CONFIGMAPS, Some(&ns), &name);
                if let Some(t) = self.ensure(store, key, &ns, obj).await {
                    self.configmaps.push(t);
                }
            }
        }
    }

    /// The `pod-template-hash` of `app`'s ReplicaSet in `ns`; stable for a
    /// given seed so that re-runs keep adding pods to the same ReplicaSet.
    fn template_hash(&self, ns: &str, app: &str) -> String {
        let mut rng = Rng::new(self.cfg.seed ^ fnv1a(&format!("{ns}/{app}")));
        objects::pod_template_hash(&mut rng)
    }

    fn pods_in(&self, ns: &str) -> usize {
        self.pods.iter().filter(|p| p.ns == ns).count()
    }

    /// Creates a new pod of `app`, picking another name when the generated
    /// one is taken (as the ReplicaSet controller does with `generateName`).
    async fn create_pod(
        &mut self,
        store: &mut Store,
        ns: &str,
        app: &str,
        hash: &str,
        node: &str,
        phase: &str,
    ) {
        for _ in 0..MAX_NAME_ATTEMPTS {
            let name = objects::pod_name(app, hash, &mut self.rng);
            let key = self.key(PODS, Some(ns), &name);
            if self.pods.iter().any(|p| p.key == key) {
                continue;
            }
            let labels = [("app", app), ("pod-template-hash", hash)];
            let owner = format!("{app}-{hash}");
            let owner_uid = stable_uuid(&format!("replicaset/{ns}/{owner}"));
            let new = objects::NewPod {
                ns,
                name: &name,
                node,
                labels: &labels,
                owner: objects::controller_ref("apps/v1", "ReplicaSet", &owner, &owner_uid),
                pod_ip: (phase == "Running").then(|| objects::pod_ip_for(node, &mut self.rng)),
            };
            let value = objects::pod(&new, &mut self.rng);
            let (rev, value) = match store.create(&key, self.cfg.storage.encode(&value)).await {
                Outcome::Applied { revision } => (revision, value),
                // Our own earlier attempt landed before the connection broke.
                Outcome::Conflict { current: Some(cur) } => match parse(&cur) {
                    Some(v) if v["metadata"]["uid"] == value["metadata"]["uid"] => {
                        (cur.mod_revision, v)
                    }
                    _ => {
                        debug!(%key, "pod name taken; picking another");
                        continue;
                    }
                },
                Outcome::Conflict { current: None } => continue,
            };
            debug!(op = "create", %key, rev, "write");
            let ns = ns.to_owned();
            self.pods.push(Tracked {
                key,
                ns,
                value,
                rev,
            });
            return;
        }
        warn!(ns, app, "no free pod name found; skipping this pod");
    }

    /// Makes changes until `stop` resolves. A change in flight when that
    /// happens gets [`FLUSH_TIMEOUT`] to finish, so that a delete is not left
    /// unaccounted for.
    async fn churn<S>(&mut self, store: &mut Store, mut stop: Pin<&mut S>) -> StopReason
    where
        S: Future<Output = StopReason>,
    {
        let cps = self.cfg.changes_per_second;
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / cps.max(1e-9)));
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut progress = tokio::time::interval(PROGRESS_EVERY);
        progress.tick().await;
        let mut last = (Instant::now(), self.changes);
        loop {
            tokio::select! {
                reason = stop.as_mut() => return reason,
                _ = ticker.tick(), if cps > 0.0 => {
                    let mut change = pin!(self.change(store));
                    tokio::select! {
                        () = change.as_mut() => {}
                        reason = stop.as_mut() => {
                            if tokio::time::timeout(FLUSH_TIMEOUT, change).await.is_err() {
                                warn!("gave up on the change in flight");
                            }
                            return reason;
                        }
                    }
                }
                _ = progress.tick() => {
                    let rate = (self.changes - last.1) as f64 / last.0.elapsed().as_secs_f64();
                    last = (Instant::now(), self.changes);
                    info!(
                        changes = self.changes,
                        rate = format!("{rate:.1}/s"),
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
            }
        }
    }

    async fn change(&mut self, store: &mut Store) {
        if let Some(p) = self.pending.pop_front() {
            self.changes += 1;
            return self.create_pending(store, p).await;
        }
        let roll = self.rng.below(100);
        let has_pods = !self.pods.is_empty();
        let has_cms = !self.configmaps.is_empty();
        if !has_pods && !has_cms {
            return;
        }
        self.changes += 1;
        if has_pods && (roll < 60 || !has_cms) {
            self.update_pod(store).await;
        } else if has_pods && roll < 85 {
            self.delete_pod(store).await;
        } else {
            self.update_configmap(store).await;
        }
    }

    async fn flush(&mut self, store: &mut Store) {
        while let Some(p) = self.pending.pop_front() {
            self.create_pending(store, p).await;
        }
    }

    async fn create_pending(&mut self, store: &mut Store, p: Pending) {
        match p {
            Pending::Pod { ns, app, hash } => {
                let node = self.nodes[self.rng.index(self.nodes.len())].clone();
                let phase = if self.rng.chance(0.3) {
                    "Pending"
                } else {
                    "Running"
                };
                self.create_pod(store, &ns, &app, &hash, &node, phase).await;
            }
            Pending::Recreate { key, ns, value } => {
                if let Some(t) = self.ensure(store, key, &ns, value).await {
                    self.configmaps.push(t);
                }
            }
        }
    }
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
