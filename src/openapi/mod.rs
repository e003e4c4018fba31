//! The OpenAPI documents of the resources watchd serves, as kube-apiserver publishes them:
//! `/openapi/v3` (one document per group-version, addressed by the hash of its JSON) and
//! `/openapi/v2` (one document, JSON or gnostic protobuf). kubectl reads them for
//! `explain` (v3) and for client-side validation, `apply --validate=strict` (v2 protobuf).
//!
//! Built-in kinds' schemas come from k8s-openapi's types, generated from the upstream 1.34
//! spec ([`kinds`]); custom resources' from their CRD's `openAPIV3Schema`. Each document
//! holds the read paths watchd serves (get and list: no write, so kubectl sees that the
//! server does not validate fields and validates on its side) and the schemas they refer
//! to. Documents are rendered on the first request and again when the served resources
//! change (a CRD added, changed or removed), never before: a daemon nobody asks keeps
//! only its CRDs' schema text.

mod gnostic;
mod kinds;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::SystemTime;

use bytes::Bytes;
use k8s_openapi::schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

use crate::registry::{Origin, PublishedSchema, ResourceInfo};
use crate::store::ResourceIndex;

/// Where v3 documents keep their schemas.
const COMPONENTS: &str = "#/components/schemas/";
/// Where the v2 document keeps them.
const DEFINITIONS: &str = "#/definitions/";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// The `info` of every document: the version `/version` reports.
fn info() -> Value {
    json!({"title": "Kubernetes", "version": crate::api::http::discovery::git_version()})
}

/// One rendered document: its bytes and their hash (upper-case hex SHA-512 of the JSON,
/// kube-apiserver's ETag and `?hash=`).
#[derive(Debug, Clone)]
pub struct Doc {
    pub json: Bytes,
    pub etag: String,
}

impl Doc {
    fn of(value: &Value) -> Doc {
        let json = serde_json::to_vec(value).unwrap_or_default();
        let digest = ring::digest::digest(&ring::digest::SHA512, &json);
        let mut etag = String::with_capacity(128);
        for b in digest.as_ref() {
            etag.push_str(&format!("{b:02X}"));
        }
        Doc {
            json: Bytes::from(json),
            etag,
        }
    }
}

/// The v2 document in both encodings; the ETag is the JSON's, as kube-apiserver's.
#[derive(Debug)]
pub struct V2 {
    pub doc: Doc,
    pub protobuf: Bytes,
}

/// One group-version's v3 document; its protobuf is encoded on its first request.
#[derive(Debug)]
pub struct GroupDoc {
    pub doc: Doc,
    protobuf: OnceLock<Bytes>,
}

impl GroupDoc {
    /// The document as gnostic's `openapi.v3.Document`.
    pub fn protobuf(&self) -> Bytes {
        self.protobuf
            .get_or_init(|| {
                let value: Value = serde_json::from_slice(&self.doc.json).unwrap_or_default();
                Bytes::from(gnostic::v3::encode_document(&value))
            })
            .clone()
    }
}

/// Every document for one set of served resources.
#[derive(Debug)]
pub struct Documents {
    /// The `/openapi/v3` discovery document.
    pub root: Doc,
    /// By path below `/openapi/v3/`: `api/v1`, `apis/apps/v1`.
    pub groups: BTreeMap<String, GroupDoc>,
    /// When these were rendered (`Last-Modified`).
    pub rendered: SystemTime,
    resources: Vec<Arc<ResourceInfo>>,
    v2: OnceLock<Arc<V2>>,
}

impl Documents {
    /// The v2 document, rendered on its first request.
    pub fn v2(&self) -> Arc<V2> {
        self.v2
            .get_or_init(|| {
                let model = Model::new(&self.resources);
                let doc = model.v2();
                let protobuf = gnostic::encode_document(&doc);
                let v2 = Arc::new(V2 {
                    doc: Doc::of(&doc),
                    protobuf: Bytes::from(protobuf),
                });
                drop((doc, model));
                // A render builds ten times the documents' size in schema values, and
                // glibc keeps the pages they leave (measured: resident 14 → 33 MB after
                // the first v3 and v2 requests without this, for 3.2 MB of documents).
                crate::store::cache::release_free_heap();
                v2
            })
            .clone()
    }
}

/// The documents for what `index` serves, from the process's [`DocumentCache`].
pub fn documents_of(index: &Arc<ResourceIndex>) -> Arc<Documents> {
    static CACHE: DocumentCache = DocumentCache::new();
    CACHE.of_index(index)
}

/// Documents, the index they were asked for, and how many schemas had been replaced in
/// place then.
type IndexedDocuments = (Weak<ResourceIndex>, u64, Arc<Documents>);

/// The last documents rendered, found again by the index they were asked for, or by the
/// content of the resources they describe.
pub struct DocumentCache {
    by_index: Mutex<Option<IndexedDocuments>>,
    by_content: Mutex<Option<(u64, Arc<Documents>)>>,
}

impl Default for DocumentCache {
    fn default() -> Self {
        Self::new()
    }
}

impl DocumentCache {
    pub const fn new() -> DocumentCache {
        DocumentCache {
            by_index: Mutex::new(None),
            by_content: Mutex::new(None),
        }
    }

    /// The documents for what `index` serves: the last call's when `index` is the same
    /// one and no schema was replaced in place since (the index is replaced whenever the
    /// served resources change; held weakly here, so a replaced index is freed and its
    /// address not reused while this compares it), else [`DocumentCache::of`] its
    /// resources.
    pub fn of_index(&self, index: &Arc<ResourceIndex>) -> Arc<Documents> {
        let replacements = PublishedSchema::replacements();
        {
            let last = self.by_index.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((w, r, docs)) = last.as_ref() {
                if std::ptr::eq(w.as_ptr(), Arc::as_ptr(index)) && *r == replacements {
                    return docs.clone();
                }
            }
        }
        let infos: Vec<_> = index.stores().iter().map(|s| s.info.clone()).collect();
        let docs = self.of(&infos);
        *self.by_index.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Arc::downgrade(index), replacements, docs.clone()));
        docs
    }

    /// The documents for `resources`: the last ones when they describe the same
    /// resources (every custom resource's schema is hashed to tell), else rendered.
    pub fn of(&self, resources: &[Arc<ResourceInfo>]) -> Arc<Documents> {
        let print = fingerprint(resources);
        let mut last = self.by_content.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((p, docs)) = last.as_ref() {
            if *p == print {
                return docs.clone();
            }
        }
        let docs = Arc::new(render(resources));
        metrics::counter!("watchd_openapi_renders_total").increment(1);
        // The schemas rendered from are freed; give their pages back (see `v2`).
        crate::store::cache::release_free_heap();
        *last = Some((print, docs.clone()));
        docs
    }
}

/// What the documents depend on: each resource's identity and, for custom resources,
/// its schema.
fn fingerprint(resources: &[Arc<ResourceInfo>]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for r in resources {
        (&r.group, &r.version, &r.resource, &r.kind, r.namespaced).hash(&mut h);
        r.schema.get().hash(&mut h);
    }
    h.finish()
}

fn render(resources: &[Arc<ResourceInfo>]) -> Documents {
    let model = Model::new(resources);
    let mut groups = BTreeMap::new();
    let mut paths = Map::new();
    for (gv, doc) in model.v3_documents() {
        let doc = Doc::of(&doc);
        paths.insert(
            gv.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", doc.etag)}),
        );
        groups.insert(
            gv,
            GroupDoc {
                doc,
                protobuf: OnceLock::new(),
            },
        );
    }
    Documents {
        root: Doc::of(&json!({ "paths": paths })),
        groups,
        rendered: SystemTime::now(),
        resources: resources.to_vec(),
        v2: OnceLock::new(),
    }
}

/// The path of a group-version below `/openapi/v3/` (and `/api`, `/apis`).
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// One served resource and the definitions of its kind and list kind.
struct Served<'r> {
    info: &'r ResourceInfo,
    definition: String,
    list_definition: String,
}

/// Every schema definition (v3 form) and the served resources that use them.
struct Model<'r> {
    definitions: Map<String, Value>,
    served: Vec<Served<'r>>,
}

impl<'r> Model<'r> {
    fn new(resources: &'r [Arc<ResourceInfo>]) -> Model<'r> {
        let mut generator = SchemaSettings::draft2020_12()
            .with(|s| {
                s.definitions_path = "/components/schemas".into();
                s.meta_schema = None;
                s.transforms.clear();
            })
            .into_generator();
        let builtins = kinds::register(&mut generator);
        let mut definitions = generator.take_definitions(false);
        for schema in definitions.values_mut() {
            wrap_ref_siblings(schema);
        }
        let mut served = Vec::new();
        for info in resources {
            let info: &ResourceInfo = info;
            let definition = match info.origin {
                Origin::Builtin => {
                    let Some(b) = builtins.iter().find(|b| {
                        b.group == info.group && b.version == info.version && b.kind == info.kind
                    }) else {
                        continue;
                    };
                    b.definition.clone()
                }
                Origin::CustomResource => {
                    let name = custom_definition_name(&info.group, &info.version, &info.kind);
                    definitions.insert(name.clone(), custom_schema(info));
                    name
                }
            };
            let gvk = json!([{"group": info.group, "kind": info.kind, "version": info.version}]);
            if let Some(Value::Object(schema)) = definitions.get_mut(&definition) {
                // k8s-openapi requires `metadata` of a kind (its Rust types do); the
                // upstream spec does not.
                if let Some(Value::Array(required)) = schema.get_mut("required") {
                    required.retain(|f| f != "metadata");
                    if required.is_empty() {
                        schema.remove("required");
                    }
                }
                schema.insert("x-kubernetes-group-version-kind".into(), gvk);
            }
            let list_kind = info.list_kind();
            let list_definition = match definition.rsplit_once('.') {
                Some((prefix, _)) => format!("{prefix}.{list_kind}"),
                None => list_kind.clone(),
            };
            definitions.insert(
                list_definition.clone(),
                list_schema(info, &definition, &list_kind),
            );
            served.push(Served {
                info,
                definition,
                list_definition,
            });
        }
        Model {
            definitions,
            served,
        }
    }

    /// One v3 document per served group-version, by its path below `/openapi/v3/`.
    fn v3_documents(&self) -> Vec<(String, Value)> {
        let mut by_gv: Vec<(String, Vec<&Served>)> = Vec::new();
        for s in &self.served {
            let gv = gv_path(&s.info.group, &s.info.version);
            match by_gv.iter_mut().find(|(g, _)| *g == gv) {
                Some((_, v)) => v.push(s),
                None => by_gv.push((gv, vec![s])),
            }
        }
        by_gv
            .into_iter()
            .map(|(gv, served)| {
                let mut paths = Map::new();
                let mut roots = Vec::new();
                for s in served {
                    read_paths(s, &mut paths);
                    roots.push(s.definition.as_str());
                    roots.push(s.list_definition.as_str());
                }
                let schemas = self.closure(&roots);
                let doc = json!({
                    "openapi": "3.0.0",
                    "info": info(),
                    "paths": paths,
                    "components": {"schemas": schemas},
                });
                (gv, doc)
            })
            .collect()
    }

    /// The definitions `roots` name and every one they refer to, transitively.
    fn closure(&self, roots: &[&str]) -> Map<String, Value> {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut todo: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
        let mut out = Map::new();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let Some(schema) = self.definitions.get(&name) else {
                continue;
            };
            refs_of(schema, &mut |r| {
                if let Some(n) = r.strip_prefix(COMPONENTS) {
                    if !seen.contains(n) {
                        todo.push(n.to_string());
                    }
                }
            });
            out.insert(name, schema.clone());
        }
        out
    }

    /// The v2 document: every definition the v3 documents hold, in v2 form.
    fn v2(&self) -> Value {
        let mut roots = Vec::new();
        for s in &self.served {
            roots.push(s.definition.as_str());
            roots.push(s.list_definition.as_str());
        }
        let definitions: Map<String, Value> = self
            .closure(&roots)
            .iter()
            .map(|(k, v)| (k.clone(), to_v2(v)))
            .collect();
        json!({
            "swagger": "2.0",
            "info": info(),
            "paths": {},
            "definitions": definitions,
        })
    }
}

/// `#/components/schemas/…` references in `schema`.
fn refs_of(schema: &Value, f: &mut impl FnMut(&str)) {
    match schema {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => f(r),
                    _ => refs_of(v, f),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| refs_of(v, f)),
        _ => {}
    }
}

/// OpenAPI 3.0 ignores what stands beside a `$ref`; kube-apiserver's documents put the
/// reference in an `allOf` of one, so that a field's own description is kept.
fn wrap_ref_siblings(schema: &mut Value) {
    if let Value::Object(m) = schema {
        if m.len() > 1 {
            if let Some(r) = m.remove("$ref") {
                m.insert("allOf".into(), json!([{ "$ref": r }]));
            }
        }
    }
    subschemas_mut(schema, &mut wrap_ref_siblings);
}

/// Calls `f` on each schema directly inside `schema` (keys of `properties` are field
/// names, not keywords: JSONSchemaProps has fields named `$ref` and `allOf`).
fn subschemas_mut(schema: &mut Value, f: &mut impl FnMut(&mut Value)) {
    let Value::Object(m) = schema else {
        return;
    };
    for (k, v) in m.iter_mut() {
        match (k.as_str(), v) {
            ("properties" | "patternProperties", Value::Object(fields)) => {
                fields.values_mut().for_each(&mut *f)
            }
            (
                "items" | "additionalProperties" | "additionalItems" | "not",
                v @ Value::Object(_),
            ) => f(v),
            ("items" | "allOf" | "anyOf" | "oneOf", Value::Array(all)) => {
                all.iter_mut().for_each(&mut *f)
            }
            _ => {}
        }
    }
}

/// A custom resource's definition name, as apiextensions-apiserver's: the group reversed,
/// then version and kind (`com.example.v1.Widget`).
fn custom_definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// A custom resource's schema: its CRD's, with `apiVersion`, `kind` and `metadata` as
/// apiextensions-apiserver publishes them. A CRD without a schema (or with one that is
/// not JSON) publishes an object of any fields.
fn custom_schema(info: &ResourceInfo) -> Value {
    let mut schema = info
        .schema
        .get()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Value::Object(m) = &mut schema {
        if !matches!(m.get("properties"), Some(Value::Object(_))) {
            m.insert("properties".into(), json!({}));
        }
        if let Some(Value::Object(props)) = m.get_mut("properties") {
            props.insert("apiVersion".into(), type_meta_field("apiVersion"));
            props.insert("kind".into(), type_meta_field("kind"));
            props.insert(
                "metadata".into(),
                json!({
                    "allOf": [{"$ref": format!("{COMPONENTS}{OBJECT_META}")}],
                    "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                }),
            );
        }
        m.entry("type").or_insert_with(|| json!("object"));
    }
    schema
}

fn type_meta_field(field: &str) -> Value {
    let description = if field == "kind" {
        "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
    } else {
        "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
    };
    json!({"description": description, "type": "string"})
}

/// A list kind's schema (`PodList`): `items` of the kind, with list metadata.
fn list_schema(info: &ResourceInfo, definition: &str, list_kind: &str) -> Value {
    let plural = &info.resource;
    json!({
        "description": format!("{list_kind} is a list of {}.", info.kind),
        "type": "object",
        "properties": {
            "apiVersion": type_meta_field("apiVersion"),
            "items": {
                "description": format!("List of {plural}."),
                "type": "array",
                "items": {"allOf": [{"$ref": format!("{COMPONENTS}{definition}")}], "default": {}},
            },
            "kind": type_meta_field("kind"),
            "metadata": {
                "allOf": [{"$ref": format!("{COMPONENTS}{LIST_META}")}],
                "default": {},
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [{"group": info.group, "kind": list_kind, "version": info.version}],
    })
}

/// The operation-id stem of a group, as kube-apiserver's: `Core` for the core group, the
/// group's words without `.k8s.io` otherwise (`RbacAuthorization`, `ExampleCom`).
fn group_words(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    group
        .strip_suffix(".k8s.io")
        .unwrap_or(group)
        .split(['.', '-'])
        .map(capitalized)
        .collect()
}

/// `word` with its first letter in upper case.
fn capitalized(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The paths watchd serves for one resource, each with its get operation: list (in a
/// namespace and across them) and read.
fn read_paths(s: &Served, paths: &mut Map<String, Value>) {
    let info = s.info;
    let gv = gv_path(&info.group, &info.version);
    let stem = format!("{}{}", group_words(&info.group), capitalized(&info.version));
    let gvk = json!({"group": info.group, "kind": info.kind, "version": info.version});
    let op = |action: &str, id: String, definition: &str, description: String| {
        json!({
            "description": description,
            "operationId": id,
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {"application/json": {"schema": {"$ref": format!("{COMPONENTS}{definition}")}}},
                },
                "401": {"description": "Unauthorized"},
            },
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        })
    };
    let param = |name: &str, description: &str| json!({"name": name, "in": "path", "required": true, "description": description, "schema": {"type": "string", "uniqueItems": true}});
    let name_param = param("name", &format!("name of the {}", info.kind));
    let ns_param = param(
        "namespace",
        "object name and auth scope, such as for teams and projects",
    );
    let kind = &info.kind;
    let list_description = format!("list or watch objects of kind {kind}");
    let read_description = format!("read the specified {kind}");
    if info.namespaced {
        let base = format!("/{gv}/namespaces/{{namespace}}/{}", info.resource);
        paths.insert(
            base.clone(),
            json!({
                "get": op("list", format!("list{stem}Namespaced{kind}"), &s.list_definition, list_description.clone()),
                "parameters": [ns_param],
            }),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": op("get", format!("read{stem}Namespaced{kind}"), &s.definition, read_description),
                "parameters": [name_param, ns_param],
            }),
        );
        paths.insert(
            format!("/{gv}/{}", info.resource),
            json!({"get": op("list", format!("list{stem}{kind}ForAllNamespaces"), &s.list_definition, list_description)}),
        );
    } else {
        let base = format!("/{gv}/{}", info.resource);
        paths.insert(
            base.clone(),
            json!({"get": op("list", format!("list{stem}{kind}"), &s.list_definition, list_description)}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": op("get", format!("read{stem}{kind}"), &s.definition, read_description),
                "parameters": [name_param],
            }),
        );
    }
}

/// A v3 reference (`#/components/schemas/…`) as v2 writes it (`#/definitions/…`).
fn v2_ref(r: &Value) -> Value {
    let r = r.as_str().unwrap_or_default();
    Value::String(
        r.strip_prefix(COMPONENTS)
            .map_or_else(|| r.to_string(), |n| format!("{DEFINITIONS}{n}")),
    )
}

/// A v3 schema in OpenAPI v2 form, as kube-apiserver publishes v2: references point at
/// `#/definitions/`, an `allOf` of one reference is the reference (with its
/// description), and what v2 cannot say is taken out as apiextensions-apiserver's
/// `ToStructuralOpenAPIV2` takes it out of a CRD's schema, so that kubectl's validation
/// accepts what the server accepts:
/// - `allOf`, `oneOf`, `anyOf`, `not` and `patternProperties` are dropped;
/// - a nullable field has no type, items or properties (any value, `null` included), and
///   is not required of its parent; a parent whose `additionalProperties` are nullable
///   requires nothing;
/// - a field that keeps unknown fields has no items or properties, and no type when it
///   was an object or an array; an array left without items has no type.
fn to_v2(schema: &Value) -> Value {
    let Value::Object(m) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "$ref" => {
                out.insert(k.clone(), v2_ref(v));
            }
            "nullable" | "oneOf" | "anyOf" | "not" | "patternProperties" => {}
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .map(|p| p.iter().map(|(n, s)| (n.clone(), to_v2(s))).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "additionalProperties" | "items" if v.is_object() => {
                out.insert(k.clone(), to_v2(v));
            }
            "items" if v.is_array() => {
                let items = v.as_array().map(|a| a.iter().map(to_v2).collect());
                out.insert(k.clone(), Value::Array(items.unwrap_or_default()));
            }
            // Values, not schemas; `allOf` is read below.
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    // An `allOf` of one reference is the reference; any other is a junctor v2 drops.
    if let Some(Value::Array(all)) = out.remove("allOf") {
        let reference = all.first().and_then(|r| r.get("$ref")).cloned();
        if let (1, Some(r), false, false) = (
            all.len(),
            reference,
            out.contains_key("properties"),
            out.contains_key("type"),
        ) {
            out.remove("default");
            out.insert("$ref".into(), v2_ref(&r));
        }
    }
    let flag = |m: &Map<String, Value>, name: &str| m.get(name) == Some(&Value::Bool(true));
    if flag(m, "nullable") {
        for k in ["type", "items", "properties"] {
            out.remove(k);
        }
    }
    if flag(m, "x-kubernetes-preserve-unknown-fields") {
        out.remove("items");
        out.remove("properties");
        if out.get("type") == Some(&json!("object")) {
            out.remove("type");
        }
    }
    if out.get("type") == Some(&json!("array")) && !out.contains_key("items") {
        out.remove("type");
    }
    // Nullable fields are not required; nullable values of a map make nothing required.
    let nullable = |s: &Value| s.get("nullable") == Some(&Value::Bool(true));
    let nullable_fields: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, s)| nullable(s))
                .map(|(n, _)| n.clone())
                .collect()
        })
        .unwrap_or_default();
    if m.get("additionalProperties").is_some_and(nullable) {
        out.remove("required");
    } else if let Some(Value::Array(required)) = out.get_mut("required") {
        required.retain(|f| {
            !f.as_str()
                .is_some_and(|f| nullable_fields.iter().any(|n| n == f))
        });
        if required.is_empty() {
            out.remove("required");
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests;
