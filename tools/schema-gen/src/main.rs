//! schema-gen: derives watchd's protobuf → JSON schema table from the Go types of
//! kubernetes/api and kubernetes/apimachinery, plus any extra modules of API groups such
//! as kubernetes/apiextensions-apiserver and kubernetes/kube-aggregator (read from local
//! checkouts at development time; only the derived facts are written).
//!
//! Usage:
//! `schema-gen <kubernetes/api checkout> <kubernetes/apimachinery checkout> <out.rs> [label]
//! [--extra <checkout>:<subdir>]...`
//!
//! For every kind (a struct embedding `metav1.TypeMeta`) in `<api>/<group>/<version>/`,
//! in each extra's `<checkout>/<subdir>/<group>/<version>/` (imported under the module
//! path its `go.mod` declares) and in apimachinery's meta/v1, it follows the struct tags
//! (`json:"..."`, `protobuf:"..."`) through every reachable type and writes, per message,
//! its fields in Go struct order: field number, JSON name, kind, nested message, and flags
//! (pointer, omitempty, omitzero, repeated, map, inline, hidden). Types with custom JSON
//! marshalers (`metav1.Time`, `IntOrString`, apiextensions' `JSON` and
//! `JSONSchemaPropsOr*`, ...) become kinds of their own, and the wire layout the
//! transcoder reads for each is checked against `generated.proto`, as is every message.
//! The output depends only on the checkouts, not on the order of `--extra` arguments.
//!
//! `src/codec/pbjson/schema.rs` (Kubernetes 1.34.0) was generated from the repository
//! root with the v0.34.0 tags of the four modules extracted into `/tmp/k8s`
//! (`git --git-dir=<clone> archive v0.34.0 | tar -x -C /tmp/k8s/<module>`):
//!
//! ```text
//! cargo run --release --manifest-path tools/schema-gen/Cargo.toml -- \
//!   /tmp/k8s/api /tmp/k8s/apimachinery src/codec/pbjson/schema.rs \
//!   "kubernetes/api v0.34.0 (ae6c3b911ef1), kubernetes/apimachinery v0.34.0 (b72d93d17433), kubernetes/apiextensions-apiserver v0.34.0 (ce01291ca503), kubernetes/kube-aggregator v0.34.0 (15d6373837f1), i.e. Kubernetes 1.34.0" \
//!   --extra /tmp/k8s/apiextensions-apiserver:pkg/apis \
//!   --extra /tmp/k8s/kube-aggregator:pkg/apis
//! ```

mod goparse;
mod model;
mod protocheck;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
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

/// A module whose API group versions are read: `<dir>/<group>/<version>/register.go`,
/// imported as `<import>/<group>/<version>`.
struct Groups {
    dir: PathBuf,
    import: String,
}

/// The command line: three positional arguments, an optional label, any `--extra`.
struct Args {
    api: PathBuf,
    machinery: PathBuf,
    out: String,
    label: String,
    /// `--extra <checkout>:<subdir>`: (checkout, subdir), in the order given.
    extras: Vec<(PathBuf, String)>,
}

const USAGE: &str = "usage: schema-gen <api checkout> <apimachinery checkout> <out.rs> [label] \
                     [--extra <checkout>:<subdir>]...";

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut positional = Vec::new();
    let mut extras = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let extra = match a.strip_prefix("--extra") {
            Some("") => Some(it.next().ok_or(USAGE)?.as_str()),
            Some(rest) => Some(rest.strip_prefix('=').ok_or(USAGE)?),
            None => None,
        };
        match extra {
            Some(spec) => {
                let (dir, subdir) = spec
                    .rsplit_once(':')
                    .ok_or_else(|| format!("--extra {spec}: expected <checkout>:<subdir>"))?;
                extras.push((PathBuf::from(dir), subdir.trim_matches('/').to_string()));
            }
            None => positional.push(a.clone()),
        }
    }
    let [api, machinery, out, rest @ ..] = positional.as_slice() else {
        return Err(USAGE.into());
    };
    if rest.len() > 1 {
        return Err(USAGE.into());
    }
    Ok(Args {
        api: api.into(),
        machinery: machinery.into(),
        out: out.clone(),
        label: rest.first().cloned().unwrap_or_default(),
        extras,
    })
}

/// The module path declared by `<checkout>/go.mod`.
fn module_path(checkout: &Path) -> Result<String, String> {
    let go_mod = checkout.join("go.mod");
    let src = fs::read_to_string(&go_mod).map_err(|e| format!("{}: {e}", go_mod.display()))?;
    src.lines()
        .find_map(|l| l.trim().strip_prefix("module "))
        .map(|m| m.trim().trim_matches('"').to_string())
        .ok_or_else(|| format!("{}: no module line", go_mod.display()))
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut dirs: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Parses every group version of `groups` into `uni`; returns (import path, apiVersion)
/// of each.
fn read_groups(uni: &mut Universe, groups: &Groups) -> Result<Vec<(String, String)>, String> {
    let mut versions = Vec::new();
    for g in sorted_dirs(&groups.dir)? {
        for v in sorted_dirs(&g)? {
            if !v.join("register.go").is_file() {
                continue;
            }
            let (Some(gn), Some(vn)) = (
                g.file_name().and_then(|s| s.to_str()),
                v.file_name().and_then(|s| s.to_str()),
            ) else {
                continue;
            };
            let Some(group) = group_name(&v) else {
                continue;
            };
            let path = format!("{}/{gn}/{vn}", groups.import);
            let api_version = if group.is_empty() {
                vn.to_string()
            } else {
                format!("{group}/{vn}")
            };
            uni.pkgs.insert(path.clone(), parse_package(&v)?);
            versions.push((path, api_version));
        }
    }
    Ok(versions)
}

/// Message keys drop a package's import prefix; two packages must not end up with the
/// same short name, or their messages would be merged.
fn check_short_names(uni: &Universe) -> Result<(), String> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for path in uni.pkgs.keys() {
        if let Some(other) = seen.insert(uni.short_pkg(path), path) {
            return Err(format!("{other} and {path} have the same short name"));
        }
    }
    Ok(())
}

/// Resolves every kind of `versions` and the meta/v1 kinds.
#[allow(clippy::type_complexity)]
fn resolve_roots(
    uni: &mut Universe,
    versions: &[(String, String)],
) -> (
    BTreeMap<(String, String), String>,
    BTreeMap<String, String>,
    Vec<String>,
) {
    let mut roots: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut meta_roots: BTreeMap<String, String> = BTreeMap::new();
    let mut failures = Vec::new();
    for (path, api_version) in versions {
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
    (roots, meta_roots, failures)
}

fn run(args: &[String]) -> Result<(), String> {
    let args = parse_args(args)?;
    let mut uni = Universe {
        short_prefixes: vec!["k8s.io/api/".into(), "k8s.io/apimachinery/pkg/apis/".into()],
        ..Universe::default()
    };
    // Where each import path's generated.proto is: (import prefix, checkout).
    let mut proto_roots = vec![
        ("k8s.io/api/".to_string(), args.api.clone()),
        ("k8s.io/apimachinery/".to_string(), args.machinery.clone()),
    ];
    for (path, dir) in [
        (META, "pkg/apis/meta/v1"),
        ("k8s.io/apimachinery/pkg/types", "pkg/types"),
    ] {
        uni.pkgs
            .insert(path.to_string(), parse_package(&args.machinery.join(dir))?);
    }
    let mut sources = vec![Groups {
        dir: args.api.clone(),
        import: "k8s.io/api".into(),
    }];
    let mut modules = Vec::new();
    for (checkout, subdir) in &args.extras {
        let module = module_path(checkout)?;
        let import = format!("{module}/{subdir}");
        uni.short_prefixes.push(format!("{import}/"));
        proto_roots.push((format!("{module}/"), checkout.clone()));
        sources.push(Groups {
            dir: checkout.join(subdir),
            import,
        });
        modules.push((module, subdir.clone()));
    }
    let mut versions = Vec::new();
    for groups in &sources {
        versions.extend(read_groups(&mut uni, groups)?);
    }
    check_short_names(&uni)?;
    let (roots, meta_roots, failures) = resolve_roots(&mut uni, &versions);
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
    let mut mismatches = protocheck::check(&uni, &keys, &proto_roots);
    mismatches.extend(protocheck::check_specials(&uni, &proto_roots));
    if !mismatches.is_empty() {
        return Err(format!(
            "table disagrees with generated.proto:\n{}",
            mismatches.join("\n")
        ));
    }
    modules.sort();
    let text = emit(&uni, &reach, &roots, &meta_roots, &args.label, &modules)?;
    fs::write(&args.out, text).map_err(|e| format!("{}: {e}", args.out))?;
    eprintln!(
        "wrote {}: {} kinds, {} meta kinds",
        args.out,
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
    modules: &[(String, String)],
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
    let checkout = |module: &str| {
        let name = module.rsplit('/').next().unwrap_or(module);
        format!("<{name} checkout>")
    };
    let _ = writeln!(
        s,
        "// Regenerate from the repository root with checkouts of kubernetes/api and kubernetes/apimachinery{}:",
        if modules.is_empty() { "" } else { " and the extra modules" }
    );
    s.push_str("//   cargo run --release --manifest-path tools/schema-gen/Cargo.toml -- \\\n");
    s.push_str(
        "//     <api checkout> <apimachinery checkout> src/codec/pbjson/schema.rs \"<label>\"",
    );
    for (module, subdir) in modules {
        let _ = write!(s, " \\\n//     --extra {}:{subdir}", checkout(module));
    }
    s.push('\n');
    s.push_str(concat!(
        "// Facts derived from the Go struct tags: f(field number, `,\"JSON name\":`, kind, nested message, flags).\n",
        "// The nested message of a JSONSchemaPropsOr* kind is the JSONSchemaProps it holds.\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn extras_may_come_anywhere_in_either_form() {
        let a = parse_args(&strings(&[
            "--extra",
            "/x/apiextensions-apiserver:pkg/apis/",
            "api",
            "machinery",
            "out.rs",
            "label",
            "--extra=C:/y/kube-aggregator:pkg/apis",
        ]))
        .unwrap();
        assert_eq!(
            (a.api, a.machinery, a.out.as_str(), a.label.as_str()),
            ("api".into(), "machinery".into(), "out.rs", "label")
        );
        assert_eq!(
            a.extras,
            [
                ("/x/apiextensions-apiserver".into(), "pkg/apis".to_string()),
                ("C:/y/kube-aggregator".into(), "pkg/apis".to_string())
            ]
        );
        assert!(parse_args(&strings(&["api", "machinery"])).is_err());
        assert!(parse_args(&strings(&["a", "m", "o", "l", "--extra", "nocolon"])).is_err());
        assert!(parse_args(&strings(&["a", "m", "o", "l", "extra"])).is_err());
    }

    #[test]
    fn short_names_drop_the_longest_known_prefix() {
        let uni = Universe {
            short_prefixes: vec![
                "k8s.io/api/".into(),
                "k8s.io/apimachinery/pkg/apis/".into(),
                "k8s.io/apiextensions-apiserver/pkg/apis/".into(),
            ],
            ..Universe::default()
        };
        assert_eq!(uni.short("k8s.io/api/core/v1", "Pod"), "core/v1.Pod");
        assert_eq!(
            uni.short(
                "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
                "JSON"
            ),
            "apiextensions/v1.JSON"
        );
        assert_eq!(
            uni.short("k8s.io/apimachinery/pkg/types", "UID"),
            "k8s.io/apimachinery/pkg/types.UID"
        );
    }
}
