//! Identity and access: core v1 ServiceAccounts, rbac.authorization.k8s.io RoleBindings and
//! ClusterRoleBindings, certificates.k8s.io CertificateSigningRequests.
//!
//! Roles and ClusterRoles have no printer upstream: they get the default Name / Created At.

use serde_json::Value;

use super::{
    age_cell, age_column, at, column, human_duration, int_of, list_at, name_cell, name_column,
    str_at, string_cell, BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(
        "",
        "serviceaccounts",
        service_account_columns,
        service_account_cells,
    ),
    BuiltinPrinter::new(
        "rbac.authorization.k8s.io",
        "rolebindings",
        role_binding_columns,
        binding_cells,
    ),
    BuiltinPrinter::new(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        cluster_role_binding_columns,
        binding_cells,
    ),
    BuiltinPrinter::new(
        "certificates.k8s.io",
        "certificatesigningrequests",
        csr_columns,
        csr_cells,
    ),
];

/// ServiceAccount columns.
fn service_account_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Secrets",
            "string",
            "",
            0,
            "Number of secrets the service account lists.",
        ),
        age_column(),
    ]
}

/// A service account row: how many secrets it lists.
fn service_account_cells(sa: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(sa),
        Value::from(list_at(sa, &["secrets"]).len()),
        age_cell(sa, now_unix),
    ]
}

/// Binding columns; `role_ref` describes the Role column.
fn binding_columns(role_ref: &str) -> Vec<Column> {
    vec![
        name_column(),
        column("Role", "string", "", 0, role_ref),
        age_column(),
        column("Users", "string", "", 1, DESC_USERS),
        column("Groups", "string", "", 1, DESC_GROUPS),
        column("ServiceAccounts", "string", "", 1, DESC_SERVICE_ACCOUNTS),
    ]
}

/// Descriptions of the subject columns both binding kinds share.
const DESC_USERS: &str = "Users the binding grants the role to.";
const DESC_GROUPS: &str = "Groups the binding grants the role to.";
const DESC_SERVICE_ACCOUNTS: &str = "Service accounts the binding grants the role to.";

fn role_binding_columns() -> Vec<Column> {
    binding_columns("Role or cluster role the binding grants.")
}

fn cluster_role_binding_columns() -> Vec<Column> {
    binding_columns("Cluster role the binding grants.")
}

/// A role binding or cluster role binding row: `Kind/name` of the role, then the subjects
/// by kind (`rbac.SubjectsStrings`; service accounts as `namespace/name`), ", "-joined.
/// Subjects of other kinds are not shown.
fn binding_cells(b: &Value, now_unix: i64) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        str_at(b, &["roleRef", "kind"]),
        str_at(b, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for s in list_at(b, &["subjects"]) {
        let name = str_at(s, &["name"]);
        match str_at(s, &["kind"]) {
            "User" => users.push(name.to_owned()),
            "Group" => groups.push(name.to_owned()),
            "ServiceAccount" => {
                service_accounts.push(format!("{}/{name}", str_at(s, &["namespace"])))
            }
            _ => {}
        }
    }
    vec![
        name_cell(b),
        string_cell(role),
        age_cell(b, now_unix),
        string_cell(users.join(", ")),
        string_cell(groups.join(", ")),
        string_cell(service_accounts.join(", ")),
    ]
}

/// CertificateSigningRequest columns (Age comes second here).
fn csr_columns() -> Vec<Column> {
    vec![
        name_column(),
        age_column(),
        column(
            "SignerName",
            "string",
            "",
            0,
            "Signer asked to issue the certificate.",
        ),
        column("Requestor", "string", "", 0, "User who made the request."),
        column(
            "RequestedDuration",
            "string",
            "",
            0,
            "How long the requested certificate should be valid.",
        ),
        column("Condition", "string", "", 0, "State of the request."),
    ]
}

/// A certificate signing request row.
fn csr_cells(csr: &Value, now_unix: i64) -> Vec<Value> {
    let signer = match str_at(csr, &["spec", "signerName"]) {
        "" => "<none>",
        s => s,
    };
    let duration = match at(csr, &["spec", "expirationSeconds"]) {
        Some(s) if !s.is_null() => human_duration(int_of(s)),
        _ => "<none>".into(),
    };
    vec![
        name_cell(csr),
        age_cell(csr, now_unix),
        string_cell(signer),
        string_cell(str_at(csr, &["spec", "username"])),
        string_cell(duration),
        string_cell(csr_condition(csr)),
    ]
}

/// `Denied`, else `Approved`, else `Pending`; then `,Failed` and `,Issued` when they apply.
fn csr_condition(csr: &Value) -> String {
    let has = |type_: &str| {
        list_at(csr, &["status", "conditions"])
            .iter()
            .any(|c| str_at(c, &["type"]) == type_)
    };
    let mut status = if has("Denied") {
        "Denied".to_owned()
    } else if has("Approved") {
        "Approved".to_owned()
    } else {
        "Pending".to_owned()
    };
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !str_at(csr, &["status", "certificate"]).is_empty() {
        status.push_str(",Issued");
    }
    status
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::{DESC_GROUPS, DESC_SERVICE_ACCOUNTS, DESC_USERS};

    const RBAC: &str = "rbac.authorization.k8s.io";
    const CERTS: &str = "certificates.k8s.io";

    #[test]
    fn service_accounts() {
        assert_columns(
            "",
            "serviceaccounts",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Secrets",
                    "string",
                    "",
                    0,
                    "Number of secrets the service account lists.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let sa = json!({"metadata": {"name": "builder", "creationTimestamp": ts(-45)},
                        "secrets": [{"name": "builder-token"}, {"name": "registry"}]});
        assert_eq!(
            row("", "serviceaccounts", &sa),
            [json!("builder"), json!(2), json!("45s")]
        );
        assert_eq!(
            row("", "serviceaccounts", &json!({})),
            [json!(""), json!(0), json!("<unknown>")]
        );
    }

    #[test]
    fn binding_columns_match_upstream() {
        for (resource, role_ref) in [
            ("rolebindings", "Role or cluster role the binding grants."),
            ("clusterrolebindings", "Cluster role the binding grants."),
        ] {
            assert_columns(
                RBAC,
                resource,
                &[
                    ("Name", "string", "name", 0, NAME),
                    ("Role", "string", "", 0, role_ref),
                    ("Age", "string", "", 0, AGE),
                    ("Users", "string", "", 1, DESC_USERS),
                    ("Groups", "string", "", 1, DESC_GROUPS),
                    ("ServiceAccounts", "string", "", 1, DESC_SERVICE_ACCOUNTS),
                ],
            );
        }
    }

    #[test]
    fn bindings() {
        let rb = json!({
            "metadata": {"name": "ops-admin", "creationTimestamp": ts(-86400)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "admin"},
            "subjects": [
                {"kind": "User", "name": "alice"},
                {"kind": "Group", "name": "ops"},
                {"kind": "ServiceAccount", "namespace": "ci", "name": "deployer"},
                {"kind": "User", "name": "bob"},
                {"kind": "Robot", "name": "r2"}
            ]
        });
        for resource in ["rolebindings", "clusterrolebindings"] {
            assert_eq!(
                row(RBAC, resource, &rb),
                [
                    json!("ops-admin"),
                    json!("ClusterRole/admin"),
                    json!("24h"),
                    json!("alice, bob"),
                    json!("ops"),
                    json!("ci/deployer")
                ]
            );
        }
        assert_eq!(
            row(RBAC, "rolebindings", &json!({})),
            [
                json!(""),
                json!("/"),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("")
            ]
        );
    }

    #[test]
    fn roles_have_no_printer() {
        for resource in ["roles", "clusterroles"] {
            let cols = super::super::columns(&super::super::test_support::info(RBAC, resource, ""));
            assert_eq!(
                super::super::test_support::names(&cols),
                ["Name", "Created At"]
            );
        }
    }

    #[test]
    fn csr_columns_match_upstream() {
        assert_columns(
            CERTS,
            "certificatesigningrequests",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Age", "string", "", 0, AGE),
                (
                    "SignerName",
                    "string",
                    "",
                    0,
                    "Signer asked to issue the certificate.",
                ),
                ("Requestor", "string", "", 0, "User who made the request."),
                (
                    "RequestedDuration",
                    "string",
                    "",
                    0,
                    "How long the requested certificate should be valid.",
                ),
                ("Condition", "string", "", 0, "State of the request."),
            ],
        );
    }

    #[test]
    fn certificate_signing_requests() {
        let csr = json!({
            "metadata": {"name": "csr-8x2lp", "creationTimestamp": ts(-300)},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                     "username": "system:bootstrap:abcdef", "expirationSeconds": 86400,
                     "request": "LS0t"},
            "status": {"conditions": [{"type": "Approved", "status": "True"}],
                       "certificate": "LS0tLS1CRUdJTg=="}
        });
        assert_eq!(
            row(CERTS, "certificatesigningrequests", &csr),
            [
                json!("csr-8x2lp"),
                json!("5m"),
                json!("kubernetes.io/kube-apiserver-client-kubelet"),
                json!("system:bootstrap:abcdef"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
        assert_eq!(
            row(CERTS, "certificatesigningrequests", &json!({})),
            [
                json!(""),
                json!("<unknown>"),
                json!("<none>"),
                json!(""),
                json!("<none>"),
                json!("Pending")
            ]
        );
        let denied = json!({"status": {"conditions": [{"type": "Approved"}, {"type": "Failed"},
                                                      {"type": "Denied"}]}});
        assert_eq!(
            row(CERTS, "certificatesigningrequests", &denied)[5],
            json!("Denied,Failed")
        );
    }
}
