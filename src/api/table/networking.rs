//! networking.k8s.io/v1: Ingresses, IngressClasses, NetworkPolicies, IPAddresses and
//! ServiceCIDRs.
//!
//! The IPAddress printer upstream declares two columns (Name, ParentRef) but fills three
//! cells (the third is the age); that is reproduced, and clients print the declared ones.

use serde_json::Value;

use super::format::{format_label_selector, load_balancer_ingress, strings};
use super::{
    age_cell, age_column, at, column, list_at, name_cell, name_column, obj_at, str_at, string_cell,
    BuiltinPrinter, Column,
};

const GROUP: &str = "networking.k8s.io";

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new(GROUP, "ingresses", ingress_columns, ingress_cells),
    BuiltinPrinter::new(
        GROUP,
        "ingressclasses",
        ingress_class_columns,
        ingress_class_cells,
    ),
    BuiltinPrinter::new(
        GROUP,
        "networkpolicies",
        network_policy_columns,
        network_policy_cells,
    ),
    BuiltinPrinter::new(GROUP, "ipaddresses", ip_address_columns, ip_address_cells),
    BuiltinPrinter::new(
        GROUP,
        "servicecidrs",
        service_cidr_columns,
        service_cidr_cells,
    ),
];

/// How many hosts the Hosts cell shows before "+ N more...".
const SHOWN_HOSTS: usize = 3;

/// Ingress columns.
fn ingress_columns() -> Vec<Column> {
    vec![
        name_column(),
        column("Class", "string", "", 0, "Ingress class of the ingress."),
        column(
            "Hosts",
            "string",
            "",
            0,
            "Hosts the rules of the ingress match.",
        ),
        column(
            "Address",
            "string",
            "",
            0,
            "Load balancer addresses of the ingress.",
        ),
        column("Ports", "string", "", 0, "Ports the ingress serves."),
        age_column(),
    ]
}

/// An ingress row (printed wide: addresses are never shortened).
fn ingress_cells(ing: &Value, now_unix: i64) -> Vec<Value> {
    let class = match at(ing, &["spec", "ingressClassName"]) {
        Some(Value::String(c)) => c.as_str(),
        _ => "<none>",
    };
    let address = load_balancer_ingress(list_at(ing, &["status", "loadBalancer", "ingress"]));
    let ports = if list_at(ing, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name_cell(ing),
        string_cell(class),
        string_cell(format_hosts(list_at(ing, &["spec", "rules"]))),
        string_cell(address.join(",")),
        string_cell(ports),
        age_cell(ing, now_unix),
    ]
}

/// `formatHosts`: the hosts of the first rules, up to three, then " + N more..." counting
/// every rule after the third (with or without a host); `*` when no rule names a host.
fn format_hosts(rules: &[Value]) -> String {
    let mut hosts: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if hosts.len() == SHOWN_HOSTS {
            more = true;
        }
        let host = str_at(rule, &["host"]);
        if !more && !host.is_empty() {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return "*".into();
    }
    let text = hosts.join(",");
    if more {
        format!("{text} + {} more...", rules.len() - SHOWN_HOSTS)
    } else {
        text
    }
}

/// IngressClass columns.
fn ingress_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Controller",
            "string",
            "",
            0,
            "Controller that implements the class.",
        ),
        column(
            "Parameters",
            "string",
            "",
            0,
            "Resource that holds the parameters of the class.",
        ),
        age_column(),
    ]
}

/// An ingress class row: parameters as `Kind[.apiGroup]/name`, `<none>` without them.
fn ingress_class_cells(class: &Value, now_unix: i64) -> Vec<Value> {
    let parameters = match obj_at(class, &["spec", "parameters"]) {
        None => "<none>".to_owned(),
        Some(p) => {
            let kind = str_at(p, &["kind"]);
            let name = str_at(p, &["name"]);
            match at(p, &["apiGroup"]) {
                Some(Value::String(group)) => format!("{kind}.{group}/{name}"),
                _ => format!("{kind}/{name}"),
            }
        }
    };
    vec![
        name_cell(class),
        string_cell(str_at(class, &["spec", "controller"])),
        string_cell(parameters),
        age_cell(class, now_unix),
    ]
}

/// NetworkPolicy columns.
fn network_policy_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Pod-Selector",
            "string",
            "",
            0,
            "Label selector of the pods the policy applies to.",
        ),
        age_column(),
    ]
}

/// A network policy row.
fn network_policy_cells(np: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(np),
        string_cell(format_label_selector(at(np, &["spec", "podSelector"]))),
        age_cell(np, now_unix),
    ]
}

/// IPAddress columns: no Age column (see the module doc).
fn ip_address_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "ParentRef",
            "string",
            "",
            0,
            "Object the IP address is assigned to.",
        ),
    ]
}

/// An IP address row: the parent as `resource[.group][/namespace]/name`, lower-cased
/// resource and group; then the age, which no column declares.
fn ip_address_cells(ip: &Value, now_unix: i64) -> Vec<Value> {
    let parent = match obj_at(ip, &["spec", "parentRef"]) {
        None => "<none>".to_owned(),
        Some(p) => {
            let (group, resource) = (str_at(p, &["group"]), str_at(p, &["resource"]));
            let mut text = if group.is_empty() {
                resource.to_lowercase()
            } else {
                format!("{resource}.{group}").to_lowercase()
            };
            let namespace = str_at(p, &["namespace"]);
            if !namespace.is_empty() {
                text.push('/');
                text.push_str(namespace);
            }
            text.push('/');
            text.push_str(str_at(p, &["name"]));
            text
        }
    };
    vec![name_cell(ip), string_cell(parent), age_cell(ip, now_unix)]
}

/// ServiceCIDR columns.
fn service_cidr_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "CIDRs",
            "string",
            "",
            0,
            "IP ranges service addresses are taken from.",
        ),
        age_column(),
    ]
}

/// A service CIDR row.
fn service_cidr_cells(cidr: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(cidr),
        string_cell(strings(list_at(cidr, &["spec", "cidrs"])).join(",")),
        age_cell(cidr, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};
    use super::GROUP;

    #[test]
    fn ingress_columns_match_upstream() {
        assert_columns(
            GROUP,
            "ingresses",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Class", "string", "", 0, "Ingress class of the ingress."),
                (
                    "Hosts",
                    "string",
                    "",
                    0,
                    "Hosts the rules of the ingress match.",
                ),
                (
                    "Address",
                    "string",
                    "",
                    0,
                    "Load balancer addresses of the ingress.",
                ),
                ("Ports", "string", "", 0, "Ports the ingress serves."),
                ("Age", "string", "", 0, AGE),
            ],
        );
    }

    #[test]
    fn ingresses() {
        let ing = json!({
            "metadata": {"name": "shop", "creationTimestamp": ts(-4000)},
            "spec": {"ingressClassName": "nginx",
                     "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                     "rules": [{"host": "shop.example.com"}, {}, {"host": "api.example.com"},
                               {"host": "admin.example.com"}, {"host": "old.example.com"}]},
            "status": {"loadBalancer": {"ingress": [
                {"hostname": "lb-123.elb.amazonaws.com"}, {"ip": "203.0.113.7"}]}}
        });
        assert_eq!(
            row(GROUP, "ingresses", &ing),
            [
                json!("shop"),
                json!("nginx"),
                json!("shop.example.com,api.example.com,admin.example.com + 2 more..."),
                json!("203.0.113.7,lb-123.elb.amazonaws.com"),
                json!("80, 443"),
                json!("66m")
            ]
        );
        assert_eq!(
            row(GROUP, "ingresses", &json!({})),
            [
                json!(""),
                json!("<none>"),
                json!("*"),
                json!(""),
                json!("80"),
                json!("<unknown>")
            ]
        );
        let three = json!({"spec": {"rules": [{"host": "a"}, {"host": "b"}, {"host": "c"}]}});
        assert_eq!(row(GROUP, "ingresses", &three)[2], json!("a,b,c"));
    }

    #[test]
    fn ingress_classes() {
        assert_columns(
            GROUP,
            "ingressclasses",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Controller",
                    "string",
                    "",
                    0,
                    "Controller that implements the class.",
                ),
                (
                    "Parameters",
                    "string",
                    "",
                    0,
                    "Resource that holds the parameters of the class.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let class = json!({
            "metadata": {"name": "nginx", "creationTimestamp": ts(-100)},
            "spec": {"controller": "k8s.io/ingress-nginx",
                     "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters",
                                    "name": "external-lb", "scope": "Cluster"}}
        });
        assert_eq!(
            row(GROUP, "ingressclasses", &class),
            [
                json!("nginx"),
                json!("k8s.io/ingress-nginx"),
                json!("IngressParameters.k8s.example.com/external-lb"),
                json!("100s")
            ]
        );
        assert_eq!(
            row(GROUP, "ingressclasses", &json!({})),
            [json!(""), json!(""), json!("<none>"), json!("<unknown>")]
        );
        let core_params = json!({"spec": {"parameters": {"kind": "ConfigMap", "name": "p"}}});
        assert_eq!(
            row(GROUP, "ingressclasses", &core_params)[2],
            json!("ConfigMap/p")
        );
    }

    #[test]
    fn network_policies() {
        assert_columns(
            GROUP,
            "networkpolicies",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Pod-Selector",
                    "string",
                    "",
                    0,
                    "Label selector of the pods the policy applies to.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let np = json!({"metadata": {"name": "db-ingress", "creationTimestamp": ts(-20)},
                        "spec": {"podSelector": {"matchLabels": {"role": "db"}},
                                 "policyTypes": ["Ingress"]}});
        assert_eq!(
            row(GROUP, "networkpolicies", &np),
            [json!("db-ingress"), json!("role=db"), json!("20s")]
        );
        let deny_all = json!({"spec": {"podSelector": {}}});
        assert_eq!(
            row(GROUP, "networkpolicies", &deny_all),
            [json!(""), json!("<none>"), json!("<unknown>")]
        );
    }

    #[test]
    fn ip_addresses_have_an_undeclared_age_cell() {
        assert_columns(
            GROUP,
            "ipaddresses",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "ParentRef",
                    "string",
                    "",
                    0,
                    "Object the IP address is assigned to.",
                ),
            ],
        );
        let ip = json!({"metadata": {"name": "10.96.0.10", "creationTimestamp": ts(-60)},
                        "spec": {"parentRef": {"group": "", "resource": "Services",
                                               "namespace": "kube-system", "name": "kube-dns"}}});
        assert_eq!(
            row(GROUP, "ipaddresses", &ip),
            [
                json!("10.96.0.10"),
                json!("services/kube-system/kube-dns"),
                json!("60s")
            ]
        );
        let gateway = json!({"spec": {"parentRef": {"group": "Gateway.Networking.k8s.io",
                                                    "resource": "gateways", "name": "gw"}}});
        assert_eq!(
            row(GROUP, "ipaddresses", &gateway)[1],
            json!("gateways.gateway.networking.k8s.io/gw")
        );
        assert_eq!(
            row(GROUP, "ipaddresses", &json!({})),
            [json!(""), json!("<none>"), json!("<unknown>")]
        );
    }

    #[test]
    fn service_cidrs() {
        assert_columns(
            GROUP,
            "servicecidrs",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "CIDRs",
                    "string",
                    "",
                    0,
                    "IP ranges service addresses are taken from.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let cidr = json!({"metadata": {"name": "kubernetes", "creationTimestamp": ts(-86400 * 40)},
                          "spec": {"cidrs": ["10.96.0.0/12", "fd00:10:96::/112"]}});
        assert_eq!(
            row(GROUP, "servicecidrs", &cidr),
            [
                json!("kubernetes"),
                json!("10.96.0.0/12,fd00:10:96::/112"),
                json!("40d")
            ]
        );
        assert_eq!(
            row(GROUP, "servicecidrs", &json!({})),
            [json!(""), json!(""), json!("<unknown>")]
        );
    }
}
