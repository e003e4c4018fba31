//! `--index-field=RESOURCE:FIELD`: per resource, the selectable field whose exact
//! values the wake index keys watchers by, so that a watcher selecting one value
//! (`spec.nodeName=node-1`, what every node agent asks) is woken by the events of
//! objects with that value only. One field per resource; pods' `spec.nodeName` unless
//! the flag says otherwise.

use std::str::FromStr;
use std::sync::Arc;

use super::ResourceInfo;

/// One resource's indexed field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexField {
    /// The resource's API group (empty: the core group).
    pub group: String,
    /// The plural resource name.
    pub resource: String,
    /// The selectable field, as a field selector names it.
    pub field: String,
}

impl FromStr for IndexField {
    type Err = String;

    /// `RESOURCE:FIELD`, RESOURCE a plural name and, outside the core group, its group
    /// after a dot as kubectl writes it (`pods:spec.nodeName`,
    /// `jobs.batch:status.successful`).
    fn from_str(s: &str) -> Result<Self, String> {
        let (resource, field) = s
            .split_once(':')
            .filter(|(r, f)| !r.is_empty() && !f.is_empty())
            .ok_or_else(|| {
                format!("{s:?}: expected RESOURCE:FIELD, e.g. pods:spec.nodeName or jobs.batch:status.successful")
            })?;
        let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
        Ok(IndexField {
            group: group.to_string(),
            resource: resource.to_string(),
            field: field.to_string(),
        })
    }
}

/// The indexed fields of every resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFields(Arc<[IndexField]>);

impl Default for IndexFields {
    /// Pods by `spec.nodeName`.
    fn default() -> Self {
        IndexFields(Arc::from([IndexField {
            group: String::new(),
            resource: "pods".into(),
            field: "spec.nodeName".into(),
        }]))
    }
}

impl IndexFields {
    /// The given fields, at most one per resource.
    pub fn new(fields: Vec<IndexField>) -> Result<Self, String> {
        for (i, f) in fields.iter().enumerate() {
            if let Some(other) = fields[..i]
                .iter()
                .find(|o| o.group == f.group && o.resource == f.resource)
            {
                return Err(format!(
                    "{} is indexed by {} and {}: one field per resource",
                    qualified(f),
                    other.field,
                    f.field
                ));
            }
        }
        Ok(IndexFields(fields.into()))
    }

    /// `info`'s indexed field, as its selectors name it: the configured one when it is a
    /// selectable field of the resource (beside `metadata.name` and
    /// `metadata.namespace`, which are keys of their own), else None with a warning.
    pub fn field_for(&self, info: &ResourceInfo) -> Option<String> {
        let f = self
            .0
            .iter()
            .find(|f| f.group == info.group && f.resource == info.resource)?;
        match info.convert_field_label(&f.field) {
            Ok(field) if info.fields.iter().any(|s| s.name == field) => Some(field),
            _ => {
                tracing::warn!(
                    resource = %info.qualified_name(),
                    field = %f.field,
                    "--index-field names no selectable field of the resource; its watchers are not indexed"
                );
                None
            }
        }
    }
}

/// `resource.group` (or `resource`), as the flag names it.
fn qualified(f: &IndexField) -> String {
    if f.group.is_empty() {
        f.resource.clone()
    } else {
        format!("{}.{}", f.resource, f.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtin;

    #[test]
    fn flags_name_a_resource_and_its_field() {
        let f: IndexField = "jobs.batch:status.successful".parse().unwrap();
        assert_eq!((f.group.as_str(), f.resource.as_str()), ("batch", "jobs"));
        assert_eq!(f.field, "status.successful");
        let f: IndexField = "events:involvedObject.name".parse().unwrap();
        assert_eq!((f.group.as_str(), f.resource.as_str()), ("", "events"));
        for bad in ["pods", ":spec.nodeName", "pods:", ""] {
            assert!(bad.parse::<IndexField>().is_err(), "{bad:?}");
        }
        let twice = vec![
            "pods:spec.nodeName".parse().unwrap(),
            "pods:status.phase".parse().unwrap(),
        ];
        let e = IndexFields::new(twice).unwrap_err();
        assert!(
            e.contains("pods is indexed by spec.nodeName and status.phase"),
            "{e}"
        );
    }

    #[test]
    fn a_resource_gets_its_field_when_it_is_selectable() {
        let pods = builtin::find("", "pods");
        let events = builtin::find("", "events");
        assert_eq!(
            IndexFields::default().field_for(&pods).as_deref(),
            Some("spec.nodeName")
        );
        assert_eq!(IndexFields::default().field_for(&events), None);
        let fields = IndexFields::new(vec![
            "events:involvedObject.name".parse().unwrap(),
            // An alias: indexed by the field it stands for.
            "pods:spec.host".parse().unwrap(),
        ])
        .unwrap();
        assert_eq!(
            fields.field_for(&events).as_deref(),
            Some("involvedObject.name")
        );
        assert_eq!(fields.field_for(&pods).as_deref(), Some("spec.nodeName"));
        let unselectable = IndexFields::new(vec!["pods:spec.containers".parse().unwrap()]).unwrap();
        assert_eq!(unselectable.field_for(&pods), None);
        let name = IndexFields::new(vec!["pods:metadata.name".parse().unwrap()]).unwrap();
        assert_eq!(name.field_for(&pods), None, "names are keys of their own");
    }
}
