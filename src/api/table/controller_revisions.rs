//! apps/v1 ControllerRevisions: which controller owns each revision, and its number.

use serde_json::Value;

use super::{
    age_cell, age_column, at, column, int_at, list_at, name_cell, name_column, str_at, string_cell,
    BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[BuiltinPrinter::new(
    "apps",
    "controllerrevisions",
    controller_revision_columns,
    controller_revision_cells,
)];

/// ControllerRevision columns.
fn controller_revision_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Controller",
            "string",
            "",
            0,
            "Object the revision belongs to.",
        ),
        column("Revision", "string", "", 0, "Number of the revision."),
        age_column(),
    ]
}

/// A controller revision row: the controlling owner as `kind.group/name` (lower-cased
/// kind and group), `<none>` without one.
fn controller_revision_cells(cr: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(cr),
        string_cell(controller_name(cr)),
        Value::from(int_at(cr, &["revision"])),
        age_cell(cr, now_unix),
    ]
}

/// `formatResourceName` of the first owner reference with `controller: true`. (An
/// apiVersion with two slashes makes kube-apiserver fail the whole request; here the group
/// is then read up to the first slash.)
fn controller_name(obj: &Value) -> String {
    let Some(owner) = list_at(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| at(r, &["controller"]).and_then(Value::as_bool) == Some(true))
    else {
        return "<none>".into();
    };
    let api_version = str_at(owner, &["apiVersion"]);
    let group = match api_version.split_once('/') {
        Some((group, _)) if api_version != "/" => group,
        _ => "",
    };
    let kind = str_at(owner, &["kind"]);
    let name = str_at(owner, &["name"]);
    match (group, kind) {
        ("", "") => name.to_owned(),
        ("", kind) => format!("{}/{name}", kind.to_lowercase()),
        (group, kind) => format!("{}/{name}", format!("{kind}.{group}").to_lowercase()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    #[test]
    fn controller_revisions() {
        assert_columns(
            "apps",
            "controllerrevisions",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Controller",
                    "string",
                    "",
                    0,
                    "Object the revision belongs to.",
                ),
                ("Revision", "string", "", 0, "Number of the revision."),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let cr = json!({
            "metadata": {"name": "etcd-5d8f7", "creationTimestamp": ts(-120),
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "Pod", "name": "other"},
                             {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "etcd",
                              "controller": true}]},
            "revision": 7
        });
        assert_eq!(
            row("apps", "controllerrevisions", &cr),
            [
                json!("etcd-5d8f7"),
                json!("statefulset.apps/etcd"),
                json!(7),
                json!("2m")
            ]
        );
        assert_eq!(
            row("apps", "controllerrevisions", &json!({})),
            [json!(""), json!("<none>"), json!(0), json!("<unknown>")]
        );
        let core_owner = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "controller": true}]}});
        assert_eq!(
            row("apps", "controllerrevisions", &core_owner)[1],
            json!("replicationcontroller/rc")
        );
        let no_kind = json!({"metadata": {"ownerReferences": [
            {"name": "x", "controller": true}]}});
        assert_eq!(row("apps", "controllerrevisions", &no_kind)[1], json!("x"));
    }
}
