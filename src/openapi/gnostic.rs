//! The documents in protobuf, as gnostic's messages: the v2 document as
//! `openapi.v2.Document` (the message kube-apiserver serves as
//! `application/com.github.proto-openapi.spec.v2.v1.0+protobuf` and kubectl decodes for
//! client-side validation), the v3 ones as `openapi.v3.Document` ([`v3`]). Written from
//! the JSON documents with the messages' field numbers; only what watchd's documents hold
//! is written.

use prost::encoding::{encode_key, encode_varint, WireType};
use serde_json::{Map, Value};

fn string(buf: &mut Vec<u8>, tag: u32, s: &str) {
    bytes(buf, tag, s.as_bytes());
}

fn bytes(buf: &mut Vec<u8>, tag: u32, b: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(b.len() as u64, buf);
    buf.extend_from_slice(b);
}

fn message(buf: &mut Vec<u8>, tag: u32, write: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    write(&mut inner);
    bytes(buf, tag, &inner);
}

fn varint(buf: &mut Vec<u8>, tag: u32, v: u64) {
    encode_key(tag, WireType::Varint, buf);
    encode_varint(v, buf);
}

fn double(buf: &mut Vec<u8>, tag: u32, v: f64) {
    encode_key(tag, WireType::SixtyFourBit, buf);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// `Any { yaml = 2 }`: a value as YAML text (JSON is YAML).
fn any(buf: &mut Vec<u8>, tag: u32, v: &Value) {
    message(buf, tag, |m| string(m, 2, &v.to_string()));
}

/// `NamedAny { name = 1; value = 2 }`.
fn named_any(buf: &mut Vec<u8>, tag: u32, name: &str, v: &Value) {
    message(buf, tag, |m| {
        string(m, 1, name);
        any(m, 2, v);
    });
}

/// `NamedSchema { name = 1; value = 2 }`.
fn named_schema(buf: &mut Vec<u8>, tag: u32, name: &str, s: &Value) {
    message(buf, tag, |m| {
        string(m, 1, name);
        message(m, 2, |m| schema(m, s));
    });
}

/// The fields of `Schema` from a JSON schema object.
fn schema(buf: &mut Vec<u8>, s: &Value) {
    let Value::Object(m) = s else {
        return;
    };
    for (k, v) in m {
        match (k.as_str(), v) {
            ("$ref", Value::String(r)) => string(buf, 1, r),
            ("format", Value::String(f)) => string(buf, 2, f),
            ("title", Value::String(t)) => string(buf, 3, t),
            ("description", Value::String(d)) => string(buf, 4, d),
            ("default", v) => any(buf, 5, v),
            ("multipleOf", Value::Number(n)) => double(buf, 6, n.as_f64().unwrap_or(0.0)),
            ("maximum", Value::Number(n)) => double(buf, 7, n.as_f64().unwrap_or(0.0)),
            ("exclusiveMaximum", Value::Bool(b)) => varint(buf, 8, u64::from(*b)),
            ("minimum", Value::Number(n)) => double(buf, 9, n.as_f64().unwrap_or(0.0)),
            ("exclusiveMinimum", Value::Bool(b)) => varint(buf, 10, u64::from(*b)),
            ("maxLength", Value::Number(n)) => varint(buf, 11, int(n)),
            ("minLength", Value::Number(n)) => varint(buf, 12, int(n)),
            ("pattern", Value::String(p)) => string(buf, 13, p),
            ("maxItems", Value::Number(n)) => varint(buf, 14, int(n)),
            ("minItems", Value::Number(n)) => varint(buf, 15, int(n)),
            ("uniqueItems", Value::Bool(b)) => varint(buf, 16, u64::from(*b)),
            ("maxProperties", Value::Number(n)) => varint(buf, 17, int(n)),
            ("minProperties", Value::Number(n)) => varint(buf, 18, int(n)),
            ("required", Value::Array(r)) => {
                for f in r.iter().filter_map(Value::as_str) {
                    string(buf, 19, f);
                }
            }
            ("enum", Value::Array(e)) => e.iter().for_each(|v| any(buf, 20, v)),
            ("additionalProperties", Value::Bool(b)) => {
                message(buf, 21, |m| varint(m, 2, u64::from(*b)));
            }
            ("additionalProperties", v @ Value::Object(_)) => {
                message(buf, 21, |m| message(m, 1, |m| schema(m, v)));
            }
            ("type", Value::String(t)) => message(buf, 22, |m| string(m, 1, t)),
            ("type", Value::Array(ts)) => message(buf, 22, |m| {
                for t in ts.iter().filter_map(Value::as_str) {
                    string(m, 1, t);
                }
            }),
            ("items", v @ Value::Object(_)) => {
                message(buf, 23, |m| message(m, 1, |m| schema(m, v)));
            }
            ("items", Value::Array(items)) => message(buf, 23, |m| {
                for v in items {
                    message(m, 1, |m| schema(m, v));
                }
            }),
            ("allOf", Value::Array(all)) => {
                for v in all {
                    message(buf, 24, |m| schema(m, v));
                }
            }
            ("properties", Value::Object(props)) => message(buf, 25, |m| properties(m, props)),
            ("discriminator", Value::String(d)) => string(buf, 26, d),
            ("readOnly", Value::Bool(b)) => varint(buf, 27, u64::from(*b)),
            ("example", v) => any(buf, 30, v),
            (k, v) if k.starts_with("x-") => named_any(buf, 31, k, v),
            _ => {}
        }
    }
}

fn int(n: &serde_json::Number) -> u64 {
    n.as_i64().unwrap_or(0) as u64
}

/// `Properties { repeated NamedSchema additional_properties = 1 }`.
fn properties(buf: &mut Vec<u8>, props: &Map<String, Value>) {
    for (name, s) in props {
        named_schema(buf, 1, name, s);
    }
}

/// `Document`: `swagger = 1`, `info = 2` (`title = 1`, `version = 2`), `paths = 8` (none
/// written: watchd's v2 document has no paths), `definitions = 9`.
pub fn encode_document(doc: &Value) -> Vec<u8> {
    let mut buf = Vec::new();
    let text = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or_default();
    string(&mut buf, 1, text("swagger"));
    let info = doc.get("info").cloned().unwrap_or_default();
    message(&mut buf, 2, |m| {
        string(
            m,
            1,
            info.get("title")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        string(
            m,
            2,
            info.get("version")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
    });
    message(&mut buf, 8, |_| {});
    if let Some(Value::Object(defs)) = doc.get("definitions") {
        message(&mut buf, 9, |m| properties(m, defs));
    }
    buf
}

/// The v3 documents in protobuf, as gnostic's `openapi.v3.Document` (served as
/// `application/com.github.proto-openapi.spec.v3.v1.0+protobuf`). A schema with a `$ref`
/// is a `Reference`, as gnostic reads one; a `default` that is not a scalar is an empty
/// `DefaultType`, as gnostic's has no place for it.
pub mod v3 {
    use super::{any, double, int, message, named_any, string, varint};
    use serde_json::{Map, Value};

    /// `SchemaOrReference`: `schema = 1`, `reference = 2` (`Reference { _ref = 1 }`).
    fn schema_or_reference(buf: &mut Vec<u8>, tag: u32, s: &Value) {
        message(buf, tag, |m| match s.get("$ref").and_then(Value::as_str) {
            Some(r) => message(m, 2, |m| string(m, 1, r)),
            None => message(m, 1, |m| schema(m, s)),
        });
    }

    /// `repeated NamedSchemaOrReference` (`name = 1`, `value = 2`) at `tag`.
    fn named_schemas(buf: &mut Vec<u8>, tag: u32, props: &Map<String, Value>) {
        for (name, s) in props {
            message(buf, tag, |m| {
                string(m, 1, name);
                schema_or_reference(m, 2, s);
            });
        }
    }

    /// The fields of `Schema`.
    fn schema(buf: &mut Vec<u8>, s: &Value) {
        let Value::Object(m) = s else {
            return;
        };
        for (k, v) in m {
            match (k.as_str(), v) {
                ("nullable", Value::Bool(b)) => varint(buf, 1, u64::from(*b)),
                ("readOnly", Value::Bool(b)) => varint(buf, 3, u64::from(*b)),
                ("writeOnly", Value::Bool(b)) => varint(buf, 4, u64::from(*b)),
                ("example", v) => any(buf, 7, v),
                ("deprecated", Value::Bool(b)) => varint(buf, 8, u64::from(*b)),
                ("title", Value::String(t)) => string(buf, 9, t),
                ("multipleOf", Value::Number(n)) => double(buf, 10, n.as_f64().unwrap_or(0.0)),
                ("maximum", Value::Number(n)) => double(buf, 11, n.as_f64().unwrap_or(0.0)),
                ("exclusiveMaximum", Value::Bool(b)) => varint(buf, 12, u64::from(*b)),
                ("minimum", Value::Number(n)) => double(buf, 13, n.as_f64().unwrap_or(0.0)),
                ("exclusiveMinimum", Value::Bool(b)) => varint(buf, 14, u64::from(*b)),
                ("maxLength", Value::Number(n)) => varint(buf, 15, int(n)),
                ("minLength", Value::Number(n)) => varint(buf, 16, int(n)),
                ("pattern", Value::String(p)) => string(buf, 17, p),
                ("maxItems", Value::Number(n)) => varint(buf, 18, int(n)),
                ("minItems", Value::Number(n)) => varint(buf, 19, int(n)),
                ("uniqueItems", Value::Bool(b)) => varint(buf, 20, u64::from(*b)),
                ("maxProperties", Value::Number(n)) => varint(buf, 21, int(n)),
                ("minProperties", Value::Number(n)) => varint(buf, 22, int(n)),
                ("required", Value::Array(r)) => {
                    for f in r.iter().filter_map(Value::as_str) {
                        string(buf, 23, f);
                    }
                }
                ("enum", Value::Array(e)) => e.iter().for_each(|v| any(buf, 24, v)),
                ("type", Value::String(t)) => string(buf, 25, t),
                ("allOf", Value::Array(all)) => {
                    all.iter().for_each(|v| schema_or_reference(buf, 26, v))
                }
                ("oneOf", Value::Array(all)) => {
                    all.iter().for_each(|v| schema_or_reference(buf, 27, v))
                }
                ("anyOf", Value::Array(all)) => {
                    all.iter().for_each(|v| schema_or_reference(buf, 28, v))
                }
                ("not", v @ Value::Object(_)) => message(buf, 29, |m| schema(m, v)),
                ("items", v @ Value::Object(_)) => {
                    message(buf, 30, |m| schema_or_reference(m, 1, v))
                }
                ("properties", Value::Object(props)) => {
                    message(buf, 31, |m| named_schemas(m, 1, props))
                }
                ("additionalProperties", Value::Bool(b)) => {
                    message(buf, 32, |m| varint(m, 2, u64::from(*b)))
                }
                ("additionalProperties", v @ Value::Object(_)) => {
                    message(buf, 32, |m| schema_or_reference(m, 1, v))
                }
                ("default", v) => message(buf, 33, |m| match v {
                    Value::Number(n) => double(m, 1, n.as_f64().unwrap_or(0.0)),
                    Value::Bool(b) => varint(m, 2, u64::from(*b)),
                    Value::String(s) => string(m, 3, s),
                    _ => {}
                }),
                ("description", Value::String(d)) => string(buf, 34, d),
                ("format", Value::String(f)) => string(buf, 35, f),
                (k, v) if k.starts_with("x-") => named_any(buf, 36, k, v),
                _ => {}
            }
        }
    }

    /// `Parameter`: `name = 1`, `in = 2`, `description = 3`, `required = 4`,
    /// `schema = 10`; in `ParameterOrReference { parameter = 1 }` at `tag`.
    fn parameter(buf: &mut Vec<u8>, tag: u32, p: &Value) {
        let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
        message(buf, tag, |m| {
            message(m, 1, |m| {
                string(m, 1, text("name"));
                string(m, 2, text("in"));
                string(m, 3, text("description"));
                if p.get("required") == Some(&Value::Bool(true)) {
                    varint(m, 4, 1);
                }
                if let Some(s) = p.get("schema") {
                    schema_or_reference(m, 10, s);
                }
            })
        });
    }

    /// `Operation`: `description = 3`, `operation_id = 5`, `responses = 8`,
    /// extensions `= 13`.
    fn operation(buf: &mut Vec<u8>, op: &Value) {
        let Value::Object(o) = op else {
            return;
        };
        for (k, v) in o {
            match (k.as_str(), v) {
                ("description", Value::String(d)) => string(buf, 3, d),
                ("operationId", Value::String(id)) => string(buf, 5, id),
                ("responses", Value::Object(rs)) => message(buf, 8, |m| responses(m, rs)),
                (k, v) if k.starts_with("x-") => named_any(buf, 13, k, v),
                _ => {}
            }
        }
    }

    /// `Responses { repeated NamedResponseOrReference response_or_reference = 2 }`, each
    /// a `Response` (`description = 1`, `content = 3`: `MediaTypes` of `MediaType
    /// { schema = 1 }`).
    fn responses(buf: &mut Vec<u8>, rs: &Map<String, Value>) {
        for (code, r) in rs {
            message(buf, 2, |m| {
                string(m, 1, code);
                message(m, 2, |m| {
                    message(m, 1, |m| {
                        let d = r.get("description").and_then(Value::as_str);
                        string(m, 1, d.unwrap_or_default());
                        if let Some(Value::Object(content)) = r.get("content") {
                            message(m, 3, |m| {
                                for (media, t) in content {
                                    message(m, 1, |m| {
                                        string(m, 1, media);
                                        message(m, 2, |m| {
                                            if let Some(s) = t.get("schema") {
                                                schema_or_reference(m, 1, s);
                                            }
                                        });
                                    });
                                }
                            });
                        }
                    });
                });
            });
        }
    }

    /// `PathItem`: `get = 4`, `parameters = 13`.
    fn path_item(buf: &mut Vec<u8>, item: &Value) {
        if let Some(get) = item.get("get") {
            message(buf, 4, |m| operation(m, get));
        }
        if let Some(Value::Array(ps)) = item.get("parameters") {
            ps.iter().for_each(|p| parameter(buf, 13, p));
        }
    }

    /// `Document`: `openapi = 1`, `info = 2` (`title = 1`, `version = 6`), `paths = 4`
    /// (`repeated NamedPathItem path = 1`), `components = 5` (`schemas = 1`).
    pub fn encode_document(doc: &Value) -> Vec<u8> {
        let mut buf = Vec::new();
        let text = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        string(&mut buf, 1, &text(doc, "openapi"));
        let info = doc.get("info").cloned().unwrap_or_default();
        message(&mut buf, 2, |m| {
            string(m, 1, &text(&info, "title"));
            string(m, 6, &text(&info, "version"));
        });
        if let Some(Value::Object(paths)) = doc.get("paths") {
            message(&mut buf, 4, |m| {
                for (path, item) in paths {
                    message(m, 1, |m| {
                        string(m, 1, path);
                        message(m, 2, |m| path_item(m, item));
                    });
                }
            });
        }
        if let Some(Value::Object(schemas)) = doc.pointer("/components/schemas") {
            message(&mut buf, 5, |m| {
                message(m, 1, |m| named_schemas(m, 1, schemas));
            });
        }
        buf
    }
}
