//! `coordination.k8s.io/v1` Leases: the node heartbeats every kubelet renews
//! in `kube-node-lease` (a real cluster's most frequent write), and the
//! leader-election leases of the controller manager and the scheduler.

use serde_json::{json, Value};

use super::{metadata, now_rfc3339_micros, Rng};

/// Namespace of the node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet's `nodeLeaseDurationSeconds`; it renews every quarter of it.
pub const NODE_LEASE_DURATION_SECONDS: u32 = 40;
/// Leader-election lease duration of kube-controller-manager and kube-scheduler.
pub const LEADER_LEASE_DURATION_SECONDS: u32 = 15;
/// Components holding a leader-election lease in `kube-system`.
pub const LEADER_ELECTED: [&str; 2] = ["kube-controller-manager", "kube-scheduler"];

/// Builds the Lease the kubelet of `node` (the stored Node) keeps renewing,
/// owned by the Node as the kubelet sets it (no controller flag).
pub fn node_lease(node: &Value, rng: &mut Rng) -> Value {
    let name = super::name(node);
    let mut meta = metadata(name, Some(NODE_LEASE_NAMESPACE), &[], rng);
    meta["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "Node", "name": name, "uid": super::uid(node),
    }]);
    json!({
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": meta,
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": NODE_LEASE_DURATION_SECONDS,
            "renewTime": now_rfc3339_micros(),
        },
    })
}

/// Builds the leader-election Lease of `component` in `kube-system`, held by
/// the control-plane node's instance.
pub fn leader_lease(component: &str, rng: &mut Rng) -> Value {
    let now = now_rfc3339_micros();
    let holder = format!("control-plane_{}", rng.uuid());
    json!({
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": metadata(component, Some("kube-system"), &[], rng),
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": LEADER_LEASE_DURATION_SECONDS,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        },
    })
}

/// Renews a lease: `spec.renewTime` becomes `now` (a MicroTime).
pub fn renew(lease: &mut Value, now: &str) {
    lease["spec"]["renewTime"] = Value::String(now.to_owned());
}

#[cfg(test)]
mod tests {
    use super::super::node;
    use super::super::tests::assert_common;
    use super::*;

    #[test]
    fn node_and_leader_leases() {
        let mut rng = Rng::new(1);
        let n = node("node-1", &mut rng);
        let mut lease = node_lease(&n, &mut rng);
        assert_eq!(lease["apiVersion"], "coordination.k8s.io/v1");
        assert_eq!(lease["metadata"]["namespace"], NODE_LEASE_NAMESPACE);
        assert_eq!(lease["metadata"]["name"], "node-1");
        assert_eq!(lease["spec"]["holderIdentity"], "node-1");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        let owner = &lease["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["uid"]),
            (&json!("Node"), &n["metadata"]["uid"])
        );
        renew(&mut lease, "2026-01-01T00:00:00.000001Z");
        assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:00.000001Z");
        let leader = leader_lease("kube-scheduler", &mut rng);
        assert_common(&leader, "Lease", "kube-scheduler", Some("kube-system"));
        assert!(leader["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| h.starts_with("control-plane_")));
        for obj in [&lease, &leader] {
            let stored = watchd::codec::pbjson::encode_stored(obj).expect("valid Lease");
            let back = crate::demo::Storage::decode(&stored).expect("decodes");
            assert_eq!(back["spec"], obj["spec"], "MicroTime survives protobuf");
        }
    }
}
