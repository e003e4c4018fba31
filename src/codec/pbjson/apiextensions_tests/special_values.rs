//! The self-marshaling types' edge cases: zero, empty and absent values, what the
//! encoder makes of unusual JSON, malformed and corrupted bytes, recursion, field reads.

use serde_json::Value;

use super::objects::{v1_crd, v1beta1_crd};
use super::*;
use crate::codec::extract;
use crate::codec::wire::WireError;

#[test]
fn special_types_zero_empty_and_absent() {
    // JSON: no Raw and empty Raw are both `null` (`len(s.Raw) > 0` fails); stored JSON is
    // compacted and HTML-escaped as Go's encoder does with MarshalJSON's output.
    let s = props(
        Pb::new()
            .msg(8, Pb::new())
            .msg(20, json(""))
            .msg(20, json("null"))
            .msg(20, json(" [ 1 , {\"a\" : \"<\"} ]\n"))
            .msg(36, json("")),
    );
    assert_eq!(
        schema_text(s),
        r#"{"default":null,"enum":[null,null,[1,{"a":"\u003c"}]],"example":null}"#
    );
    // OrArray: nothing is `json.Marshal((*JSONSchemaProps)(nil))`, null; an empty
    // schema is {}; one empty element is [{}]; with both, the array wins.
    for (items, want) in [
        (Pb::new(), "null"),
        (or_schema(Pb::new()), "{}"),
        (Pb::new().bytes(2, b""), "[{}]"),
        (
            or_schema(typed("a")).msg(2, typed("b")),
            r#"[{"type":"b"}]"#,
        ),
    ] {
        let got = schema_text(props(Pb::new().msg(24, items)));
        assert_eq!(got, format!(r#"{{"items":{want}}}"#));
    }
    // OrBool: no fields is Allows false; a schema wins over Allows whatever its value.
    for (ap, want) in [
        (Pb::new(), "false"),
        (or_bool(true), "true"),
        (Pb::new().int(1, 0).msg(2, typed("x")), r#"{"type":"x"}"#),
        (Pb::new().msg(2, Pb::new()), "{}"),
    ] {
        let got = schema_text(props(Pb::new().msg(30, ap.clone()).msg(33, ap)));
        assert_eq!(
            got,
            format!(r#"{{"additionalProperties":{want},"additionalItems":{want}}}"#)
        );
    }
    // OrStringArray in `dependencies`: empty is null, a missing map value too (a zero
    // value); one empty string is [""]; with both, the strings win.
    let deps = Pb::new()
        .kv(32, "a", Pb::new())
        .msg(32, Pb::new().str(1, "b"))
        .kv(32, "c", or_strings(&[""]))
        .kv(32, "d", Pb::new().msg(1, typed("x")).str(2, "y"))
        .kv(32, "e", Pb::new().msg(1, Pb::new()));
    assert_eq!(
        schema_text(props(deps)),
        r#"{"dependencies":{"a":null,"b":null,"c":[""],"d":["y"],"e":{}}}"#
    );
    // An empty schema, and pointers set to zero beside non-pointer zeros.
    assert_eq!(schema_text(props(Pb::new())), "{}");
    assert_eq!(schema_text(Pb::new()), "{}");
    let zeros = props(
        Pb::new()
            .str(3, "")
            .int(13, 0)
            .double(9, -0.0)
            .int(38, 0)
            .str(42, ""),
    );
    assert_eq!(
        schema_text(zeros),
        r#"{"$ref":"","maximum":-0,"maxLength":0,"x-kubernetes-preserve-unknown-fields":false,"x-kubernetes-list-type":""}"#
    );
}

#[test]
fn json_encode_follows_unmarshal_json() {
    let crd = |schema: Value| {
        serde_json::json!({"apiVersion": V1BETA1, "kind": CRD,
            "spec": {"validation": {"openAPIV3Schema": schema}}})
    };
    let round_trip = |schema: Value| -> Result<Value, TranscodeError> {
        let raw = encode_json(V1BETA1, CRD, &crd(schema))?;
        let r = render(V1BETA1, CRD, &raw, None)?;
        let v: Value = serde_json::from_slice(&r.json).unwrap();
        Ok(v["spec"]["validation"]["openAPIV3Schema"].clone())
    };
    let same = serde_json::json!({
        "enum": [null, {"b": 1, "a": [true, "x"]}, 1.5, "s"],
        "items": [{}, null],
        "additionalProperties": {"type": "string"},
        "additionalItems": false,
        "dependencies": {"a": ["b", "c"], "d": {"type": "object"}}
    });
    let mut want = same.clone();
    // A null element of `items` decodes to an empty JSONSchemaProps.
    want["items"] = serde_json::json!([{}, {}]);
    assert_eq!(round_trip(same), Ok(want));
    // What UnmarshalJSON leaves empty renders as null: `items: []` (no schema, no
    // element), `items: "x"` and a `dependencies` value that is neither list nor object.
    assert_eq!(
        round_trip(serde_json::json!({"items": [], "dependencies": {"a": 3, "b": []}})),
        Ok(serde_json::json!({"items": null, "dependencies": {"a": null, "b": null}}))
    );
    assert_eq!(
        round_trip(serde_json::json!({"items": "x"})),
        Ok(serde_json::json!({"items": null}))
    );
    // OrBool refuses anything but a bool or an object, as UnmarshalJSON does.
    for bad in [
        serde_json::json!({"additionalProperties": "yes"}),
        serde_json::json!({"items": [1]}),
        serde_json::json!({"dependencies": {"a": [1]}}),
        serde_json::json!({"properties": {"a": {"nope": 1}}}),
    ] {
        assert!(
            matches!(round_trip(bad.clone()), Err(TranscodeError::Invalid(_))),
            "{bad}"
        );
    }
}

#[test]
fn malformed_special_values_are_errors() {
    let invalid = TranscodeError::Invalid;
    let cases: Vec<(Pb, TranscodeError)> = vec![
        (
            Pb::new().msg(8, Pb::new().int(1, 5)),
            invalid("JSON with the wrong wire type"),
        ),
        (
            Pb::new().msg(8, json("{")),
            invalid("embedded JSON is invalid"),
        ),
        (
            Pb::new().msg(8, json(" ")),
            invalid("embedded JSON is invalid"),
        ),
        (
            Pb::new().msg(20, json("1 2")),
            invalid("embedded JSON is invalid"),
        ),
        (
            Pb::new().msg(8, Pb::new().raw(&[0x0a, 0x05, b'1'])),
            TranscodeError::Wire(WireError::Truncated),
        ),
        (
            Pb::new().msg(24, Pb::new().int(1, 1)),
            invalid("JSONSchemaPropsOrArray with the wrong wire type"),
        ),
        (
            Pb::new().msg(24, Pb::new().int(2, 1)),
            invalid("JSONSchemaPropsOrArray with the wrong wire type"),
        ),
        (
            Pb::new().msg(24, Pb::new().bytes(2, &[0xff])),
            TranscodeError::Wire(WireError::Truncated),
        ),
        (
            Pb::new().msg(24, or_schema(Pb::new().msg(8, json("[")))),
            invalid("embedded JSON is invalid"),
        ),
        (
            Pb::new().msg(30, Pb::new().str(1, "x")),
            invalid("JSONSchemaPropsOrBool with the wrong wire type"),
        ),
        (
            Pb::new().msg(30, Pb::new().int(2, 1)),
            invalid("JSONSchemaPropsOrBool with the wrong wire type"),
        ),
        (
            Pb::new().msg(33, Pb::new().raw(&[0x08])),
            TranscodeError::Wire(WireError::Truncated),
        ),
        (
            Pb::new().kv(32, "a", Pb::new().int(2, 1)),
            invalid("JSONSchemaPropsOrStringArray with the wrong wire type"),
        ),
        (
            Pb::new().kv(32, "a", Pb::new().int(1, 1)),
            invalid("JSONSchemaPropsOrStringArray with the wrong wire type"),
        ),
        (
            Pb::new().msg(32, Pb::new().str(1, "a").int(2, 1)),
            TranscodeError::WrongWireType {
                msg: "map[string]apiextensions/v1beta1.JSONSchemaPropsOrStringArray",
                field: "value",
                wire: 0,
            },
        ),
        (
            Pb::new().double(9, f64::NAN),
            invalid("NaN or infinite float"),
        ),
    ];
    for (schema, want) in cases {
        let raw = in_crd(schema);
        assert_eq!(
            render(V1BETA1, CRD, &raw, None),
            Err(want.clone()),
            "{raw:?}"
        );
        assert_eq!(validate(V1BETA1, CRD, &raw), Err(want), "{raw:?}");
    }
}

/// xorshift32: a deterministic pseudo-random sequence.
fn next(seed: &mut u32) -> u32 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    *seed
}

#[test]
fn corrupted_crds_never_panic_and_validate_agrees() {
    let mut seed = 0x1234_5678_u32;
    let mut errors = 0;
    for (av, raw) in [(V1, v1_crd().0), (V1BETA1, v1beta1_crd().0)] {
        for round in 0..3000 {
            let mut m = raw.clone();
            let len = m.len();
            match round % 3 {
                0 => {
                    let i = next(&mut seed) as usize % len;
                    m[i] ^= 1 << (next(&mut seed) % 8);
                }
                1 => m.truncate(next(&mut seed) as usize % len),
                _ => {
                    let i = next(&mut seed) as usize % len;
                    m[i] = [0x00, 0x08, 0x0a, 0x12, 0x7f, 0x80, 0xff][next(&mut seed) as usize % 7];
                }
            }
            let rendered = render(av, CRD, &m, Some("5"));
            assert_eq!(
                validate(av, CRD, &m),
                rendered
                    .as_ref()
                    .map(|r| r.unknown_fields)
                    .map_err(Clone::clone)
            );
            match rendered {
                Ok(r) => {
                    serde_json::from_slice::<Value>(&r.json).expect("valid JSON");
                }
                Err(_) => errors += 1,
            }
        }
    }
    assert!(errors > 100, "{errors}");
}

#[test]
fn recursive_schemas_are_bounded() {
    // Schemas nested through `items`, `additionalProperties` and `properties`: each
    // level is one message level, so MAX_DEPTH bounds them whatever the path.
    let nest = |levels: u32| {
        (0..levels).fold(typed("leaf"), |inner, i| match i % 3 {
            0 => props(Pb::new().msg(24, or_schema(inner))),
            1 => props(Pb::new().msg(30, or_bool_schema(inner))),
            _ => props(Pb::new().kv(29, "p", inner)),
        })
    };
    // The schema starts 3 levels down (spec, validation, openAPIV3Schema).
    let ok = in_crd(nest(MAX_DEPTH - 3));
    assert!(render(V1BETA1, CRD, &ok, None).is_ok());
    assert!(validate(V1BETA1, CRD, &ok).is_ok());
    for raw in [in_crd(nest(MAX_DEPTH - 2)), in_crd(nest(500))] {
        assert_eq!(
            render(V1BETA1, CRD, &raw, None),
            Err(TranscodeError::TooDeep)
        );
        assert_eq!(validate(V1BETA1, CRD, &raw), Err(TranscodeError::TooDeep));
    }
    let deep = (0..200).fold(
        serde_json::json!({}),
        |v, _| serde_json::json!({"items": v}),
    );
    let crd = serde_json::json!({"spec": {"validation": {"openAPIV3Schema": deep}}});
    assert_eq!(
        encode_json(V1BETA1, CRD, &crd),
        Err(TranscodeError::TooDeep)
    );
}

#[test]
fn field_values_agree_with_the_rendering_and_stop_at_special_types() {
    let paths = [
        "metadata.name",
        "spec.group",
        "spec.scope",
        "spec.versions",
        "spec.preserveUnknownFields",
        "spec.validation.openAPIV3Schema.type",
        "spec.validation.openAPIV3Schema.title",
        "spec.validation.openAPIV3Schema.properties",
        "status.acceptedNames.kind",
        "", // an empty path reads nothing, on either side
    ];
    let raw = v1beta1_crd().0;
    let r = render(V1BETA1, CRD, &raw, None).unwrap();
    let want = extract::extract(&r.json, &paths).unwrap().fields;
    let got = field_values(V1BETA1, CRD, &raw, paths).unwrap();
    assert_eq!(got, want);
    assert_eq!(got[9], None);
    let got: Vec<String> = got.into_iter().map(Option::unwrap_or_default).collect();
    assert_eq!(got[5], "object");
    assert_eq!(got[4], "false");
    // Special types are leaves: their scalar renderings are read, nothing below them.
    let schema = props(
        Pb::new()
            .msg(8, json(r#""d""#))
            .msg(24, or_schema(typed("string")))
            .msg(30, or_bool(false)),
    );
    let raw = in_crd(schema);
    let at = |p: &str| format!("spec.validation.openAPIV3Schema.{p}");
    let paths = [
        at("default"),
        at("additionalProperties"),
        at("items"),
        at("items.type"),
        at("example"),
    ];
    let got = field_values(V1BETA1, CRD, &raw, paths.iter().map(String::as_str)).unwrap();
    assert_eq!(
        got,
        [Some("d".into()), Some("false".into()), None, None, None]
    );
}
