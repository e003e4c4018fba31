//! The protobuf → JSON transcoder against kubernetes/api's round-trip fixtures
//! (`shared/fixtures/k8s-api-testdata/`): every `X.pb` of Kubernetes 1.34 must render as
//! the JSON value of `X.json`; every `X.pb` of the newer HEAD must render without error
//! (unknown fields skipped and counted, everything else as in HEAD's JSON); corrupted fixtures must never panic and must
//! render either an error or valid JSON.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use watchd::codec::{extract, json, pbjson};

/// Fixture pairs that may fail, with the reason. Keep it empty unless a fixture records
/// something kube-apiserver does not serve.
const SKIP: &[(&str, &str)] = &[];

/// The fixture folder. It comes with `../shared` and CI always has it, so its absence is
/// a failure naming the path, never a silent pass.
fn fixtures_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/k8s-api-testdata");
    assert!(
        root.is_dir(),
        "fixture folder {} is absent (it comes with ../shared; CI always has it)",
        root.display()
    );
    root
}

/// The `.pb` fixtures of one version folder, sorted, without `*.after_roundtrip.*`.
fn pb_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pb"))
        .filter(|p| !p.to_string_lossy().contains(".after_roundtrip."))
        .collect();
    files.sort();
    files
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// apiVersion and kind from a name like `apps.v1.Deployment` or `core.v1.Pod`, for
/// fixtures whose envelope leaves typeMeta empty (WatchEvent).
fn type_from_name(stem: &str) -> (String, String) {
    let parts: Vec<&str> = stem.split('.').collect();
    let n = parts.len();
    if n < 3 {
        return (String::new(), stem.to_string());
    }
    let group = parts[..n - 2].join(".");
    let version = parts[n - 2];
    let api_version = if group == "core" {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    (api_version, parts[n - 1].to_string())
}

/// Renders one stored fixture value.
fn render_fixture(path: &Path, value: &[u8]) -> Result<pbjson::Rendered, String> {
    let env = watchd::codec::envelope::parse(value).map_err(|e| format!("envelope: {e}"))?;
    let (api_version, kind) = if env.kind.is_empty() {
        type_from_name(&stem(path))
    } else {
        (env.api_version.to_string(), env.kind.to_string())
    };
    pbjson::render(&api_version, &kind, env.raw, None).map_err(|e| e.to_string())
}

/// The first place where two JSON values differ, as a path.
fn first_diff(path: &str, got: &Value, want: &Value) -> Option<String> {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                match g.get(k) {
                    None => return Some(format!("{path}.{k}: missing, want {wv}")),
                    Some(gv) => {
                        if let Some(d) = first_diff(&format!("{path}.{k}"), gv, wv) {
                            return Some(d);
                        }
                    }
                }
            }
            g.keys()
                .find(|k| !w.contains_key(*k))
                .map(|k| format!("{path}.{k}: unexpected {}", g[k]))
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => g
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (gv, wv))| first_diff(&format!("{path}[{i}]"), gv, wv)),
        _ if got == want => None,
        _ => Some(format!("{path}: got {got}, want {want}")),
    }
}

/// The first value of `got` that `want` does not have: `got` may lack members (fields
/// newer than the schema), but everything it has must match.
fn first_extra(path: &str, got: &Value, want: &Value) -> Option<String> {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => g.iter().find_map(|(k, gv)| match w.get(k) {
            None => Some(format!("{path}.{k}: not in the fixture")),
            Some(wv) => first_extra(&format!("{path}.{k}"), gv, wv),
        }),
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => g
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (gv, wv))| first_extra(&format!("{path}[{i}]"), gv, wv)),
        _ if got == want => None,
        _ => Some(format!("{path}: got {got}, want {want}")),
    }
}

/// Renders every `X.pb` of `dir` and compares it with `X.json`: (passed, failures, skipped).
fn render_dir_exactly(dir: &Path) -> (usize, Vec<String>, Vec<String>) {
    let skip: BTreeMap<&str, &str> = SKIP.iter().copied().collect();
    let (mut passed, mut failed, mut skipped) = (0, Vec::new(), Vec::new());
    for pb in pb_files(dir) {
        let name = stem(&pb);
        let value = fs::read(&pb).expect("read .pb");
        let want: Value = match fs::read(pb.with_extension("json")) {
            Ok(b) => serde_json::from_slice(&b).expect("fixture .json parses"),
            Err(_) => {
                skipped.push(format!("{name}: no .json beside the .pb"));
                continue;
            }
        };
        let outcome = render_fixture(&pb, &value).and_then(|r| {
            let got: Value =
                serde_json::from_slice(&r.json).map_err(|e| format!("output is not JSON: {e}"))?;
            match first_diff("", &got, &want) {
                None => Ok(()),
                Some(d) => Err(d),
            }
        });
        match (outcome, skip.get(name.as_str())) {
            (Ok(()), _) => passed += 1,
            (Err(_), Some(reason)) => skipped.push(format!("{name}: {reason}")),
            (Err(e), None) => failed.push(format!("{name}: {e}")),
        }
    }
    println!(
        "{}: {passed} passed, {} failed, {} skipped",
        dir.display(),
        failed.len(),
        skipped.len()
    );
    for s in &skipped {
        println!("  skipped {s}");
    }
    for f in &failed {
        println!("  FAILED {f}");
    }
    (passed, failed, skipped)
}

#[test]
fn v1_34_fixtures_render_as_kube_apiserver_json() {
    let root = fixtures_root();
    let dir = root.join("v1.34.0");
    let (passed, failed, _) = render_dir_exactly(&dir);
    assert!(passed > 150, "too few fixtures found in {}", dir.display());
    assert!(
        failed.is_empty(),
        "{} fixture(s) render differently",
        failed.len()
    );
}

/// Round-trip fixtures of API groups outside kubernetes/api, in folders named by
/// `PBJSON_EXTRA_FIXTURES` (separated by `:`), e.g. apiextensions-apiserver's
/// `pkg/apis/testdata/HEAD` at v0.34.0. They are not kept in this repository, so the
/// test runs only when asked to.
#[test]
fn extra_fixtures_render_as_kube_apiserver_json() {
    let Some(dirs) = std::env::var_os("PBJSON_EXTRA_FIXTURES") else {
        eprintln!("SKIPPED: PBJSON_EXTRA_FIXTURES is not set");
        return;
    };
    let mut seed = 0x9e37_79b9_u32;
    for dir in std::env::split_paths(&dirs) {
        let (passed, failed, _) = render_dir_exactly(&dir);
        assert!(passed > 0, "no fixtures found in {}", dir.display());
        assert!(
            failed.is_empty(),
            "{} fixture(s) render differently",
            failed.len()
        );
        let (runs, errs) = corrupt_and_render(&pb_files(&dir), 4000, &mut seed);
        println!("corrupted: {runs} renders, {errs} errors, no panics");
    }
}

#[test]
fn head_fixtures_render_without_errors() {
    let root = fixtures_root();
    let dir = root.join("HEAD");
    let (mut ok, mut unknown_kinds, mut with_unknown, mut unknown_total, mut exact) =
        (0, Vec::new(), 0, 0u64, 0);
    let mut errors = Vec::new();
    for pb in pb_files(&dir) {
        let name = stem(&pb);
        let value = fs::read(&pb).expect("read .pb");
        let env = match watchd::codec::envelope::parse(&value) {
            Ok(e) => e,
            Err(e) => {
                errors.push(format!("{name}: envelope: {e}"));
                continue;
            }
        };
        let (api_version, kind) = if env.kind.is_empty() {
            type_from_name(&name)
        } else {
            (env.api_version.to_string(), env.kind.to_string())
        };
        if !pbjson::is_known(&api_version, &kind) {
            // A kind added after 1.34: no schema, reported (not rendered) by design.
            unknown_kinds.push(format!("{api_version} {kind}"));
            continue;
        }
        match pbjson::render(&api_version, &kind, env.raw, None) {
            Ok(r) => {
                ok += 1;
                unknown_total += u64::from(r.unknown_fields);
                if r.unknown_fields > 0 {
                    with_unknown += 1;
                }
                let got: Value = serde_json::from_slice(&r.json).expect("output is JSON");
                if let Ok(b) = fs::read(pb.with_extension("json")) {
                    let want: Value = serde_json::from_slice(&b).expect("fixture .json parses");
                    if got == want {
                        exact += 1;
                    } else if let Some(d) = first_extra("", &got, &want) {
                        // Unknown fields may be missing; what is rendered must be right.
                        errors.push(format!("{name}: {d}"));
                    }
                }
            }
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    println!(
        "HEAD fixtures: {ok} rendered ({exact} identical to HEAD's JSON, the others lacking only \
         fields unknown to 1.34; {with_unknown} with unknown fields, {unknown_total} unknown fields \
         skipped), {} kinds unknown to 1.34, {} errors",
        unknown_kinds.len(),
        errors.len()
    );
    for k in &unknown_kinds {
        println!("  kind not in the 1.34 schema: {k}");
    }
    for e in &errors {
        println!("  ERROR {e}");
    }
    assert!(ok > 150, "too few HEAD fixtures rendered");
    assert!(
        errors.is_empty(),
        "{} HEAD fixture(s) failed to render",
        errors.len()
    );
}

/// Selector paths checked against every fixture: the built-in resources' selectable
/// fields, plus paths through inlined structs, lists, maps, numbers and absent parents.
const FIELD_PATHS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source.component",
    "type",
    "spec.unschedulable",
    "status.replicas",
    "status.succeeded",
    "metadata.name",
    "metadata.generation",
    "metadata.creationTimestamp",
    "metadata.labels",
    "spec.replicas",
    "spec.containers",
    "spec.template.spec.nodeName",
    "spec.selector.matchLabels",
    "data",
    "count",
    "firstTimestamp",
    "nope.nothing",
];

#[test]
fn validate_field_values_and_metadata_agree_with_the_rendering() {
    let root = fixtures_root();
    let (mut objects, mut values, mut metas) = (0, 0, 0);
    for dir in ["v1.34.0", "HEAD"] {
        for pb in pb_files(&root.join(dir)) {
            let value = fs::read(&pb).expect("read .pb");
            let env = watchd::codec::envelope::parse(&value).expect("fixture envelope");
            if env.kind.is_empty() {
                continue;
            }
            let (v, k) = (env.api_version, env.kind);
            let rendered = pbjson::render(v, k, env.raw, Some("7"));
            let validated = pbjson::validate(v, k, env.raw);
            assert_eq!(
                validated,
                rendered
                    .as_ref()
                    .map(|r| r.unknown_fields)
                    .map_err(Clone::clone),
                "{}",
                pb.display()
            );
            let Ok(rendered) = rendered else { continue };
            if pbjson::has_object_meta(v, k) {
                // PartialObjectMetadata's rendering is the full rendering's `metadata`.
                let range = json::top_level_member(&rendered.json, b"metadata")
                    .unwrap_or_else(|| panic!("{}: no metadata", pb.display()));
                let meta = pbjson::render_metadata(v, k, env.raw, "7")
                    .unwrap_or_else(|e| panic!("{}: {e}", pb.display()));
                assert_eq!(
                    String::from_utf8_lossy(&meta.json),
                    String::from_utf8_lossy(&rendered.json[range]),
                    "{}",
                    pb.display()
                );
                let at = meta.rv_span.at as usize;
                assert_eq!(&meta.json[at..at + meta.rv_span.len as usize], b"7");
                metas += 1;
            }
            let want =
                extract::extract(&rendered.json, FIELD_PATHS).expect("rendered JSON extracts");
            let got = pbjson::field_values(v, k, env.raw, FIELD_PATHS.iter().copied())
                .unwrap_or_else(|e| panic!("{}: {e}", pb.display()));
            for ((path, got), want) in FIELD_PATHS.iter().zip(got).zip(want.fields) {
                assert_eq!(got, want, "{} {path}", pb.display());
                values += usize::from(want.is_some_and(|w| !w.is_empty()));
            }
            objects += 1;
        }
    }
    println!(
        "validate, field values and metadata: {objects} objects, {values} non-empty values, {metas} metadata renderings agree"
    );
    assert!(
        objects > 300 && values > 300 && metas > 200,
        "{objects} objects, {values} values, {metas} metadata"
    );
}

/// xorshift32: a deterministic pseudo-random sequence.
fn next(seed: &mut u32) -> u32 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    *seed
}

/// Renders `rounds` corrupted copies of each fixture in `files`: never a panic, never
/// invalid JSON, and validate agrees with render. Returns (renders, errors).
fn corrupt_and_render(files: &[PathBuf], rounds: u32, seed: &mut u32) -> (u32, u32) {
    let (mut runs, mut errs) = (0u32, 0u32);
    for pb in files {
        let value = fs::read(pb).expect("read .pb");
        let Ok(env) = watchd::codec::envelope::parse(&value) else {
            continue;
        };
        let (api_version, kind) = if env.kind.is_empty() {
            type_from_name(&stem(pb))
        } else {
            (env.api_version.to_string(), env.kind.to_string())
        };
        let raw = env.raw;
        for round in 0..rounds {
            let mut m = raw.to_vec();
            if m.is_empty() {
                break;
            }
            let len = m.len();
            match round % 4 {
                // Flip a few bytes.
                0 => {
                    for _ in 0..1 + next(seed) % 4 {
                        let i = next(seed) as usize % len;
                        m[i] ^= 1 << (next(seed) % 8);
                    }
                }
                // Truncate.
                1 => m.truncate(next(seed) as usize % len),
                // Overwrite a byte with a random or boundary value.
                2 => {
                    let i = next(seed) as usize % len;
                    m[i] = [0x00, 0x7f, 0x80, 0xff, next(seed) as u8][next(seed) as usize % 5];
                }
                // Splice a copy of one range somewhere else.
                _ => {
                    let a = next(seed) as usize % len;
                    let b = a + (next(seed) as usize % (len - a)).min(64);
                    let at = next(seed) as usize % len;
                    let chunk = m[a..b].to_vec();
                    m.splice(at..at, chunk);
                }
            }
            runs += 1;
            let rendered = pbjson::render(&api_version, &kind, &m, Some("123"));
            // The validate-only pass ingestion runs must agree with rendering exactly.
            assert_eq!(
                pbjson::validate(&api_version, &kind, &m),
                rendered
                    .as_ref()
                    .map(|r| r.unknown_fields)
                    .map_err(Clone::clone),
                "{}: validate disagrees with render on corrupted input",
                pb.display()
            );
            match rendered {
                Ok(r) => {
                    if let Err(e) = serde_json::from_slice::<Value>(&r.json) {
                        panic!(
                            "{}: corrupted input rendered invalid JSON: {e}",
                            pb.display()
                        );
                    }
                }
                Err(_) => errs += 1,
            }
        }
    }
    (runs, errs)
}

#[test]
fn corrupted_fixtures_never_panic() {
    let root = fixtures_root();
    let mut seed = 0x2545_f491_u32;
    let (runs, errs) = corrupt_and_render(&pb_files(&root.join("v1.34.0")), 24, &mut seed);
    println!("corrupted fixtures: {runs} renders, {errs} errors, no panics");
    assert!(runs > 1000);
}
