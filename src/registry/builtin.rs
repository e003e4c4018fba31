//! The built-in resources watchd serves: every resource kube-apiserver 1.34 keeps in etcd
//! and serves by default, in every group/version it serves by default, as data.
//!
//! Each row is one served (group, version, resource) with kube-apiserver's etcd layout:
//! built-in groups are left out of keys, and a few resources keep historical directory
//! names (`minions`, `services/specs`, `services/endpoints`, `controllers`, `ingress`);
//! the aggregated-in servers prefix their group (`apiextensions.k8s.io/…`,
//! `apiregistration.k8s.io/…`); core and events.k8s.io events share `events`. Where
//! kube-apiserver 1.34 stores another version than it serves, the row says which, and
//! [`conversion_of`] how watchd converts.
//!
//! Left out: autoscaling/v1 HorizontalPodAutoscalers (served by kube-apiserver from the
//! v2 storage through a lossy conversion into annotations; watchd serves autoscaling/v2
//! only), and everything alpha or beta, which 1.34 does not serve by default.

use super::{FieldPolicy, Origin, ResourceInfo};
use crate::codec::convert::Conversion;
use crate::codec::FieldSpec;

/// One served resource: group, version, plural, kind, namespaced, etcd directory, the
/// apiVersion kube-apiserver 1.34 stores it in (empty: the served one), short names,
/// categories. The singular name is the kind in lower case, for every built-in.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

const NS: bool = true;
const CLUSTER: bool = false;
const SAME: &str = "";
const ALL: &[&str] = &["all"];
const API_EXT: &[&str] = &["api-extensions"];
const NONE: &[&str] = &[];

/// kube-apiserver 1.34's default resources, in its discovery order: the core group, then
/// the groups as `/apis` lists them; resources alphabetically within a version.
#[rustfmt::skip]
pub const TABLE: &[Row] = &[
    ("", "v1", "configmaps", "ConfigMap", NS, "configmaps", SAME, &["cm"], NONE),
    ("", "v1", "endpoints", "Endpoints", NS, "services/endpoints", SAME, &["ep"], NONE),
    ("", "v1", "events", "Event", NS, "events", SAME, &["ev"], NONE),
    ("", "v1", "limitranges", "LimitRange", NS, "limitranges", SAME, &["limits"], NONE),
    ("", "v1", "namespaces", "Namespace", CLUSTER, "namespaces", SAME, &["ns"], NONE),
    ("", "v1", "nodes", "Node", CLUSTER, "minions", SAME, &["no"], NONE),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", NS, "persistentvolumeclaims", SAME, &["pvc"], NONE),
    ("", "v1", "persistentvolumes", "PersistentVolume", CLUSTER, "persistentvolumes", SAME, &["pv"], NONE),
    ("", "v1", "pods", "Pod", NS, "pods", SAME, &["po"], ALL),
    ("", "v1", "podtemplates", "PodTemplate", NS, "podtemplates", SAME, NONE, NONE),
    ("", "v1", "replicationcontrollers", "ReplicationController", NS, "controllers", SAME, &["rc"], ALL),
    ("", "v1", "resourcequotas", "ResourceQuota", NS, "resourcequotas", SAME, &["quota"], NONE),
    ("", "v1", "secrets", "Secret", NS, "secrets", SAME, NONE, NONE),
    ("", "v1", "serviceaccounts", "ServiceAccount", NS, "serviceaccounts", SAME, &["sa"], NONE),
    ("", "v1", "services", "Service", NS, "services/specs", SAME, &["svc"], ALL),
    ("apiregistration.k8s.io", "v1", "apiservices", "APIService", CLUSTER, "apiregistration.k8s.io/apiservices", SAME, NONE, API_EXT),
    ("apps", "v1", "controllerrevisions", "ControllerRevision", NS, "controllerrevisions", SAME, NONE, NONE),
    ("apps", "v1", "daemonsets", "DaemonSet", NS, "daemonsets", SAME, &["ds"], ALL),
    ("apps", "v1", "deployments", "Deployment", NS, "deployments", SAME, &["deploy"], ALL),
    ("apps", "v1", "replicasets", "ReplicaSet", NS, "replicasets", SAME, &["rs"], ALL),
    ("apps", "v1", "statefulsets", "StatefulSet", NS, "statefulsets", SAME, &["sts"], ALL),
    ("events.k8s.io", "v1", "events", "Event", NS, "events", "v1", &["ev"], NONE),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", NS, "horizontalpodautoscalers", SAME, &["hpa"], ALL),
    ("batch", "v1", "cronjobs", "CronJob", NS, "cronjobs", SAME, &["cj"], ALL),
    ("batch", "v1", "jobs", "Job", NS, "jobs", SAME, NONE, ALL),
    ("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", CLUSTER, "certificatesigningrequests", SAME, &["csr"], NONE),
    ("networking.k8s.io", "v1", "ingressclasses", "IngressClass", CLUSTER, "ingressclasses", SAME, NONE, NONE),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", NS, "ingress", SAME, &["ing"], NONE),
    ("networking.k8s.io", "v1", "ipaddresses", "IPAddress", CLUSTER, "ipaddresses", SAME, &["ip"], NONE),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", NS, "networkpolicies", SAME, &["netpol"], NONE),
    ("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", CLUSTER, "servicecidrs", SAME, NONE, NONE),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", NS, "poddisruptionbudgets", SAME, &["pdb"], NONE),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", CLUSTER, "clusterrolebindings", SAME, NONE, NONE),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", CLUSTER, "clusterroles", SAME, NONE, NONE),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", NS, "rolebindings", SAME, NONE, NONE),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", NS, "roles", SAME, NONE, NONE),
    ("storage.k8s.io", "v1", "csidrivers", "CSIDriver", CLUSTER, "csidrivers", SAME, NONE, NONE),
    ("storage.k8s.io", "v1", "csinodes", "CSINode", CLUSTER, "csinodes", SAME, NONE, NONE),
    ("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", NS, "csistoragecapacities", SAME, NONE, NONE),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", CLUSTER, "storageclasses", SAME, &["sc"], NONE),
    ("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", CLUSTER, "volumeattachments", SAME, NONE, NONE),
    ("storage.k8s.io", "v1", "volumeattributesclasses", "VolumeAttributesClass", CLUSTER, "volumeattributesclasses", SAME, &["vac"], NONE),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", CLUSTER, "mutatingwebhookconfigurations", SAME, NONE, API_EXT),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", CLUSTER, "validatingadmissionpolicies", SAME, NONE, API_EXT),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", CLUSTER, "validatingadmissionpolicybindings", SAME, NONE, API_EXT),
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", CLUSTER, "validatingwebhookconfigurations", SAME, NONE, API_EXT),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", CLUSTER, "apiextensions.k8s.io/customresourcedefinitions", "apiextensions.k8s.io/v1beta1", &["crd", "crds"], API_EXT),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", CLUSTER, "priorityclasses", SAME, &["pc"], NONE),
    ("coordination.k8s.io", "v1", "leases", "Lease", NS, "leases", SAME, NONE, NONE),
    ("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", CLUSTER, "runtimeclasses", SAME, NONE, NONE),
    ("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", NS, "endpointslices", SAME, NONE, NONE),
    ("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", CLUSTER, "flowschemas", SAME, NONE, NONE),
    ("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", CLUSTER, "prioritylevelconfigurations", SAME, NONE, NONE),
    ("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", CLUSTER, "deviceclasses", "resource.k8s.io/v1beta2", NONE, NONE),
    ("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", NS, "resourceclaims", "resource.k8s.io/v1beta2", NONE, NONE),
    ("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", NS, "resourceclaimtemplates", "resource.k8s.io/v1beta2", NONE, NONE),
    ("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", CLUSTER, "resourceslices", "resource.k8s.io/v1beta2", NONE, NONE),
];

/// How watchd turns what kube-apiserver stores for (group, resource) into the served
/// version, when they differ.
pub fn conversion_of(group: &str, resource: &str) -> Option<Conversion> {
    match (group, resource) {
        ("resource.k8s.io", _) => Some(Conversion::Relabel),
        ("events.k8s.io", "events") => Some(Conversion::EventsV1),
        ("apiextensions.k8s.io", "customresourcedefinitions") => Some(Conversion::CrdV1),
        _ => None,
    }
}

/// The message of kube-apiserver's default field label conversion (a kind that
/// registers none accepts only `metadata.name` and `metadata.namespace`).
const META_ONLY: &str =
    "\"{}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"";
/// The message of most kinds' own field label conversion functions.
const NOT_SUPPORTED: &str = "field label not supported: {}";

/// Selectable fields beyond `metadata.name`/`metadata.namespace`, as kube-apiserver 1.34's
/// field label conversion functions accept them and its registries' selectable field sets
/// read them: (group, resource, whether `metadata.namespace` is accepted, the message for
/// any other label, aliases, [(label, JSON path, fallback path, value when absent)]).
/// An empty path: accepted, but never set (kube-apiserver's set lacks it). Resources not
/// listed accept only `metadata.name` and `metadata.namespace` ([`META_ONLY`]).
type FieldRow = (
    &'static str,
    &'static str,
    bool,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str, &'static str, &'static str)],
);

#[rustfmt::skip]
const FIELDS: &[FieldRow] = &[
    ("", "pods", true, NOT_SUPPORTED, &[("spec.host", "spec.nodeName")], &[
        ("spec.nodeName", "spec.nodeName", "", ""),
        ("spec.restartPolicy", "spec.restartPolicy", "", ""),
        ("spec.schedulerName", "spec.schedulerName", "", ""),
        ("spec.serviceAccountName", "spec.serviceAccountName", "", ""),
        ("spec.hostNetwork", "spec.hostNetwork", "", "false"),
        ("status.phase", "status.phase", "", ""),
        ("status.podIP", "status.podIP", "", ""),
        ("status.podIPs", "", "", ""),
        ("status.nominatedNodeName", "status.nominatedNodeName", "", ""),
    ]),
    ("", "events", true, NOT_SUPPORTED, &[], &[
        ("involvedObject.kind", "involvedObject.kind", "", ""),
        ("involvedObject.namespace", "involvedObject.namespace", "", ""),
        ("involvedObject.name", "involvedObject.name", "", ""),
        ("involvedObject.uid", "involvedObject.uid", "", ""),
        ("involvedObject.apiVersion", "involvedObject.apiVersion", "", ""),
        ("involvedObject.resourceVersion", "involvedObject.resourceVersion", "", ""),
        ("involvedObject.fieldPath", "involvedObject.fieldPath", "", ""),
        ("reason", "reason", "", ""),
        ("reportingComponent", "reportingComponent", "", ""),
        ("source", "source.component", "reportingComponent", ""),
        ("type", "type", "", ""),
    ]),
    ("events.k8s.io", "events", true, NOT_SUPPORTED, &[], &[
        ("regarding.kind", "regarding.kind", "", ""),
        ("regarding.namespace", "regarding.namespace", "", ""),
        ("regarding.name", "regarding.name", "", ""),
        ("regarding.uid", "regarding.uid", "", ""),
        ("regarding.apiVersion", "regarding.apiVersion", "", ""),
        ("regarding.resourceVersion", "regarding.resourceVersion", "", ""),
        ("regarding.fieldPath", "regarding.fieldPath", "", ""),
        ("reason", "reason", "", ""),
        ("reportingController", "reportingController", "", ""),
        ("source", "deprecatedSource.component", "reportingController", ""),
        ("type", "type", "", ""),
    ]),
    ("", "namespaces", false, NOT_SUPPORTED, &[], &[("status.phase", "status.phase", "", "")]),
    ("", "nodes", false, NOT_SUPPORTED, &[], &[("spec.unschedulable", "spec.unschedulable", "", "false")]),
    ("", "replicationcontrollers", true, NOT_SUPPORTED, &[], &[("status.replicas", "status.replicas", "", "0")]),
    ("", "secrets", true, NOT_SUPPORTED, &[], &[("type", "type", "", "")]),
    ("", "services", true, NOT_SUPPORTED, &[], &[
        ("spec.clusterIP", "spec.clusterIP", "", ""),
        ("spec.type", "spec.type", "", ""),
    ]),
    ("batch", "jobs", true, "field label \"{}\" not supported for batchv1.Job", &[], &[
        ("status.successful", "status.succeeded", "", "0"),
    ]),
    ("certificates.k8s.io", "certificatesigningrequests", false, NOT_SUPPORTED, &[], &[
        ("spec.signerName", "spec.signerName", "", ""),
    ]),
    ("resource.k8s.io", "resourceslices", false, "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {}", &[], &[
        ("spec.nodeName", "spec.nodeName", "", ""),
        ("spec.driver", "spec.driver", "", ""),
    ]),
];

fn fields_of(group: &str, resource: &str) -> (Vec<FieldSpec>, FieldPolicy) {
    let Some((_, _, namespace, unsupported, aliases, fields)) = FIELDS
        .iter()
        .find(|(g, r, ..)| *g == group && *r == resource)
    else {
        return (Vec::new(), FieldPolicy::meta_only(META_ONLY));
    };
    let specs = fields
        .iter()
        .map(|(name, path, fallback, default)| FieldSpec {
            name: name.to_string(),
            path: path.to_string(),
            fallback: fallback.to_string(),
            default: default.to_string(),
        })
        .collect();
    let policy = FieldPolicy {
        namespace: *namespace,
        unsupported,
        aliases,
    };
    (specs, policy)
}

/// One built-in resource from a row of [`TABLE`].
pub fn info_of(row: &Row) -> ResourceInfo {
    let &(group, version, resource, kind, namespaced, dir, stored, short, cats) = row;
    let (fields, field_policy) = fields_of(group, resource);
    let served = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    ResourceInfo {
        group: group.to_string(),
        version: version.to_string(),
        resource: resource.to_string(),
        singular: kind.to_ascii_lowercase(),
        kind: kind.to_string(),
        namespaced,
        etcd_dir: dir.to_string(),
        storage_version: if stored.is_empty() {
            served
        } else {
            stored.to_string()
        },
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: cats.iter().map(|s| s.to_string()).collect(),
        origin: Origin::Builtin,
        fields,
        field_policy,
        printer_columns: Vec::new(),
        schema: Default::default(),
        indexed_field: None,
    }
}

/// The built-in resources, in the order discovery lists them.
pub fn builtin_resources() -> Vec<ResourceInfo> {
    TABLE.iter().map(info_of).collect()
}

/// The built-in resource `resource` of `group`, for tests.
#[cfg(test)]
pub fn find(group: &str, resource: &str) -> ResourceInfo {
    builtin_resources()
        .into_iter()
        .find(|i| i.group == group && i.resource == resource)
        .unwrap_or_else(|| panic!("{resource}.{group} is served"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::pbjson;
    use std::collections::HashSet;

    /// One test per row: the stored kind has a schema and object metadata, the served
    /// one too, and a stored version that differs comes with a conversion that is
    /// proven (for a relabel, the two versions are the same type field for field).
    #[test]
    fn every_row_is_transcodable_and_its_storage_version_convertible() {
        for info in builtin_resources() {
            let name = info.qualified_name();
            let served = info.api_version();
            assert!(
                pbjson::is_known(&served, &info.kind),
                "{name}: no schema for {served}"
            );
            assert!(
                pbjson::has_object_meta(&info.storage_version, &info.kind),
                "{name}"
            );
            match (
                info.storage_version == served,
                conversion_of(&info.group, &info.resource),
            ) {
                (true, None) => {}
                (false, Some(Conversion::Relabel)) => assert!(
                    pbjson::same_type(&info.kind, &info.storage_version, &served),
                    "{name}: {} and {served} differ",
                    info.storage_version
                ),
                (false, Some(Conversion::EventsV1)) => assert_eq!(name, "events.events.k8s.io"),
                (false, Some(Conversion::CrdV1)) => {
                    assert_eq!(name, "customresourcedefinitions.apiextensions.k8s.io")
                }
                other => panic!("{name}: stored as {}, {other:?}", info.storage_version),
            }
            assert_eq!(info.singular, info.kind.to_ascii_lowercase());
            assert!(!info.etcd_dir.starts_with('/') && !info.etcd_dir.ends_with('/'));
        }
    }

    #[test]
    fn etcd_directories_are_kube_apiservers() {
        let dir = |g: &str, r: &str| find(g, r).etcd_dir;
        assert_eq!(dir("", "nodes"), "minions");
        assert_eq!(dir("", "services"), "services/specs");
        assert_eq!(dir("", "endpoints"), "services/endpoints");
        assert_eq!(dir("", "replicationcontrollers"), "controllers");
        assert_eq!(dir("networking.k8s.io", "ingresses"), "ingress");
        assert_eq!(dir("events.k8s.io", "events"), "events");
        assert_eq!(
            dir("apiextensions.k8s.io", "customresourcedefinitions"),
            "apiextensions.k8s.io/customresourcedefinitions"
        );
        assert_eq!(
            dir("apiregistration.k8s.io", "apiservices"),
            "apiregistration.k8s.io/apiservices"
        );
    }

    #[test]
    fn api_names_are_unique_and_only_events_share_a_directory() {
        let all = builtin_resources();
        let names: HashSet<_> = all
            .iter()
            .map(|r| (r.api_version(), r.resource.clone()))
            .collect();
        assert_eq!(names.len(), all.len());
        let mut dirs: Vec<_> = all.iter().map(|r| r.etcd_dir.as_str()).collect();
        dirs.sort_unstable();
        let shared: Vec<_> = dirs
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        assert_eq!(shared, ["events"]);
        assert_eq!(all.len(), 57);
    }

    #[test]
    fn field_selectors_are_kube_apiservers() {
        let pods = find("", "pods");
        assert_eq!(
            pods.convert_field_label("spec.host"),
            Ok("spec.nodeName".into())
        );
        assert_eq!(
            pods.convert_field_label("metadata.namespace"),
            Ok("metadata.namespace".into())
        );
        assert_eq!(
            pods.convert_field_label("spec.bogus")
                .map_err(|e| e.to_string()),
            Err("field label not supported: spec.bogus".into())
        );
        let nodes = find("", "nodes");
        assert!(nodes.convert_field_label("metadata.namespace").is_err());
        assert!(nodes.convert_field_label("spec.unschedulable").is_ok());
        let rs = find("apps", "replicasets");
        assert_eq!(
            rs.convert_field_label("status.replicas").map_err(|e| e.to_string()),
            Err("\"status.replicas\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".into())
        );
        assert!(find("storage.k8s.io", "storageclasses")
            .convert_field_label("metadata.namespace")
            .is_ok());
        assert_eq!(
            find("batch", "jobs")
                .convert_field_label("x")
                .map_err(|e| e.to_string()),
            Err("field label \"x\" not supported for batchv1.Job".into())
        );
        let slices = find("resource.k8s.io", "resourceslices");
        assert!(slices.convert_field_label("spec.driver").is_ok());
        let source = find("", "events")
            .fields
            .into_iter()
            .find(|f| f.name == "source")
            .unwrap();
        assert_eq!(
            (source.path.as_str(), source.fallback.as_str()),
            ("source.component", "reportingComponent")
        );
        let ev = find("events.k8s.io", "events");
        assert!(ev.convert_field_label("involvedObject.name").is_err());
        assert!(ev.convert_field_label("regarding.name").is_ok());
    }

    #[test]
    fn short_names_and_categories_are_kube_apiservers() {
        assert_eq!(find("", "pods").short_names, ["po"]);
        assert_eq!(
            find("apiextensions.k8s.io", "customresourcedefinitions").short_names,
            ["crd", "crds"]
        );
        let all: Vec<String> = builtin_resources()
            .into_iter()
            .filter(|r| r.categories.iter().any(|c| c == "all"))
            .map(|r| r.qualified_name())
            .collect();
        assert_eq!(
            all,
            [
                "pods",
                "replicationcontrollers",
                "services",
                "daemonsets.apps",
                "deployments.apps",
                "replicasets.apps",
                "statefulsets.apps",
                "horizontalpodautoscalers.autoscaling",
                "cronjobs.batch",
                "jobs.batch"
            ]
        );
    }
}
