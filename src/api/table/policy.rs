//! Limits on workloads: policy/v1 PodDisruptionBudgets and core v1 ResourceQuotas.
//!
//! LimitRanges have no printer upstream: they get the default Name / Created At.

use serde_json::Value;

use super::format::{int_or_string, quantity};
use super::{
    age_cell, age_column, at, column, int_at, name_cell, name_column, string_cell, BuiltinPrinter,
    Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("policy", "poddisruptionbudgets", pdb_columns, pdb_cells),
    BuiltinPrinter::new("", "resourcequotas", quota_columns, quota_cells),
];

/// PodDisruptionBudget columns.
fn pdb_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Min Available",
            "string",
            "",
            0,
            "Pods that must stay available.",
        ),
        column(
            "Max Unavailable",
            "string",
            "",
            0,
            "Pods that may be unavailable at once.",
        ),
        column(
            "Allowed Disruptions",
            "integer",
            "",
            0,
            "Pods that may be disrupted now.",
        ),
        age_column(),
    ]
}

/// A pod disruption budget row: each bound as its number or percentage, `N/A` when unset.
fn pdb_cells(pdb: &Value, now_unix: i64) -> Vec<Value> {
    let bound = |field: &str| match at(pdb, &["spec", field]) {
        Some(v) if !v.is_null() => int_or_string(v),
        _ => "N/A".into(),
    };
    vec![
        name_cell(pdb),
        string_cell(bound("minAvailable")),
        string_cell(bound("maxUnavailable")),
        Value::from(int_at(pdb, &["status", "disruptionsAllowed"])),
        age_cell(pdb, now_unix),
    ]
}

/// ResourceQuota columns.
fn quota_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Request",
            "string",
            "",
            0,
            "Used and allowed amount of each quota resource other than limits.",
        ),
        column(
            "Limit",
            "string",
            "",
            0,
            "Used and allowed amount of each limits quota resource.",
        ),
        age_column(),
    ]
}

/// A resource quota row: `resource: used/hard` for every resource in status.hard, sorted by
/// name, ", "-joined; `limits.*` resources go to Limit, all others to Request.
fn quota_cells(quota: &Value, now_unix: i64) -> Vec<Value> {
    let mut resources: Vec<(&String, &Value)> = at(quota, &["status", "hard"])
        .and_then(Value::as_object)
        .map(|hard| hard.iter().collect())
        .unwrap_or_default();
    resources.sort_by(|a, b| a.0.cmp(b.0));
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for (name, hard) in resources {
        let used = quantity(at(quota, &["status", "used", name]));
        let text = format!("{name}: {used}/{}", quantity(Some(hard)));
        let mut pieces = name.split('.');
        if pieces.next() == Some("limits") && pieces.next().is_some() {
            limits.push(text);
        } else {
            requests.push(text);
        }
    }
    vec![
        name_cell(quota),
        string_cell(requests.join(", ")),
        string_cell(limits.join(", ")),
        age_cell(quota, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, info, names, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    #[test]
    fn pdb_columns_match_upstream() {
        assert_columns(
            "policy",
            "poddisruptionbudgets",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Min Available",
                    "string",
                    "",
                    0,
                    "Pods that must stay available.",
                ),
                (
                    "Max Unavailable",
                    "string",
                    "",
                    0,
                    "Pods that may be unavailable at once.",
                ),
                (
                    "Allowed Disruptions",
                    "integer",
                    "",
                    0,
                    "Pods that may be disrupted now.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
    }

    #[test]
    fn pod_disruption_budgets() {
        let pdb = json!({"metadata": {"name": "zk", "creationTimestamp": ts(-600)},
                         "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "zk"}}},
                         "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            row("policy", "poddisruptionbudgets", &pdb),
            [
                json!("zk"),
                json!("2"),
                json!("N/A"),
                json!(1),
                json!("10m")
            ]
        );
        let pct = json!({"spec": {"maxUnavailable": "25%"}});
        assert_eq!(
            row("policy", "poddisruptionbudgets", &pct),
            [
                json!(""),
                json!("N/A"),
                json!("25%"),
                json!(0),
                json!("<unknown>")
            ]
        );
    }

    #[test]
    fn quota_columns_match_upstream() {
        assert_columns(
            "",
            "resourcequotas",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Request",
                    "string",
                    "",
                    0,
                    "Used and allowed amount of each quota resource other than limits.",
                ),
                (
                    "Limit",
                    "string",
                    "",
                    0,
                    "Used and allowed amount of each limits quota resource.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
    }

    #[test]
    fn resource_quotas() {
        let quota = json!({
            "metadata": {"name": "compute", "creationTimestamp": ts(-3 * 86400)},
            "status": {
                "hard": {"requests.cpu": "4", "limits.memory": "16Gi", "pods": "20",
                         "limits.cpu": "8", "requests.memory": "8Gi", "limits": "1"},
                "used": {"requests.cpu": "1500m", "limits.cpu": "3", "pods": "7",
                         "requests.memory": "2Gi"}
            }
        });
        assert_eq!(
            row("", "resourcequotas", &quota),
            [
                json!("compute"),
                json!("limits: 0/1, pods: 7/20, requests.cpu: 1500m/4, requests.memory: 2Gi/8Gi"),
                json!("limits.cpu: 3/8, limits.memory: 0/16Gi"),
                json!("3d")
            ]
        );
        assert_eq!(
            row(
                "",
                "resourcequotas",
                &json!({"spec": {"hard": {"pods": "5"}}})
            ),
            [json!(""), json!(""), json!(""), json!("<unknown>")]
        );
    }

    #[test]
    fn limit_ranges_have_no_printer() {
        let cols = super::super::columns(&info("", "limitranges", "LimitRange"));
        assert_eq!(names(&cols), ["Name", "Created At"]);
    }
}
