//! Deployments and their ReplicaSets, and the status the deployment and
//! replicaset controllers write as the pods come and go.
//!
//! The status setters are idempotent: given the same counts they leave the
//! object unchanged (timestamps included), so the demo writes only when
//! something changed, as the controllers do.

use serde_json::{json, Map, Value};

use super::{metadata, template_spec, Rng};

/// The rolling-update surge and unavailability of the demo Deployments.
const MAX_SURGE_PERCENT: u64 = 25;
const MAX_UNAVAILABLE_PERCENT: u64 = 25;

/// Pods counted for a ReplicaSet or Deployment status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaCounts {
    /// Pods that exist (any phase).
    pub replicas: u64,
    /// Pods whose Ready condition is true (`minReadySeconds` is 0, so also
    /// the available ones).
    pub ready: u64,
}

/// The pod template of a controller: labels and `app`'s spec.
fn template(app: &str, labels: &Value) -> Value {
    json!({
        "metadata": { "creationTimestamp": null, "labels": labels },
        "spec": template_spec(app),
    })
}

/// Builds an `apps/v1` Deployment of `app` as a user creates it (status empty
/// until the controller reports), selecting `app=<app>`.
pub fn deployment(ns: &str, app: &str, replicas: u64, rng: &mut Rng) -> Value {
    let labels = [("app", app)];
    let mut meta = metadata(app, Some(ns), &labels, rng);
    meta["generation"] = json!(1);
    meta["annotations"] = json!({ "deployment.kubernetes.io/revision": "1" });
    json!({
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": app } },
            "template": template(app, &json!({ "app": app })),
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {
                    "maxUnavailable": format!("{MAX_UNAVAILABLE_PERCENT}%"),
                    "maxSurge": format!("{MAX_SURGE_PERCENT}%"),
                },
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {},
    })
}

/// Name of the ReplicaSet of `app` with template hash `hash`.
pub fn replica_set_name(app: &str, hash: &str) -> String {
    format!("{app}-{hash}")
}

/// Builds the `apps/v1` ReplicaSet the deployment controller creates for
/// `app`'s template `hash`, owned by `owner` (the Deployment's controller
/// reference), before any of its pods exist.
pub fn replica_set(
    ns: &str,
    app: &str,
    hash: &str,
    replicas: u64,
    owner: Value,
    rng: &mut Rng,
) -> Value {
    let labels = [("app", app), ("pod-template-hash", hash)];
    let mut meta = metadata(&replica_set_name(app, hash), Some(ns), &labels, rng);
    meta["generation"] = json!(1);
    let surge = (replicas * MAX_SURGE_PERCENT).div_ceil(100);
    meta["annotations"] = json!({
        "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
        "deployment.kubernetes.io/max-replicas": (replicas + surge).to_string(),
        "deployment.kubernetes.io/revision": "1",
    });
    meta["ownerReferences"] = json!([owner]);
    let selector = json!({ "app": app, "pod-template-hash": hash });
    json!({
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": selector },
            "template": template(app, &selector),
        },
        "status": { "replicas": 0 },
    })
}

/// Sets `key` to `n`, leaving it out when 0 (Go's `omitempty`).
fn put_count(status: &mut Map<String, Value>, key: &str, n: u64) {
    if n > 0 {
        status.insert(key.to_owned(), json!(n));
    }
}

fn generation(obj: &Value) -> u64 {
    obj["metadata"]["generation"].as_u64().unwrap_or(1)
}

/// Writes the replicaset controller's view of `counts` into `rs.status`.
pub fn set_replica_set_status(rs: &mut Value, counts: ReplicaCounts) {
    let mut status = Map::new();
    status.insert("replicas".to_owned(), json!(counts.replicas));
    put_count(&mut status, "fullyLabeledReplicas", counts.replicas);
    put_count(&mut status, "readyReplicas", counts.ready);
    put_count(&mut status, "availableReplicas", counts.ready);
    status.insert("observedGeneration".to_owned(), json!(generation(rs)));
    rs["status"] = Value::Object(status);
}

/// Writes the deployment controller's view of `counts` (of its only
/// ReplicaSet, `rs_name`) into `deploy.status`, with the `Available` and
/// `Progressing` conditions; a condition's times move only when it changes.
pub fn set_deployment_status(deploy: &mut Value, counts: ReplicaCounts, rs_name: &str, now: &str) {
    let desired = deploy["spec"]["replicas"]
        .as_u64()
        .unwrap_or(counts.replicas);
    let min_available = desired - desired * MAX_UNAVAILABLE_PERCENT / 100;
    let mut conditions: Vec<Value> = deploy["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let available = counts.ready >= min_available;
    let (reason, message) = if available {
        (
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    set_condition(
        &mut conditions,
        "Available",
        available,
        reason,
        message,
        now,
    );
    // Once complete, a rollout stays complete: pods failing later do not
    // make the Deployment progress again.
    let complete = counts.ready >= desired
        || conditions
            .iter()
            .any(|c| c["type"] == "Progressing" && c["reason"] == "NewReplicaSetAvailable");
    let (reason, message) = if complete {
        (
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
        )
    } else {
        (
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{rs_name}\" is progressing."),
        )
    };
    set_condition(&mut conditions, "Progressing", true, reason, &message, now);
    let mut status = Map::new();
    status.insert("observedGeneration".to_owned(), json!(generation(deploy)));
    put_count(&mut status, "replicas", counts.replicas);
    put_count(&mut status, "updatedReplicas", counts.replicas);
    put_count(&mut status, "readyReplicas", counts.ready);
    put_count(&mut status, "availableReplicas", counts.ready);
    put_count(
        &mut status,
        "unavailableReplicas",
        desired.max(counts.replicas).saturating_sub(counts.ready),
    );
    status.insert("conditions".to_owned(), Value::Array(conditions));
    deploy["status"] = Value::Object(status);
}

/// Sets a Deployment condition: unchanged when status, reason and message
/// are; `lastTransitionTime` moves only when the status flips.
fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    ok: bool,
    reason: &str,
    message: &str,
    now: &str,
) {
    let status = if ok { "True" } else { "False" };
    let fresh = json!({
        "type": kind, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
        "reason": reason, "message": message,
    });
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        None => conditions.push(fresh),
        Some(c) if c["status"] == status && c["reason"] == reason && c["message"] == message => {}
        Some(c) => {
            let mut next = fresh;
            if c["status"] == status {
                next["lastTransitionTime"] = c["lastTransitionTime"].clone();
            }
            *c = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::controller_ref_to;
    use super::super::tests::assert_common;
    use super::*;

    #[test]
    fn deployment_and_replica_set_shapes() {
        let mut rng = Rng::new(1);
        let deploy = deployment("demo-1", "web", 3, &mut rng);
        assert_common(&deploy, "Deployment", "web", Some("demo-1"));
        assert_eq!(deploy["apiVersion"], "apps/v1");
        assert_eq!(deploy["metadata"]["generation"], 1);
        assert_eq!(deploy["spec"]["selector"]["matchLabels"]["app"], "web");
        assert_eq!(
            deploy["spec"]["template"]["metadata"]["labels"]["app"],
            "web"
        );
        assert_eq!(
            deploy["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27.3"
        );
        let rs = replica_set(
            "demo-1",
            "web",
            "abc",
            3,
            controller_ref_to(&deploy),
            &mut rng,
        );
        assert_common(&rs, "ReplicaSet", "web-abc", Some("demo-1"));
        let owner = &rs["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "Deployment");
        assert_eq!(owner["uid"], deploy["metadata"]["uid"]);
        assert_eq!(rs["metadata"]["labels"]["pod-template-hash"], "abc");
        let selector = &rs["spec"]["selector"]["matchLabels"];
        assert_eq!(
            selector,
            &json!({ "app": "web", "pod-template-hash": "abc" })
        );
        assert_eq!(rs["spec"]["template"]["metadata"]["labels"], *selector);
        assert_eq!(
            rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"],
            "4"
        );
        for obj in [&deploy, &rs] {
            watchd::codec::pbjson::encode_stored(obj).expect("valid apps/v1");
        }
    }

    #[test]
    fn status_follows_counts_and_is_idempotent() {
        let mut rng = Rng::new(2);
        let mut rs = replica_set("ns", "api", "h", 4, json!({}), &mut rng);
        set_replica_set_status(
            &mut rs,
            ReplicaCounts {
                replicas: 4,
                ready: 3,
            },
        );
        assert_eq!(
            rs["status"],
            json!({ "replicas": 4, "fullyLabeledReplicas": 4, "readyReplicas": 3,
                    "availableReplicas": 3, "observedGeneration": 1 })
        );
        set_replica_set_status(&mut rs, ReplicaCounts::default());
        assert_eq!(
            rs["status"],
            json!({ "replicas": 0, "observedGeneration": 1 })
        );

        let mut deploy = deployment("ns", "api", 4, &mut rng);
        let all = ReplicaCounts {
            replicas: 4,
            ready: 4,
        };
        set_deployment_status(&mut deploy, all, "api-h", "2026-01-01T00:00:00Z");
        let first = deploy.clone();
        set_deployment_status(&mut deploy, all, "api-h", "2026-01-01T00:05:00Z");
        assert_eq!(deploy, first, "same counts, same status");
        let conds = &deploy["status"]["conditions"];
        assert_eq!(conds[0]["type"], "Available");
        assert_eq!(conds[0]["status"], "True");
        assert_eq!(conds[1]["reason"], "NewReplicaSetAvailable");
        assert!(deploy["status"].get("unavailableReplicas").is_none());

        // 4 replicas tolerate 1 unavailable; 2 ready is below minimum.
        let some = ReplicaCounts {
            replicas: 4,
            ready: 2,
        };
        set_deployment_status(&mut deploy, some, "api-h", "2026-01-01T00:10:00Z");
        let conds = &deploy["status"]["conditions"];
        assert_eq!(conds[0]["status"], "False");
        assert_eq!(conds[0]["lastTransitionTime"], "2026-01-01T00:10:00Z");
        assert_eq!(
            conds[1]["reason"], "NewReplicaSetAvailable",
            "stays complete"
        );
        assert_eq!(conds[1]["lastUpdateTime"], "2026-01-01T00:00:00Z");
        assert_eq!(deploy["status"]["unavailableReplicas"], 2);
        watchd::codec::pbjson::encode_stored(&deploy).expect("valid Deployment");
        watchd::codec::pbjson::encode_stored(&rs).expect("valid ReplicaSet");
    }
}
