//! schema-gen: derives watchd's protobuf → JSON schema table from the Go types of
//! kubernetes/api and kubernetes/apimachinery (read from local checkouts at development
//! time; only the derived facts are written).
//!
//! Usage:
//! `schema-gen <kubernetes/api checkout> <kubernetes/apimachinery checkout> <out.rs> [label]`
//!
//! For every kind (a struct embedding `metav1.TypeMeta`) in `<api>/<group>/<version>/`
//! and in apimachinery's meta/v1, it follows the struct tags (`json:"..."`,
//! `protobuf:"..."`) through every reachable type and writes, per message, its fields in
//! Go struct order: field number, JSON name, kind, nested message, and flags (pointer,
//! omitempty, omitzero, repeated, map, inline, hidden).

mod goparse;
mod model;
mod protocheck;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::ExitCode;

use goparse::{parse_file, tag_value, TypeBody, TypeDecl, TypeExpr};
use model::{Universe, META};

fn parse_package(dir: &Path) -> Result<BTreeMap<String, TypeDecl>, String> {
    let mut types = BTreeMap::new();
    let mut names: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".go")
                && !n.ends_with("_test.go")
                && !n.ends_with(".pb.go")
                && !n.starts_with("zz_generated")
                && !n.contains("swagger_doc_generated")
        })
        .collect();
    names.sort();
    for p in names {
        let src = fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        parse_file(&src, &mut types);
    }
    Ok(types)
}

fn group_name(dir: &Path) -> Option<String> {
    let src = fs::read_to_string(dir.join("register.go")).ok()?;
    let at = src.find("GroupName = \"")? + "GroupName = \"".len();
    let end = src[at..].find('"')?;
    Some(src[at..at + end].to_string())
}

fn is_kind(decl: &TypeDecl) -> bool {
    let TypeBody::Struct(fields) = &decl.body else {
        return false;
    };
    !decl.doc.contains("+protobuf=false")
        && fields.iter().any(|f| {
            f.embedded
                && matches!(&f.ty, TypeExpr::Named { name, .. } if name == "TypeMeta")
                && tag_value(&f.tag, "protobuf").is_none()
        })
}

fn run(args: &[String]) -> Result<(), String> {
    let [api, machinery, out, rest @ ..] = args else {
        return Err(
            "usage: schema-gen <api checkout> <apimachinery checkout> <out.rs> [label]".into(),
        );
    };
    let label = rest.first().cloned().unwrap_or_default();
    let api = Path::new(api);
    let machinery = Path::new(machinery);
    let mut uni = Universe {
        pkgs: BTreeMap::new(),
        messages: BTreeMap::new(),
        warnings: BTreeSet::new(),
    };
    for (path, dir) in [
        (META, "pkg/apis/meta/v1"),
        ("k8s.io/apimachinery/pkg/types", "pkg/types"),
    ] {
        uni.pkgs
            .insert(path.to_string(), parse_package(&machinery.join(dir))?);
    }
    // (import path, apiVersion) of every API group version.
    let mut versions = Vec::new();
    let mut groups: Vec<_> = fs::read_dir(api)
        .map_err(|e| format!("{}: {e}", api.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    groups.sort();
    for g in groups {
        let mut vs: Vec<_> = fs::read_dir(&g)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.join("register.go").is_file())
            .collect();
        vs.sort();
        for v in vs {
            let (Some(gn), Some(vn)) = (
                g.file_name().and_then(|s| s.to_str()),
                v.file_name().and_then(|s| s.to_str()),
            ) else {
                continue;
            };
            let Some(group) = group_name(&v) else {
                continue;
            };
            let path = format!("k8s.io/api/{gn}/{vn}");
            let api_version = if group.is_empty() {
                vn.to_string()
            } else {
                format!("{group}/{vn}")
            };
            uni.pkgs.insert(path.clone(), parse_package(&v)?);
            versions.push((path, api_version));
        }
    }
    let mut roots: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut meta_roots: BTreeMap<String, String> = BTreeMap::new();
    let mut failures = Vec::new();
    for (path, api_version) in &versions {
        let kinds: Vec<String> = uni.pkgs[path]
            .iter()
            .filter(|(_, d)| is_kind(d))
            .map(|(n, _)| n.clone())
            .collect();
        for kind in kinds {
            match uni.root(path, &kind) {
                Ok(key) => {
                    roots.insert((api_version.clone(), kind), key);
                }
                Err(e) => failures.push(format!("{api_version} {kind}: {e}")),
            }
        }
    }
    let meta_kinds: Vec<String> = uni.pkgs[META]
        .iter()
        .filter(|(n, d)| is_kind(d) || n.as_str() == "WatchEvent")
        .map(|(n, _)| n.clone())
        .collect();
    for kind in meta_kinds {
        match uni.root(META, &kind) {
            Ok(key) => {
                meta_roots.insert(kind, key);
            }
            Err(e) => failures.push(format!("meta/v1 {kind}: {e}")),
        }
    }
    let name_errors = uni.check_json_names();
    for w in &uni.warnings {
        eprintln!("warning: {w}");
    }
    for f in &failures {
        eprintln!("skipped kind: {f}");
    }
    if !name_errors.is_empty() {
        return Err(name_errors.join("\n"));
    }
    let reach = reachable(&uni, &roots, &meta_roots)?;
    let keys: Vec<&String> = reach.iter().collect();
    let mismatches = protocheck::check(&uni, &keys, api, machinery);
    if !mismatches.is_empty() {
        return Err(format!(
            "table disagrees with generated.proto:\n{}",
            mismatches.join("\n")
        ));
    }
    let text = emit(&uni, &reach, &roots, &meta_roots, &label)?;
    fs::write(out, text).map_err(|e| format!("{out}: {e}"))?;
    eprintln!(
        "wrote {out}: {} kinds, {} meta kinds",
        roots.len(),
        meta_roots.len()
    );
    Ok(())
}

fn rust_str(s: &str) -> String {
    format!("{s:?}")
}

/// The messages reachable from a kind: only those are written.
fn reachable(
    uni: &Universe,
    roots: &BTreeMap<(String, String), String>,
    meta_roots: &BTreeMap<String, String>,
) -> Result<BTreeSet<String>, String> {
    let mut reach = BTreeSet::new();
    let mut queue: VecDeque<String> = roots.values().chain(meta_roots.values()).cloned().collect();
    while let Some(k) = queue.pop_front() {
        if !reach.insert(k.clone()) {
            continue;
        }
        let m = uni
            .messages
            .get(&k)
            .ok_or_else(|| format!("message {k} missing"))?;
        for f in &m.fields {
            if let Some(n) = &f.msg {
                queue.push_back(n.clone());
            }
        }
    }
    Ok(reach)
}

fn emit(
    uni: &Universe,
    reach: &BTreeSet<String>,
    roots: &BTreeMap<(String, String), String>,
    meta_roots: &BTreeMap<String, String>,
    label: &str,
) -> Result<String, String> {
    let index: BTreeMap<&str, usize> = reach
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    if index.len() > u16::MAX as usize {
        return Err("too many messages".into());
    }
    let mut s = String::new();
    s.push_str("// @generated by tools/schema-gen. DO NOT EDIT.\n");
    if !label.is_empty() {
        let _ = writeln!(s, "// Source: {label}.");
    }
    s.push_str(concat!(
        "// Regenerate from the repository root with checkouts of kubernetes/api and kubernetes/apimachinery:\n",
        "//   cargo run --release --manifest-path tools/schema-gen/Cargo.toml -- \\\n",
        "//     <api checkout> <apimachinery checkout> src/codec/pbjson/schema.rs \"<label>\"\n",
        "// Facts derived from the Go struct tags: f(field number, `,\"JSON name\":`, kind, nested message, flags).\n",
        "// Field flags: 1 pointer, 2 omitempty, 4 repeated, 8 map, 16 inline, 32 omitzero, 64 hidden.\n",
        "// Message flags: 1 embeds TypeMeta, 2 list wrapper, 4 map entry.\n\n",
        "use super::types::{f, Msg, Kind::*};\n\n",
    ));
    let _ = writeln!(
        s,
        "/// Every message type, sorted by name.\npub static MSGS: [Msg; {}] = [",
        reach.len()
    );
    for (i, key) in reach.iter().enumerate() {
        let m = &uni.messages[key];
        let max = m.fields.iter().map(|f| f.num).max().unwrap_or(0) as usize;
        let mut by_num = vec![255u8; max + 1];
        for (fi, f) in m.fields.iter().enumerate() {
            if f.num != 0 {
                by_num[f.num as usize] =
                    u8::try_from(fi).map_err(|_| format!("{key}: too many fields"))?;
            }
        }
        let _ = write!(
            s,
            "/* {i} */ Msg {{ name: {}, flags: {}, fields: &[",
            rust_str(key),
            m.flags
        );
        for (fi, f) in m.fields.iter().enumerate() {
            let nested = f.msg.as_ref().map(|n| index[n.as_str()]).unwrap_or(0);
            if fi > 0 {
                s.push_str(", ");
            }
            if !f
                .json
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_-.$@/".contains(&c))
            {
                return Err(format!("{key}: JSON name {:?} would need escaping", f.json));
            }
            let member = format!(",\"{}\":", f.json);
            let _ = write!(
                s,
                "f({}, {}, {:?}, {}, {})",
                f.num,
                rust_str(&member),
                f.kind,
                nested,
                f.flags
            );
        }
        s.push_str("], by_num: &[");
        s.push_str(
            &by_num
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
        s.push_str("] },\n");
    }
    s.push_str("];\n\n");
    let _ = writeln!(s, "/// (apiVersion, kind) → message, sorted for binary search.\npub static ROOTS: [(&str, &str, u16); {}] = [", roots.len());
    for ((v, k), key) in roots {
        let _ = writeln!(
            s,
            "({}, {}, {}),",
            rust_str(v),
            rust_str(k),
            index[key.as_str()]
        );
    }
    s.push_str("];\n\n");
    let _ = writeln!(s, "/// meta/v1 kinds, served under any apiVersion (Status, WatchEvent, options), sorted.\npub static META_ROOTS: [(&str, u16); {}] = [", meta_roots.len());
    for (k, key) in meta_roots {
        let _ = writeln!(s, "({}, {}),", rust_str(k), index[key.as_str()]);
    }
    s.push_str("];\n");
    Ok(s)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("schema-gen: {e}");
            ExitCode::FAILURE
        }
    }
}
