//! The built-in resources watchd serves, with kube-apiserver's etcd layout.
//!
//! Built-in groups are omitted from etcd keys, and a few resources keep historical
//! directory names (`minions`, `services/specs`, `services/endpoints`, `controllers`,
//! `ingress`).

use super::{Origin, ResourceInfo};
use crate::codec::FieldSpec;

/// One row: group, version, plural, singular, kind, namespaced, etcd dir, short names, categories.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];

#[rustfmt::skip]
const TABLE: &[Row] = &[
    ("", "v1", "pods", "pod", "Pod", true, "pods", &["po"], ALL),
    ("", "v1", "nodes", "node", "Node", false, "minions", &["no"], NONE),
    ("", "v1", "namespaces", "namespace", "Namespace", false, "namespaces", &["ns"], NONE),
    ("", "v1", "configmaps", "configmap", "ConfigMap", true, "configmaps", &["cm"], NONE),
    ("", "v1", "secrets", "secret", "Secret", true, "secrets", NONE, NONE),
    ("", "v1", "services", "service", "Service", true, "services/specs", &["svc"], ALL),
    ("", "v1", "endpoints", "endpoints", "Endpoints", true, "services/endpoints", &["ep"], NONE),
    ("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, "serviceaccounts", &["sa"], NONE),
    ("", "v1", "events", "event", "Event", true, "events", &["ev"], NONE),
    ("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", false, "persistentvolumes", &["pv"], NONE),
    ("", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true, "persistentvolumeclaims", &["pvc"], NONE),
    ("", "v1", "limitranges", "limitrange", "LimitRange", true, "limitranges", &["limits"], NONE),
    ("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", true, "resourcequotas", &["quota"], NONE),
    ("", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController", true, "controllers", &["rc"], ALL),
    ("apps", "v1", "deployments", "deployment", "Deployment", true, "deployments", &["deploy"], ALL),
    ("apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, "replicasets", &["rs"], ALL),
    ("apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, "statefulsets", &["sts"], ALL),
    ("apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, "daemonsets", &["ds"], ALL),
    ("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", true, "controllerrevisions", NONE, NONE),
    ("batch", "v1", "jobs", "job", "Job", true, "jobs", NONE, ALL),
    ("batch", "v1", "cronjobs", "cronjob", "CronJob", true, "cronjobs", &["cj"], ALL),
    ("coordination.k8s.io", "v1", "leases", "lease", "Lease", true, "leases", NONE, NONE),
    ("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", true, "endpointslices", NONE, NONE),
    ("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", true, "ingress", &["ing"], NONE),
    ("networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", true, "networkpolicies", &["netpol"], NONE),
    ("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, "roles", NONE, NONE),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true, "rolebindings", NONE, NONE),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false, "clusterroles", NONE, NONE),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false, "clusterrolebindings", NONE, NONE),
    ("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, "poddisruptionbudgets", &["pdb"], NONE),
    ("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", false, "storageclasses", &["sc"], NONE),
];

/// Selectable fields of built-in resources beyond `metadata.name`/`metadata.namespace`,
/// as kube-apiserver defines them: (group, resource, [(selector name, JSON path,
/// value when absent)]).
type FieldRow = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str, &'static str)],
);

#[rustfmt::skip]
const FIELDS: &[FieldRow] = &[
    ("", "pods", &[
        ("spec.nodeName", "spec.nodeName", ""),
        ("spec.restartPolicy", "spec.restartPolicy", ""),
        ("spec.schedulerName", "spec.schedulerName", ""),
        ("spec.serviceAccountName", "spec.serviceAccountName", ""),
        ("spec.hostNetwork", "spec.hostNetwork", "false"),
        ("status.phase", "status.phase", ""),
        ("status.podIP", "status.podIP", ""),
        ("status.nominatedNodeName", "status.nominatedNodeName", ""),
    ]),
    ("", "events", &[
        ("involvedObject.kind", "involvedObject.kind", ""),
        ("involvedObject.namespace", "involvedObject.namespace", ""),
        ("involvedObject.name", "involvedObject.name", ""),
        ("involvedObject.uid", "involvedObject.uid", ""),
        ("involvedObject.apiVersion", "involvedObject.apiVersion", ""),
        ("involvedObject.resourceVersion", "involvedObject.resourceVersion", ""),
        ("involvedObject.fieldPath", "involvedObject.fieldPath", ""),
        ("reason", "reason", ""),
        ("reportingComponent", "reportingComponent", ""),
        ("source", "source.component", ""),
        ("type", "type", ""),
    ]),
    ("", "secrets", &[("type", "type", "")]),
    ("", "nodes", &[("spec.unschedulable", "spec.unschedulable", "false")]),
    ("", "namespaces", &[("status.phase", "status.phase", "")]),
    ("", "replicationcontrollers", &[("status.replicas", "status.replicas", "0")]),
    ("apps", "replicasets", &[("status.replicas", "status.replicas", "0")]),
    ("batch", "jobs", &[("status.successful", "status.succeeded", "0")]),
];

fn fields_of(group: &str, resource: &str) -> Vec<FieldSpec> {
    FIELDS
        .iter()
        .filter(|(g, r, _)| *g == group && *r == resource)
        .flat_map(|(_, _, f)| f.iter())
        .map(|(name, path, default)| FieldSpec {
            name: name.to_string(),
            path: path.to_string(),
            default: default.to_string(),
        })
        .collect()
}

/// The built-in resources, in the order discovery lists them.
pub fn builtin_resources() -> Vec<ResourceInfo> {
    TABLE
        .iter()
        .map(
            |&(group, version, resource, singular, kind, namespaced, dir, short, cats)| {
                ResourceInfo {
                    group: group.to_string(),
                    version: version.to_string(),
                    resource: resource.to_string(),
                    singular: singular.to_string(),
                    kind: kind.to_string(),
                    namespaced,
                    etcd_dir: dir.to_string(),
                    short_names: short.iter().map(|s| s.to_string()).collect(),
                    categories: cats.iter().map(|s| s.to_string()).collect(),
                    origin: Origin::Builtin,
                    fields: fields_of(group, resource),
                    printer_columns: Vec::new(),
                }
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn etcd_directory_exceptions_are_kept() {
        let all = builtin_resources();
        let dir = |r: &str| {
            all.iter()
                .find(|i| i.resource == r)
                .unwrap()
                .etcd_dir
                .clone()
        };
        assert_eq!(dir("nodes"), "minions");
        assert_eq!(dir("services"), "services/specs");
        assert_eq!(dir("endpoints"), "services/endpoints");
        assert_eq!(dir("replicationcontrollers"), "controllers");
        assert_eq!(dir("ingresses"), "ingress");
    }

    #[test]
    fn pods_are_selectable_by_node_and_events_by_source_component() {
        let all = builtin_resources();
        let find = |r: &str| all.iter().find(|i| i.resource == r).unwrap();
        assert!(find("pods").supports_field("spec.nodeName"));
        assert!(find("pods").supports_field("metadata.name"));
        assert!(!find("configmaps").supports_field("spec.nodeName"));
        let source = find("events")
            .fields
            .iter()
            .find(|f| f.name == "source")
            .unwrap();
        assert_eq!(source.path, "source.component");
    }

    #[test]
    fn directories_and_api_names_are_unique() {
        let all = builtin_resources();
        let dirs: HashSet<_> = all.iter().map(|r| r.etcd_dir.clone()).collect();
        let names: HashSet<_> = all.iter().map(|r| r.qualified_name()).collect();
        assert_eq!(dirs.len(), all.len());
        assert_eq!(names.len(), all.len());
    }
}
