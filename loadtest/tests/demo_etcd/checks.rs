//! What a demo cluster must look like: every object at its kube-apiserver
//! key with the right kind and format, and the objects agreeing with each
//! other as a real cluster's do (owners, selectors, status counts, service
//! membership, leases, events).

use std::collections::BTreeMap;

use serde_json::Value;
use watchd_loadtest::demo::{self, DemoConfig};

use super::etcd::Etcd;

pub fn keys_under<'a>(dump: &'a BTreeMap<String, Value>, prefix: &str) -> Vec<&'a str> {
    dump.keys().filter_map(|k| k.strip_prefix(prefix)).collect()
}

/// The objects under `prefix`.
fn objects_under<'a>(
    dump: &'a BTreeMap<String, Value>,
    prefix: &'a str,
) -> impl Iterator<Item = &'a Value> {
    dump.iter()
        .filter(move |(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
}

/// The object at `/registry/<dir>/<ns>/<name>`, which must exist.
fn object<'a>(dump: &'a BTreeMap<String, Value>, dir: &str, ns: &str, name: &str) -> &'a Value {
    let key = format!("/registry/{dir}/{ns}/{name}");
    dump.get(&key).unwrap_or_else(|| panic!("{key} is missing"))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn uid(obj: &Value) -> &str {
    text(&obj["metadata"]["uid"])
}

fn name(obj: &Value) -> &str {
    text(&obj["metadata"]["name"])
}

fn namespace(obj: &Value) -> &str {
    text(&obj["metadata"]["namespace"])
}

/// Whether a pod's Ready condition is true.
fn pod_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The kind and apiVersion kube-apiserver stores under each key directory.
const LAYOUT: [(&str, &str, &str); 17] = [
    ("namespaces/", "Namespace", "v1"),
    ("minions/", "Node", "v1"),
    ("pods/", "Pod", "v1"),
    ("configmaps/", "ConfigMap", "v1"),
    ("services/specs/", "Service", "v1"),
    ("services/endpoints/", "Endpoints", "v1"),
    ("secrets/", "Secret", "v1"),
    ("serviceaccounts/", "ServiceAccount", "v1"),
    ("events/", "Event", "v1"),
    ("deployments/", "Deployment", "apps/v1"),
    ("replicasets/", "ReplicaSet", "apps/v1"),
    ("daemonsets/", "DaemonSet", "apps/v1"),
    ("endpointslices/", "EndpointSlice", "discovery.k8s.io/v1"),
    ("leases/", "Lease", "coordination.k8s.io/v1"),
    (
        "apiextensions.k8s.io/customresourcedefinitions/",
        "CustomResourceDefinition",
        "apiextensions.k8s.io/v1",
    ),
    ("demo.watchd.dev/widgets/", "Widget", "demo.watchd.dev/v1"),
    (
        "demo.watchd.dev/widgetclasses/",
        "WidgetClass",
        "demo.watchd.dev/v1",
    ),
];

/// Checks the layout and shape of everything the demo wrote, then that the
/// objects agree with each other as a real cluster's do.
pub fn check_cluster(dump: &BTreeMap<String, Value>, cfg: &DemoConfig) {
    check_layout(dump, cfg);
    check_workloads(dump);
    check_services(dump);
    check_leases(dump, cfg);
    check_events(dump);
    check_accounts_and_custom_resources(dump, cfg);
}

/// Every object at its kube-apiserver key, with the right kind, apiVersion,
/// namespace and a unique uid; the expected number of each per namespace.
fn check_layout(dump: &BTreeMap<String, Value>, cfg: &DemoConfig) {
    let namespaces = keys_under(dump, "/registry/namespaces/");
    assert_eq!(
        namespaces,
        [
            "default",
            "demo-1",
            "demo-2",
            "kube-node-lease",
            "kube-public",
            "kube-system"
        ]
    );
    let nodes = demo::node_names(cfg.nodes);
    assert_eq!(keys_under(dump, "/registry/minions/"), nodes);
    let leases = keys_under(dump, "/registry/leases/kube-node-lease/");
    assert_eq!(leases, nodes, "a Lease per node");
    assert_eq!(
        keys_under(dump, "/registry/leases/kube-system/"),
        ["kube-controller-manager", "kube-scheduler"]
    );
    let proxies = keys_under(dump, "/registry/pods/kube-system/");
    assert_eq!(
        proxies.len(),
        cfg.nodes,
        "a kube-proxy pod per node: {proxies:?}"
    );
    assert_eq!(
        keys_under(dump, "/registry/daemonsets/kube-system/"),
        ["kube-proxy"]
    );
    for (dir, expected) in [
        ("services/specs", ["kubernetes"]),
        ("services/endpoints", ["kubernetes"]),
        ("endpointslices", ["kubernetes"]),
    ] {
        assert_eq!(
            keys_under(dump, &format!("/registry/{dir}/default/")),
            expected
        );
    }
    for ns in ["demo-1", "demo-2"] {
        let pods = keys_under(dump, &format!("/registry/pods/{ns}/"));
        assert_eq!(pods.len(), cfg.pods_per_namespace, "pods in {ns}: {pods:?}");
        for name in pods {
            let parts: Vec<&str> = name.split('-').collect();
            assert_eq!(parts.len(), 3, "pod name {name}");
            assert!(demo::APPS.contains(&parts[0]), "pod name {name}");
            assert_eq!((parts[1].len(), parts[2].len()), (10, 5), "pod name {name}");
        }
        assert_eq!(
            keys_under(dump, &format!("/registry/configmaps/{ns}/")),
            ["api-config-2", "web-config-1"]
        );
        let apps = ["api", "web", "worker"];
        for dir in ["deployments", "services/specs", "services/endpoints"] {
            assert_eq!(
                keys_under(dump, &format!("/registry/{dir}/{ns}/")),
                apps,
                "{dir}"
            );
        }
        for dir in ["replicasets", "endpointslices"] {
            let names = keys_under(dump, &format!("/registry/{dir}/{ns}/"));
            assert_eq!(names.len(), 3, "{dir} in {ns}: {names:?}");
        }
        let widgets = keys_under(dump, &format!("/registry/demo.watchd.dev/widgets/{ns}/"));
        assert_eq!(widgets, ["api-widget", "web-widget", "worker-widget"]);
        assert_eq!(
            keys_under(dump, &format!("/registry/serviceaccounts/{ns}/")),
            ["default"]
        );
        assert_eq!(
            keys_under(dump, &format!("/registry/secrets/{ns}/")).len(),
            2
        );
    }
    let mut uids = std::collections::HashSet::new();
    for (key, obj) in dump {
        let path = key.strip_prefix("/registry/").expect("under /registry/");
        let Some((dir, kind, api_version)) = LAYOUT.iter().find(|(d, _, _)| path.starts_with(d))
        else {
            panic!("unexpected key {key}");
        };
        assert_eq!(
            (text(&obj["kind"]), text(&obj["apiVersion"])),
            (*kind, *api_version),
            "{key}"
        );
        let meta = &obj["metadata"];
        assert!(
            meta.get("resourceVersion").is_none(),
            "{key}: resourceVersion"
        );
        let rest = &path[dir.len()..];
        match meta["namespace"].as_str() {
            Some(ns) => assert_eq!(rest, format!("{ns}/{}", name(obj)), "{key}"),
            None => assert_eq!(rest, name(obj), "{key}"),
        }
        let ts = text(&meta["creationTimestamp"]);
        assert!(
            ts.len() == 20 && ts.ends_with('Z'),
            "{key}: creationTimestamp {ts}"
        );
        assert!(uids.insert(uid(obj).to_owned()), "{key}: duplicate uid");
    }
}

/// Pods are owned by their ReplicaSet (or the kube-proxy DaemonSet) and
/// carry its selector's labels; ReplicaSets by their Deployment; the status
/// of each counts the pods it owns.
fn check_workloads(dump: &BTreeMap<String, Value>) {
    let pods: Vec<&Value> = objects_under(dump, "/registry/pods/").collect();
    let owned_by = |owner: &Value| -> Vec<&Value> {
        pods.iter()
            .copied()
            .filter(|p| p["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"])
            .collect()
    };
    for pod in &pods {
        let owner = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(owner["controller"], true, "{}", name(pod));
        let dir = match text(&owner["kind"]) {
            "ReplicaSet" => "replicasets",
            "DaemonSet" => "daemonsets",
            other => panic!("{} is owned by a {other}", name(pod)),
        };
        let controller = object(dump, dir, namespace(pod), text(&owner["name"]));
        assert_eq!(
            text(&owner["uid"]),
            uid(controller),
            "{}: owner uid",
            name(pod)
        );
        let selector = controller["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("selector");
        for (k, v) in selector {
            assert_eq!(&pod["metadata"]["labels"][k], v, "{}: label {k}", name(pod));
        }
        assert_eq!(
            text(&pod["metadata"]["generateName"]),
            format!("{}-", text(&owner["name"]))
        );
    }
    for rs in objects_under(dump, "/registry/replicasets/") {
        let owner = &rs["metadata"]["ownerReferences"][0];
        let deploy = object(dump, "deployments", namespace(rs), text(&owner["name"]));
        assert_eq!(text(&owner["uid"]), uid(deploy), "{}: owner uid", name(rs));
        let hash = text(&rs["metadata"]["labels"]["pod-template-hash"]);
        assert_eq!(name(rs), format!("{}-{hash}", name(deploy)));
        let mine = owned_by(rs);
        let ready = mine.iter().filter(|p| pod_ready(p)).count() as u64;
        let status = &rs["status"];
        assert_eq!(
            status["replicas"],
            mine.len(),
            "{}: status.replicas",
            name(rs)
        );
        assert_eq!(
            rs["spec"]["replicas"],
            mine.len(),
            "{}: spec.replicas",
            name(rs)
        );
        assert_eq!(
            status["readyReplicas"].as_u64().unwrap_or(0),
            ready,
            "{}",
            name(rs)
        );
        assert_eq!(status["availableReplicas"].as_u64().unwrap_or(0), ready);
        let d = &deploy["status"];
        assert_eq!(
            d["readyReplicas"].as_u64().unwrap_or(0),
            ready,
            "{}",
            name(deploy)
        );
        assert_eq!(d["replicas"], status["replicas"], "{}", name(deploy));
        assert_eq!(deploy["spec"]["replicas"], rs["spec"]["replicas"]);
        assert_eq!(deploy["metadata"]["generation"], 1);
        assert_eq!(d["observedGeneration"], 1);
    }
    let ds = object(dump, "daemonsets", "kube-system", "kube-proxy");
    let proxies = owned_by(ds);
    assert_eq!(ds["status"]["desiredNumberScheduled"], proxies.len());
    assert_eq!(ds["status"]["numberReady"], proxies.len());
    for p in proxies {
        assert!(pod_ready(p), "{}", name(p));
        assert_eq!(p["status"]["podIP"], p["status"]["hostIP"], "host network");
    }
}

/// Every Service has a cluster IP; its EndpointSlice and Endpoints list
/// exactly its selected pods that have an IP, ready or not as they are.
fn check_services(dump: &BTreeMap<String, Value>) {
    let slices: Vec<&Value> = objects_under(dump, "/registry/endpointslices/").collect();
    for svc in objects_under(dump, "/registry/services/specs/") {
        let (ns, svc_name) = (namespace(svc), name(svc));
        assert!(
            text(&svc["spec"]["clusterIP"]).starts_with("10.96."),
            "{svc_name}"
        );
        let mine: Vec<&&Value> = slices
            .iter()
            .filter(|s| {
                namespace(s) == ns
                    && s["metadata"]["labels"]["kubernetes.io/service-name"] == svc_name
            })
            .collect();
        assert_eq!(mine.len(), 1, "one EndpointSlice for {ns}/{svc_name}");
        let slice = mine[0];
        let endpoints = object(dump, "services/endpoints", ns, svc_name);
        let mut expected: Vec<(String, bool)> = match svc["spec"]["selector"]["app"].as_str() {
            None => vec![("10.0.0.10".to_owned(), true)],
            Some(app) => objects_under(dump, "/registry/pods/")
                .filter(|p| namespace(p) == ns && p["metadata"]["labels"]["app"] == app)
                .filter(|p| p["status"]["phase"] == "Running")
                .filter_map(|p| Some((p["status"]["podIP"].as_str()?.to_owned(), pod_ready(p))))
                .collect(),
        };
        expected.sort();
        let mut listed: Vec<(String, bool)> = slice["endpoints"]
            .as_array()
            .map(|e| {
                e.iter()
                    .map(|e| {
                        (
                            text(&e["addresses"][0]).to_owned(),
                            e["conditions"]["ready"] == true,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        listed.sort();
        assert_eq!(listed, expected, "EndpointSlice of {ns}/{svc_name}");
        if svc_name != "kubernetes" {
            let owner = &slice["metadata"]["ownerReferences"][0];
            assert_eq!(text(&owner["uid"]), uid(svc), "slice owner");
            for e in slice["endpoints"].as_array().into_iter().flatten() {
                let target = &e["targetRef"];
                let pod = object(dump, "pods", ns, text(&target["name"]));
                assert_eq!(target["uid"], pod["metadata"]["uid"], "targetRef");
                assert_eq!(e["nodeName"], pod["spec"]["nodeName"], "nodeName");
            }
        }
        let subset = &endpoints["subsets"][0];
        let ips = |field: &str| -> Vec<String> {
            let mut ips: Vec<String> = subset[field]
                .as_array()
                .map(|a| a.iter().map(|a| text(&a["ip"]).to_owned()).collect())
                .unwrap_or_default();
            ips.sort();
            ips
        };
        let of = |ready: bool| -> Vec<String> {
            expected
                .iter()
                .filter(|e| e.1 == ready)
                .map(|e| e.0.clone())
                .collect()
        };
        assert_eq!(ips("addresses"), of(true), "Endpoints of {ns}/{svc_name}");
        assert_eq!(
            ips("notReadyAddresses"),
            of(false),
            "Endpoints of {ns}/{svc_name}"
        );
    }
}

/// Node Leases are held by their node (40 s), owned by the Node.
fn check_leases(dump: &BTreeMap<String, Value>, cfg: &DemoConfig) {
    for node in demo::node_names(cfg.nodes) {
        let lease = object(dump, "leases", "kube-node-lease", &node);
        assert_eq!(lease["spec"]["holderIdentity"], node.as_str());
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        let renewed = text(&lease["spec"]["renewTime"]);
        assert_eq!(renewed.len(), 27, "MicroTime {renewed}");
        let owner = &lease["metadata"]["ownerReferences"][0];
        let n = &dump[&format!("/registry/minions/{node}")];
        assert_eq!(
            (text(&owner["kind"]), text(&owner["uid"])),
            ("Node", uid(n))
        );
    }
}

/// Events are shaped as their reporter writes them, and every pod has its
/// Scheduled event.
fn check_events(dump: &BTreeMap<String, Value>) {
    let events: Vec<&Value> = objects_under(dump, "/registry/events/").collect();
    for ev in &events {
        let involved = &ev["involvedObject"];
        assert_eq!(namespace(ev), text(&involved["namespace"]), "{}", name(ev));
        assert!(name(ev).starts_with(&format!("{}.", text(&involved["name"]))));
        assert!(!text(&involved["uid"]).is_empty() && !text(&involved["kind"]).is_empty());
        assert!(
            matches!(text(&ev["type"]), "Normal" | "Warning"),
            "{}",
            name(ev)
        );
        if ev["reportingComponent"] == "default-scheduler" {
            assert_eq!(text(&ev["eventTime"]).len(), 27, "{}: eventTime", name(ev));
            assert_eq!(ev["reason"], "Scheduled");
        } else {
            let source = text(&ev["source"]["component"]);
            assert_eq!(ev["reportingComponent"], source, "{}", name(ev));
            assert!(
                ev["count"].as_u64().is_some_and(|c| c >= 1),
                "{}: count",
                name(ev)
            );
            assert!(ev["firstTimestamp"].is_string() && ev["lastTimestamp"].is_string());
            if source == "kubelet" {
                assert!(ev["source"]["host"]
                    .as_str()
                    .is_some_and(|h| h.starts_with("node-")));
            }
        }
    }
    for pod in objects_under(dump, "/registry/pods/") {
        let scheduled = events.iter().any(|e| {
            e["reason"] == "Scheduled" && e["involvedObject"]["uid"] == pod["metadata"]["uid"]
        });
        assert!(scheduled, "no Scheduled event for {}", name(pod));
    }
}

/// Token Secrets name their ServiceAccount; widgets name an existing class.
fn check_accounts_and_custom_resources(dump: &BTreeMap<String, Value>, cfg: &DemoConfig) {
    for ns in demo::demo_namespace_names(cfg.namespaces) {
        let sa = object(dump, "serviceaccounts", &ns, "default");
        let secrets: Vec<&Value> = objects_under(dump, "/registry/secrets/")
            .filter(|s| namespace(s) == ns)
            .collect();
        let token = secrets
            .iter()
            .find(|s| s["type"] == "kubernetes.io/service-account-token")
            .expect("token secret");
        let ann = &token["metadata"]["annotations"];
        assert_eq!(ann["kubernetes.io/service-account.name"], "default");
        assert_eq!(text(&ann["kubernetes.io/service-account.uid"]), uid(sa));
        assert!(secrets.iter().any(|s| s["type"] == "Opaque"));
    }
    for crd in ["widgets", "widgetclasses"] {
        let key = format!(
            "/registry/apiextensions.k8s.io/customresourcedefinitions/{crd}.demo.watchd.dev"
        );
        let obj = dump.get(&key).unwrap_or_else(|| panic!("{key} is missing"));
        assert_eq!(obj["status"]["storedVersions"][0], "v1");
    }
    for w in objects_under(dump, "/registry/demo.watchd.dev/widgets/") {
        let class = text(&w["spec"]["className"]);
        assert!(
            dump.contains_key(&format!("/registry/demo.watchd.dev/widgetclasses/{class}")),
            "{}: class {class}",
            name(w)
        );
    }
}

/// Every Event has an etcd lease granted for `ttl` (plus kube-apiserver's
/// reuse window) that is still running.
pub async fn check_event_leases(etcd: &Etcd, granted_ttl: i64) {
    let leases = etcd.leases_under("/registry/events/").await;
    assert!(!leases.is_empty(), "no events");
    let mut distinct: Vec<i64> = leases.iter().map(|(_, l)| *l).collect();
    distinct.sort_unstable();
    distinct.dedup();
    for (key, lease) in &leases {
        assert_ne!(*lease, 0, "{key} has no lease");
    }
    let mut client = etcd.client().await;
    for lease in distinct {
        let ttl = client
            .lease_time_to_live(lease, None)
            .await
            .expect("lease ttl");
        assert_eq!(ttl.granted_ttl(), granted_ttl, "lease {lease}");
        assert!(ttl.ttl() > 0, "lease {lease} expired");
    }
}

/// [`check_cluster`] minus the events (expired, in [`leases_are_renewed_and_events_expire`]).
pub fn check_cluster_without_events(dump: &BTreeMap<String, Value>, cfg: &DemoConfig) {
    check_layout(dump, cfg);
    check_workloads(dump);
    check_services(dump);
    check_leases(dump, cfg);
    check_accounts_and_custom_resources(dump, cfg);
}
