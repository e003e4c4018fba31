//! Builders for the Kubernetes objects of the demo cluster, shaped the way
//! kube-apiserver stores them in etcd.
//!
//! Every builder returns a `serde_json::Value` with `kind`, `apiVersion` and
//! `metadata` (`name`, `uid`, `creationTimestamp`, `labels`, and `namespace`
//! for namespaced kinds). `metadata.resourceVersion` is never set: the API
//! server strips it before writing, since etcd's `mod_revision` is the
//! resource version. Serialise with [`encode`] to get the compact,
//! single-line JSON value that goes into etcd under [`key_for`].
//!
//! Pod status is rendered from a small [`PodRuntime`] description so that the
//! demo writer can flip phase/readiness or bump restart counts and still get a
//! self-consistent status (conditions, container states, IPs).

use serde_json::{json, Map, Value};

use crate::rng::{digest_hex, fnv1a, stable_uuid};
pub use crate::rng::{now_rfc3339, Rng};

/// etcd resource segment for namespaces (`/registry/namespaces/<name>`).
pub const NAMESPACES: &str = "namespaces";
/// etcd resource segment for nodes; kube-apiserver still calls them minions.
pub const NODES: &str = "minions";
/// etcd resource segment for pods (`/registry/pods/<ns>/<name>`).
pub const PODS: &str = "pods";
/// etcd resource segment for config maps (`/registry/configmaps/<ns>/<name>`).
pub const CONFIGMAPS: &str = "configmaps";

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

fn metadata(name: &str, ns: Option<&str>, labels: &[(&str, &str)], rng: &mut Rng) -> Value {
    let mut meta = json!({
        "name": name,
        "uid": rng.uuid(),
        "creationTimestamp": now_rfc3339(),
        "labels": string_map(labels),
    });
    if let Some(ns) = ns {
        meta["namespace"] = Value::String(ns.to_owned());
    }
    meta
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
    let zone = ["zone-a", "zone-b", "zone-c"][node_index(name) as usize % 3];
    meta["labels"]["topology.kubernetes.io/zone"] = Value::String(zone.to_owned());
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

/// Container image, port and resources used for a demo application.
struct AppProfile {
    image: String,
    port_name: &'static str,
    port: u16,
    requests: (&'static str, &'static str),
    limits: (&'static str, &'static str),
}

fn app_profile(app: &str) -> AppProfile {
    match app {
        "web" => AppProfile {
            image: "nginx:1.27.3".to_owned(),
            port_name: "http",
            port: 8080,
            requests: ("100m", "128Mi"),
            limits: ("500m", "256Mi"),
        },
        "api" => AppProfile {
            image: "ghcr.io/example/demo-api:v2.4.1".to_owned(),
            port_name: "grpc",
            port: 9090,
            requests: ("250m", "256Mi"),
            limits: ("1", "512Mi"),
        },
        other => AppProfile {
            image: format!("ghcr.io/example/demo-{other}:v2.4.1"),
            port_name: "metrics",
            port: 9100,
            requests: ("50m", "64Mi"),
            limits: ("200m", "128Mi"),
        },
    }
}

/// Builds a Deployment-style pod name: `<app>-<template-hash>-<5 chars>`.
pub fn pod_name(app: &str, template_hash: &str, rng: &mut Rng) -> String {
    format!("{app}-{template_hash}-{}", rng.name_token(5))
}

/// Generates a ReplicaSet `pod-template-hash` label value (10 characters).
pub fn pod_template_hash(rng: &mut Rng) -> String {
    rng.name_token(10)
}

/// The runtime facts a pod's `status` is rendered from; see
/// [`pod_runtime`] and [`set_pod_runtime`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRuntime {
    /// `status.phase`: `Running` or `Pending` for the demo.
    pub phase: String,
    /// Whether the containers report ready (only meaningful when running).
    pub ready: bool,
    /// Restart count reported for every container.
    pub restart_count: u64,
    /// Pod IP; `None` while the sandbox is still being created.
    pub pod_ip: Option<String>,
    /// `status.startTime`.
    pub start_time: String,
    /// `state.running.startedAt` of the containers.
    pub started_at: String,
    /// `lastTransitionTime` of the readiness conditions.
    pub transition_time: String,
}

/// Builds a `v1/Pod` owned by a ReplicaSet, scheduled on `node`, in `phase`
/// (`Running` pods get an IP and ready containers, `Pending` ones are still
/// creating their containers).
pub fn pod(
    ns: &str,
    name: &str,
    node: &str,
    labels: &[(&str, &str)],
    phase: &str,
    rng: &mut Rng,
) -> Value {
    let app = labels
        .iter()
        .find(|(k, _)| *k == "app")
        .map_or_else(|| name.split('-').next().unwrap_or(name), |(_, v)| *v);
    let profile = app_profile(app);
    let generate_name = match name.rsplit_once('-') {
        Some((base, _)) => format!("{base}-"),
        None => format!("{name}-"),
    };
    let owner = generate_name.trim_end_matches('-').to_owned();
    let mut meta = metadata(name, Some(ns), labels, rng);
    meta["generateName"] = Value::String(generate_name);
    meta["ownerReferences"] = json!([{
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": owner,
        "uid": stable_uuid(&format!("replicaset/{ns}/{owner}")),
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let mut obj = json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": {
            "containers": [{
                "name": app,
                "image": profile.image,
                "ports": [{ "name": profile.port_name, "containerPort": profile.port,
                            "protocol": "TCP" }],
                "resources": {
                    "limits": { "cpu": profile.limits.0, "memory": profile.limits.1 },
                    "requests": { "cpu": profile.requests.0, "memory": profile.requests.1 },
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": node,
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
        },
    });
    let now = now_rfc3339();
    let running = phase == "Running";
    let runtime = PodRuntime {
        phase: phase.to_owned(),
        ready: running,
        restart_count: 0,
        pod_ip: running.then(|| pod_ip_for(node, rng)),
        start_time: now.clone(),
        started_at: now.clone(),
        transition_time: now,
    };
    set_pod_runtime(&mut obj, &runtime);
    obj
}

/// Reads the runtime facts back out of a pod's status (tolerating pods that
/// were not built here by falling back to defaults).
pub fn pod_runtime(pod: &Value) -> PodRuntime {
    let status = &pod["status"];
    let first = &status["containerStatuses"][0];
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let created = text(&pod["metadata"]["creationTimestamp"]).unwrap_or_else(now_rfc3339);
    let start_time = text(&status["startTime"]).unwrap_or_else(|| created.clone());
    let transition_time = status["conditions"]
        .as_array()
        .and_then(|conds| conds.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| text(&c["lastTransitionTime"]))
        .unwrap_or_else(|| start_time.clone());
    PodRuntime {
        phase: text(&status["phase"]).unwrap_or_else(|| "Pending".to_owned()),
        ready: first["ready"].as_bool().unwrap_or(false),
        restart_count: first["restartCount"].as_u64().unwrap_or(0),
        pod_ip: text(&status["podIP"]),
        started_at: text(&first["state"]["running"]["startedAt"])
            .unwrap_or_else(|| start_time.clone()),
        start_time,
        transition_time,
    }
}

/// Re-renders `status` of `pod` from `rt`: phase, conditions, IPs and one
/// container status per container in `spec.containers`.
pub fn set_pod_runtime(pod: &mut Value, rt: &PodRuntime) {
    let running = rt.phase == "Running" && rt.pod_ip.is_some();
    let ready = running && rt.ready;
    let uid = pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let node = pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let containers: Vec<(String, String)> = pod["spec"]["containers"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| {
                    let field = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
                    (field("name"), field("image"))
                })
                .collect()
        })
        .unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|(n, _)| n.as_str()).collect();
    let unready = format!("containers with unready status: [{}]", names.join(" "));
    let cond = |kind: &str, ok: bool, reason: &str| {
        let mut c = json!({
            "type": kind,
            "status": if ok { "True" } else { "False" },
            "lastTransitionTime": rt.transition_time,
        });
        if !ok && !reason.is_empty() {
            c["reason"] = Value::String(reason.to_owned());
            c["message"] = Value::String(unready.clone());
        }
        c
    };
    let statuses: Vec<Value> = containers
        .iter()
        .map(|(name, image)| {
            let repo = image.split(':').next().unwrap_or(image);
            let mut cs = json!({
                "name": name,
                "image": image,
                "imageID": format!("{repo}@sha256:{}", digest_hex(image, 64)),
                "ready": ready,
                "restartCount": rt.restart_count,
                "started": running,
                "state": if running {
                    json!({ "running": { "startedAt": rt.started_at } })
                } else {
                    json!({ "waiting": { "reason": "ContainerCreating" } })
                },
                "lastState": {},
            });
            if running {
                let seed = format!("{uid}/{name}/{}", rt.restart_count);
                cs["containerID"] =
                    Value::String(format!("containerd://{}", digest_hex(&seed, 64)));
            }
            if rt.restart_count > 0 {
                cs["lastState"] = json!({ "terminated": {
                    "exitCode": 137, "reason": "Error",
                    "startedAt": rt.start_time, "finishedAt": rt.started_at,
                } });
            }
            cs
        })
        .collect();
    let host_ip = node_ip(&node);
    let mut status = json!({
        "phase": if running { "Running" } else { "Pending" },
        "conditions": [
            cond("Initialized", true, ""),
            cond("Ready", ready, "ContainersNotReady"),
            cond("ContainersReady", ready, "ContainersNotReady"),
            cond("PodScheduled", true, ""),
        ],
        "hostIP": host_ip,
        "hostIPs": [{ "ip": host_ip }],
        "startTime": rt.start_time,
        "containerStatuses": statuses,
        "qosClass": "Burstable",
    });
    if let (true, Some(ip)) = (running, &rt.pod_ip) {
        status["podIP"] = Value::String(ip.clone());
        status["podIPs"] = json!([{ "ip": ip }]);
    }
    pod["status"] = status;
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

    fn assert_common(obj: &Value, kind: &str, name: &str, ns: Option<&str>) {
        assert_eq!(obj["kind"], kind);
        assert_eq!(obj["apiVersion"], "v1");
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
        assert!(meta["labels"].is_object());
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
    fn pod_shape_and_size() {
        let mut rng = Rng::new(1);
        let hash = pod_template_hash(&mut rng);
        let name = pod_name("web", &hash, &mut rng);
        assert!(name.starts_with(&format!("web-{hash}-")) && name.len() == 4 + 10 + 1 + 5);
        let labels = [("app", "web"), ("pod-template-hash", hash.as_str())];
        let pod = pod("demo-1", &name, "node-3", &labels, "Running", &mut rng);
        assert_common(&pod, "Pod", &name, Some("demo-1"));
        assert_eq!(
            pod["metadata"]["labels"]["pod-template-hash"],
            hash.as_str()
        );
        assert_eq!(
            pod["metadata"]["ownerReferences"][0]["name"],
            format!("web-{hash}")
        );
        let spec = &pod["spec"];
        assert_eq!(spec["nodeName"], "node-3");
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["serviceAccountName"], "default");
        let c = &spec["containers"][0];
        assert_eq!(c["name"], "web");
        assert_eq!(c["ports"][0]["containerPort"], 8080);
        assert_eq!(c["resources"]["requests"]["cpu"], "100m");
        let status = &pod["status"];
        assert_eq!(status["phase"], "Running");
        assert!(status["podIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.244.3.")));
        assert_eq!(status["hostIP"], "10.0.0.13");
        let cs = &status["containerStatuses"][0];
        assert_eq!(cs["ready"], true);
        assert_eq!(cs["restartCount"], 0);
        assert!(cs["state"]["running"]["startedAt"].is_string());
        let size = encode(&pod).len();
        assert!((1024..=2048).contains(&size), "pod is {size} bytes");
        for app in ["web", "api", "worker"] {
            for phase in ["Running", "Pending"] {
                let name = pod_name(app, &hash, &mut rng);
                let labels = [("app", app), ("pod-template-hash", hash.as_str())];
                let mut p = super::pod("demo-10", &name, "node-12", &labels, phase, &mut rng);
                let mut rt = pod_runtime(&p);
                rt.restart_count = 12;
                set_pod_runtime(&mut p, &rt);
                let size = encode(&p).len();
                assert!(
                    (1024..=2304).contains(&size),
                    "{app} {phase} pod is {size} bytes"
                );
            }
        }
    }

    #[test]
    fn pending_pod_has_no_ip_and_waits() {
        let mut rng = Rng::new(5);
        let pod = pod(
            "ns",
            "api-abc-xyz12",
            "node-1",
            &[("app", "api")],
            "Pending",
            &mut rng,
        );
        assert_eq!(pod["status"]["phase"], "Pending");
        assert!(pod["status"].get("podIP").is_none());
        let cs = &pod["status"]["containerStatuses"][0];
        assert_eq!(cs["ready"], false);
        assert_eq!(cs["state"]["waiting"]["reason"], "ContainerCreating");
        let ready = &pod["status"]["conditions"][1];
        assert_eq!(
            (ready["type"].as_str(), ready["status"].as_str()),
            (Some("Ready"), Some("False"))
        );
    }

    #[test]
    fn runtime_round_trip_and_mutation() {
        let mut rng = Rng::new(2);
        let mut pod = pod(
            "ns",
            "web-h-s",
            "node-1",
            &[("app", "web")],
            "Running",
            &mut rng,
        );
        let mut rt = pod_runtime(&pod);
        assert_eq!(rt.phase, "Running");
        assert!(rt.ready);
        let before = pod["status"].clone();
        set_pod_runtime(&mut pod, &rt);
        assert_eq!(pod["status"], before, "re-rendering is idempotent");
        rt.ready = false;
        rt.restart_count = 3;
        set_pod_runtime(&mut pod, &rt);
        let cs = &pod["status"]["containerStatuses"][0];
        assert_eq!(cs["ready"], false);
        assert_eq!(cs["restartCount"], 3);
        assert!(cs["lastState"]["terminated"].is_object());
        assert_ne!(
            cs["containerID"],
            before["containerStatuses"][0]["containerID"]
        );
        assert_eq!(pod_runtime(&pod), rt);
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
    fn node_indices() {
        assert_eq!(node_index("node-1"), 1);
        assert_eq!(node_index("node-42"), 42);
        assert!(node_index("control-plane") >= 1);
        assert_eq!(node_ip("node-245"), "10.0.1.5");
    }
}
