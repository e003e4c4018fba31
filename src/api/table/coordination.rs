//! coordination.k8s.io/v1 Leases: who holds them.

use serde_json::Value;

use super::{
    age_cell, age_column, column, name_cell, name_column, str_at, string_cell, BuiltinPrinter,
    Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[BuiltinPrinter::new(
    "coordination.k8s.io",
    "leases",
    lease_columns,
    lease_cells,
)];

/// Lease columns.
fn lease_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Holder", "string", "", 0, "Who holds the lease."),
        age_column(),
    ]
}

/// A lease row ("" while nobody holds it).
fn lease_cells(lease: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(lease),
        string_cell(str_at(lease, &["spec", "holderIdentity"])),
        age_cell(lease, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    #[test]
    fn leases() {
        assert_columns(
            "coordination.k8s.io",
            "leases",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Holder", "string", "", 0, "Who holds the lease."),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let lease = json!({
            "metadata": {"name": "kube-scheduler", "creationTimestamp": ts(-86400 * 12)},
            "spec": {"holderIdentity": "cp-1_5c1f3e2a", "leaseDurationSeconds": 15,
                     "renewTime": "2024-01-01T00:00:00.000000Z"}
        });
        assert_eq!(
            row("coordination.k8s.io", "leases", &lease),
            [
                json!("kube-scheduler"),
                json!("cp-1_5c1f3e2a"),
                json!("12d")
            ]
        );
        assert_eq!(
            row(
                "coordination.k8s.io",
                "leases",
                &json!({"spec": {"holderIdentity": null}})
            ),
            [json!(""), json!(""), json!("<unknown>")]
        );
    }
}
