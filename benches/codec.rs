//! Decoding etcd values: `watchd::codec::decode` of a ~2 KiB Pod and a ~10 KiB ConfigMap
//! (compact JSON, as kube-apiserver stores them), in bytes per second.
//!
//! Baseline, measured in the same run on the same bytes: what a JSON-based cache does
//! with each value — `serde_json::from_slice::<serde_json::Value>`, set
//! `metadata.resourceVersion`, `serde_json::to_vec`. watchd instead validates in one
//! skipping pass that keeps only the labels and the resource's selectable fields (taken
//! from the built-in registry, as ingestion passes them), and splices the
//! resourceVersion into the original bytes.
//!
//! A protobuf Pod (the same Pod, stored as kube-apiserver stores built-ins) is decoded
//! too: ingestion validates it and reads its fields from the wire, and renders its JSON
//! only on first use. Its baseline is eager ingestion: decode and render at once.
//!
//! Run: `cargo bench --bench codec` (add `-- --quick` for a fast pass). The last lines
//! printed are the ratios baseline ÷ watchd.

mod common;

use std::hint::black_box;
use std::time::SystemTime;

use criterion::{BenchmarkId, Criterion, Throughput};
use serde_json::Value;
use watchd::codec::{self, FieldSpec};
use watchd::Revision;

use common::Pair;

/// The revision the values are decoded at (a realistic 9-digit resourceVersion).
const REVISION: Revision = Revision(184_467_440);

/// What a cache that keeps `serde_json::Value`s (or re-serializes each object) does.
fn json_value_roundtrip(value: &[u8], revision: Revision) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(value).expect("bench input is valid JSON");
    v["metadata"]["resourceVersion"] = Value::String(revision.to_resource_version());
    serde_json::to_vec(&v).expect("a Value serializes")
}

/// (name, value, the resource's selectable fields, which decode extracts).
fn inputs() -> Vec<(&'static str, Vec<u8>, Vec<FieldSpec>)> {
    vec![
        (
            "pod",
            common::pod("default", "web-7d9f8b6c5-x2x9q", 3),
            common::builtin("pods").fields,
        ),
        (
            "configmap",
            common::configmap("default", "web-config"),
            common::builtin("configmaps").fields,
        ),
    ]
}

fn bench_decode(c: &mut Criterion) {
    for (name, value, fields) in inputs() {
        // Both paths must produce the same object before their speed is compared.
        let decoded =
            codec::decode("ns/a", &value, REVISION, &fields).expect("bench input decodes");
        let ours: Value =
            serde_json::from_slice(&decoded.json(REVISION).bytes).expect("decode emits JSON");
        let theirs: Value =
            serde_json::from_slice(&json_value_roundtrip(&value, REVISION)).expect("JSON");
        assert_eq!(ours, theirs, "decode and the baseline disagree on {name}");
        println!("codec input {name}: {} bytes", value.len());

        let mut g = c.benchmark_group(format!("codec_{name}"));
        g.throughput(Throughput::Bytes(value.len() as u64));
        g.bench_with_input(
            BenchmarkId::new("watchd_decode", value.len()),
            &value,
            |b, v| b.iter(|| codec::decode("ns/a", black_box(v), black_box(REVISION), &fields)),
        );
        g.bench_with_input(
            BenchmarkId::new("serde_value_roundtrip", value.len()),
            &value,
            |b, v| b.iter(|| json_value_roundtrip(black_box(v), black_box(REVISION))),
        );
        g.finish();
    }
}

/// The bench pod as kube-apiserver stores it: Kubernetes protobuf.
fn protobuf_pod() -> Vec<u8> {
    let json: Value =
        serde_json::from_slice(&common::pod("default", "web-7d9f8b6c5-x2x9q", 3)).expect("JSON");
    codec::pbjson::encode_stored(&json).expect("the pod encodes as protobuf")
}

fn bench_protobuf(c: &mut Criterion) {
    let value = protobuf_pod();
    let fields = common::builtin("pods").fields;
    let lazy = codec::decode("ns/a", &value, REVISION, &fields).expect("bench input decodes");
    assert!(
        lazy.json.is_none(),
        "protobuf JSON is rendered on first use"
    );
    println!("codec input pod_protobuf: {} bytes", value.len());
    let mut g = c.benchmark_group("codec_pod_protobuf");
    g.throughput(Throughput::Bytes(value.len() as u64));
    g.bench_with_input(
        BenchmarkId::new("watchd_decode", value.len()),
        &value,
        |b, v| b.iter(|| codec::decode("ns/a", black_box(v), black_box(REVISION), &fields)),
    );
    g.bench_with_input(
        BenchmarkId::new("eager_render", value.len()),
        &value,
        |b, v| {
            b.iter(|| {
                let d = codec::decode("ns/a", black_box(v), black_box(REVISION), &fields)
                    .expect("decodes");
                d.json(REVISION)
            })
        },
    );
    g.finish();
}

fn main() {
    let since = SystemTime::now();
    let mut c = common::criterion();
    bench_decode(&mut c);
    bench_protobuf(&mut c);
    c.final_summary();
    let mut pairs: Vec<Pair> = inputs()
        .into_iter()
        .map(|(name, value, _)| {
            let n = value.len();
            Pair::new(
                format!("decode {name} ({n} B)"),
                format!("codec_{name}/watchd_decode/{n}"),
                format!("codec_{name}/serde_value_roundtrip/{n}"),
            )
        })
        .collect();
    let n = protobuf_pod().len();
    pairs.push(Pair::new(
        format!("lazy vs eager protobuf pod ({n} B)"),
        format!("codec_pod_protobuf/watchd_decode/{n}"),
        format!("codec_pod_protobuf/eager_render/{n}"),
    ));
    common::print_ratios("codec", since, &pairs);
}
