//! resource.k8s.io/v1 (Dynamic Resource Allocation): DeviceClasses, ResourceClaims,
//! ResourceClaimTemplates and ResourceSlices.
//!
//! A slice's `spec.nodeName` is optional in v1 (a pointer); a slice without one prints an
//! empty Node.

use serde_json::Value;

use super::{
    age_cell, age_column, at, column, deleting, list_at, name_cell, name_column, obj_at, str_at,
    string_cell, BuiltinPrinter, Column,
};

const GROUP: &str = "resource.k8s.io";

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(GROUP, "deviceclasses", name_age_columns, name_age_cells),
    BuiltinPrinter::new(GROUP, "resourceclaims", claim_columns, claim_cells),
    BuiltinPrinter::new(
        GROUP,
        "resourceclaimtemplates",
        name_age_columns,
        name_age_cells,
    ),
    BuiltinPrinter::new(GROUP, "resourceslices", slice_columns, slice_cells),
];

/// Name and Age: device classes and claim templates print nothing else.
fn name_age_columns() -> Vec<Column> {
    vec![name_column(), age_column()]
}

fn name_age_cells(obj: &Value, now_unix: i64) -> Vec<Value> {
    vec![name_cell(obj), age_cell(obj, now_unix)]
}

/// ResourceClaim columns.
fn claim_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "State",
            "string",
            "",
            0,
            "Whether the claim is allocated, reserved, pending or being deleted.",
        ),
        age_column(),
    ]
}

/// A resource claim row. State: `deleted` while being deleted; then `pending` without an
/// allocation (unless deleted), or `allocated` and, with consumers, `reserved`.
fn claim_cells(claim: &Value, now_unix: i64) -> Vec<Value> {
    let mut states = Vec::new();
    if deleting(claim) {
        states.push("deleted");
    }
    if obj_at(claim, &["status", "allocation"]).is_none() {
        if !deleting(claim) {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if !list_at(claim, &["status", "reservedFor"]).is_empty() {
            states.push("reserved");
        }
    }
    vec![
        name_cell(claim),
        string_cell(states.join(",")),
        age_cell(claim, now_unix),
    ]
}

/// ResourceSlice columns.
fn slice_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Node",
            "string",
            "",
            0,
            "Node that provides the devices of the slice.",
        ),
        column(
            "Driver",
            "string",
            "",
            0,
            "Driver that provides the devices of the slice.",
        ),
        column(
            "Pool",
            "string",
            "",
            0,
            "Pool the devices of the slice belong to.",
        ),
        age_column(),
    ]
}

/// A resource slice row.
fn slice_cells(slice: &Value, now_unix: i64) -> Vec<Value> {
    let node = at(slice, &["spec", "nodeName"])
        .and_then(Value::as_str)
        .unwrap_or("");
    vec![
        name_cell(slice),
        string_cell(node),
        string_cell(str_at(slice, &["spec", "driver"])),
        string_cell(str_at(slice, &["spec", "pool", "name"])),
        age_cell(slice, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::GROUP;

    #[test]
    fn device_classes_and_claim_templates() {
        for resource in ["deviceclasses", "resourceclaimtemplates"] {
            assert_columns(
                GROUP,
                resource,
                &[
                    ("Name", "string", "name", 0, NAME),
                    ("Age", "string", "", 0, AGE),
                ],
            );
            let obj = json!({"metadata": {"name": "gpu.example.com", "creationTimestamp": ts(-15)},
                             "spec": {"selectors": [{"cel": {"expression": "true"}}]}});
            assert_eq!(
                row(GROUP, resource, &obj),
                [json!("gpu.example.com"), json!("15s")]
            );
            assert_eq!(
                row(GROUP, resource, &json!({})),
                [json!(""), json!("<unknown>")]
            );
        }
    }

    #[test]
    fn resource_claims() {
        assert_columns(
            GROUP,
            "resourceclaims",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "State",
                    "string",
                    "",
                    0,
                    "Whether the claim is allocated, reserved, pending or being deleted.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let claim = json!({
            "metadata": {"name": "pod-gpu-x7k", "creationTimestamp": ts(-240)},
            "status": {"allocation": {"devices": {"results": []}},
                       "reservedFor": [{"resource": "pods", "name": "pod", "uid": "u"}]}
        });
        assert_eq!(
            row(GROUP, "resourceclaims", &claim),
            [
                json!("pod-gpu-x7k"),
                json!("allocated,reserved"),
                json!("4m")
            ]
        );
        assert_eq!(
            row(GROUP, "resourceclaims", &json!({})),
            [json!(""), json!("pending"), json!("<unknown>")]
        );
        let deleted = json!({"metadata": {"deletionTimestamp": ts(-1)}});
        assert_eq!(row(GROUP, "resourceclaims", &deleted)[1], json!("deleted"));
        let deleted_allocated = json!({"metadata": {"deletionTimestamp": ts(-1)},
                                       "status": {"allocation": {}}});
        assert_eq!(
            row(GROUP, "resourceclaims", &deleted_allocated)[1],
            json!("deleted,allocated")
        );
    }

    #[test]
    fn resource_slices() {
        assert_columns(
            GROUP,
            "resourceslices",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Node",
                    "string",
                    "",
                    0,
                    "Node that provides the devices of the slice.",
                ),
                (
                    "Driver",
                    "string",
                    "",
                    0,
                    "Driver that provides the devices of the slice.",
                ),
                (
                    "Pool",
                    "string",
                    "",
                    0,
                    "Pool the devices of the slice belong to.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let slice = json!({
            "metadata": {"name": "node-a-gpu.example.com-4xkq", "creationTimestamp": ts(-3600)},
            "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
                     "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}]}
        });
        assert_eq!(
            row(GROUP, "resourceslices", &slice),
            [
                json!("node-a-gpu.example.com-4xkq"),
                json!("node-a"),
                json!("gpu.example.com"),
                json!("node-a"),
                json!("60m")
            ]
        );
        let network_attached = json!({"spec": {"driver": "nas.example.com", "allNodes": true,
                                               "pool": {"name": "shared"}}});
        assert_eq!(
            row(GROUP, "resourceslices", &network_attached),
            [
                json!(""),
                json!(""),
                json!("nas.example.com"),
                json!("shared"),
                json!("<unknown>")
            ]
        );
    }
}
