//! The protobuf → JSON transcoder (`watchd::codec::pbjson`) on a Pod, a Node and a large
//! ConfigMap, in MB/s of protobuf input.
//!
//! Baseline, measured in the same run on the same objects: what a cache built on typed
//! Kubernetes structs does with each object's JSON — `serde_json` into `k8s_openapi`'s
//! type, set `metadata.resourceVersion`, `serde_json::to_vec`. watchd instead reads the
//! stored protobuf once and writes kube-apiserver's JSON directly.
//!
//! The Pod and Node are kubernetes/api's round-trip fixtures (every field set) from
//! `../shared/fixtures/k8s-api-testdata/v1.34.0/`; the ConfigMap (about 100 KiB of
//! configuration text) is built here. Run: `cargo bench --bench pbjson` (add
//! `-- --quick` for a fast pass). Criterion prints each path's throughput in MiB/s of
//! protobuf input; the last lines printed are the ratios baseline ÷ watchd.

mod common;

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::time::SystemTime;

use criterion::{BenchmarkId, Criterion, Throughput};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use watchd::codec::pbjson;

use common::Pair;

/// The resourceVersion set on every rendering (a realistic 9-digit revision).
const RV: &str = "184467440";

/// One benchmark input: the stored protobuf value (magic and envelope included) and the
/// same object's compact JSON.
struct Input {
    name: &'static str,
    protobuf: Vec<u8>,
    json: Vec<u8>,
    baseline: fn(&[u8]) -> Vec<u8>,
}

/// The typed round trip: JSON → k8s-openapi struct → resourceVersion set → JSON.
fn typed_roundtrip<T: DeserializeOwned + Serialize + HasMeta>(json: &[u8]) -> Vec<u8> {
    let mut object: T = serde_json::from_slice(json).expect("bench JSON parses");
    object.meta_mut().resource_version = Some(RV.to_string());
    serde_json::to_vec(&object).expect("a k8s-openapi object serializes")
}

/// Access to `metadata` of the baseline's types.
trait HasMeta {
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
}

impl HasMeta for Pod {
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

impl HasMeta for Node {
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

impl HasMeta for ConfigMap {
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

fn fixture(name: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/k8s-api-testdata/v1.34.0");
    let pb = std::fs::read(dir.join(format!("{name}.pb"))).ok()?;
    let pretty: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).ok()?).ok()?;
    Some((pb, serde_json::to_vec(&pretty).ok()?))
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(out: &mut Vec<u8>, num: u64, bytes: &[u8]) {
    varint(out, num << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn entry(out: &mut Vec<u8>, num: u64, k: &str, v: &str) {
    let mut e = Vec::new();
    field(&mut e, 1, k.as_bytes());
    field(&mut e, 2, v.as_bytes());
    field(out, num, &e);
}

/// A ConfigMap of about 100 KiB (100 files of configuration text), as stored protobuf
/// and as JSON.
fn large_configmap() -> (Vec<u8>, Vec<u8>) {
    let mut data = serde_json::Map::new();
    for i in 0..100 {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# generated for service {i}; see https://example.com/docs?svc={i}&env=prod"
        );
        for line in 0..24 {
            let _ = writeln!(
                text,
                "setting_{line:02}: \"value {i}-{line}\"  # tuned for production traffic"
            );
        }
        data.insert(format!("app-{i:03}.yaml"), Value::String(text));
    }
    let labels = [
        ("app", "web"),
        ("app.kubernetes.io/part-of", "shop"),
        ("tier", "frontend"),
    ];
    let mut meta = Vec::new();
    field(&mut meta, 1, b"web-config");
    field(&mut meta, 3, b"default");
    field(&mut meta, 5, b"6f1e0c9a-3b7d-4c2e-9f51-2a8d7e4b1c03");
    field(&mut meta, 6, b"");
    meta.extend_from_slice(&[7 << 3, 0]);
    let mut ts = Vec::new();
    ts.push(1 << 3);
    varint(&mut ts, 1_199_149_261);
    ts.extend_from_slice(&[2 << 3, 0]);
    field(&mut meta, 8, &ts);
    for (k, v) in labels {
        entry(&mut meta, 11, k, v);
    }
    let mut raw = Vec::new();
    field(&mut raw, 1, &meta);
    for (k, v) in &data {
        entry(&mut raw, 2, k, v.as_str().unwrap_or_default());
    }
    let mut type_meta = Vec::new();
    field(&mut type_meta, 1, b"v1");
    field(&mut type_meta, 2, b"ConfigMap");
    let mut value = watchd::codec::envelope::MAGIC.to_vec();
    field(&mut value, 1, &type_meta);
    field(&mut value, 2, &raw);
    let json = json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": "web-config",
            "namespace": "default",
            "uid": "6f1e0c9a-3b7d-4c2e-9f51-2a8d7e4b1c03",
            "creationTimestamp": "2008-01-01T01:01:01Z",
            "labels": labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "data": data,
    });
    (value, serde_json::to_vec(&json).expect("JSON"))
}

fn inputs() -> Vec<Input> {
    let mut inputs = Vec::new();
    for (name, file, baseline) in [
        (
            "pod",
            "core.v1.Pod",
            typed_roundtrip::<Pod> as fn(&[u8]) -> Vec<u8>,
        ),
        ("node", "core.v1.Node", typed_roundtrip::<Node>),
    ] {
        match fixture(file) {
            Some((protobuf, json)) => inputs.push(Input {
                name,
                protobuf,
                json,
                baseline,
            }),
            None => println!("pbjson bench: fixture {file} not found, skipping the {name}"),
        }
    }
    let (protobuf, json) = large_configmap();
    inputs.push(Input {
        name: "configmap",
        protobuf,
        json,
        baseline: typed_roundtrip::<ConfigMap>,
    });
    inputs
}

fn bench_transcode(c: &mut Criterion, inputs: &[Input]) {
    for input in inputs {
        // Both paths must produce the object's JSON before their speed is compared.
        let ours = pbjson::render_stored(&input.protobuf, Some(RV)).expect("bench input renders");
        let mut want: Value = serde_json::from_slice(&input.json).expect("JSON");
        want["metadata"]["resourceVersion"] = json!(RV);
        let got: Value = serde_json::from_slice(&ours.json).expect("pbjson emits JSON");
        assert_eq!(
            got, want,
            "pbjson output differs from the {} JSON",
            input.name
        );
        let theirs: Value = serde_json::from_slice(&(input.baseline)(&input.json)).expect("JSON");
        println!(
            "pbjson input {}: {} B protobuf, {} B JSON; baseline output {} the object",
            input.name,
            input.protobuf.len(),
            ours.json.len(),
            if theirs == want {
                "equals"
            } else {
                "differs from"
            }
        );

        let n = input.protobuf.len();
        let mut g = c.benchmark_group(format!("pbjson_{}", input.name));
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_with_input(
            BenchmarkId::new("watchd_transcode", n),
            &input.protobuf,
            |b, v| b.iter(|| pbjson::render_stored(black_box(v), black_box(Some(RV)))),
        );
        // What ingestion pays instead of rendering: the same pass with the output dropped.
        g.bench_with_input(
            BenchmarkId::new("watchd_validate", n),
            &input.protobuf,
            |b, v| {
                b.iter(|| {
                    let env = watchd::codec::envelope::parse(black_box(v)).expect("envelope");
                    pbjson::validate(env.api_version, env.kind, env.raw)
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("k8s_openapi_roundtrip", n),
            &input.json,
            |b, v| b.iter(|| (input.baseline)(black_box(v))),
        );
        g.finish();
    }
}

fn main() {
    let since = SystemTime::now();
    let inputs = inputs();
    let mut c = common::criterion();
    bench_transcode(&mut c, &inputs);
    c.final_summary();
    let pairs: Vec<Pair> = inputs
        .iter()
        .flat_map(|i| {
            let n = i.protobuf.len();
            [
                Pair::new(
                    format!("transcode {} ({n} B protobuf)", i.name),
                    format!("pbjson_{}/watchd_transcode/{n}", i.name),
                    format!("pbjson_{}/k8s_openapi_roundtrip/{n}", i.name),
                ),
                Pair::new(
                    format!("validate-only vs transcode {}", i.name),
                    format!("pbjson_{}/watchd_validate/{n}", i.name),
                    format!("pbjson_{}/watchd_transcode/{n}", i.name),
                ),
            ]
        })
        .collect();
    common::print_ratios("pbjson", since, &pairs);
}
