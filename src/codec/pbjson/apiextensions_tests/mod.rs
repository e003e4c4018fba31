//! CustomResourceDefinitions (apiextensions.k8s.io v1 and v1beta1) and APIServices
//! (apiregistration.k8s.io v1 and v1beta1), written as gogo writes them (every
//! non-pointer field on the wire, zeros included) and rendered as kube-apiserver's Go
//! types and their marshalers (`marshal.go` in apiextensions-apiserver) would. Expected
//! texts are in Go struct order, with Go's HTML-safe escaping (`<` is `\u003c`).
//!
//! `objects.rs` holds whole objects and their round trip through the encoder;
//! `special_values.rs` the special types' edge cases: zero, empty, absent, malformed,
//! corrupted and too deep values, and field selector reads.

use super::testpb::Pb;
use super::*;
use crate::codec::wire::Reader;

mod objects;
mod special_values;

const V1: &str = "apiextensions.k8s.io/v1";
const V1BETA1: &str = "apiextensions.k8s.io/v1beta1";
const CRD: &str = "CustomResourceDefinition";

/// Drops the whitespace outside strings: expected texts are written pretty-printed.
fn compact(pretty: &str) -> String {
    let (mut out, mut in_str, mut escaped) = (String::new(), false, false);
    for c in pretty.chars() {
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if !c.is_whitespace() {
            in_str = c == '"';
            out.push(c);
        }
    }
    out
}

fn text(api_version: &str, kind: &str, raw: &Pb) -> String {
    let r = render(api_version, kind, &raw.0, None).expect("renders");
    assert_eq!(validate(api_version, kind, &raw.0), Ok(r.unknown_fields));
    String::from_utf8(r.json).expect("UTF-8")
}

fn time(secs: i64) -> Pb {
    Pb::new().int(1, secs).int(2, 0)
}

/// A JSONSchemaProps as gogo writes it: the fields of `p`, plus every non-pointer field
/// it lacks with its zero value (strings 1, 2, 4-7, 15; bools 10, 12, 18, 37, 39, 40).
fn props(p: Pb) -> Pb {
    let mut present = [false; 64];
    let mut r = Reader::new(&p.0);
    while !r.done() {
        let (num, wt) = r.tag().unwrap();
        r.skip(wt).unwrap();
        present[num as usize] = true;
    }
    let mut out = p;
    for n in [1, 2, 4, 5, 6, 7, 15] {
        if !present[n] {
            out = out.str(n as u32, "");
        }
    }
    for n in [10, 12, 18, 37, 39, 40] {
        if !present[n] {
            out = out.int(n as u32, 0);
        }
    }
    out
}

fn typed(t: &str) -> Pb {
    props(Pb::new().str(5, t))
}

/// `JSON{Raw: raw}`.
fn json(raw: &str) -> Pb {
    Pb::new().str(1, raw)
}

/// JSONSchemaPropsOrArray with a schema; with schemas.
fn or_schema(s: Pb) -> Pb {
    Pb::new().msg(1, s)
}
fn or_schemas(list: Vec<Pb>) -> Pb {
    list.into_iter().fold(Pb::new(), |p, s| p.msg(2, s))
}

/// JSONSchemaPropsOrBool: `Allows` alone; a schema (`UnmarshalJSON` sets `Allows` too).
fn or_bool(allows: bool) -> Pb {
    Pb::new().int(1, i64::from(allows))
}
fn or_bool_schema(s: Pb) -> Pb {
    Pb::new().int(1, 1).msg(2, s)
}

/// JSONSchemaPropsOrStringArray with strings.
fn or_strings(list: &[&str]) -> Pb {
    list.iter().fold(Pb::new(), |p, s| p.str(2, s))
}

/// Renders `schema` as the openAPIV3Schema of a v1beta1 CRD and returns its text.
fn schema_text(schema: Pb) -> String {
    let full = text(V1BETA1, CRD, &Pb(in_crd(schema)));
    let at = full.find(r#""openAPIV3Schema":"#).expect("schema rendered") + 18;
    let end = full.find(r#"},"status":"#).expect("status rendered");
    // `...openAPIV3Schema":X}},"status"`: strip the closing braces of validation and spec.
    full[at..end - 1].to_string()
}

/// `schema` as the openAPIV3Schema of a v1beta1 CRD.
fn in_crd(schema: Pb) -> Vec<u8> {
    Pb::new()
        .msg(2, Pb::new().msg(5, Pb::new().msg(1, schema)))
        .0
}
