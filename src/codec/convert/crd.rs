//! CustomResourceDefinitions: kube-apiserver 1.34 stores them as
//! apiextensions.k8s.io/v1beta1 (the more compact form) and serves only v1. Reading one
//! back, it applies v1beta1's defaults and converts through the internal type to v1
//! (apiextensions-apiserver 1.34, `v1beta1/defaults.go` and `v1/conversion.go`):
//!
//! - defaults: scope `Namespaced`; `names.singular` the lower-case kind; `names.listKind`
//!   the kind + `List`; `versions` from the deprecated `version` when empty;
//!   `conversion.strategy` `None` when unset, and `conversionReviewVersions` `["v1beta1"]`
//!   for a webhook without them; `preserveUnknownFields` true when unset; a webhook
//!   service's port 443; `status.storedVersions` the storage version when empty;
//! - to v1: the top-level `validation` (as `schema`), `subresources`,
//!   `additionalPrinterColumns` and `selectableFields` are copied into every version
//!   (kube-apiserver hoisted them there when all versions agreed); the deprecated
//!   `version` goes; `conversion.webhookClientConfig` and `conversionReviewVersions`
//!   move under `conversion.webhook` (`clientConfig`); a printer column's `JSONPath`
//!   becomes `jsonPath`; `preserveUnknownFields` becomes a plain bool.
//!
//! This works on the JSON of the two versions: the stored value rendered by the v1beta1
//! schema in, a v1 object out, which the caller encodes with the v1 schema (so the
//! served JSON has v1's Go field order and zero values).

use serde_json::{json, Map, Value};

/// The served apiVersion.
pub const V1: &str = "apiextensions.k8s.io/v1";

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn is_set(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

/// A v1beta1 printer column as v1 names it (`JSONPath` → `jsonPath`).
fn column_v1(c: &Value) -> Value {
    let mut c = c.clone();
    if let Some(map) = c.as_object_mut() {
        if let Some(path) = map.remove("JSONPath") {
            map.insert("jsonPath".into(), path);
        }
    }
    c
}

fn columns_v1(cols: &Value) -> Value {
    match cols.as_array() {
        Some(a) => Value::Array(a.iter().map(column_v1).collect()),
        None => cols.clone(),
    }
}

/// The v1beta1 `conversion`, defaulted, as v1's.
fn conversion_v1(conversion: Option<&Value>) -> Value {
    let strategy = conversion
        .map(|c| text(c, "strategy"))
        .filter(|s| !s.is_empty())
        .unwrap_or("None");
    let mut out = json!({ "strategy": strategy });
    let Some(c) = conversion else {
        return out;
    };
    let mut review = c.get("conversionReviewVersions").cloned();
    let empty_review = review
        .as_ref()
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if strategy == "Webhook" && empty_review {
        review = Some(json!(["v1beta1"]));
    }
    let client = c
        .get("webhookClientConfig")
        .filter(|v| !v.is_null())
        .cloned();
    let review = review.filter(|r| r.as_array().is_some_and(|a| !a.is_empty()));
    if client.is_some() || review.is_some() {
        let mut webhook = Map::new();
        if let Some(mut client) = client {
            if let Some(service) = client.get_mut("service").filter(|s| !s.is_null()) {
                if !is_set(service.get("port")) {
                    service["port"] = json!(443);
                }
            }
            webhook.insert("clientConfig".into(), client);
        }
        if let Some(r) = review {
            webhook.insert("conversionReviewVersions".into(), r);
        }
        out["webhook"] = Value::Object(webhook);
    }
    out
}

/// One v1beta1 version, with what the spec's top level sets for all of them.
fn version_v1(v: &Value, spec: &Value) -> Value {
    let mut out = Map::new();
    for key in [
        "name",
        "served",
        "storage",
        "deprecated",
        "deprecationWarning",
    ] {
        if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
            out.insert(key.into(), x.clone());
        }
    }
    let per_version = [
        ("schema", v.get("schema").cloned(), spec.get("validation")),
        (
            "subresources",
            v.get("subresources").cloned(),
            spec.get("subresources"),
        ),
        (
            "additionalPrinterColumns",
            v.get("additionalPrinterColumns").map(columns_v1),
            spec.get("additionalPrinterColumns"),
        ),
        (
            "selectableFields",
            v.get("selectableFields").cloned(),
            spec.get("selectableFields"),
        ),
    ];
    for (key, own, top) in per_version {
        let value = match top.filter(|t| !t.is_null()) {
            Some(t) if key == "additionalPrinterColumns" => Some(columns_v1(t)),
            Some(t) => Some(t.clone()),
            None => own.filter(|o| !o.is_null()),
        };
        if let Some(x) = value {
            out.insert(key.into(), x);
        }
    }
    Value::Object(out)
}

/// `names`, defaulted (singular, listKind).
fn names_v1(names: Option<&Value>) -> Value {
    let mut names = names.cloned().unwrap_or_else(|| json!({}));
    let kind = text(&names, "kind").to_string();
    if text(&names, "singular").is_empty() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if text(&names, "listKind").is_empty() && !kind.is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    names
}

/// The v1 form of a v1beta1 CustomResourceDefinition, as kube-apiserver serves it.
pub fn v1beta1_to_v1(crd: &Value) -> Value {
    let spec = crd.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut versions: Vec<Value> = spec
        .get("versions")
        .and_then(Value::as_array)
        .map(|vs| vs.iter().map(|v| version_v1(v, &spec)).collect())
        .unwrap_or_default();
    let version = text(&spec, "version");
    if versions.is_empty() && !version.is_empty() {
        let v = json!({"name": version, "served": true, "storage": true});
        versions.push(version_v1(&v, &spec));
    }
    let scope = match text(&spec, "scope") {
        "" => "Namespaced",
        s => s,
    };
    let preserve = spec
        .get("preserveUnknownFields")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let mut status = crd.get("status").cloned().unwrap_or_else(|| json!({}));
    let stored_empty = status
        .get("storedVersions")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if stored_empty {
        let storage = versions
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .map(|v| text(v, "name").to_string());
        if let Some(name) = storage {
            status["storedVersions"] = json!([name]);
        }
    }
    json!({
        "kind": "CustomResourceDefinition",
        "apiVersion": V1,
        "metadata": crd.get("metadata").cloned().unwrap_or_else(|| json!({})),
        "spec": {
            "group": text(&spec, "group"),
            "names": names_v1(spec.get("names")),
            "scope": scope,
            "versions": versions,
            "conversion": conversion_v1(spec.get("conversion")),
            "preserveUnknownFields": preserve,
        },
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What kube-apiserver stores for a CRD created as v1 with one schema for its two
    /// versions: the shared parts hoisted to the top level (v1beta1), and what it serves
    /// back (v1, each version with them again). The cases follow apiextensions-apiserver's
    /// own conversion tests (`v1/conversion_test.go`).
    #[test]
    fn hoisted_fields_go_back_into_every_version() {
        let schema = json!({"openAPIV3Schema": {"type": "object",
            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
        let stored = json!({
            "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1beta1",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "version": "v1",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                          "listKind": "WidgetList", "shortNames": ["wd"]},
                "scope": "Namespaced",
                "validation": schema,
                "subresources": {"status": {}},
                "versions": [{"name": "v1", "served": true, "storage": true},
                             {"name": "v1beta1", "served": true, "storage": false,
                              "deprecated": true, "deprecationWarning": "use v1"}],
                "additionalPrinterColumns": [{"name": "Color", "type": "string",
                                              "JSONPath": ".spec.color"}],
                "conversion": {"strategy": "None"},
                "preserveUnknownFields": false
            },
            "status": {"acceptedNames": {"plural": "widgets", "kind": "Widget"},
                       "storedVersions": ["v1"]}
        });
        let v1 = v1beta1_to_v1(&stored);
        let columns = json!([{"name": "Color", "type": "string", "jsonPath": ".spec.color"}]);
        assert_eq!(v1["apiVersion"], V1);
        assert_eq!(
            v1["spec"]["versions"],
            json!([
                {"name": "v1", "served": true, "storage": true, "schema": schema,
                 "subresources": {"status": {}}, "additionalPrinterColumns": columns},
                {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
                 "deprecationWarning": "use v1", "schema": schema,
                 "subresources": {"status": {}}, "additionalPrinterColumns": columns}
            ])
        );
        assert!(v1["spec"].get("version").is_none());
        assert!(v1["spec"].get("validation").is_none());
        assert_eq!(v1["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(v1["spec"]["preserveUnknownFields"], false);
        assert_eq!(v1["status"], stored["status"]);
    }

    #[test]
    fn v1beta1_defaults_apply_on_read() {
        let stored = json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gizmos.example.net"},
            "spec": {"group": "example.net", "version": "v2",
                     "names": {"plural": "gizmos", "kind": "Gizmo"}},
            "status": {}
        });
        let v1 = v1beta1_to_v1(&stored);
        assert_eq!(v1["spec"]["scope"], "Namespaced");
        assert_eq!(v1["spec"]["names"]["singular"], "gizmo");
        assert_eq!(v1["spec"]["names"]["listKind"], "GizmoList");
        assert_eq!(
            v1["spec"]["versions"],
            json!([{"name": "v2", "served": true, "storage": true}])
        );
        assert_eq!(v1["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(v1["spec"]["preserveUnknownFields"], true);
        assert_eq!(v1["status"]["storedVersions"], json!(["v2"]));
    }

    #[test]
    fn webhook_conversion_moves_under_webhook_with_defaults() {
        let stored = json!({"spec": {"group": "g.io", "names": {"plural": "xs", "kind": "X"},
            "versions": [{"name": "v1", "served": true, "storage": true}],
            "conversion": {"strategy": "Webhook",
                "webhookClientConfig": {"service": {"namespace": "ns", "name": "conv"},
                                        "caBundle": "Y2E="}}}});
        let v1 = v1beta1_to_v1(&stored);
        assert_eq!(
            v1["spec"]["conversion"],
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": {"namespace": "ns", "name": "conv", "port": 443},
                                 "caBundle": "Y2E="},
                "conversionReviewVersions": ["v1beta1"]}})
        );
        let given = json!({"spec": {"conversion": {"strategy": "Webhook",
            "webhookClientConfig": {"url": "https://c.example/convert"},
            "conversionReviewVersions": ["v1", "v1beta1"]}}});
        assert_eq!(
            v1beta1_to_v1(&given)["spec"]["conversion"]["webhook"],
            json!({"clientConfig": {"url": "https://c.example/convert"},
                   "conversionReviewVersions": ["v1", "v1beta1"]})
        );
    }

    #[test]
    fn per_version_fields_stay_when_the_top_level_has_none() {
        let stored = json!({"spec": {"group": "g.io", "names": {"plural": "xs", "kind": "X"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object"}},
                 "additionalPrinterColumns": [{"name": "A", "type": "integer", "JSONPath": ".a"}],
                 "selectableFields": [{"jsonPath": ".spec.a"}]},
                {"name": "v2", "served": false, "storage": false}]}});
        let v1 = v1beta1_to_v1(&stored);
        assert_eq!(
            v1["spec"]["versions"][0]["additionalPrinterColumns"],
            json!([{"name": "A", "type": "integer", "jsonPath": ".a"}])
        );
        assert_eq!(
            v1["spec"]["versions"][0]["selectableFields"],
            json!([{"jsonPath": ".spec.a"}])
        );
        assert_eq!(
            v1["spec"]["versions"][1],
            json!({"name": "v2", "served": false, "storage": false})
        );
    }
}
