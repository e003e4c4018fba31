//! CustomResourceDefinitions of the demo group and their objects: `Widget`
//! (namespaced, with printer columns and a selectable field) and
//! `WidgetClass` (cluster-scoped).
//!
//! kube-apiserver stores custom resources as JSON whatever its storage media
//! type, under `/registry/<group>/<plural>/[<ns>/]<name>`; how the CRDs
//! themselves are stored is decided by `demo::Storage::encode_crd`.

use serde_json::{json, Value};

use super::{metadata, now_rfc3339, Rng};

/// API group of the demo's custom resources.
pub const GROUP: &str = "demo.watchd.dev";
/// Their only (served and storage) version.
pub const VERSION: &str = "v1";
/// etcd directory of widgets (`<group>/<plural>`).
pub const WIDGETS: &str = "demo.watchd.dev/widgets";
/// etcd directory of widget classes.
pub const WIDGET_CLASSES: &str = "demo.watchd.dev/widgetclasses";
/// The widget classes the demo creates; `standard` is the default.
pub const CLASSES: [&str; 2] = ["standard", "premium"];
const COLORS: [&str; 3] = ["red", "green", "blue"];

/// Whether `obj` is one of the demo's custom resources (stored as JSON).
pub fn is_custom_resource(obj: &Value) -> bool {
    obj["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .is_some_and(|(group, _)| group == GROUP)
}

/// The names and scope of a CRD.
struct Names {
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    short: &'static str,
    namespaced: bool,
}

fn column(name: &str, kind: &str, path: &str) -> Value {
    json!({ "name": name, "type": kind, "jsonPath": path })
}

/// Builds an `apiextensions.k8s.io/v1` CRD as kube-apiserver keeps it once
/// established (names accepted, `storedVersions` set).
fn crd(n: &Names, schema: Value, columns: Vec<Value>, selectable: &[&str], rng: &mut Rng) -> Value {
    let name = format!("{}.{GROUP}", n.plural);
    let mut meta = metadata(&name, None, &[], rng);
    meta["generation"] = json!(1);
    let names = json!({
        "plural": n.plural, "singular": n.singular, "shortNames": [n.short],
        "kind": n.kind, "listKind": format!("{}List", n.kind), "categories": ["demo"],
    });
    let mut version = json!({
        "name": VERSION, "served": true, "storage": true,
        "schema": { "openAPIV3Schema": schema },
        "subresources": { "status": {} },
        "additionalPrinterColumns": columns,
    });
    if !selectable.is_empty() {
        let fields: Vec<Value> = selectable
            .iter()
            .map(|p| json!({ "jsonPath": p }))
            .collect();
        version["selectableFields"] = Value::Array(fields);
    }
    let now = now_rfc3339();
    let condition = |kind: &str, reason: &str, message: &str| {
        json!({ "type": kind, "status": "True", "lastTransitionTime": now,
                "reason": reason, "message": message })
    };
    json!({
        "kind": "CustomResourceDefinition",
        "apiVersion": "apiextensions.k8s.io/v1",
        "metadata": meta,
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": if n.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [version],
            "conversion": { "strategy": "None" },
        },
        "status": {
            "conditions": [
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition("Established", "InitialNamesAccepted",
                          "the initial names have been accepted"),
            ],
            "acceptedNames": names,
            "storedVersions": [VERSION],
        },
    })
}

fn object_schema(spec: Value, status: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": { "type": "object" },
            "spec": spec,
            "status": status,
        },
    })
}

/// The CRD of `widgets.demo.watchd.dev`: namespaced, columns Color, Size,
/// Class (wide), Phase and Age, `spec.color` selectable.
pub fn widget_crd(rng: &mut Rng) -> Value {
    let schema = object_schema(
        json!({ "type": "object", "required": ["color"], "properties": {
            "color": { "type": "string", "enum": COLORS },
            "size": { "type": "integer", "minimum": 1, "maximum": 10 },
            "className": { "type": "string" },
        } }),
        json!({ "type": "object", "properties": {
            "phase": { "type": "string" },
            "observedGeneration": { "type": "integer", "format": "int64" },
        } }),
    );
    let mut class = column("Class", "string", ".spec.className");
    class["priority"] = json!(1);
    let columns = vec![
        column("Color", "string", ".spec.color"),
        column("Size", "integer", ".spec.size"),
        class,
        column("Phase", "string", ".status.phase"),
        column("Age", "date", ".metadata.creationTimestamp"),
    ];
    let names = Names {
        plural: "widgets",
        singular: "widget",
        kind: "Widget",
        short: "wdg",
        namespaced: true,
    };
    crd(&names, schema, columns, &[".spec.color"], rng)
}

/// The CRD of `widgetclasses.demo.watchd.dev`: cluster-scoped.
pub fn widget_class_crd(rng: &mut Rng) -> Value {
    let schema = object_schema(
        json!({ "type": "object", "properties": {
            "controller": { "type": "string" },
            "default": { "type": "boolean" },
        } }),
        json!({ "type": "object" }),
    );
    let columns = vec![
        column("Controller", "string", ".spec.controller"),
        column("Default", "boolean", ".spec.default"),
        column("Age", "date", ".metadata.creationTimestamp"),
    ];
    let names = Names {
        plural: "widgetclasses",
        singular: "widgetclass",
        kind: "WidgetClass",
        short: "wdgc",
        namespaced: false,
    };
    crd(&names, schema, columns, &[], rng)
}

/// Builds the cluster-scoped WidgetClass `name`.
pub fn widget_class(name: &str, rng: &mut Rng) -> Value {
    let mut meta = metadata(name, None, &[], rng);
    meta["generation"] = json!(1);
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "WidgetClass",
        "metadata": meta,
        "spec": { "controller": format!("{GROUP}/{name}-controller"), "default": name == CLASSES[0] },
    })
}

/// Builds the Widget `<app>-widget` of `app` in `ns`, reconciled (`Ready`).
pub fn widget(ns: &str, app: &str, rng: &mut Rng) -> Value {
    let mut meta = metadata(&format!("{app}-widget"), Some(ns), &[("app", app)], rng);
    meta["generation"] = json!(1);
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Widget",
        "metadata": meta,
        "spec": {
            "color": COLORS[rng.index(COLORS.len())],
            "size": 1 + rng.below(5),
            "className": CLASSES[rng.index(CLASSES.len())],
        },
        "status": { "phase": "Ready", "observedGeneration": 1 },
    })
}

/// The next change of a widget, alternating as a user and its controller
/// would: a spec change (new color or size, `generation` + 1, status now
/// behind), then the controller catching up. Returns what changed.
pub fn change_widget(w: &mut Value, rng: &mut Rng) -> String {
    let generation = w["metadata"]["generation"].as_u64().unwrap_or(1);
    let observed = w["status"]["observedGeneration"].as_u64().unwrap_or(0);
    if observed < generation {
        w["status"] = json!({ "phase": "Ready", "observedGeneration": generation });
        return format!("observedGeneration={generation}");
    }
    let what = if rng.chance(0.5) {
        let color = COLORS[rng.index(COLORS.len())];
        w["spec"]["color"] = json!(color);
        format!("color={color}")
    } else {
        let size = 1 + rng.below(10);
        w["spec"]["size"] = json!(size);
        format!("size={size}")
    };
    w["metadata"]["generation"] = json!(generation + 1);
    w["status"]["phase"] = json!("Progressing");
    what
}

#[cfg(test)]
mod tests {
    use super::super::tests::assert_common;
    use super::*;
    use watchd::registry::crd::parse_crd;

    #[test]
    fn crds_are_what_watchd_serves() {
        let mut rng = Rng::new(1);
        let widgets = parse_crd(&super::super::encode(&widget_crd(&mut rng))).expect("CRD");
        assert_eq!(widgets.etcd_dir, WIDGETS);
        assert_eq!(widgets.storage_version, "demo.watchd.dev/v1");
        assert!(widgets.namespaced);
        assert_eq!(widgets.printer_columns.len(), 5);
        assert_eq!(widgets.fields.len(), 1, "spec.color is selectable");
        let classes = parse_crd(&super::super::encode(&widget_class_crd(&mut rng))).expect("CRD");
        assert_eq!(classes.etcd_dir, WIDGET_CLASSES);
        assert!(!classes.namespaced);
    }

    #[test]
    fn widgets_and_classes() {
        let mut rng = Rng::new(2);
        let class = widget_class("standard", &mut rng);
        assert_common(&class, "WidgetClass", "standard", None);
        assert_eq!(class["spec"]["default"], true);
        assert!(is_custom_resource(&class));
        let mut w = widget("demo-1", "web", &mut rng);
        assert_common(&w, "Widget", "web-widget", Some("demo-1"));
        assert!(is_custom_resource(&w));
        assert!(!is_custom_resource(&widget_crd(&mut rng)));
        assert!(CLASSES.contains(&w["spec"]["className"].as_str().unwrap_or_default()));
        let spec_change = change_widget(&mut w, &mut rng);
        assert!(spec_change.starts_with("color=") || spec_change.starts_with("size="));
        assert_eq!(w["metadata"]["generation"], 2);
        assert_eq!(w["status"]["phase"], "Progressing");
        assert_eq!(change_widget(&mut w, &mut rng), "observedGeneration=2");
        assert_eq!(
            w["status"],
            json!({ "phase": "Ready", "observedGeneration": 2 })
        );
    }
}
