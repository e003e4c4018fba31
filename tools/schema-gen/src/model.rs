//! Resolves parsed Go types into protobuf/JSON schema facts: for every message reachable
//! from the API kinds, its fields in Go struct order with number, JSON name, kind,
//! nested message and flags.

use std::collections::{BTreeMap, BTreeSet};

use crate::goparse::{tag_value, TypeBody, TypeDecl, TypeExpr};

/// Import path of the meta/v1 package.
pub const META: &str = "k8s.io/apimachinery/pkg/apis/meta/v1";
const RUNTIME: &str = "k8s.io/apimachinery/pkg/runtime";
const RESOURCE: &str = "k8s.io/apimachinery/pkg/api/resource";
const INTSTR: &str = "k8s.io/apimachinery/pkg/util/intstr";
/// The apiextensions packages whose `JSON` and `JSONSchemaPropsOr*` types marshal
/// themselves (`marshal.go`).
const APIEXTENSIONS: [&str; 2] = [
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1",
];

/// Field kinds; names match `Kind` in the transcoder's `types.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Double,
    Float,
    Message,
    Time,
    MicroTime,
    Duration,
    Quantity,
    IntOrString,
    RawExtension,
    FieldsV1,
    Json,
    JsonSchemaPropsOrArray,
    JsonSchemaPropsOrBool,
    JsonSchemaPropsOrStringArray,
}

impl Kind {
    /// The protobuf scalar type name of a scalar kind, or the message name of a special.
    pub fn proto_name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Bytes => "bytes",
            Kind::Bool => "bool",
            Kind::Int32 => "int32",
            Kind::Int64 => "int64",
            Kind::Uint32 => "uint32",
            Kind::Uint64 => "uint64",
            Kind::Double => "double",
            Kind::Float => "float",
            Kind::Message => "",
            Kind::Time => "Time",
            Kind::MicroTime => "MicroTime",
            Kind::Duration => "Duration",
            Kind::Quantity => "Quantity",
            Kind::IntOrString => "IntOrString",
            Kind::RawExtension => "RawExtension",
            Kind::FieldsV1 => "FieldsV1",
            Kind::Json => "JSON",
            Kind::JsonSchemaPropsOrArray => "JSONSchemaPropsOrArray",
            Kind::JsonSchemaPropsOrBool => "JSONSchemaPropsOrBool",
            Kind::JsonSchemaPropsOrStringArray => "JSONSchemaPropsOrStringArray",
        }
    }

    /// The wire layout the transcoder hard-codes for a special kind: (field number,
    /// label, proto type) of each field of its message, as `generated.proto` must say.
    /// `JSONSchemaProps` is the schema message of the same package.
    pub fn layout(self) -> &'static [(u32, &'static str, &'static str)] {
        match self {
            Kind::Time | Kind::MicroTime => &[(1, "optional", "int64"), (2, "optional", "int32")],
            Kind::Duration => &[(1, "optional", "int64")],
            Kind::Quantity => &[(1, "optional", "string")],
            Kind::IntOrString => &[
                (1, "optional", "int64"),
                (2, "optional", "int32"),
                (3, "optional", "string"),
            ],
            Kind::RawExtension | Kind::FieldsV1 | Kind::Json => &[(1, "optional", "bytes")],
            Kind::JsonSchemaPropsOrArray => &[
                (1, "optional", "JSONSchemaProps"),
                (2, "repeated", "JSONSchemaProps"),
            ],
            Kind::JsonSchemaPropsOrBool => {
                &[(1, "optional", "bool"), (2, "optional", "JSONSchemaProps")]
            }
            Kind::JsonSchemaPropsOrStringArray => &[
                (1, "optional", "JSONSchemaProps"),
                (2, "repeated", "string"),
            ],
            _ => &[],
        }
    }
}

/// Field flags (same values as the transcoder's constants).
pub const POINTER: u8 = 1;
pub const OMITEMPTY: u8 = 2;
pub const REPEATED: u8 = 4;
pub const MAP: u8 = 8;
pub const INLINE: u8 = 16;
pub const OMITZERO: u8 = 32;
pub const HIDDEN: u8 = 64;

/// Message flags.
pub const TYPE_META: u8 = 1;
pub const LIST_WRAPPER: u8 = 2;
pub const MAP_ENTRY: u8 = 4;

/// One field of a message.
#[derive(Debug, Clone)]
pub struct Field {
    pub num: u32,
    pub json: String,
    pub kind: Kind,
    pub msg: Option<String>,
    pub flags: u8,
}

/// One message type.
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub fields: Vec<Field>,
    pub flags: u8,
    /// The Go package import path and type name it was derived from (none for map entries).
    pub origin: Option<(String, String)>,
}

/// A resolved Go type.
#[derive(Debug, Clone)]
enum Res {
    Scalar(Kind),
    Struct(String),
    /// A custom-marshaled type holding a nested message: its kind, the nested message
    /// (apiextensions' `JSONSchemaProps`) and its own name (`apiextensions/v1.JSONSchemaPropsOrBool`).
    Special(Kind, String, String),
    Ptr(Box<Res>),
    Slice(Box<Res>),
    Map(Box<Res>, Box<Res>),
}

/// All parsed packages, by import path.
#[derive(Default)]
pub struct Universe {
    pub pkgs: BTreeMap<String, BTreeMap<String, TypeDecl>>,
    pub messages: BTreeMap<String, Message>,
    pub warnings: BTreeSet<String>,
    /// Import path prefixes dropped from message keys (`k8s.io/api/`); the longest
    /// matching one is dropped.
    pub short_prefixes: Vec<String>,
    /// Every custom-marshaled type met: (import path, Go name) → kind.
    pub specials: BTreeMap<(String, String), Kind>,
}

fn builtin(name: &str) -> Option<Res> {
    Some(Res::Scalar(match name {
        "string" => Kind::String,
        "bool" => Kind::Bool,
        "int32" => Kind::Int32,
        "int64" => Kind::Int64,
        "uint32" => Kind::Uint32,
        "uint64" => Kind::Uint64,
        "float64" => Kind::Double,
        "float32" => Kind::Float,
        "byte" | "uint8" => return Some(Res::Scalar(Kind::Uint32)),
        _ => return None,
    }))
}

impl Universe {
    /// The package part of a message key: `core/v1` for `k8s.io/api/core/v1`.
    pub fn short_pkg<'p>(&self, pkg: &'p str) -> &'p str {
        self.short_prefixes
            .iter()
            .filter_map(|p| pkg.strip_prefix(p.as_str()))
            .min_by_key(|rest| rest.len())
            .unwrap_or(pkg)
    }

    /// A short, readable message key: `core/v1.Pod`, `meta/v1.ObjectMeta`.
    pub fn short(&self, pkg: &str, name: &str) -> String {
        format!("{}.{name}", self.short_pkg(pkg))
    }

    fn resolve(
        &mut self,
        pkg: &str,
        imports: &BTreeMap<String, String>,
        te: &TypeExpr,
    ) -> Result<Res, String> {
        match te {
            TypeExpr::Ptr(inner) => Ok(Res::Ptr(Box::new(self.resolve(pkg, imports, inner)?))),
            TypeExpr::Slice(inner) => {
                let r = self.resolve(pkg, imports, inner)?;
                if matches!(inner.as_ref(), TypeExpr::Named { pkg: p, name } if p.is_empty() && (name == "byte" || name == "uint8"))
                {
                    return Ok(Res::Scalar(Kind::Bytes));
                }
                Ok(Res::Slice(Box::new(r)))
            }
            TypeExpr::Map(k, v) => Ok(Res::Map(
                Box::new(self.resolve(pkg, imports, k)?),
                Box::new(self.resolve(pkg, imports, v)?),
            )),
            TypeExpr::Other(s) => Err(format!("unsupported Go type `{s}`")),
            TypeExpr::Named { pkg: alias, name } => {
                if alias.is_empty() {
                    if let Some(r) = builtin(name) {
                        return Ok(r);
                    }
                }
                let path = if alias.is_empty() {
                    pkg.to_string()
                } else {
                    imports
                        .get(alias)
                        .cloned()
                        .ok_or_else(|| format!("unknown import `{alias}`"))?
                };
                self.resolve_named(&path, name)
            }
        }
    }

    fn resolve_named(&mut self, path: &str, name: &str) -> Result<Res, String> {
        let special = match (path, name) {
            (META, "Time") => Some(Kind::Time),
            (META, "MicroTime") => Some(Kind::MicroTime),
            (META, "Duration") => Some(Kind::Duration),
            (META, "FieldsV1") => Some(Kind::FieldsV1),
            (RUNTIME, "RawExtension") => Some(Kind::RawExtension),
            (RESOURCE, "Quantity") => Some(Kind::Quantity),
            (INTSTR, "IntOrString") => Some(Kind::IntOrString),
            (p, "JSON") if APIEXTENSIONS.contains(&p) => Some(Kind::Json),
            (p, "JSONSchemaPropsOrArray") if APIEXTENSIONS.contains(&p) => {
                Some(Kind::JsonSchemaPropsOrArray)
            }
            (p, "JSONSchemaPropsOrBool") if APIEXTENSIONS.contains(&p) => {
                Some(Kind::JsonSchemaPropsOrBool)
            }
            (p, "JSONSchemaPropsOrStringArray") if APIEXTENSIONS.contains(&p) => {
                Some(Kind::JsonSchemaPropsOrStringArray)
            }
            _ => None,
        };
        if let Some(k) = special {
            self.specials
                .insert((path.to_string(), name.to_string()), k);
            if k.layout().iter().any(|(_, _, ty)| *ty == "JSONSchemaProps") {
                // The schema it holds is a message of the same package.
                let Res::Struct(schema) = self.resolve_named(path, "JSONSchemaProps")? else {
                    return Err(format!("{path}.JSONSchemaProps is not a struct"));
                };
                return Ok(Res::Special(k, schema, self.short(path, name)));
            }
            return Ok(Res::Scalar(k));
        }
        let decl = self
            .pkgs
            .get(path)
            .and_then(|p| p.get(name))
            .cloned()
            .ok_or_else(|| format!("type {path}.{name} not found"))?;
        if decl.doc.contains("+protobuf=false") {
            return Err(format!("{path}.{name} is not a protobuf type"));
        }
        match &decl.body {
            TypeBody::Struct(_) => {
                let key = self.short(path, name);
                self.build_struct(path, name, &key, &decl)?;
                Ok(Res::Struct(key))
            }
            TypeBody::Alias(te) => {
                let r = self.resolve(path, &decl.imports, te)?;
                if decl.doc.contains("+protobuf.nullable=true") {
                    if let Res::Slice(elem) = r {
                        // go-to-protobuf makes a nullable named slice a message {repeated items = 1}.
                        let key = self.short(path, name);
                        if !self.messages.contains_key(&key) {
                            let kind = self.leaf(&elem, &key)?;
                            let f = Field {
                                num: 1,
                                json: "items".into(),
                                kind: kind.0,
                                msg: kind.1,
                                flags: REPEATED,
                            };
                            self.messages.insert(
                                key.clone(),
                                Message {
                                    fields: vec![f],
                                    flags: LIST_WRAPPER,
                                    origin: Some((path.to_string(), name.to_string())),
                                },
                            );
                        }
                        return Ok(Res::Struct(key));
                    }
                }
                Ok(r)
            }
        }
    }

    /// The kind and message of a non-pointer, non-slice, non-map type.
    fn leaf(&mut self, r: &Res, ctx: &str) -> Result<(Kind, Option<String>), String> {
        match r {
            Res::Scalar(k) => Ok((*k, None)),
            Res::Struct(key) => Ok((Kind::Message, Some(key.clone()))),
            Res::Special(kind, schema, _) => Ok((*kind, Some(schema.clone()))),
            other => Err(format!("{ctx}: unsupported nested type {other:?}")),
        }
    }

    fn map_entry(&mut self, key: &Res, val: &Res, ctx: &str) -> Result<String, String> {
        if !matches!(key, Res::Scalar(Kind::String)) {
            return Err(format!("{ctx}: map key {key:?} is not a string"));
        }
        let (vk, vm) = self.leaf(val, ctx)?;
        let name = match val {
            Res::Special(_, _, own) => format!("map[string]{own}"),
            _ => format!(
                "map[string]{}",
                vm.clone().unwrap_or_else(|| format!("{vk:?}"))
            ),
        };
        if !self.messages.contains_key(&name) {
            let fields = vec![
                Field {
                    num: 1,
                    json: "key".into(),
                    kind: Kind::String,
                    msg: None,
                    flags: 0,
                },
                Field {
                    num: 2,
                    json: "value".into(),
                    kind: vk,
                    msg: vm,
                    flags: 0,
                },
            ];
            self.messages.insert(
                name.clone(),
                Message {
                    fields,
                    flags: MAP_ENTRY,
                    origin: None,
                },
            );
        }
        Ok(name)
    }

    fn build_struct(
        &mut self,
        path: &str,
        name: &str,
        key: &str,
        decl: &TypeDecl,
    ) -> Result<(), String> {
        if self.messages.contains_key(key) {
            return Ok(());
        }
        // Placeholder first, so recursive types terminate; removed again on failure.
        self.messages.insert(key.to_string(), Message::default());
        match self.struct_fields(key, path, decl) {
            Ok(mut msg) => {
                msg.origin = Some((path.to_string(), name.to_string()));
                self.messages.insert(key.to_string(), msg);
                Ok(())
            }
            Err(e) => {
                self.messages.remove(key);
                Err(e)
            }
        }
    }

    fn struct_fields(&mut self, key: &str, path: &str, decl: &TypeDecl) -> Result<Message, String> {
        let TypeBody::Struct(go_fields) = &decl.body else {
            return Err(format!("{key} is not a struct"));
        };
        let mut msg = Message::default();
        for gf in go_fields {
            let ctx = format!("{key}.{}", gf.name);
            let json_tag = tag_value(&gf.tag, "json");
            let pb_tag = tag_value(&gf.tag, "protobuf");
            let (mut json_name, opts) = match json_tag {
                Some(t) => match t.split_once(',') {
                    Some((n, o)) => (n.to_string(), o.to_string()),
                    None => (t.to_string(), String::new()),
                },
                None => (String::new(), String::new()),
            };
            let opt = |o: &str| opts.split(',').any(|x| x == o);
            if gf.embedded
                && matches!(&gf.ty, TypeExpr::Named { name, .. } if name == "TypeMeta")
                && pb_tag.is_none()
            {
                msg.flags |= TYPE_META;
                continue;
            }
            let exported = gf.name.starts_with(|c: char| c.is_ascii_uppercase());
            let mut flags = 0u8;
            if json_name == "-" && opts.is_empty() || !exported && !gf.embedded {
                flags |= HIDDEN;
            }
            if opt("omitempty") {
                flags |= OMITEMPTY;
            }
            if opt("omitzero") {
                flags |= OMITZERO;
            }
            if opt("string") {
                return Err(format!("{ctx}: `,string` JSON option is not supported"));
            }
            let r = self
                .resolve(path, &decl.imports, &gf.ty)
                .map_err(|e| format!("{ctx}: {e}"))?;
            let (mut r, pointer) = match r {
                Res::Ptr(inner) => (*inner, true),
                r => (r, false),
            };
            if pointer {
                flags |= POINTER;
            }
            if json_name.is_empty() {
                if gf.embedded && matches!(r, Res::Struct(_)) {
                    flags |= INLINE;
                    if pointer {
                        return Err(format!("{ctx}: inline pointer to struct is not supported"));
                    }
                } else {
                    json_name = gf.name.clone();
                }
            }
            let (kind, nested) = match &mut r {
                Res::Slice(elem) => {
                    flags |= REPEATED;
                    self.leaf(elem, &ctx)?
                }
                Res::Map(k, v) => {
                    flags |= MAP;
                    (Kind::Message, Some(self.map_entry(k, v, &ctx)?))
                }
                other => self.leaf(other, &ctx)?,
            };
            if flags & OMITZERO != 0 && !matches!(kind, Kind::Time | Kind::MicroTime) {
                return Err(format!(
                    "{ctx}: omitzero is only supported on Time and MicroTime"
                ));
            }
            let Some(pb) = pb_tag else {
                if flags & HIDDEN == 0 {
                    self.warnings.insert(format!(
                        "{ctx}: JSON field without protobuf tag (always its zero value)"
                    ));
                }
                msg.fields.push(Field {
                    num: 0,
                    json: json_name,
                    kind,
                    msg: nested,
                    flags,
                });
                continue;
            };
            // The tag's wire type and label are not reliable (pointer scalars say `bytes`,
            // some slices say `opt`): the wire follows from the Go type, and the whole
            // result is cross-checked against generated.proto afterwards.
            let num: u32 = pb
                .split(',')
                .nth(1)
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{ctx}: bad protobuf tag {pb}"))?;
            if num == 0 || num > 250 {
                return Err(format!(
                    "{ctx}: field number {num} out of the supported range"
                ));
            }
            msg.fields.push(Field {
                num,
                json: json_name,
                kind,
                msg: nested,
                flags,
            });
        }
        let mut seen = BTreeSet::new();
        for f in &msg.fields {
            if f.num != 0 && !seen.insert(f.num) {
                return Err(format!("{key}: duplicate field number {}", f.num));
            }
        }
        Ok(msg)
    }

    /// Resolves a root kind; on failure the messages it added are kept (harmless) and the
    /// error is returned.
    pub fn root(&mut self, path: &str, name: &str) -> Result<String, String> {
        match self.resolve_named(path, name)? {
            Res::Struct(key) => Ok(key),
            other => Err(format!("{path}.{name} is not a struct ({other:?})")),
        }
    }

    /// Checks that inlined structs do not hide or duplicate JSON names.
    pub fn check_json_names(&self) -> Vec<String> {
        let mut errs = Vec::new();
        for (key, m) in &self.messages {
            if m.flags & MAP_ENTRY != 0 {
                continue;
            }
            let mut names = BTreeSet::new();
            self.collect_names(m, &mut names, key, &mut errs, 0);
        }
        errs
    }

    fn collect_names(
        &self,
        m: &Message,
        names: &mut BTreeSet<String>,
        key: &str,
        errs: &mut Vec<String>,
        depth: u32,
    ) {
        for f in &m.fields {
            if f.flags & HIDDEN != 0 {
                continue;
            }
            if f.flags & INLINE != 0 {
                if let Some(inner) = f.msg.as_ref().and_then(|k| self.messages.get(k)) {
                    if depth < 8 {
                        self.collect_names(inner, names, key, errs, depth + 1);
                    }
                }
            } else if !names.insert(f.json.clone()) {
                errs.push(format!("{key}: JSON name {} appears twice", f.json));
            }
        }
    }
}
