//! Cross-checks the facts derived from Go struct tags against the `generated.proto` files
//! next to the Go types: every field number, scalar type, message type, repeated and map
//! label must agree, and no proto field may be missing from the Go-derived table.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use crate::model::{Kind, Universe, MAP, MAP_ENTRY, REPEATED};

/// One field of a proto message: (label, type). Label is `optional`, `repeated` or
/// `map`; for maps the type is the value type.
type ProtoField = (String, String);

/// Messages of one generated.proto, by message name.
fn parse_proto(src: &str) -> BTreeMap<String, BTreeMap<u32, ProtoField>> {
    let mut out: BTreeMap<String, BTreeMap<u32, ProtoField>> = BTreeMap::new();
    let mut cur: Option<String> = None;
    for line in src.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix("message ") {
            let name = rest.trim_end_matches('{').trim().to_string();
            out.entry(name.clone()).or_default();
            cur = Some(name);
            continue;
        }
        if line == "}" {
            cur = None;
            continue;
        }
        let Some(msg) = &cur else { continue };
        let Some((decl, num)) = line.trim_end_matches(';').split_once('=') else {
            continue;
        };
        let Ok(num) = num.trim().parse::<u32>() else {
            continue;
        };
        let decl = decl.trim();
        let (label, ty) = if let Some(m) = decl.strip_prefix("map<") {
            let inner = m.split('>').next().unwrap_or("");
            let val = inner.split(',').nth(1).unwrap_or("").trim();
            ("map".to_string(), val.to_string())
        } else {
            let mut p = decl.split_whitespace();
            let label = p.next().unwrap_or("").to_string();
            (label, p.next().unwrap_or("").to_string())
        };
        if let Some(m) = out.get_mut(msg) {
            m.insert(num, (label, ty));
        }
    }
    out
}

/// Where the Go package `pkg` keeps its generated.proto: `roots` maps an import path
/// prefix (`k8s.io/api/`) to the checkout holding it.
fn proto_path(pkg: &str, roots: &[(String, PathBuf)]) -> Option<PathBuf> {
    roots.iter().find_map(|(prefix, dir)| {
        pkg.strip_prefix(prefix.as_str())
            .map(|rest| dir.join(rest).join("generated.proto"))
    })
}

type ProtoFile = BTreeMap<String, BTreeMap<u32, ProtoField>>;

/// The parsed generated.proto of `pkg`, read once (empty when it is missing).
fn proto_file<'f>(
    files: &'f mut BTreeMap<String, ProtoFile>,
    pkg: &str,
    roots: &[(String, PathBuf)],
) -> &'f ProtoFile {
    files.entry(pkg.to_string()).or_insert_with(|| {
        proto_path(pkg, roots)
            .and_then(|p| fs::read_to_string(p).ok())
            .map(|s| parse_proto(&s))
            .unwrap_or_default()
    })
}

/// Checks the messages of custom-marshaled types, whose wire layout the transcoder
/// hard-codes (`Kind::layout`), against their generated.proto.
pub fn check_specials(uni: &Universe, roots: &[(String, PathBuf)]) -> Vec<String> {
    let mut errs = Vec::new();
    let mut files = BTreeMap::new();
    for ((pkg, name), kind) in &uni.specials {
        let Some(proto) = proto_file(&mut files, pkg, roots).get(name) else {
            errs.push(format!(
                "{pkg}.{name}: no message {name} in its generated.proto"
            ));
            continue;
        };
        let want: BTreeMap<u32, ProtoField> = kind
            .layout()
            .iter()
            .map(|(n, l, t)| (*n, (l.to_string(), t.to_string())))
            .collect();
        if *proto != want {
            errs.push(format!(
                "{pkg}.{name}: generated.proto has {proto:?}, the transcoder reads {want:?}"
            ));
        }
    }
    errs
}

/// Returns every disagreement found; empty means the table matches the .proto files.
pub fn check(uni: &Universe, keys: &[&String], roots: &[(String, PathBuf)]) -> Vec<String> {
    let mut errs = Vec::new();
    let mut files: BTreeMap<String, ProtoFile> = BTreeMap::new();
    for key in keys {
        let m = &uni.messages[*key];
        if m.flags & MAP_ENTRY != 0 {
            continue;
        }
        let Some((pkg, name)) = &m.origin else {
            continue;
        };
        let Some(proto) = proto_file(&mut files, pkg, roots).get(name) else {
            errs.push(format!("{key}: no message {name} in {pkg}/generated.proto"));
            continue;
        };
        for f in &m.fields {
            if f.num == 0 {
                continue;
            }
            let Some((label, ty)) = proto.get(&f.num) else {
                errs.push(format!(
                    "{key}.{}: field {} not in generated.proto",
                    f.json, f.num
                ));
                continue;
            };
            let want_label = if f.flags & MAP != 0 {
                "map"
            } else if f.flags & REPEATED != 0 {
                "repeated"
            } else {
                "optional"
            };
            if label != want_label {
                errs.push(format!(
                    "{key}.{}: proto label {label}, Go type says {want_label}",
                    f.json
                ));
            }
            let last = ty.rsplit('.').next().unwrap_or(ty);
            let ok = if f.flags & MAP != 0 {
                // Compare the map's value type.
                let entry = f.msg.as_ref().and_then(|e| uni.messages.get(e));
                match entry.and_then(|e| e.fields.get(1)) {
                    Some(v) => type_matches(uni, v.kind, v.msg.as_deref(), last),
                    None => false,
                }
            } else {
                type_matches(uni, f.kind, f.msg.as_deref(), last)
            };
            if !ok {
                errs.push(format!(
                    "{key}.{}: proto type {ty} does not match {:?} {:?}",
                    f.json, f.kind, f.msg
                ));
            }
        }
        for (num, (_, ty)) in proto {
            if !m.fields.iter().any(|f| f.num == *num) {
                errs.push(format!(
                    "{key}: proto field {num} ({ty}) missing from the Go-derived table"
                ));
            }
        }
    }
    errs
}

fn type_matches(uni: &Universe, kind: Kind, msg: Option<&str>, proto_last: &str) -> bool {
    match kind {
        Kind::Message => msg
            .and_then(|k| uni.messages.get(k))
            .and_then(|m| m.origin.as_ref())
            .is_some_and(|(_, name)| name == proto_last),
        k => k.proto_name() == proto_last,
    }
}
