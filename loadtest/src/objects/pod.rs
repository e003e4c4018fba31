//! The pod builder, the pod template of the demo Deployments, and the
//! rendering of pod status from [`PodRuntime`].

use serde_json::{json, Value};

use super::{metadata, node_ip, Rng};
use crate::rng::{digest_hex, now_rfc3339};

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

/// The named container port of `app` (`("http", 8080)` for `web`), which its
/// Service targets and its EndpointSlice lists.
pub fn app_port(app: &str) -> (&'static str, u16) {
    let p = app_profile(app);
    (p.port_name, p.port)
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

/// The pod spec of `app`'s Deployment template, with the defaults
/// kube-apiserver fills in (`restartPolicy`, `dnsPolicy`, probe thresholds, ...).
/// Pods made from it add what admission and the scheduler set.
pub fn template_spec(app: &str) -> Value {
    let profile = app_profile(app);
    json!({
        "containers": [{
            "name": app,
            "image": profile.image,
            "ports": [{ "name": profile.port_name, "containerPort": profile.port,
                        "protocol": "TCP" }],
            "resources": {
                "limits": { "cpu": profile.limits.0, "memory": profile.limits.1 },
                "requests": { "cpu": profile.requests.0, "memory": profile.requests.1 },
            },
            "readinessProbe": {
                "httpGet": { "path": "/healthz", "port": profile.port_name, "scheme": "HTTP" },
                "timeoutSeconds": 1, "periodSeconds": 10,
                "successThreshold": 1, "failureThreshold": 3,
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
    })
}

/// What a new application pod is made of.
pub struct NewPod<'a> {
    /// Namespace.
    pub ns: &'a str,
    /// Pod name (`<replicaset>-<5 chars>`).
    pub name: &'a str,
    /// Node it is bound to.
    pub node: &'a str,
    /// Labels; `app` picks the container profile.
    pub labels: &'a [(&'a str, &'a str)],
    /// The owning controller's reference ([`super::controller_ref`]); its name
    /// plus `-` is the pod's `generateName`.
    pub owner: Value,
    /// `Some(ip)`: running with ready containers; `None`: pending, containers
    /// still being created.
    pub pod_ip: Option<String>,
}

/// Builds a `v1/Pod` of a demo application from `p`: the template spec of its
/// app plus what admission and the scheduler add (service account, priority,
/// node), with a status rendered from its phase.
pub fn pod(p: &NewPod<'_>, rng: &mut Rng) -> Value {
    let app = p
        .labels
        .iter()
        .find(|(k, _)| *k == "app")
        .map_or_else(|| p.name.split('-').next().unwrap_or(p.name), |(_, v)| *v);
    let mut spec = template_spec(app);
    let admitted = json!({
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "nodeName": p.node,
        "priority": 0,
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
    });
    merge(&mut spec, admitted);
    let mut meta = metadata(p.name, Some(p.ns), p.labels, rng);
    let owner = p.owner["name"].as_str().unwrap_or(app);
    meta["generateName"] = Value::String(format!("{owner}-"));
    meta["ownerReferences"] = json!([p.owner]);
    let mut obj = json!({ "kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec });
    set_pod_runtime(&mut obj, &new_runtime(p.pod_ip.clone()));
    obj
}

/// Adds the members of object `extra` to object `into`.
pub(super) fn merge(into: &mut Value, extra: Value) {
    if let (Some(into), Value::Object(extra)) = (into.as_object_mut(), extra) {
        into.extend(extra);
    }
}

/// The runtime of a pod just created: running and ready when it has an IP.
pub(super) fn new_runtime(pod_ip: Option<String>) -> PodRuntime {
    let now = now_rfc3339();
    let running = pod_ip.is_some();
    PodRuntime {
        phase: if running { "Running" } else { "Pending" }.to_owned(),
        ready: running,
        restart_count: 0,
        pod_ip,
        start_time: now.clone(),
        started_at: now.clone(),
        transition_time: now,
    }
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
    use super::super::tests::assert_common;
    use super::super::{controller_ref, encode, pod_ip_for};
    use super::*;

    fn new_pod(
        name: &str,
        node: &str,
        labels: &[(&str, &str)],
        running: bool,
        rng: &mut Rng,
    ) -> Value {
        let owner_name = name.rsplit_once('-').map_or(name, |(base, _)| base);
        let p = NewPod {
            ns: "demo-1",
            name,
            node,
            labels,
            owner: controller_ref("apps/v1", "ReplicaSet", owner_name, "rs-uid"),
            pod_ip: running.then(|| pod_ip_for(node, rng)),
        };
        pod(&p, rng)
    }

    #[test]
    fn pod_shape_and_size() {
        let mut rng = Rng::new(1);
        let hash = pod_template_hash(&mut rng);
        let name = pod_name("web", &hash, &mut rng);
        assert!(name.starts_with(&format!("web-{hash}-")) && name.len() == 4 + 10 + 1 + 5);
        let labels = [("app", "web"), ("pod-template-hash", hash.as_str())];
        let pod = new_pod(&name, "node-3", &labels, true, &mut rng);
        assert_common(&pod, "Pod", &name, Some("demo-1"));
        let meta = &pod["metadata"];
        assert_eq!(meta["labels"]["pod-template-hash"], hash.as_str());
        assert_eq!(meta["generateName"], format!("web-{hash}-"));
        let owner = &meta["ownerReferences"][0];
        assert_eq!(owner["name"], format!("web-{hash}"));
        assert_eq!(owner["kind"], "ReplicaSet");
        assert_eq!(owner["uid"], "rs-uid");
        let spec = &pod["spec"];
        assert_eq!(spec["nodeName"], "node-3");
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["serviceAccountName"], "default");
        let c = &spec["containers"][0];
        assert_eq!(c["name"], "web");
        assert_eq!(c["ports"][0]["containerPort"], 8080);
        assert_eq!(c["resources"]["requests"]["cpu"], "100m");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], "http");
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
        assert!((1024..=2304).contains(&size), "pod is {size} bytes");
        for app in ["web", "api", "worker"] {
            for running in [true, false] {
                let name = pod_name(app, &hash, &mut rng);
                let labels = [("app", app), ("pod-template-hash", hash.as_str())];
                let mut p = new_pod(&name, "node-12", &labels, running, &mut rng);
                let mut rt = pod_runtime(&p);
                rt.restart_count = 12;
                set_pod_runtime(&mut p, &rt);
                let size = encode(&p).len();
                assert!(
                    (1024..=2560).contains(&size),
                    "{app} running={running} pod is {size} bytes"
                );
            }
        }
    }

    #[test]
    fn template_spec_is_the_pods_spec_without_admission_fields() {
        let mut rng = Rng::new(3);
        let pod = new_pod("api-h-s", "node-1", &[("app", "api")], true, &mut rng);
        let template = template_spec("api");
        for (k, v) in template.as_object().expect("object") {
            assert_eq!(&pod["spec"][k], v, "spec.{k}");
        }
        assert!(template.get("nodeName").is_none());
        assert_eq!(app_port("api"), ("grpc", 9090));
        assert_eq!(app_port("worker"), ("metrics", 9100));
    }

    #[test]
    fn pending_pod_has_no_ip_and_waits() {
        let mut rng = Rng::new(5);
        let pod = new_pod(
            "api-abc-xyz12",
            "node-1",
            &[("app", "api")],
            false,
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
        let mut pod = new_pod("web-h-s", "node-1", &[("app", "web")], true, &mut rng);
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
    fn pods_encode_as_protobuf() {
        let mut rng = Rng::new(4);
        for running in [true, false] {
            let pod = new_pod("web-h-s", "node-1", &[("app", "web")], running, &mut rng);
            watchd::codec::pbjson::encode_stored(&pod).expect("valid v1 Pod");
        }
    }
}
