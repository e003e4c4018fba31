//! Core v1 kinds that carry a pod template: PodTemplates and ReplicationControllers.
//!
//! The API defaults a replication controller's `spec.replicas` to 1 and, when its
//! selector is empty, copies the template's labels into it; the printer shows both results.

use serde_json::Value;

use super::templates::{
    container_cells, template_cells, template_columns, DESC_CONTAINERS, DESC_IMAGES,
};
use super::{
    age_cell, age_column, at, column, format_labels, int_at, int_or, list_at, map_len, name_cell,
    name_column, string_cell, BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("", "podtemplates", pod_template_columns, pod_template_cells),
    BuiltinPrinter::new(
        "",
        "replicationcontrollers",
        replication_controller_columns,
        replication_controller_cells,
    ),
];

/// PodTemplate columns: the template's containers are shown by default here.
fn pod_template_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Containers", "string", "", 0, DESC_CONTAINERS),
        column("Images", "string", "", 0, DESC_IMAGES),
        column("Pod Labels", "string", "", 0, "Labels of the pod template."),
    ]
}

/// A pod template row (no Age column).
fn pod_template_cells(pt: &Value, _now_unix: i64) -> Vec<Value> {
    let (names, images) = container_cells(list_at(pt, &["template", "spec", "containers"]));
    vec![
        name_cell(pt),
        string_cell(names),
        string_cell(images),
        string_cell(format_labels(at(pt, &["template", "metadata", "labels"]))),
    ]
}

/// ReplicationController columns.
fn replication_controller_columns() -> Vec<Column> {
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
        "Label selector of the pods the controller manages.",
    ));
    cols
}

/// A replication controller row.
fn replication_controller_cells(rc: &Value, now_unix: i64) -> Vec<Value> {
    let spec = at(rc, &["spec"]).unwrap_or(&Value::Null);
    // SetDefaults_ReplicationController: an empty selector becomes the template's labels
    // (when the template has a label map at all).
    let template_labels = at(spec, &["template", "metadata", "labels"]).filter(|l| l.is_object());
    let selector = match template_labels {
        Some(labels) if map_len(spec, &["selector"]) == 0 => Some(labels),
        _ => at(spec, &["selector"]),
    };
    let mut row = vec![
        name_cell(rc),
        Value::from(int_or(spec, &["replicas"], 1)),
        Value::from(int_at(rc, &["status", "replicas"])),
        Value::from(int_at(rc, &["status", "readyReplicas"])),
        age_cell(rc, now_unix),
    ];
    row.extend(template_cells(spec));
    row.push(string_cell(format_labels(selector)));
    row
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::templates::{DESC_CONTAINERS as CONTAINERS, DESC_IMAGES as IMAGES};
    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    #[test]
    fn pod_templates() {
        assert_columns(
            "",
            "podtemplates",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Containers", "string", "", 0, CONTAINERS),
                ("Images", "string", "", 0, IMAGES),
                ("Pod Labels", "string", "", 0, "Labels of the pod template."),
            ],
        );
        let pt = json!({
            "metadata": {"name": "batch-worker", "creationTimestamp": ts(-60)},
            "template": {"metadata": {"labels": {"tier": "batch", "app": "worker"}},
                         "spec": {"containers": [
                             {"name": "worker", "image": "example.com/worker:2"},
                             {"name": "log", "image": "fluent-bit:3"}]}}
        });
        assert_eq!(
            row("", "podtemplates", &pt),
            [
                json!("batch-worker"),
                json!("worker,log"),
                json!("example.com/worker:2,fluent-bit:3"),
                json!("app=worker,tier=batch")
            ]
        );
        assert_eq!(
            row("", "podtemplates", &json!({})),
            [json!(""), json!(""), json!(""), json!("<none>")]
        );
    }

    #[test]
    fn replication_controller_columns_match_upstream() {
        assert_columns(
            "",
            "replicationcontrollers",
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
                    "Label selector of the pods the controller manages.",
                ),
            ],
        );
    }

    #[test]
    fn replication_controllers() {
        let rc = json!({
            "metadata": {"name": "frontend", "creationTimestamp": ts(-5 * 3600 - 120)},
            "spec": {"replicas": 4, "selector": {"app": "frontend"},
                     "template": {"metadata": {"labels": {"app": "frontend", "v": "2"}},
                                  "spec": {"containers": [{"name": "php", "image": "php:8"}]}}},
            "status": {"replicas": 4, "readyReplicas": 3}
        });
        assert_eq!(
            row("", "replicationcontrollers", &rc),
            [
                json!("frontend"),
                json!(4),
                json!(4),
                json!(3),
                json!("5h2m"),
                json!("php"),
                json!("php:8"),
                json!("app=frontend")
            ]
        );
        // No selector: the API copies the template's labels into it.
        let defaulted = json!({"spec": {"template": {"metadata": {"labels": {"app": "x"}}}}});
        let r = row("", "replicationcontrollers", &defaulted);
        assert_eq!(r[1], json!(1));
        assert_eq!(r[7], json!("app=x"));
        assert_eq!(
            row(
                "",
                "replicationcontrollers",
                &json!({"spec": {"template": null}})
            ),
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
}
