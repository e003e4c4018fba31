//! Custom resources, read from the CustomResourceDefinitions that kube-apiserver keeps in
//! etcd, stored as JSON or (as kube-apiserver writes them) as protobuf.

use serde::Deserialize;

use super::{FieldPolicy, Origin, PrinterColumn, ResourceInfo};
use crate::codec::envelope;
use crate::codec::wire::{self, Val, WireError};
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

/// Reads a JSON CustomResourceDefinition into the resource it defines, served at its
/// storage version (the version its objects are stored in; watchd does not convert).
pub fn parse_crd(value: &[u8]) -> Result<ResourceInfo, CrdError> {
    let crd = if value.starts_with(envelope::MAGIC) {
        crd_from_protobuf(value).map_err(|e| CrdError::Malformed(format!("protobuf: {e}")))?
    } else {
        serde_json::from_slice(value).map_err(|e| CrdError::Malformed(e.to_string()))?
    };
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
    })
}

// Field numbers of apiextensions.k8s.io/v1 (apiextensions-apiserver's generated.proto):
// CustomResourceDefinition{spec 2}; Spec{group 1, names 3, scope 4, versions 7};
// Names{plural 1, singular 2, shortNames 3, kind 4, categories 6};
// Version{name 1, storage 3, additionalPrinterColumns 6, selectableFields 9};
// ColumnDefinition{name 1, type 2, format 3, description 4, priority 5, jsonPath 6};
// SelectableField{jsonPath 1}.

fn text(b: &[u8]) -> Result<String, WireError> {
    std::str::from_utf8(b)
        .map(str::to_string)
        .map_err(|_| WireError::Utf8)
}

fn fields(b: &[u8]) -> wire::Fields<'_> {
    wire::fields(b)
}

/// Reads a protobuf-stored CRD (what kube-apiserver writes) into the JSON shape's structs.
fn crd_from_protobuf(value: &[u8]) -> Result<Crd, WireError> {
    let env = envelope::parse(value)?;
    let mut crd = Crd::default();
    for f in fields(env.raw) {
        if let (2, Val::Bytes(spec)) = f? {
            crd.spec = spec_from_protobuf(spec)?;
        }
    }
    Ok(crd)
}

fn spec_from_protobuf(b: &[u8]) -> Result<CrdSpec, WireError> {
    let mut spec = CrdSpec::default();
    for f in fields(b) {
        match f? {
            (1, Val::Bytes(v)) => spec.group = text(v)?,
            (3, Val::Bytes(v)) => {
                for n in fields(v) {
                    match n? {
                        (1, Val::Bytes(x)) => spec.names.plural = text(x)?,
                        (2, Val::Bytes(x)) => spec.names.singular = text(x)?,
                        (3, Val::Bytes(x)) => spec.names.short_names.push(text(x)?),
                        (4, Val::Bytes(x)) => spec.names.kind = text(x)?,
                        (6, Val::Bytes(x)) => spec.names.categories.push(text(x)?),
                        _ => {}
                    }
                }
            }
            (4, Val::Bytes(v)) => spec.scope = text(v)?,
            (7, Val::Bytes(v)) => spec.versions.push(version_from_protobuf(v)?),
            _ => {}
        }
    }
    Ok(spec)
}

fn version_from_protobuf(b: &[u8]) -> Result<CrdVersion, WireError> {
    let mut v = CrdVersion::default();
    for f in fields(b) {
        match f? {
            (1, Val::Bytes(x)) => v.name = text(x)?,
            (3, Val::Varint(x)) => v.storage = x != 0,
            (6, Val::Bytes(x)) => {
                let mut c = PrinterColumn::default();
                for g in fields(x) {
                    match g? {
                        (1, Val::Bytes(y)) => c.name = text(y)?,
                        (2, Val::Bytes(y)) => c.type_ = text(y)?,
                        (3, Val::Bytes(y)) => c.format = text(y)?,
                        (4, Val::Bytes(y)) => c.description = text(y)?,
                        (5, Val::Varint(y)) => c.priority = y as i32,
                        (6, Val::Bytes(y)) => c.json_path = text(y)?,
                        _ => {}
                    }
                }
                v.additional_printer_columns.push(c);
            }
            (9, Val::Bytes(x)) => {
                for g in fields(x) {
                    if let (1, Val::Bytes(y)) = g? {
                        v.selectable_fields.push(SelectableField {
                            json_path: text(y)?,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(v)
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

    fn field(n: u32, b: &[u8]) -> Vec<u8> {
        let mut out = vec![(n << 3 | 2) as u8, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn protobuf_crd_is_read_like_the_json_one() {
        let names = [
            field(1, b"widgets"),
            field(2, b"widget"),
            field(3, b"wd"),
            field(4, b"Widget"),
        ]
        .concat();
        let column = [
            field(1, b"Color"),
            field(2, b"string"),
            field(6, b".spec.color"),
        ]
        .concat();
        let v1 = [
            field(1, b"v1"),
            vec![3 << 3, 1],
            field(6, &column),
            field(9, &field(1, b".spec.color")),
        ]
        .concat();
        let beta = [field(1, b"v1beta1"), vec![3 << 3, 0]].concat();
        let spec = [
            field(1, b"example.com"),
            field(3, &names),
            field(4, b"Namespaced"),
            field(7, &beta),
            field(7, &v1),
        ]
        .concat();
        let raw = field(2, &spec);
        let type_meta = [
            field(1, b"apiextensions.k8s.io/v1"),
            field(2, b"CustomResourceDefinition"),
        ]
        .concat();
        let mut value = envelope::MAGIC.to_vec();
        value.extend(field(1, &type_meta));
        value.extend(field(2, &raw));
        let r = parse_crd(&value).unwrap();
        assert_eq!(r, parse_crd(WIDGETS.as_bytes()).unwrap());
    }

    #[test]
    fn crd_without_storage_version_is_rejected() {
        let v = WIDGETS.replace("\"storage\":true", "\"storage\":false");
        assert!(matches!(
            parse_crd(v.as_bytes()),
            Err(CrdError::NoStorageVersion(_))
        ));
    }

    #[test]
    fn protobuf_crd_is_reported_malformed() {
        assert!(matches!(
            parse_crd(b"k8s\x00\x0a\x02"),
            Err(CrdError::Malformed(_))
        ));
    }
}
