//! What kube-controller-manager writes when pods change: the ReplicaSet and
//! Deployment status (replicaset and deployment controllers) and the
//! EndpointSlice and Endpoints of the application's Service (endpointslice
//! and endpoints controllers).
//!
//! Each is derived from the tracked pods and written only when it differs
//! from what etcd holds ([`Demo::sync`]), so an unchanged cluster costs no
//! writes and a re-run of the fill writes nothing.

use serde_json::Value;
use tracing::{debug, warn};

use super::{parse, Demo};
use crate::objects::service::{self, Backend, PodRef, ServicePort};
use crate::objects::workload::{self, ReplicaCounts};
use crate::objects::{self, now_rfc3339};
use crate::store::{Outcome, Store};

/// Attempts to write one derived object before leaving it to the next change.
const MAX_SYNC_ATTEMPTS: usize = 3;

/// A demo application in one namespace: its Deployment, ReplicaSet and
/// Service, and the keys of the objects kept in step with its pods.
#[derive(Clone, Debug)]
pub(super) struct App {
    /// Namespace.
    pub(super) ns: String,
    /// Application name (`web`, ...): the Deployment's and the Service's.
    pub(super) name: String,
    /// `pod-template-hash` of its ReplicaSet.
    pub(super) hash: String,
    /// Desired pods (`spec.replicas`).
    pub(super) replicas: usize,
    /// The ReplicaSet's controller reference, put on every new pod.
    pub(super) owner: Value,
    /// The Service's port (also the EndpointSlice's and Endpoints').
    pub(super) port: ServicePort,
    pub(super) deployment: String,
    pub(super) replica_set: String,
    pub(super) slice: String,
    pub(super) endpoints: String,
}

impl Demo<'_> {
    /// Index in `apps` of application `app` in `ns`.
    pub(super) fn app_index(&self, ns: &str, app: &str) -> Option<usize> {
        self.apps.iter().position(|a| a.ns == ns && a.name == app)
    }

    /// The tracked pods the application's Service selects (`app=<name>`).
    pub(super) fn app_pods<'s>(&'s self, a: &'s App) -> impl Iterator<Item = &'s Value> + 's {
        self.pods
            .iter()
            .filter(move |p| p.ns == a.ns && objects::label(&p.value, "app") == Some(&a.name))
            .map(|p| &p.value)
    }

    /// The Service's endpoints: its pods that have an IP, by name.
    fn backends(&self, a: &App) -> Vec<Backend> {
        let mut out: Vec<(String, Backend)> = self
            .app_pods(a)
            .filter_map(|pod| {
                let rt = objects::pod_runtime(pod);
                let ip = rt.pod_ip.filter(|_| rt.phase == "Running")?;
                let name = objects::name(pod).to_owned();
                let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
                let backend = Backend {
                    ip,
                    ready: rt.ready,
                    pod: Some(PodRef {
                        node: node.to_owned(),
                        name: name.clone(),
                        uid: objects::uid(pod).to_owned(),
                    }),
                };
                Some((name, backend))
            })
            .collect();
        out.sort_by(|x, y| x.0.cmp(&y.0));
        out.into_iter().map(|(_, b)| b).collect()
    }

    /// The ReplicaSet's pods (its selector also needs the template hash).
    fn replica_counts(&self, a: &App) -> ReplicaCounts {
        let mut counts = ReplicaCounts::default();
        for pod in self.app_pods(a) {
            if objects::label(pod, "pod-template-hash") == Some(&a.hash) {
                let rt = objects::pod_runtime(pod);
                counts.replicas += 1;
                counts.ready += u64::from(rt.ready && rt.phase == "Running" && rt.pod_ip.is_some());
            }
        }
        counts
    }

    /// Brings application `app` of `ns`'s derived objects in step with its pods.
    pub(super) async fn reconcile(&mut self, store: &mut Store, ns: &str, app: &str) {
        let Some(i) = self.app_index(ns, app) else {
            return;
        };
        let a = self.apps[i].clone();
        let counts = self.replica_counts(&a);
        let backends = self.backends(&a);
        let now = now_rfc3339();
        let rs_name = workload::replica_set_name(&a.name, &a.hash);
        self.sync(store, &a.replica_set, |rs| {
            workload::set_replica_set_status(rs, counts)
        })
        .await;
        self.sync(store, &a.deployment, |d| {
            workload::set_deployment_status(d, counts, &rs_name, &now);
        })
        .await;
        self.sync(store, &a.slice, |s| {
            service::set_slice_endpoints(s, &backends, &now)
        })
        .await;
        self.sync(store, &a.endpoints, |e| {
            service::set_endpoints_subsets(e, &backends, &[a.port], &now);
        })
        .await;
    }

    /// Brings the owned object at `key` to `apply(current)`, as a controller
    /// does: one conditional update when it differs; after a conflict it
    /// re-reads and re-applies (at most [`MAX_SYNC_ATTEMPTS`] writes); an
    /// object deleted under us is put back as it should be, same uid (what
    /// refers to it stays valid). Returns whether it wrote.
    pub(super) async fn sync(
        &mut self,
        store: &mut Store,
        key: &str,
        apply: impl Fn(&mut Value),
    ) -> bool {
        for _ in 0..MAX_SYNC_ATTEMPTS {
            let Some(t) = self.owned.get(key) else {
                return false;
            };
            let mut value = t.value.clone();
            apply(&mut value);
            if value == t.value {
                return false;
            }
            let bytes = self.cfg.storage.encode(&value);
            let outcome = match store.update(key, bytes.clone(), t.rev).await {
                Outcome::Conflict { current: None } => {
                    warn!(%key, "object vanished from etcd; re-creating");
                    store.create(key, bytes).await
                }
                other => other,
            };
            match outcome {
                Outcome::Applied { revision } => {
                    debug!(op = "sync", %key, rev = revision, "write");
                    if let Some(t) = self.owned.get_mut(key) {
                        t.value = value;
                        t.rev = revision;
                    }
                    return true;
                }
                Outcome::Conflict { current: Some(cur) } => match parse(&cur) {
                    Some(v) => {
                        debug!(%key, rev = cur.mod_revision, "object changed elsewhere; re-read");
                        if let Some(t) = self.owned.get_mut(key) {
                            t.value = v;
                            t.rev = cur.mod_revision;
                        }
                    }
                    None => {
                        warn!(%key, "object is no longer readable; no longer managing it");
                        self.owned.remove(key);
                        return false;
                    }
                },
                Outcome::Conflict { current: None } => return false,
            }
        }
        false
    }
}
