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

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::{pin, Pin};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::time::MissedTickBehavior;
use tracing::{debug, info, warn};

use crate::objects::{self, key_for, now_rfc3339, Rng, CONFIGMAPS, NAMESPACES, NODES, PODS};
use crate::rng::fnv1a;
use crate::store::{Current, Outcome, Store, StoreStats};

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

/// Settings of a demo run (mirrors the CLI flags).
#[derive(Clone, Debug, PartialEq)]
pub struct DemoConfig {
    /// etcd endpoints, `http://host:port` (a bare `host:port` is accepted).
    pub etcd_servers: Vec<String>,
    /// Key prefix kube-apiserver was started with (`--etcd-prefix`).
    pub etcd_prefix: String,
    /// Number of `demo-N` namespaces.
    pub namespaces: usize,
    /// Number of `node-N` nodes.
    pub nodes: usize,
    /// Pods in each demo namespace.
    pub pods_per_namespace: usize,
    /// Config maps in each demo namespace.
    pub configmaps_per_namespace: usize,
    /// Rate of changes after the fill; 0 means fill and then stay idle.
    pub changes_per_second: f64,
    /// PRNG seed for names, uids and the choice of changes.
    pub seed: u64,
    /// Stop after this long (fill included); `None` runs until stopped.
    pub duration: Option<Duration>,
    /// Fill, then return without making changes.
    pub once: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            etcd_servers: vec!["http://127.0.0.1:2379".to_owned()],
            etcd_prefix: "/registry".to_owned(),
            namespaces: 5,
            nodes: 4,
            pods_per_namespace: 8,
            configmaps_per_namespace: 3,
            changes_per_second: 5.0,
            seed: 1,
            duration: None,
            once: false,
        }
    }
}

impl DemoConfig {
    /// Checks the settings and returns the normalised endpoint list.
    pub fn endpoints(&self) -> Result<Vec<String>, DemoError> {
        let mut out = Vec::new();
        for raw in &self.etcd_servers {
            let ep = raw.trim();
            if ep.is_empty() {
                continue;
            }
            if ep.starts_with("https://") {
                return Err(DemoError::Config(format!(
                    "{ep}: TLS endpoints are not supported by the demo writer; use http://"
                )));
            }
            if ep.contains("://") && !ep.starts_with("http://") {
                return Err(DemoError::Config(format!(
                    "{ep}: expected http://host:port"
                )));
            }
            if ep.starts_with("http://") {
                out.push(ep.to_owned());
            } else {
                out.push(format!("http://{ep}"));
            }
        }
        if out.is_empty() {
            return Err(DemoError::Config("no etcd servers given".to_owned()));
        }
        Ok(out)
    }

    /// Validates every setting.
    pub fn validate(&self) -> Result<(), DemoError> {
        self.endpoints()?;
        if !self.etcd_prefix.starts_with('/') {
            return Err(DemoError::Config(format!(
                "etcd prefix {:?} must start with '/'",
                self.etcd_prefix
            )));
        }
        if self.nodes == 0 && self.namespaces > 0 && self.pods_per_namespace > 0 {
            return Err(DemoError::Config("pods need at least one node".to_owned()));
        }
        let cps = self.changes_per_second;
        if !cps.is_finite() || !(0.0..=MAX_CHANGES_PER_SECOND).contains(&cps) {
            return Err(DemoError::Config(format!(
                "changes per second must be between 0 and {MAX_CHANGES_PER_SECOND}, got {cps}"
            )));
        }
        Ok(())
    }
}

/// Why a demo run could not start.
#[derive(Debug)]
pub enum DemoError {
    /// Invalid settings.
    Config(String),
    /// The etcd client could not be created for the endpoints.
    Connect(etcd_client::Error),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(msg) => write!(f, "invalid demo settings: {msg}"),
            Self::Connect(err) => write!(f, "cannot set up etcd client: {err}"),
        }
    }
}

impl std::error::Error for DemoError {}

/// How a demo run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `once` was set and the fill completed.
    Filled,
    /// The configured duration elapsed.
    Duration,
    /// The caller's stop future (e.g. Ctrl-C) completed.
    Stopped,
}

/// What a demo run did.
#[derive(Clone, Debug)]
pub struct Summary {
    /// How the run ended.
    pub stop: StopReason,
    /// Changes attempted after the fill.
    pub changes: u64,
    /// etcd write counters (fill included).
    pub store: StoreStats,
    /// Pods tracked at the end.
    pub pods: usize,
    /// Config maps tracked at the end.
    pub configmaps: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Names of the demo namespaces: `demo-1..=n`.
pub fn demo_namespace_names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("demo-{i}")).collect()
}

/// Names of the nodes: `node-1..=n`.
pub fn node_names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("node-{i}")).collect()
}

/// Name of the `i`-th (1-based) config map of a namespace, e.g. `web-config-1`.
pub fn configmap_name(i: usize) -> String {
    format!("{}-config-{i}", APPS[(i + APPS.len() - 1) % APPS.len()])
}

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
    /// Re-create an object that vanished under us.
    Recreate {
        key: String,
        ns: String,
        value: Value,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Pod,
    ConfigMap,
}

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
        match store.create(&key, objects::encode(&value)).await {
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
            let value = objects::pod(ns, &name, node, &labels, phase, &mut self.rng);
            let (rev, value) = match store.create(&key, objects::encode(&value)).await {
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
                let which = if value["kind"] == "Pod" {
                    Which::Pod
                } else {
                    Which::ConfigMap
                };
                if let Some(t) = self.ensure(store, key, &ns, value).await {
                    self.list(which).push(t);
                }
            }
        }
    }

    fn list(&mut self, which: Which) -> &mut Vec<Tracked> {
        match which {
            Which::Pod => &mut self.pods,
            Which::ConfigMap => &mut self.configmaps,
        }
    }

    async fn update_pod(&mut self, store: &mut Store) {
        let i = self.rng.index(self.pods.len());
        let mut value = self.pods[i].value.clone();
        let mut rt = objects::pod_runtime(&value);
        let now = now_rfc3339();
        let running = rt.phase == "Running" && rt.pod_ip.is_some();
        let roll = self.rng.below(100);
        let what = if roll < 55 {
            // Phase / readiness flips; Running -> Pending only occasionally.
            if !running || (roll < 25 && self.rng.chance(0.3)) {
                if running {
                    rt.phase = "Pending".to_owned();
                    rt.pod_ip = None;
                    rt.ready = false;
                } else {
                    let node = value["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or("node-1")
                        .to_owned();
                    rt.phase = "Running".to_owned();
                    rt.pod_ip = Some(objects::pod_ip_for(&node, &mut self.rng));
                    rt.ready = true;
                    rt.started_at = now.clone();
                }
                format!("phase={}", rt.phase)
            } else {
                rt.ready = !rt.ready;
                format!("ready={}", rt.ready)
            }
        } else if roll < 80 {
            rt.restart_count += 1;
            rt.started_at = now.clone();
            format!("restartCount={}", rt.restart_count)
        } else {
            let next = match objects::label(&value, TRACK_LABEL) {
                Some("canary") => "stable",
                _ => "canary",
            };
            objects::set_label(&mut value, TRACK_LABEL, next);
            format!("{TRACK_LABEL}={next}")
        };
        if !what.starts_with(TRACK_LABEL) {
            if what.starts_with("phase") || what.starts_with("ready") {
                rt.transition_time = now;
            }
            objects::set_pod_runtime(&mut value, &rt);
        }
        self.write_update(store, Which::Pod, i, value, &what).await;
    }

    async fn update_configmap(&mut self, store: &mut Store) {
        let i = self.rng.index(self.configmaps.len());
        let mut value = self.configmaps[i].value.clone();
        let generation = value["data"]["generation"]
            .as_str()
            .and_then(|g| g.parse::<u64>().ok())
            .unwrap_or(0)
            + 1;
        let app = objects::label(&value, "app").unwrap_or("web").to_owned();
        if !value["data"].is_object() {
            value["data"] = serde_json::json!({});
        }
        for (k, v) in configmap_data(&app, generation) {
            value["data"][k] = Value::String(v);
        }
        value["data"]["LOG_LEVEL"] =
            Value::String(["info", "debug", "warn"][self.rng.index(3)].to_owned());
        self.write_update(
            store,
            Which::ConfigMap,
            i,
            value,
            &format!("generation={generation}"),
        )
        .await;
    }

    async fn write_update(
        &mut self,
        store: &mut Store,
        which: Which,
        i: usize,
        value: Value,
        what: &str,
    ) {
        let (key, rev) = {
            let t = &self.list(which)[i];
            (t.key.clone(), t.rev)
        };
        match store.update(&key, objects::encode(&value), rev).await {
            Outcome::Applied { revision } => {
                debug!(op = "update", %key, rev = revision, change = what, "change");
                let t = &mut self.list(which)[i];
                t.value = value;
                t.rev = revision;
            }
            Outcome::Conflict { current: Some(cur) } => self.resync(which, i, &cur),
            Outcome::Conflict { current: None } => self.vanished(which, i),
        }
    }

    async fn delete_pod(&mut self, store: &mut Store) {
        let i = self.rng.index(self.pods.len());
        let (key, rev) = (self.pods[i].key.clone(), self.pods[i].rev);
        match store.delete(&key, rev).await {
            Outcome::Applied { revision } => {
                debug!(op = "delete", %key, rev = revision, "change");
                let gone = self.pods.swap_remove(i);
                self.replace_pod(&gone);
            }
            Outcome::Conflict { current: Some(cur) } => self.resync(Which::Pod, i, &cur),
            Outcome::Conflict { current: None } => self.vanished(Which::Pod, i),
        }
    }

    /// Queues a replacement for a deleted pod unless its namespace is over target.
    fn replace_pod(&mut self, gone: &Tracked) {
        if self.pods_in(&gone.ns) < self.cfg.pods_per_namespace {
            let app = objects::label(&gone.value, "app")
                .unwrap_or("web")
                .to_owned();
            let hash = match objects::label(&gone.value, "pod-template-hash") {
                Some(h) => h.to_owned(),
                None => self.template_hash(&gone.ns, &app),
            };
            let ns = gone.ns.clone();
            self.pending.push_back(Pending::Pod { ns, app, hash });
        }
    }

    /// Someone else changed the object: adopt what etcd holds now.
    fn resync(&mut self, which: Which, i: usize, cur: &Current) {
        match parse(cur) {
            Some(v) => {
                let t = &mut self.list(which)[i];
                debug!(key = %t.key, rev = cur.mod_revision, "object changed elsewhere; re-read");
                t.value = v;
                t.rev = cur.mod_revision;
            }
            None => {
                let t = self.list(which).swap_remove(i);
                warn!(key = %t.key, "object no longer holds JSON; no longer managing it");
            }
        }
    }

    /// The object disappeared (deleted elsewhere, or etcd was wiped): put it back.
    fn vanished(&mut self, which: Which, i: usize) {
        let t = self.list(which).swap_remove(i);
        warn!(key = %t.key, "object vanished from etcd; re-creating");
        match which {
            Which::Pod => self.replace_pod(&t),
            Which::ConfigMap => {
                let mut value = t.value;
                value["metadata"]["uid"] = Value::String(self.rng.uuid());
                value["metadata"]["creationTimestamp"] = Value::String(now_rfc3339());
                self.pending.push_back(Pending::Recreate {
                    key: t.key,
                    ns: t.ns,
                    value,
                });
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

fn parse(cur: &Current) -> Option<Value> {
    serde_json::from_slice::<Value>(&cur.value)
        .ok()
        .filter(Value::is_object)
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

    #[test]
    fn names() {
        assert_eq!(demo_namespace_names(2), ["demo-1", "demo-2"]);
        assert_eq!(node_names(3), ["node-1", "node-2", "node-3"]);
        assert_eq!(configmap_name(1), "web-config-1");
        assert_eq!(configmap_name(2), "api-config-2");
        assert_eq!(configmap_name(4), "web-config-4");
    }

    #[test]
    fn endpoint_normalisation_and_validation() {
        let mut cfg = DemoConfig {
            etcd_servers: vec!["127.0.0.1:2379".into(), " http://10.0.0.1:2379".into()],
            ..DemoConfig::default()
        };
        assert_eq!(
            cfg.endpoints().expect("valid"),
            ["http://127.0.0.1:2379", "http://10.0.0.1:2379"]
        );
        assert!(cfg.validate().is_ok());
        cfg.etcd_servers = vec!["https://x:2379".into()];
        assert!(cfg.validate().is_err());
        cfg.etcd_servers = vec![String::new()];
        assert!(cfg.validate().is_err());
        cfg.etcd_servers = vec!["http://x:2379".into()];
        cfg.changes_per_second = f64::NAN;
        assert!(cfg.validate().is_err());
        cfg.changes_per_second = 0.0;
        cfg.etcd_prefix = "registry".into();
        assert!(cfg.validate().is_err());
        cfg.etcd_prefix = "/registry".into();
        cfg.nodes = 0;
        assert!(cfg.validate().is_err());
    }

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
    fn configmap_data_bumps_generation() {
        let data = configmap_data("api", 7);
        assert!(data.iter().any(|(k, v)| *k == "generation" && v == "7"));
        assert!(data
            .iter()
            .any(|(k, v)| *k == "app.properties" && v.contains("service.name=api")));
    }
}
