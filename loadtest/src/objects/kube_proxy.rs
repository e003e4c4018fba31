//! kube-proxy: the DaemonSet every cluster runs in `kube-system`, its pods
//! (one per node, on the host network) and its ConfigMap.

use serde_json::{json, Value};

use super::pod::{merge, new_runtime};
use super::{configmap, metadata, node_ip, set_pod_runtime, Rng};

/// Name of the DaemonSet, its ServiceAccount and its ConfigMap.
pub const NAME: &str = "kube-proxy";
/// Namespace of everything kube-proxy.
pub const NAMESPACE: &str = "kube-system";
const IMAGE: &str = "registry.k8s.io/kube-proxy:v1.31.4";
/// `controller-revision-hash` of the DaemonSet's only revision.
const REVISION_HASH: &str = "6d9c5b7f4c";

fn template_spec() -> Value {
    json!({
        "volumes": [
            { "name": "kube-proxy", "configMap": { "name": NAME, "defaultMode": 420 } },
            { "name": "lib-modules", "hostPath": { "path": "/lib/modules", "type": "" } },
        ],
        "containers": [{
            "name": NAME,
            "image": IMAGE,
            "command": [
                "/usr/local/bin/kube-proxy",
                "--config=/var/lib/kube-proxy/config.conf",
                "--hostname-override=$(NODE_NAME)",
            ],
            "env": [{
                "name": "NODE_NAME",
                "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "spec.nodeName" } },
            }],
            "resources": { "requests": { "cpu": "100m" } },
            "volumeMounts": [
                { "name": "kube-proxy", "mountPath": "/var/lib/kube-proxy" },
                { "name": "lib-modules", "readOnly": true, "mountPath": "/lib/modules" },
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
            "securityContext": { "privileged": true },
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": { "kubernetes.io/os": "linux" },
        "serviceAccountName": NAME,
        "serviceAccount": NAME,
        "hostNetwork": true,
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [{ "operator": "Exists" }],
        "priorityClassName": "system-node-critical",
    })
}

/// Builds the `apps/v1` DaemonSet, as created (status all zeros).
pub fn daemon_set(rng: &mut Rng) -> Value {
    let labels = [("k8s-app", NAME)];
    let mut meta = metadata(NAME, Some(NAMESPACE), &labels, rng);
    meta["generation"] = json!(1);
    meta["annotations"] = json!({ "deprecated.daemonset.template.generation": "1" });
    json!({
        "kind": "DaemonSet",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "selector": { "matchLabels": { "k8s-app": NAME } },
            "template": {
                "metadata": { "creationTimestamp": null, "labels": { "k8s-app": NAME } },
                "spec": template_spec(),
            },
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": { "maxUnavailable": 1, "maxSurge": 0 },
            },
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": 0, "numberMisscheduled": 0,
            "desiredNumberScheduled": 0, "numberReady": 0,
        },
    })
}

/// Writes the daemonset controller's status: `nodes` pods wanted and
/// scheduled, `ready` of them ready.
pub fn set_daemon_set_status(ds: &mut Value, nodes: u64, ready: u64) {
    let mut status = json!({
        "currentNumberScheduled": nodes, "numberMisscheduled": 0,
        "desiredNumberScheduled": nodes, "numberReady": ready,
        "observedGeneration": ds["metadata"]["generation"].as_u64().unwrap_or(1),
    });
    // Go's omitempty on the rest.
    for (key, n) in [
        ("updatedNumberScheduled", nodes),
        ("numberAvailable", ready),
        ("numberUnavailable", nodes.saturating_sub(ready)),
    ] {
        if n > 0 {
            status[key] = json!(n);
        }
    }
    ds["status"] = status;
}

/// Builds the kube-proxy pod of `node`, owned by `owner` (the DaemonSet's
/// controller reference), running with the node's IP (host network).
pub fn pod(name: &str, node: &str, owner: Value, rng: &mut Rng) -> Value {
    let labels = [
        ("controller-revision-hash", REVISION_HASH),
        ("k8s-app", NAME),
        ("pod-template-generation", "1"),
    ];
    let mut meta = metadata(name, Some(NAMESPACE), &labels, rng);
    meta["generateName"] = Value::String(format!("{NAME}-"));
    meta["ownerReferences"] = json!([owner]);
    let mut spec = template_spec();
    let not = |key: &str, effect: &str| json!({ "key": format!("node.kubernetes.io/{key}"), "operator": "Exists", "effect": effect });
    // What the daemonset controller adds to every pod it makes.
    merge(
        &mut spec,
        json!({
            "nodeName": node,
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchFields": [
                    { "key": "metadata.name", "operator": "In", "values": [node] },
                ] }],
            } } },
            "tolerations": [
                { "operator": "Exists" },
                not("not-ready", "NoExecute"),
                not("unreachable", "NoExecute"),
                not("disk-pressure", "NoSchedule"),
                not("memory-pressure", "NoSchedule"),
                not("pid-pressure", "NoSchedule"),
                not("unschedulable", "NoSchedule"),
                not("network-unavailable", "NoSchedule"),
            ],
            "priority": 2_000_001_000,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
        }),
    );
    let mut obj = json!({ "kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec });
    set_pod_runtime(&mut obj, &new_runtime(Some(node_ip(node))));
    obj
}

/// The ConfigMap the pods mount (`config.conf`).
pub fn config_map(rng: &mut Rng) -> Value {
    let conf = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n\
                kind: KubeProxyConfiguration\n\
                clusterCIDR: 10.244.0.0/16\n\
                mode: iptables\n";
    configmap(
        NAMESPACE,
        NAME,
        &[("app", NAME)],
        &[("config.conf", conf)],
        rng,
    )
}

#[cfg(test)]
mod tests {
    use super::super::controller_ref_to;
    use super::super::tests::assert_common;
    use super::*;

    #[test]
    fn daemon_set_and_pod_shapes() {
        let mut rng = Rng::new(1);
        let mut ds = daemon_set(&mut rng);
        assert_common(&ds, "DaemonSet", NAME, Some(NAMESPACE));
        set_daemon_set_status(&mut ds, 3, 3);
        assert_eq!(ds["status"]["numberReady"], 3);
        assert_eq!(ds["status"]["numberAvailable"], 3);
        assert!(ds["status"].get("numberUnavailable").is_none());
        let pod = pod(
            "kube-proxy-x2x4b",
            "node-2",
            controller_ref_to(&ds),
            &mut rng,
        );
        assert_common(&pod, "Pod", "kube-proxy-x2x4b", Some(NAMESPACE));
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
        assert_eq!(pod["spec"]["nodeName"], "node-2");
        assert_eq!(pod["spec"]["hostNetwork"], true);
        assert_eq!(pod["status"]["podIP"], "10.0.0.12");
        assert_eq!(pod["status"]["podIP"], pod["status"]["hostIP"]);
        assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
        let cm = config_map(&mut rng);
        assert_eq!(
            pod["spec"]["volumes"][0]["configMap"]["name"],
            cm["metadata"]["name"]
        );
        for obj in [&ds, &pod, &cm] {
            watchd::codec::pbjson::encode_stored(obj).expect("valid");
        }
    }
}
