//! The changes the demo makes after the fill: pod status flips, restarts
//! and relabels, pod deletes (replaced on the next tick) and config map
//! updates, each a single conditional etcd write.

use serde_json::Value;
use tracing::{debug, warn};

use super::{configmap_data, parse, Demo, Pending, Tracked, Which, TRACK_LABEL};
use crate::objects::{self, now_rfc3339};
use crate::store::{Current, Outcome, Store};

impl Demo<'_> {
    /// The tracked objects of one kind.
    pub(super) fn list(&mut self, which: Which) -> &mut Vec<Tracked> {
        match which {
            Which::Pod => &mut self.pods,
            Which::ConfigMap => &mut self.configmaps,
        }
    }

    /// Updates a random pod: 55 % phase/readiness flips, 25 % container
    /// restarts, 20 % relabels (`track=stable|canary`).
    pub(super) async fn update_pod(&mut self, store: &mut Store) {
        let i = self.rng.index(self.pods.len());
        let mut value = self.pods[i].value.clone();
        let roll = self.rng.below(100);
        let what = if roll >= 80 {
            let next = match objects::label(&value, TRACK_LABEL) {
                Some("canary") => "stable",
                _ => "canary",
            };
            objects::set_label(&mut value, TRACK_LABEL, next);
            format!("{TRACK_LABEL}={next}")
        } else {
            let mut rt = objects::pod_runtime(&value);
            let now = now_rfc3339();
            let running = rt.phase == "Running" && rt.pod_ip.is_some();
            let what = if roll >= 55 {
                rt.restart_count += 1;
                rt.started_at = now;
                format!("restartCount={}", rt.restart_count)
            } else if !running {
                let node = value["spec"]["nodeName"].as_str().unwrap_or("node-1");
                rt.pod_ip = Some(objects::pod_ip_for(node, &mut self.rng));
                rt.phase = "Running".to_owned();
                rt.ready = true;
                rt.started_at = now.clone();
                rt.transition_time = now;
                "phase=Running".to_owned()
            } else if roll < 25 && self.rng.chance(0.3) {
                // Running -> Pending only occasionally, so most pods run.
                rt.phase = "Pending".to_owned();
                rt.pod_ip = None;
                rt.ready = false;
                rt.transition_time = now;
                "phase=Pending".to_owned()
            } else {
                rt.ready = !rt.ready;
                rt.transition_time = now;
                format!("ready={}", rt.ready)
            };
            objects::set_pod_runtime(&mut value, &rt);
            what
        };
        self.write_update(store, Which::Pod, i, value, &what).await;
    }

    /// Updates a random config map: bumps `generation`, rotates `LOG_LEVEL`.
    pub(super) async fn update_configmap(&mut self, store: &mut Store) {
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

    /// Writes `value` over object `i` if it is unchanged since we last saw it.
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
        match store
            .update(&key, self.cfg.storage.encode(&value), rev)
            .await
        {
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

    /// Deletes a random pod; its replacement is created on the next tick.
    pub(super) async fn delete_pod(&mut self, store: &mut Store) {
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
                warn!(key = %t.key, "object is no longer readable; no longer managing it");
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
