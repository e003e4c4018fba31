//! One validating pass over a JSON object that pulls out only what selectors need:
//! `metadata.labels` and the resource's selectable fields. Everything else is skipped by
//! serde without building a tree.

use crate::codec::packed::{Packed, PackedBuilder};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// A field a resource can be selected by, and where its value is in the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    /// The selector's name, e.g. `spec.nodeName` or `source`.
    pub name: String,
    /// The JSON path, dot-separated, e.g. `source.component`; empty: the field is
    /// accepted but never set (it always reads as `default`).
    pub path: String,
    /// A second path read when `path` is absent or empty (events' `source` falls back to
    /// `reportingComponent`); empty: none.
    pub fallback: String,
    /// The value when the object does not have the field (`""`, or `false` for booleans).
    pub default: String,
}

impl FieldSpec {
    /// A field whose name is its path, missing = "".
    pub fn simple(name: &str) -> FieldSpec {
        FieldSpec::new(name, name, "")
    }

    /// A field `name` read at `path`, `default` when absent.
    pub fn new(name: &str, path: &str, default: &str) -> FieldSpec {
        FieldSpec {
            name: name.into(),
            path: path.into(),
            fallback: String::new(),
            default: default.into(),
        }
    }

    /// The paths to read for `specs`: each spec's path, then its fallback (either may be
    /// empty: nothing to read). [`selectable_values`] combines what was read.
    pub fn paths(specs: &[FieldSpec]) -> Vec<&str> {
        specs
            .iter()
            .flat_map(|f| [f.path.as_str(), f.fallback.as_str()])
            .collect()
    }
}

/// Each spec's value from what was read at [`FieldSpec::paths`]: the path's value, else
/// the fallback's when the path is absent or empty, else the default.
pub fn selectable_values(specs: &[FieldSpec], read: Vec<Option<String>>) -> Packed {
    let mut out = PackedBuilder::with_capacity(specs.len(), 0);
    push_selectable_values(&mut out, specs, read);
    out.finish()
}

/// [`selectable_values`], pushed onto `out`.
pub fn push_selectable_values(
    out: &mut PackedBuilder,
    specs: &[FieldSpec],
    read: Vec<Option<String>>,
) {
    let mut read = read.into_iter();
    for f in specs {
        let (primary, fallback) = (read.next().flatten(), read.next().flatten());
        out.push(match (primary.as_deref(), fallback.as_deref()) {
            (Some(p), _) if !p.is_empty() || f.fallback.is_empty() => p,
            (_, Some(fb)) if !fb.is_empty() => fb,
            (Some(p), _) => p,
            (None, _) => &f.default,
        });
    }
}

/// What the pass found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// One value per requested path, in order; None where the object has none.
    pub fields: Vec<Option<String>>,
    /// Whether an object on the way to a value read here (the top level, `metadata`, a
    /// selectable field's parents) has a key twice or a key written with escapes: JSON
    /// readers take the last of duplicate keys, and the byte scanner of `codec::json`
    /// sees keys as written, so such a value must be normalized first.
    pub irregular: bool,
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

/// Validates `json` (a complete JSON object) and extracts labels and the scalar values at
/// `paths` (dot-separated; an empty path reads nothing).
pub fn extract(json: &[u8], paths: &[&str]) -> Result<Extracted, serde_json::Error> {
    let mut root = Node::default();
    root.insert("metadata.labels").labels = true;
    for (i, p) in paths.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
        root.insert(p).field = Some(i);
    }
    let mut out = Extracted {
        labels: BTreeMap::new(),
        fields: vec![None; paths.len()],
        irregular: false,
    };
    let mut de = serde_json::Deserializer::from_slice(json);
    Seed {
        node: &root,
        out: &mut out,
        top: true,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(out)
}

struct Seed<'a> {
    node: &'a Node,
    out: &'a mut Extracted,
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn scalar_text<E>(out: &mut Extracted, i: Option<usize>, v: String) -> Result<(), E> {
    if let Some(slot) = i.and_then(|i| out.fields.get_mut(i)) {
        *slot = Some(v);
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
        let mut seen: Vec<Cow<'de, str>> = Vec::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if matches!(key, Cow::Owned(_)) || seen.contains(&key) {
                self.out.irregular = true;
            }
            match self.node.children.iter().find(|(s, _)| *s == key) {
                Some((_, child)) => map.next_value_seed(Seed {
                    node: child,
                    out: &mut *self.out,
                    top: false,
                })?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            seen.push(key);
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

/// An object key as written: borrowed from the input, or owned when it had escapes
/// (serde's own `Cow` is always owned).
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }

            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }

            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl Seed<'_> {
    fn scalar<E: serde::de::Error>(self, v: String) -> Result<(), E> {
        if self.top {
            return Err(E::custom("expected a JSON object"));
        }
        scalar_text(self.out, self.node.field, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, path: &str, default: &str) -> FieldSpec {
        FieldSpec::new(name, path, default)
    }

    fn values(json: &[u8], specs: &[FieldSpec]) -> Vec<String> {
        let e = extract(json, &FieldSpec::paths(specs)).unwrap();
        selectable_values(specs, e.fields)
            .iter()
            .map(|v| v.to_string())
            .collect()
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
        let e = extract(json, &FieldSpec::paths(&fields)).unwrap();
        assert_eq!(e.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(values(json, &fields), ["node-1", "kubelet", "true", ""]);
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let specs = [spec("spec.unschedulable", "spec.unschedulable", "false")];
        assert_eq!(values(br#"{"spec":{}}"#, &specs), ["false"]);
    }

    #[test]
    fn fallbacks_fill_absent_or_empty_values_and_empty_paths_read_nothing() {
        let mut source = spec("source", "source.component", "");
        source.fallback = "reportingComponent".into();
        let specs = [source, spec("status.podIPs", "", "")];
        let v = |j: &[u8]| values(j, &specs);
        assert_eq!(
            v(br#"{"source":{"component":"kubelet"},"reportingComponent":"x"}"#)[0],
            "kubelet"
        );
        assert_eq!(
            v(br#"{"source":{"component":""},"reportingComponent":"x"}"#)[0],
            "x"
        );
        assert_eq!(v(br#"{"source":{},"reportingComponent":"x"}"#)[0], "x");
        assert_eq!(v(br#"{"source":{}}"#)[0], "");
        assert_eq!(v(br#"{"":"never"}"#)[1], "");
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
    fn duplicate_or_escaped_keys_on_the_way_are_irregular() {
        let irregular = |json: &str| {
            extract(json.as_bytes(), &["spec.nodeName"])
                .unwrap()
                .irregular
        };
        assert!(!irregular(
            r#"{"metadata":{"name":"a"},"spec":{"nodeName":"n"},"data":{"k\"":1,"k\"":2}}"#
        ));
        assert!(irregular(r#"{"metadata":{},"metadata":{}}"#));
        assert!(irregular(r#"{"metadata":{"labels":{},"labels":{}}}"#));
        assert!(irregular(r#"{"spec":{"nodeName":"a","nodeName":"b"}}"#));
        assert!(irregular(r#"{"\u006detadata":{}}"#));
    }

    #[test]
    fn null_labels_are_empty() {
        let e = extract(br#"{"metadata":{"labels":null}}"#, &[]).unwrap();
        assert!(e.labels.is_empty());
    }
}
