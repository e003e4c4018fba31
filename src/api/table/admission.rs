//! admissionregistration.k8s.io: Mutating/ValidatingWebhookConfigurations, and
//! Validating/MutatingAdmissionPolicies with their bindings.

use serde_json::Value;

use super::format::label_selector_debug;
use super::{
    age_cell, age_column, column, list_at, name_cell, name_column, obj_at, str_at, string_cell,
    BuiltinPrinter, Column,
};

const GROUP: &str = "admissionregistration.k8s.io";

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(
        GROUP,
        "mutatingwebhookconfigurations",
        webhook_columns,
        webhook_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "validatingwebhookconfigurations",
        webhook_columns,
        webhook_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "validatingadmissionpolicies",
        validating_policy_columns,
        validating_policy_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "validatingadmissionpolicybindings",
        binding_columns,
        binding_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "mutatingadmissionpolicies",
        mutating_policy_columns,
        mutating_policy_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "mutatingadmissionpolicybindings",
        binding_columns,
        binding_cells,
    ),
];

const DESC_PARAM_KIND: &str = "Kind of the resource that holds the parameters of the policy.";

/// Webhook configuration columns (mutating and validating alike).
fn webhook_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Webhooks",
            "integer",
            "",
            0,
            "Number of webhooks in the configuration.",
        ),
        age_column(),
    ]
}

/// A webhook configuration row: how many webhooks it registers.
fn webhook_cells(config: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(config),
        Value::from(list_at(config, &["webhooks"]).len()),
        age_cell(config, now_unix),
    ]
}

/// Policy columns: the name, a count column, the param kind, the age.
fn policy_columns(count: &str, count_description: &str) -> Vec<Column> {
    vec![
        name_column(),
        column(count, "integer", "", 0, count_description),
        column("ParamKind", "string", "", 0, DESC_PARAM_KIND),
        age_column(),
    ]
}

fn validating_policy_columns() -> Vec<Column> {
    policy_columns("Validations", "Number of validation rules in the policy.")
}

fn mutating_policy_columns() -> Vec<Column> {
    policy_columns("Mutations", "Number of mutations in the policy.")
}

/// A policy row counting `spec.<rules>`; the param kind as `apiVersion/kind`, `<unset>`
/// without one.
fn policy_cells(policy: &Value, rules: &str, now_unix: i64) -> Vec<Value> {
    let param_kind = match obj_at(policy, &["spec", "paramKind"]) {
        Some(k) => format!("{}/{}", str_at(k, &["apiVersion"]), str_at(k, &["kind"])),
        None => "<unset>".into(),
    };
    vec![
        name_cell(policy),
        Value::from(list_at(policy, &["spec", rules]).len()),
        string_cell(param_kind),
        age_cell(policy, now_unix),
    ]
}

fn validating_policy_cells(policy: &Value, now_unix: i64) -> Vec<Value> {
    policy_cells(policy, "validations", now_unix)
}

fn mutating_policy_cells(policy: &Value, now_unix: i64) -> Vec<Value> {
    policy_cells(policy, "mutations", now_unix)
}

/// Policy binding columns (validating and mutating alike).
fn binding_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("PolicyName", "string", "", 0, "Policy the binding applies."),
        column(
            "ParamRef",
            "string",
            "",
            0,
            "Resource that holds the parameters for the binding.",
        ),
        age_column(),
    ]
}

/// A policy binding row. The param reference prints as `namespace/name` (`*/name` without
/// a namespace); a reference by selector prints the selector's protobuf debug form, as
/// upstream does; `<unset>` without a reference, or with neither name nor selector.
fn binding_cells(binding: &Value, now_unix: i64) -> Vec<Value> {
    let param = match obj_at(binding, &["spec", "paramRef"]) {
        None => "<unset>".to_owned(),
        Some(p) => match (str_at(p, &["name"]), str_at(p, &["namespace"])) {
            ("", _) => obj_at(p, &["selector"]).map_or("<unset>".into(), label_selector_debug),
            (name, "") => format!("*/{name}"),
            (name, namespace) => format!("{namespace}/{name}"),
        },
    };
    vec![
        name_cell(binding),
        string_cell(str_at(binding, &["spec", "policyName"])),
        string_cell(param),
        age_cell(binding, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::{DESC_PARAM_KIND, GROUP};

    #[test]
    fn webhook_configurations() {
        for resource in [
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
        ] {
            assert_columns(
                GROUP,
                resource,
                &[
                    ("Name", "string", "name", 0, NAME),
                    (
                        "Webhooks",
                        "integer",
                        "",
                        0,
                        "Number of webhooks in the configuration.",
                    ),
                    ("Age", "string", "", 0, AGE),
                ],
            );
            let config = json!({
                "metadata": {"name": "cert-manager-webhook", "creationTimestamp": ts(-86400)},
                "webhooks": [{"name": "webhook.cert-manager.io"}, {"name": "second.example.com"}]
            });
            assert_eq!(
                row(GROUP, resource, &config),
                [json!("cert-manager-webhook"), json!(2), json!("24h")]
            );
            assert_eq!(
                row(GROUP, resource, &json!({})),
                [json!(""), json!(0), json!("<unknown>")]
            );
        }
    }

    #[test]
    fn admission_policies() {
        assert_columns(
            GROUP,
            "validatingadmissionpolicies",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Validations",
                    "integer",
                    "",
                    0,
                    "Number of validation rules in the policy.",
                ),
                ("ParamKind", "string", "", 0, DESC_PARAM_KIND),
                ("Age", "string", "", 0, AGE),
            ],
        );
        assert_columns(
            GROUP,
            "mutatingadmissionpolicies",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Mutations",
                    "integer",
                    "",
                    0,
                    "Number of mutations in the policy.",
                ),
                ("ParamKind", "string", "", 0, DESC_PARAM_KIND),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let policy = json!({
            "metadata": {"name": "replica-limit", "creationTimestamp": ts(-400)},
            "spec": {"paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
                     "validations": [{"expression": "object.spec.replicas <= params.maxReplicas"}],
                     "mutations": [{"patchType": "ApplyConfiguration"}, {"patchType": "JSONPatch"}]}
        });
        assert_eq!(
            row(GROUP, "validatingadmissionpolicies", &policy),
            [
                json!("replica-limit"),
                json!(1),
                json!("rules.example.com/v1/ReplicaLimit"),
                json!("6m40s")
            ]
        );
        assert_eq!(
            row(GROUP, "mutatingadmissionpolicies", &policy)[1],
            json!(2)
        );
        assert_eq!(
            row(GROUP, "validatingadmissionpolicies", &json!({})),
            [json!(""), json!(0), json!("<unset>"), json!("<unknown>")]
        );
    }

    #[test]
    fn admission_policy_bindings() {
        for resource in [
            "validatingadmissionpolicybindings",
            "mutatingadmissionpolicybindings",
        ] {
            assert_columns(
                GROUP,
                resource,
                &[
                    ("Name", "string", "name", 0, NAME),
                    ("PolicyName", "string", "", 0, "Policy the binding applies."),
                    (
                        "ParamRef",
                        "string",
                        "",
                        0,
                        "Resource that holds the parameters for the binding.",
                    ),
                    ("Age", "string", "", 0, AGE),
                ],
            );
        }
        let binding = |param: serde_json::Value| {
            let b = json!({"metadata": {"name": "limit-prod", "creationTimestamp": ts(-50)},
                           "spec": {"policyName": "replica-limit", "paramRef": param,
                                    "validationActions": ["Deny"]}});
            row(GROUP, "validatingadmissionpolicybindings", &b)
        };
        assert_eq!(
            binding(json!({"name": "prod-limit", "namespace": "rules"})),
            [
                json!("limit-prod"),
                json!("replica-limit"),
                json!("rules/prod-limit"),
                json!("50s")
            ]
        );
        assert_eq!(binding(json!({"name": "global"}))[2], json!("*/global"));
        assert_eq!(
            binding(json!({"selector": {"matchLabels": {"env": "prod"}},
                           "parameterNotFoundAction": "Deny"}))[2],
            json!(
                "&LabelSelector{MatchLabels:map[string]string{env: prod,},\
                   MatchExpressions:[]LabelSelectorRequirement{},}"
            )
        );
        assert_eq!(binding(json!({}))[2], json!("<unset>"));
        assert_eq!(
            row(GROUP, "mutatingadmissionpolicybindings", &json!({})),
            [json!(""), json!(""), json!("<unset>"), json!("<unknown>")]
        );
    }
}
