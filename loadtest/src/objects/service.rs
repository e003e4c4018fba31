//! Services, and what the endpoint controllers derive from them: the
//! EndpointSlice (`discovery.k8s.io/v1`) and the legacy Endpoints object.
//!
//! [`set_slice_endpoints`] and [`set_endpoints_subsets`] render a Service's
//! [`Backend`]s (its selected pods that have an IP) and leave the object
//! untouched when nothing changed, so the demo writes only real changes.

use serde_json::{json, Map, Value};

use super::{controller_ref_to, metadata, node_zone, Rng};

/// Label joining an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// The `kubernetes` Service's cluster IP: the first of the service CIDR.
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// Where the demo's (imaginary) kube-apiserver listens.
pub const APISERVER_IP: &str = "10.0.0.10";

/// A port of a Service: its name, the Service port and the target port on the pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServicePort {
    /// Port name (the container port's name, which is also the target).
    pub name: &'static str,
    /// Port on the cluster IP.
    pub port: u16,
    /// Port on the endpoints.
    pub target: u16,
}

/// An endpoint of a Service: a pod (or, for `kubernetes`, the apiserver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// The pod IP.
    pub ip: String,
    /// Whether the pod is ready (not-ready ones are listed as such).
    pub ready: bool,
    /// The pod behind the address: node, name and uid.
    pub pod: Option<PodRef>,
}

/// The pod behind a [`Backend`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    /// Node the pod runs on.
    pub node: String,
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
}

/// The Service port of a demo application: `web` on 80, the others on
/// their container port, each targeting the named container port.
pub fn app_service_port(app: &str) -> ServicePort {
    let (name, target) = super::app_port(app);
    let port = if name == "http" { 80 } else { target };
    ServicePort { name, port, target }
}

/// A cluster IP in the service CIDR `10.96.0.0/12` for the `n`-th Service
/// (`n` ≥ 1; 1 is the `kubernetes` Service).
pub fn cluster_ip(n: u32) -> String {
    format!(
        "10.{}.{}.{}",
        96 + (n >> 16) % 16,
        (n >> 8) & 0xff,
        n & 0xff
    )
}

fn service_object(
    ns: &str,
    name: &str,
    labels: &[(&str, &str)],
    spec: Value,
    rng: &mut Rng,
) -> Value {
    json!({
        "kind": "Service",
        "apiVersion": "v1",
        "metadata": metadata(name, Some(ns), labels, rng),
        "spec": spec,
        "status": { "loadBalancer": {} },
    })
}

fn cluster_ip_spec(ip: &str, ports: &[ServicePort]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|p| json!({ "name": p.name, "protocol": "TCP", "port": p.port, "targetPort": p.target }))
        .collect();
    json!({
        "ports": ports,
        "clusterIP": ip,
        "clusterIPs": [ip],
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "internalTrafficPolicy": "Cluster",
    })
}

/// Builds the `v1` ClusterIP Service of `app` selecting `app=<app>`; its
/// port targets the pods' named port (`targetPort: "http"`).
pub fn service(ns: &str, app: &str, ip: &str, port: ServicePort, rng: &mut Rng) -> Value {
    let mut spec = cluster_ip_spec(ip, &[port]);
    spec["ports"][0]["targetPort"] = Value::String(port.name.to_owned());
    spec["selector"] = json!({ "app": app });
    service_object(ns, app, &[("app", app)], spec, rng)
}

/// The `kubernetes` Service in `default`, which kube-apiserver maintains.
pub fn kubernetes_service(rng: &mut Rng) -> Value {
    let labels = [("component", "apiserver"), ("provider", "kubernetes")];
    let spec = cluster_ip_spec(KUBERNETES_SERVICE_IP, &[kubernetes_port()]);
    service_object("default", "kubernetes", &labels, spec, rng)
}

/// The `kubernetes` Service's port.
pub fn kubernetes_port() -> ServicePort {
    ServicePort {
        name: "https",
        port: 443,
        target: 6443,
    }
}

/// The endpoints of the `kubernetes` Service: the apiserver.
pub fn apiserver_backends() -> Vec<Backend> {
    vec![Backend {
        ip: APISERVER_IP.to_owned(),
        ready: true,
        pod: None,
    }]
}

/// The labels of `svc`, as the endpoint controllers copy them.
fn service_labels(svc: &Value) -> Map<String, Value> {
    svc["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn endpoint_ports(ports: &[ServicePort]) -> Vec<Value> {
    ports
        .iter()
        .map(|p| json!({ "name": p.name, "protocol": "TCP", "port": p.target }))
        .collect()
}

/// Builds the EndpointSlice `name` of Service `svc` (owned by it, labelled
/// with its name), with no endpoints yet. The `kubernetes` Service's slice is
/// kube-apiserver's own: no controller label, no owner.
pub fn endpoint_slice(svc: &Value, name: &str, ports: &[ServicePort], rng: &mut Rng) -> Value {
    let svc_name = super::name(svc);
    let ns = svc["metadata"]["namespace"].as_str().unwrap_or("default");
    let mut labels = Map::new();
    labels.insert(SERVICE_NAME_LABEL.to_owned(), json!(svc_name));
    let mut meta = metadata(name, Some(ns), &[], rng);
    meta["generation"] = json!(1);
    if svc_name != "kubernetes" {
        labels.extend(service_labels(svc));
        labels.insert(
            MANAGED_BY_LABEL.to_owned(),
            json!("endpointslice-controller.k8s.io"),
        );
        meta["generateName"] = Value::String(format!("{svc_name}-"));
        meta["ownerReferences"] = json!([controller_ref_to(svc)]);
    }
    meta["labels"] = Value::Object(labels);
    json!({
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": [],
        "ports": endpoint_ports(ports),
    })
}

/// Builds the legacy Endpoints object of Service `svc` (same name), empty.
pub fn endpoints(svc: &Value, rng: &mut Rng) -> Value {
    let ns = svc["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = super::name(svc);
    let mut meta = metadata(name, Some(ns), &[], rng);
    let labels = if name == "kubernetes" {
        // kube-apiserver's own: the mirroring controller must leave it alone.
        json!({ "endpointslice.kubernetes.io/skip-mirror": "true" })
    } else {
        Value::Object(service_labels(svc))
    };
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        meta["labels"] = labels;
    }
    json!({ "kind": "Endpoints", "apiVersion": "v1", "metadata": meta })
}

fn target_ref(ns: &str, pod: &PodRef) -> Value {
    json!({ "kind": "Pod", "namespace": ns, "name": pod.name, "uid": pod.uid })
}

/// Sets the slice's endpoints to `backends` (in the given order); when they
/// changed, bumps `generation` and the trigger-time annotation to `now`.
pub fn set_slice_endpoints(slice: &mut Value, backends: &[Backend], now: &str) {
    let ns = slice["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let endpoints: Vec<Value> = backends
        .iter()
        .map(|b| {
            let mut e = json!({
                "addresses": [b.ip],
                "conditions": { "ready": b.ready, "serving": b.ready, "terminating": false },
            });
            if let Some(pod) = &b.pod {
                e["targetRef"] = target_ref(&ns, pod);
                e["nodeName"] = json!(pod.node);
                e["zone"] = json!(node_zone(&pod.node));
            }
            e
        })
        .collect();
    let endpoints = Value::Array(endpoints);
    if slice["endpoints"] == endpoints {
        return;
    }
    slice["endpoints"] = endpoints;
    let meta = &mut slice["metadata"];
    meta["generation"] = json!(meta["generation"].as_u64().unwrap_or(0) + 1);
    if meta.get("ownerReferences").is_some() {
        if !meta["annotations"].is_object() {
            meta["annotations"] = json!({});
        }
        meta["annotations"][TRIGGER_TIME] = json!(now);
    }
}

/// Sets the Endpoints' one subset from `backends` (ready ones in
/// `addresses`, the rest in `notReadyAddresses`; no subset when there are
/// none); when it changed, the trigger-time annotation becomes `now`.
pub fn set_endpoints_subsets(
    ep: &mut Value,
    backends: &[Backend],
    ports: &[ServicePort],
    now: &str,
) {
    let ns = ep["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let address = |b: &Backend| {
        let mut a = json!({ "ip": b.ip });
        if let Some(pod) = &b.pod {
            a["nodeName"] = json!(pod.node);
            a["targetRef"] = target_ref(&ns, pod);
        }
        a
    };
    let ready: Vec<Value> = backends.iter().filter(|b| b.ready).map(address).collect();
    let not_ready: Vec<Value> = backends.iter().filter(|b| !b.ready).map(address).collect();
    let subsets = if backends.is_empty() {
        Value::Null
    } else {
        let mut subset = Map::new();
        if !ready.is_empty() {
            subset.insert("addresses".to_owned(), Value::Array(ready));
        }
        if !not_ready.is_empty() {
            subset.insert("notReadyAddresses".to_owned(), Value::Array(not_ready));
        }
        subset.insert("ports".to_owned(), Value::Array(endpoint_ports(ports)));
        json!([subset])
    };
    if ep.get("subsets").unwrap_or(&Value::Null) == &subsets {
        return;
    }
    let Some(obj) = ep.as_object_mut() else {
        return;
    };
    match subsets {
        Value::Null => obj.remove("subsets"),
        s => obj.insert("subsets".to_owned(), s),
    };
    if super::name(ep) != "kubernetes" {
        let meta = &mut ep["metadata"];
        if !meta["annotations"].is_object() {
            meta["annotations"] = json!({});
        }
        meta["annotations"][TRIGGER_TIME] = json!(now);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::assert_common;
    use super::*;

    const WEB: ServicePort = ServicePort {
        name: "http",
        port: 80,
        target: 8080,
    };

    fn backend(name: &str, ip: &str, ready: bool) -> Backend {
        Backend {
            ip: ip.to_owned(),
            ready,
            pod: Some(PodRef {
                node: "node-1".to_owned(),
                name: name.to_owned(),
                uid: format!("uid-{name}"),
            }),
        }
    }

    #[test]
    fn app_ports() {
        assert_eq!(app_service_port("web"), WEB);
        assert_eq!(app_service_port("api").port, 9090);
    }

    #[test]
    fn cluster_ips() {
        assert_eq!(cluster_ip(1), KUBERNETES_SERVICE_IP);
        assert_eq!(cluster_ip(300), "10.96.1.44");
        assert_eq!(cluster_ip(70_000), "10.97.17.112");
    }

    #[test]
    fn service_slice_and_endpoints_follow_backends() {
        let mut rng = Rng::new(1);
        let svc = service("demo-1", "web", "10.96.0.100", WEB, &mut rng);
        assert_common(&svc, "Service", "web", Some("demo-1"));
        assert_eq!(svc["spec"]["selector"]["app"], "web");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
        assert_eq!(svc["spec"]["clusterIPs"][0], "10.96.0.100");

        let mut slice = endpoint_slice(&svc, "web-x7k2p", &[WEB], &mut rng);
        assert_common(&slice, "EndpointSlice", "web-x7k2p", Some("demo-1"));
        let labels = &slice["metadata"]["labels"];
        assert_eq!(labels[SERVICE_NAME_LABEL], "web");
        assert_eq!(labels["app"], "web");
        assert_eq!(
            slice["metadata"]["ownerReferences"][0]["uid"],
            svc["metadata"]["uid"]
        );
        assert_eq!(slice["ports"][0]["port"], 8080);
        let mut ep = endpoints(&svc, &mut rng);
        assert_common(&ep, "Endpoints", "web", Some("demo-1"));

        let backends = [
            backend("a", "10.244.1.2", true),
            backend("b", "10.244.1.3", false),
        ];
        set_slice_endpoints(&mut slice, &backends, "2026-01-01T00:00:00Z");
        set_endpoints_subsets(&mut ep, &backends, &[WEB], "2026-01-01T00:00:00Z");
        assert_eq!(slice["metadata"]["generation"], 2);
        let e = &slice["endpoints"];
        assert_eq!(e[0]["addresses"][0], "10.244.1.2");
        assert_eq!(e[0]["conditions"]["ready"], true);
        assert_eq!(e[1]["conditions"]["ready"], false);
        assert_eq!(e[0]["targetRef"]["name"], "a");
        assert_eq!(e[0]["zone"], "zone-b");
        let subset = &ep["subsets"][0];
        assert_eq!(subset["addresses"][0]["ip"], "10.244.1.2");
        assert_eq!(subset["notReadyAddresses"][0]["ip"], "10.244.1.3");
        assert_eq!(subset["ports"][0]["port"], 8080);
        for obj in [&svc, &slice, &ep] {
            watchd::codec::pbjson::encode_stored(obj).expect("valid");
        }

        // The same backends change nothing, timestamps included.
        let (s0, e0) = (slice.clone(), ep.clone());
        set_slice_endpoints(&mut slice, &backends, "2026-01-02T00:00:00Z");
        set_endpoints_subsets(&mut ep, &backends, &[WEB], "2026-01-02T00:00:00Z");
        assert_eq!((&slice, &ep), (&s0, &e0));

        set_endpoints_subsets(&mut ep, &[], &[WEB], "2026-01-03T00:00:00Z");
        assert!(ep.get("subsets").is_none());
        set_slice_endpoints(&mut slice, &[], "2026-01-03T00:00:00Z");
        assert_eq!(slice["endpoints"], json!([]));
        assert_eq!(slice["metadata"]["generation"], 3);
    }

    #[test]
    fn kubernetes_service_points_at_the_apiserver() {
        let mut rng = Rng::new(2);
        let svc = kubernetes_service(&mut rng);
        assert_eq!(svc["spec"]["clusterIP"], KUBERNETES_SERVICE_IP);
        assert!(svc["spec"].get("selector").is_none());
        let mut slice = endpoint_slice(&svc, "kubernetes", &[kubernetes_port()], &mut rng);
        let mut ep = endpoints(&svc, &mut rng);
        let now = "2026-01-01T00:00:00Z";
        set_slice_endpoints(&mut slice, &apiserver_backends(), now);
        set_endpoints_subsets(&mut ep, &apiserver_backends(), &[kubernetes_port()], now);
        assert!(slice["metadata"].get("ownerReferences").is_none());
        assert_eq!(
            slice["metadata"]["labels"],
            json!({ SERVICE_NAME_LABEL: "kubernetes" })
        );
        assert!(slice["metadata"].get("annotations").is_none());
        assert_eq!(slice["endpoints"][0]["addresses"][0], APISERVER_IP);
        assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], APISERVER_IP);
        assert_eq!(ep["subsets"][0]["ports"][0]["port"], 6443);
        for obj in [&svc, &slice, &ep] {
            watchd::codec::pbjson::encode_stored(obj).expect("valid");
        }
    }
}
