//! autoscaling/v2 HorizontalPodAutoscalers.
//!
//! API defaults the printer sees: `minReplicas` is 1, and an autoscaler without metrics
//! gets one: CPU at 80% average utilization (so `<none>` never shows for a stored object).

use serde_json::{json, Value};

use super::format::quantity_ptr;
use super::{
    age_cell, age_column, at, column, int_at, int_of, int_or, list_at, name_cell, name_column,
    obj_at, str_at, string_cell, BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[BuiltinPrinter::new(
    "autoscaling",
    "horizontalpodautoscalers",
    hpa_columns,
    hpa_cells,
)];

/// How many metrics the Targets cell shows before "+ N more...".
const SHOWN_METRICS: usize = 2;

/// HorizontalPodAutoscaler columns.
fn hpa_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Reference",
            "string",
            "",
            0,
            "Object whose replicas are scaled.",
        ),
        column(
            "Targets",
            "string",
            "",
            0,
            "Current and target value of each metric.",
        ),
        column(
            "MinPods",
            "string",
            "",
            0,
            "Fewest replicas to scale down to.",
        ),
        column("MaxPods", "string", "", 0, "Most replicas to scale up to."),
        column("Replicas", "string", "", 0, "Number of replicas now."),
        age_column(),
    ]
}

/// A horizontal pod autoscaler row.
fn hpa_cells(hpa: &Value, now_unix: i64) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        str_at(hpa, &["spec", "scaleTargetRef", "kind"]),
        str_at(hpa, &["spec", "scaleTargetRef", "name"])
    );
    let default_metrics = [json!({"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}})];
    let specs = match list_at(hpa, &["spec", "metrics"]) {
        [] => &default_metrics[..],
        specs => specs,
    };
    vec![
        name_cell(hpa),
        string_cell(reference),
        string_cell(format_metrics(
            specs,
            list_at(hpa, &["status", "currentMetrics"]),
        )),
        string_cell(int_or(hpa, &["spec", "minReplicas"], 1).to_string()),
        Value::from(int_at(hpa, &["spec", "maxReplicas"])),
        Value::from(int_at(hpa, &["status", "currentReplicas"])),
        age_cell(hpa, now_unix),
    ]
}

/// `formatHPAMetrics`: `current/target` per metric (matched to the status by position),
/// the first two ", "-joined, then " + N more...".
fn format_metrics(specs: &[Value], statuses: &[Value]) -> String {
    let texts: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| metric_text(spec, statuses.get(i)))
        .collect();
    let text = texts[..texts.len().min(SHOWN_METRICS)].join(", ");
    if texts.len() > SHOWN_METRICS {
        format!("{text} + {} more...", texts.len() - SHOWN_METRICS)
    } else {
        text
    }
}

/// One metric's `current/target`. A missing current value is `<unknown>`; a quantity the
/// printer dereferences without checking prints as Go prints a nil `*Quantity`, `<nil>`.
fn metric_text(spec: &Value, status: Option<&Value>) -> String {
    let source = |key: &str| at(spec, &[key]).unwrap_or(&Value::Null);
    let current = |key: &str| status.and_then(|s| obj_at(s, &[key]));
    match str_at(spec, &["type"]) {
        "External" => value_text(source("external"), current("external")),
        "Object" => value_text(source("object"), current("object")),
        "Pods" => {
            let now = current("pods").map_or("<unknown>".into(), |c| {
                quantity_ptr(at(c, &["current", "averageValue"]))
            });
            let target = quantity_ptr(at(source("pods"), &["target", "averageValue"]));
            format!("{now}/{target}")
        }
        "Resource" => resource_text(source("resource"), current("resource")),
        "ContainerResource" => {
            resource_text(source("containerResource"), current("containerResource"))
        }
        _ => "<unknown type>".into(),
    }
}

/// An External or Object metric: by average value (`… (avg)`) or by value.
fn value_text(source: &Value, current: Option<&Value>) -> String {
    let target = |field: &str| at(source, &["target", field]).filter(|v| !v.is_null());
    let now = |field: &str| current.and_then(|c| at(c, &["current", field]));
    match target("averageValue") {
        Some(avg) => {
            let now = match now("averageValue") {
                Some(v) if !v.is_null() => quantity_ptr(Some(v)),
                _ => "<unknown>".into(),
            };
            format!("{now}/{} (avg)", quantity_ptr(Some(avg)))
        }
        None => {
            let now = match current {
                Some(_) => quantity_ptr(now("value")),
                None => "<unknown>".into(),
            };
            format!("{now}/{}", quantity_ptr(target("value")))
        }
    }
}

/// A Resource or ContainerResource metric: `name: current/target`, by average value or by
/// average utilization (`<auto>` when the target has neither).
fn resource_text(source: &Value, current: Option<&Value>) -> String {
    let name = str_at(source, &["name"]);
    let set = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    match set(at(source, &["target", "averageValue"])) {
        Some(avg) => {
            let now = current.map_or("<unknown>".into(), |c| {
                quantity_ptr(at(c, &["current", "averageValue"]))
            });
            format!("{name}: {now}/{}", quantity_ptr(Some(&avg)))
        }
        None => {
            let percent = |v: Option<&Value>| set(v).map(|p| format!("{}%", int_of(&p)));
            let now = percent(current.and_then(|c| at(c, &["current", "averageUtilization"])))
                .unwrap_or_else(|| "<unknown>".into());
            let target = percent(at(source, &["target", "averageUtilization"]))
                .unwrap_or_else(|| "<auto>".into());
            format!("{name}: {now}/{target}")
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    fn hpa(obj: &Value) -> Vec<Value> {
        row("autoscaling", "horizontalpodautoscalers", obj)
    }

    #[test]
    fn columns_match_upstream() {
        assert_columns(
            "autoscaling",
            "horizontalpodautoscalers",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Reference",
                    "string",
                    "",
                    0,
                    "Object whose replicas are scaled.",
                ),
                (
                    "Targets",
                    "string",
                    "",
                    0,
                    "Current and target value of each metric.",
                ),
                (
                    "MinPods",
                    "string",
                    "",
                    0,
                    "Fewest replicas to scale down to.",
                ),
                ("MaxPods", "string", "", 0, "Most replicas to scale up to."),
                ("Replicas", "string", "", 0, "Number of replicas now."),
                ("Age", "string", "", 0, AGE),
            ],
        );
    }

    #[test]
    fn cpu_and_memory_autoscaler() {
        let h = json!({
            "metadata": {"name": "web", "creationTimestamp": ts(-86400 * 3)},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 10,
                     "metrics": [
                         {"type": "Resource", "resource": {"name": "cpu",
                             "target": {"type": "Utilization", "averageUtilization": 60}}},
                         {"type": "Resource", "resource": {"name": "memory",
                             "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                         {"type": "Pods", "pods": {"metric": {"name": "qps"},
                             "target": {"type": "AverageValue", "averageValue": "1k"}}}]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 45, "averageValue": "230m"}}},
                {"type": "Resource", "resource": {"name": "memory",
                    "current": {"averageValue": "310Mi"}}}]}
        });
        assert_eq!(
            hpa(&h),
            [
                json!("web"),
                json!("Deployment/web"),
                json!("cpu: 45%/60%, memory: 310Mi/500Mi + 1 more..."),
                json!("2"),
                json!(10),
                json!(3),
                json!("3d")
            ]
        );
    }

    #[test]
    fn empty_autoscaler_gets_the_default_cpu_metric() {
        assert_eq!(
            hpa(&json!({})),
            [
                json!(""),
                json!("/"),
                json!("cpu: <unknown>/80%"),
                json!("1"),
                json!(0),
                json!(0),
                json!("<unknown>")
            ]
        );
    }

    #[test]
    fn metric_kinds() {
        let targets = |metrics: Value, current: Value| {
            let h = json!({"spec": {"metrics": metrics}, "status": {"currentMetrics": current}});
            hpa(&h)[2].as_str().unwrap_or_default().to_owned()
        };
        let external = json!([{"type": "External", "external": {"metric": {"name": "queue"},
                               "target": {"type": "Value", "value": "30"}}},
                              {"type": "Object", "object": {"metric": {"name": "rps"},
                               "target": {"type": "AverageValue", "averageValue": "100"}}}]);
        assert_eq!(
            targets(external.clone(), json!([])),
            "<unknown>/30, <unknown>/100 (avg)"
        );
        let current = json!([{"type": "External", "external": {"current": {"value": "12"}}},
                             {"type": "Object", "object": {"current": {"averageValue": "80"}}}]);
        assert_eq!(targets(external, current), "12/30, 80/100 (avg)");
        let odd = json!([{"type": "Pods", "pods": {"target": {}}},
                         {"type": "ContainerResource", "containerResource": {
                             "name": "cpu", "container": "app", "target": {"type": "Utilization"}}}]);
        assert_eq!(
            targets(odd, json!([{"type": "Pods", "pods": {"current": {}}}])),
            "<nil>/<nil>, cpu: <unknown>/<auto>"
        );
        assert_eq!(
            targets(json!([{"type": "Future"}]), json!(null)),
            "<unknown type>"
        );
    }
}
