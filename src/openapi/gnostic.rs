//! The v2 document in protobuf, as gnostic's `openapi.v2.Document` (the message
//! kube-apiserver serves as `application/com.github.proto-openapi.spec.v2.v1.0+protobuf`
//! and kubectl decodes for client-side validation). Written from the JSON document with
//! the message's field numbers; only what watchd's documents hold is written.

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
