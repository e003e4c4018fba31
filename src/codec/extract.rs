//! One validating pass over a JSON object that pulls out only what selectors need:
//! `metadata.labels` and the resource's selectable fields. Everything else is skipped by
//! serde without building a tree.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// A field a resource can be selected by, and where its value is in the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    /// The selector's name, e.g. `spec.nodeName` or `source`.
    pub name: String,
    /// The JSON path, dot-separated, e.g. `source.component`.
    pub path: String,
    /// The value when the object does not have the field (`""`, or `false` for booleans).
    pub default: String,
}

impl FieldSpec {
    /// A field whose name is its path, missing = "".
    pub fn simple(name: &str) -> FieldSpec {
        FieldSpec {
            name: name.into(),
            path: name.into(),
            default: String::new(),
        }
    }
}

/// What the pass found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// One value per requested field, in order (defaults filled in).
    pub fields: Vec<String>,
}

#[derive(Default)]
struct Node {
    children: Vec<(String, Node)>,
    field: Option<usize>,
    labels: bool,
}

impl Node {
    fn insert(&mut self, path: &str) -> &mut Node {
        let mut node = self;
        for seg in path.split('.') {
            let i = match node.children.iter().position(|(s, _)| s == seg) {
                Some(i) => i,
                None => {
                    node.children.push((seg.to_string(), Node::default()));
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i].1;
        }
        node
    }
}

/// Validates `json` (a complete JSON object) and extracts labels and `fields`.
pub fn extract(json: &[u8], fields: &[FieldSpec]) -> Result<Extracted, serde_json::Error> {
    let mut root = Node::default();
    root.insert("metadata.labels").labels = true;
    for (i, f) in fields.iter().enumerate() {
        root.insert(&f.path).field = Some(i);
    }
    let mut out = Extracted {
        labels: BTreeMap::new(),
        fields: vec![String::new(); fields.len()],
    };
    let mut found = vec![false; fields.len()];
    let mut de = serde_json::Deserializer::from_slice(json);
    Seed {
        node: &root,
        out: &mut out,
        found: &mut found,
        top: true,
    }
    .deserialize(&mut de)?;
    de.end()?;
    for (i, f) in fields.iter().enumerate() {
        if !found[i] {
            out.fields[i] = f.default.clone();
        }
    }
    Ok(out)
}

struct Seed<'a> {
    node: &'a Node,
    out: &'a mut Extracted,
    found: &'a mut Vec<bool>,
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn scalar_text<E>(
    out: &mut Extracted,
    found: &mut [bool],
    i: Option<usize>,
    v: String,
) -> Result<(), E> {
    if let Some(i) = i {
        if let (Some(slot), Some(f)) = (out.fields.get_mut(i), found.get_mut(i)) {
            *slot = v;
            *f = true;
        }
    }
    Ok(())
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(if self.top {
            "a JSON object"
        } else {
            "a JSON value"
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.node.labels {
            while let Some((k, v)) = map.next_entry::<String, Option<String>>()? {
                self.out.labels.insert(k, v.unwrap_or_default());
            }
            return Ok(());
        }
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match self.node.children.iter().find(|(s, _)| *s == key) {
                Some((_, child)) => map.next_value_seed(Seed {
                    node: child,
                    out: &mut *self.out,
                    found: &mut *self.found,
                    top: false,
                })?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.top {
            return Err(serde::de::Error::custom("expected a JSON object"));
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.scalar(v.to_string())
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<(), E> {
        self.scalar(v)
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.scalar(v.to_string())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(v.to_string())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(v.to_string())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        self.scalar(v.to_string())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        if self.top {
            return Err(E::custom("expected a JSON object"));
        }
        Ok(())
    }
}

impl Seed<'_> {
    fn scalar<E: serde::de::Error>(self, v: String) -> Result<(), E> {
        if self.top {
            return Err(E::custom("expected a JSON object"));
        }
        scalar_text(self.out, self.found, self.node.field, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, path: &str, default: &str) -> FieldSpec {
        FieldSpec {
            name: name.into(),
            path: path.into(),
            default: default.into(),
        }
    }

    #[test]
    fn labels_and_fields_come_out_of_one_pass() {
        let json = br#"{"metadata":{"name":"p","labels":{"app":"web","tier":"fe"}},
            "spec":{"nodeName":"node-1","containers":[{"name":"c"}],"unschedulable":true},
            "source":{"component":"kubelet"}}"#;
        let fields = [
            FieldSpec::simple("spec.nodeName"),
            spec("source", "source.component", ""),
            spec("spec.unschedulable", "spec.unschedulable", "false"),
            FieldSpec::simple("status.phase"),
        ];
        let e = extract(json, &fields).unwrap();
        assert_eq!(e.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(e.fields, vec!["node-1", "kubelet", "true", ""]);
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let e = extract(
            br#"{"spec":{}}"#,
            &[spec("spec.unschedulable", "spec.unschedulable", "false")],
        )
        .unwrap();
        assert_eq!(e.fields, vec!["false"]);
    }

    #[test]
    fn invalid_or_non_object_json_is_an_error() {
        assert!(extract(br#"{"a":"#, &[]).is_err());
        assert!(extract(br#"[1]"#, &[]).is_err());
        assert!(extract(br#""s""#, &[]).is_err());
        assert!(extract(br#"{"a":1} x"#, &[]).is_err());
        assert!(extract(br#"{"metadata":{"labels":{"a":1}}}"#, &[]).is_err());
    }

    #[test]
    fn null_labels_are_empty() {
        let e = extract(br#"{"metadata":{"labels":null}}"#, &[]).unwrap();
        assert!(e.labels.is_empty());
    }
}
