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

/// Random JSON watch lines and stored values in the shapes watchd and etcd
/// give (and shapes they might: fields in any order, whitespace, escapes,
/// the field names as keys and as text elsewhere), written by hand so that
/// the scan meets what serde meets.
mod generated {
    use std::cell::RefCell;

    use crate::rng::Rng;

    /// The generator's random numbers, shared by the nested builders.
    pub struct G(RefCell<Rng>);

    impl G {
        pub fn new(seed: u64) -> Self {
            Self(RefCell::new(Rng::new(seed)))
        }
        fn below(&self, n: u64) -> u64 {
            self.0.borrow_mut().below(n)
        }
        fn index(&self, n: usize) -> usize {
            self.0.borrow_mut().index(n)
        }
        fn chance(&self, p: f64) -> bool {
            self.0.borrow_mut().chance(p)
        }
    }

    /// Whitespace JSON allows between tokens (mostly none, as watchd writes).
    fn ws(rng: &G) -> &'static str {
        match rng.below(8) {
            0 => " ",
            1 => "\t",
            2 => " \r\n ",
            _ => "",
        }
    }

    /// A JSON string literal for `text` (escaped as JSON needs), sometimes
    /// with escapes it does not need (`\/`, `\u0041` for `A`).
    pub fn string(rng: &G, text: &str) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                '/' if rng.chance(0.3) => out.push_str("\\/"),
                c if c.is_ascii_alphanumeric() && rng.chance(0.02) => {
                    out.push_str(&format!("\\u{:04X}", c as u32))
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// An object of `fields` (key, value JSON) in a random order.
    pub fn object(rng: &G, mut fields: Vec<(String, String)>) -> String {
        for i in (1..fields.len()).rev() {
            fields.swap(i, rng.index(i + 1));
        }
        let parts: Vec<String> = fields
            .into_iter()
            .map(|(k, v)| {
                let (a, b, c) = (ws(rng), ws(rng), ws(rng));
                format!("{a}{}{b}:{c}{v}", string(rng, &k))
            })
            .collect();
        format!("{{{}{}}}", parts.join(","), ws(rng))
    }

    /// Text that holds what a naive search would take for a field.
    fn tricky_text(rng: &G) -> String {
        const PIECES: [&str; 10] = [
            "x",
            "\"resourceVersion\":\"77\"",
            "\"sentUnixNanos\":\"5\"",
            "\"type\":\"ERROR\"",
            "back\\slash",
            "new\nline",
            "é ü ✓",
            "{\"object\":{}}",
            "loadtest.watchd.dev/sent-unix-nanos",
            "payload-",
        ];
        (0..1 + rng.below(6))
            .map(|_| PIECES[rng.index(PIECES.len())])
            .collect()
    }

    /// A value of some JSON type, nested up to `depth`.
    fn any(rng: &G, depth: u32) -> String {
        match rng.below(if depth == 0 { 5 } else { 7 }) {
            0 => string(rng, &tricky_text(rng)),
            1 => ["0", "-1", "12.5e-3", "1E+2", "4096"][rng.index(5)].into(),
            2 => ["true", "false", "null"][rng.index(3)].into(),
            3 => string(rng, "resourceVersion"),
            4 => string(rng, &"p".repeat(rng.index(300))),
            5 => {
                let n = rng.below(4);
                let items: Vec<String> = (0..n).map(|_| any(rng, depth - 1)).collect();
                format!("[{}]", items.join(&format!(",{}", ws(rng))))
            }
            _ => {
                let keys = ["resourceVersion", "sentUnixNanos", "type", "metadata", "a"];
                let fields = (0..rng.below(4))
                    .map(|i| (format!("{}{i}", keys[rng.index(5)]), any(rng, depth - 1)))
                    .chain(
                        rng.chance(0.5)
                            .then(|| (keys[rng.index(4)].to_string(), string(rng, "88"))),
                    )
                    .collect();
                object(rng, fields)
            }
        }
    }

    /// A string field's value as it may come: a number, null, not a number.
    fn number_text(rng: &G, n: u64) -> String {
        match rng.below(10) {
            0 => "null".into(),
            1 => string(rng, "soon"),
            2 => string(rng, ""),
            3 => string(rng, &format!("{n:019}")),
            _ => string(rng, &n.to_string()),
        }
    }

    fn metadata(rng: &G, rv: u64) -> String {
        let mut f = vec![
            ("name".to_string(), string(rng, "load-1")),
            ("namespace".to_string(), string(rng, "load-ns-1")),
        ];
        if rng.chance(0.9) {
            f.push(("resourceVersion".into(), number_text(rng, rv)));
        }
        if rng.chance(0.5) {
            let labels = object(
                rng,
                vec![
                    ("resourceVersion".into(), string(rng, "1")),
                    ("app".into(), string(rng, "loadtest")),
                ],
            );
            f.push(("labels".into(), labels));
        }
        match rng.below(4) {
            0 => {}
            1 => f.push(("annotations".into(), "null".into())),
            _ => {
                let mut a = vec![("x/y".to_string(), string(rng, &tricky_text(rng)))];
                if rng.chance(0.7) {
                    a.push((
                        "loadtest.watchd.dev/sent-unix-nanos".into(),
                        number_text(rng, rv * 1000 + 7),
                    ));
                }
                f.push(("annotations".into(), object(rng, a)));
            }
        }
        if rng.chance(0.3) {
            let mf = format!(
                "[{}]",
                object(rng, vec![("resourceVersion".into(), string(rng, "3"))])
            );
            f.push(("managedFields".into(), mf));
        }
        object(rng, f)
    }

    /// A ConfigMap (or, sometimes, something that is not quite one).
    pub fn configmap(rng: &G) -> String {
        let rv = 1 + rng.below(1 << 40);
        let mut f = vec![
            ("kind".to_string(), string(rng, "ConfigMap")),
            ("apiVersion".to_string(), string(rng, "v1")),
        ];
        match rng.below(10) {
            0 => {}
            1 => f.push(("metadata".into(), "null".into())),
            _ => f.push(("metadata".into(), metadata(rng, rv))),
        }
        match rng.below(8) {
            0 => {}
            1 => f.push(("data".into(), "null".into())),
            _ => {
                let mut d = vec![
                    ("payload".to_string(), string(rng, &tricky_text(rng))),
                    ("resourceVersion".to_string(), string(rng, "999")),
                ];
                if rng.chance(0.8) {
                    d.push(("sentUnixNanos".into(), number_text(rng, rv * 1000)));
                }
                f.push(("data".into(), object(rng, d)));
            }
        }
        for _ in 0..rng.below(3) {
            let key = ["spec", "status", "type", "resourceVersion", "z"][rng.index(5)];
            f.push((key.into(), any(rng, 3)));
        }
        object(rng, f)
    }

    /// A watch line: an event of a ConfigMap, or an ERROR with its Status.
    pub fn line(rng: &G) -> String {
        let kind = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"][rng.index(5)];
        let obj = if kind == "ERROR" {
            let status = vec![
                ("kind".to_string(), string(rng, "Status")),
                ("apiVersion".to_string(), string(rng, "v1")),
                ("metadata".to_string(), "{}".to_string()),
                ("status".to_string(), string(rng, "Failure")),
                (
                    "message".to_string(),
                    string(rng, "too old resource version: 5 (40) \"quoted\""),
                ),
                ("reason".to_string(), string(rng, "Expired")),
                ("code".to_string(), "410".to_string()),
            ];
            object(rng, status)
        } else {
            configmap(rng)
        };
        let mut f = vec![
            ("type".to_string(), string(rng, kind)),
            ("object".to_string(), obj),
        ];
        if rng.chance(0.2) {
            f.push(("resourceVersion".into(), string(rng, "12345")));
        }
        let text = object(rng, f);
        format!("{}{text}{}", ws(rng), ws(rng))
    }
}

#[test]
fn the_line_scan_agrees_with_serde_on_generated_lines() {
    let rng = generated::G::new(20_261_127);
    let (mut ok, mut errors, mut stamped, mut escaped) = (0, 0, 0, 0);
    for _ in 0..4000 {
        let line = generated::line(&rng);
        let want = oracle::parse_watch_line(line.as_bytes());
        let got = parse_watch_line(line.as_bytes());
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(w, g, "{line}");
                ok += 1;
                stamped += usize::from(g.sent_ns.is_some());
                escaped += usize::from(line.contains("\\u"));
                if g.kind == "ERROR" {
                    errors += 1;
                    assert_eq!(g.detail.as_deref(), Some(line.as_str()));
                }
            }
            (Err(_), Err(_)) => {}
            _ => panic!("scan {got:?} but serde {want:?} on\n{line}"),
        }
    }
    // The generator makes what it should: mostly valid lines, stamped and
    // not, ERRORs, escapes.
    assert!(ok > 3900, "{ok} valid of 4000");
    assert!(
        errors > 500 && stamped > 1500 && escaped > 500,
        "{errors} {stamped} {escaped}"
    );
}

#[test]
fn the_value_scan_agrees_with_serde_on_generated_values() {
    let rng = generated::G::new(7);
    let (mut ok, mut revisions) = (0, 0);
    for _ in 0..3000 {
        let value = generated::configmap(&rng);
        let want = oracle::parse_object(value.as_bytes());
        let scanned = crate::s1::jsonscan::scan_object(value.as_bytes());
        match (&want, &scanned) {
            (Ok((rv, sent)), Ok(s)) => {
                assert_eq!((*rv, *sent), (s.revision(), s.sent_ns()), "{value}");
                assert_eq!(parse_object_stamp(value.as_bytes()), Ok(*sent));
                revisions += usize::from(rv.is_some());
                ok += 1;
            }
            (Err(_), Err(_)) => {}
            _ => panic!("scan {scanned:?} but serde {want:?} on\n{value}"),
        }
    }
    // About half have a numeric resourceVersion (metadata, the field and a
    // number each most of the time).
    assert!(ok > 2900 && revisions > 1200, "{ok} {revisions}");
}

#[test]
fn a_cut_line_is_an_error_for_both() {
    let rng = generated::G::new(99);
    for _ in 0..40 {
        let line = generated::line(&rng);
        let line = line.trim_end();
        assert!(oracle::parse_watch_line(line.as_bytes()).is_ok(), "{line}");
        for cut in 0..line.len() {
            let part = &line.as_bytes()[..cut];
            assert!(oracle::parse_watch_line(part).is_err());
            let e = parse_watch_line(part).expect_err(&format!("cut at {cut}: {line}"));
            assert!(e.starts_with("bad watch event ("), "{e}");
        }
    }
}

#[test]
fn the_scan_reads_fields_only_where_they_are() {
    let read = |line: &str| {
        let r = parse_watch_line(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(Ok(&r), oracle::parse_watch_line(line.as_bytes()).as_ref());
        (r.kind, r.revision, r.sent_ns)
    };
    // The object first, the type last; the data holds a key named like
    // the revision, a label and the text of a string too.
    let line = r#"{"object":{"data":{"resourceVersion":"1","x":"\"resourceVersion\":\"2\"","sentUnixNanos":"30"},"metadata":{"labels":{"resourceVersion":"3"},"resourceVersion":"42"}},"type":"MODIFIED"}"#;
    assert_eq!(read(line), ("MODIFIED".into(), Some(42), Some(30)));
    // Escaped keys and values are read unescaped; whitespace anywhere.
    let line = "{ \"type\" : \"MOD\\u0049FIED\" , \"object\" : { \"metadata\" : { \"resource\\u0056ersion\" : \"4\\u0032\" } , \"data\" : { \"sent\\/UnixNanos\" : \"1\" , \"sentUnixNanos\" : \"7\" } } }\r";
    assert_eq!(read(line), ("MODIFIED".into(), Some(42), Some(7)));
    // The annotation is the stamp when data has none.
    let line = r#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"5","annotations":{"loadtest.watchd.dev/sent-unix-nanos":"9"}}}}"#;
    assert_eq!(read(line), ("ADDED".into(), Some(5), Some(9)));
    // Another "type" inside the object is not the event's.
    let line = r#"{"type":"DELETED","object":{"type":"Opaque","metadata":null,"data":null}}"#;
    assert_eq!(read(line), ("DELETED".into(), None, None));
    // What serde refused, the scan refuses.
    for bad in [
        r#"{"type":"ADDED"}"#,
        r#"{"object":{}}"#,
        r#"{"type":"ADDED","object":{},"type":"ADDED"}"#,
        r#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"1","resourceVersion":"2"}}}"#,
        r#"{"type":7,"object":{}}"#,
        r#"{"type":"ADDED","object":null}"#,
        r#"{"type":"ADDED","object":{"metadata":"x"}}"#,
        r#"{"type":"ADDED","object":{"metadata":{"resourceVersion":42}}}"#,
        r#"{"type":"ADDED","object":{"data":{"sentUnixNanos":5}}}"#,
        r#"{"type":"ADDED","object":{}} x"#,
        r#"{"type":"ADDED","object":{"a":01}}"#,
        r#"{"type":"ADDED","object":{"a":"\q"}}"#,
        r#"{"type":"ADDED","object":{"a":[1,]}}"#,
        r#"{"type":"ADDED","object":{"a":tru}}"#,
        r#"{"type":"ADDED","object":{"a":1.}}"#,
        "[]",
        "",
    ] {
        assert!(oracle::parse_watch_line(bad.as_bytes()).is_err(), "{bad}");
        assert!(parse_watch_line(bad.as_bytes()).is_err(), "{bad}");
    }
    // Deep nesting is bounded.
    let deep = format!(
        r#"{{"type":"ADDED","object":{{"a":{}1{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    assert!(parse_watch_line(deep.as_bytes()).is_err());
}
