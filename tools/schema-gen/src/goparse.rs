//! A small reader for the subset of Go that API type files use: imports, and top-level
//! `type` declarations (structs with tagged fields, named scalars, slices and maps).
//!
//! It works on logical lines: comments are stripped (the comment block right above a
//! line is kept, for `+protobuf...` markers) and each line knows its brace depth, so
//! function bodies and other code are skipped without being understood.

use std::collections::BTreeMap;

/// A Go type expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeExpr {
    /// `T` or `pkg.T` (pkg is the import alias, empty for the same package).
    Named { pkg: String, name: String },
    /// `*T`.
    Ptr(Box<TypeExpr>),
    /// `[]T`.
    Slice(Box<TypeExpr>),
    /// `map[K]V`.
    Map(Box<TypeExpr>, Box<TypeExpr>),
    /// Anything else (arrays, inline structs, interfaces, funcs, channels).
    Other(String),
}

/// One field of a struct.
#[derive(Debug, Clone)]
pub struct GoField {
    /// The Go field name (for an embedded field, the type's name).
    pub name: String,
    /// Whether the field is embedded (no field name).
    pub embedded: bool,
    /// The field's type.
    pub ty: TypeExpr,
    /// The raw struct tag, without backticks.
    pub tag: String,
}

/// What a type declaration declares.
#[derive(Debug, Clone)]
pub enum TypeBody {
    /// A struct with its fields, in order.
    Struct(Vec<GoField>),
    /// Any other type: `type X string`, `type X []Y`, `type X = Y`, ...
    Alias(TypeExpr),
}

/// A top-level type declaration.
#[derive(Debug, Clone)]
pub struct TypeDecl {
    /// The declared type.
    pub body: TypeBody,
    /// The comment block right above the declaration.
    pub doc: String,
    /// The import table of the file it is in (alias -> import path).
    pub imports: BTreeMap<String, String>,
}

struct Line {
    depth: i32,
    text: String,
    doc: String,
}

/// Splits Go source into comment-free logical lines with their brace depth.
fn logical_lines(src: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut doc = String::new();
    let mut in_block_comment = false;
    let mut in_raw = false;
    let mut cur = String::new();
    let mut start_depth = 0;
    for raw_line in src.lines() {
        let chars: Vec<char> = raw_line.chars().collect();
        let mut i = 0;
        let mut comment = String::new();
        if !in_raw && !in_block_comment && cur.is_empty() {
            start_depth = depth;
        }
        while i < chars.len() {
            let c = chars[i];
            if in_block_comment {
                if c == '*' && chars.get(i + 1) == Some(&'/') {
                    in_block_comment = false;
                    i += 1;
                }
                i += 1;
                continue;
            }
            if in_raw {
                cur.push(c);
                if c == '`' {
                    in_raw = false;
                }
                i += 1;
                continue;
            }
            match c {
                '/' if chars.get(i + 1) == Some(&'/') => {
                    comment = chars[i + 2..].iter().collect();
                    break;
                }
                '/' if chars.get(i + 1) == Some(&'*') => {
                    in_block_comment = true;
                    i += 2;
                    continue;
                }
                '`' => {
                    in_raw = true;
                    cur.push(c);
                }
                '"' | '\'' => {
                    // Interpreted string or rune: copy through the closing quote.
                    cur.push(c);
                    i += 1;
                    while i < chars.len() {
                        let d = chars[i];
                        cur.push(d);
                        if d == '\\' {
                            if let Some(&e) = chars.get(i + 1) {
                                cur.push(e);
                            }
                            i += 2;
                            continue;
                        }
                        if d == c {
                            break;
                        }
                        i += 1;
                    }
                }
                '{' | '(' => {
                    depth += 1;
                    cur.push(c);
                }
                '}' | ')' => {
                    depth -= 1;
                    cur.push(c);
                }
                _ => cur.push(c),
            }
            i += 1;
        }
        if in_raw {
            cur.push('\n');
            continue;
        }
        let text = cur.trim().to_string();
        cur.clear();
        if text.is_empty() {
            if comment.is_empty() && !in_block_comment {
                doc.clear();
            } else {
                doc.push_str(comment.trim());
                doc.push('\n');
            }
            continue;
        }
        out.push(Line {
            depth: start_depth,
            text,
            doc: std::mem::take(&mut doc),
        });
    }
    out
}

/// Parses a type expression such as `*metav1.Time` or `map[string][]byte`.
pub fn parse_type(s: &str) -> TypeExpr {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('*') {
        return TypeExpr::Ptr(Box::new(parse_type(rest)));
    }
    if let Some(rest) = s.strip_prefix("[]") {
        return TypeExpr::Slice(Box::new(parse_type(rest)));
    }
    if let Some(rest) = s.strip_prefix("map[") {
        let mut depth = 1;
        for (i, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return TypeExpr::Map(
                            Box::new(parse_type(&rest[..i])),
                            Box::new(parse_type(&rest[i + 1..])),
                        );
                    }
                }
                _ => {}
            }
        }
        return TypeExpr::Other(s.to_string());
    }
    let ident = |x: &str| {
        !x.is_empty()
            && x.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !x.starts_with(|c: char| c.is_ascii_digit())
    };
    match s.split_once('.') {
        Some((p, n)) if ident(p) && ident(n) => TypeExpr::Named {
            pkg: p.to_string(),
            name: n.to_string(),
        },
        None if ident(s) && s != "struct" && s != "interface" => TypeExpr::Named {
            pkg: String::new(),
            name: s.to_string(),
        },
        _ => TypeExpr::Other(s.to_string()),
    }
}

fn parse_import(spec: &str, imports: &mut BTreeMap<String, String>) {
    let spec = spec.trim();
    let Some(q) = spec.find('"') else { return };
    let path = spec[q..].trim_matches('"').to_string();
    let alias = spec[..q].trim();
    let alias = if alias.is_empty() {
        path.rsplit('/').next().unwrap_or(&path).to_string()
    } else {
        alias.to_string()
    };
    imports.insert(alias, path);
}

fn parse_field(line: &str) -> Option<GoField> {
    let (head, tag) = match (line.find('`'), line.rfind('`')) {
        (Some(a), Some(b)) if b > a => (&line[..a], line[a + 1..b].to_string()),
        _ => (line, String::new()),
    };
    let head = head.trim();
    if head.is_empty() || head == "}" {
        return None;
    }
    let mut parts = head.splitn(2, char::is_whitespace);
    let first = parts.next()?.trim();
    match parts.next().map(str::trim) {
        None | Some("") => {
            let ty = parse_type(first);
            let name = match &ty {
                TypeExpr::Named { name, .. } => name.clone(),
                TypeExpr::Ptr(inner) => match inner.as_ref() {
                    TypeExpr::Named { name, .. } => name.clone(),
                    _ => first.to_string(),
                },
                _ => first.to_string(),
            };
            Some(GoField {
                name,
                embedded: true,
                ty,
                tag,
            })
        }
        Some(rest) => Some(GoField {
            name: first.trim_end_matches(',').to_string(),
            embedded: false,
            ty: parse_type(rest),
            tag,
        }),
    }
}

/// Parses one Go file into `types`, keyed by type name.
pub fn parse_file(src: &str, types: &mut BTreeMap<String, TypeDecl>) {
    let lines = logical_lines(src);
    let mut imports = BTreeMap::new();
    let mut i = 0;
    // Imports come first in a Go file; collect them before reading declarations.
    while i < lines.len() {
        let l = &lines[i];
        if l.depth == 0 && l.text.starts_with("import") {
            let rest = l.text["import".len()..].trim();
            if rest.starts_with('(') {
                let inner = rest.trim_start_matches('(').trim_end_matches(')');
                if !inner.trim().is_empty() {
                    parse_import(inner, &mut imports);
                }
                i += 1;
                while i < lines.len() && lines[i].text != ")" {
                    parse_import(&lines[i].text, &mut imports);
                    i += 1;
                }
            } else {
                parse_import(rest, &mut imports);
            }
        }
        i += 1;
    }
    let mut i = 0;
    let mut in_type_block = false;
    while i < lines.len() {
        let l = &lines[i];
        let spec = if l.depth == 0 && l.text == "type (" {
            in_type_block = true;
            i += 1;
            continue;
        } else if in_type_block && l.depth == 1 && l.text == ")" {
            in_type_block = false;
            i += 1;
            continue;
        } else if in_type_block && l.depth == 1 {
            Some((l.text.as_str(), 1))
        } else if l.depth == 0 {
            l.text.strip_prefix("type ").map(|s| (s, 0))
        } else {
            None
        };
        let Some((spec, base)) = spec else {
            i += 1;
            continue;
        };
        let doc = l.doc.clone();
        let spec = spec.trim();
        let (name, rest) = match spec.split_once(char::is_whitespace) {
            Some((n, r)) => (n.to_string(), r.trim().to_string()),
            None => {
                i += 1;
                continue;
            }
        };
        let rest = rest
            .strip_prefix('=')
            .map(|r| r.trim().to_string())
            .unwrap_or(rest);
        if rest.starts_with("struct") {
            let mut fields = Vec::new();
            if !rest.ends_with('}') {
                i += 1;
                while i < lines.len() && lines[i].depth > base {
                    if lines[i].depth == base + 1 {
                        if let Some(f) = parse_field(&lines[i].text) {
                            fields.push(f);
                        }
                    }
                    i += 1;
                }
                types.insert(
                    name,
                    TypeDecl {
                        body: TypeBody::Struct(fields),
                        doc,
                        imports: imports.clone(),
                    },
                );
                continue;
            }
            types.insert(
                name,
                TypeDecl {
                    body: TypeBody::Struct(fields),
                    doc,
                    imports: imports.clone(),
                },
            );
        } else {
            types.insert(
                name,
                TypeDecl {
                    body: TypeBody::Alias(parse_type(&rest)),
                    doc,
                    imports: imports.clone(),
                },
            );
        }
        i += 1;
    }
}

/// Reads `key:"value"` from a Go struct tag.
pub fn tag_value<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = tag.trim();
    while !rest.is_empty() {
        let colon = rest.find(':')?;
        let k = rest[..colon].trim();
        let after = &rest[colon + 1..];
        let after = after.strip_prefix('"')?;
        let end = after.find('"')?;
        if k == key {
            return Some(&after[..end]);
        }
        rest = after[end + 1..].trim_start();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_structs_and_tags() {
        let src = r#"
package v1
import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)
// Pod is a pod.
// +protobuf.nullable=true
type Pod struct {
	metav1.TypeMeta `json:",inline"`
	// comment { with brace
	Spec PodSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`
	Port *intstr.IntOrString `json:"port" protobuf:"bytes,3,opt,name=port"`
	Data map[string][]byte `json:"data,omitempty" protobuf:"bytes,4,rep,name=data"`
}
type (
	Phase string
	List []string
)
func f() { type inner struct { A int } }
"#;
        let mut types = BTreeMap::new();
        parse_file(src, &mut types);
        let pod = &types["Pod"];
        assert!(pod.doc.contains("+protobuf.nullable=true"));
        let TypeBody::Struct(fields) = &pod.body else {
            panic!()
        };
        assert_eq!(fields.len(), 4);
        assert!(fields[0].embedded);
        assert_eq!(fields[1].name, "Spec");
        assert_eq!(tag_value(&fields[1].tag, "json"), Some("spec,omitempty"));
        assert_eq!(
            fields[3].ty,
            TypeExpr::Map(
                Box::new(parse_type("string")),
                Box::new(TypeExpr::Slice(Box::new(parse_type("byte"))))
            )
        );
        assert!(types.contains_key("Phase") && types.contains_key("List"));
        assert!(!types.contains_key("inner"));
        assert_eq!(pod.imports["intstr"], "k8s.io/apimachinery/pkg/util/intstr");
    }
}
