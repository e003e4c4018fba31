//! The random changes the demo makes after the fill — pod status flips,
//! restarts and relabels, pod deletes (replaced on the next tick), config map
//! and widget updates, each a single conditional etcd write — and pod
//! creation, which the fill shares. After a pod write come the Events its
//! kubelet would report and the controllers' writes (`controllers.rs`).

use std::collections::HashSet;

use serde_json::Value;
use tracing::{debug, warn};

use super::{configmap_data, parse, Demo, Pending, Tracked, Which, MAX_NAME_ATTEMPTS, TRACK_LABEL};
use crate::objects::{self, custom, now_rfc3339, NewPod, PODS};
use crate::store::{Current, Outcome, Store};

/// One kind of random change, with its weight in the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    UpdatePod,
    DeletePod,
    UpdateConfigMap,
    UpdateWidget,
}

/// The mix of random changes: mostly pods, as in a real cluster.
const MIX: [(Change, u64); 4] = [
    (Change::UpdatePod, 55),
    (Change::DeletePod, 25),
    (Change::UpdateConfigMap, 12),
    (Change::UpdateWidget, 8),
];

/// How a pod update changed the pod, for the events that follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PodChange {
    Relabel,
    Restart,
    Started,
    SandboxChanged,
    Ready(bool),
}

impl Demo<'_> {
    /// The tracked objects of one kind.
    pub(super) fn list(&mut self, which: Which) -> &mut Vec<Tracked> {
        match which {
            Which::Pod => &mut self.pods,
            Which::ConfigMap => &mut self.configmaps,
            Which::Widget => &mut self.widgets,
        }
    }

    /// Makes one change: a pending create first, else a random one from [`MIX`]
    /// among the kinds that have objects.
    pub(super) async fn change(&mut self, store: &mut Store) {
        if let Some(p) = self.pending.pop_front() {
            self.changes += 1;
            return self.create_pending(store, p).await;
        }
        let available = |c: Change| match c {
            Change::UpdatePod | Change::DeletePod => !self.pods.is_empty(),
            Change::UpdateConfigMap => !self.configmaps.is_empty(),
            Change::UpdateWidget => !self.widgets.is_empty(),
        };
        let choices: Vec<(Change, u64)> = MIX.into_iter().filter(|(c, _)| available(*c)).collect();
        let total: u64 = choices.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return;
        }
        let mut roll = self.rng.below(total);
        let Some(change) = choices.iter().find_map(|&(c, w)| {
            if roll < w {
                Some(c)
            } else {
                roll -= w;
                None
            }
        }) else {
            return;
        };
        self.changes += 1;
        match change {
            Change::UpdatePod => self.update_pod(store).await,
            Change::DeletePod => self.delete_pod(store).await,
            Change::UpdateConfigMap => self.update_configmap(store).await,
            Change::UpdateWidget => self.update_widget(store).await,
        }
    }

    /// An IP in `node`'s pod CIDR that no tracked pod has (as the node's IPAM
    /// would give), or a used one if the draws keep colliding.
    pub(super) fn allocate_pod_ip(&mut self, node: &str) -> String {
        let used: HashSet<&str> = self
            .pods
            .iter()
            .filter_map(|p| p.value["status"]["podIP"].as_str())
            .collect();
        let mut ip = objects::pod_ip_for(node, &mut self.rng);
        for _ in 0..32 {
            if !used.contains(ip.as_str()) {
                break;
            }
            ip = objects::pod_ip_for(node, &mut self.rng);
        }
        ip
    }

    /// Creates a new pod of application `app` (an index into `apps`) on
    /// `node`, picking another name when the generated one is taken (as the
    /// ReplicaSet controller does with `generateName`), and reports its
    /// events; the caller reconciles the application's derived objects.
    pub(super) async fn create_pod(
        &mut self,
        store: &mut Store,
        app: usize,
        node: &str,
        running: bool,
    ) {
        let Some(a) = self.apps.get(app).cloned() else {
            return;
        };
        for _ in 0..MAX_NAME_ATTEMPTS {
            let name = objects::pod_name(&a.name, &a.hash, &mut self.rng);
            let key = self.key(PODS, Some(&a.ns), &name);
            if self.pods.iter().any(|p| p.key == key) {
                continue;
            }
            let labels = [
                ("app", a.name.as_str()),
                ("pod-template-hash", a.hash.as_str()),
            ];
            let pod_ip = running.then(|| self.allocate_pod_ip(node));
            let new = NewPod {
                ns: &a.ns,
                name: &name,
                node,
                labels: &labels,
                owner: a.owner.clone(),
                pod_ip,
            };
            let value = objects::pod(&new, &mut self.rng);
            let (rev, value) = match store.create(&key, self.cfg.storage.encode(&value)).await {
                Outcome::Applied { revision } => (revision, value),
                // Our own earlier attempt landed before the connection broke.
                Outcome::Conflict { current: Some(cur) } => match parse(&cur) {
                    Some(v) if objects::uid(&v) == objects::uid(&value) => (cur.mod_revision, v),
                    _ => {
                        debug!(%key, "pod name taken; picking another");
                        continue;
                    }
                },
                Outcome::Conflict { current: None } => continue,
            };
            debug!(op = "create", %key, rev, "write");
            self.pod_created_events(store, &a, &value, rev).await;
            self.pods.push(Tracked {
                key,
                ns: a.ns.clone(),
                value,
                rev,
            });
            return;
        }
        warn!(
            ns = a.ns,
            app = a.name,
            "no free pod name found; skipping this pod"
        );
    }

    /// Updates a random pod. 55 %: a health change — an unhealthy pod (not
    /// running, or not ready) recovers, a healthy one fails one time in ten
    /// (its readiness probe, or now and then its sandbox) and is relabelled
    /// otherwise; so about 85 % of the pods are ready at any time, as in a
    /// cluster that mostly works. 25 %: a container restart (a pod not yet
    /// running starts instead). 20 %: a relabel (`track=stable|canary`).
    async fn update_pod(&mut self, store: &mut Store) {
        let i = self.rng.index(self.pods.len());
        let mut value = self.pods[i].value.clone();
        let mut rt = objects::pod_runtime(&value);
        let running = rt.phase == "Running" && rt.pod_ip.is_some();
        let roll = self.rng.below(100);
        let change = if roll >= 80 || (roll < 55 && running && rt.ready && !self.rng.chance(0.1)) {
            PodChange::Relabel
        } else if !running {
            PodChange::Started
        } else if roll >= 55 {
            PodChange::Restart
        } else if !rt.ready {
            PodChange::Ready(true)
        } else if self.rng.chance(0.3) {
            PodChange::SandboxChanged
        } else {
            PodChange::Ready(false)
        };
        let now = now_rfc3339();
        let what = match change {
            PodChange::Relabel => {
                let next = match objects::label(&value, TRACK_LABEL) {
                    Some("canary") => "stable",
                    _ => "canary",
                };
                objects::set_label(&mut value, TRACK_LABEL, next);
                format!("{TRACK_LABEL}={next}")
            }
            PodChange::Restart => {
                rt.restart_count += 1;
                rt.started_at = now;
                format!("restartCount={}", rt.restart_count)
            }
            PodChange::Started => {
                let node = value["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or("node-1")
                    .to_owned();
                rt.pod_ip = Some(self.allocate_pod_ip(&node));
                rt.phase = "Running".to_owned();
                rt.ready = true;
                rt.started_at = now.clone();
                rt.transition_time = now;
                "phase=Running".to_owned()
            }
            PodChange::SandboxChanged => {
                rt.phase = "Pending".to_owned();
                rt.pod_ip = None;
                rt.ready = false;
                rt.transition_time = now;
                "phase=Pending".to_owned()
            }
            PodChange::Ready(ready) => {
                rt.ready = ready;
                rt.transition_time = now;
                format!("ready={ready}")
            }
        };
        if change != PodChange::Relabel {
            objects::set_pod_runtime(&mut value, &rt);
        }
        let Some(rev) = self.write_update(store, Which::Pod, i, value, &what).await else {
            return;
        };
        let pod = self.pods[i].value.clone();
        self.pod_changed_events(store, &pod, rev, change).await;
        if change != PodChange::Relabel {
            let ns = self.pods[i].ns.clone();
            if let Some(app) = objects::label(&pod, "app") {
                self.reconcile(store, &ns, app).await;
            }
        }
    }

    /// Updates a random config map: bumps `generation`, rotates `LOG_LEVEL`.
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
        let what = format!("generation={generation}");
        self.write_update(store, Which::ConfigMap, i, value, &what)
            .await;
    }

    /// Updates a random widget: a spec change, or its controller catching up.
    async fn update_widget(&mut self, store: &mut Store) {
        let i = self.rng.index(self.widgets.len());
        let mut value = self.widgets[i].value.clone();
        let what = custom::change_widget(&mut value, &mut self.rng);
        self.write_update(store, Which::Widget, i, value, &what)
            .await;
    }

    /// Writes `value` over object `i` if it is unchanged since we last saw it;
    /// returns the new revision if it was written.
    async fn write_update(
        &mut self,
        store: &mut Store,
        which: Which,
        i: usize,
        value: Value,
        what: &str,
    ) -> Option<i64> {
        let (key, rev) = {
            let t = &self.list(which)[i];
            (t.key.clone(), t.rev)
        };
        match store
            .update(&key, self.cfg.storage.encode(&value), rev)
            .await
        {
            Outcome::Applied { revision } => {
                debug!(op = "update", %key, rev = revision, change = what, "change");
                let t = &mut self.list(which)[i];
                t.value = value;
                t.rev = revision;
                return Some(revision);
            }
            Outcome::Conflict { current: Some(cur) } => self.resync(which, i, &cur),
            Outcome::Conflict { current: None } => self.vanished(which, i),
        }
        None
    }

    /// Deletes a random pod; its replacement is created on the next tick.
    async fn delete_pod(&mut self, store: &mut Store) {
        let i = self.rng.index(self.pods.len());
        let (key, rev) = (self.pods[i].key.clone(), self.pods[i].rev);
        match store.delete(&key, rev).await {
            Outcome::Applied { revision } => {
                debug!(op = "delete", %key, rev = revision, "change");
                let gone = self.pods.swap_remove(i);
                self.pod_deleted_events(store, &gone.value, gone.rev).await;
                if let Some(app) = objects::label(&gone.value, "app") {
                    self.reconcile(store, &gone.ns, app).await;
                }
                self.replace_pod(&gone);
            }
            Outcome::Conflict { current: Some(cur) } => self.resync(Which::Pod, i, &cur),
            Outcome::Conflict { current: None } => self.vanished(Which::Pod, i),
        }
    }

    /// Queues a replacement for a deleted pod unless its application is at
    /// its replicas (pods of unknown applications are not replaced).
    fn replace_pod(&mut self, gone: &Tracked) {
        let app = objects::label(&gone.value, "app").unwrap_or_default();
        let Some(i) = self.app_index(&gone.ns, app) else {
            return;
        };
        if self.app_pods(&self.apps[i]).count() < self.apps[i].replicas {
            self.pending.push_back(Pending::Pod { app: i });
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
                warn!(key = %t.key, "object is no longer readable; no longer managing it");
            }
        }
    }

    /// The object disappeared (deleted elsewhere, or etcd was wiped): put it back.
    fn vanished(&mut self, which: Which, i: usize) {
        let t = self.list(which).swap_remove(i);
        warn!(key = %t.key, "object vanished from etcd; re-creating");
        match which {
            Which::Pod => {
                self.events.forget(objects::uid(&t.value));
                self.replace_pod(&t);
            }
            Which::ConfigMap | Which::Widget => {
                let mut value = t.value;
                value["metadata"]["uid"] = Value::String(self.rng.uuid());
                value["metadata"]["creationTimestamp"] = Value::String(now_rfc3339());
                self.pending.push_back(Pending::Recreate {
                    which,
                    key: t.key,
                    ns: t.ns,
                    value,
                });
            }
        }
    }

    /// The events a pod change makes its kubelet report.
    async fn pod_changed_events(
        &mut self,
        store: &mut Store,
        pod: &Value,
        rev: i64,
        change: PodChange,
    ) {
        match change {
            PodChange::Relabel | PodChange::Ready(true) => {}
            PodChange::Restart | PodChange::Started => {
                self.containers_started(store, pod, rev).await
            }
            PodChange::SandboxChanged => self.sandbox_changed(store, pod, rev).await,
            PodChange::Ready(false) => self.readiness_failed(store, pod, rev).await,
        }
    }
}
