//! Builders and assertions the printers' tests share.

use serde_json::Value;

use crate::registry::{FieldPolicy, Origin, PrinterColumn, ResourceInfo};

/// A resource definition for tests.
pub fn info(group: &str, resource: &str, kind: &str) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        singular: resource.trim_end_matches('s').into(),
        kind: kind.into(),
        namespaced: true,
        etcd_dir: resource.into(),
        storage_version: if group.is_empty() {
            "v1".into()
        } else {
            format!("{group}/v1")
        },
        short_names: Vec::new(),
        categories: Vec::new(),
        origin: Origin::Builtin,
        fields: Vec::new(),
        field_policy: FieldPolicy::meta_only("field label not supported: {}"),
        printer_columns: Vec::new(),
        schema: Default::default(),
        indexed_field: None,
    }
}

/// A custom resource definition with the given printer columns.
pub fn crd_info(columns: Vec<PrinterColumn>) -> ResourceInfo {
    ResourceInfo {
        origin: Origin::CustomResource,
        printer_columns: columns,
        schema: Default::default(),
        indexed_field: None,
        ..info("example.com", "widgets", "Widget")
    }
}

/// 2024-01-01T00:00:00Z.
pub const T0: i64 = 1_704_067_200;

/// `T0 + offset` seconds as RFC 3339.
pub fn ts(offset: i64) -> String {
    super::Instant::from_unix(T0 + offset).to_rfc3339_utc()
}

/// Column names, in order.
pub fn names(cols: &[super::Column]) -> Vec<&str> {
    cols.iter().map(|c| c.name.as_str()).collect()
}

/// Asserts a resource's columns: (name, type, format, priority, description) each.
pub fn assert_columns(group: &str, resource: &str, want: &[(&str, &str, &str, i32, &str)]) {
    let cols = super::columns(&info(group, resource, ""));
    let got: Vec<(&str, &str, &str, i32, &str)> = cols
        .iter()
        .map(|c| {
            let (n, t, f, d) = (&c.name, &c.type_, &c.format, &c.description);
            (n.as_str(), t.as_str(), f.as_str(), c.priority, d.as_str())
        })
        .collect();
    assert_eq!(got, want, "{group}/{resource}");
}

/// The row of `obj` for (group, resource) at T0.
pub fn row(group: &str, resource: &str, obj: &Value) -> Vec<Value> {
    super::cells(&info(group, resource, ""), obj, T0)
}
