//! apps/v1 workloads: Deployments, ReplicaSets, StatefulSets and DaemonSets.
//!
//! `spec.replicas` is a pointer that the API defaults to 1; the printers see the defaulted
//! value, so an unset one prints as 1 here too.

use serde_json::Value;

use super::format::{format_label_selector, label_selector};
use super::templates::{template_cells, template_columns};
use super::{
    age_cell, age_column, at, column, format_labels, int_at, int_or, name_cell, name_column,
    string_cell, BuiltinPrinter, Column,
};

/// The apps/v1 printers.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("apps", "deployments", deployment_columns, deployment_cells),
    BuiltinPrinter::new(
        "apps",
        "replicasets",
        replica_set_columns,
        replica_set_cells,
    ),
    BuiltinPrinter::new(
        "apps",
        "statefulsets",
        stateful_set_columns,
        stateful_set_cells,
    ),
    BuiltinPrinter::new("apps", "daemonsets", daemon_set_columns, daemon_set_cells),
];

/// The `Ready` column of deployments and stateful sets.
const DESC_READY_PODS: &str = "Ready pods, out of those wanted.";

fn spec(obj: &Value) -> &Value {
    at(obj, &["spec"]).unwrap_or(&Value::Null)
}

/// Deployment columns.
fn deployment_columns() -> Vec<Column> {
    let mut cols = vec![
        name_column(),
        column("Ready", "string", "", 0, DESC_READY_PODS),
        column(
            "Up-to-date",
            "string",
            "",
            0,
            "Pods that run the current pod template.",
        ),
        column("Available", "string", "", 0, "Pods that are available."),
        age_column(),
    ];
    cols.extend(template_columns());
    cols.push(column(
        "Selector",
        "string",
        "",
        1,
        "Label selector of the pods the deployment manages.",
    ));
    cols
}

/// A deployment row. The wide Selector is the converted selector's string ("" when it has
/// none, `<invalid>` when it cannot be converted), not FormatLabelSelector's.
fn deployment_cells(d: &Value, now_unix: i64) -> Vec<Value> {
    let desired = int_or(d, &["spec", "replicas"], 1);
    let ready = int_at(d, &["status", "readyReplicas"]);
    let selector =
        label_selector(at(d, &["spec", "selector"])).unwrap_or_else(|_| "<invalid>".into());
    let mut row = vec![
        name_cell(d),
        string_cell(format!("{ready}/{desired}")),
        Value::from(int_at(d, &["status", "updatedReplicas"])),
        Value::from(int_at(d, &["status", "availableReplicas"])),
        age_cell(d, now_unix),
    ];
    row.extend(template_cells(spec(d)));
    row.push(string_cell(selector));
    row
}

/// ReplicaSet columns.
fn replica_set_columns() -> Vec<Column> {
    let mut cols = vec![
        name_column(),
        column("Desired", "integer", "", 0, "Number of pods wanted."),
        column("Current", "integer", "", 0, "Number of pods that exist."),
        column("Ready", "integer", "", 0, "Number of pods that are ready."),
        age_column(),
    ];
    cols.extend(template_columns());
    cols.push(column(
        "Selector",
        "string",
        "",
        1,
        "Label selector of the pods the replica set manages.",
    ));
    cols
}

/// A replica set row.
fn replica_set_cells(rs: &Value, now_unix: i64) -> Vec<Value> {
    let mut row = vec![
        name_cell(rs),
        Value::from(int_or(rs, &["spec", "replicas"], 1)),
        Value::from(int_at(rs, &["status", "replicas"])),
        Value::from(int_at(rs, &["status", "readyReplicas"])),
        age_cell(rs, now_unix),
    ];
    row.extend(template_cells(spec(rs)));
    row.push(string_cell(format_label_selector(at(
        rs,
        &["spec", "selector"],
    ))));
    row
}

/// StatefulSet columns.
fn stateful_set_columns() -> Vec<Column> {
    let mut cols = vec![
        name_column(),
        column("Ready", "string", "", 0, DESC_READY_PODS),
        age_column(),
    ];
    cols.extend(template_columns());
    cols
}

/// A stateful set row.
fn stateful_set_cells(sts: &Value, now_unix: i64) -> Vec<Value> {
    let desired = int_or(sts, &["spec", "replicas"], 1);
    let ready = int_at(sts, &["status", "readyReplicas"]);
    let mut row = vec![
        name_cell(sts),
        string_cell(format!("{ready}/{desired}")),
        age_cell(sts, now_unix),
    ];
    row.extend(template_cells(spec(sts)));
    row
}

/// DaemonSet columns.
fn daemon_set_columns() -> Vec<Column> {
    let mut cols = vec![
        name_column(),
        column(
            "Desired",
            "integer",
            "",
            0,
            "Nodes that should run the daemon pod.",
        ),
        column(
            "Current",
            "integer",
            "",
            0,
            "Nodes that run the daemon pod.",
        ),
        column(
            "Ready",
            "integer",
            "",
            0,
            "Nodes where the daemon pod is ready.",
        ),
        column(
            "Up-to-date",
            "integer",
            "",
            0,
            "Nodes that run the current daemon pod.",
        ),
        column(
            "Available",
            "integer",
            "",
            0,
            "Nodes where the daemon pod is available.",
        ),
        column(
            "Node Selector",
            "string",
            "",
            0,
            "Node labels a node needs to run the daemon pod.",
        ),
        age_column(),
    ];
    cols.extend(template_columns());
    cols.push(column(
        "Selector",
        "string",
        "",
        1,
        "Label selector of the pods the daemon set manages.",
    ));
    cols
}

/// A daemon set row.
fn daemon_set_cells(ds: &Value, now_unix: i64) -> Vec<Value> {
    let status = |field: &str| Value::from(int_at(ds, &["status", field]));
    let node_selector = at(ds, &["spec", "template", "spec", "nodeSelector"]);
    let mut row = vec![
        name_cell(ds),
        status("desiredNumberScheduled"),
        status("currentNumberScheduled"),
        status("numberReady"),
        status("updatedNumberScheduled"),
        status("numberAvailable"),
        string_cell(format_labels(node_selector)),
        age_cell(ds, now_unix),
    ];
    row.extend(template_cells(spec(ds)));
    row.push(string_cell(format_label_selector(at(
        ds,
        &["spec", "selector"],
    ))));
    row
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::templates::{DESC_CONTAINERS as CONTAINERS, DESC_IMAGES as IMAGES};
    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    #[test]
    fn deployment_columns_match_upstream() {
        assert_columns(
            "apps",
            "deployments",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Ready", "string", "", 0, "Ready pods, out of those wanted."),
                (
                    "Up-to-date",
                    "string",
                    "",
                    0,
                    "Pods that run the current pod template.",
                ),
                ("Available", "string", "", 0, "Pods that are available."),
                ("Age", "string", "", 0, AGE),
                ("Containers", "string", "", 1, CONTAINERS),
                ("Images", "string", "", 1, IMAGES),
                (
                    "Selector",
                    "string",
                    "",
                    1,
                    "Label selector of the pods the deployment manages.",
                ),
            ],
        );
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
            row("apps", "deployments", &d),
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
    fn deployment_missing_fields_use_api_defaults_and_zeros() {
        assert_eq!(
            row("apps", "deployments", &json!({"metadata": {"name": "d"}})),
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
        assert_eq!(row("apps", "deployments", &scaled_to_zero)[1], json!("0/0"));
        let bad =
            json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}});
        assert_eq!(row("apps", "deployments", &bad)[7], json!("<invalid>"));
    }

    #[test]
    fn replica_set_columns_match_upstream() {
        assert_columns(
            "apps",
            "replicasets",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Desired", "integer", "", 0, "Number of pods wanted."),
                ("Current", "integer", "", 0, "Number of pods that exist."),
                ("Ready", "integer", "", 0, "Number of pods that are ready."),
                ("Age", "string", "", 0, AGE),
                ("Containers", "string", "", 1, CONTAINERS),
                ("Images", "string", "", 1, IMAGES),
                (
                    "Selector",
                    "string",
                    "",
                    1,
                    "Label selector of the pods the replica set manages.",
                ),
            ],
        );
    }

    #[test]
    fn replica_sets() {
        let rs = json!({
            "metadata": {"name": "web-7d4b9c", "creationTimestamp": ts(-3600)},
            "spec": {"replicas": 3,
                     "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d4b9c"}},
                     "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2}
        });
        assert_eq!(
            row("apps", "replicasets", &rs),
            [
                json!("web-7d4b9c"),
                json!(3),
                json!(3),
                json!(2),
                json!("60m"),
                json!("nginx"),
                json!("nginx:1.27"),
                json!("app=web,pod-template-hash=7d4b9c")
            ]
        );
        let empty = row("apps", "replicasets", &json!({}));
        assert_eq!(
            empty,
            [
                json!(""),
                json!(1),
                json!(0),
                json!(0),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn stateful_sets() {
        assert_columns(
            "apps",
            "statefulsets",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Ready", "string", "", 0, "Ready pods, out of those wanted."),
                ("Age", "string", "", 0, AGE),
                ("Containers", "string", "", 1, CONTAINERS),
                ("Images", "string", "", 1, IMAGES),
            ],
        );
        let sts = json!({
            "metadata": {"name": "etcd", "creationTimestamp": ts(-9 * 86400)},
            "spec": {"replicas": 5, "template": {"spec": {"containers": [
                {"name": "etcd", "image": "quay.io/coreos/etcd:v3.5.16"}]}}},
            "status": {"readyReplicas": 4}
        });
        assert_eq!(
            row("apps", "statefulsets", &sts),
            [
                json!("etcd"),
                json!("4/5"),
                json!("9d"),
                json!("etcd"),
                json!("quay.io/coreos/etcd:v3.5.16")
            ]
        );
        assert_eq!(
            row("apps", "statefulsets", &json!({"spec": {"replicas": null}})),
            [
                json!(""),
                json!("0/1"),
                json!("<unknown>"),
                json!(""),
                json!("")
            ]
        );
    }

    #[test]
    fn daemon_set_columns_match_upstream() {
        assert_columns(
            "apps",
            "daemonsets",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Desired",
                    "integer",
                    "",
                    0,
                    "Nodes that should run the daemon pod.",
                ),
                (
                    "Current",
                    "integer",
                    "",
                    0,
                    "Nodes that run the daemon pod.",
                ),
                (
                    "Ready",
                    "integer",
                    "",
                    0,
                    "Nodes where the daemon pod is ready.",
                ),
                (
                    "Up-to-date",
                    "integer",
                    "",
                    0,
                    "Nodes that run the current daemon pod.",
                ),
                (
                    "Available",
                    "integer",
                    "",
                    0,
                    "Nodes where the daemon pod is available.",
                ),
                (
                    "Node Selector",
                    "string",
                    "",
                    0,
                    "Node labels a node needs to run the daemon pod.",
                ),
                ("Age", "string", "", 0, AGE),
                ("Containers", "string", "", 1, CONTAINERS),
                ("Images", "string", "", 1, IMAGES),
                (
                    "Selector",
                    "string",
                    "",
                    1,
                    "Label selector of the pods the daemon set manages.",
                ),
            ],
        );
    }

    #[test]
    fn daemon_sets() {
        let ds = json!({
            "metadata": {"name": "kube-proxy", "creationTimestamp": ts(-400)},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                     "template": {"spec": {
                         "nodeSelector": {"kubernetes.io/os": "linux"},
                         "containers": [{"name": "kube-proxy",
                                         "image": "registry.k8s.io/kube-proxy:v1.34.0"}]}}},
            "status": {"desiredNumberScheduled": 6, "currentNumberScheduled": 6,
                       "numberReady": 5, "updatedNumberScheduled": 4, "numberAvailable": 5}
        });
        assert_eq!(
            row("apps", "daemonsets", &ds),
            [
                json!("kube-proxy"),
                json!(6),
                json!(6),
                json!(5),
                json!(4),
                json!(5),
                json!("kubernetes.io/os=linux"),
                json!("6m40s"),
                json!("kube-proxy"),
                json!("registry.k8s.io/kube-proxy:v1.34.0"),
                json!("k8s-app=kube-proxy")
            ]
        );
        let zero: Vec<Value> = row("apps", "daemonsets", &json!({}));
        assert_eq!(
            zero[1..6],
            [json!(0), json!(0), json!(0), json!(0), json!(0)]
        );
        assert_eq!(zero[6], json!("<none>"));
        assert_eq!(zero[10], json!("<none>"));
    }
}
