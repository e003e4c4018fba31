//! storage.k8s.io/v1 objects of CSI drivers: CSIDrivers, CSINodes and
//! CSIStorageCapacities.
//!
//! API defaults the printers see: a CSI driver requires attach, and does not want pod info,
//! storage capacity or republishing, unless it says so; its lifecycle modes default to
//! `Persistent`.

use serde_json::Value;

use super::format::{quantity, strings};
use super::storage::GROUP;
use super::{
    age_cell, age_column, at, column, list_at, name_column, str_at, string_cell, BuiltinPrinter,
    Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(GROUP, "csidrivers", csi_driver_columns, csi_driver_cells),
    BuiltinPrinter::new(GROUP, "csinodes", csi_node_columns, csi_node_cells),
    BuiltinPrinter::new(
        GROUP,
        "csistoragecapacities",
        capacity_columns,
        capacity_cells,
    ),
];

/// CSIDriver columns.
fn csi_driver_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "AttachRequired",
            "boolean",
            "",
            0,
            "Whether volumes of the driver are attached before they are mounted.",
        ),
        column(
            "PodInfoOnMount",
            "boolean",
            "",
            0,
            "Whether the driver is told about the pod when mounting.",
        ),
        column(
            "StorageCapacity",
            "boolean",
            "",
            0,
            "Whether scheduling considers the storage capacity the driver reports.",
        ),
        column(
            "TokenRequests",
            "string",
            "",
            0,
            "Audiences of the service account tokens the driver receives.",
        ),
        column(
            "RequiresRepublish",
            "boolean",
            "",
            0,
            "Whether mounted volumes are published again periodically.",
        ),
        column(
            "Modes",
            "string",
            "",
            0,
            "Volume lifecycle modes the driver supports.",
        ),
        age_column(),
    ]
}

/// A CSI driver row: the flags as JSON booleans, the token audiences comma-joined
/// (`<unset>` without a list), the lifecycle modes comma-joined.
fn csi_driver_cells(driver: &Value, now_unix: i64) -> Vec<Value> {
    let flag = |field: &str, default: bool| {
        Value::Bool(
            at(driver, &["spec", field])
                .and_then(Value::as_bool)
                .unwrap_or(default),
        )
    };
    let token_requests = match at(driver, &["spec", "tokenRequests"]).and_then(Value::as_array) {
        Some(requests) => {
            let audiences: Vec<&str> = requests.iter().map(|r| str_at(r, &["audience"])).collect();
            audiences.join(",")
        }
        None => "<unset>".into(),
    };
    let modes = match strings(list_at(driver, &["spec", "volumeLifecycleModes"])) {
        modes if modes.is_empty() => "Persistent".to_owned(),
        modes => modes.join(","),
    };
    vec![
        string_cell(str_at(driver, &["metadata", "name"])),
        flag("attachRequired", true),
        flag("podInfoOnMount", false),
        flag("storageCapacity", false),
        string_cell(token_requests),
        flag("requiresRepublish", false),
        string_cell(modes),
        age_cell(driver, now_unix),
    ]
}

/// CSINode columns.
fn csi_node_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Drivers",
            "integer",
            "",
            0,
            "Number of CSI drivers on the node.",
        ),
        age_column(),
    ]
}

/// A CSI node row: how many drivers it lists.
fn csi_node_cells(node: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        string_cell(str_at(node, &["metadata", "name"])),
        Value::from(list_at(node, &["spec", "drivers"]).len()),
        age_cell(node, now_unix),
    ]
}

/// CSIStorageCapacity columns (no Age).
fn capacity_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "StorageClassName",
            "string",
            "",
            0,
            "Storage class the capacity is reported for.",
        ),
        column(
            "Capacity",
            "string",
            "",
            0,
            "Storage available for new volumes.",
        ),
    ]
}

/// A CSI storage capacity row; a capacity that is not reported is `<unset>`.
fn capacity_cells(cap: &Value, _now_unix: i64) -> Vec<Value> {
    let capacity = match at(cap, &["capacity"]) {
        None | Some(Value::Null) => "<unset>".to_owned(),
        some => quantity(some),
    };
    vec![
        string_cell(str_at(cap, &["metadata", "name"])),
        string_cell(str_at(cap, &["storageClassName"])),
        string_cell(capacity),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::GROUP;

    #[test]
    fn csi_driver_columns_match_upstream() {
        assert_columns(
            GROUP,
            "csidrivers",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "AttachRequired",
                    "boolean",
                    "",
                    0,
                    "Whether volumes of the driver are attached before they are mounted.",
                ),
                (
                    "PodInfoOnMount",
                    "boolean",
                    "",
                    0,
                    "Whether the driver is told about the pod when mounting.",
                ),
                (
                    "StorageCapacity",
                    "boolean",
                    "",
                    0,
                    "Whether scheduling considers the storage capacity the driver reports.",
                ),
                (
                    "TokenRequests",
                    "string",
                    "",
                    0,
                    "Audiences of the service account tokens the driver receives.",
                ),
                (
                    "RequiresRepublish",
                    "boolean",
                    "",
                    0,
                    "Whether mounted volumes are published again periodically.",
                ),
                (
                    "Modes",
                    "string",
                    "",
                    0,
                    "Volume lifecycle modes the driver supports.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
    }

    #[test]
    fn csi_driver_rows() {
        let driver = json!({
            "metadata": {"name": "secrets-store.csi.k8s.io", "creationTimestamp": ts(-3600)},
            "spec": {"attachRequired": false, "podInfoOnMount": true,
                     "tokenRequests": [{"audience": "vault"}, {"audience": "aws", "expirationSeconds": 600}],
                     "requiresRepublish": true,
                     "volumeLifecycleModes": ["Ephemeral", "Persistent"]}
        });
        assert_eq!(
            row(GROUP, "csidrivers", &driver),
            [
                json!("secrets-store.csi.k8s.io"),
                json!(false),
                json!(true),
                json!(false),
                json!("vault,aws"),
                json!(true),
                json!("Ephemeral,Persistent"),
                json!("60m")
            ]
        );
        assert_eq!(
            row(GROUP, "csidrivers", &json!({})),
            [
                json!(""),
                json!(true),
                json!(false),
                json!(false),
                json!("<unset>"),
                json!(false),
                json!("Persistent"),
                json!("<unknown>")
            ]
        );
    }

    #[test]
    fn csi_nodes() {
        assert_columns(
            GROUP,
            "csinodes",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Drivers",
                    "integer",
                    "",
                    0,
                    "Number of CSI drivers on the node.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let node = json!({"metadata": {"name": "node-a", "creationTimestamp": ts(-5)},
                          "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1"}]}});
        assert_eq!(
            row(GROUP, "csinodes", &node),
            [json!("node-a"), json!(1), json!("5s")]
        );
        assert_eq!(
            row(GROUP, "csinodes", &json!({})),
            [json!(""), json!(0), json!("<unknown>")]
        );
    }

    #[test]
    fn csi_storage_capacities() {
        assert_columns(
            GROUP,
            "csistoragecapacities",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "StorageClassName",
                    "string",
                    "",
                    0,
                    "Storage class the capacity is reported for.",
                ),
                (
                    "Capacity",
                    "string",
                    "",
                    0,
                    "Storage available for new volumes.",
                ),
            ],
        );
        let cap = json!({"metadata": {"name": "csisc-7x2k"}, "storageClassName": "fast",
                         "capacity": "1500Gi", "nodeTopology": {}});
        assert_eq!(
            row(GROUP, "csistoragecapacities", &cap),
            [json!("csisc-7x2k"), json!("fast"), json!("1500Gi")]
        );
        assert_eq!(
            row(GROUP, "csistoragecapacities", &json!({})),
            [json!(""), json!(""), json!("<unset>")]
        );
    }
}
