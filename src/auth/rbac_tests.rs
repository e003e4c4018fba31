//! The RBAC case table: each row is a request and kube-apiserver's RBAC decision for it
//! over the policy below (objects as a cluster stores them).

use super::*;

const ROLES: &[&str] = &[
    r#"{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"pod-reader","namespace":"ns1"},"rules":[{"verbs":["get","list","watch"],"apiGroups":[""],"resources":["pods"]}]}"#,
    r#"{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"one-secret","namespace":"ns1"},"rules":[{"verbs":["get","watch","list"],"apiGroups":[""],"resources":["secrets"],"resourceNames":["token"]}]}"#,
    r#"{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"status-only","namespace":"ns1"},"rules":[{"verbs":["get"],"apiGroups":["apps"],"resources":["deployments/status","*/scale"]}]}"#,
];

const CLUSTER_ROLES: &[&str] = &[
    r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"system:discovery"},"rules":[{"verbs":["get"],"nonResourceURLs":["/api","/api/*","/apis","/apis/*","/healthz","/livez","/readyz","/version","/version/"]}]}"#,
    r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"view-configmaps"},"rules":[{"verbs":["list","watch"],"apiGroups":[""],"resources":["configmaps"]}]}"#,
    r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"everything"},"rules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]},{"verbs":["*"],"nonResourceURLs":["*"]}]}"#,
    r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"metrics"},"rules":[{"verbs":["get"],"nonResourceURLs":["/metrics"]}]}"#,
    r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"apps-pods-sub"},"rules":[{"verbs":["get"],"apiGroups":["apps",""],"resources":["pods/*"]}]}"#,
    r#"{"kind":"ClusterRole","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"aggregated-view","aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"agg":"true"}}]}},"rules":[{"verbs":["get","list"],"apiGroups":["batch"],"resources":["jobs"]}]}"#,
];

const ROLE_BINDINGS: &[&str] = &[
    r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"alice-pods","namespace":"ns1"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"alice"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"pod-reader"}}"#,
    r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"sa-secret","namespace":"ns1"},"subjects":[{"kind":"ServiceAccount","name":"builder"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"one-secret"}}"#,
    r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"devs-cm","namespace":"ns2"},"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"devs"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view-configmaps"}}"#,
    r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"carol-status","namespace":"ns1"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"carol"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"status-only"}}"#,
    r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"dangling","namespace":"ns3"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"dave"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"gone"}}"#,
    r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"other-ns-sa","namespace":"ns2"},"subjects":[{"kind":"ServiceAccount","name":"robot","namespace":"ns1"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view-configmaps"}}"#,
];

const CLUSTER_ROLE_BINDINGS: &[&str] = &[
    r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"system:discovery"},"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"system:authenticated"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:discovery"}}"#,
    r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"root"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"root"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"everything"}}"#,
    r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"prometheus"},"subjects":[{"kind":"ServiceAccount","name":"prometheus","namespace":"monitoring"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"metrics"}}"#,
    r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"sa-without-namespace"},"subjects":[{"kind":"ServiceAccount","name":"lost"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"everything"}}"#,
    r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"subs"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"erin"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"apps-pods-sub"}}"#,
    r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"agg"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"frank"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"aggregated-view"}}"#,
    r#"{"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"broken"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"dave"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"missing"}}"#,
    r#"not json"#,
];

fn policy() -> Policy {
    let bytes = |v: &'static [&'static str]| v.iter().map(|s| s.as_bytes());
    Policy::from_objects(
        bytes(ROLES),
        bytes(CLUSTER_ROLES),
        bytes(ROLE_BINDINGS),
        bytes(CLUSTER_ROLE_BINDINGS),
    )
}

fn user(spec: &str) -> UserInfo {
    // "name" or "name|group1,group2"
    let (name, groups) = spec.split_once('|').unwrap_or((spec, ""));
    let mut groups: Vec<String> = groups
        .split(',')
        .filter(|g| !g.is_empty())
        .map(String::from)
        .collect();
    groups.push(crate::auth::AUTHENTICATED.into());
    UserInfo {
        name: name.into(),
        groups,
        ..UserInfo::default()
    }
}

/// A resource request: `verb group/resource[/subresource] ns name` with `-` for empty.
fn res(who: &str, verb: &str, gr: &str, ns: &str, name: &str) -> Attributes {
    let dash = |s: &str| {
        if s == "-" {
            String::new()
        } else {
            s.to_string()
        }
    };
    let mut parts = gr.splitn(3, '/');
    let group = dash(parts.next().unwrap());
    let resource = parts.next().unwrap().to_string();
    let subresource = parts.next().unwrap_or("").to_string();
    Attributes {
        user: user(who),
        verb: verb.into(),
        resource_request: true,
        api_group: group,
        api_version: "v1".into(),
        resource,
        subresource,
        namespace: dash(ns),
        name: dash(name),
        path: String::new(),
    }
}

fn path(who: &str, verb: &str, p: &str) -> Attributes {
    Attributes {
        user: user(who),
        verb: verb.into(),
        resource_request: false,
        path: p.into(),
        ..Attributes::default()
    }
}

#[test]
fn the_case_table_decides_as_kube_apiservers_rbac_authorizer() {
    let p = policy();
    assert_eq!(
        p.skipped, 1,
        "the unreadable binding is skipped and counted"
    );
    #[rustfmt::skip]
    let cases: Vec<(&str, Attributes, bool)> = vec![
        // verbs
        ("role grants list in its namespace", res("alice", "list", "-/pods", "ns1", "-"), true),
        ("role grants get", res("alice", "get", "-/pods", "ns1", "p1"), true),
        ("role grants watch", res("alice", "watch", "-/pods", "ns1", "-"), true),
        ("a verb not in the rule", res("alice", "delete", "-/pods", "ns1", "p1"), false),
        ("role binding does not reach another namespace", res("alice", "list", "-/pods", "ns2", "-"), false),
        ("all-namespace list needs a cluster role binding", res("alice", "list", "-/pods", "-", "-"), false),
        ("another resource in the same group", res("alice", "list", "-/services", "ns1", "-"), false),
        ("the same resource name in another group", res("alice", "list", "apps/pods", "ns1", "-"), false),
        // resourceNames
        ("resourceNames allow get by that name", res("system:serviceaccount:ns1:builder", "get", "-/secrets", "ns1", "token"), true),
        ("resourceNames allow watch by that name", res("system:serviceaccount:ns1:builder", "watch", "-/secrets", "ns1", "token"), true),
        ("resourceNames allow list naming it (metadata.name field selector)", res("system:serviceaccount:ns1:builder", "list", "-/secrets", "ns1", "token"), true),
        ("resourceNames do not allow the collection", res("system:serviceaccount:ns1:builder", "list", "-/secrets", "ns1", "-"), false),
        ("resourceNames do not allow watching the collection", res("system:serviceaccount:ns1:builder", "watch", "-/secrets", "ns1", "-"), false),
        ("resourceNames do not allow another name", res("system:serviceaccount:ns1:builder", "get", "-/secrets", "ns1", "other"), false),
        // ServiceAccount subjects
        ("SA subject without namespace takes the role binding's", res("system:serviceaccount:ns2:builder", "get", "-/secrets", "ns1", "token"), false),
        ("SA subject with its own namespace", res("system:serviceaccount:ns1:robot", "list", "-/configmaps", "ns2", "-"), true),
        ("SA subject matched by full user name only", res("robot", "list", "-/configmaps", "ns2", "-"), false),
        ("SA subject of a cluster binding without namespace matches nobody", res("system:serviceaccount::lost", "get", "-/pods", "ns1", "x"), false),
        ("SA subject of a cluster binding without namespace, any namespace", res("system:serviceaccount:ns1:lost", "get", "-/pods", "ns1", "x"), false),
        // groups and namespaced bindings to cluster roles
        ("group subject via a role binding to a cluster role", res("bob|devs", "list", "-/configmaps", "ns2", "-"), true),
        ("a cluster role bound in a namespace applies only there", res("bob|devs", "list", "-/configmaps", "ns1", "-"), false),
        ("a cluster role bound in a namespace never grants cluster-wide", res("bob|devs", "list", "-/configmaps", "-", "-"), false),
        ("not in the group", res("bob|ops", "list", "-/configmaps", "ns2", "-"), false),
        // wildcards
        ("wildcards grant any resource", res("root", "delete", "apps/deployments", "ns9", "d"), true),
        ("wildcards grant cluster scope", res("root", "list", "-/nodes", "-", "-"), true),
        ("wildcards grant subresources", res("root", "get", "-/pods/log", "ns1", "p"), true),
        ("wildcards grant any path", res("root", "get", "-/pods", "-", "-"), true),
        ("wildcards grant non-resource paths", path("root", "get", "/metrics"), true),
        // subresources
        ("resource/subresource rule", res("carol", "get", "apps/deployments/status", "ns1", "d"), true),
        ("resource/subresource rule does not grant the resource", res("carol", "get", "apps/deployments", "ns1", "d"), false),
        ("*/subresource rule", res("carol", "get", "apps/replicasets/scale", "ns1", "r"), true),
        ("*/subresource rule does not grant other subresources", res("carol", "get", "apps/replicasets/status", "ns1", "r"), false),
        ("pods/* is not a wildcard for subresources", res("erin", "get", "-/pods/log", "ns1", "p"), false),
        ("pods/* is not the resource itself", res("erin", "get", "-/pods", "ns1", "p"), false),
        // aggregated cluster roles are read as stored
        ("aggregated role's stored rules apply", res("frank", "list", "batch/jobs", "ns1", "-"), true),
        ("aggregated role grants only its stored rules", res("frank", "list", "batch/cronjobs", "ns1", "-"), false),
        // non-resource URLs
        ("discovery for every authenticated user", path("anyone", "get", "/api"), true),
        ("prefix match with *", path("anyone", "get", "/apis/apps/v1"), true),
        ("exact path", path("anyone", "get", "/healthz"), true),
        ("a path not listed", path("anyone", "get", "/metrics"), false),
        ("a verb not listed for a path", path("anyone", "post", "/api"), false),
        ("metrics for the prometheus service account", path("system:serviceaccount:monitoring:prometheus", "get", "/metrics"), true),
        ("a non-resource rule grants no resources", res("system:serviceaccount:monitoring:prometheus", "get", "-/metrics", "-", "-"), false),
        ("a resource rule grants no paths", path("alice", "get", "/logs/pods"), false),
        ("the anonymous user is not authenticated", Attributes { user: UserInfo { name: "system:anonymous".into(), groups: vec!["system:unauthenticated".into()], ..UserInfo::default() }, ..path("x", "get", "/api") }, false),
        // missing roles
        ("a binding to a missing role grants nothing", res("dave", "get", "-/pods", "ns3", "p"), false),
    ];
    assert!(cases.len() >= 40);
    for (what, attrs, want) in cases {
        let got = matches!(p.authorize(&attrs), Decision::Allow { .. });
        assert_eq!(got, want, "{what}: {attrs:?}");
    }
}

#[test]
fn missing_roles_are_named_in_the_reason_and_allow_names_the_binding() {
    let p = policy();
    assert_eq!(
        p.authorize(&res("dave", "get", "-/pods", "ns3", "p")),
        Decision::NoOpinion {
            reason: "RBAC: [clusterrole.rbac.authorization.k8s.io \"missing\" not found, role.rbac.authorization.k8s.io \"gone\" not found]".into()
        }
    );
    assert_eq!(
        p.authorize(&res("dave", "get", "-/pods", "-", "p")),
        Decision::NoOpinion {
            reason: "RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found".into()
        }
    );
    assert_eq!(
        p.authorize(&res("nobody", "get", "-/pods", "ns1", "p")),
        Decision::NoOpinion {
            reason: String::new()
        }
    );
    assert_eq!(
        p.authorize(&res("alice", "get", "-/pods", "ns1", "p")),
        Decision::Allow {
            reason: "RBAC: allowed by RoleBinding \"alice-pods/ns1\" of Role \"pod-reader\" to User \"alice\"".into()
        }
    );
}

#[test]
fn masters_are_privileged() {
    assert!(is_privileged(&user("root|system:masters")));
    assert!(!is_privileged(&user("root|masters")));
}

#[test]
fn forbidden_messages_are_worded_as_kube_apiserver_words_them() {
    let m = |a: &Attributes, r: &str| forbidden_message(a, r);
    assert_eq!(
        m(&res("alice", "list", "-/pods", "ns2", "-"), ""),
        r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "ns2""#
    );
    assert_eq!(
        m(&res("alice", "list", "-/nodes", "-", "-"), ""),
        r#"nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope"#
    );
    assert_eq!(
        m(
            &res("alice", "get", "apps/deployments/status", "ns1", "web"),
            ""
        ),
        r#"deployments.apps "web" is forbidden: User "alice" cannot get resource "deployments/status" in API group "apps" in the namespace "ns1""#
    );
    assert_eq!(
        m(&path("alice", "get", "/metrics"), ""),
        r#"forbidden: User "alice" cannot get path "/metrics""#
    );
    assert_eq!(
        m(
            &res("dave", "get", "-/pods", "ns3", "p"),
            "RBAC: role.rbac.authorization.k8s.io \"gone\" not found"
        ),
        r#"pods "p" is forbidden: User "dave" cannot get resource "pods" in API group "" in the namespace "ns3": RBAC: role.rbac.authorization.k8s.io "gone" not found"#
    );
}
