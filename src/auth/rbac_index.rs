//! The RBAC policy as the authorizer reads it, kept one changed object at a time: the
//! rules of each Role and ClusterRole by object key, and each binding under the users and
//! groups its subjects name (a ServiceAccount subject is the user
//! `system:serviceaccount:<namespace>:<name>`) and the namespace it applies in (empty for
//! a ClusterRoleBinding). A decision reads only the bindings of the asking user's name
//! and groups, cluster-wide and in the request's namespace, in kube-apiserver's order
//! (ClusterRoleBindings, then RoleBindings, each by object key), and decides as the
//! reference, `super::Policy`, decides over every binding.
//!
//! The maps are persistent (imbl): a copy is cheap and a change to one object touches
//! only its entries, so each version can be published whole while the next is made.
//! Each change says whose permissions it may have changed ([`Affected`]): the subjects
//! of a binding (before and after), or of every binding of a role whose rules changed.
//!
//! A Role is found by its object key, `namespace/name`, which its etcd key (and an
//! upstream's list) is made of.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use imbl::{HashMap, OrdSet};

use super::{
    evaluate, read_binding, rules_of, Binding, Decision, PolicyRule, RoleMissing, RoleObject,
};
use super::{Attributes, Subject, UserInfo};

/// One of the four RBAC resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `roles`.
    Role,
    /// `clusterroles`.
    ClusterRole,
    /// `rolebindings`.
    RoleBinding,
    /// `clusterrolebindings`.
    ClusterRoleBinding,
}

impl Kind {
    /// The four, in the order the index's followers keep them.
    pub const ALL: [Kind; 4] = [
        Kind::Role,
        Kind::ClusterRole,
        Kind::RoleBinding,
        Kind::ClusterRoleBinding,
    ];

    /// The resource (plural) in `rbac.authorization.k8s.io/v1`.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Role => "roles",
            Kind::ClusterRole => "clusterroles",
            Kind::RoleBinding => "rolebindings",
            Kind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// A binding by object key; ClusterRoleBindings order first, as they are evaluated first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct BindingKey {
    namespaced: bool,
    key: Arc<str>,
}

/// A role by object key, as bindings refer to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RoleKey {
    /// `namespace/name`.
    Role(Arc<str>),
    /// `name`.
    ClusterRole(Arc<str>),
}

/// Whom a subject names.
enum Principal {
    User(Arc<str>),
    Group(Arc<str>),
}

/// The bindings naming one user or group, by the namespace they apply in (empty:
/// cluster-wide).
type ByScope = HashMap<Arc<str>, OrdSet<BindingKey>>;

/// The RBAC policy, indexed for decisions and kept per changed object.
#[derive(Debug, Clone, Default)]
pub struct RbacIndex {
    roles: HashMap<Arc<str>, Arc<[PolicyRule]>>,
    cluster_roles: HashMap<Arc<str>, Arc<[PolicyRule]>>,
    bindings: HashMap<BindingKey, Arc<Binding>>,
    users: HashMap<Arc<str>, ByScope>,
    groups: HashMap<Arc<str>, ByScope>,
    /// The bindings that refer to each role (present or not).
    by_role: HashMap<RoleKey, OrdSet<BindingKey>>,
    /// Objects that could not be read (they grant nothing).
    unreadable: OrdSet<(Kind, Arc<str>)>,
}

/// Whose permissions a change may have changed: users and groups by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affected {
    users: HashSet<Arc<str>>,
    groups: HashSet<Arc<str>>,
}

impl Affected {
    /// Whether nobody's permissions changed.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// Whether `user`'s permissions may have changed: its name or one of its groups is
    /// named (a ServiceAccount is its user name).
    pub fn concerns(&self, user: &UserInfo) -> bool {
        self.users.contains(user.name.as_str())
            || user.groups.iter().any(|g| self.groups.contains(g.as_str()))
    }

    /// The user names named, sorted (for tests and logs).
    pub fn users(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.users.iter().map(|u| &**u).collect();
        v.sort_unstable();
        v
    }

    /// The group names named, sorted.
    pub fn groups(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.groups.iter().map(|g| &**g).collect();
        v.sort_unstable();
        v
    }

    fn add(&mut self, p: Principal) {
        match p {
            Principal::User(u) => self.users.insert(u),
            Principal::Group(g) => self.groups.insert(g),
        };
    }

    fn add_subjects(&mut self, binding: &Binding) {
        for s in &binding.subjects {
            if let Some(p) = principal(s, &binding.namespace) {
                self.add(p);
            }
        }
    }
}

/// Whom `subject` of a binding in `namespace` names, as `super::applies_to` matches it;
/// None for a subject that names nobody.
fn principal(subject: &Subject, namespace: &str) -> Option<Principal> {
    match subject.kind.as_str() {
        "User" => Some(Principal::User(Arc::from(subject.name.as_str()))),
        "Group" => Some(Principal::Group(Arc::from(subject.name.as_str()))),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                namespace
            } else {
                &subject.namespace
            };
            (!ns.is_empty()).then(|| {
                Principal::User(Arc::from(format!(
                    "system:serviceaccount:{ns}:{}",
                    subject.name
                )))
            })
        }
        _ => None,
    }
}

/// The role `binding` refers to; None for a roleRef kind that names no role.
fn role_key(binding: &Binding) -> Option<RoleKey> {
    match binding.role_ref.kind.as_str() {
        "Role" => Some(RoleKey::Role(Arc::from(format!(
            "{}/{}",
            binding.namespace, binding.role_ref.name
        )))),
        "ClusterRole" => Some(RoleKey::ClusterRole(Arc::from(
            binding.role_ref.name.as_str(),
        ))),
        _ => None,
    }
}

impl RbacIndex {
    /// An empty policy (grants nothing).
    pub fn new() -> RbacIndex {
        RbacIndex::default()
    }

    /// Objects that could not be read.
    pub fn unreadable(&self) -> usize {
        self.unreadable.len()
    }

    /// Sets the object of `kind` at `key` (its object key) to `json`, adding whose
    /// permissions that changed to `affected`. An object that does not read grants
    /// nothing (as if removed) and is counted as unreadable.
    pub fn put(&mut self, kind: Kind, key: &str, json: &[u8], affected: &mut Affected) {
        let key: &Arc<str> = &Arc::from(key);
        match kind {
            Kind::Role | Kind::ClusterRole => {
                let rules: Option<Arc<[PolicyRule]>> = serde_json::from_slice::<RoleObject>(json)
                    .ok()
                    .map(|r| r.rules.unwrap_or_default().into());
                self.mark(kind, key, rules.is_some());
                self.set_role(kind, key, rules, affected);
            }
            Kind::RoleBinding | Kind::ClusterRoleBinding => {
                let binding = read_binding(json, kind == Kind::ClusterRoleBinding);
                self.mark(kind, key, binding.is_some());
                self.set_binding(kind, key, binding.map(Arc::new), affected);
            }
        }
    }

    /// Removes the object of `kind` at `key`, adding whose permissions that changed to
    /// `affected`.
    pub fn remove(&mut self, kind: Kind, key: &str, affected: &mut Affected) {
        let key: &Arc<str> = &Arc::from(key);
        self.mark(kind, key, true);
        match kind {
            Kind::Role | Kind::ClusterRole => self.set_role(kind, key, None, affected),
            Kind::RoleBinding | Kind::ClusterRoleBinding => {
                self.set_binding(kind, key, None, affected)
            }
        }
    }

    fn mark(&mut self, kind: Kind, key: &Arc<str>, readable: bool) {
        let entry = (kind, key.clone());
        if readable {
            self.unreadable.remove(&entry);
        } else {
            self.unreadable.insert(entry);
        }
    }

    fn set_role(
        &mut self,
        kind: Kind,
        key: &Arc<str>,
        rules: Option<Arc<[PolicyRule]>>,
        affected: &mut Affected,
    ) {
        let (map, role) = if kind == Kind::Role {
            (&mut self.roles, RoleKey::Role(key.clone()))
        } else {
            (&mut self.cluster_roles, RoleKey::ClusterRole(key.clone()))
        };
        let old = match &rules {
            Some(r) => map.insert(key.clone(), r.clone()),
            None => map.remove(key),
        };
        if old.as_deref() == rules.as_deref() {
            return;
        }
        // A role's rules changed (or it appeared or went): every binding to it changed
        // what it grants.
        if let Some(keys) = self.by_role.get(&role) {
            for b in keys.iter().filter_map(|k| self.bindings.get(k)) {
                affected.add_subjects(b);
            }
        }
    }

    fn set_binding(
        &mut self,
        kind: Kind,
        key: &Arc<str>,
        binding: Option<Arc<Binding>>,
        affected: &mut Affected,
    ) {
        let bk = BindingKey {
            namespaced: kind == Kind::RoleBinding,
            key: key.clone(),
        };
        let old = self.bindings.get(&bk).cloned();
        if old.as_deref() == binding.as_deref() {
            return;
        }
        if let Some(old) = old {
            self.unlink(&bk, &old, affected);
        }
        if let Some(new) = binding {
            self.link(bk, new, affected);
        }
    }

    /// The scope a binding is evaluated in (empty for cluster-wide); None for a
    /// RoleBinding without a namespace, which no request reaches.
    fn scope(bk: &BindingKey, binding: &Binding) -> Option<Arc<str>> {
        match (bk.namespaced, binding.namespace.is_empty()) {
            (false, _) => Some(Arc::from("")),
            (true, false) => Some(Arc::from(binding.namespace.as_str())),
            (true, true) => None,
        }
    }

    fn link(&mut self, bk: BindingKey, binding: Arc<Binding>, affected: &mut Affected) {
        if let Some(role) = role_key(&binding) {
            self.by_role.entry(role).or_default().insert(bk.clone());
        }
        if let Some(scope) = Self::scope(&bk, &binding) {
            for s in &binding.subjects {
                let (map, name) = match principal(s, &binding.namespace) {
                    Some(Principal::User(u)) => (&mut self.users, u),
                    Some(Principal::Group(g)) => (&mut self.groups, g),
                    None => continue,
                };
                map.entry(name)
                    .or_default()
                    .entry(scope.clone())
                    .or_default()
                    .insert(bk.clone());
            }
        }
        affected.add_subjects(&binding);
        self.bindings.insert(bk, binding);
    }

    fn unlink(&mut self, bk: &BindingKey, binding: &Binding, affected: &mut Affected) {
        self.bindings.remove(bk);
        if let Some(role) = role_key(binding) {
            let empty = self.by_role.get_mut(&role).is_some_and(|set| {
                set.remove(bk);
                set.is_empty()
            });
            if empty {
                self.by_role.remove(&role);
            }
        }
        if let Some(scope) = Self::scope(bk, binding) {
            for s in &binding.subjects {
                let (map, name) = match principal(s, &binding.namespace) {
                    Some(Principal::User(u)) => (&mut self.users, u),
                    Some(Principal::Group(g)) => (&mut self.groups, g),
                    None => continue,
                };
                let empty = map.get_mut(&name).is_some_and(|by| {
                    let gone = by.get_mut(&scope).is_some_and(|set| {
                        set.remove(bk);
                        set.is_empty()
                    });
                    if gone {
                        by.remove(&scope);
                    }
                    by.is_empty()
                });
                if empty {
                    map.remove(&name);
                }
            }
        }
        affected.add_subjects(binding);
    }

    /// The rules `binding`'s role grants.
    fn rules(&self, binding: &Binding) -> Result<&[PolicyRule], RoleMissing> {
        let role = &binding.role_ref;
        let found = match role.kind.as_str() {
            "Role" => self
                .roles
                .get(format!("{}/{}", binding.namespace, role.name).as_str()),
            "ClusterRole" => self.cluster_roles.get(role.name.as_str()),
            _ => None,
        };
        found.map(|r| &r[..]).ok_or_else(|| role.missing())
    }

    /// Decides `attrs` as kube-apiserver's RBAC authorizer does, reading only the
    /// bindings that name the user or one of its groups.
    pub fn authorize(&self, attrs: &Attributes) -> Decision {
        let mut keys: BTreeSet<&BindingKey> = BTreeSet::new();
        let ns = attrs.namespace.as_str();
        gather(&mut keys, self.users.get(attrs.user.name.as_str()), ns);
        for g in &attrs.user.groups {
            gather(&mut keys, self.groups.get(g.as_str()), ns);
        }
        let bindings = keys
            .into_iter()
            .filter_map(|k| self.bindings.get(k))
            .map(|b| &**b);
        evaluate(attrs, bindings, |b| self.rules(b))
    }
}

impl RbacIndex {
    /// The rules `user` holds cluster-wide and, when `namespace` is not empty, in it:
    /// those of the ClusterRoleBindings, then the RoleBindings, that name the user or
    /// one of its groups; and the roles they refer to that are missing.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut keys: BTreeSet<&BindingKey> = BTreeSet::new();
        gather(&mut keys, self.users.get(user.name.as_str()), namespace);
        for g in &user.groups {
            gather(&mut keys, self.groups.get(g.as_str()), namespace);
        }
        let bindings = keys
            .into_iter()
            .filter_map(|k| self.bindings.get(k))
            .map(|b| &**b);
        rules_of(user, bindings, |b| self.rules(b))
    }
}

/// Adds the bindings of `by` that apply cluster-wide and in `namespace` to `keys`.
fn gather<'a>(keys: &mut BTreeSet<&'a BindingKey>, by: Option<&'a ByScope>, namespace: &str) {
    let Some(by) = by else { return };
    if let Some(set) = by.get("") {
        keys.extend(set.iter());
    }
    if !namespace.is_empty() {
        if let Some(set) = by.get(namespace) {
            keys.extend(set.iter());
        }
    }
}

#[cfg(test)]
#[path = "rbac_index_tests.rs"]
mod tests;
