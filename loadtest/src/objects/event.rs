//! `v1` Events, as kube-apiserver stores what the components report: the
//! kubelet and the controllers through the legacy recorder (`source`,
//! `firstTimestamp`/`lastTimestamp`, `count`), the scheduler through
//! `events.k8s.io/v1` (`eventTime`, `action`, `reportingComponent`; the
//! legacy fields empty). Both live under `/registry/events/<ns>/<name>`.

use serde_json::{json, Value};

use super::{metadata, now_rfc3339, now_rfc3339_micros, Rng};

/// Who reports an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source<'a> {
    /// The kubelet of a node.
    Kubelet(&'a str),
    /// `default-scheduler`, through the events.k8s.io API.
    Scheduler,
    /// A kube-controller-manager controller (`replicaset-controller`, ...).
    Controller(&'static str),
}

/// What happened to which object.
#[derive(Clone, Debug, PartialEq)]
pub struct Occurrence<'a> {
    /// The `involvedObject` ([`involved`]).
    pub involved: Value,
    /// `reason`, CamelCase (`Scheduled`, `Pulled`, ...).
    pub reason: &'static str,
    /// `message`, for people.
    pub message: String,
    /// `type` Warning rather than Normal.
    pub warning: bool,
    /// The reporter.
    pub source: Source<'a>,
}

/// The `involvedObject` reference to a stored object at `resource_version`,
/// to one of its containers when `field_path` is given
/// (`spec.containers{web}`).
pub fn involved(obj: &Value, resource_version: i64, field_path: Option<&str>) -> Value {
    let meta = &obj["metadata"];
    let mut r = json!({
        "kind": obj["kind"],
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
        "apiVersion": obj["apiVersion"],
        "resourceVersion": resource_version.to_string(),
    });
    if let Some(path) = field_path {
        r["fieldPath"] = json!(path);
    }
    r
}

/// The name the recorders give an event: the object's name and the time in
/// hex nanoseconds (`web-7d4b9c-x2x4b.17f3a2b4c5d6e7f8`).
pub fn event_name(involved: &Value, unix_nanos: u128) -> String {
    let name = involved["name"].as_str().unwrap_or("unknown");
    format!("{name}.{unix_nanos:x}")
}

/// Builds the Event `name` for `what`, in the involved object's namespace.
pub fn event(name: &str, what: &Occurrence<'_>, rng: &mut Rng) -> Value {
    let ns = what.involved["namespace"].as_str().unwrap_or("default");
    let mut ev = json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": metadata(name, Some(ns), &[], rng),
        "involvedObject": what.involved,
        "reason": what.reason,
        "message": what.message,
        "type": if what.warning { "Warning" } else { "Normal" },
    });
    let now = now_rfc3339();
    let legacy = |component: &str, host: Option<&str>| {
        let mut source = json!({ "component": component });
        if let Some(host) = host {
            source["host"] = json!(host);
        }
        json!({
            "source": source,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "eventTime": null,
            "reportingComponent": component,
            "reportingInstance": host.unwrap_or_default(),
        })
    };
    let reporting = match what.source {
        Source::Kubelet(node) => legacy("kubelet", Some(node)),
        Source::Controller(component) => legacy(component, None),
        Source::Scheduler => json!({
            "source": {},
            "firstTimestamp": null, "lastTimestamp": null,
            "eventTime": now_rfc3339_micros(),
            "action": "Binding",
            "reportingComponent": "default-scheduler",
            "reportingInstance": "default-scheduler-control-plane",
        }),
    };
    super::pod::merge(&mut ev, reporting);
    ev
}

/// The same event seen again: the recorder bumps `count` and `lastTimestamp`.
pub fn repeat(ev: &mut Value, now: &str) {
    ev["count"] = json!(ev["count"].as_u64().unwrap_or(1) + 1);
    ev["lastTimestamp"] = json!(now);
}

#[cfg(test)]
mod tests {
    use super::super::tests::assert_common;
    use super::*;

    fn pod() -> Value {
        json!({ "kind": "Pod", "apiVersion": "v1",
                "metadata": { "name": "web-abc-x2x4b", "namespace": "demo-1", "uid": "u-1" } })
    }

    #[test]
    fn kubelet_events_aggregate() {
        let mut rng = Rng::new(1);
        let what = Occurrence {
            involved: involved(&pod(), 42, Some("spec.containers{web}")),
            reason: "Started",
            message: "Started container web".to_owned(),
            warning: false,
            source: Source::Kubelet("node-1"),
        };
        let name = event_name(&what.involved, 0x17f3_a2b4);
        assert_eq!(name, "web-abc-x2x4b.17f3a2b4");
        let mut ev = event(&name, &what, &mut rng);
        assert_common(&ev, "Event", &name, Some("demo-1"));
        assert_eq!(ev["involvedObject"]["resourceVersion"], "42");
        assert_eq!(ev["involvedObject"]["fieldPath"], "spec.containers{web}");
        assert_eq!(
            ev["source"],
            json!({ "component": "kubelet", "host": "node-1" })
        );
        assert_eq!(ev["reportingInstance"], "node-1");
        assert_eq!(ev["count"], 1);
        assert_eq!(ev["type"], "Normal");
        assert_eq!(ev["firstTimestamp"], ev["lastTimestamp"]);
        repeat(&mut ev, "2099-01-01T00:00:00Z");
        assert_eq!(ev["count"], 2);
        assert_eq!(ev["lastTimestamp"], "2099-01-01T00:00:00Z");
        let stored = watchd::codec::pbjson::encode_stored(&ev).expect("valid Event");
        let back = crate::demo::Storage::decode(&stored).expect("decodes");
        assert_eq!(back, ev, "renders back the same, eventTime null included");
    }

    #[test]
    fn scheduler_events_use_the_events_api_fields() {
        let mut rng = Rng::new(2);
        let what = Occurrence {
            involved: involved(&pod(), 7, None),
            reason: "Scheduled",
            message: "Successfully assigned demo-1/web-abc-x2x4b to node-2".to_owned(),
            warning: false,
            source: Source::Scheduler,
        };
        let ev = event("e", &what, &mut rng);
        assert_eq!(ev["reportingComponent"], "default-scheduler");
        assert_eq!(ev["action"], "Binding");
        assert_eq!(ev["source"], json!({}));
        assert!(ev["firstTimestamp"].is_null() && ev.get("count").is_none());
        assert_eq!(ev["eventTime"].as_str().map(str::len), Some(27));
        let warning = Occurrence {
            warning: true,
            source: Source::Controller("replicaset-controller"),
            ..what
        };
        let ev = event("w", &warning, &mut rng);
        assert_eq!(ev["type"], "Warning");
        assert_eq!(ev["source"]["component"], "replicaset-controller");
        assert_eq!(ev["reportingInstance"], "");
        watchd::codec::pbjson::encode_stored(&ev).expect("valid Event");
    }
}
