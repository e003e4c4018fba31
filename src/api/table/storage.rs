//! storage.k8s.io/v1 classes and attachments: StorageClasses, VolumeAttributesClasses and
//! VolumeAttachments (the CSI driver objects are in `csi`).
//!
//! A storage class without a reclaim policy or binding mode prints the API's defaults
//! (Delete, Immediate).

use serde_json::Value;

use super::{
    age_cell, age_column, bool_at, column, name_column, str_at, str_or, string_cell,
    BuiltinPrinter, Column,
};

pub(super) const GROUP: &str = "storage.k8s.io";

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(
        GROUP,
        "storageclasses",
        storage_class_columns,
        storage_class_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "volumeattachments",
        attachment_columns,
        attachment_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "volumeattributesclasses",
        attributes_class_columns,
        attributes_class_cells,
    ),
];

/// The annotations that make a class the default, each holding "true".
const DEFAULT_STORAGE_CLASS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];
const DEFAULT_ATTRIBUTES_CLASS: [&str; 1] =
    ["volumeattributesclass.alpha.kubernetes.io/is-default-class"];

/// metadata.name, with " (default)" when one of `annotations` is "true".
fn class_name(obj: &Value, annotations: &[&str]) -> Value {
    let name = str_at(obj, &["metadata", "name"]);
    let is_default = annotations
        .iter()
        .any(|a| str_at(obj, &["metadata", "annotations", a]) == "true");
    if is_default {
        string_cell(format!("{name} (default)"))
    } else {
        string_cell(name)
    }
}

/// StorageClass columns.
fn storage_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Provisioner",
            "string",
            "",
            0,
            "Provisioner that creates volumes of the class.",
        ),
        column(
            "ReclaimPolicy",
            "string",
            "",
            0,
            "What happens to volumes of the class once their claim is released.",
        ),
        column(
            "VolumeBindingMode",
            "string",
            "",
            0,
            "When claims of the class are bound to a volume.",
        ),
        column(
            "AllowVolumeExpansion",
            "string",
            "",
            0,
            "Whether volumes of the class can grow.",
        ),
        age_column(),
    ]
}

/// A storage class row; AllowVolumeExpansion is a JSON boolean.
fn storage_class_cells(sc: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        class_name(sc, &DEFAULT_STORAGE_CLASS),
        string_cell(str_at(sc, &["provisioner"])),
        string_cell(str_or(sc, &["reclaimPolicy"], "Delete")),
        string_cell(str_or(sc, &["volumeBindingMode"], "Immediate")),
        Value::Bool(bool_at(sc, &["allowVolumeExpansion"])),
        age_cell(sc, now_unix),
    ]
}

/// VolumeAttachment columns; upstream gives Attacher the `name` format too.
fn attachment_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Attacher",
            "string",
            "name",
            0,
            "Driver that attaches the volume.",
        ),
        column("PV", "string", "", 0, "Persistent volume to attach."),
        column("Node", "string", "", 0, "Node to attach the volume to."),
        column(
            "Attached",
            "boolean",
            "",
            0,
            "Whether the volume is attached.",
        ),
        age_column(),
    ]
}

/// A volume attachment row (an inline volume spec has no PV name: "").
fn attachment_cells(va: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        string_cell(str_at(va, &["metadata", "name"])),
        string_cell(str_at(va, &["spec", "attacher"])),
        string_cell(str_at(va, &["spec", "source", "persistentVolumeName"])),
        string_cell(str_at(va, &["spec", "nodeName"])),
        Value::Bool(bool_at(va, &["status", "attached"])),
        age_cell(va, now_unix),
    ]
}

/// VolumeAttributesClass columns.
fn attributes_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "DriverName",
            "string",
            "",
            0,
            "CSI driver the class is for.",
        ),
        age_column(),
    ]
}

/// A volume attributes class row.
fn attributes_class_cells(vac: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        class_name(vac, &DEFAULT_ATTRIBUTES_CLASS),
        string_cell(str_at(vac, &["driverName"])),
        age_cell(vac, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::GROUP;

    #[test]
    fn storage_classes() {
        assert_columns(
            GROUP,
            "storageclasses",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Provisioner",
                    "string",
                    "",
                    0,
                    "Provisioner that creates volumes of the class.",
                ),
                (
                    "ReclaimPolicy",
                    "string",
                    "",
                    0,
                    "What happens to volumes of the class once their claim is released.",
                ),
                (
                    "VolumeBindingMode",
                    "string",
                    "",
                    0,
                    "When claims of the class are bound to a volume.",
                ),
                (
                    "AllowVolumeExpansion",
                    "string",
                    "",
                    0,
                    "Whether volumes of the class can grow.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let sc = json!({
            "metadata": {"name": "standard", "creationTimestamp": ts(-86400 * 100),
                         "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Retain",
            "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true
        });
        assert_eq!(
            row(GROUP, "storageclasses", &sc),
            [
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Retain"),
                json!("WaitForFirstConsumer"),
                json!(true),
                json!("100d")
            ]
        );
        assert_eq!(
            row(GROUP, "storageclasses", &json!({})),
            [
                json!(""),
                json!(""),
                json!("Delete"),
                json!("Immediate"),
                json!(false),
                json!("<unknown>")
            ]
        );
        let beta = json!({"metadata": {"name": "old", "annotations": {
            "storageclass.beta.kubernetes.io/is-default-class": "true"}}});
        assert_eq!(
            row(GROUP, "storageclasses", &beta)[0],
            json!("old (default)")
        );
        let not_default = json!({"metadata": {"name": "x", "annotations": {
            "storageclass.kubernetes.io/is-default-class": "false"}}});
        assert_eq!(row(GROUP, "storageclasses", &not_default)[0], json!("x"));
    }

    #[test]
    fn volume_attachments() {
        assert_columns(
            GROUP,
            "volumeattachments",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Attacher",
                    "string",
                    "name",
                    0,
                    "Driver that attaches the volume.",
                ),
                ("PV", "string", "", 0, "Persistent volume to attach."),
                ("Node", "string", "", 0, "Node to attach the volume to."),
                (
                    "Attached",
                    "boolean",
                    "",
                    0,
                    "Whether the volume is attached.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let va = json!({
            "metadata": {"name": "csi-4f1c", "creationTimestamp": ts(-600)},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-a",
                     "source": {"persistentVolumeName": "pvc-1f2e"}},
            "status": {"attached": true}
        });
        assert_eq!(
            row(GROUP, "volumeattachments", &va),
            [
                json!("csi-4f1c"),
                json!("ebs.csi.aws.com"),
                json!("pvc-1f2e"),
                json!("node-a"),
                json!(true),
                json!("10m")
            ]
        );
        assert_eq!(
            row(GROUP, "volumeattachments", &json!({})),
            [
                json!(""),
                json!(""),
                json!(""),
                json!(""),
                json!(false),
                json!("<unknown>")
            ]
        );
    }

    #[test]
    fn volume_attributes_classes() {
        assert_columns(
            GROUP,
            "volumeattributesclasses",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "DriverName",
                    "string",
                    "",
                    0,
                    "CSI driver the class is for.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let vac = json!({
            "metadata": {"name": "gold", "creationTimestamp": ts(-120), "annotations": {
                "volumeattributesclass.alpha.kubernetes.io/is-default-class": "true"}},
            "driverName": "pd.csi.storage.gke.io", "parameters": {"iops": "3000"}
        });
        assert_eq!(
            row(GROUP, "volumeattributesclasses", &vac),
            [
                json!("gold (default)"),
                json!("pd.csi.storage.gke.io"),
                json!("2m")
            ]
        );
        assert_eq!(
            row(GROUP, "volumeattributesclasses", &json!({})),
            [json!(""), json!(""), json!("<unknown>")]
        );
    }
}
