//! Every resource kube-apiserver 1.34 stores and serves by default, one check per row of
//! the registry: its upstream 1.34 fixture (the protobuf kube-apiserver writes, in the
//! version it stores), put at the resource's real etcd key, is served by list, get,
//! watch, Table, PartialObjectMetadata and protobuf, under the served apiVersion, with
//! the fixture's JSON (kube-apiserver's own rendering) as the expected object.
//!
//! The fixtures live beside the project (`../shared/fixtures`); without them the test
//! fails, naming the missing path.

mod support;

use std::path::PathBuf;

use serde_json::Value;

use support::kube::*;
use support::{http, Etcd, Watchd};
use watchd::registry::builtin::builtin_resources;
use watchd::registry::ResourceInfo;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const METADATA: &str = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The v1.34.0 fixture folder. It comes with `../shared` and CI always has it, so its
/// absence is a failure naming the path, never a silent pass.
fn fixtures() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/k8s-api-testdata/v1.34.0");
    assert!(
        dir.is_dir(),
        "fixture folder {} is absent (it comes with ../shared; CI always has it)",
        dir.display()
    );
    dir
}

/// `<group or core>.<version>.<Kind>` of an apiVersion and kind: the fixture's stem.
fn stem(api_version: &str, kind: &str) -> String {
    match api_version.split_once('/') {
        Some((g, v)) => format!("{g}.{v}.{kind}"),
        None => format!("core.{api_version}.{kind}"),
    }
}

/// The fixtures' object name; their namespace is `namespaceValue`.
const NAME: &str = "nameValue";

fn key_of(info: &ResourceInfo, name: &str) -> String {
    if info.namespaced {
        format!("/registry/{}/namespaceValue/{name}", info.etcd_dir)
    } else {
        format!("/registry/{}/{name}", info.etcd_dir)
    }
}

fn path_of(info: &ResourceInfo, name: Option<&str>) -> String {
    let root = if info.group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let ns = if info.namespaced {
        "/namespaces/namespaceValue"
    } else {
        ""
    };
    let name = name.map(|n| format!("/{n}")).unwrap_or_default();
    format!("{root}{ns}/{}{name}", info.resource)
}

/// One row to check: the resource, the object's name, the value stored at its key, and
/// what kube-apiserver serves for it at a revision.
struct Case {
    info: ResourceInfo,
    name: &'static str,
    stored: Vec<u8>,
    expected: Box<dyn Fn(i64) -> Value>,
}

/// What kube-apiserver serves for the stored fixture at `rv`, in the served version.
fn expected(dir: &std::path::Path, info: &ResourceInfo, rv: i64) -> Value {
    let stored = stem(&info.storage_version, &info.kind);
    let text = std::fs::read(dir.join(format!("{stored}.json"))).expect("fixture JSON");
    let mut v: Value = serde_json::from_slice(&text).expect("fixture JSON parses");
    v["metadata"]["resourceVersion"] = rv.to_string().into();
    if info.group == "events.k8s.io" {
        // kube-apiserver's conversion of the stored core Event: the same values under
        // events.k8s.io/v1 names (codec::convert, proven against both schemas).
        let renames = [
            ("involvedObject", "regarding"),
            ("message", "note"),
            ("source", "deprecatedSource"),
            ("firstTimestamp", "deprecatedFirstTimestamp"),
            ("lastTimestamp", "deprecatedLastTimestamp"),
            ("count", "deprecatedCount"),
            ("reportingComponent", "reportingController"),
        ];
        if let Value::Object(map) = &mut v {
            for (from, to) in renames {
                if let Some(x) = map.remove(from) {
                    map.insert(to.to_string(), x);
                }
            }
        }
    }
    v["apiVersion"] = info.api_version().into();
    v
}

fn transcoded(body: &[u8]) -> (String, String, Value) {
    let env = watchd::codec::envelope::parse(body).expect("protobuf envelope");
    let r = watchd::codec::pbjson::render(env.api_version, env.kind, env.raw, None)
        .expect("protobuf renders");
    (
        env.api_version.to_string(),
        env.kind.to_string(),
        serde_json::from_slice(&r.json).expect("JSON"),
    )
}

/// A CRD as kube-apiserver 1.34 stores one created as v1 with one version: JSON (the
/// apiextensions storage codec), apiextensions.k8s.io/v1beta1, its schema, subresources,
/// printer columns and selectable fields hoisted to the top level.
fn crd_stored() -> Value {
    serde_json::json!({
        "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1beta1",
        "metadata": {"name": "gadgets.example.org", "uid": "3c1c4f2e-7a1d-4e55-9d0b-4f2b8e0c9a11",
                     "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "group": "example.org", "version": "v1",
            "names": {"plural": "gadgets", "singular": "gadget", "shortNames": ["gd"],
                      "kind": "Gadget", "listKind": "GadgetList"},
            "scope": "Namespaced",
            "validation": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}}},
            "subresources": {"status": {}},
            "versions": [{"name": "v1", "served": true, "storage": true}],
            "additionalPrinterColumns": [{"name": "Size", "type": "integer", "JSONPath": ".spec.size"}],
            "selectableFields": [{"jsonPath": ".spec.size"}],
            "conversion": {"strategy": "None"},
            "preserveUnknownFields": false
        },
        "status": {"conditions": [{"type": "Established", "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:00:01Z",
                                   "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}],
                   "acceptedNames": {"plural": "gadgets", "singular": "gadget", "shortNames": ["gd"],
                                     "kind": "Gadget", "listKind": "GadgetList"},
                   "storedVersions": ["v1"]}
    })
}

/// kube-apiserver's v1 answer for [`crd_stored`]: Go's JSON of the v1 type, each version
/// with the hoisted fields again (and a printer column's `jsonPath`).
fn crd_served(rv: i64) -> Value {
    serde_json::json!({
        "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
        "metadata": {"name": "gadgets.example.org", "uid": "3c1c4f2e-7a1d-4e55-9d0b-4f2b8e0c9a11",
                     "resourceVersion": rv.to_string(),
                     "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "group": "example.org",
            "names": {"plural": "gadgets", "singular": "gadget", "shortNames": ["gd"],
                      "kind": "Gadget", "listKind": "GadgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                "selectableFields": [{"jsonPath": ".spec.size"}]}],
            // v1's preserveUnknownFields is a plain bool with omitempty: false is left out.
            "conversion": {"strategy": "None"}
        },
        "status": {"conditions": [{"type": "Established", "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:00:01Z",
                                   "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}],
                   "acceptedNames": {"plural": "gadgets", "singular": "gadget", "shortNames": ["gd"],
                                     "kind": "Gadget", "listKind": "GadgetList"},
                   "storedVersions": ["v1"]}
    })
}

/// An APIService as kube-apiserver stores it: JSON (the aggregator's storage codec),
/// apiregistration.k8s.io/v1, as Go writes the type.
fn apiservice(rv: Option<i64>) -> Value {
    let mut v = serde_json::json!({
        "kind": "APIService", "apiVersion": "apiregistration.k8s.io/v1",
        "metadata": {"name": "v1beta1.metrics.k8s.io", "uid": "9f0e6a52-1b7c-4d1e-8f3a-2c5d7e9b0a44",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"k8s-app": "metrics-server"}},
        "spec": {"service": {"namespace": "kube-system", "name": "metrics-server", "port": 443},
                 "group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
                 "groupPriorityMinimum": 100, "versionPriority": 100},
        "status": {"conditions": [{"type": "Available", "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:00:05Z",
                                   "reason": "Passed", "message": "all checks passed"}]}
    });
    if let Some(rv) = rv {
        v["metadata"]["resourceVersion"] = rv.to_string().into();
    }
    v
}

fn cases(dir: &std::path::Path) -> Vec<Case> {
    builtin_resources()
        .into_iter()
        .map(|info| match info.group.as_str() {
            "apiextensions.k8s.io" => Case {
                info,
                name: "gadgets.example.org",
                stored: serde_json::to_vec(&crd_stored()).unwrap(),
                expected: Box::new(crd_served),
            },
            "apiregistration.k8s.io" => Case {
                info,
                name: "v1beta1.metrics.k8s.io",
                stored: serde_json::to_vec(&apiservice(None)).unwrap(),
                expected: Box::new(|rv| apiservice(Some(rv))),
            },
            _ => {
                let stored = stem(&info.storage_version, &info.kind);
                let value =
                    std::fs::read(dir.join(format!("{stored}.pb"))).expect("fixture protobuf");
                let (dir, row) = (dir.to_path_buf(), info.clone());
                Case {
                    info,
                    name: NAME,
                    stored: value,
                    expected: Box::new(move |rv| expected(&dir, &row, rv)),
                }
            }
        })
        .collect()
}

#[tokio::test]
async fn every_resource_is_served_from_its_fixture_at_its_real_key() {
    let dir = fixtures();
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let cases = cases(&dir);
    assert_eq!(cases.len(), 57);
    let mut revisions = std::collections::HashMap::new();
    for c in &cases {
        let key = key_of(&c.info, c.name);
        if revisions.contains_key(&key) {
            continue; // core and events.k8s.io events share one key
        }
        let rev = put_raw(&mut kv, &key, c.stored.clone()).await;
        revisions.insert(key, rev);
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    for c in &cases {
        let info = &c.info;
        let name = info.qualified_name();
        let rv = revisions[&key_of(info, c.name)];
        let want = (c.expected)(rv);

        let list = get_json(&format!("{base}{}", path_of(info, None))).await;
        assert_eq!(list["kind"], format!("{}List", info.kind), "{name}");
        assert_eq!(list["apiVersion"], info.api_version(), "{name}");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 1, "{name}: {list}");
        assert_eq!(items[0], want, "{name}: list item");

        let item = format!("{base}{}", path_of(info, Some(c.name)));
        assert_eq!(get_json(&item).await, want, "{name}: get");

        let watch = format!(
            "{base}{}?watch=1&resourceVersion=0&fieldSelector=metadata.name%3D{}",
            path_of(info, None),
            c.name
        );
        let mut w = open_watch(&watch).await;
        let ev = next_event(&mut w).await;
        assert_eq!(ev["type"], "ADDED", "{name}");
        assert_eq!(ev["object"], want, "{name}: watch");

        let table = http::get(&item, &[("accept", TABLE)]).await;
        assert_eq!(table.status, 200, "{name}: {}", table.text());
        let t = table.json();
        let columns = t["columnDefinitions"].as_array().map_or(0, Vec::len);
        let cells = t["rows"][0]["cells"].as_array().map_or(0, Vec::len);
        // kube-apiserver 1.34 prints a third, undeclared cell (age) for IPAddresses.
        assert!(columns >= 2 && cells >= columns, "{name}: {t}");
        let name_at = t["columnDefinitions"]
            .as_array()
            .and_then(|c| c.iter().position(|c| c["format"] == "name"))
            .unwrap_or_else(|| panic!("{name}: no name column: {t}"));
        assert_eq!(
            t["rows"][0]["cells"][name_at], c.name,
            "{name}: the name cell"
        );

        let meta = http::get(&item, &[("accept", METADATA)]).await;
        assert_eq!(meta.status, 200, "{name}");
        assert_eq!(
            meta.json()["metadata"],
            want["metadata"],
            "{name}: metadata"
        );

        let pb = http::get(&item, &[("accept", PROTOBUF)]).await;
        assert_eq!(pb.status, 200, "{name}: {}", pb.text());
        let (api_version, kind, json) = transcoded(&pb.body);
        assert_eq!(
            (api_version.as_str(), kind.as_str()),
            (info.api_version().as_str(), info.kind.as_str()),
            "{name}"
        );
        assert_eq!(json, want, "{name}: protobuf");
    }
    // Discovery lists each of them with its short names and categories.
    for info in cases.iter().map(|c| &c.info) {
        let gv = info.api_version();
        let url = if gv == "v1" {
            format!("{base}/api/v1")
        } else {
            format!("{base}/apis/{gv}")
        };
        let list = get_json(&url).await;
        let r = list["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == info.resource.as_str()))
            .unwrap_or_else(|| panic!("{} not in {list}", info.qualified_name()))
            .clone();
        assert_eq!(r["kind"], info.kind.as_str());
        assert_eq!(r["namespaced"], info.namespaced);
        let short: Vec<String> = r["shortNames"].as_array().map_or_else(Vec::new, |a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        });
        assert_eq!(short, info.short_names, "{}", info.qualified_name());
    }
}
