//! The RBAC index: what a change concerns, and the same decisions as the whole policy
//! read at once ([`super::super::Policy`], the reference) on generated policies.

use std::collections::BTreeMap;

use super::super::Policy;
use super::*;
use crate::auth::AUTHENTICATED;

fn role(ns: &str, name: &str, verbs: &[&str], resources: &[&str]) -> String {
    let kind = if ns.is_empty() { "ClusterRole" } else { "Role" };
    serde_json::json!({
        "kind": kind, "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns},
        "rules": [{"verbs": verbs, "apiGroups": [""], "resources": resources}],
    })
    .to_string()
}

/// A binding in `ns` (empty: a ClusterRoleBinding) of `role_kind`/`role` to `subjects`
/// written `User:name`, `Group:name`, `ServiceAccount:name` or
/// `ServiceAccount:namespace/name`.
fn binding(ns: &str, name: &str, role_kind: &str, role: &str, subjects: &[&str]) -> String {
    let kind = if ns.is_empty() {
        "ClusterRoleBinding"
    } else {
        "RoleBinding"
    };
    let subjects: Vec<serde_json::Value> = subjects
        .iter()
        .map(|s| {
            let (kind, who) = s.split_once(':').unwrap();
            let (sns, sname) = who.split_once('/').unwrap_or(("", who));
            serde_json::json!({"kind": kind, "name": sname, "namespace": sns})
        })
        .collect();
    serde_json::json!({
        "kind": kind, "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    })
    .to_string()
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    groups.push(AUTHENTICATED.into());
    UserInfo {
        name: name.into(),
        groups,
        ..UserInfo::default()
    }
}

fn list(user: UserInfo, resource: &str, ns: &str) -> Attributes {
    Attributes {
        user,
        verb: "list".into(),
        resource_request: true,
        api_version: "v1".into(),
        resource: resource.into(),
        namespace: ns.into(),
        ..Attributes::default()
    }
}

fn allowed(index: &RbacIndex, attrs: &Attributes) -> bool {
    matches!(index.authorize(attrs), Decision::Allow { .. })
}

/// The objects of a policy by kind and object key, as the cache holds them.
#[derive(Default, Clone)]
struct Objects(BTreeMap<(Kind, String), String>);

impl Objects {
    fn key(kind: Kind, ns: &str, name: &str) -> (Kind, String) {
        match kind {
            Kind::Role | Kind::RoleBinding => (kind, format!("{ns}/{name}")),
            _ => (kind, name.to_string()),
        }
    }

    /// The reference: every object read at once, each kind in key order.
    fn policy(&self) -> Policy {
        let of = |k: Kind| {
            self.0
                .iter()
                .filter(move |((kind, _), _)| *kind == k)
                .map(|(_, json)| json.as_bytes())
        };
        Policy::from_objects(
            of(Kind::Role),
            of(Kind::ClusterRole),
            of(Kind::RoleBinding),
            of(Kind::ClusterRoleBinding),
        )
    }

    /// The index, each object put in turn.
    fn index(&self) -> RbacIndex {
        let mut index = RbacIndex::new();
        for ((kind, key), json) in &self.0 {
            index.put(
                *kind,
                &Arc::from(key.as_str()),
                json.as_bytes(),
                &mut Affected::default(),
            );
        }
        index
    }
}

fn put(index: &mut RbacIndex, kind: Kind, key: &str, json: &str) -> Affected {
    let mut affected = Affected::default();
    index.put(kind, &Arc::from(key), json.as_bytes(), &mut affected);
    affected
}

fn remove(index: &mut RbacIndex, kind: Kind, key: &str) -> Affected {
    let mut affected = Affected::default();
    index.remove(kind, &Arc::from(key), &mut affected);
    affected
}

fn base() -> RbacIndex {
    let mut index = RbacIndex::new();
    put(
        &mut index,
        Kind::Role,
        "ns1/pods",
        &role("ns1", "pods", &["list", "watch"], &["pods"]),
    );
    put(
        &mut index,
        Kind::ClusterRole,
        "secrets",
        &role("", "secrets", &["list"], &["secrets"]),
    );
    put(
        &mut index,
        Kind::RoleBinding,
        "ns1/alice",
        &binding("ns1", "alice", "Role", "pods", &["User:alice"]),
    );
    put(
        &mut index,
        Kind::RoleBinding,
        "ns1/bob",
        &binding(
            "ns1",
            "bob",
            "Role",
            "pods",
            &["User:bob", "ServiceAccount:sa"],
        ),
    );
    put(
        &mut index,
        Kind::ClusterRoleBinding,
        "ops",
        &binding("", "ops", "ClusterRole", "secrets", &["Group:ops"]),
    );
    index
}

#[test]
fn a_binding_change_concerns_only_its_subjects() {
    let mut index = base();
    let (alice, bob) = (user("alice", &[]), user("bob", &[]));
    let sa = user("system:serviceaccount:ns1:sa", &["system:serviceaccounts"]);
    let carol = user("carol", &["ops"]);
    assert!(allowed(&index, &list(bob.clone(), "pods", "ns1")));
    assert!(allowed(&index, &list(sa.clone(), "pods", "ns1")));

    // bob's binding loses the ServiceAccount and gains dave: bob is named (still bound),
    // the ServiceAccount and dave too; alice and carol are not.
    let a = put(
        &mut index,
        Kind::RoleBinding,
        "ns1/bob",
        &binding("ns1", "bob", "Role", "pods", &["User:bob", "User:dave"]),
    );
    assert_eq!(a.users(), ["bob", "dave", "system:serviceaccount:ns1:sa"]);
    assert!(a.groups().is_empty());
    assert!(a.concerns(&bob) && a.concerns(&sa));
    assert!(!a.concerns(&alice) && !a.concerns(&carol));
    assert!(!allowed(&index, &list(sa, "pods", "ns1")));
    assert!(allowed(&index, &list(user("dave", &[]), "pods", "ns1")));

    // A group binding concerns the group's members.
    let a = put(
        &mut index,
        Kind::ClusterRoleBinding,
        "ops",
        &binding(
            "",
            "ops",
            "ClusterRole",
            "secrets",
            &["Group:ops", "Group:devs"],
        ),
    );
    assert_eq!(a.groups(), ["devs", "ops"]);
    assert!(a.concerns(&carol) && a.concerns(&user("erin", &["devs"])));
    assert!(!a.concerns(&alice));

    // The same binding written again (another resourceVersion, the same grant)
    // concerns nobody.
    let a = put(
        &mut index,
        Kind::RoleBinding,
        "ns1/alice",
        &binding("ns1", "alice", "Role", "pods", &["User:alice"]),
    );
    assert!(a.is_empty(), "{a:?}");
}

#[test]
fn a_role_change_concerns_the_subjects_bound_to_it() {
    let mut index = base();
    let a = put(
        &mut index,
        Kind::Role,
        "ns1/pods",
        &role("ns1", "pods", &["list"], &["pods"]),
    );
    assert_eq!(a.users(), ["alice", "bob", "system:serviceaccount:ns1:sa"]);
    assert!(a.groups().is_empty());
    assert!(!a.concerns(&user("carol", &["ops"])));
    // Another namespace's Role of the same name is another role.
    let a = put(
        &mut index,
        Kind::Role,
        "ns2/pods",
        &role("ns2", "pods", &["list"], &["pods"]),
    );
    assert!(a.is_empty(), "{a:?}");
    // A ClusterRole (also one whose aggregated rules kube-controller-manager rewrote)
    // concerns its bindings' subjects.
    let a = put(
        &mut index,
        Kind::ClusterRole,
        "secrets",
        &role("", "secrets", &["list", "get"], &["secrets"]),
    );
    assert_eq!(a.groups(), ["ops"]);
    assert!(a.users().is_empty());
    // The same rules again concern nobody.
    let a = put(
        &mut index,
        Kind::ClusterRole,
        "secrets",
        &role("", "secrets", &["list", "get"], &["secrets"]),
    );
    assert!(a.is_empty(), "{a:?}");
}

#[test]
fn deletions_take_back_what_they_granted_and_concern_whom_it_was_granted() {
    let mut index = base();
    let alice = user("alice", &[]);
    let a = remove(&mut index, Kind::RoleBinding, "ns1/alice");
    assert_eq!(a.users(), ["alice"]);
    assert!(!allowed(&index, &list(alice.clone(), "pods", "ns1")));
    // Removing what is not there concerns nobody.
    assert!(remove(&mut index, Kind::RoleBinding, "ns1/alice").is_empty());

    // A role that goes: its bindings grant nothing and name it in the reason.
    let bob = user("bob", &[]);
    let a = remove(&mut index, Kind::Role, "ns1/pods");
    assert_eq!(a.users(), ["bob", "system:serviceaccount:ns1:sa"]);
    assert_eq!(
        index.authorize(&list(bob.clone(), "pods", "ns1")),
        Decision::NoOpinion {
            reason: "RBAC: role.rbac.authorization.k8s.io \"pods\" not found".into()
        }
    );
    // ... and grant again when it comes back.
    let a = put(
        &mut index,
        Kind::Role,
        "ns1/pods",
        &role("ns1", "pods", &["list"], &["pods"]),
    );
    assert_eq!(a.users(), ["bob", "system:serviceaccount:ns1:sa"]);
    assert!(allowed(&index, &list(bob, "pods", "ns1")));
    assert!(!allowed(&index, &list(alice, "pods", "ns1")));

    // Every index entry of a binding goes with it.
    remove(&mut index, Kind::RoleBinding, "ns1/bob");
    remove(&mut index, Kind::ClusterRoleBinding, "ops");
    assert!(index.bindings.is_empty());
    assert!(index.users.is_empty(), "{:?}", index.users);
    assert!(index.groups.is_empty(), "{:?}", index.groups);
    assert!(index.by_role.is_empty(), "{:?}", index.by_role);
}

#[test]
fn unreadable_objects_grant_nothing_and_are_counted_until_replaced() {
    let mut index = base();
    let alice = user("alice", &[]);
    let a = put(&mut index, Kind::RoleBinding, "ns1/alice", "not json");
    assert_eq!(a.users(), ["alice"]);
    assert_eq!(index.unreadable(), 1);
    assert!(!allowed(&index, &list(alice.clone(), "pods", "ns1")));
    put(
        &mut index,
        Kind::RoleBinding,
        "ns1/alice",
        &binding("ns1", "alice", "Role", "pods", &["User:alice"]),
    );
    assert_eq!(index.unreadable(), 0);
    assert!(allowed(&index, &list(alice, "pods", "ns1")));
    put(&mut index, Kind::ClusterRole, "x", "{");
    assert_eq!(index.unreadable(), 1);
    remove(&mut index, Kind::ClusterRole, "x");
    assert_eq!(index.unreadable(), 0);
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }

    fn some<'a>(&mut self, from: &[&'a str]) -> Vec<&'a str> {
        from.iter()
            .copied()
            .filter(|_| self.below(2) == 0)
            .collect()
    }
}

const NAMESPACES: &[&str] = &["ns1", "ns2", "ns3"];
const ROLE_NAMES: &[&str] = &["r1", "r2", "r3"];
const SUBJECTS: &[&str] = &[
    "User:alice",
    "User:bob",
    "User:system:serviceaccount:ns1:sa",
    "Group:devs",
    "Group:ops",
    "Group:system:authenticated",
    "ServiceAccount:sa",
    "ServiceAccount:ns2/sa",
    "ServiceAccount:ns1/robot",
    "Robot:alice",
];
const VERBS: &[&str] = &["get", "list", "watch", "*"];
const RESOURCES: &[&str] = &["pods", "secrets", "configmaps", "*", "pods/log"];

/// A random object: one of a few names in a few namespaces, so that changes hit the same
/// keys; now and then one that does not read.
fn random_object(rng: &mut Rng) -> ((Kind, String), String) {
    let kind = Kind::ALL[rng.below(4)];
    let ns = match kind {
        Kind::Role | Kind::RoleBinding => rng.pick(NAMESPACES),
        _ => "",
    };
    let name = match kind {
        Kind::Role | Kind::ClusterRole => rng.pick(ROLE_NAMES),
        // Names that sort before and after the namespaces: the order of
        // evaluation is not the order of object keys.
        _ => rng.pick(&["b1", "b2", "z1", "z2"]),
    };
    let json = if rng.below(25) == 0 {
        "{\"metadata\": 7}".to_string()
    } else {
        match kind {
            Kind::Role | Kind::ClusterRole => {
                role(ns, name, &rng.some(VERBS), &rng.some(RESOURCES))
            }
            _ => {
                let role_kind = rng.pick(&["Role", "ClusterRole", "ClusterRole", "Group"]);
                binding(
                    ns,
                    name,
                    role_kind,
                    rng.pick(ROLE_NAMES),
                    &rng.some(SUBJECTS),
                )
            }
        }
    };
    (Objects::key(kind, ns, name), json)
}

fn users() -> Vec<UserInfo> {
    vec![
        user("alice", &[]),
        user("bob", &["devs"]),
        user("carol", &["ops", "devs"]),
        user("system:serviceaccount:ns1:sa", &["system:serviceaccounts"]),
        user("system:serviceaccount:ns2:sa", &[]),
        user("system:serviceaccount:ns1:robot", &[]),
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..UserInfo::default()
        },
    ]
}

fn requests(user: &UserInfo) -> Vec<Attributes> {
    let mut out = Vec::new();
    for ns in ["", "ns1", "ns2", "ns3"] {
        for verb in ["get", "list", "watch", "delete"] {
            for (resource, sub) in [
                ("pods", ""),
                ("secrets", ""),
                ("pods", "log"),
                ("nodes", ""),
            ] {
                out.push(Attributes {
                    verb: verb.into(),
                    subresource: sub.into(),
                    ..list(user.clone(), resource, ns)
                });
            }
        }
    }
    out
}

/// The index decides every request as the reference does, reasons included.
fn same_decisions(
    index: &RbacIndex,
    objects: &Objects,
    round: usize,
) -> Vec<(String, Vec<Decision>)> {
    let reference = objects.policy();
    assert_eq!(index.unreadable(), reference.skipped, "round {round}");
    users()
        .iter()
        .map(|u| {
            let decisions: Vec<Decision> = requests(u)
                .iter()
                .map(|attrs| {
                    let got = index.authorize(attrs);
                    assert_eq!(got, reference.authorize(attrs), "round {round}: {attrs:?}");
                    got
                })
                .collect();
            (u.name.clone(), decisions)
        })
        .collect()
}

#[test]
fn the_index_decides_as_the_whole_policy_read_at_once_through_random_changes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut allows = 0;
    for seed in 0..12 {
        let mut objects = Objects::default();
        for _ in 0..(10 + seed) {
            let (key, json) = random_object(&mut rng);
            objects.0.insert(key, json);
        }
        let mut index = objects.index();
        let mut before = same_decisions(&index, &objects, 0);
        for round in 1..30 {
            // A change: an object written (new or replaced) or deleted.
            let mut affected = Affected::default();
            if rng.below(3) == 0 && !objects.0.is_empty() {
                let at = rng.below(objects.0.len());
                let Some(key) = objects.0.keys().nth(at).cloned() else {
                    continue;
                };
                objects.0.remove(&key);
                index.remove(key.0, &Arc::from(key.1.as_str()), &mut affected);
            } else {
                let (key, json) = random_object(&mut rng);
                index.put(
                    key.0,
                    &Arc::from(key.1.as_str()),
                    json.as_bytes(),
                    &mut affected,
                );
                objects.0.insert(key, json);
            }
            let after = same_decisions(&index, &objects, round);
            // Whoever's decisions changed was named by the change.
            for ((name, was), (_, is)) in before.iter().zip(&after) {
                let u = users().into_iter().find(|u| &u.name == name).unwrap();
                if was != is {
                    assert!(
                        affected.concerns(&u),
                        "round {round}: {name} changed, not named: {affected:?}"
                    );
                }
            }
            allows += after
                .iter()
                .flat_map(|(_, d)| d)
                .filter(|d| matches!(d, Decision::Allow { .. }))
                .count();
            before = after;
        }
        // Built whole from the final objects, the index is the same one.
        let rebuilt = objects.index();
        assert_eq!(same_decisions(&rebuilt, &objects, 99), before);
    }
    assert!(
        allows > 1000,
        "the generated policies allow something ({allows})"
    );
}

/// What a SelfSubjectRulesReview lists: the rules of the bindings that apply to the
/// user, cluster-wide first, then in the namespace; missing roles named; and exactly
/// what the authorizer allows.
#[test]
fn a_users_rules_are_its_bindings_rules_cluster_wide_then_in_the_namespace() {
    let mut index = base();
    let bob = user("bob", &["ops"]);
    let resources = |rules: &[PolicyRule]| -> Vec<Vec<String>> {
        rules.iter().map(|r| r.resources.clone()).collect()
    };
    let (rules, errors) = index.rules_for(&bob, "ns1");
    assert_eq!(resources(&rules), [vec!["secrets"], vec!["pods"]]);
    assert!(errors.is_empty());
    assert_eq!(
        resources(&index.rules_for(&bob, "ns2").0),
        [vec!["secrets"]]
    );
    assert_eq!(resources(&index.rules_for(&bob, "").0), [vec!["secrets"]]);
    assert!(index.rules_for(&user("nobody", &[]), "ns1").0.is_empty());
    put(
        &mut index,
        Kind::RoleBinding,
        "ns1/ghost",
        &binding("ns1", "ghost", "Role", "gone", &["User:bob"]),
    );
    let (rules, errors) = index.rules_for(&bob, "ns1");
    assert_eq!(rules.len(), 2);
    assert_eq!(
        errors,
        ["role.rbac.authorization.k8s.io \"gone\" not found"]
    );
    for who in [bob, user("alice", &[]), user("carol", &["ops"])] {
        for ns in ["ns1", "ns2"] {
            let (rules, _) = index.rules_for(&who, ns);
            for verb in ["list", "watch", "get", "create"] {
                for resource in ["pods", "secrets", "configmaps"] {
                    let mut attrs = list(who.clone(), resource, ns);
                    attrs.verb = verb.into();
                    let listed = rules.iter().any(|r| super::super::rule_allows(&attrs, r));
                    assert_eq!(allowed(&index, &attrs), listed, "{attrs:?}");
                }
            }
        }
    }
}
