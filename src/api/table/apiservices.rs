//! apiregistration.k8s.io/v1 APIServices, printed by kube-aggregator's own table convertor:
//! the backing service (or `Local`) and the Available condition.

use serde_json::Value;

use super::{
    age_cell, age_column, column, list_at, name_cell, name_column, obj_at, str_at, string_cell,
    BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[BuiltinPrinter::new(
    "apiregistration.k8s.io",
    "apiservices",
    api_service_columns,
    api_service_cells,
)];

/// APIService columns.
fn api_service_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Service",
            "string",
            "",
            0,
            "Service that serves the API, or Local.",
        ),
        column(
            "Available",
            "string",
            "",
            0,
            "Whether the API is available.",
        ),
        age_column(),
    ]
}

/// An API service row: `namespace/name` of its service, `Local` without one; the first
/// Available condition's status, with its reason in parentheses unless it is True,
/// `Unknown` without that condition.
fn api_service_cells(svc: &Value, now_unix: i64) -> Vec<Value> {
    let service = match obj_at(svc, &["spec", "service"]) {
        Some(s) => format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"])),
        None => "Local".into(),
    };
    let available = list_at(svc, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Available");
    let status = match available {
        None => "Unknown".to_owned(),
        Some(c) => match (str_at(c, &["status"]), str_at(c, &["reason"])) {
            ("True", _) => "True".to_owned(),
            (status, "") => status.to_owned(),
            (status, reason) => format!("{status} ({reason})"),
        },
    };
    vec![
        name_cell(svc),
        string_cell(service),
        string_cell(status),
        age_cell(svc, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    const GROUP: &str = "apiregistration.k8s.io";

    #[test]
    fn api_services() {
        assert_columns(
            GROUP,
            "apiservices",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Service",
                    "string",
                    "",
                    0,
                    "Service that serves the API, or Local.",
                ),
                (
                    "Available",
                    "string",
                    "",
                    0,
                    "Whether the API is available.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let metrics = json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io", "creationTimestamp": ts(-7200)},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False",
                                       "reason": "MissingEndpoints"}]}
        });
        assert_eq!(
            row(GROUP, "apiservices", &metrics),
            [
                json!("v1beta1.metrics.k8s.io"),
                json!("kube-system/metrics-server"),
                json!("False (MissingEndpoints)"),
                json!("120m")
            ]
        );
        let local = json!({"metadata": {"name": "v1.apps"},
                           "status": {"conditions": [{"type": "Available", "status": "True",
                                                      "reason": "Local"}]}});
        assert_eq!(
            row(GROUP, "apiservices", &local)[1..3],
            [json!("Local"), json!("True")]
        );
        assert_eq!(
            row(GROUP, "apiservices", &json!({})),
            [
                json!(""),
                json!("Local"),
                json!("Unknown"),
                json!("<unknown>")
            ]
        );
        let no_reason =
            json!({"status": {"conditions": [{"type": "Available", "status": "False"}]}});
        assert_eq!(row(GROUP, "apiservices", &no_reason)[2], json!("False"));
    }

    #[test]
    fn custom_resource_definitions_use_the_default_convertor() {
        let crds = super::super::test_support::info(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "CustomResourceDefinition",
        );
        let cols = super::super::columns(&crds);
        assert_eq!(
            super::super::test_support::names(&cols),
            ["Name", "Created At"]
        );
    }
}
