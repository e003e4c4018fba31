//! Tests of the decoders in `event.rs`: JSON lines and values, protobuf frames and
//! values, gRPC events, and frames split anywhere.

use super::*;

#[test]
fn watch_lines_decode() {
    let line = br#"{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"42","labels":{"x":"y"}},"data":{"payload":"xx\"x","sentUnixNanos":"1700000000123456789"}}}"#;
    let r = parse_watch_line(line).unwrap();
    assert_eq!(r.kind, "MODIFIED");
    assert_eq!(r.revision, Some(42));
    assert_eq!(r.sent_ns, Some(1_700_000_000_123_456_789));
    let err = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
    let r = parse_watch_line(err).unwrap();
    assert_eq!(
        (r.kind.as_str(), r.revision, r.sent_ns),
        ("ERROR", None, None)
    );
    assert!(parse_watch_line(b"{not json").is_err());
}

#[test]
fn stored_values_decode() {
    let v = br#"{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"sentUnixNanos":"5"}}"#;
    assert_eq!(parse_object_stamp(v), Ok(Some(5)));
    assert_eq!(parse_object_stamp(br#"{"kind":"ConfigMap"}"#), Ok(None));
    assert!(parse_object_stamp(b"k8s\0\x12\x05ab").is_err(), "truncated");
    assert!(parse_object_stamp(b"{not json").is_err());
    assert_eq!(latency_us(1_000_000, 3_500_000), 2_500);
    assert_eq!(latency_us(5, 1), 0);
}

use watchd::codec::pbjson::encode_stored;
use watchd::codec::wire::put_len;

fn configmap(rv: Option<&str>, data: serde_json::Value) -> serde_json::Value {
    let mut cm = serde_json::json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": "load-1",
            "namespace": "load-ns-1",
            "uid": "8d6f3f0e-7d2b-4b8e-9a51-0c8e1f0b2a11",
            "labels": {"app": "loadtest", "slot": "1"},
            "creationTimestamp": "2026-01-01T00:00:00Z"
        },
        "data": data
    });
    if let Some(rv) = rv {
        cm["metadata"]["resourceVersion"] = rv.into();
    }
    cm
}

fn stored(cm: &serde_json::Value) -> Vec<u8> {
    let v = encode_stored(cm).expect("ConfigMap encodes as protobuf");
    assert!(v.starts_with(MAGIC));
    v
}

#[test]
fn protobuf_values_decode_without_json() {
    let data = serde_json::json!({
        "payload": "xxxx",
        "sentUnixNanos": "1700000000123456789",
        "zz-after": "1",
    });
    let v = stored(&configmap(None, data));
    assert_eq!(parse_object_stamp(&v), Ok(Some(1_700_000_000_123_456_789)));
    // The stamp is found whatever the other entries; none, or one that is
    // not a number, is "unstamped".
    let v = stored(&configmap(None, serde_json::json!({"payload": "x"})));
    assert_eq!(parse_object_stamp(&v), Ok(None));
    let v = stored(&configmap(
        None,
        serde_json::json!({"sentUnixNanos": "soon"}),
    ));
    assert_eq!(parse_object_stamp(&v), Ok(None));
    let v = stored(&configmap(None, serde_json::json!({})));
    assert_eq!(parse_object_stamp(&v), Ok(None));
    // The same value as the writer's JSON gives the same stamp.
    let cm = configmap(
        None,
        serde_json::json!({"sentUnixNanos": "0000000000000000042"}),
    );
    let json = serde_json::to_vec(&cm).expect("JSON");
    assert_eq!(parse_object_stamp(&json), Ok(Some(42)));
    assert_eq!(parse_object_stamp(&stored(&cm)), Ok(Some(42)));
    // metadata.resourceVersion is read from ObjectMeta field 6.
    let v = stored(&configmap(
        Some("77"),
        serde_json::json!({"sentUnixNanos": "9"}),
    ));
    let env = parse_envelope(&v).expect("envelope");
    assert_eq!(
        protobuf_object(env.raw),
        Ok(ProtobufObject {
            revision: Some(77),
            sent_ns: Some(9)
        })
    );
    // A value cut short is an error, not a silent miss.
    let cut = &v[..v.len() - 3];
    assert!(parse_object_stamp(cut).is_err());
}

/// `WatchEvent{1: type, 2: RawExtension{1: object}}`.
fn watch_event(kind: &str, object: &[u8]) -> Vec<u8> {
    let mut ext = Vec::new();
    put_len(&mut ext, 1, object);
    let mut ev = Vec::new();
    put_len(&mut ev, 1, kind.as_bytes());
    put_len(&mut ev, 2, &ext);
    ev
}

/// `k8s\0` + Unknown{typeMeta{v1, kind}, raw}.
fn enveloped(kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_len(&mut type_meta, 1, b"v1");
    put_len(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_len(&mut out, 1, &type_meta);
    put_len(&mut out, 2, raw);
    out
}

#[test]
fn protobuf_watch_events_decode() {
    let cm = configmap(
        Some("42"),
        serde_json::json!({"sentUnixNanos": "1700000000000000005"}),
    );
    let frame = watch_event("MODIFIED", &stored(&cm));
    let r = parse_watch_frame(&frame).expect("decodes");
    assert_eq!(
        (r.kind.as_str(), r.revision, r.sent_ns, r.detail),
        ("MODIFIED", Some(42), Some(1_700_000_000_000_000_005), None)
    );
    // BOOKMARK: the kind with only metadata.resourceVersion.
    let mut meta = Vec::new();
    put_len(&mut meta, 6, b"99");
    let mut raw = Vec::new();
    put_len(&mut raw, 1, &meta);
    let r = parse_watch_frame(&watch_event("BOOKMARK", &enveloped("ConfigMap", &raw)))
        .expect("bookmark decodes");
    assert_eq!(
        (r.kind.as_str(), r.revision, r.sent_ns),
        ("BOOKMARK", Some(99), None)
    );
    // ERROR: a v1 Status, reported with its code, reason and message.
    let mut status = Vec::new();
    put_len(&mut status, 1, &[]);
    put_len(&mut status, 2, b"Failure");
    put_len(&mut status, 3, b"too old resource version: 5 (40)");
    put_len(&mut status, 4, b"Expired");
    status.extend_from_slice(&[6 << 3, 0x9a, 0x03]); // code: varint 410
    let r = parse_watch_frame(&watch_event("ERROR", &enveloped("Status", &status)))
        .expect("error decodes");
    assert_eq!(
        (r.kind.as_str(), r.revision, r.sent_ns),
        ("ERROR", None, None)
    );
    let detail = r.detail.unwrap_or_default();
    assert!(
        detail.contains("410 Expired: too old resource version"),
        "{detail}"
    );
    // Malformed frames are errors.
    assert!(parse_watch_frame(&frame[..frame.len() - 1]).is_err(), "cut");
    assert!(parse_watch_frame(&[]).is_err(), "empty");
    let mut no_object = Vec::new();
    put_len(&mut no_object, 1, b"ADDED");
    assert!(parse_watch_frame(&no_object).is_err(), "no object");
    assert!(
        parse_watch_frame(&watch_event("ADDED", b"{\"kind\":\"ConfigMap\"}")).is_err(),
        "a JSON object in a protobuf stream"
    );
}

fn grpc_event(
    t: pb::EventType,
    rv: i64,
    meta_rv: i64,
    encoding: pb::Encoding,
    raw: Vec<u8>,
) -> pb::WatchEvent {
    pb::WatchEvent {
        r#type: t as i32,
        resource_version: rv,
        object: Some(pb::Object {
            metadata: Some(pb::ObjectMeta {
                namespace: "load-ns-1".into(),
                name: "load-1".into(),
                resource_version: meta_rv,
                ..Default::default()
            }),
            encoding: encoding as i32,
            raw: raw.into(),
        }),
        ..Default::default()
    }
}

#[test]
fn grpc_watch_events_decode() {
    use pb::Encoding::{Json, Protobuf};
    use pb::EventType::{Added, Bookmark, Deleted, Error, Modified};
    let cm = configmap(
        Some("42"),
        serde_json::json!({"sentUnixNanos": "1700000000000000005"}),
    );
    let json = serde_json::to_vec(&cm).unwrap();
    let stamp = Some(1_700_000_000_000_000_005);
    for (t, name) in [
        (Added, "ADDED"),
        (Modified, "MODIFIED"),
        (Deleted, "DELETED"),
    ] {
        let r = parse_grpc_event(&grpc_event(t, 42, 42, Json, json.clone()), Json).unwrap();
        assert_eq!(
            (r.kind.as_str(), r.revision, r.sent_ns, r.detail),
            (name, Some(42), stamp, None)
        );
    }
    // Protobuf objects: the stamp read on the wire, as from etcd.
    let ev = grpc_event(Modified, 42, 42, Protobuf, stored(&cm));
    let r = parse_grpc_event(&ev, Protobuf).unwrap();
    assert_eq!((r.revision, r.sent_ns), (Some(42), stamp));
    // An unstamped object (the prefill) is an event without a stamp.
    let bare = serde_json::to_vec(&configmap(Some("7"), serde_json::json!({}))).unwrap();
    let r = parse_grpc_event(&grpc_event(Added, 7, 7, Json, bare), Json).unwrap();
    assert_eq!((r.revision, r.sent_ns), (Some(7), None));
    // Either revision alone is enough; they must agree when both are set.
    let r = parse_grpc_event(&grpc_event(Modified, 0, 42, Json, json.clone()), Json);
    assert_eq!(r.unwrap().revision, Some(42));
    let r = parse_grpc_event(&grpc_event(Modified, 42, 0, Json, json.clone()), Json);
    assert_eq!(r.unwrap().revision, Some(42));
    let e = parse_grpc_event(&grpc_event(Modified, 43, 42, Json, json.clone()), Json);
    assert!(e
        .unwrap_err()
        .contains("at revision 43 carries an object at 42"));
    // Another encoding than asked for, an object missing or unreadable.
    let e = parse_grpc_event(&grpc_event(Modified, 42, 42, Json, json.clone()), Protobuf);
    assert!(e.unwrap_err().contains("asked for PROTOBUF"));
    let mut none = grpc_event(Added, 42, 42, Json, json.clone());
    none.object = None;
    assert!(parse_grpc_event(&none, Json)
        .unwrap_err()
        .contains("without an object"));
    let cut = grpc_event(Added, 42, 42, Json, json[..json.len() - 2].to_vec());
    assert!(parse_grpc_event(&cut, Json).is_err());
    // BOOKMARK and ERROR carry no object.
    let bookmark = pb::WatchEvent {
        r#type: Bookmark as i32,
        resource_version: 99,
        ..Default::default()
    };
    let r = parse_grpc_event(&bookmark, Json).unwrap();
    assert_eq!(
        (r.kind.as_str(), r.revision, r.sent_ns),
        ("BOOKMARK", Some(99), None)
    );
    let error = pb::WatchEvent {
        r#type: Error as i32,
        status: br#"{"kind":"Status","code":410,"reason":"Expired"}"#.to_vec().into(),
        ..Default::default()
    };
    let r = parse_grpc_event(&error, Json).unwrap();
    assert_eq!((r.kind.as_str(), r.revision), ("ERROR", None));
    assert!(r.detail.unwrap().contains("\"code\":410"));
    let unknown = pb::WatchEvent {
        r#type: 17,
        ..Default::default()
    };
    assert!(parse_grpc_event(&unknown, Json)
        .unwrap_err()
        .contains("unknown type 17"));
}

#[test]
fn split_frames_decode_like_lines() {
    // Frames as watchd sends them, through the splitter in odd chunks.
    let mut stream = Vec::new();
    for rv in 10..13 {
        let stamp = format!("{:019}", rv * 1000);
        let cm = configmap(
            Some(&rv.to_string()),
            serde_json::json!({"sentUnixNanos": stamp}),
        );
        let ev = watch_event("ADDED", &stored(&cm));
        stream.extend_from_slice(&(ev.len() as u32).to_be_bytes());
        stream.extend_from_slice(&ev);
    }
    let mut splitter = crate::http::FrameSplitter::default();
    let mut got = Vec::new();
    for chunk in stream.chunks(7) {
        splitter
            .feed(chunk, |f| got.push(parse_watch_frame(f)))
            .expect("within bounds");
    }
    let got: Vec<(Option<i64>, Option<u64>)> = got
        .into_iter()
        .map(|r| r.map(|r| (r.revision, r.sent_ns)).expect("decodes"))
        .collect();
    assert_eq!(
        got,
        [
            (Some(10), Some(10_000)),
            (Some(11), Some(11_000)),
            (Some(12), Some(12_000))
        ]
    );
}
