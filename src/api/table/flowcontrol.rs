//! flowcontrol.apiserver.k8s.io/v1 FlowSchemas and PriorityLevelConfigurations (API
//! Priority and Fairness).
//!
//! v1 defaults the printers see: a flow schema's matching precedence of 0 becomes 1000; a
//! limited priority level without `nominalConcurrencyShares` gets 30; queuing settings of 0
//! become 64 queues, hand size 8 and queue length limit 50.

use serde_json::Value;

use super::{
    age_cell, age_column, at, column, int_at, int_or, list_at, name_cell, name_column, obj_at,
    str_at, string_cell, BuiltinPrinter, Column,
};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(GROUP, "flowschemas", flow_schema_columns, flow_schema_cells),
    BuiltinPrinter::new(
        GROUP,
        "prioritylevelconfigurations",
        priority_level_columns,
        priority_level_cells,
    ),
];

/// FlowSchema columns.
fn flow_schema_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "PriorityLevel",
            "string",
            "",
            0,
            "Priority level of the requests the schema matches.",
        ),
        column(
            "MatchingPrecedence",
            "string",
            "",
            0,
            "Order of the schema among those matching a request; lowest wins.",
        ),
        column(
            "DistinguisherMethod",
            "string",
            "",
            0,
            "How the requests the schema matches are split into flows.",
        ),
        age_column(),
        column(
            "MissingPL",
            "string",
            "",
            0,
            "Whether the priority level of the schema is missing.",
        ),
    ]
}

/// A flow schema row. MissingPL is the status of the first Dangling condition, `?`
/// without one.
fn flow_schema_cells(fs: &Value, now_unix: i64) -> Vec<Value> {
    let precedence = match int_at(fs, &["spec", "matchingPrecedence"]) {
        0 => 1000,
        p => p,
    };
    let distinguisher = match obj_at(fs, &["spec", "distinguisherMethod"]) {
        Some(d) => str_at(d, &["type"]),
        None => "<none>",
    };
    let missing = list_at(fs, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Dangling")
        .map_or("?", |c| str_at(c, &["status"]));
    vec![
        name_cell(fs),
        string_cell(str_at(fs, &["spec", "priorityLevelConfiguration", "name"])),
        Value::from(precedence),
        string_cell(distinguisher),
        age_cell(fs, now_unix),
        string_cell(missing),
    ]
}

/// PriorityLevelConfiguration columns.
fn priority_level_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Type",
            "string",
            "",
            0,
            "Whether requests of the level are limited or exempt.",
        ),
        column(
            "NominalConcurrencyShares",
            "string",
            "",
            0,
            "Share of the server concurrency the level gets.",
        ),
        column("Queues", "string", "", 0, "Number of queues of the level."),
        column(
            "HandSize",
            "string",
            "",
            0,
            "Number of queues each flow is spread over.",
        ),
        column(
            "QueueLengthLimit",
            "string",
            "",
            0,
            "Most requests that may wait in one queue.",
        ),
        age_column(),
    ]
}

/// A priority level row: numbers for a limited level (queuing ones only when it queues),
/// `<none>` where a setting does not apply.
fn priority_level_cells(pl: &Value, now_unix: i64) -> Vec<Value> {
    let none = || string_cell("<none>");
    let (mut shares, mut queues, mut hand_size, mut length_limit) =
        (none(), none(), none(), none());
    if let Some(limited) = obj_at(pl, &["spec", "limited"]) {
        shares = Value::from(int_or(limited, &["nominalConcurrencyShares"], 30));
        if let Some(q) = obj_at(limited, &["limitResponse", "queuing"]) {
            let or_default = |field: &str, default: i64| match int_at(q, &[field]) {
                0 => Value::from(default),
                n => Value::from(n),
            };
            queues = or_default("queues", 64);
            hand_size = or_default("handSize", 8);
            length_limit = or_default("queueLengthLimit", 50);
        }
    }
    vec![
        name_cell(pl),
        string_cell(
            at(pl, &["spec", "type"])
                .and_then(Value::as_str)
                .unwrap_or(""),
        ),
        shares,
        queues,
        hand_size,
        length_limit,
        age_cell(pl, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::GROUP;

    #[test]
    fn flow_schemas() {
        assert_columns(
            GROUP,
            "flowschemas",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "PriorityLevel",
                    "string",
                    "",
                    0,
                    "Priority level of the requests the schema matches.",
                ),
                (
                    "MatchingPrecedence",
                    "string",
                    "",
                    0,
                    "Order of the schema among those matching a request; lowest wins.",
                ),
                (
                    "DistinguisherMethod",
                    "string",
                    "",
                    0,
                    "How the requests the schema matches are split into flows.",
                ),
                ("Age", "string", "", 0, AGE),
                (
                    "MissingPL",
                    "string",
                    "",
                    0,
                    "Whether the priority level of the schema is missing.",
                ),
            ],
        );
        let fs = json!({
            "metadata": {"name": "kube-controller-manager", "creationTimestamp": ts(-86400 * 9)},
            "spec": {"priorityLevelConfiguration": {"name": "workload-high"},
                     "matchingPrecedence": 800, "distinguisherMethod": {"type": "ByNamespace"}},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}
        });
        assert_eq!(
            row(GROUP, "flowschemas", &fs),
            [
                json!("kube-controller-manager"),
                json!("workload-high"),
                json!(800),
                json!("ByNamespace"),
                json!("9d"),
                json!("False")
            ]
        );
        assert_eq!(
            row(GROUP, "flowschemas", &json!({})),
            [
                json!(""),
                json!(""),
                json!(1000),
                json!("<none>"),
                json!("<unknown>"),
                json!("?")
            ]
        );
    }

    #[test]
    fn priority_levels() {
        assert_columns(
            GROUP,
            "prioritylevelconfigurations",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Type",
                    "string",
                    "",
                    0,
                    "Whether requests of the level are limited or exempt.",
                ),
                (
                    "NominalConcurrencyShares",
                    "string",
                    "",
                    0,
                    "Share of the server concurrency the level gets.",
                ),
                ("Queues", "string", "", 0, "Number of queues of the level."),
                (
                    "HandSize",
                    "string",
                    "",
                    0,
                    "Number of queues each flow is spread over.",
                ),
                (
                    "QueueLengthLimit",
                    "string",
                    "",
                    0,
                    "Most requests that may wait in one queue.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let queuing = json!({
            "metadata": {"name": "workload-high", "creationTimestamp": ts(-300)},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 40,
                     "limitResponse": {"type": "Queue",
                                       "queuing": {"queues": 128, "handSize": 6}}}}
        });
        assert_eq!(
            row(GROUP, "prioritylevelconfigurations", &queuing),
            [
                json!("workload-high"),
                json!("Limited"),
                json!(40),
                json!(128),
                json!(6),
                json!(50),
                json!("5m")
            ]
        );
        let reject = json!({"spec": {"type": "Limited",
                                     "limited": {"limitResponse": {"type": "Reject"}}}});
        assert_eq!(
            row(GROUP, "prioritylevelconfigurations", &reject),
            [
                json!(""),
                json!("Limited"),
                json!(30),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<unknown>")
            ]
        );
        let exempt = json!({"spec": {"type": "Exempt", "exempt": {}}});
        assert_eq!(
            row(GROUP, "prioritylevelconfigurations", &exempt)[1..6],
            [
                json!("Exempt"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let zero_shares = json!({"spec": {"limited": {"nominalConcurrencyShares": 0}}});
        assert_eq!(
            row(GROUP, "prioritylevelconfigurations", &zero_shares)[2],
            json!(0)
        );
    }
}
