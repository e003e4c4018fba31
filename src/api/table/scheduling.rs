//! Where and how pods run: scheduling.k8s.io/v1 PriorityClasses and node.k8s.io/v1
//! RuntimeClasses.
//!
//! The API defaults a priority class's `preemptionPolicy` to `PreemptLowerPriority`.

use serde_json::Value;

use super::{
    age_cell, age_column, bool_at, column, int_at, name_cell, name_column, str_at, str_or,
    string_cell, BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(
        "scheduling.k8s.io",
        "priorityclasses",
        priority_class_columns,
        priority_class_cells,
    ),
    BuiltinPrinter::new(
        "node.k8s.io",
        "runtimeclasses",
        runtime_class_columns,
        runtime_class_cells,
    ),
];

/// PriorityClass columns (PreemptionPolicy is not a wide column).
fn priority_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Value", "integer", "", 0, "Priority pods of the class get."),
        column(
            "Global-Default",
            "boolean",
            "",
            0,
            "Whether the class applies to pods that name none.",
        ),
        age_column(),
        column(
            "PreemptionPolicy",
            "string",
            "",
            0,
            "Whether pods of the class may preempt pods of lower priority.",
        ),
    ]
}

/// A priority class row; Global-Default is a JSON boolean.
fn priority_class_cells(pc: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(pc),
        Value::from(int_at(pc, &["value"])),
        Value::Bool(bool_at(pc, &["globalDefault"])),
        age_cell(pc, now_unix),
        string_cell(str_or(pc, &["preemptionPolicy"], "PreemptLowerPriority")),
    ]
}

/// The RuntimeClass `Handler` column's description.
const DESC_HANDLER: &str = "Handler the container runtime runs pods of the class with.";

/// RuntimeClass columns.
fn runtime_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Handler", "string", "", 0, DESC_HANDLER),
        age_column(),
    ]
}

/// A runtime class row.
fn runtime_class_cells(rc: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(rc),
        string_cell(str_at(rc, &["handler"])),
        age_cell(rc, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::DESC_HANDLER;

    #[test]
    fn priority_classes() {
        assert_columns(
            "scheduling.k8s.io",
            "priorityclasses",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Value", "integer", "", 0, "Priority pods of the class get."),
                (
                    "Global-Default",
                    "boolean",
                    "",
                    0,
                    "Whether the class applies to pods that name none.",
                ),
                ("Age", "string", "", 0, AGE),
                (
                    "PreemptionPolicy",
                    "string",
                    "",
                    0,
                    "Whether pods of the class may preempt pods of lower priority.",
                ),
            ],
        );
        let pc = json!({"metadata": {"name": "system-node-critical",
                                     "creationTimestamp": ts(-86400 * 365 * 3)},
                        "value": 2000001000, "globalDefault": false,
                        "preemptionPolicy": "Never", "description": "critical"});
        assert_eq!(
            row("scheduling.k8s.io", "priorityclasses", &pc),
            [
                json!("system-node-critical"),
                json!(2000001000),
                json!(false),
                json!("3y"),
                json!("Never")
            ]
        );
        assert_eq!(
            row(
                "scheduling.k8s.io",
                "priorityclasses",
                &json!({"globalDefault": true})
            ),
            [
                json!(""),
                json!(0),
                json!(true),
                json!("<unknown>"),
                json!("PreemptLowerPriority")
            ]
        );
    }

    #[test]
    fn runtime_classes() {
        assert_columns(
            "node.k8s.io",
            "runtimeclasses",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Handler", "string", "", 0, DESC_HANDLER),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let rc = json!({"metadata": {"name": "gvisor", "creationTimestamp": ts(-30)},
                        "handler": "runsc"});
        assert_eq!(
            row("node.k8s.io", "runtimeclasses", &rc),
            [json!("gvisor"), json!("runsc"), json!("30s")]
        );
        assert_eq!(
            row("node.k8s.io", "runtimeclasses", &json!({})),
            [json!(""), json!(""), json!("<unknown>")]
        );
    }
}
