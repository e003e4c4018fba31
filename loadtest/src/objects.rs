//! Builders for the Kubernetes objects of the demo cluster, shaped the way
//! kube-apiserver stores them in etcd.
//!
//! Every builder returns a `serde_json::Value` with `kind`, `apiVersion` and
//! `metadata` (`name`, `uid`, `creationTimestamp`, `labels` when there are any,
//! `generation` where the API sets it, and `namespace` for namespaced kinds).
//! `metadata.resourceVersion` is never set: the API server strips it before
//! writing, since etcd's `mod_revision` is the resource version. Serialise with
//! [`encode`] to get the compact, single-line JSON value that goes into etcd
//! under [`key_for`] (or with `demo::Storage::encode` for protobuf). Object keys
//! come out in `serde_json`'s sorted order rather than kube-apiserver's field
//! order; JSON readers do not depend on either.
//!
//! One file per family, each with the setters the demo's controllers use to
//! keep status in step with the pods: [`pod`] (pods and the Deployment pod
//! template), [`workload`] (Deployments, ReplicaSets), [`kube_proxy`] (the
//! DaemonSet and its pods), [`service`] (Services, EndpointSlices, Endpoints),
//! [`lease`] (node heartbeats, leader election), [`event`], [`account`]
//! (ServiceAccounts, Secrets) and [`custom`] (CustomResourceDefinitions and
//! their objects).

use serde_json::{json, Map, Value};

use crate::rng::fnv1a;
pub use crate::rng::{now_rfc3339, now_rfc3339_micros, Rng};

pub mod account;
pub mod custom;
pub mod event;
pub mod kube_proxy;
pub mod lease;
mod pod;
pub mod service;
pub mod workload;
pub use pod::{
    app_port, pod, pod_name, pod_runtime, pod_template_hash, set_pod_runtime, template_spec,
    NewPod, PodRuntime,
};

/// etcd resource segment for namespaces (`/registry/namespaces/<name>`).
pub const NAMESPACES: &str = "namespaces";
/// etcd resource segment for nodes; kube-apiserver still calls them minions.
pub const NODES: &str = "minions";
/// etcd resource segment for pods (`/registry/pods/<ns>/<name>`).
pub const PODS: &str = "pods";
/// etcd resource segment for config maps (`/registry/configmaps/<ns>/<name>`).
pub const CONFIGMAPS: &str = "configmaps";
/// etcd resource segment for Deployments.
pub const DEPLOYMENTS: &str = "deployments";
/// etcd resource segment for ReplicaSets.
pub const REPLICASETS: &str = "replicasets";
/// etcd resource segment for DaemonSets.
pub const DAEMONSETS: &str = "daemonsets";
/// etcd directory of Services: kube-apiserver keeps them under `services/specs`.
pub const SERVICES: &str = "services/specs";
/// etcd directory of (legacy) Endpoints, `services/endpoints`.
pub const ENDPOINTS: &str = "services/endpoints";
/// etcd resource segment for EndpointSlices.
pub const ENDPOINTSLICES: &str = "endpointslices";
/// etcd resource segment for coordination Leases.
pub const LEASES: &str = "leases";
/// etcd resource segment for Events (core/v1 and events.k8s.io share it).
pub const EVENTS: &str = "events";
/// etcd resource segment for Secrets.
pub const SECRETS: &str = "secrets";
/// etcd resource segment for ServiceAccounts.
pub const SERVICEACCOUNTS: &str = "serviceaccounts";
/// etcd directory of CustomResourceDefinitions.
pub const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// Builds the etcd key kube-apiserver uses: `<prefix>/<resource>[/<ns>]/<name>`.
pub fn key_for(prefix: &str, resource_key: &str, ns: Option<&str>, name: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    match ns {
        Some(ns) => format!("{prefix}/{resource_key}/{ns}/{name}"),
        None => format!("{prefix}/{resource_key}/{name}"),
    }
}

/// Serialises an object as compact single-line JSON bytes for etcd.
pub fn encode(obj: &Value) -> Vec<u8> {
    obj.to_string().into_bytes()
}

/// Converts `(key, value)` pairs into a JSON object (used for labels and data).
pub fn string_map(pairs: &[(&str, &str)]) -> Value {
    let map: Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
        .collect();
    Value::Object(map)
}

/// `metadata` of a new object: name, namespace, a fresh uid, now as
/// `creationTimestamp`, and `labels` unless there are none (Go omits empty maps).
fn metadata(name: &str, ns: Option<&str>, labels: &[(&str, &str)], rng: &mut Rng) -> Value {
    let mut meta = json!({
        "name": name,
        "uid": rng.uuid(),
        "creationTimestamp": now_rfc3339(),
    });
    if !labels.is_empty() {
        meta["labels"] = string_map(labels);
    }
    if let Some(ns) = ns {
        meta["namespace"] = Value::String(ns.to_owned());
    }
    meta
}

/// The `ownerReferences` entry a controller puts on what it creates.
pub fn controller_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The `controller_ref` pointing at a stored object (its kind, name and uid).
pub fn controller_ref_to(owner: &Value) -> Value {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let meta = &owner["metadata"];
    controller_ref(
        &s(&owner["apiVersion"]),
        &s(&owner["kind"]),
        &s(&meta["name"]),
        &s(&meta["uid"]),
    )
}

/// `metadata.uid` of an object ("" when missing).
pub fn uid(obj: &Value) -> &str {
    obj["metadata"]["uid"].as_str().unwrap_or_default()
}

/// `metadata.name` of an object ("" when missing).
pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

/// Standard base64, as Kubernetes JSON carries `[]byte` (Secret data).
pub fn base64(bytes: &[u8]) -> String {
    let mut out = Vec::new();
    watchd::codec::gojson::base64(&mut out, bytes);
    // The writer quotes the string for JSON; the builders want its contents.
    String::from_utf8_lossy(out.get(1..out.len().saturating_sub(1)).unwrap_or_default())
        .into_owned()
}

/// Builds a `v1/Namespace` in phase `Active` with the automatic
/// `kubernetes.io/metadata.name` label.
pub fn namespace(name: &str, rng: &mut Rng) -> Value {
    json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": metadata(name, None, &[("kubernetes.io/metadata.name", name)], rng),
        "spec": { "finalizers": ["kubernetes"] },
        "status": { "phase": "Active" },
    })
}

/// Small integer identifying a node: the trailing number of its name
/// (`node-3` is 3), or a hash-derived value for other names.
pub fn node_index(node: &str) -> u32 {
    let digits: String = node
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits
        .parse::<u32>()
        .unwrap_or_else(|_| (fnv1a(node) % 200) as u32 + 1)
}

/// Internal IP of a node (`node-1` is `10.0.0.11`).
pub fn node_ip(node: &str) -> String {
    let i = node_index(node) + 10;
    format!("10.0.{}.{}", (i / 250) % 256, i % 250)
}

/// The `topology.kubernetes.io/zone` of a node (EndpointSlices repeat it).
pub fn node_zone(node: &str) -> &'static str {
    ["zone-a", "zone-b", "zone-c"][node_index(node) as usize % 3]
}

/// First three octets of the node's pod CIDR (`node-1` owns `10.244.1.0/24`).
fn pod_subnet(node: &str) -> String {
    let i = node_index(node);
    format!("10.{}.{}", 244 + (i >> 8) % 12, i & 0xff)
}

/// Picks a pod IP inside the node's pod CIDR.
pub fn pod_ip_for(node: &str, rng: &mut Rng) -> String {
    format!("{}.{}", pod_subnet(node), 2 + rng.below(250))
}

/// Builds a `v1/Node` that is `Ready`, with capacity, addresses and nodeInfo.
pub fn node(name: &str, rng: &mut Rng) -> Value {
    let labels = [
        ("beta.kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", "demo.large"),
    ];
    let mut meta = metadata(name, None, &labels, rng);
    meta["labels"]["topology.kubernetes.io/zone"] = Value::String(node_zone(name).to_owned());
    meta["annotations"] = json!({
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    });
    let now = now_rfc3339();
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": kind,
            "status": status,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        })
    };
    let cidr = format!("{}.0/24", pod_subnet(name));
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": { "podCIDR": cidr, "podCIDRs": [cidr], "providerID": format!("demo://{name}") },
        "status": {
            "capacity": {
                "cpu": "8", "ephemeral-storage": "104805356Ki", "hugepages-2Mi": "0",
                "memory": "32863580Ki", "pods": "110",
            },
            "allocatable": {
                "cpu": "7800m", "ephemeral-storage": "96588638Ki", "hugepages-2Mi": "0",
                "memory": "31712604Ki", "pods": "110",
            },
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                          "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                          "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID",
                          "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                { "type": "InternalIP", "address": node_ip(name) },
                { "type": "Hostname", "address": name },
            ],
            "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
            "nodeInfo": {
                "machineID": rng.hex(32),
                "systemUUID": rng.uuid(),
                "bootID": rng.uuid(),
                "kernelVersion": "6.1.0-28-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": "v1.31.4",
                "kubeProxyVersion": "v1.31.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    })
}

/// Sets (or adds) label `key` to `value` on any object.
pub fn set_label(obj: &mut Value, key: &str, value: &str) {
    let meta = &mut obj["metadata"];
    if !meta["labels"].is_object() {
        meta["labels"] = json!({});
    }
    meta["labels"][key] = Value::String(value.to_owned());
}

/// Returns label `key` of an object, if set.
pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// Builds a `v1/ConfigMap` with the given labels and `data` entries.
pub fn configmap(
    ns: &str,
    name: &str,
    labels: &[(&str, &str)],
    data: &[(&str, &str)],
    rng: &mut Rng,
) -> Value {
    json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": metadata(name, Some(ns), labels, rng),
        "data": string_map(data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn assert_common(obj: &Value, kind: &str, name: &str, ns: Option<&str>) {
        assert_eq!(obj["kind"], kind);
        let core = matches!(kind, "Namespace" | "Node" | "Pod" | "ConfigMap" | "Service");
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        assert!(!core || api_version == "v1", "{kind} is {api_version}");
        assert!(!api_version.is_empty());
        let meta = &obj["metadata"];
        assert_eq!(meta["name"], name);
        assert!(
            meta.get("resourceVersion").is_none(),
            "{kind} has resourceVersion"
        );
        assert_eq!(meta["uid"].as_str().map(str::len), Some(36));
        let ts = meta["creationTimestamp"].as_str().unwrap_or_default();
        assert_eq!(ts.len(), 20, "timestamp {ts}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T');
        assert!(meta.get("labels").is_none_or(Value::is_object));
        match ns {
            Some(ns) => assert_eq!(meta["namespace"], ns),
            None => assert!(meta.get("namespace").is_none()),
        }
        let bytes = encode(obj);
        assert!(!bytes.contains(&b'\n'), "value must be a single line");
        let back: Value = serde_json::from_slice(&bytes).expect("valid JSON");
        assert_eq!(&back, obj);
    }

    #[test]
    fn key_layout() {
        assert_eq!(
            key_for("/registry", NODES, None, "node-1"),
            "/registry/minions/node-1"
        );
        assert_eq!(
            key_for("/registry/", PODS, Some("demo-1"), "web-abc-xyz"),
            "/registry/pods/demo-1/web-abc-xyz"
        );
        assert_eq!(
            key_for("/k8s", NAMESPACES, None, "default"),
            "/k8s/namespaces/default"
        );
        assert_eq!(
            key_for("/registry", CONFIGMAPS, Some("kube-system"), "cfg"),
            "/registry/configmaps/kube-system/cfg"
        );
    }

    #[test]
    fn namespace_shape() {
        let ns = namespace("demo-1", &mut Rng::new(1));
        assert_common(&ns, "Namespace", "demo-1", None);
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "demo-1"
        );
    }

    #[test]
    fn node_shape() {
        let node = node("node-2", &mut Rng::new(1));
        assert_common(&node, "Node", "node-2", None);
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/hostname"], "node-2");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        let status = &node["status"];
        let ready = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .expect("Ready condition");
        assert_eq!(ready["status"], "True");
        assert_eq!(status["nodeInfo"]["kubeletVersion"], "v1.31.4");
        assert_eq!(status["addresses"][0]["address"], "10.0.0.12");
        assert_eq!(status["capacity"]["pods"], "110");
        assert_eq!(status["allocatable"]["cpu"], "7800m");
        assert_eq!(node["spec"]["podCIDR"], "10.244.2.0/24");
    }

    #[test]
    fn configmap_shape_and_labels() {
        let mut cm = configmap(
            "demo-2",
            "web-config-1",
            &[("app", "web")],
            &[("LOG_LEVEL", "info")],
            &mut Rng::new(4),
        );
        assert_common(&cm, "ConfigMap", "web-config-1", Some("demo-2"));
        assert_eq!(cm["data"]["LOG_LEVEL"], "info");
        set_label(&mut cm, "track", "canary");
        assert_eq!(label(&cm, "track"), Some("canary"));
        assert_eq!(label(&cm, "app"), Some("web"));
    }

    #[test]
    fn uids_differ_and_follow_seed() {
        let a = namespace("x", &mut Rng::new(1));
        let b = namespace("x", &mut Rng::new(1));
        let c = namespace("x", &mut Rng::new(2));
        assert_eq!(a["metadata"]["uid"], b["metadata"]["uid"]);
        assert_ne!(a["metadata"]["uid"], c["metadata"]["uid"]);
    }

    #[test]
    fn owner_references_and_base64() {
        let ns = namespace("demo-1", &mut Rng::new(1));
        let owner = controller_ref_to(&ns);
        assert_eq!(owner["kind"], "Namespace");
        assert_eq!(owner["apiVersion"], "v1");
        assert_eq!(owner["name"], "demo-1");
        assert_eq!(owner["uid"], uid(&ns));
        assert_eq!(owner["controller"], true);
        assert_eq!(name(&ns), "demo-1");
        assert_eq!(base64(b"demo-1"), "ZGVtby0x");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b""), "");
    }

    #[test]
    fn node_indices() {
        assert_eq!(node_index("node-1"), 1);
        assert_eq!(node_index("node-42"), 42);
        assert!(node_index("control-plane") >= 1);
        assert_eq!(node_ip("node-245"), "10.0.1.5");
    }
}
