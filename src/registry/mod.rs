//! What resources exist: their API identity (group, version, plural, kind, scope) and
//! where kube-apiserver stores them in etcd.
//!
//! The table of built-in resources is in [`builtin`]; custom resources come from the
//! CustomResourceDefinitions found in etcd ([`crd`]). [`KeyRoute`] maps an etcd key to
//! (resource, namespace, name).

pub mod builtin;
pub mod crd;
pub mod index_fields;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::codec::convert::Convert;
use crate::codec::encryption::ValueTransformer;
use crate::codec::{DecodeSpec, FieldSpec};

/// Where a resource definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The built-in table.
    Builtin,
    /// A CustomResourceDefinition in etcd.
    CustomResource,
}

/// One servable resource: its API identity and its place in etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// API version served (the storage version).
    pub version: String,
    /// Plural resource name in URLs, e.g. `pods`.
    pub resource: String,
    /// Singular resource name, e.g. `pod`.
    pub singular: String,
    /// Kind of one object, e.g. `Pod`.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Key prefix below `--etcd-prefix`, without slashes around it, e.g. `services/specs`.
    pub etcd_dir: String,
    /// The apiVersion kube-apiserver writes objects of this resource in; when it is not
    /// the served one, values are converted ([`builtin::conversion_of`]).
    pub storage_version: String,
    /// Short names kubectl accepts, e.g. `po`.
    pub short_names: Vec<String>,
    /// Categories such as `all`.
    pub categories: Vec<String>,
    /// Built-in or custom.
    pub origin: Origin,
    /// Fields usable in field selectors besides `metadata.name` and `metadata.namespace`.
    pub fields: Vec<FieldSpec>,
    /// How field selector labels are checked and named.
    pub field_policy: FieldPolicy,
    /// A custom resource's `additionalPrinterColumns` (empty for built-ins).
    pub printer_columns: Vec<PrinterColumn>,
    /// A custom resource's `openAPIV3Schema` at the served version, as JSON text, for the
    /// OpenAPI documents (none for built-ins, whose schemas `crate::openapi` has). Not
    /// part of the resource's identity: a CRD edit that changes only its schema keeps
    /// the store and its watches, and replaces this in place.
    pub schema: PublishedSchema,
    /// The selectable field whose exact values the wake index keys watchers by, as the
    /// cache registered it (`--index-field`; see [`index_fields`]).
    pub indexed_field: Option<String>,
}

/// A custom resource's published schema (JSON text), replaceable in place. Equal to
/// every other: it says how clients should write objects, not which objects are served.
#[derive(Debug, Default)]
pub struct PublishedSchema(arc_swap::ArcSwapOption<String>);

/// Bumped whenever a published schema is replaced in place (the served index stays the
/// same): what caches of documents built from schemas compare.
static SCHEMA_REPLACEMENTS: AtomicU64 = AtomicU64::new(0);

impl PublishedSchema {
    pub fn new(json: Option<String>) -> PublishedSchema {
        PublishedSchema(arc_swap::ArcSwapOption::from(json.map(Arc::new)))
    }

    /// The schema now.
    pub fn get(&self) -> Option<Arc<String>> {
        self.0.load_full()
    }

    /// Takes `other`'s schema; true when it differed.
    pub fn replace_with(&self, other: &PublishedSchema) -> bool {
        let new = other.get();
        if self.get() == new {
            return false;
        }
        self.0.store(new);
        SCHEMA_REPLACEMENTS.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// How many schemas were replaced in place since the process started.
    pub fn replacements() -> u64 {
        SCHEMA_REPLACEMENTS.load(Ordering::Acquire)
    }
}

impl Clone for PublishedSchema {
    fn clone(&self) -> Self {
        PublishedSchema(arc_swap::ArcSwapOption::from(self.get()))
    }
}

impl PartialEq for PublishedSchema {
    fn eq(&self, _: &PublishedSchema) -> bool {
        true
    }
}

impl Eq for PublishedSchema {}

/// How a resource's field selector labels are accepted, as its field label conversion
/// function in kube-apiserver accepts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPolicy {
    /// Whether `metadata.namespace` is accepted (kinds with their own conversion function
    /// that are cluster-scoped refuse it).
    pub namespace: bool,
    /// The message for a label that is not accepted; `{}` stands for the label.
    pub unsupported: &'static str,
    /// Labels accepted as another one: (alias, label), e.g. pods' `spec.host`.
    pub aliases: &'static [(&'static str, &'static str)],
}

/// A field selector label a resource does not accept; Display is the message
/// kube-apiserver gives for that resource (each conversion function words it its own way).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .message.replace("{}", .label))]
pub struct UnsupportedFieldLabel {
    /// The label as written in the selector.
    pub label: String,
    /// The resource's [`FieldPolicy::unsupported`] message; `{}` stands for the label.
    message: &'static str,
}

impl FieldPolicy {
    /// `metadata.name` and `metadata.namespace` only, refusing others with `message`.
    pub fn meta_only(message: &'static str) -> FieldPolicy {
        FieldPolicy {
            namespace: true,
            unsupported: message,
            aliases: &[],
        }
    }
}

/// One `additionalPrinterColumns` entry of a CustomResourceDefinition.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type: `integer`, `number`, `string`, `boolean`, `date`.
    #[serde(rename = "type")]
    pub type_: String,
    /// OpenAPI format, e.g. `name`.
    #[serde(default)]
    pub format: String,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// 0 = shown by default; higher = only in wide output.
    #[serde(default)]
    pub priority: i32,
    /// Simple JSONPath into the object, e.g. `.spec.replicas`.
    pub json_path: String,
}

impl ResourceInfo {
    /// `v1` for the core group, `<group>/<version>` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The kind of a list of these objects, e.g. `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The selectable field whose exact values the wake index keys watchers by (by
    /// default pods' `spec.nodeName`, what every node agent watches), if any.
    pub fn indexed_field(&self) -> Option<&str> {
        self.indexed_field.as_deref()
    }

    /// Whether `field` can be used in a field selector of this resource.
    pub fn supports_field(&self, field: &str) -> bool {
        self.convert_field_label(field).is_ok()
    }

    /// The selectable field a field selector label stands for (itself, or what an alias
    /// names), or the refusal, displayed as kube-apiserver's message.
    pub fn convert_field_label(&self, label: &str) -> Result<String, UnsupportedFieldLabel> {
        let known = label == "metadata.name"
            || (label == "metadata.namespace" && self.field_policy.namespace)
            || self.fields.iter().any(|f| f.name == label);
        if known {
            return Ok(label.to_string());
        }
        match self.field_policy.aliases.iter().find(|(a, _)| *a == label) {
            Some((_, to)) => Ok(to.to_string()),
            None => Err(UnsupportedFieldLabel {
                label: label.to_owned(),
                message: self.field_policy.unsupported,
            }),
        }
    }

    /// How values of this resource are decoded, decrypted with `transformer`.
    pub fn decode_spec(&self, transformer: Arc<ValueTransformer>) -> DecodeSpec {
        let convert = (self.storage_version != self.api_version())
            .then(|| builtin::conversion_of(&self.group, &self.resource))
            .flatten()
            .map(|conversion| Convert {
                from: self.storage_version.clone(),
                to: self.api_version(),
                kind: self.kind.clone(),
                conversion,
            });
        DecodeSpec {
            fields: self.fields.clone(),
            convert,
            transformer,
        }
    }

    /// The (group, resource) name used in log lines and metrics labels, e.g. `pods` or
    /// `deployments.apps`.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// A shared resource definition.
pub type ResourceRef = Arc<ResourceInfo>;

/// An etcd key split into the resource directory and the object's place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRoute<'k> {
    /// The directory below the prefix, e.g. `pods` or `services/specs`.
    pub etcd_dir: &'k str,
    /// `namespace/name` or `name`: the object's key inside its resource, in etcd order.
    pub object_key: &'k str,
}

/// Splits `key` (a full etcd key) into directory and object key, trying the one- and
/// two-segment directories that `known` accepts. None if the key is outside `prefix` or
/// belongs to no known directory.
pub fn route_key<'k>(
    prefix: &str,
    key: &'k str,
    known: impl Fn(&str) -> bool,
) -> Option<KeyRoute<'k>> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('/')?;
    let mut search_from = 0;
    for _ in 0..2 {
        let slash = search_from + rest.get(search_from..)?.find('/')?;
        let dir = &rest[..slash];
        if known(dir) {
            let object_key = &rest[slash + 1..];
            if object_key.is_empty() {
                return None;
            }
            return Some(KeyRoute {
                etcd_dir: dir,
                object_key,
            });
        }
        search_from = slash + 1;
    }
    None
}

/// Splits an object key into (namespace, name) for a resource of the given scope; None if
/// the key does not have the scope's shape (e.g. a cluster-scoped key with a slash).
pub fn split_object_key(object_key: &str, namespaced: bool) -> Option<(Option<&str>, &str)> {
    if namespaced {
        let (ns, name) = object_key.split_once('/')?;
        if ns.is_empty() || name.is_empty() || name.contains('/') {
            return None;
        }
        Some((Some(ns), name))
    } else if object_key.contains('/') {
        None
    } else {
        Some((None, object_key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(dir: &str) -> bool {
        matches!(
            dir,
            "pods" | "minions" | "services/specs" | "example.com/widgets"
        )
    }

    #[test]
    fn routes_namespaced_and_cluster_keys() {
        let r = route_key("/registry", "/registry/pods/default/web-1", known).unwrap();
        assert_eq!(r.etcd_dir, "pods");
        assert_eq!(r.object_key, "default/web-1");
        let r = route_key("/registry", "/registry/minions/node-1", known).unwrap();
        assert_eq!(r.etcd_dir, "minions");
        assert_eq!(r.object_key, "node-1");
    }

    #[test]
    fn routes_two_segment_directories() {
        let r = route_key("/registry", "/registry/services/specs/ns/svc", known).unwrap();
        assert_eq!(r.etcd_dir, "services/specs");
        assert_eq!(r.object_key, "ns/svc");
        let r = route_key("/registry", "/registry/example.com/widgets/ns/w", known).unwrap();
        assert_eq!(r.etcd_dir, "example.com/widgets");
    }

    #[test]
    fn ignores_keys_outside_prefix_or_unknown() {
        assert!(route_key("/registry", "compact_rev_key", known).is_none());
        assert!(route_key("/registry", "/registryx/pods/a/b", known).is_none());
        assert!(route_key("/registry", "/registry/ranges/serviceips", known).is_none());
        assert!(route_key("/registry", "/registry/pods/", known).is_none());
    }

    #[test]
    fn object_keys_must_match_scope() {
        assert_eq!(split_object_key("ns/a", true), Some((Some("ns"), "a")));
        assert_eq!(split_object_key("a", true), None);
        assert_eq!(split_object_key("a/b/c", true), None);
        assert_eq!(split_object_key("a", false), Some((None, "a")));
        assert_eq!(split_object_key("a/b", false), None);
    }
}
