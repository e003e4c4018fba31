//! Whole CustomResourceDefinitions and APIServices, rendered and round-tripped.

use serde_json::Value;

use super::*;

fn names() -> Pb {
    Pb::new()
        .str(1, "widgets")
        .str(2, "widget")
        .str(3, "wd")
        .str(4, "Widget")
        .str(5, "WidgetList")
        .str(6, "all")
}

const NAMES: &str = r#"{"plural":"widgets","singular":"widget","shortNames":["wd"],"kind":"Widget",
    "listKind":"WidgetList","categories":["all"]}"#;

fn condition(ty: &str, secs: i64, reason: &str, message: &str) -> Pb {
    Pb::new()
        .str(1, ty)
        .str(2, "True")
        .msg(3, time(secs))
        .str(4, reason)
        .str(5, message)
}

/// The v1 schema: every special type, in the shapes kube-apiserver stores (embedded
/// JSON as Go's `json.Marshal` of an `interface{}` wrote it: compact, keys sorted).
fn v1_schema() -> Pb {
    let spec_props = Pb::new()
        .kv(29, "tags", props(Pb::new().str(5, "array")
            .msg(24, or_schema(props(Pb::new().str(5, "string").int(13, 63))))
            .int(16, 8)
            .int(17, 0) // *int64 set to 0: written
            .str(42, "set")))
        .kv(29, "color", props(Pb::new().str(5, "string")
            .msg(8, json(r#""red""#))
            .msg(20, json(r#""red""#))
            .msg(20, json(r#""blue""#))))
        .kv(29, "replicas", props(Pb::new().str(5, "integer").str(6, "int32")
            .msg(8, json("1"))
            .double(9, 10.5)
            .int(10, 1)
            .double(11, 0.0) // *float64 set to 0: written
            .double(19, 0.5)))
        .kv(29, "size", props(Pb::new().str(15, "^[0-9]+(m|Gi)?$")
            .msg(27, typed("integer"))
            .msg(27, typed("string"))
            .int(40, 1)))
        .kv(29, "pair", props(Pb::new().str(5, "array")
            .msg(24, or_schemas(vec![typed("string"), typed("integer")]))
            .msg(33, or_bool(false))))
        .kv(29, "labels", props(Pb::new().str(5, "object")
            .int(21, 16)
            .int(22, 1)
            .msg(30, or_bool_schema(typed("string")))
            .str(43, "granular")))
        .kv(29, "free", props(Pb::new().str(5, "object")
            .msg(30, or_bool(true))
            .int(38, 1)))
        .kv(29, "template", props(Pb::new().str(5, "object")
            .int(37, 1)
            .int(38, 1)
            .int(39, 1)))
        .kv(29, "config", props(Pb::new().str(5, "object")
            .msg(8, json(r#"{"limits":[1,2.5,-300],"mode":"fast","note":"\u003cb\u003e","off":null}"#))
            .msg(20, json(r#"{"mode":"fast"}"#))
            .msg(20, json(r#"{"mode":"slow"}"#))
            .msg(36, json(r#"{"mode":"slow"}"#))));
    let rule = Pb::new()
        .str(1, "self.replicas <= 10 || self.size != ''")
        .str(2, "")
        .str(3, "'too many: ' + string(self.replicas)")
        .str(4, "FieldValueForbidden")
        .str(5, ".replicas")
        .int(6, 0); // *bool set to false: written
    let spec = props(
        spec_props
            .str(5, "object")
            .kv(31, "^x-", typed("string"))
            .kv(
                32,
                "size",
                Pb::new().msg(1, props(Pb::new().str(23, "tags"))),
            )
            .kv(32, "color", or_strings(&["replicas", "size"]))
            .kv(
                34,
                "quantity",
                props(Pb::new().str(5, "string").str(15, "^[0-9]+$")),
            )
            .msg(
                35,
                Pb::new().str(1, "").str(2, "https://example.com/widgets"),
            )
            .msg(44, rule),
    );
    props(
        Pb::new()
            .str(4, "A widget: <small> & \u{2028}shiny")
            .str(5, "object")
            .str(23, "spec")
            .kv(29, "status", props(Pb::new().str(5, "object").int(38, 0)))
            .kv(29, "spec", spec),
    )
}

const V1_SCHEMA: &str = r#"{
  "description": "A widget: \u003csmall\u003e \u0026 \u2028shiny",
  "type": "object",
  "required": ["spec"],
  "properties": {
    "spec": {
      "type": "object",
      "properties": {
        "color": {"type": "string", "default": "red", "enum": ["red", "blue"]},
        "config": {
          "type": "object",
          "default": {"limits": [1, 2.5, -300], "mode": "fast", "note": "\u003cb\u003e", "off": null},
          "enum": [{"mode": "fast"}, {"mode": "slow"}],
          "example": {"mode": "slow"}
        },
        "free": {"type": "object", "additionalProperties": true,
                 "x-kubernetes-preserve-unknown-fields": true},
        "labels": {"type": "object", "maxProperties": 16, "minProperties": 1,
                   "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "granular"},
        "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
                 "additionalItems": false},
        "replicas": {"type": "integer", "format": "int32", "default": 1, "maximum": 10.5,
                     "exclusiveMaximum": true, "minimum": 0, "multipleOf": 0.5},
        "size": {"pattern": "^[0-9]+(m|Gi)?$", "anyOf": [{"type": "integer"}, {"type": "string"}],
                 "x-kubernetes-int-or-string": true},
        "tags": {"type": "array", "maxItems": 8, "minItems": 0,
                 "items": {"type": "string", "maxLength": 63}, "x-kubernetes-list-type": "set"},
        "template": {"type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true,
                     "x-kubernetes-embedded-resource": true}
      },
      "patternProperties": {"^x-": {"type": "string"}},
      "dependencies": {"color": ["replicas", "size"], "size": {"required": ["tags"]}},
      "definitions": {"quantity": {"type": "string", "pattern": "^[0-9]+$"}},
      "externalDocs": {"url": "https://example.com/widgets"},
      "x-kubernetes-validations": [{
        "rule": "self.replicas \u003c= 10 || self.size != ''",
        "messageExpression": "'too many: ' + string(self.replicas)",
        "reason": "FieldValueForbidden", "fieldPath": ".replicas", "optionalOldSelf": false
      }]
    },
    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}
  }
}"#;

pub(super) fn v1_crd() -> Pb {
    let column = |name: &str, ty: &str, format: &str, desc: &str, priority: i64, path: &str| {
        Pb::new()
            .str(1, name)
            .str(2, ty)
            .str(3, format)
            .str(4, desc)
            .int(5, priority)
            .str(6, path)
    };
    let scale = Pb::new()
        .str(1, ".spec.replicas")
        .str(2, ".status.replicas")
        .str(3, ".status.selector");
    let v1 = Pb::new()
        .str(1, "v1")
        .int(2, 1)
        .int(3, 1)
        .msg(4, Pb::new().msg(1, v1_schema()))
        .msg(5, Pb::new().msg(1, Pb::new()).msg(2, scale))
        .msg(
            6,
            column("Replicas", "integer", "int32", "", 0, ".spec.replicas"),
        )
        .msg(
            6,
            column(
                "Age",
                "date",
                "",
                "Time since <creation>",
                1,
                ".metadata.creationTimestamp",
            ),
        )
        .int(7, 0)
        .msg(9, Pb::new().str(1, ".spec.color"));
    let v1beta1 = Pb::new()
        .str(1, "v1beta1")
        .int(2, 1)
        .int(3, 0)
        .msg(
            4,
            Pb::new().msg(1, props(Pb::new().str(5, "object").int(38, 1))),
        )
        .int(7, 1)
        .str(8, "example.com/v1beta1 Widget is deprecated; use v1");
    let client = Pb::new()
        .msg(
            1,
            Pb::new()
                .str(1, "widgets")
                .str(2, "conv")
                .str(3, "/convert")
                .int(4, 443),
        )
        .bytes(2, b"\x00\x01ca");
    let conversion = Pb::new()
        .str(1, "Webhook")
        .msg(2, Pb::new().msg(2, client).str(3, "v1").str(3, "v1beta1"));
    let spec = Pb::new()
        .str(1, "example.com")
        .msg(3, names())
        .str(4, "Namespaced")
        .msg(7, v1)
        .msg(7, v1beta1)
        .msg(9, conversion)
        .int(10, 0);
    let status = Pb::new()
        .msg(
            1,
            condition(
                "Established",
                1_199_149_262,
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        )
        .msg(2, names())
        .str(3, "v1");
    let meta = Pb::new()
        .str(1, "widgets.example.com")
        .str(5, "6a3f0c1e-7b2d-4c55-9d1a-0f6e2b8c4d11")
        .int(7, 1)
        .msg(8, time(1_199_149_261));
    Pb::new().msg(1, meta).msg(2, spec).msg(3, status)
}

fn v1_crd_text() -> String {
    compact(&format!(
        r#"{{
  "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
  "metadata": {{"name": "widgets.example.com", "uid": "6a3f0c1e-7b2d-4c55-9d1a-0f6e2b8c4d11",
               "generation": 1, "creationTimestamp": "2008-01-01T01:01:01Z"}},
  "spec": {{
    "group": "example.com",
    "names": {NAMES},
    "scope": "Namespaced",
    "versions": [
      {{"name": "v1", "served": true, "storage": true,
        "schema": {{"openAPIV3Schema": {V1_SCHEMA}}},
        "subresources": {{"status": {{}}, "scale": {{"specReplicasPath": ".spec.replicas",
          "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}}}},
        "additionalPrinterColumns": [
          {{"name": "Replicas", "type": "integer", "format": "int32", "jsonPath": ".spec.replicas"}},
          {{"name": "Age", "type": "date", "description": "Time since \u003ccreation\u003e",
            "priority": 1, "jsonPath": ".metadata.creationTimestamp"}}
        ],
        "selectableFields": [{{"jsonPath": ".spec.color"}}]}},
      {{"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
        "deprecationWarning": "example.com/v1beta1 Widget is deprecated; use v1",
        "schema": {{"openAPIV3Schema": {{"type": "object",
          "x-kubernetes-preserve-unknown-fields": true}}}}}}
    ],
    "conversion": {{"strategy": "Webhook", "webhook": {{
      "clientConfig": {{"service": {{"namespace": "widgets", "name": "conv", "path": "/convert",
        "port": 443}}, "caBundle": "AAFjYQ=="}},
      "conversionReviewVersions": ["v1", "v1beta1"]}}}}
  }},
  "status": {{
    "conditions": [{{"type": "Established", "status": "True",
      "lastTransitionTime": "2008-01-01T01:01:02Z", "reason": "InitialNamesAccepted",
      "message": "the initial names have been accepted"}}],
    "acceptedNames": {NAMES},
    "storedVersions": ["v1"]
  }}
}}"#
    ))
}

#[test]
fn crd_v1_renders_every_special_type_as_go_marshals_it() {
    // Not obvious from the tags alone: `items` holding one schema is that object and
    // holding several an array (OrArray.MarshalJSON); `additionalProperties` is the schema
    // when one is set and the bool otherwise (OrBool); a `dependencies` entry is its
    // string list when non-empty, else its schema (OrStringArray); `minimum: 0`,
    // `minItems: 0` and `optionalOldSelf: false` are pointers set to zero, so written;
    // `uniqueItems`, `nullable` and v1's `preserveUnknownFields` are non-pointer bools
    // with omitempty, so omitted when false; map keys come out sorted.
    assert_eq!(text(V1, CRD, &v1_crd()), v1_crd_text());
}

/// The v1beta1 schema: the JSON Schema keywords v1 forbids in structural schemas.
fn v1beta1_schema() -> Pb {
    let shape = props(
        Pb::new()
            .msg(25, typed("object"))
            .msg(26, props(Pb::new().str(23, "radius")))
            .msg(26, props(Pb::new().str(23, "width").str(23, "height")))
            .msg(28, typed("null")),
    );
    props(
        Pb::new()
            .str(1, "https://example.com/widget.json")
            .str(2, "http://json-schema.org/draft-04/schema#")
            .str(5, "object")
            .str(7, "Widget")
            .kv(
                29,
                "name",
                props(Pb::new().str(5, "string").int(13, 253).int(14, 1)),
            )
            .kv(29, "alias", props(Pb::new().str(3, "#/definitions/name")))
            .kv(29, "shape", shape)
            .kv(34, "name", typed("string")),
    )
}

pub(super) fn v1beta1_crd() -> Pb {
    let spec = Pb::new()
        .str(1, "example.com")
        .str(2, "v1")
        .msg(3, names())
        .str(4, "Cluster")
        .msg(5, Pb::new().msg(1, v1beta1_schema()))
        .msg(6, Pb::new().msg(1, Pb::new()))
        .msg(7, Pb::new().str(1, "v1").int(2, 1).int(3, 1).int(7, 0))
        .msg(
            8,
            Pb::new()
                .str(1, "Color")
                .str(2, "string")
                .str(3, "")
                .str(4, "")
                .int(5, 0)
                .str(6, ".spec.color"),
        )
        .msg(9, Pb::new().str(1, "None"))
        .int(10, 0); // *bool set to false: written
    let status = Pb::new()
        .msg(
            1,
            condition(
                "Established",
                1_199_149_262,
                "InitialNamesAccepted",
                "accepted",
            ),
        )
        .msg(2, names())
        .str(3, "v1");
    Pb::new()
        .msg(1, Pb::new().str(1, "widgets.example.com"))
        .msg(2, spec)
        .msg(3, status)
}

fn v1beta1_crd_text() -> String {
    compact(&format!(
        r##"{{
  "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1beta1",
  "metadata": {{"name": "widgets.example.com"}},
  "spec": {{
    "group": "example.com", "version": "v1", "names": {NAMES}, "scope": "Cluster",
    "validation": {{"openAPIV3Schema": {{
      "id": "https://example.com/widget.json",
      "$schema": "http://json-schema.org/draft-04/schema#",
      "type": "object", "title": "Widget",
      "properties": {{
        "alias": {{"$ref": "#/definitions/name"}},
        "name": {{"type": "string", "maxLength": 253, "minLength": 1}},
        "shape": {{"allOf": [{{"type": "object"}}],
                  "oneOf": [{{"required": ["radius"]}}, {{"required": ["width", "height"]}}],
                  "not": {{"type": "null"}}}}
      }},
      "definitions": {{"name": {{"type": "string"}}}}
    }}}},
    "subresources": {{"status": {{}}}},
    "versions": [{{"name": "v1", "served": true, "storage": true}}],
    "additionalPrinterColumns": [{{"name": "Color", "type": "string", "JSONPath": ".spec.color"}}],
    "conversion": {{"strategy": "None"}},
    "preserveUnknownFields": false
  }},
  "status": {{
    "conditions": [{{"type": "Established", "status": "True",
      "lastTransitionTime": "2008-01-01T01:01:02Z", "reason": "InitialNamesAccepted",
      "message": "accepted"}}],
    "acceptedNames": {NAMES}, "storedVersions": ["v1"]
  }}
}}"##
    ))
}

#[test]
fn crd_v1beta1_renders_as_go_marshals_it() {
    // v1beta1 differs from v1 in its own tags: `preserveUnknownFields` is a *bool (false
    // is written), `versions` has omitempty, the printer column's path is `JSONPath`.
    assert_eq!(text(V1BETA1, CRD, &v1beta1_crd()), v1beta1_crd_text());
}

#[test]
fn empty_crds_render_go_zero_values() {
    // Structs are never omitted; non-omitempty nil slices are null.
    let zero_status = r#""status":{"conditions":null,"acceptedNames":{"plural":"","kind":""},"storedVersions":null}"#;
    assert_eq!(
        text(V1, CRD, &Pb::new()),
        format!(
            r#"{{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","metadata":{{}},"spec":{{"group":"","names":{{"plural":"","kind":""}},"scope":"","versions":null}},{zero_status}}}"#
        )
    );
    assert_eq!(
        text(V1BETA1, CRD, &Pb::new()),
        format!(
            r#"{{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1beta1","metadata":{{}},"spec":{{"group":"","names":{{"plural":"","kind":""}},"scope":""}},{zero_status}}}"#
        )
    );
    assert_eq!(
        text(V1, "CustomResourceDefinitionList", &Pb::new()),
        r#"{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{},"items":null}"#
    );
}

fn api_service(api_version: &str) -> (Pb, String) {
    let spec = Pb::new()
        .msg(
            1,
            Pb::new()
                .str(1, "kube-system")
                .str(2, "metrics-server")
                .int(3, 443),
        )
        .str(2, "metrics.k8s.io")
        .str(3, "v1beta1")
        .int(4, 1)
        .int(7, 100)
        .int(8, 100);
    let cond = Pb::new()
        .str(1, "Available")
        .str(2, "False")
        .msg(3, time(1_199_149_261))
        .str(4, "FailedDiscoveryCheck")
        .str(5, "failing or missing response from https://10.96.0.12:443/apis/metrics.k8s.io/v1beta1: \"timeout\" & <retry>");
    let raw = Pb::new()
        .msg(1, Pb::new().str(1, "v1beta1.metrics.k8s.io"))
        .msg(2, spec)
        .msg(3, Pb::new().msg(1, cond));
    let want = compact(&format!(
        r#"{{"kind": "APIService", "apiVersion": "{api_version}",
  "metadata": {{"name": "v1beta1.metrics.k8s.io"}},
  "spec": {{"service": {{"namespace": "kube-system", "name": "metrics-server", "port": 443}},
    "group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
    "groupPriorityMinimum": 100, "versionPriority": 100}},
  "status": {{"conditions": [{{"type": "Available", "status": "False",
    "lastTransitionTime": "2008-01-01T01:01:01Z", "reason": "FailedDiscoveryCheck",
    "message": "failing or missing response from https://10.96.0.12:443/apis/metrics.k8s.io/v1beta1: \"timeout\" \u0026 \u003cretry\u003e"}}]}}
}}"#
    ));
    (raw, want)
}

#[test]
fn api_services_render_as_go_marshals_them() {
    for av in [
        "apiregistration.k8s.io/v1",
        "apiregistration.k8s.io/v1beta1",
    ] {
        let (raw, want) = api_service(av);
        assert_eq!(text(av, "APIService", &raw), want);
        // A local APIService as gogo writes it: no service, zeros on the wire; the two
        // priorities have no omitempty, everything else does.
        let local = Pb::new().msg(
            2,
            Pb::new()
                .str(2, "")
                .str(3, "")
                .int(4, 0)
                .int(7, 0)
                .int(8, 0),
        );
        assert_eq!(
            text(av, "APIService", &local),
            format!(
                r#"{{"kind":"APIService","apiVersion":"{av}","metadata":{{}},"spec":{{"groupPriorityMinimum":0,"versionPriority":0}},"status":{{}}}}"#
            )
        );
        assert_eq!(
            text(av, "APIServiceList", &Pb::new().msg(2, Pb::new())),
            format!(
                r#"{{"kind":"APIServiceList","apiVersion":"{av}","metadata":{{}},"items":[{{"metadata":{{}},"spec":{{"groupPriorityMinimum":0,"versionPriority":0}},"status":{{}}}}]}}"#
            )
        );
    }
}

#[test]
fn json_encode_then_render_gives_the_json_back() {
    let (_, svc) = api_service("apiregistration.k8s.io/v1");
    for want in [v1_crd_text(), v1beta1_crd_text(), svc] {
        let value: Value = serde_json::from_str(&want).expect("expected text is JSON");
        let (av, kind) = (
            value["apiVersion"].as_str().unwrap(),
            value["kind"].as_str().unwrap(),
        );
        let raw = encode_json(av, kind, &value).expect("encodes");
        let r = render(av, kind, &raw, None).expect("renders");
        // Exact text: Go's field order, and embedded JSON whose keys were sorted already.
        assert_eq!(String::from_utf8(r.json).unwrap(), want);
    }
}
