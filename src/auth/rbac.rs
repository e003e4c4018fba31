//! RBAC as kube-apiserver's authorizer evaluates it, from the Roles, ClusterRoles,
//! RoleBindings and ClusterRoleBindings in the cache: ClusterRoleBindings first, then the
//! RoleBindings of the request's namespace; the first rule that allows ends the search.
//! Missing roles grant nothing and are named in the refusal's reason. ClusterRole
//! aggregation is not evaluated here: kube-controller-manager writes aggregated rules into
//! the stored ClusterRole, which is what is read.
//!
//! The authorizer reads [`index::RbacIndex`], kept up to date one changed object at a
//! time (`auth::cached`); `Policy`, the whole policy read at once (test builds only), is
//! the reference the index is tested against.

#[cfg(test)]
use std::collections::HashMap;

use serde::Deserialize;

use super::{Attributes, UserInfo, MASTERS};

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs, or `*`.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups, or `*`.
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource`, `*/subresource`, or `*`.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names; empty means all.
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// Non-resource paths; a trailing `*` matches a prefix.
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

/// The role a binding grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    #[serde(default)]
    pub kind: String,
    /// The role's name.
    #[serde(default)]
    pub name: String,
}

/// Who a binding grants to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    #[serde(default)]
    pub kind: String,
    /// The subject's API group (unused in matching, as upstream).
    #[serde(default)]
    pub api_group: String,
    /// The user, group or ServiceAccount name.
    #[serde(default)]
    pub name: String,
    /// A ServiceAccount's namespace.
    #[serde(default)]
    pub namespace: String,
}

/// A RoleBinding (with its namespace) or a ClusterRoleBinding (namespace empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    /// The binding's namespace; empty for a ClusterRoleBinding.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The role granted.
    pub role_ref: RoleRef,
    /// To whom.
    pub subjects: Vec<Subject>,
}

#[path = "rbac_index.rs"]
pub mod index;

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Deserialize)]
struct RoleObject {
    /// Required (an object without it does not read); only the reference reads it, the
    /// index keys roles by object key.
    #[cfg_attr(not(test), allow(dead_code))]
    metadata: Meta,
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingObject {
    metadata: Meta,
    role_ref: RoleRef,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

/// The whole policy, read from every object at once: the reference
/// [`index::RbacIndex`]'s decisions are tested against.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Policy {
    roles: HashMap<(String, String), Vec<PolicyRule>>,
    cluster_roles: HashMap<String, Vec<PolicyRule>>,
    role_bindings: HashMap<String, Vec<Binding>>,
    cluster_role_bindings: Vec<Binding>,
    /// Objects that could not be read (they grant nothing).
    pub skipped: usize,
}

/// An RBAC decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A rule allows the request; the reason names the binding.
    Allow {
        /// Which binding and role allowed it.
        reason: String,
    },
    /// No rule allows it; the reason names roles that were referenced but missing (empty
    /// when none).
    NoOpinion {
        /// Why, as kube-apiserver's RBAC authorizer words it.
        reason: String,
    },
}

/// A role a binding refers to that does not grant anything, as kube-apiserver's RBAC
/// authorizer names it in the refusal's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleMissing {
    /// No Role of that name in the binding's namespace.
    #[error("role.rbac.authorization.k8s.io \"{0}\" not found")]
    Role(String),
    /// No ClusterRole of that name.
    #[error("clusterrole.rbac.authorization.k8s.io \"{0}\" not found")]
    ClusterRole(String),
    /// The roleRef's kind is neither.
    #[error("unsupported role reference kind: {0:?}")]
    UnsupportedKind(String),
}

impl RoleRef {
    /// The error for this reference when its role is not there.
    fn missing(&self) -> RoleMissing {
        match self.kind.as_str() {
            "Role" => RoleMissing::Role(self.name.clone()),
            "ClusterRole" => RoleMissing::ClusterRole(self.name.clone()),
            other => RoleMissing::UnsupportedKind(other.to_string()),
        }
    }
}

/// Reads a binding's JSON: a ClusterRoleBinding (`cluster`, its namespace left empty) or
/// a RoleBinding. None when it does not read (it grants nothing).
fn read_binding(json: &[u8], cluster: bool) -> Option<Binding> {
    let b = serde_json::from_slice::<BindingObject>(json).ok()?;
    Some(Binding {
        namespace: if cluster {
            String::new()
        } else {
            b.metadata.namespace
        },
        name: b.metadata.name,
        role_ref: b.role_ref,
        subjects: b.subjects.unwrap_or_default(),
    })
}

/// Decides `attrs` over `bindings` in kube-apiserver's order (ClusterRoleBindings, then
/// the RoleBindings of the request's namespace; bindings that name none of the user's
/// subjects may be left out), `rules` giving the rules each binding's role grants.
fn evaluate<'a>(
    attrs: &Attributes,
    bindings: impl IntoIterator<Item = &'a Binding>,
    rules: impl Fn(&Binding) -> Result<&'a [PolicyRule], RoleMissing>,
) -> Decision {
    let mut errors = Vec::new();
    for (binding, subject) in applying(&attrs.user, bindings) {
        match rules(binding) {
            Ok(rules) => {
                if rules.iter().any(|r| rule_allows(attrs, r)) {
                    return Decision::Allow {
                        reason: describe(binding, subject),
                    };
                }
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision::NoOpinion { reason }
}

/// The rules of every binding among `bindings` that applies to `user`, in their order,
/// and the roles found missing (as kube-apiserver's rule resolver words them).
fn rules_of<'a>(
    user: &UserInfo,
    bindings: impl IntoIterator<Item = &'a Binding>,
    rules: impl Fn(&Binding) -> Result<&'a [PolicyRule], RoleMissing>,
) -> (Vec<PolicyRule>, Vec<String>) {
    let (mut found, mut errors) = (Vec::new(), Vec::new());
    for (binding, _) in applying(user, bindings) {
        match rules(binding) {
            Ok(r) => found.extend_from_slice(r),
            Err(e) => errors.push(e.to_string()),
        }
    }
    (found, errors)
}

/// The bindings among `bindings` that apply to `user`, each with the first subject that
/// names it.
fn applying<'a, 'u, B: IntoIterator<Item = &'a Binding>>(
    user: &'u UserInfo,
    bindings: B,
) -> impl Iterator<Item = (&'a Binding, &'a Subject)> + use<'a, 'u, B> {
    bindings.into_iter().filter_map(move |b| {
        b.subjects
            .iter()
            .find(|s| applies_to(user, s, &b.namespace))
            .map(|s| (b, s))
    })
}

#[cfg(test)]
impl Policy {
    /// Reads the four kinds' JSON objects.
    pub fn from_objects<'a>(
        roles: impl IntoIterator<Item = &'a [u8]>,
        cluster_roles: impl IntoIterator<Item = &'a [u8]>,
        role_bindings: impl IntoIterator<Item = &'a [u8]>,
        cluster_role_bindings: impl IntoIterator<Item = &'a [u8]>,
    ) -> Policy {
        let mut p = Policy::default();
        for json in roles {
            match serde_json::from_slice::<RoleObject>(json) {
                Ok(r) => {
                    p.roles.insert(
                        (r.metadata.namespace, r.metadata.name),
                        r.rules.unwrap_or_default(),
                    );
                }
                Err(_) => p.skipped += 1,
            }
        }
        for json in cluster_roles {
            match serde_json::from_slice::<RoleObject>(json) {
                Ok(r) => {
                    p.cluster_roles
                        .insert(r.metadata.name, r.rules.unwrap_or_default());
                }
                Err(_) => p.skipped += 1,
            }
        }
        for (json, cluster) in role_bindings
            .into_iter()
            .map(|j| (j, false))
            .chain(cluster_role_bindings.into_iter().map(|j| (j, true)))
        {
            let Some(binding) = read_binding(json, cluster) else {
                p.skipped += 1;
                continue;
            };
            if cluster {
                p.cluster_role_bindings.push(binding);
            } else {
                p.role_bindings
                    .entry(binding.namespace.clone())
                    .or_default()
                    .push(binding);
            }
        }
        p
    }

    /// The rules `role_ref` grants within `namespace` (empty for a ClusterRoleBinding).
    fn rules(&self, role_ref: &RoleRef, namespace: &str) -> Result<&[PolicyRule], RoleMissing> {
        let rules = match role_ref.kind.as_str() {
            "Role" => self
                .roles
                .get(&(namespace.to_string(), role_ref.name.clone())),
            "ClusterRole" => self.cluster_roles.get(&role_ref.name),
            _ => None,
        };
        rules.map(Vec::as_slice).ok_or_else(|| role_ref.missing())
    }

    /// Decides `attrs` as kube-apiserver's RBAC authorizer does.
    pub fn authorize(&self, attrs: &Attributes) -> Decision {
        let namespaced = self
            .role_bindings
            .get(&attrs.namespace)
            .filter(|_| !attrs.namespace.is_empty())
            .into_iter()
            .flatten();
        evaluate(
            attrs,
            self.cluster_role_bindings.iter().chain(namespaced),
            |b| self.rules(&b.role_ref, &b.namespace),
        )
    }
}

fn describe(binding: &Binding, subject: &Subject) -> String {
    let who = match subject.kind.as_str() {
        "ServiceAccount" if !subject.namespace.is_empty() => {
            format!("ServiceAccount \"{}/{}\"", subject.namespace, subject.name)
        }
        kind => format!("{kind} \"{}\"", subject.name),
    };
    if binding.namespace.is_empty() {
        format!(
            "RBAC: allowed by ClusterRoleBinding \"{}\" of {} \"{}\" to {who}",
            binding.name, binding.role_ref.kind, binding.role_ref.name
        )
    } else {
        format!(
            "RBAC: allowed by RoleBinding \"{}/{}\" of {} \"{}\" to {who}",
            binding.name, binding.namespace, binding.role_ref.kind, binding.role_ref.name
        )
    }
}

/// Whether `subject` of a binding in `namespace` names `user`. A ServiceAccount subject
/// without a namespace takes the binding's.
fn applies_to(user: &UserInfo, subject: &Subject, namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.name == subject.name,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                namespace
            } else {
                &subject.namespace
            };
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{}", subject.name)
        }
        _ => false,
    }
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == "*" || v == want)
}

/// Whether `rule` allows `attrs` (upstream's RuleAllows and its matchers).
pub fn rule_allows(attrs: &Attributes, rule: &PolicyRule) -> bool {
    if !has(&rule.verbs, &attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return rule.non_resource_urls.iter().any(|u| {
            u == "*"
                || *u == attrs.path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| attrs.path.starts_with(prefix))
        });
    }
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource_matches = rule.resources.iter().any(|r| {
        r == "*"
            || *r == combined
            || (!attrs.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
    });
    rule.api_groups
        .iter()
        .any(|g| g == "*" || *g == attrs.api_group)
        && resource_matches
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&attrs.name))
}

/// Whether `user` is in the group that is allowed everything before any authorizer runs.
pub fn is_privileged(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == MASTERS)
}

/// The 403 Status message kube-apiserver answers for `attrs`, with the authorizers'
/// `reason` appended when there is one.
pub fn forbidden_message(attrs: &Attributes, reason: &str) -> String {
    let user = &attrs.user.name;
    let what = if !attrs.resource_request {
        format!(
            "User \"{user}\" cannot {} path \"{}\"",
            attrs.verb, attrs.path
        )
    } else {
        let mut resource = attrs.resource.clone();
        if !attrs.subresource.is_empty() {
            resource = format!("{resource}/{}", attrs.subresource);
        }
        let scope = if attrs.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", attrs.namespace)
        };
        format!(
            "User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
            attrs.verb, attrs.api_group
        )
    };
    let err = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    if !attrs.resource_request || attrs.resource.is_empty() {
        format!("forbidden: {err}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {err}", attrs.name)
    }
}

#[cfg(test)]
#[path = "rbac_tests.rs"]
mod tests;
