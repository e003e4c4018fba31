//! Hand-built protobuf holding zeros, empty strings, empty structs, nil and empty
//! collections, pointers set to zero, unsorted maps, unknown fields and malformed bytes:
//! the cases the all-fields-set fixtures cannot show. Expected values follow the Go
//! types and `encoding/json` (see the module docs).

use serde_json::{json, Value};

use super::testpb::Pb;
use super::*;
use crate::codec::wire::WireError;

fn time(secs: i64) -> Pb {
    Pb::new().int(1, secs).int(2, 0)
}

fn render_json(api_version: &str, kind: &str, raw: &Pb, rv: Option<&str>) -> (Value, Rendered) {
    let r = render(api_version, kind, &raw.0, rv).expect("renders");
    let v: Value = serde_json::from_slice(&r.json).expect("valid JSON");
    (v, r)
}

/// A Pod as gogo writes one: every non-pointer field on the wire, zeros included.
fn zero_pod() -> Pb {
    let meta = Pb::new()
        .str(1, "web")
        .str(2, "")
        .str(3, "default")
        .str(6, "")
        .int(7, 0);
    let port = Pb::new()
        .str(1, "")
        .int(2, 0)
        .int(3, 80)
        .str(4, "TCP")
        .str(5, "");
    let container = Pb::new()
        .str(1, "c")
        .str(2, "")
        .msg(6, port)
        .msg(8, Pb::new())
        .str(13, "")
        .int(16, 0);
    let spec = Pb::new()
        .msg(2, container)
        .str(3, "")
        .int(4, 30) // terminationGracePeriodSeconds *int64
        .int(11, 0) // hostNetwork false, omitempty
        .int(25, 0); // priority *int32 set to 0
    let status_c = Pb::new()
        .str(1, "c")
        .msg(2, Pb::new()) // state {}
        .msg(3, Pb::new()) // lastState {}
        .int(4, 0)
        .int(5, 0) // restartCount 0
        .str(6, "")
        .str(7, "")
        .str(8, "");
    let cond = Pb::new()
        .str(1, "Ready")
        .int(7, 0)
        .str(2, "True")
        .msg(3, Pb::new()) // zero lastProbeTime: empty bytes
        .msg(4, time(1_199_149_261))
        .str(5, "")
        .str(6, "");
    let status = Pb::new()
        .int(17, 0)
        .str(1, "Running")
        .msg(2, cond)
        .msg(8, status_c)
        .str(9, "");
    Pb::new().msg(1, meta).msg(2, spec).msg(3, status)
}

#[test]
fn zero_values_follow_go_json_rules() {
    let (v, r) = render_json("v1", "Pod", &zero_pod(), None);
    assert_eq!(r.unknown_fields, 0);
    assert_eq!(v["kind"], "Pod");
    assert_eq!(v["apiVersion"], "v1");
    // ObjectMeta: all omitempty; a zero creationTimestamp is omitted (omitzero, 1.34).
    assert_eq!(
        v["metadata"],
        json!({"name": "web", "namespace": "default"})
    );
    let spec = &v["spec"];
    assert_eq!(
        spec["containers"][0],
        json!({"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {}})
    );
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["priority"], 0, "a pointer set to zero is written");
    for absent in [
        "hostNetwork",
        "restartPolicy",
        "activeDeadlineSeconds",
        "volumes",
        "nodeSelector",
    ] {
        assert!(spec.get(absent).is_none(), "{absent} must be omitted");
    }
    assert_eq!(
        v["status"]["containerStatuses"][0],
        json!({"name": "c", "state": {}, "lastState": {}, "ready": false, "restartCount": 0,
               "image": "", "imageID": ""})
    );
    assert_eq!(
        v["status"]["conditions"][0],
        json!({"type": "Ready", "status": "True", "lastProbeTime": null,
               "lastTransitionTime": "2008-01-01T01:01:01Z"})
    );
    assert_eq!(v["status"]["phase"], "Running");
    assert!(v["status"].get("observedGeneration").is_none());
    // Go struct order, kind and apiVersion first.
    let text = String::from_utf8(r.json).unwrap();
    assert!(text.starts_with(r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"default"},"spec":{"containers":"#), "{text}");
}

#[test]
fn fields_missing_on_the_wire_get_go_zero_values() {
    // A container status and a condition with nothing but their names.
    let status = Pb::new()
        .msg(8, Pb::new().str(1, "c"))
        .msg(2, Pb::new().str(1, "Ready"));
    let raw = Pb::new().msg(3, status);
    let (v, _) = render_json("v1", "Pod", &raw, None);
    assert_eq!(v["metadata"], json!({}));
    // PodSpec is missing: a struct still renders, with its non-omitempty nil slice.
    assert_eq!(v["spec"], json!({"containers": null}));
    assert_eq!(
        v["status"]["containerStatuses"][0],
        json!({"name": "c", "state": {}, "lastState": {}, "ready": false, "restartCount": 0,
               "image": "", "imageID": ""})
    );
    assert_eq!(
        v["status"]["conditions"][0],
        json!({"type": "Ready", "status": "", "lastProbeTime": null, "lastTransitionTime": null})
    );
}

#[test]
fn creation_timestamp_zero_is_omitted_and_set_is_rendered() {
    let zero = Pb::new().msg(
        1,
        Pb::new()
            .str(1, "a")
            .msg(8, Pb::new())
            .msg(9, time(gojson::ZERO_TIME_UNIX)),
    );
    let (v, _) = render_json("v1", "ConfigMap", &zero, None);
    // deletionTimestamp is a *Time set to the zero time: written, as null.
    assert_eq!(
        v["metadata"],
        json!({"name": "a", "deletionTimestamp": null})
    );
    let set = Pb::new().msg(1, Pb::new().msg(8, time(0)));
    let (v, _) = render_json("v1", "ConfigMap", &set, None);
    assert_eq!(v["metadata"]["creationTimestamp"], "1970-01-01T00:00:00Z");
}

#[test]
fn maps_are_sorted_and_last_entry_wins() {
    let raw = Pb::new()
        .msg(
            1,
            Pb::new()
                .str(1, "cm")
                .entry(11, "z", "1")
                .entry(11, "a", "2"),
        )
        .int(4, 0) // immutable *bool = false
        .entry(2, "b", "<x&y>")
        .entry(2, "a", "first")
        .entry(2, "a", "second")
        .msg(3, Pb::new().str(1, "bin").bytes(2, b"\x00\xffhi"))
        .msg(3, Pb::new().str(1, "nil")); // value missing: []byte{} → ""
    let (v, r) = render_json("v1", "ConfigMap", &raw, None);
    assert_eq!(
        v,
        json!({"kind": "ConfigMap", "apiVersion": "v1",
               "metadata": {"name": "cm", "labels": {"a": "2", "z": "1"}},
               "immutable": false,
               "data": {"a": "second", "b": "<x&y>"},
               "binaryData": {"bin": "AP9oaQ==", "nil": ""}})
    );
    let text = String::from_utf8(r.json).unwrap();
    assert!(text.contains(r#""labels":{"a":"2","z":"1"}"#), "{text}");
    assert!(
        text.contains(r#""b":"\u003cx\u0026y\u003e""#),
        "Go escapes HTML characters: {text}"
    );
}

#[test]
fn resource_version_is_overridden_and_located() {
    let raw = Pb::new().msg(1, Pb::new().str(1, "a").str(6, "999"));
    let r = render("v1", "ConfigMap", &raw.0, Some("184467440")).unwrap();
    let span = &r.json[r.rv_span.at as usize..(r.rv_span.at + r.rv_span.len) as usize];
    assert_eq!(span, b"184467440");
    let v: Value = serde_json::from_slice(&r.json).unwrap();
    assert_eq!(
        v["metadata"],
        json!({"name": "a", "resourceVersion": "184467440"})
    );
    // Without metadata on the wire, and for a list's ListMeta.
    let r = render("v1", "ConfigMap", &[], Some("7")).unwrap();
    assert_eq!(
        r.json,
        br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"7"}}"#
    );
    let r = render("v1", "PodList", &[], Some("8")).unwrap();
    assert_eq!(
        r.json,
        br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"8"},"items":null}"#
    );
    // None keeps the wire's value and reports where it is.
    let r = render("v1", "ConfigMap", &raw.0, None).unwrap();
    assert_eq!(
        &r.json[r.rv_span.at as usize..(r.rv_span.at + r.rv_span.len) as usize],
        b"999"
    );
    // Only the root's metadata: an owner's nested objects keep theirs.
    let tpl = Pb::new()
        .msg(1, Pb::new().str(6, "5"))
        .msg(2, Pb::new().msg(1, Pb::new().str(6, "6")));
    let (v, _) = render_json("v1", "PodTemplate", &tpl, Some("9"));
    assert_eq!(v["metadata"]["resourceVersion"], "9");
    assert_eq!(v["template"]["metadata"]["resourceVersion"], "6");
}

#[test]
fn special_types_render_like_their_go_marshalers() {
    let ports = Pb::new()
        .msg(
            1,
            Pb::new()
                .str(1, "a")
                .int(3, 80)
                .msg(4, Pb::new().int(1, 0).int(2, 8080).str(3, "")),
        )
        .msg(
            1,
            Pb::new()
                .str(1, "b")
                .int(3, -1)
                .msg(4, Pb::new().int(1, 1).int(2, 0).str(3, "http")),
        )
        .msg(1, Pb::new().str(1, "c").int(3, 1)); // targetPort missing: IntOrString zero → 0
    let (v, _) = render_json("v1", "Service", &Pb::new().msg(2, ports), None);
    let p = &v["spec"]["ports"];
    assert_eq!(p[0], json!({"name": "a", "port": 80, "targetPort": 8080}));
    assert_eq!(p[1], json!({"name": "b", "port": -1, "targetPort": "http"}));
    assert_eq!(p[2], json!({"name": "c", "port": 1, "targetPort": 0}));

    // Quantities, including a map value missing from its entry (zero quantity "0").
    let res = Pb::new()
        .msg(1, Pb::new().str(1, "cpu").msg(2, Pb::new().str(1, "100m")))
        .msg(1, Pb::new().str(1, "memory"));
    let pod = Pb::new().msg(2, Pb::new().msg(2, Pb::new().str(1, "c").msg(8, res)));
    let (v, _) = render_json("v1", "Pod", &pod, None);
    assert_eq!(
        v["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "100m", "memory": "0"}})
    );

    // MicroTime keeps microseconds (truncated); RawExtension and FieldsV1 embed JSON.
    let ev = Pb::new().msg(2, Pb::new().int(1, 1_199_149_261).int(2, 123_456_789));
    let (v, _) = render_json("events.k8s.io/v1", "Event", &ev, None);
    assert_eq!(v["eventTime"], "2008-01-01T01:01:01.123456Z");
    assert_eq!(v["regarding"], json!({}));
    let cr = Pb::new()
        .msg(2, Pb::new().bytes(1, b" {\"a\" : [1, \"<\"]} "))
        .int(3, 0);
    let r = render("apps/v1", "ControllerRevision", &cr.0, None).unwrap();
    assert_eq!(r.json, br#"{"kind":"ControllerRevision","apiVersion":"apps/v1","metadata":{},"data":{"a":[1,"\u003c"]},"revision":0}"#);
    let mf = Pb::new().msg(
        1,
        Pb::new().msg(
            17,
            Pb::new()
                .str(1, "m")
                .msg(7, Pb::new().bytes(1, b"{\"f:a\":{}}")),
        ),
    );
    let (v, _) = render_json("v1", "ConfigMap", &mf, None);
    assert_eq!(
        v["metadata"]["managedFields"],
        json!([{"manager": "m", "fieldsV1": {"f:a": {}}}])
    );
    // WatchEvent has no TypeMeta: no kind/apiVersion; a nil RawExtension is null.
    let r = render("v1", "WatchEvent", &Pb::new().str(1, "ADDED").0, None).unwrap();
    assert_eq!(r.json, br#"{"type":"ADDED","object":null}"#);
}

#[test]
fn list_wrappers_distinguish_nil_and_empty() {
    // APIResource.verbs is a nullable named slice without omitempty.
    let list = Pb::new()
        .msg(
            2,
            Pb::new()
                .str(1, "pods")
                .msg(4, Pb::new().str(1, "get").str(1, "list")),
        )
        .msg(2, Pb::new().str(1, "nodes").msg(4, Pb::new()))
        .msg(2, Pb::new().str(1, "none"));
    let (v, _) = render_json("v1", "APIResourceList", &list, None);
    let verbs: Vec<&Value> = (0..3).map(|i| &v["resources"][i]["verbs"]).collect();
    assert_eq!(verbs, [&json!(["get", "list"]), &json!([]), &Value::Null]);
    assert_eq!(v["groupVersion"], "");
    // UserInfo.extra: map of ExtraValue; a missing entry value is an empty list.
    let user = Pb::new()
        .msg(4, Pb::new().str(1, "a").msg(2, Pb::new().str(1, "x")))
        .msg(4, Pb::new().str(1, "b"));
    let tr = Pb::new().msg(3, Pb::new().int(1, 1).msg(2, user));
    let (v, _) = render_json("authentication.k8s.io/v1", "TokenReview", &tr, None);
    assert_eq!(
        v["status"],
        json!({"authenticated": true, "user": {"extra": {"a": ["x"], "b": []}}})
    );
    assert_eq!(v["spec"], json!({}));
}

#[test]
fn packed_and_unpacked_repeated_scalars_are_read() {
    // PodPortForwardOptions.ports is []int32: unpacked as gogo writes it, or packed.
    let unpacked = Pb::new().int(1, 80).int(1, 443);
    let packed = Pb::new().bytes(1, &Pb::new().varint(80).varint(443).0);
    for raw in [unpacked, packed] {
        let (v, _) = render_json("v1", "PodPortForwardOptions", &raw, None);
        assert_eq!(
            v,
            json!({"kind": "PodPortForwardOptions", "apiVersion": "v1", "ports": [80, 443]})
        );
    }
    // An empty packed field decodes to a nil slice: omitted under omitempty.
    let (v, _) = render_json(
        "v1",
        "PodPortForwardOptions",
        &Pb::new().bytes(1, &[]),
        None,
    );
    assert_eq!(
        v,
        json!({"kind": "PodPortForwardOptions", "apiVersion": "v1"})
    );
}

#[test]
fn strings_keep_go_escaping_and_replace_invalid_utf8() {
    let raw = Pb::new().msg(
        1,
        Pb::new().bytes(1, b"a\xffb").entry(12, "k", "\u{2028}\n"),
    );
    let r = render("v1", "ConfigMap", &raw.0, None).unwrap();
    let text = String::from_utf8(r.json).expect("output is UTF-8");
    assert!(text.contains(r#""name":"a\ufffdb""#), "{text}");
    assert!(text.contains(r#""annotations":{"k":"\u2028\n"}"#), "{text}");
}

#[test]
fn unknown_fields_are_skipped_and_counted() {
    let spec = Pb::new()
        .msg(2, Pb::new().str(1, "d").str(200, "new"))
        .tag(77, 5)
        .raw(&[1, 2, 3, 4]);
    let raw = zero_pod().int(99, 5).msg(2, spec);
    let (v, r) = render_json("v1", "Pod", &raw, None);
    assert_eq!(r.unknown_fields, 3);
    // The second spec occurrence wins, as the last singular message does here.
    assert_eq!(
        v["spec"]["containers"][0],
        json!({"name": "d", "resources": {}})
    );
}

#[test]
fn meta_kinds_resolve_in_any_group_version() {
    let status = Pb::new().str(2, "Failure").int(6, 404);
    let (v, _) = render_json("apps/v1", "Status", &status, None);
    assert_eq!(
        v,
        json!({"kind": "Status", "apiVersion": "apps/v1", "metadata": {}, "status": "Failure", "code": 404})
    );
    assert!(matches!(
        render("v1", "NoSuchKind", &[], None),
        Err(TranscodeError::UnknownType { .. })
    ));
    assert!(is_known("apps/v1", "Deployment") && !is_known("apps/v1", "Pod"));
    let all: Vec<_> = kinds().collect();
    assert!(
        all.len() > 300
            && all.contains(&("v1", "Pod"))
            && all.contains(&("meta.k8s.io/v1", "Status"))
    );
    assert!(all.iter().all(|(v, k)| is_known(v, k)));
}

#[test]
fn malformed_bytes_are_errors() {
    let cases: Vec<(Vec<u8>, TranscodeError)> = vec![
        (
            vec![0x0a, 0x05, 0x01],
            TranscodeError::Wire(WireError::Truncated),
        ),
        (
            vec![0x0a; 1].into_iter().chain([0xff; 11]).collect(),
            TranscodeError::Wire(WireError::Varint),
        ),
        (vec![0x0b], TranscodeError::Wire(WireError::WireType(3))),
        (
            vec![0x02, 0x00],
            TranscodeError::Wire(WireError::FieldNumber),
        ),
        (
            Pb::new().msg(1, Pb::new().int(1, 5)).0,
            TranscodeError::WrongWireType {
                msg: "meta/v1.ObjectMeta",
                field: "name",
                wire: 0,
            },
        ),
        (
            Pb::new().msg(2, Pb::new().bytes(1, b"\x00")).int(3, 0).0,
            TranscodeError::Invalid("embedded object is not JSON"),
        ),
        (
            Pb::new().msg(2, Pb::new().bytes(1, b"{")).0,
            TranscodeError::Invalid("embedded JSON is invalid"),
        ),
    ];
    // Two ObjectMetas: refused (Go would merge them; the RV rewrite could not).
    let twice = Pb::new()
        .msg(1, Pb::new().str(1, "a"))
        .msg(1, Pb::new().str(6, "7"));
    assert_eq!(
        render("v1", "ConfigMap", &twice.0, Some("5")),
        Err(TranscodeError::Invalid("object metadata repeated"))
    );
    assert_eq!(
        validate("v1", "ConfigMap", &twice.0),
        Err(TranscodeError::Invalid("object metadata repeated"))
    );
    for (raw, want) in cases {
        assert_eq!(
            render("apps/v1", "ControllerRevision", &raw, None),
            Err(want.clone()),
            "{raw:?}"
        );
    }
    let bad_intstr = Pb::new().msg(
        2,
        Pb::new().msg(1, Pb::new().str(1, "a").msg(4, Pb::new().int(1, 2))),
    );
    assert_eq!(
        render("v1", "Service", &bad_intstr.0, None),
        Err(TranscodeError::Invalid("IntOrString of unknown type"))
    );
    let empty_quantity = Pb::new().msg(
        2,
        Pb::new().msg(
            2,
            Pb::new().str(1, "c").msg(
                8,
                Pb::new().msg(1, Pb::new().str(1, "cpu").msg(2, Pb::new().str(1, ""))),
            ),
        ),
    );
    assert!(render("v1", "Pod", &empty_quantity.0, None).is_err());
}

#[test]
fn nesting_is_bounded() {
    let mut ctx = render::Ctx::new(Vec::with_capacity(16), None);
    let msg = root("v1", "Pod").unwrap();
    assert_eq!(
        ctx.object(msg, &[], MAX_DEPTH + 1, render::Meta::None),
        Err(Box::new(TranscodeError::TooDeep))
    );
    // Deep but legal nesting through the real schema (spec.affinity.nodeAffinity...).
    let terms = Pb::new().msg(
        1,
        Pb::new().msg(1, Pb::new().str(1, "k").str(2, "In").str(3, "v")),
    );
    let affinity = Pb::new().msg(1, Pb::new().msg(1, terms));
    let pod = Pb::new().msg(2, Pb::new().msg(18, affinity));
    let (v, _) = render_json("v1", "Pod", &pod, None);
    let t =
        &v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    assert_eq!(
        t,
        &json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]})
    );
}

#[test]
fn stored_values_are_read_through_the_envelope() {
    let tm = Pb::new().str(1, "v1").str(2, "ConfigMap");
    let mut value = crate::codec::envelope::MAGIC.to_vec();
    value.extend(
        Pb::new()
            .msg(1, tm)
            .msg(2, Pb::new().msg(1, Pb::new().str(1, "x")))
            .0,
    );
    let r = render_stored(&value, Some("3")).unwrap();
    assert_eq!(
        r.json,
        br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","resourceVersion":"3"}}"#
    );
    assert_eq!(
        render_stored(b"nope", None),
        Err(TranscodeError::Wire(WireError::NoMagic))
    );
    let mut gz = crate::codec::envelope::MAGIC.to_vec();
    gz.extend(Pb::new().str(3, "gzip").0);
    assert_eq!(render_stored(&gz, None), Err(TranscodeError::ContentType));
}

/// A validating pass skips fields absent from the wire while it is more than
/// `ZERO_NESTING_MAX` levels from the depth limit: their zero values, which are all a
/// render writes for them, nest no deeper than that in any message of the schema.
#[test]
fn zero_values_nest_shallowly() {
    use super::render::ZERO_NESTING_MAX;
    use super::schema::MSGS;
    use super::types::{Kind, HIDDEN, INLINE, LIST_WRAPPER, MAP, POINTER, REPEATED};
    fn nesting(i: usize, seen: &mut Vec<usize>) -> u32 {
        assert!(
            !seen.contains(&i),
            "zero values recurse through {}",
            MSGS[i].name
        );
        seen.push(i);
        let mut deepest = 0;
        for f in MSGS[i].fields {
            let child = f.msg as usize;
            let nests = if f.flags & HIDDEN != 0 {
                false
            } else if f.flags & INLINE != 0 {
                true
            } else {
                f.flags & (REPEATED | MAP | POINTER) == 0
                    && f.kind == Kind::Message
                    && MSGS[child].flags & LIST_WRAPPER == 0
            };
            if nests {
                deepest = deepest.max(1 + nesting(child, seen));
            }
        }
        seen.pop();
        deepest
    }
    let deepest = (0..MSGS.len())
        .map(|i| nesting(i, &mut Vec::new()))
        .max()
        .unwrap();
    assert!(deepest <= ZERO_NESTING_MAX, "{deepest}");
}
