//! One cached object revision: its encoded bytes and what selectors need, nothing decoded.

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::{json, Decoded, Labels, RvSpan, StorageFormat};
use crate::Revision;

/// An object as the cache holds it: encoded once, shared by every list and watcher.
#[derive(Debug)]
pub struct CachedObject {
    key: Arc<str>,
    name_at: u32,
    /// The `resourceVersion` it is served with (its etcd mod_revision, or the delete
    /// revision for the last state of a deleted object).
    pub revision: Revision,
    /// How it was stored.
    pub format: StorageFormat,
    /// Compact single-line JSON with `metadata.resourceVersion` = `revision`.
    pub json: Bytes,
    rv_span: RvSpan,
    /// Labels, for label selectors.
    pub labels: Labels,
    /// Selectable field names of the resource (shared) and this object's values.
    field_names: Arc<[String]>,
    field_values: Box<[Box<str>]>,
    /// The stored protobuf value, for protobuf clients.
    pub protobuf: Option<Bytes>,
}

/// A shared cached object.
pub type ObjectRef = Arc<CachedObject>;

impl CachedObject {
    /// Builds a cached object from its object key (`ns/name` or `name`), the resource's
    /// selectable field names (as passed to the decoder) and the decoded value.
    pub fn new(
        key: Arc<str>,
        revision: Revision,
        field_names: Arc<[String]>,
        decoded: Decoded,
    ) -> Self {
        let name_at = key.find('/').map_or(0, |i| i + 1) as u32;
        CachedObject {
            key,
            name_at,
            revision,
            format: decoded.format,
            json: decoded.json,
            rv_span: decoded.rv_span,
            labels: decoded.labels,
            field_names,
            field_values: decoded.fields,
            protobuf: decoded.protobuf,
        }
    }

    /// The object key: `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> &Arc<str> {
        &self.key
    }

    /// The namespace, if namespaced.
    pub fn namespace(&self) -> Option<&str> {
        let at = self.name_at as usize;
        (at > 0).then(|| self.key.get(..at - 1)).flatten()
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.key.get(self.name_at as usize..).unwrap_or_default()
    }

    /// The same object served at another resourceVersion (a DELETED event's last state).
    /// Costs one copy of the JSON.
    pub fn at_revision(&self, revision: Revision) -> CachedObject {
        let (json, rv_span) = json::replace_resource_version(
            &self.json,
            self.rv_span,
            &revision.to_resource_version(),
        );
        CachedObject {
            key: self.key.clone(),
            name_at: self.name_at,
            revision,
            format: self.format,
            json: Bytes::from(json),
            rv_span,
            labels: self.labels.clone(),
            field_names: self.field_names.clone(),
            field_values: self.field_values.clone(),
            protobuf: self.protobuf.clone(),
        }
    }

    /// The same object for a resource whose selectable fields changed: field values are
    /// read again from the cached JSON (absent or unreadable ones take their defaults).
    pub fn reindexed(
        &self,
        field_names: Arc<[String]>,
        specs: &[crate::codec::FieldSpec],
    ) -> CachedObject {
        let values: Box<[Box<str>]> = match crate::codec::extract::extract(&self.json, specs) {
            Ok(e) => e.fields.into_iter().map(Box::from).collect(),
            Err(_) => specs
                .iter()
                .map(|f| Box::from(f.default.as_str()))
                .collect(),
        };
        CachedObject {
            key: self.key.clone(),
            name_at: self.name_at,
            revision: self.revision,
            format: self.format,
            json: self.json.clone(),
            rv_span: self.rv_span,
            labels: self.labels.clone(),
            field_names,
            field_values: values,
            protobuf: self.protobuf.clone(),
        }
    }

    /// Bytes this object keeps alive, for the cache-size metric.
    pub fn cached_bytes(&self) -> usize {
        self.json.len()
            + self.protobuf.as_ref().map_or(0, |p| p.len())
            + self.labels.heap_bytes()
            + self
                .field_values
                .iter()
                .map(|v| v.len() + 16)
                .sum::<usize>()
            + std::mem::size_of::<Self>()
    }

    /// The object's `metadata` as a slice of its cached JSON (no copy); `{}` if absent.
    pub fn metadata_json(&self) -> Bytes {
        match json::top_level_member(&self.json, b"metadata") {
            Some(r) => self.json.slice(r),
            None => Bytes::from_static(b"{}"),
        }
    }

    /// The value of a field usable in field selectors.
    pub fn field(&self, field: &str) -> Option<&str> {
        match field {
            "metadata.name" => Some(self.name()),
            "metadata.namespace" => Some(self.namespace().unwrap_or_default()),
            _ => {
                let i = self.field_names.iter().position(|n| n == field)?;
                self.field_values.get(i).map(|v| v.as_ref())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    #[test]
    fn namespace_and_name_come_from_the_key() {
        let d = decode(br#"{"metadata":{"name":"a"}}"#, Revision(3), &[]).unwrap();
        let o = CachedObject::new(Arc::from("ns1/a"), Revision(3), Arc::from([]), d.clone());
        assert_eq!((o.namespace(), o.name()), (Some("ns1"), "a"));
        let c = CachedObject::new(Arc::from("node-1"), Revision(3), Arc::from([]), d);
        assert_eq!((c.namespace(), c.name()), (None, "node-1"));
        assert_eq!(c.field("metadata.namespace"), Some(""));
    }

    #[test]
    fn deleted_state_is_served_at_the_delete_revision() {
        let d = decode(br#"{"metadata":{"name":"a"}}"#, Revision(3), &[]).unwrap();
        let o = CachedObject::new(Arc::from("ns1/a"), Revision(3), Arc::from([]), d);
        let gone = o.at_revision(Revision(1000));
        let v: serde_json::Value = serde_json::from_slice(&gone.json).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "1000");
        assert_eq!(gone.revision, Revision(1000));
    }
}
