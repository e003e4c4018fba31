use super::*;
use crate::registry::builtin::builtin_resources;
use crate::registry::crd::parse_crd;

fn builtins() -> Vec<Arc<ResourceInfo>> {
    builtin_resources().into_iter().map(Arc::new).collect()
}

fn widgets(schema: &str) -> Arc<ResourceInfo> {
    let crd = format!(
        r#"{{"spec":{{"group":"example.com","scope":"Namespaced",
        "names":{{"plural":"widgets","kind":"Widget"}},
        "versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{schema}}}}}]}}}}"#
    );
    Arc::new(parse_crd(crd.as_bytes()).expect("a CRD"))
}

/// Every `$ref` in `doc` names one of `defs`, which start with `prefix`.
fn assert_refs_resolve(doc: &Value, defs: &Map<String, Value>, prefix: &str) {
    refs_of(doc, &mut |r| {
        let name = r
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{r} is not under {prefix}"));
        assert!(defs.contains_key(name), "{r} names no definition");
    });
}

#[test]
fn every_builtin_kind_has_a_schema_in_its_group_versions_document_and_in_v2() {
    let resources = builtins();
    let model = Model::new(&resources);
    assert_eq!(
        model.served.len(),
        resources.len(),
        "a built-in without a schema"
    );
    let docs: BTreeMap<String, Value> = model.v3_documents().into_iter().collect();
    for info in &resources {
        let doc = &docs[&gv_path(&info.group, &info.version)];
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let gvk = json!({"group": info.group, "kind": info.kind, "version": info.version});
        let kinds: Vec<&Value> = schemas
            .values()
            .filter(|s| {
                s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .is_some_and(|l| l.contains(&gvk))
            })
            .collect();
        assert_eq!(kinds.len(), 1, "{gvk}");
        assert!(kinds[0]["properties"]["metadata"].is_object(), "{gvk}");
        let required = kinds[0]["required"].as_array().cloned().unwrap_or_default();
        assert!(!required.contains(&json!("metadata")), "{gvk}");
        assert_refs_resolve(doc, schemas, COMPONENTS);
    }
    let v2 = model.v2();
    let defs = v2["definitions"].as_object().expect("definitions");
    assert_refs_resolve(&v2, defs, DEFINITIONS);
    assert!(defs.contains_key("io.k8s.api.core.v1.PodList"));
    // A reference with a description is a `$ref` beside it in v2, never an `allOf`.
    fn no_all_of(schema: &mut Value) {
        assert!(schema.get("allOf").is_none(), "{schema}");
        subschemas_mut(schema, &mut no_all_of);
    }
    let mut defs = defs.clone();
    defs.values_mut().for_each(no_all_of);
    // JSONSchemaProps keeps its fields named like keywords.
    let props = &defs["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"];
    assert_eq!(props["properties"]["$ref"]["type"], "string");
    assert_eq!(props["properties"]["allOf"]["type"], "array");
}

#[test]
fn paths_and_operation_ids_are_kube_apiservers() {
    let resources = builtins();
    let model = Model::new(&resources);
    let docs: BTreeMap<String, Value> = model.v3_documents().into_iter().collect();
    let op = |gv: &str, path: &str| docs[gv]["paths"][path]["get"]["operationId"].clone();
    // Operation ids as kube-apiserver 1.34 names them.
    assert_eq!(
        op("api/v1", "/api/v1/namespaces/{namespace}/pods"),
        "listCoreV1NamespacedPod"
    );
    assert_eq!(
        op("api/v1", "/api/v1/namespaces/{namespace}/pods/{name}"),
        "readCoreV1NamespacedPod"
    );
    assert_eq!(
        op("api/v1", "/api/v1/pods"),
        "listCoreV1PodForAllNamespaces"
    );
    assert_eq!(op("api/v1", "/api/v1/nodes/{name}"), "readCoreV1Node");
    assert_eq!(
        op(
            "apis/rbac.authorization.k8s.io/v1",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        ),
        "listRbacAuthorizationV1ClusterRole"
    );
    assert_eq!(
        op(
            "apis/flowcontrol.apiserver.k8s.io/v1",
            "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas"
        ),
        "listFlowcontrolApiserverV1FlowSchema"
    );
    assert_eq!(
        op(
            "apis/autoscaling/v2",
            "/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers"
        ),
        "listAutoscalingV2NamespacedHorizontalPodAutoscaler"
    );
    // No write is served, so none is described.
    for doc in docs.values() {
        for item in doc["paths"].as_object().expect("paths").values() {
            let verbs: Vec<&String> = item
                .as_object()
                .expect("item")
                .keys()
                .filter(|k| *k != "parameters")
                .collect();
            assert_eq!(verbs, vec!["get"]);
        }
    }
}

#[test]
fn custom_resources_publish_their_crds_schema_with_type_meta() {
    let schema = r#"{"type":"object","description":"A widget.","properties":{"spec":{"type":"object",
        "required":["labels","size"],
        "properties":{"size":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},
        "labels":{"type":"object","nullable":true,"additionalProperties":{"type":"string"}},
        "extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"a":{"type":"string"}}}}}}}"#;
    let resources = vec![widgets(schema)];
    let model = Model::new(&resources);
    let docs = model.v3_documents();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].0, "apis/example.com/v1");
    let schemas = &docs[0].1["components"]["schemas"];
    let widget = &schemas["com.example.v1.Widget"];
    assert_eq!(widget["description"], "A widget.");
    assert_eq!(widget["properties"]["kind"]["type"], "string");
    assert_eq!(
        widget["properties"]["metadata"]["allOf"][0]["$ref"],
        format!("{COMPONENTS}{OBJECT_META}")
    );
    assert_eq!(
        widget["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
    );
    assert!(schemas.get(OBJECT_META).is_some());
    assert_eq!(
        schemas["com.example.v1.WidgetList"]["properties"]["items"]["items"]["allOf"][0]["$ref"],
        format!("{COMPONENTS}com.example.v1.Widget")
    );
    // In v2, what v2 cannot say is left out.
    let v2 = model.v2();
    let spec = &v2["definitions"]["com.example.v1.Widget"]["properties"]["spec"]["properties"];
    assert_eq!(spec["size"], json!({"x-kubernetes-int-or-string": true}));
    // As apiextensions-apiserver's ToStructuralOpenAPIV2: a nullable field takes any
    // value and is not required.
    assert_eq!(
        spec["labels"],
        json!({"additionalProperties": {"type": "string"}})
    );
    assert_eq!(
        v2["definitions"]["com.example.v1.Widget"]["properties"]["spec"]["required"],
        json!(["size"])
    );
    assert_eq!(
        spec["extra"],
        json!({"x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(
        v2["definitions"]["com.example.v1.Widget"]["properties"]["metadata"],
        json!({"$ref": format!("{DEFINITIONS}{OBJECT_META}"), "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"})
    );
}

#[test]
fn a_crd_without_a_usable_schema_publishes_any_object() {
    for schema in [r#""not an object""#, "null"] {
        let resources = vec![widgets(schema)];
        let model = Model::new(&resources);
        let widget = &model.definitions["com.example.v1.Widget"];
        assert_eq!(
            widget["x-kubernetes-preserve-unknown-fields"], true,
            "{schema}"
        );
        assert_eq!(widget["type"], "object");
    }
}

#[test]
fn documents_are_cached_until_a_crd_changes_and_only_its_hash_moves() {
    let cache = DocumentCache::new();
    let mut resources = builtins();
    resources.push(widgets(r#"{"type":"object"}"#));
    let first = cache.of(&resources);
    assert!(Arc::ptr_eq(&first, &cache.of(&resources)));
    let n = resources.len();
    resources[n - 1] = widgets(r#"{"type":"object","description":"changed"}"#);
    let second = cache.of(&resources);
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(
        first.groups["api/v1"].doc.etag,
        second.groups["api/v1"].doc.etag
    );
    assert_ne!(
        first.groups["apis/example.com/v1"].doc.etag,
        second.groups["apis/example.com/v1"].doc.etag
    );
    assert_eq!(second.groups["api/v1"].doc.etag.len(), 128);
    let root: Value = serde_json::from_slice(&second.root.json).expect("root");
    assert_eq!(
        root["paths"]["apis/example.com/v1"]["serverRelativeURL"],
        format!(
            "/openapi/v3/apis/example.com/v1?hash={}",
            second.groups["apis/example.com/v1"].doc.etag
        )
    );
    // v2 is JSON and protobuf of the same document, under the JSON's hash.
    let v2 = second.v2();
    let json: Value = serde_json::from_slice(&v2.doc.json).expect("v2");
    assert_eq!(json["swagger"], "2.0");
    assert!(v2.protobuf.len() > 1000);
}

#[test]
fn group_words_are_kube_apiservers_operation_stems() {
    assert_eq!(group_words(""), "Core");
    assert_eq!(group_words("apps"), "Apps");
    assert_eq!(
        group_words("rbac.authorization.k8s.io"),
        "RbacAuthorization"
    );
    assert_eq!(group_words("example.com"), "ExampleCom");
    assert_eq!(
        custom_definition_name("stable.example.com", "v1", "CronTab"),
        "com.example.stable.v1.CronTab"
    );
}

#[test]
fn gnostic_protobuf_has_the_documents_field_numbers() {
    // Schema: $ref = 1, description = 4, additionalProperties = 21 (boolean = 2),
    // type = 22 (value = 1); Document: swagger = 1, info = 2, paths = 8,
    // definitions = 9 (NamedSchema: name = 1, value = 2).
    let doc = json!({"swagger": "2.0", "info": {"title": "T", "version": "v"},
        "definitions": {"A": {"type": "object", "additionalProperties": false},
            "B": {"$ref": "#/definitions/A", "description": "d"}}});
    let a = [0xAA, 0x01, 0x02, 0x10, 0x00, 0xB2, 0x01, 0x08, 0x0A, 0x06]
        .into_iter()
        .chain(*b"object")
        .collect::<Vec<u8>>();
    let b = [0x0A, 0x0F]
        .into_iter()
        .chain(*b"#/definitions/A")
        .chain([0x22, 0x01, b'd'])
        .collect::<Vec<u8>>();
    let named = |name: u8, schema: &[u8]| {
        let mut v = vec![0x0A, 0x01, name, 0x12, schema.len() as u8];
        v.extend_from_slice(schema);
        v
    };
    let (na, nb) = (named(b'A', &a), named(b'B', &b));
    let mut defs = vec![0x0A, na.len() as u8];
    defs.extend(&na);
    defs.extend([0x0A, nb.len() as u8]);
    defs.extend(&nb);
    let mut want = vec![
        0x0A,
        0x03,
        b'2',
        b'.',
        b'0',
        0x12,
        0x06,
        0x0A,
        0x01,
        b'T',
        0x12,
        0x01,
        b'v',
        0x42,
        0x00,
        0x4A,
        defs.len() as u8,
    ];
    want.extend(defs);
    assert_eq!(gnostic::encode_document(&doc), want);
}

#[test]
fn the_same_index_is_answered_from_its_last_documents() {
    let cache = crate::store::Cache::new("/registry", crate::store::StoreConfig::small());
    let index = cache.resources();
    let docs = DocumentCache::new();
    let first = docs.of_index(&index);
    assert!(Arc::ptr_eq(&first, &docs.of_index(&index)));
    assert!(first.groups.contains_key("apis/apps/v1"));
    // The same resources asked for by content: the same documents.
    let infos: Vec<_> = index.stores().iter().map(|s| s.info.clone()).collect();
    assert!(Arc::ptr_eq(&first, &docs.of(&infos)));
}
