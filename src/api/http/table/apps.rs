//! apps/v1 Deployments: Name, Ready, Up-to-date, Available, Age; wide: Containers, Images,
//! Selector.

use serde_json::Value;

use super::{
    age_cell, age_column, at, column, container_cells, int_at, list_at, name_cell, name_column,
    str_at, string_cell, Column,
};

/// Deployment columns.
pub(super) fn deployment_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Ready",
            "string",
            "",
            0,
            "Ready pods out of the desired replicas.",
        ),
        column(
            "Up-to-date",
            "string",
            "",
            0,
            "Pods running the latest pod template.",
        ),
        column(
            "Available",
            "string",
            "",
            0,
            "Pods available to serve (ready for minReadySeconds).",
        ),
        age_column(),
        column(
            "Containers",
            "string",
            "",
            1,
            "Names of the pod template's containers.",
        ),
        column(
            "Images",
            "string",
            "",
            1,
            "Images of the pod template's containers.",
        ),
        column(
            "Selector",
            "string",
            "",
            1,
            "The label selector picking the deployment's pods.",
        ),
    ]
}

/// A deployment row; spec.replicas defaults to 1 as the API does.
pub(super) fn deployment_cells(d: &Value, now_unix: i64) -> Vec<Value> {
    let desired = match at(d, &["spec", "replicas"]) {
        Some(r) if !r.is_null() => super::int_of(r),
        _ => 1,
    };
    let ready = int_at(d, &["status", "readyReplicas"]);
    let (names, images) = container_cells(list_at(d, &["spec", "template", "spec", "containers"]));
    vec![
        name_cell(d),
        string_cell(format!("{ready}/{desired}")),
        Value::from(int_at(d, &["status", "updatedReplicas"])),
        Value::from(int_at(d, &["status", "availableReplicas"])),
        age_cell(d, now_unix),
        string_cell(names),
        string_cell(images),
        string_cell(selector_string(at(d, &["spec", "selector"]))),
    ]
}

/// A metav1.LabelSelector as kube-apiserver prints it after converting it to a label
/// selector: requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
/// comma-joined; "" for a missing or empty selector; `<invalid>` for an unknown operator
/// or values that do not fit the operator.
fn selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return String::new();
    };
    let mut reqs: Vec<(&str, String)> = Vec::new();
    if let Some(labels) = at(selector, &["matchLabels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            reqs.push((key, format!("{key}={}", value.as_str().unwrap_or(""))));
        }
    }
    for expr in list_at(selector, &["matchExpressions"]) {
        let key = str_at(expr, &["key"]);
        let mut values: Vec<&str> = list_at(expr, &["values"])
            .iter()
            .map(|v| v.as_str().unwrap_or(""))
            .collect();
        values.sort_unstable();
        let text = match (str_at(expr, &["operator"]), values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_owned(),
            ("DoesNotExist", true) => format!("!{key}"),
            _ => return "<invalid>".into(),
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<String> = reqs.into_iter().map(|(_, text)| text).collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::test_support::{info, names, ts, T0};
    use super::super::{cells, columns};
    use super::selector_string;

    fn row(obj: &Value) -> Vec<Value> {
        cells(&info("apps", "deployments", "Deployment"), obj, T0)
    }

    #[test]
    fn columns_match_upstream() {
        let cols = columns(&info("apps", "deployments", "Deployment"));
        assert_eq!(
            names(&cols),
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        let prio: Vec<i32> = cols.iter().map(|c| c.priority).collect();
        assert_eq!(prio, [0, 0, 0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn rolling_deployment() {
        let d = json!({
            "metadata": {"name": "coredns", "creationTimestamp": ts(-30 * 86400)},
            "spec": {"replicas": 3,
                     "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                     "template": {"spec": {"containers": [
                         {"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.11.1"},
                         {"name": "sidecar", "image": "busybox"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 1,
                       "availableReplicas": 2}
        });
        assert_eq!(
            row(&d),
            [
                json!("coredns"),
                json!("2/3"),
                json!(1),
                json!(2),
                json!("30d"),
                json!("coredns,sidecar"),
                json!("registry.k8s.io/coredns/coredns:v1.11.1,busybox"),
                json!("k8s-app=kube-dns")
            ]
        );
    }

    #[test]
    fn missing_fields_use_api_defaults_and_zeros() {
        assert_eq!(
            row(&json!({"metadata": {"name": "d"}})),
            [
                json!("d"),
                json!("0/1"),
                json!(0),
                json!(0),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("")
            ]
        );
        let scaled_to_zero = json!({"spec": {"replicas": 0}});
        assert_eq!(row(&scaled_to_zero)[1], json!("0/0"));
    }

    #[test]
    fn selectors() {
        assert_eq!(selector_string(None), "");
        assert_eq!(selector_string(Some(&json!({}))), "");
        let sel = json!({
            "matchLabels": {"tier": "web", "app": "shop"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "canary"]},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []}
            ]
        });
        assert_eq!(
            selector_string(Some(&sel)),
            "app=shop,env in (canary,prod),gpu,!legacy,tier=web,zone notin (b)"
        );
        let bad_op = json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(selector_string(Some(&bad_op)), "<invalid>");
        let no_values = json!({"matchExpressions": [{"key": "a", "operator": "In"}]});
        assert_eq!(selector_string(Some(&no_values)), "<invalid>");
    }
}
