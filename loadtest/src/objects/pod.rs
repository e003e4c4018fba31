//! The pod builder and the rendering of pod status from [`PodRuntime`].

use serde_json::{json, Value};

use super::{metadata, node_ip, pod_ip_for, Rng};
use crate::rng::{digest_hex, now_rfc3339, stable_uuid};

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

#[cfg(test)]
mod tests {
    use super::super::encode;
    use super::super::tests::assert_common;
    use super::*;

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
}
