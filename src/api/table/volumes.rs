//! Core v1 PersistentVolumes and PersistentVolumeClaims.
//!
//! API defaults the printers see: a volume's phase is Pending and its reclaim policy
//! Retain when unset; a claim's phase is Pending; both volume modes are Filesystem. The
//! storage class is read as kube-apiserver's helpers read it: the beta annotation
//! `volume.beta.kubernetes.io/storage-class` wins over `spec.storageClassName`.

use serde_json::Value;

use super::format::{access_modes, quantity};
use super::{
    age_cell, age_column, at, column, deleting, list_at, name_cell, name_column, obj_at, str_at,
    str_or, string_cell, BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("", "persistentvolumes", pv_columns, pv_cells),
    BuiltinPrinter::new("", "persistentvolumeclaims", pvc_columns, pvc_cells),
];

const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// PersistentVolume columns.
fn pv_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Capacity",
            "string",
            "",
            0,
            "Storage capacity of the volume.",
        ),
        column(
            "Access Modes",
            "string",
            "",
            0,
            "Ways the volume can be mounted.",
        ),
        column(
            "Reclaim Policy",
            "string",
            "",
            0,
            "What happens to the volume once its claim is released.",
        ),
        column("Status", "string", "", 0, "Phase of the volume."),
        column("Claim", "string", "", 0, "Claim the volume is bound to."),
        column(
            "StorageClass",
            "string",
            "",
            0,
            "Storage class of the volume.",
        ),
        column(
            "VolumeAttributesClass",
            "string",
            "",
            0,
            "Volume attributes class of the volume.",
        ),
        column(
            "Reason",
            "string",
            "",
            0,
            "Why the volume is in its phase, if known.",
        ),
        age_column(),
        column(
            "VolumeMode",
            "string",
            "",
            1,
            "Whether the volume holds a filesystem or is a raw block device.",
        ),
    ]
}

/// A persistent volume row.
fn pv_cells(pv: &Value, now_unix: i64) -> Vec<Value> {
    let claim = match obj_at(pv, &["spec", "claimRef"]) {
        Some(c) => format!("{}/{}", str_at(c, &["namespace"]), str_at(c, &["name"])),
        None => String::new(),
    };
    let class = match annotation(pv, BETA_STORAGE_CLASS) {
        Some(class) => class,
        None => str_at(pv, &["spec", "storageClassName"]),
    };
    vec![
        name_cell(pv),
        string_cell(quantity(at(pv, &["spec", "capacity", "storage"]))),
        string_cell(access_modes(list_at(pv, &["spec", "accessModes"]))),
        string_cell(str_or(
            pv,
            &["spec", "persistentVolumeReclaimPolicy"],
            "Retain",
        )),
        string_cell(phase(pv, "Pending")),
        string_cell(claim),
        string_cell(class),
        string_cell(attributes_class(pv)),
        string_cell(str_at(pv, &["status", "reason"])),
        age_cell(pv, now_unix),
        string_cell(str_or(pv, &["spec", "volumeMode"], "Filesystem")),
    ]
}

/// PersistentVolumeClaim columns.
fn pvc_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Status", "string", "", 0, "Phase of the claim."),
        column("Volume", "string", "", 0, "Volume the claim is bound to."),
        column(
            "Capacity",
            "string",
            "",
            0,
            "Storage capacity of the bound volume.",
        ),
        column(
            "Access Modes",
            "string",
            "",
            0,
            "Ways the bound volume can be mounted.",
        ),
        column(
            "StorageClass",
            "string",
            "",
            0,
            "Storage class of the claim.",
        ),
        column(
            "VolumeAttributesClass",
            "string",
            "",
            0,
            "Volume attributes class of the claim.",
        ),
        age_column(),
        column(
            "VolumeMode",
            "string",
            "",
            1,
            "Whether the claim wants a filesystem or a raw block device.",
        ),
    ]
}

/// A persistent volume claim row: capacity and access modes are the bound volume's, so
/// they stay empty until `spec.volumeName` is set.
fn pvc_cells(pvc: &Value, now_unix: i64) -> Vec<Value> {
    let volume = str_at(pvc, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity(at(pvc, &["status", "capacity", "storage"])),
            access_modes(list_at(pvc, &["status", "accessModes"])),
        )
    };
    let class = match annotation(pvc, BETA_STORAGE_CLASS) {
        Some(class) => class,
        None => str_at(pvc, &["spec", "storageClassName"]),
    };
    vec![
        name_cell(pvc),
        string_cell(phase(pvc, "Pending")),
        string_cell(volume),
        string_cell(capacity),
        string_cell(modes),
        string_cell(class),
        string_cell(attributes_class(pvc)),
        age_cell(pvc, now_unix),
        string_cell(str_or(pvc, &["spec", "volumeMode"], "Filesystem")),
    ]
}

/// The annotation `key`, if present (even when empty: presence is what counts).
fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    at(obj, &["metadata", "annotations", key]).map(|v| v.as_str().unwrap_or(""))
}

/// status.phase (`default` when unset), or `Terminating` while the object is being deleted.
fn phase<'a>(obj: &'a Value, default: &'a str) -> &'a str {
    if deleting(obj) {
        "Terminating"
    } else {
        str_or(obj, &["status", "phase"], default)
    }
}

/// spec.volumeAttributesClassName, `<unset>` when the pointer is nil.
fn attributes_class(obj: &Value) -> String {
    match at(obj, &["spec", "volumeAttributesClassName"]) {
        Some(Value::String(s)) => s.clone(),
        _ => "<unset>".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    #[test]
    fn pv_columns_match_upstream() {
        assert_columns(
            "",
            "persistentvolumes",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Capacity",
                    "string",
                    "",
                    0,
                    "Storage capacity of the volume.",
                ),
                (
                    "Access Modes",
                    "string",
                    "",
                    0,
                    "Ways the volume can be mounted.",
                ),
                (
                    "Reclaim Policy",
                    "string",
                    "",
                    0,
                    "What happens to the volume once its claim is released.",
                ),
                ("Status", "string", "", 0, "Phase of the volume."),
                ("Claim", "string", "", 0, "Claim the volume is bound to."),
                (
                    "StorageClass",
                    "string",
                    "",
                    0,
                    "Storage class of the volume.",
                ),
                (
                    "VolumeAttributesClass",
                    "string",
                    "",
                    0,
                    "Volume attributes class of the volume.",
                ),
                (
                    "Reason",
                    "string",
                    "",
                    0,
                    "Why the volume is in its phase, if known.",
                ),
                ("Age", "string", "", 0, AGE),
                (
                    "VolumeMode",
                    "string",
                    "",
                    1,
                    "Whether the volume holds a filesystem or is a raw block device.",
                ),
            ],
        );
    }

    #[test]
    fn bound_and_bare_volumes() {
        let pv = json!({
            "metadata": {"name": "pvc-1f2e", "creationTimestamp": ts(-2 * 86400)},
            "spec": {"capacity": {"storage": "10Gi"},
                     "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete",
                     "claimRef": {"namespace": "db", "name": "data-pg-0"},
                     "storageClassName": "fast", "volumeAttributesClassName": "gold",
                     "volumeMode": "Block"},
            "status": {"phase": "Bound"}
        });
        assert_eq!(
            row("", "persistentvolumes", &pv),
            [
                json!("pvc-1f2e"),
                json!("10Gi"),
                json!("RWO,RWX"),
                json!("Delete"),
                json!("Bound"),
                json!("db/data-pg-0"),
                json!("fast"),
                json!("gold"),
                json!(""),
                json!("2d"),
                json!("Block")
            ]
        );
        assert_eq!(
            row("", "persistentvolumes", &json!({})),
            [
                json!(""),
                json!("0"),
                json!(""),
                json!("Retain"),
                json!("Pending"),
                json!(""),
                json!(""),
                json!("<unset>"),
                json!(""),
                json!("<unknown>"),
                json!("Filesystem")
            ]
        );
        let odd = json!({
            "metadata": {"deletionTimestamp": ts(-1),
                         "annotations": {"volume.beta.kubernetes.io/storage-class": "legacy"}},
            "spec": {"storageClassName": "fast"},
            "status": {"phase": "Failed", "reason": "RecyclerFailed"}
        });
        let r = row("", "persistentvolumes", &odd);
        assert_eq!(r[4], json!("Terminating"));
        assert_eq!(r[6], json!("legacy"));
        assert_eq!(r[8], json!("RecyclerFailed"));
    }

    #[test]
    fn pvc_columns_match_upstream() {
        assert_columns(
            "",
            "persistentvolumeclaims",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Status", "string", "", 0, "Phase of the claim."),
                ("Volume", "string", "", 0, "Volume the claim is bound to."),
                (
                    "Capacity",
                    "string",
                    "",
                    0,
                    "Storage capacity of the bound volume.",
                ),
                (
                    "Access Modes",
                    "string",
                    "",
                    0,
                    "Ways the bound volume can be mounted.",
                ),
                (
                    "StorageClass",
                    "string",
                    "",
                    0,
                    "Storage class of the claim.",
                ),
                (
                    "VolumeAttributesClass",
                    "string",
                    "",
                    0,
                    "Volume attributes class of the claim.",
                ),
                ("Age", "string", "", 0, AGE),
                (
                    "VolumeMode",
                    "string",
                    "",
                    1,
                    "Whether the claim wants a filesystem or a raw block device.",
                ),
            ],
        );
    }

    #[test]
    fn bound_and_pending_claims() {
        let pvc = json!({
            "metadata": {"name": "data-pg-0", "creationTimestamp": ts(-90)},
            "spec": {"volumeName": "pvc-1f2e", "storageClassName": "fast",
                     "resources": {"requests": {"storage": "5Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"},
                       "accessModes": ["ReadWriteOnce"]}
        });
        assert_eq!(
            row("", "persistentvolumeclaims", &pvc),
            [
                json!("data-pg-0"),
                json!("Bound"),
                json!("pvc-1f2e"),
                json!("10Gi"),
                json!("RWO"),
                json!("fast"),
                json!("<unset>"),
                json!("90s"),
                json!("Filesystem")
            ]
        );
        // Unbound: the requested size is not shown.
        let pending = json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}},
                             "status": {"capacity": {"storage": "5Gi"}}});
        assert_eq!(
            row("", "persistentvolumeclaims", &pending),
            [
                json!(""),
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!(""),
                json!("<unset>"),
                json!("<unknown>"),
                json!("Filesystem")
            ]
        );
        let bound_without_status = json!({"spec": {"volumeName": "v"}});
        assert_eq!(
            row("", "persistentvolumeclaims", &bound_without_status)[3],
            json!("0")
        );
    }
}
