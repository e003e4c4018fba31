//! Core v1 resources other than pods and events: nodes, namespaces, services, config maps
//! and secrets.

use std::collections::BTreeSet;

use serde_json::Value;

use super::format::{load_balancer_ingress, strings};
use super::{
    age_cell, age_column, at, bool_at, column, format_labels, int_at, list_at, map_len, name_cell,
    name_column, or_none, str_at, str_or, string_cell, BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("", "nodes", node_columns, node_cells),
    BuiltinPrinter::new("", "namespaces", namespace_columns, namespace_cells),
    BuiltinPrinter::new("", "services", service_columns, service_cells),
    BuiltinPrinter::new("", "configmaps", config_map_columns, config_map_cells),
    BuiltinPrinter::new("", "secrets", secret_columns, secret_cells),
];

// ---- nodes ----

const ROLE_LABEL_PREFIX: &str = "node-role.kubernetes.io/";
const ROLE_LABEL: &str = "kubernetes.io/role";

/// Node columns.
fn node_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Status",
            "string",
            "",
            0,
            "Whether the node is ready, and whether it takes new pods.",
        ),
        column(
            "Roles",
            "string",
            "",
            0,
            "Roles the labels of the node give it.",
        ),
        age_column(),
        column(
            "Version",
            "string",
            "",
            0,
            "Version of the kubelet on the node.",
        ),
        column(
            "Internal-IP",
            "string",
            "",
            1,
            "Internal IP address of the node.",
        ),
        column(
            "External-IP",
            "string",
            "",
            1,
            "External IP address of the node.",
        ),
        column(
            "OS-Image",
            "string",
            "",
            1,
            "Operating system image of the node.",
        ),
        column(
            "Kernel-Version",
            "string",
            "",
            1,
            "Kernel version of the node.",
        ),
        column(
            "Container-Runtime",
            "string",
            "",
            1,
            "Container runtime of the node, with its version.",
        ),
    ]
}

/// A node row.
fn node_cells(node: &Value, now_unix: i64) -> Vec<Value> {
    // The last Ready condition wins, as in a map keyed by condition type.
    let ready = list_at(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == "Ready");
    let mut status = match ready {
        Some(c) if str_at(c, &["status"]) == "True" => "Ready".to_owned(),
        Some(_) => "NotReady".to_owned(),
        None => "Unknown".to_owned(),
    };
    if bool_at(node, &["spec", "unschedulable"]) {
        status.push_str(",SchedulingDisabled");
    }
    let info = |field: &str| -> String {
        str_or(node, &["status", "nodeInfo", field], "<unknown>").to_owned()
    };
    vec![
        name_cell(node),
        string_cell(status),
        string_cell(or_none(&node_roles(node).join(","))),
        age_cell(node, now_unix),
        string_cell(str_at(node, &["status", "nodeInfo", "kubeletVersion"])),
        string_cell(node_address(node, "InternalIP")),
        string_cell(node_address(node, "ExternalIP")),
        string_cell(info("osImage")),
        string_cell(info("kernelVersion")),
        string_cell(info("containerRuntimeVersion")),
    ]
}

/// Sorted, distinct roles from `node-role.kubernetes.io/<role>` label keys and the value of
/// a `kubernetes.io/role` label.
fn node_roles(node: &Value) -> Vec<&str> {
    let mut roles = BTreeSet::new();
    if let Some(labels) = at(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix(ROLE_LABEL_PREFIX) {
                if !role.is_empty() {
                    roles.insert(role);
                }
            } else if key == ROLE_LABEL {
                match value.as_str() {
                    Some(role) if !role.is_empty() => {
                        roles.insert(role);
                    }
                    _ => {}
                }
            }
        }
    }
    roles.into_iter().collect()
}

/// The first address of `type_` in status.addresses, `<none>` if there is none.
fn node_address(node: &Value, type_: &str) -> String {
    list_at(node, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == type_)
        .map_or_else(|| "<none>".into(), |a| str_at(a, &["address"]).to_owned())
}

// ---- namespaces ----

/// Namespace columns.
fn namespace_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Status", "string", "", 0, "Phase of the namespace."),
        age_column(),
    ]
}

/// A namespace row; the phase defaults to Active as the API does.
fn namespace_cells(ns: &Value, now_unix: i64) -> Vec<Value> {
    let phase = str_or(ns, &["status", "phase"], "Active");
    vec![name_cell(ns), string_cell(phase), age_cell(ns, now_unix)]
}

// ---- services ----

/// Service columns.
fn service_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Type", "string", "", 0, "How the service is exposed."),
        column(
            "Cluster-IP",
            "string",
            "",
            0,
            "IP address of the service inside the cluster.",
        ),
        column(
            "External-IP",
            "string",
            "",
            0,
            "Addresses the service can be reached at from outside the cluster.",
        ),
        column("Port(s)", "string", "", 0, "Ports the service exposes."),
        age_column(),
        column(
            "Selector",
            "string",
            "",
            1,
            "Labels of the pods the service sends traffic to.",
        ),
    ]
}

/// A service row (printed wide: load balancer addresses are never shortened).
fn service_cells(svc: &Value, now_unix: i64) -> Vec<Value> {
    let type_ = str_or(svc, &["spec", "type"], "ClusterIP");
    let cluster_ip = match list_at(svc, &["spec", "clusterIPs"]).first() {
        Some(ip) => ip.as_str().unwrap_or(""),
        None => str_at(svc, &["spec", "clusterIP"]),
    };
    vec![
        name_cell(svc),
        string_cell(type_),
        string_cell(or_none(cluster_ip)),
        string_cell(service_external_ip(svc, type_)),
        string_cell(or_none(&service_ports(svc))),
        age_cell(svc, now_unix),
        string_cell(format_labels(at(svc, &["spec", "selector"]))),
    ]
}

/// The External-IP cell for a service of `type_`.
fn service_external_ip(svc: &Value, type_: &str) -> String {
    let external_ips = strings(list_at(svc, &["spec", "externalIPs"]));
    match type_ {
        "ClusterIP" | "NodePort" => or_none(&external_ips.join(",")),
        "LoadBalancer" => {
            let mut all =
                load_balancer_ingress(list_at(svc, &["status", "loadBalancer", "ingress"]));
            all.extend(external_ips);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".into(),
    }
}

/// `port/protocol` or `port:nodePort/protocol`, comma-joined; protocol defaults to TCP.
fn service_ports(svc: &Value) -> String {
    let ports: Vec<String> = list_at(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            let node_port = int_at(p, &["nodePort"]);
            let protocol = str_or(p, &["protocol"], "TCP");
            if node_port > 0 {
                format!("{port}:{node_port}/{protocol}")
            } else {
                format!("{port}/{protocol}")
            }
        })
        .collect();
    ports.join(",")
}

// ---- config maps and secrets ----

/// Config map columns.
fn config_map_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Data", "string", "", 0, "Number of keys in the config map."),
        age_column(),
    ]
}

/// A config map row: keys in data plus keys in binaryData.
fn config_map_cells(cm: &Value, now_unix: i64) -> Vec<Value> {
    let keys = map_len(cm, &["data"]) + map_len(cm, &["binaryData"]);
    vec![name_cell(cm), Value::from(keys), age_cell(cm, now_unix)]
}

/// Secret columns.
fn secret_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Type", "string", "", 0, "Type of the secret."),
        column("Data", "string", "", 0, "Number of keys in the secret."),
        age_column(),
    ]
}

/// A secret row; the type defaults to Opaque as the API does.
fn secret_cells(secret: &Value, now_unix: i64) -> Vec<Value> {
    let type_ = str_or(secret, &["type"], "Opaque");
    vec![
        name_cell(secret),
        string_cell(type_),
        Value::from(map_len(secret, &["data"])),
        age_cell(secret, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::test_support::{info, names, ts, T0};
    use super::super::{cells, columns};

    fn row(resource: &str, obj: &Value) -> Vec<Value> {
        cells(&info("", resource, ""), obj, T0)
    }

    #[test]
    fn node_columns_match_upstream() {
        let cols = columns(&info("", "nodes", "Node"));
        assert_eq!(
            names(&cols),
            [
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        let prio: Vec<i32> = cols.iter().map(|c| c.priority).collect();
        assert_eq!(prio, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn ready_control_plane_node() {
        let node = json!({
            "metadata": {"name": "cp-1", "creationTimestamp": ts(-400 * 86400),
                         "labels": {"node-role.kubernetes.io/control-plane": "",
                                    "node-role.kubernetes.io/etcd": "true",
                                    "node-role.kubernetes.io/": "",
                                    "kubernetes.io/role": "master",
                                    "kubernetes.io/hostname": "cp-1"}},
            "spec": {"unschedulable": true},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"},
                               {"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "cp-1"},
                              {"type": "InternalIP", "address": "192.168.1.10"},
                              {"type": "InternalIP", "address": "fd00::10"}],
                "nodeInfo": {"kubeletVersion": "v1.31.2", "osImage": "Ubuntu 24.04 LTS",
                             "kernelVersion": "6.8.0-45-generic",
                             "containerRuntimeVersion": "containerd://1.7.22"}
            }
        });
        assert_eq!(
            row("nodes", &node),
            [
                json!("cp-1"),
                json!("Ready,SchedulingDisabled"),
                json!("control-plane,etcd,master"),
                json!("400d"),
                json!("v1.31.2"),
                json!("192.168.1.10"),
                json!("<none>"),
                json!("Ubuntu 24.04 LTS"),
                json!("6.8.0-45-generic"),
                json!("containerd://1.7.22")
            ]
        );
    }

    #[test]
    fn node_without_status() {
        assert_eq!(
            row("nodes", &json!({"metadata": {"name": "new"}})),
            [
                json!("new"),
                json!("Unknown"),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!("<none>"),
                json!("<none>"),
                json!("<unknown>"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
        let unknown = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert_eq!(row("nodes", &unknown)[1], json!("NotReady"));
    }

    #[test]
    fn namespaces() {
        let cols = columns(&info("", "namespaces", "Namespace"));
        assert_eq!(names(&cols), ["Name", "Status", "Age"]);
        let ns = json!({"metadata": {"name": "kube-system", "creationTimestamp": ts(-90)},
                        "status": {"phase": "Terminating"}});
        assert_eq!(
            row("namespaces", &ns),
            [json!("kube-system"), json!("Terminating"), json!("90s")]
        );
        assert_eq!(row("namespaces", &json!({}))[1], json!("Active"));
    }

    #[test]
    fn service_columns_match_upstream() {
        let cols = columns(&info("", "services", "Service"));
        assert_eq!(
            names(&cols),
            [
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age",
                "Selector"
            ]
        );
        assert_eq!(cols[6].priority, 1);
        assert!(cols[..6].iter().all(|c| c.priority == 0));
    }

    #[test]
    fn cluster_ip_service() {
        let svc = json!({
            "metadata": {"name": "web", "creationTimestamp": ts(-3 * 3600)},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10",
                     "clusterIPs": ["10.96.0.10", "fd00::a"],
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
                               {"name": "dns", "port": 53, "protocol": "UDP"}],
                     "selector": {"tier": "front", "app": "web"}}
        });
        assert_eq!(
            row("services", &svc),
            [
                json!("web"),
                json!("ClusterIP"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80/TCP,53/UDP"),
                json!("3h"),
                json!("app=web,tier=front")
            ]
        );
    }

    #[test]
    fn headless_nodeport_and_defaults() {
        let headless = json!({"spec": {"clusterIP": "None", "ports": [{"port": 5432}]}});
        let r = row("services", &headless);
        assert_eq!(r[1], json!("ClusterIP"));
        assert_eq!(r[2], json!("None"));
        assert_eq!(r[4], json!("5432/TCP"));
        assert_eq!(r[6], json!("<none>"));
        let node_port = json!({"spec": {"type": "NodePort", "clusterIPs": ["10.0.0.1"],
                                        "externalIPs": ["1.2.3.4", "5.6.7.8"],
                                        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}});
        let r = row("services", &node_port);
        assert_eq!(r[3], json!("1.2.3.4,5.6.7.8"));
        assert_eq!(r[4], json!("80:30080/TCP"));
        let empty = row("services", &json!({}));
        assert_eq!(empty[2], json!("<none>"));
        assert_eq!(empty[3], json!("<none>"));
        assert_eq!(empty[4], json!("<none>"));
        assert_eq!(empty[5], json!("<unknown>"));
    }

    #[test]
    fn load_balancer_and_external_name() {
        let lb = |ingress: Value, external: Value| {
            json!({"spec": {"type": "LoadBalancer", "externalIPs": external},
                   "status": {"loadBalancer": {"ingress": ingress}}})
        };
        assert_eq!(
            row("services", &lb(json!([]), json!([])))[3],
            json!("<pending>")
        );
        let long = json!([{"hostname": "a1b2c3d4e5f6-123456789.eu-west-1.elb.amazonaws.com"},
                          {"ip": "203.0.113.9"}, {"ip": "203.0.113.9"}, {}]);
        assert_eq!(
            row("services", &lb(long, json!(["198.51.100.1"])))[3],
            json!("203.0.113.9,a1b2c3d4e5f6-123456789.eu-west-1.elb.amazonaws.com,198.51.100.1")
        );
        assert_eq!(
            row("services", &lb(json!(null), json!(["198.51.100.1"])))[3],
            json!("198.51.100.1")
        );
        let ext = json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        let r = row("services", &ext);
        assert_eq!(r[2], json!("<none>"));
        assert_eq!(r[3], json!("db.example.com"));
        let odd = json!({"spec": {"type": "Mystery"}});
        assert_eq!(row("services", &odd)[3], json!("<unknown>"));
    }

    #[test]
    fn config_maps_and_secrets() {
        assert_eq!(
            names(&columns(&info("", "configmaps", "ConfigMap"))),
            ["Name", "Data", "Age"]
        );
        assert_eq!(
            names(&columns(&info("", "secrets", "Secret"))),
            ["Name", "Type", "Data", "Age"]
        );
        let cm = json!({"metadata": {"name": "kube-root-ca.crt", "creationTimestamp": ts(-60)},
                        "data": {"ca.crt": "..."}, "binaryData": {"blob": "AAEC"}});
        assert_eq!(
            row("configmaps", &cm),
            [json!("kube-root-ca.crt"), json!(2), json!("60s")]
        );
        assert_eq!(row("configmaps", &json!({}))[1], json!(0));
        let secret = json!({"metadata": {"name": "tls", "creationTimestamp": ts(-600)},
                            "type": "kubernetes.io/tls",
                            "data": {"tls.crt": "eA==", "tls.key": "eQ=="}});
        assert_eq!(
            row("secrets", &secret),
            [
                json!("tls"),
                json!("kubernetes.io/tls"),
                json!(2),
                json!("10m")
            ]
        );
        let bare = row("secrets", &json!({"metadata": {"name": "s"}, "data": null}));
        assert_eq!(
            bare,
            [json!("s"), json!("Opaque"), json!(0), json!("<unknown>")]
        );
    }
}
