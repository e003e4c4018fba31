//! The fill: everything a small cluster holds, written in the order its
//! components would write it, each object adopted when it already exists.

use serde_json::Value;
use tracing::debug;

use super::controllers::App;
use super::{configmap_data, configmap_name, demo_namespace_names, parse, run_seed, Demo, Tracked};
use super::{APPS, SYSTEM_NAMESPACES};
use crate::objects::service::{self, ServicePort};
use crate::objects::{self, account, custom, kube_proxy, lease, workload, Rng};
use crate::objects::{controller_ref_to, CONFIGMAPS, CRDS, DAEMONSETS, DEPLOYMENTS, ENDPOINTS};
use crate::objects::{ENDPOINTSLICES, LEASES, NAMESPACES, NODES, PODS, REPLICASETS};
use crate::objects::{SECRETS, SERVICEACCOUNTS, SERVICES};
use crate::rng::fnv1a;
use crate::store::{Current, Store};

/// Ordinal of the first application Service's cluster IP (`10.96.0.100`);
/// 1 is the `kubernetes` Service's.
const FIRST_APP_SERVICE_IP: u32 = 100;

/// Replicas of the `j`-th application when a namespace has `pods` pods:
/// they are dealt round-robin over [`APPS`].
pub(super) fn app_replicas(j: usize, pods: usize) -> usize {
    pods / APPS.len() + usize::from(j < pods % APPS.len())
}

impl Demo<'_> {
    pub(super) async fn fill(&mut self, store: &mut Store) {
        let revision = store.revision().await;
        self.rng = Rng::new(run_seed(self.cfg.seed, revision));
        debug!(revision, "connected to etcd");
        let demo_namespaces = demo_namespace_names(self.cfg.namespaces);
        self.fill_cluster(store, &demo_namespaces).await;
        self.fill_kube_proxy(store).await;
        for (i, ns) in demo_namespaces.iter().enumerate() {
            self.fill_namespace(store, ns, i).await;
        }
    }

    /// `len` name characters that depend only on `seed` and `what`, for names
    /// a re-run must find again.
    fn stable_token(&self, what: &str, len: usize) -> String {
        Rng::new(self.cfg.seed ^ fnv1a(what)).name_token(len)
    }

    /// The `pod-template-hash` of `app`'s ReplicaSet in `ns`; stable for a
    /// given seed so that re-runs keep adding pods to the same ReplicaSet.
    fn template_hash(&self, ns: &str, app: &str) -> String {
        let mut rng = Rng::new(self.cfg.seed ^ fnv1a(&format!("{ns}/{app}")));
        objects::pod_template_hash(&mut rng)
    }

    /// Creates `value` at `resource/[ns/]name` unless it exists.
    async fn ensure_at(
        &mut self,
        store: &mut Store,
        resource: &str,
        ns: Option<&str>,
        value: Value,
    ) -> Option<(Tracked, bool)> {
        let key = self.key(resource, ns, objects::name(&value));
        self.ensure(store, key, ns.unwrap_or_default(), value).await
    }

    /// Like [`Demo::ensure_at`], keeping the object for later writes.
    async fn ensure_owned_at(
        &mut self,
        store: &mut Store,
        resource: &str,
        ns: Option<&str>,
        value: Value,
    ) -> Option<(Value, i64, bool)> {
        let key = self.key(resource, ns, objects::name(&value));
        self.ensure_owned(store, key, ns.unwrap_or_default(), value)
            .await
    }

    /// Cluster-wide objects: namespaces, nodes and Leases, the system
    /// namespaces' ServiceAccounts, the `kubernetes` Service, the CRDs.
    async fn fill_cluster(&mut self, store: &mut Store, demo_namespaces: &[String]) {
        let system = SYSTEM_NAMESPACES.iter().map(|s| (*s).to_owned());
        for name in system.chain(demo_namespaces.iter().cloned()) {
            let obj = objects::namespace(&name, &mut self.rng);
            self.ensure_at(store, NAMESPACES, None, obj).await;
        }
        for ns in SYSTEM_NAMESPACES {
            let sa = account::service_account(ns, "default", &mut self.rng);
            self.ensure_at(store, SERVICEACCOUNTS, Some(ns), sa).await;
        }
        for name in self.nodes.clone() {
            let obj = objects::node(&name, &mut self.rng);
            let Some((node, _)) = self.ensure_at(store, NODES, None, obj).await else {
                continue;
            };
            let obj = lease::node_lease(&node.value, &mut self.rng);
            self.ensure_lease(store, lease::NODE_LEASE_NAMESPACE, obj)
                .await;
        }
        for component in lease::LEADER_ELECTED {
            let obj = lease::leader_lease(component, &mut self.rng);
            self.ensure_lease(store, "kube-system", obj).await;
        }
        self.fill_kubernetes_service(store).await;
        for crd in [
            custom::widget_crd(&mut self.rng),
            custom::widget_class_crd(&mut self.rng),
        ] {
            self.ensure_at(store, CRDS, None, crd).await;
        }
        for class in custom::CLASSES {
            let obj = custom::widget_class(class, &mut self.rng);
            self.ensure_at(store, custom::WIDGET_CLASSES, None, obj)
                .await;
        }
    }

    /// Creates (or adopts) a Lease and adds it to the renewal rotation.
    async fn ensure_lease(&mut self, store: &mut Store, ns: &str, obj: Value) {
        let key = self.key(LEASES, Some(ns), objects::name(&obj));
        if self
            .ensure_owned(store, key.clone(), ns, obj)
            .await
            .is_some()
        {
            self.leases.push(key);
        }
    }

    /// The `kubernetes` Service and its endpoints (the apiserver).
    async fn fill_kubernetes_service(&mut self, store: &mut Store) {
        let obj = service::kubernetes_service(&mut self.rng);
        let Some((svc, _)) = self.ensure_at(store, SERVICES, Some("default"), obj).await else {
            return;
        };
        let ports = [service::kubernetes_port()];
        let slice = service::endpoint_slice(&svc.value, "kubernetes", &ports, &mut self.rng);
        let endpoints = service::endpoints(&svc.value, &mut self.rng);
        self.ensure_owned_at(store, ENDPOINTSLICES, Some("default"), slice)
            .await;
        self.ensure_owned_at(store, ENDPOINTS, Some("default"), endpoints)
            .await;
        let backends = service::apiserver_backends();
        let now = objects::now_rfc3339();
        let key = self.key(ENDPOINTSLICES, Some("default"), "kubernetes");
        self.sync(store, &key, |s| {
            service::set_slice_endpoints(s, &backends, &now)
        })
        .await;
        let key = self.key(ENDPOINTS, Some("default"), "kubernetes");
        self.sync(store, &key, |e| {
            service::set_endpoints_subsets(e, &backends, &ports, &now)
        })
        .await;
    }

    /// kube-proxy: its account and ConfigMap, the DaemonSet and a pod per node.
    async fn fill_kube_proxy(&mut self, store: &mut Store) {
        let ns = kube_proxy::NAMESPACE;
        let sa = account::service_account(ns, kube_proxy::NAME, &mut self.rng);
        self.ensure_at(store, SERVICEACCOUNTS, Some(ns), sa).await;
        let cm = kube_proxy::config_map(&mut self.rng);
        self.ensure_at(store, CONFIGMAPS, Some(ns), cm).await;
        let obj = kube_proxy::daemon_set(&mut self.rng);
        let Some((ds, ds_rev, _)) = self.ensure_owned_at(store, DAEMONSETS, Some(ns), obj).await
        else {
            return;
        };
        let owner = controller_ref_to(&ds);
        for node in self.nodes.clone() {
            let suffix = self.stable_token(&format!("kube-proxy/{node}"), 5);
            let name = format!("{}-{suffix}", kube_proxy::NAME);
            let pod = kube_proxy::pod(&name, &node, owner.clone(), &mut self.rng);
            if let Some((t, true)) = self.ensure_at(store, PODS, Some(ns), pod).await {
                let message = format!("Created pod: {name}");
                let ds = (&ds, ds_rev);
                self.controller_event(
                    store,
                    ds,
                    "daemonset-controller",
                    "SuccessfulCreate",
                    message,
                )
                .await;
                self.pod_scheduled(store, &t.value, t.rev).await;
            }
        }
        let n = self.nodes.len() as u64;
        let key = self.key(DAEMONSETS, Some(ns), kube_proxy::NAME);
        self.sync(store, &key, |d| kube_proxy::set_daemon_set_status(d, n, n))
            .await;
    }

    /// A demo namespace: its account and Secrets, the applications, config
    /// maps and widgets. `ordinal` (from 0) numbers its Services' IPs.
    async fn fill_namespace(&mut self, store: &mut Store, ns: &str, ordinal: usize) {
        let sa = account::service_account(ns, "default", &mut self.rng);
        if let Some((sa, _)) = self.ensure_at(store, SERVICEACCOUNTS, Some(ns), sa).await {
            let name = format!(
                "default-token-{}",
                self.stable_token(&format!("token/{ns}"), 5)
            );
            let secret = account::token_secret(&sa.value, &name, &mut self.rng);
            self.ensure_at(store, SECRETS, Some(ns), secret).await;
        }
        let secret = account::opaque_secret(ns, "app-credentials", &mut self.rng);
        self.ensure_at(store, SECRETS, Some(ns), secret).await;
        self.adopt_pods(store, ns).await;
        for j in 0..APPS.len() {
            self.fill_app(store, ns, ordinal, j).await;
        }
        for i in 1..=self.cfg.configmaps_per_namespace {
            let name = configmap_name(i);
            let app = name.split('-').next().unwrap_or("web").to_owned();
            let data = configmap_data(&app, 1);
            let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let obj = objects::configmap(ns, &name, &[("app", &app)], &data, &mut self.rng);
            if let Some((t, _)) = self.ensure_at(store, CONFIGMAPS, Some(ns), obj).await {
                self.configmaps.push(t);
            }
        }
        for app in APPS {
            let obj = custom::widget(ns, app, &mut self.rng);
            if let Some((t, _)) = self.ensure_at(store, custom::WIDGETS, Some(ns), obj).await {
                self.widgets.push(t);
            }
        }
    }

    /// Tracks the demo pods already in `ns` (from an earlier run).
    async fn adopt_pods(&mut self, store: &mut Store, ns: &str) {
        let prefix = self.key(PODS, Some(ns), "");
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
                        ns: ns.to_owned(),
                        value: v,
                        rev: cur.mod_revision,
                    });
                }
                _ => debug!(key = %entry.key, "ignoring foreign pod"),
            }
        }
    }

    /// The `j`-th application of `ns`: Deployment, ReplicaSet, Service,
    /// EndpointSlice, Endpoints, then the pods it lacks, then its status.
    async fn fill_app(&mut self, store: &mut Store, ns: &str, ordinal: usize, j: usize) {
        let app = APPS[j];
        let replicas = app_replicas(j, self.cfg.pods_per_namespace);
        let obj = workload::deployment(ns, app, replicas as u64, &mut self.rng);
        let Some((deploy, deploy_rev, _)) = self
            .ensure_owned_at(store, DEPLOYMENTS, Some(ns), obj)
            .await
        else {
            return;
        };
        let hash = self.template_hash(ns, app);
        let owner = controller_ref_to(&deploy);
        let obj = workload::replica_set(ns, app, &hash, replicas as u64, owner, &mut self.rng);
        let Some((rs, _, rs_created)) = self
            .ensure_owned_at(store, REPLICASETS, Some(ns), obj)
            .await
        else {
            return;
        };
        if rs_created {
            let message = format!(
                "Scaled up replica set {} from 0 to {replicas}",
                objects::name(&rs)
            );
            let deploy = (&deploy, deploy_rev);
            self.controller_event(
                store,
                deploy,
                "deployment-controller",
                "ScalingReplicaSet",
                message,
            )
            .await;
        }
        let Some(port) = self
            .fill_service(store, ns, app, ordinal * APPS.len() + j)
            .await
        else {
            return;
        };
        self.apps.push(App {
            ns: ns.to_owned(),
            name: app.to_owned(),
            hash,
            replicas,
            owner: controller_ref_to(&rs),
            port,
            deployment: self.key(DEPLOYMENTS, Some(ns), app),
            replica_set: self.key(REPLICASETS, Some(ns), objects::name(&rs)),
            slice: self.key(ENDPOINTSLICES, Some(ns), &self.slice_name(ns, app)),
            endpoints: self.key(ENDPOINTS, Some(ns), app),
        });
        let index = self.apps.len() - 1;
        let existing = self.app_pods(&self.apps[index]).count();
        for _ in existing..replicas {
            let node = self.nodes[self.next_node % self.nodes.len()].clone();
            self.next_node += 1;
            let running = !self.rng.chance(0.1);
            self.create_pod(store, index, &node, running).await;
        }
        self.reconcile(store, ns, app).await;
    }

    fn slice_name(&self, ns: &str, app: &str) -> String {
        format!(
            "{app}-{}",
            self.stable_token(&format!("endpointslice/{ns}/{app}"), 5)
        )
    }

    /// `app`'s Service (the `n`-th application Service of the cluster) with
    /// its EndpointSlice and Endpoints, empty until the pods are there.
    async fn fill_service(
        &mut self,
        store: &mut Store,
        ns: &str,
        app: &str,
        n: usize,
    ) -> Option<ServicePort> {
        let port = service::app_service_port(app);
        let ip = service::cluster_ip(FIRST_APP_SERVICE_IP + n as u32);
        let obj = service::service(ns, app, &ip, port, &mut self.rng);
        let (svc, _) = self.ensure_at(store, SERVICES, Some(ns), obj).await?;
        let slice = service::endpoint_slice(
            &svc.value,
            &self.slice_name(ns, app),
            &[port],
            &mut self.rng,
        );
        self.ensure_owned_at(store, ENDPOINTSLICES, Some(ns), slice)
            .await?;
        let endpoints = service::endpoints(&svc.value, &mut self.rng);
        self.ensure_owned_at(store, ENDPOINTS, Some(ns), endpoints)
            .await?;
        Some(port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_dealt_round_robin() {
        let dealt = |pods| {
            (0..APPS.len())
                .map(|j| app_replicas(j, pods))
                .collect::<Vec<_>>()
        };
        assert_eq!(dealt(8), [3, 3, 2]);
        assert_eq!(dealt(5), [2, 2, 1]);
        assert_eq!(dealt(1), [1, 0, 0]);
        assert_eq!(dealt(0), [0, 0, 0]);
        assert_eq!(dealt(9), [3, 3, 3]);
    }
}
