//! The JSON decoder checked against a reference JSON reader (serde_json), for the
//! property test below and the `json_differential` fuzz target: every value serde_json
//! reads as an object whose `metadata` is an object (with string labels, as Kubernetes
//! readers require) is accepted, with the labels and selectable field values serde_json
//! reads, and is served as JSON that parses to the same value with
//! `metadata.resourceVersion` set, on one line. JSON readers keep the last of duplicate
//! keys; so must the cache.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{decode, DecodeError, FieldSpec};
use crate::Revision;

/// Where the decoder and serde_json disagree about a value serde_json reads.
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    /// The decoder refused the value.
    #[error("refused: {0}")]
    Refused(#[from] DecodeError),
    /// The decoder read other labels.
    #[error("labels {got:?}, serde_json reads {want:?}")]
    Labels {
        /// What the decoder read.
        got: BTreeMap<String, String>,
        /// What serde_json reads.
        want: BTreeMap<String, String>,
    },
    /// The decoder read another value of a selectable field.
    #[error("{field}: {got:?}, serde_json reads {want:?}")]
    Field {
        /// The selectable field.
        field: String,
        /// What the decoder read.
        got: String,
        /// What serde_json reads.
        want: String,
    },
    /// The decoder accepted the value without rendering JSON for it.
    #[error("no JSON rendered")]
    NoJson,
    /// The rendering is not on one line.
    #[error("the rendering has a line break")]
    LineBreak,
    /// The span recorded for `metadata.resourceVersion` holds something else.
    #[error("the resourceVersion span does not hold the revision")]
    RvSpan,
    /// The rendering does not parse.
    #[error("the rendering is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The rendering parses to another value.
    #[error("rendered {rendered}, serde_json reads {want}")]
    Value {
        /// The rendering, as text.
        rendered: String,
        /// The value serde_json reads, with the resourceVersion set.
        want: Value,
    },
}

/// The revision the check serves values at.
const REVISION: Revision = Revision(4_200_000_017);

/// The selectable fields the check reads (string, boolean or absent values compared).
fn fields() -> Vec<FieldSpec> {
    vec![
        FieldSpec::simple("metadata.name"),
        FieldSpec::simple("metadata.namespace"),
        FieldSpec::simple("spec.nodeName"),
        FieldSpec::new("spec.unschedulable", "spec.unschedulable", "false"),
    ]
}

/// What serde_json reads at a dotted path, as a field value: Some for a string, a
/// boolean, or nothing there (the default); None when the check does not compare it.
fn expected_field(v: &Value, path: &str, default: &str) -> Option<String> {
    let mut cur = v;
    for seg in path.split('.') {
        match cur {
            Value::Object(m) => match m.get(seg) {
                Some(next) => cur = next,
                None => return Some(default.to_string()),
            },
            _ => return None,
        }
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(default.to_string()),
        _ => None,
    }
}

/// Checks the decoder on `input` against serde_json; inputs serde_json does not read as
/// such an object are not checked (Ok).
pub fn check(input: &[u8]) -> Result<(), Mismatch> {
    let Ok(expected) = serde_json::from_slice::<Value>(input) else {
        return Ok(());
    };
    let Some(meta) = expected.get("metadata").and_then(Value::as_object) else {
        return Ok(());
    };
    let labels: BTreeMap<String, String> = match meta.get("labels") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(m)) => {
            let mut out = BTreeMap::new();
            for (k, v) in m {
                match v {
                    Value::String(s) => out.insert(k.clone(), s.clone()),
                    // Kubernetes readers refuse other label values.
                    _ => return Ok(()),
                };
            }
            out
        }
        Some(_) => return Ok(()),
    };
    let specs = fields();
    let decoded = decode("ns/a", input, REVISION, &specs)?;
    let got_labels: BTreeMap<String, String> = decoded
        .selectors
        .labels()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if got_labels != labels {
        return Err(Mismatch::Labels {
            got: got_labels,
            want: labels,
        });
    }
    for (spec, got) in specs.iter().zip(decoded.selectors.fields()) {
        if let Some(want) = expected_field(&expected, &spec.path, &spec.default) {
            if got != want {
                return Err(Mismatch::Field {
                    field: spec.name.clone(),
                    got: got.to_string(),
                    want,
                });
            }
        }
    }
    let json = decoded.json.ok_or(Mismatch::NoJson)?;
    if json.bytes.iter().any(|&c| c == b'\n' || c == b'\r') {
        return Err(Mismatch::LineBreak);
    }
    let rv = REVISION.to_resource_version();
    let span = json.rv_span.at as usize..(json.rv_span.at + json.rv_span.len) as usize;
    if json.bytes.get(span) != Some(rv.as_bytes()) {
        return Err(Mismatch::RvSpan);
    }
    let got: Value = serde_json::from_slice(&json.bytes).map_err(Mismatch::NotJson)?;
    let mut want = expected;
    want["metadata"]["resourceVersion"] = Value::String(rv);
    if got != want {
        return Err(Mismatch::Value {
            rendered: String::from_utf8_lossy(&json.bytes).into_owned(),
            want,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic xorshift, so a failing case can be replayed from its seed.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn chance(&mut self, percent: usize) -> bool {
            self.below(100) < percent
        }
    }

    /// Writes JSON by hand, with the liberties a JSON writer may take: whitespace
    /// between any tokens, keys and strings with escapes, duplicate keys.
    struct Writer<'a> {
        out: String,
        rng: &'a mut Rng,
        /// Which whitespace: none (compact), spaces and tabs only (one line, as Python's
        /// `json.dumps` writes), or any (line breaks too).
        style: usize,
    }

    impl Writer<'_> {
        fn ws(&mut self) {
            const WS: [&str; 6] = ["", " ", "  ", "\t", "\n", "\r\n\t"];
            let w = match self.style {
                0 => "",
                1 => WS[self.rng.below(4)],
                _ => WS[self.rng.below(WS.len())],
            };
            self.out.push_str(w);
        }

        fn string(&mut self, s: &str) {
            self.out.push('"');
            for c in s.chars() {
                match c {
                    '"' => self.out.push_str("\\\""),
                    '\\' => self.out.push_str("\\\\"),
                    c if (c as u32) < 0x20 => self.out.push_str(&format!("\\u{:04x}", c as u32)),
                    c if self.rng.chance(5) && (c as u32) < 0x10000 => {
                        self.out.push_str(&format!("\\u{:04x}", c as u32))
                    }
                    '/' if self.rng.chance(50) => self.out.push_str("\\/"),
                    c => self.out.push(c),
                }
            }
            self.out.push('"');
        }

        fn object(&mut self, members: &[(String, Value)]) {
            self.members(members, |w, v| w.value(v));
        }

        /// `{"key": value, ...}`, each value written by `value`.
        fn members<T>(&mut self, members: &[(String, T)], mut value: impl FnMut(&mut Self, &T)) {
            self.out.push('{');
            self.ws();
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                    self.ws();
                }
                self.string(k);
                self.ws();
                self.out.push(':');
                self.ws();
                value(self, v);
                self.ws();
            }
            self.out.push('}');
        }

        fn value(&mut self, v: &Value) {
            match v {
                Value::Object(m) => {
                    let members: Vec<(String, Value)> =
                        m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    self.object(&members);
                }
                Value::Array(a) => {
                    self.out.push('[');
                    self.ws();
                    for (i, x) in a.iter().enumerate() {
                        if i > 0 {
                            self.out.push(',');
                            self.ws();
                        }
                        self.value(x);
                        self.ws();
                    }
                    self.out.push(']');
                }
                Value::String(s) => self.string(s),
                other => self.out.push_str(&other.to_string()),
            }
        }
    }

    const WORDS: [&str; 10] = [
        "a",
        "app",
        "name",
        "k8s.io/x",
        "é",
        "日本",
        "x y",
        "q\"uote",
        "back\\slash",
        "tab\t",
    ];

    fn word(rng: &mut Rng) -> String {
        WORDS[rng.below(WORDS.len())].to_string()
    }

    fn scalar(rng: &mut Rng) -> Value {
        match rng.below(6) {
            0 => Value::Null,
            1 => Value::Bool(rng.chance(50)),
            2 => Value::from(rng.below(1_000_000) as i64 - 500),
            3 => Value::from(rng.below(1000) as f64 / 8.0),
            _ => Value::String(word(rng)),
        }
    }

    fn any(rng: &mut Rng, depth: usize) -> Value {
        match (depth, rng.below(4)) {
            (0, _) | (_, 0 | 1) => scalar(rng),
            (_, 2) => Value::Array((0..rng.below(4)).map(|_| any(rng, depth - 1)).collect()),
            _ => Value::Object(
                (0..rng.below(4))
                    .map(|_| (word(rng), any(rng, depth - 1)))
                    .collect(),
            ),
        }
    }

    /// A random object: metadata (sometimes with a resourceVersion of any type, labels,
    /// duplicated), spec, data; members in random order, some duplicated.
    fn case(rng: &mut Rng) -> String {
        let mut meta: Vec<(String, Value)> = vec![("name".into(), Value::String(word(rng)))];
        if rng.chance(50) {
            meta.push(("namespace".into(), Value::String(word(rng))));
        }
        if rng.chance(30) {
            meta.push(("resourceVersion".into(), scalar(rng)));
        }
        let labels = |rng: &mut Rng| {
            Value::Object(
                (0..rng.below(4))
                    .map(|_| (word(rng), Value::String(word(rng))))
                    .collect(),
            )
        };
        if rng.chance(70) {
            meta.push(("labels".into(), labels(rng)));
        }
        if rng.chance(10) {
            meta.push(("labels".into(), labels(rng)));
        }
        if rng.chance(20) {
            meta.push(("annotations".into(), any(rng, 2)));
        }
        // None marks where the metadata written above goes.
        let mut members: Vec<(String, Option<Value>)> = vec![
            ("kind".into(), Some(Value::String("ConfigMap".into()))),
            ("apiVersion".into(), Some(Value::String("v1".into()))),
        ];
        let mut spec = serde_json::Map::new();
        if rng.chance(50) {
            spec.insert("nodeName".into(), scalar(rng));
        }
        if rng.chance(30) {
            spec.insert("unschedulable".into(), scalar(rng));
        }
        members.push(("spec".into(), Some(Value::Object(spec))));
        members.push(("data".into(), Some(any(rng, 3))));
        for i in (1..members.len()).rev() {
            members.swap(i, rng.below(i + 1));
        }
        let at = rng.below(members.len() + 1);
        members.insert(at, ("metadata".into(), None));
        if rng.chance(10) {
            // An earlier metadata, which a JSON reader overrides with the later one.
            members.insert(rng.below(at + 1), ("metadata".into(), Some(any(rng, 2))));
        }
        let style = rng.below(3);
        let mut w = Writer {
            out: String::new(),
            rng,
            style,
        };
        w.ws();
        w.members(&members, |w, v| match v {
            Some(v) => w.value(v),
            None => w.object(&meta),
        });
        w.ws();
        w.out
    }

    #[test]
    fn every_object_serde_json_reads_is_read_alike() {
        for seed in 1..=3000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let input = case(&mut rng);
            if let Err(e) = check(input.as_bytes()) {
                panic!("seed {seed}: {e}\ninput: {input}");
            }
        }
    }

    #[test]
    fn the_issues_example_with_spaces_after_colons_is_read() {
        let input = br#"{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "namespace": "default", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"}}, "data": {"k": "v"}}"#;
        check(input).unwrap();
        for odd in [
            &br#" { "metadata" : { } } "#[..],
            br#"{"metadata":{"name":"a"},"metadata":{"name":"b","labels":{"x":"y"}}}"#,
            br#"{"\u006detadata":{"name":"a","resourceVersion":7}}"#,
            br#"{"metadata":{"resourceVersion" : null , "name":"a"}}"#,
        ] {
            check(odd).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(odd)));
        }
    }
}
