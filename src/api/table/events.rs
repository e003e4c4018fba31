//! Core v1 Events: Last Seen, Type, Reason, Object, Message; wide: Subobject, Source,
//! First Seen, Count, Name.
//!
//! Events written through events.k8s.io/v1 leave the deprecated core fields empty, so the
//! printer falls back: eventTime for First Seen, series for Last Seen and Count,
//! reportingController / reportingInstance for Source, and a count of 1.

use serde_json::Value;

use super::{
    at, column, int_at, name_cell, name_column, obj_at, since, str_at, string_cell, time_at,
    BuiltinPrinter, Column,
};

/// Core v1 events, and events.k8s.io events: kube-apiserver prints both with the Event
/// printer because both are the same internal Event, and etcd stores core v1 Events.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("", "events", columns, cells),
    BuiltinPrinter::new("events.k8s.io", "events", columns, events_v1_cells),
];

/// events.k8s.io/v1 names of core Event fields (the conversion kube-apiserver applies,
/// as `codec::convert` does): (events.k8s.io/v1, core/v1).
const EVENTS_V1_NAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// An events.k8s.io/v1 Event row: the same internal Event, read under its core names.
fn events_v1_cells(ev: &Value, now_unix: i64) -> Vec<Value> {
    let Value::Object(fields) = ev else {
        return cells(ev, now_unix);
    };
    let core = fields
        .iter()
        .map(|(k, v)| {
            let name = EVENTS_V1_NAMES
                .iter()
                .find(|(v1, _)| v1 == k)
                .map_or(k.as_str(), |(_, core)| core);
            (name.to_string(), v.clone())
        })
        .collect();
    cells(&Value::Object(core), now_unix)
}

/// Event columns, in kube-apiserver's order and priorities.
fn columns() -> Vec<Column> {
    let mut name = name_column();
    name.priority = 1;
    vec![
        column(
            "Last Seen",
            "string",
            "",
            0,
            "How long ago the event last happened.",
        ),
        column(
            "Type",
            "string",
            "",
            0,
            "Type of the event, such as Normal or Warning.",
        ),
        column("Reason", "string", "", 0, "Short reason for the event."),
        column("Object", "string", "", 0, "Object the event is about."),
        column(
            "Subobject",
            "string",
            "",
            1,
            "Part of the object the event is about, if any.",
        ),
        column(
            "Source",
            "string",
            "",
            1,
            "Component that reported the event.",
        ),
        column("Message", "string", "", 0, "Message of the event."),
        column(
            "First Seen",
            "string",
            "",
            1,
            "How long ago the event first happened.",
        ),
        column(
            "Count",
            "string",
            "",
            1,
            "How many times the event has happened.",
        ),
        name,
    ]
}

/// An event row.
fn cells(ev: &Value, now_unix: i64) -> Vec<Value> {
    let first_seen = match time_at(ev, &["firstTimestamp"]) {
        Some(t) => since(now_unix, Some(t)),
        None => since(now_unix, time_at(ev, &["eventTime"])),
    };
    let mut last_seen = match time_at(ev, &["lastTimestamp"]) {
        Some(t) => since(now_unix, Some(t)),
        None => first_seen.clone(),
    };
    let mut count = int_at(ev, &["count"]);
    if let Some(series) = obj_at(ev, &["series"]) {
        last_seen = since(now_unix, time_at(series, &["lastObservedTime"]));
        count = int_at(series, &["count"]);
    } else if count == 0 {
        count = 1;
    }

    let kind = str_at(ev, &["involvedObject", "kind"]).to_lowercase();
    let object = match str_at(ev, &["involvedObject", "name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };

    vec![
        string_cell(last_seen),
        string_cell(str_at(ev, &["type"])),
        string_cell(str_at(ev, &["reason"])),
        string_cell(object),
        string_cell(str_at(ev, &["involvedObject", "fieldPath"])),
        string_cell(source(ev)),
        string_cell(str_at(ev, &["message"]).trim()),
        string_cell(first_seen),
        Value::from(count),
        name_cell(ev),
    ]
}

/// `component` or `component, host`, each falling back to the reporting controller and
/// instance when empty.
fn source(ev: &Value) -> String {
    let first = |a: &[&str], b: &str| -> String {
        match at(ev, a).and_then(Value::as_str).unwrap_or("") {
            "" => str_at(ev, &[b]).to_owned(),
            s => s.to_owned(),
        }
    };
    let component = first(&["source", "component"], "reportingComponent");
    let instance = first(&["source", "host"], "reportingInstance");
    if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::test_support::{info, names, ts, T0};
    use super::super::{cells, columns};

    fn row(obj: &Value) -> Vec<Value> {
        cells(&info("", "events", "Event"), obj, T0)
    }

    #[test]
    fn events_v1_rows_read_the_same_event_under_its_core_names() {
        let core = json!({"metadata": {"name": "e1", "creationTimestamp": ts(0)},
            "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "message": "Back-off restarting", "type": "Warning",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": ts(-120), "lastTimestamp": ts(-60), "count": 3});
        let v1 = json!({"metadata": {"name": "e1", "creationTimestamp": ts(0)},
            "regarding": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "note": "Back-off restarting", "type": "Warning",
            "deprecatedSource": {"component": "kubelet", "host": "n1"},
            "deprecatedFirstTimestamp": ts(-120), "deprecatedLastTimestamp": ts(-60),
            "deprecatedCount": 3});
        assert_eq!(super::events_v1_cells(&v1, T0), super::cells(&core, T0));
    }

    #[test]
    fn columns_match_upstream() {
        let cols = columns(&info("", "events", "Event"));
        assert_eq!(
            names(&cols),
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ]
        );
        let prio: Vec<i32> = cols.iter().map(|c| c.priority).collect();
        assert_eq!(prio, [0, 0, 0, 0, 1, 1, 0, 1, 1, 1]);
        assert_eq!(cols[9].format, "name");
        assert!(cols[..9].iter().all(|c| c.format.is_empty()));
    }

    #[test]
    fn core_event() {
        let ev = json!({
            "metadata": {"name": "web-0.17a2b3c4d5e6f7a8", "namespace": "shop"},
            "involvedObject": {"kind": "Pod", "name": "web-0",
                               "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "type": "Warning",
            "message": "Back-off restarting failed container app\n",
            "source": {"component": "kubelet", "host": "node-a"},
            "firstTimestamp": ts(-3 * 3600), "lastTimestamp": ts(-65), "count": 42
        });
        assert_eq!(
            row(&ev),
            [
                json!("65s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-0"),
                json!("spec.containers{app}"),
                json!("kubelet, node-a"),
                json!("Back-off restarting failed container app"),
                json!("3h"),
                json!(42),
                json!("web-0.17a2b3c4d5e6f7a8")
            ]
        );
    }

    #[test]
    fn events_api_event_with_series() {
        let ev = json!({
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Node"},
            "reason": "Rebooted", "type": "Normal",
            "eventTime": "2023-12-31T23:00:00.000000Z",
            "firstTimestamp": null, "lastTimestamp": null,
            "reportingComponent": "kubelet", "reportingInstance": "node-b",
            "series": {"count": 4, "lastObservedTime": "2023-12-31T23:59:00.500000Z"}
        });
        let r = row(&ev);
        assert_eq!(r[0], json!("59s"));
        assert_eq!(r[3], json!("node"));
        assert_eq!(r[5], json!("kubelet, node-b"));
        assert_eq!(r[7], json!("60m"));
        assert_eq!(r[8], json!(4));
    }

    #[test]
    fn singleton_and_empty_events() {
        let ev = json!({"eventTime": ts(-10), "reportingComponent": "scheduler"});
        let r = row(&ev);
        assert_eq!(r[0], json!("10s"));
        assert_eq!(r[5], json!("scheduler"));
        assert_eq!(r[8], json!(1));
        assert_eq!(
            row(&json!({})),
            [
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!(""),
                json!(""),
                json!(""),
                json!(""),
                json!("<unknown>"),
                json!(1),
                json!("")
            ]
        );
    }
}
