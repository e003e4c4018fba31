//! Custom resources, read from the CustomResourceDefinitions that kube-apiserver keeps in
//! etcd (as the CRD resource serves them: decoded and converted to v1 first).

use serde::Deserialize;

use super::{FieldPolicy, Origin, PrinterColumn, PublishedSchema, ResourceInfo};
use crate::codec::FieldSpec;

/// The etcd directory (below the prefix) holding CustomResourceDefinitions.
pub const CRD_DIR: &str = "apiextensions.k8s.io/customresourcedefinitions";

#[derive(Deserialize, Default)]
struct Crd {
    spec: CrdSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CrdSpec {
    group: String,
    names: CrdNames,
    scope: String,
    #[serde(default)]
    versions: Vec<CrdVersion>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CrdNames {
    plural: String,
    #[serde(default)]
    singular: String,
    kind: String,
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CrdVersion {
    name: String,
    #[serde(default)]
    storage: bool,
    #[serde(default)]
    selectable_fields: Vec<SelectableField>,
    #[serde(default)]
    additional_printer_columns: Vec<PrinterColumn>,
    #[serde(default)]
    schema: Option<CrdValidation>,
}

#[derive(Deserialize, Default)]
struct CrdValidation {
    #[serde(rename = "openAPIV3Schema", default)]
    open_api_v3_schema: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SelectableField {
    json_path: String,
}

/// Why a CustomResourceDefinition cannot be served.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CrdError {
    /// Not JSON, or not shaped like a CRD.
    #[error("not a JSON CustomResourceDefinition: {0}")]
    Malformed(String),
    /// No version is marked as the storage version.
    #[error("CustomResourceDefinition {0} has no storage version")]
    NoStorageVersion(String),
}

/// Reads a CustomResourceDefinition, as the CRD resource serves it (apiextensions.k8s.io/v1
/// JSON: ingestion decodes and converts the stored value first), into the resource it
/// defines, served at its storage version (the version its objects are stored in; watchd
/// does not convert custom resources).
pub fn parse_crd(json: &[u8]) -> Result<ResourceInfo, CrdError> {
    let crd: Crd = serde_json::from_slice(json).map_err(|e| CrdError::Malformed(e.to_string()))?;
    let spec = crd.spec;
    let valid_name = |s: &str| !s.is_empty() && !s.contains('/');
    if !valid_name(&spec.group) || !valid_name(&spec.names.plural) || spec.names.kind.is_empty() {
        return Err(CrdError::Malformed("empty group, plural or kind".into()));
    }
    let storage = spec
        .versions
        .iter()
        .find(|v| v.storage && valid_name(&v.name))
        .ok_or_else(|| {
            CrdError::NoStorageVersion(format!("{}.{}", spec.names.plural, spec.group))
        })?;
    let version = storage.name.clone();
    // `selectableFields` name fields by JSON path (`.spec.color`); selectors use `spec.color`.
    let fields = storage
        .selectable_fields
        .iter()
        .map(|f| FieldSpec::simple(f.json_path.trim_start_matches('.')))
        .collect();
    let singular = if spec.names.singular.is_empty() {
        spec.names.kind.to_lowercase()
    } else {
        spec.names.singular
    };
    Ok(ResourceInfo {
        etcd_dir: format!("{}/{}", spec.group, spec.names.plural),
        storage_version: format!("{}/{version}", spec.group),
        group: spec.group,
        version,
        resource: spec.names.plural,
        singular,
        kind: spec.names.kind,
        namespaced: spec.scope != "Cluster",
        short_names: spec.names.short_names,
        categories: spec.names.categories,
        origin: Origin::CustomResource,
        fields,
        // Custom resources: apiextensions-apiserver's selectable-field conversion.
        field_policy: FieldPolicy::meta_only("field label not supported: {}"),
        printer_columns: storage.additional_printer_columns.clone(),
        schema: PublishedSchema::new(
            storage
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .map(|raw| raw.get().to_string()),
        ),
        indexed_field: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDGETS: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
      "metadata":{"name":"widgets.example.com"},
      "spec":{"group":"example.com","scope":"Namespaced",
        "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList","shortNames":["wd"]},
        "versions":[{"name":"v1beta1","served":true,"storage":false},{"name":"v1","served":true,"storage":true,"selectableFields":[{"jsonPath":".spec.color"}],
          "additionalPrinterColumns":[{"name":"Color","type":"string","jsonPath":".spec.color"}]}]}}"#;

    #[test]
    fn crd_is_served_at_its_storage_version() {
        let r = parse_crd(WIDGETS.as_bytes()).unwrap();
        assert_eq!(r.api_version(), "example.com/v1");
        assert_eq!(r.etcd_dir, "example.com/widgets");
        assert_eq!(r.kind, "Widget");
        assert!(r.namespaced);
        assert_eq!(r.short_names, vec!["wd".to_string()]);
        assert_eq!(r.origin, Origin::CustomResource);
        assert!(r.supports_field("spec.color"));
        assert_eq!(r.printer_columns[0].json_path, ".spec.color");
    }

    #[test]
    fn crd_without_storage_version_is_rejected() {
        let v = WIDGETS.replace("\"storage\":true", "\"storage\":false");
        assert!(matches!(
            parse_crd(v.as_bytes()),
            Err(CrdError::NoStorageVersion(_))
        ));
    }
}
