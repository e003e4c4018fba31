//! Events, as the kubelets, the scheduler and the controllers report them,
//! written with an etcd lease of `event_ttl` like kube-apiserver writes them
//! (so they expire on their own), the lease shared as its lease manager
//! shares it ([`TtlLeases`]).
//!
//! A kubelet event seen again for the same pod (a container restarting and
//! starting again) updates the first one — `count` + 1, new `lastTimestamp`
//! — as client-go's recorder does. Those are remembered per pod and
//! forgotten when the pod goes, so memory stays bounded by the pods.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use tracing::debug;

use super::controllers::App;
use super::{Demo, Storage};
use crate::objects::event::{self, involved, Occurrence, Source};
use crate::objects::{self, key_for, now_rfc3339, Rng, EVENTS};
use crate::rng::unix_nanos;
use crate::store::{Outcome, Store, TtlLeases};

/// Most pods whose events are remembered for aggregation; past it the memory
/// is dropped (later repeats then start new events).
const MAX_REMEMBERED_PODS: usize = 100_000;

/// A kubelet event written earlier, which a repeat updates.
struct Seen {
    reason: &'static str,
    message: String,
    key: String,
    value: Value,
    rev: i64,
}

/// Writes Events with their etcd lease, aggregating kubelet repeats.
pub(super) struct Recorder {
    prefix: String,
    storage: Storage,
    leases: TtlLeases,
    /// Kubelet events by involved pod uid.
    seen: HashMap<String, Vec<Seen>>,
    last_nanos: u128,
    /// Events written (created or updated).
    pub(super) written: u64,
}

impl Recorder {
    pub(super) fn new(prefix: &str, storage: Storage, ttl: Duration) -> Self {
        Self {
            prefix: prefix.to_owned(),
            storage,
            leases: TtlLeases::new(ttl),
            seen: HashMap::new(),
            last_nanos: 0,
            written: 0,
        }
    }

    /// A name suffix that never repeats, even for events in the same nanosecond.
    fn next_nanos(&mut self) -> u128 {
        self.last_nanos = unix_nanos().max(self.last_nanos + 1);
        self.last_nanos
    }

    /// Forgets the events of a pod that is gone.
    pub(super) fn forget(&mut self, pod_uid: &str) {
        self.seen.remove(pod_uid);
    }

    /// Writes `what`: a repeat of a remembered kubelet event updates it,
    /// anything else is a new Event.
    pub(super) async fn record(&mut self, store: &mut Store, rng: &mut Rng, what: Occurrence<'_>) {
        let kubelet = matches!(what.source, Source::Kubelet(_));
        let uid = what.involved["uid"].as_str().unwrap_or_default().to_owned();
        if kubelet && self.repeat(store, &uid, &what).await {
            return;
        }
        let name = event::event_name(&what.involved, self.next_nanos());
        let ns = what.involved["namespace"].as_str().unwrap_or("default");
        let key = key_for(&self.prefix, EVENTS, Some(ns), &name);
        let value = event::event(&name, &what, rng);
        let bytes = self.storage.encode(&value);
        // A lease etcd lost (wiped, or expired while we idled) is replaced once.
        for _ in 0..2 {
            let lease = self.leases.lease(store).await;
            match store.create_leased(&key, bytes.clone(), lease).await {
                Ok(Outcome::Applied { revision }) => {
                    debug!(op = "event", %key, reason = what.reason, rev = revision, "write");
                    self.written += 1;
                    if kubelet {
                        self.remember(uid, what, key, value, revision);
                    }
                    return;
                }
                Ok(Outcome::Conflict { .. }) => return,
                Err(_) => self.leases.reset(),
            }
        }
    }

    /// Updates the remembered event `what` repeats, if any; whether it did.
    async fn repeat(&mut self, store: &mut Store, uid: &str, what: &Occurrence<'_>) -> bool {
        let Some(list) = self.seen.get_mut(uid) else {
            return false;
        };
        let Some(i) = list
            .iter()
            .position(|s| s.reason == what.reason && s.message == what.message)
        else {
            return false;
        };
        let seen = list.swap_remove(i);
        let mut value = seen.value;
        event::repeat(&mut value, &now_rfc3339());
        let lease = self.leases.lease(store).await;
        let bytes = self.storage.encode(&value);
        match store.update_leased(&seen.key, bytes, seen.rev, lease).await {
            Ok(Outcome::Applied { revision }) => {
                debug!(op = "event", key = %seen.key, reason = what.reason, rev = revision, "repeat");
                self.written += 1;
                let again = Seen {
                    value,
                    rev: revision,
                    ..seen
                };
                self.seen.entry(uid.to_owned()).or_default().push(again);
                true
            }
            // Expired or changed elsewhere: a new event it is.
            Ok(Outcome::Conflict { .. }) => false,
            Err(_) => {
                self.leases.reset();
                false
            }
        }
    }

    fn remember(&mut self, uid: String, what: Occurrence<'_>, key: String, value: Value, rev: i64) {
        if self.seen.len() >= MAX_REMEMBERED_PODS && !self.seen.contains_key(&uid) {
            self.seen.clear();
        }
        self.seen.entry(uid).or_default().push(Seen {
            reason: what.reason,
            message: what.message,
            key,
            value,
            rev,
        });
    }
}

/// The containers of a pod: (name, image).
fn containers(pod: &Value) -> Vec<(String, String)> {
    pod["spec"]["containers"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| {
                    let field = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
                    (field("name"), field("image"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn node_of(pod: &Value) -> String {
    pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

impl Demo<'_> {
    async fn record(&mut self, store: &mut Store, what: Occurrence<'_>) {
        self.events.record(store, &mut self.rng, what).await;
    }

    /// A kubelet event about container `container` of `pod`.
    async fn container_event(
        &mut self,
        store: &mut Store,
        (pod, rev): (&Value, i64),
        container: &str,
        (reason, message): (&'static str, String),
        warning: bool,
    ) {
        let node = node_of(pod);
        let path = format!("spec.containers{{{container}}}");
        let what = Occurrence {
            involved: involved(pod, rev, Some(&path)),
            reason,
            message,
            warning,
            source: Source::Kubelet(&node),
        };
        self.record(store, what).await;
    }

    /// A controller's event about `obj`.
    pub(super) async fn controller_event(
        &mut self,
        store: &mut Store,
        (obj, rev): (&Value, i64),
        controller: &'static str,
        reason: &'static str,
        message: String,
    ) {
        let what = Occurrence {
            involved: involved(obj, rev, None),
            reason,
            message,
            warning: false,
            source: Source::Controller(controller),
        };
        self.record(store, what).await;
    }

    /// A new pod of an application: its ReplicaSet created it, the scheduler
    /// bound it, and its containers started if it runs.
    pub(super) async fn pod_created_events(
        &mut self,
        store: &mut Store,
        a: &App,
        pod: &Value,
        rev: i64,
    ) {
        if let Some(rs) = self
            .owned
            .get(&a.replica_set)
            .map(|t| (t.value.clone(), t.rev))
        {
            let message = format!("Created pod: {}", objects::name(pod));
            let rs = (&rs.0, rs.1);
            self.controller_event(
                store,
                rs,
                "replicaset-controller",
                "SuccessfulCreate",
                message,
            )
            .await;
        }
        self.pod_scheduled(store, pod, rev).await;
    }

    /// The scheduler bound `pod`; its containers started if it runs.
    pub(super) async fn pod_scheduled(&mut self, store: &mut Store, pod: &Value, rev: i64) {
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let message = format!(
            "Successfully assigned {ns}/{} to {}",
            objects::name(pod),
            node_of(pod)
        );
        let what = Occurrence {
            involved: involved(pod, rev, None),
            reason: "Scheduled",
            message,
            warning: false,
            source: Source::Scheduler,
        };
        self.record(store, what).await;
        if pod["status"]["phase"] == "Running" {
            self.containers_started(store, pod, rev).await;
        }
    }

    /// The kubelet pulled (found), created and started every container.
    pub(super) async fn containers_started(&mut self, store: &mut Store, pod: &Value, rev: i64) {
        for (name, image) in containers(pod) {
            let pulled = format!("Container image \"{image}\" already present on machine");
            for step in [
                ("Pulled", pulled),
                ("Created", format!("Created container: {name}")),
                ("Started", format!("Started container {name}")),
            ] {
                self.container_event(store, (pod, rev), &name, step, false)
                    .await;
            }
        }
    }

    /// The kubelet's readiness probe failed.
    pub(super) async fn readiness_failed(&mut self, store: &mut Store, pod: &Value, rev: i64) {
        for (name, _) in containers(pod) {
            let step = (
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503".to_owned(),
            );
            self.container_event(store, (pod, rev), &name, step, true)
                .await;
        }
    }

    /// The kubelet lost the pod's sandbox and is re-creating it.
    pub(super) async fn sandbox_changed(&mut self, store: &mut Store, pod: &Value, rev: i64) {
        let node = node_of(pod);
        let what = Occurrence {
            involved: involved(pod, rev, None),
            reason: "SandboxChanged",
            message: "Pod sandbox changed, it will be killed and re-created.".to_owned(),
            warning: false,
            source: Source::Kubelet(&node),
        };
        self.record(store, what).await;
    }

    /// The kubelet stopped the containers of a deleted pod.
    pub(super) async fn pod_deleted_events(&mut self, store: &mut Store, pod: &Value, rev: i64) {
        for (name, _) in containers(pod) {
            let step = ("Killing", format!("Stopping container {name}"));
            self.container_event(store, (pod, rev), &name, step, false)
                .await;
        }
        self.events.forget(objects::uid(pod));
    }
}
