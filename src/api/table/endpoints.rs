//! Core v1 Endpoints and discovery.k8s.io/v1 EndpointSlices: both print the first three
//! addresses (or ports) and how many more there are.

use serde_json::Value;

use super::format::{list_with_more, strings};
use super::{
    age_cell, age_column, at, column, int_of, list_at, name_cell, name_column, str_at, string_cell,
    BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("", "endpoints", endpoints_columns, endpoints_cells),
    BuiltinPrinter::new(
        "discovery.k8s.io",
        "endpointslices",
        endpoint_slice_columns,
        endpoint_slice_cells,
    ),
];

/// How many entries the list cells show before "+ N more...".
const SHOWN: usize = 3;

/// Endpoints columns.
fn endpoints_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Endpoints",
            "string",
            "",
            0,
            "Addresses and ports of the endpoints.",
        ),
        age_column(),
    ]
}

/// An endpoints row.
fn endpoints_cells(ep: &Value, now_unix: i64) -> Vec<Value> {
    vec![
        name_cell(ep),
        string_cell(format_endpoints(list_at(ep, &["subsets"]))),
        age_cell(ep, now_unix),
    ]
}

/// `formatEndpoints`: `ip:port` for every address and port of every subset (just `ip` for
/// a subset without ports), the first three comma-joined, then " + N more..."; `<none>`
/// without subsets. Unlike the slice printer, an empty result stays empty.
fn format_endpoints(subsets: &[Value]) -> String {
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut shown: Vec<String> = Vec::new();
    let mut count = 0usize;
    for subset in subsets {
        let ips: Vec<&str> = list_at(subset, &["addresses"])
            .iter()
            .map(|a| str_at(a, &["ip"]))
            .collect();
        let ports = list_at(subset, &["ports"]);
        if ports.is_empty() {
            // Headless services may have no ports.
            count += ips.len();
            shown.extend(
                ips.iter()
                    .take(SHOWN - shown.len())
                    .map(|ip| ip.to_string()),
            );
            continue;
        }
        for port in ports {
            count += ips.len();
            let port = at(port, &["port"]).map_or(0, int_of);
            let room = SHOWN - shown.len();
            shown.extend(ips.iter().take(room).map(|ip| join_host_port(ip, port)));
        }
    }
    let text = shown.join(",");
    if count > SHOWN {
        format!("{text} + {} more...", count - SHOWN)
    } else {
        text
    }
}

/// Go's `net.JoinHostPort`: IPv6 addresses in brackets.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// EndpointSlice columns.
fn endpoint_slice_columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "AddressType",
            "string",
            "",
            0,
            "Type of the addresses in the slice.",
        ),
        column(
            "Ports",
            "string",
            "",
            0,
            "Ports of the endpoints in the slice.",
        ),
        column(
            "Endpoints",
            "string",
            "",
            0,
            "Addresses of the endpoints in the slice.",
        ),
        age_column(),
    ]
}

/// An endpoint slice row. A port without a number prints its name; the API defaults a
/// missing name to "", so upstream's `*` for "neither" never shows for a stored slice.
fn endpoint_slice_cells(slice: &Value, now_unix: i64) -> Vec<Value> {
    let ports: Vec<String> = list_at(slice, &["ports"])
        .iter()
        .map(|p| match at(p, &["port"]) {
            Some(n) if !n.is_null() => int_of(n).to_string(),
            _ => str_at(p, &["name"]).to_owned(),
        })
        .collect();
    let addresses: Vec<String> = list_at(slice, &["endpoints"])
        .iter()
        .flat_map(|e| strings(list_at(e, &["addresses"])))
        .map(str::to_owned)
        .collect();
    vec![
        name_cell(slice),
        string_cell(str_at(slice, &["addressType"])),
        string_cell(list_with_more(&ports, ports.len(), SHOWN)),
        string_cell(list_with_more(&addresses, addresses.len(), SHOWN)),
        age_cell(slice, now_unix),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    #[test]
    fn endpoints() {
        assert_columns(
            "",
            "endpoints",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Endpoints",
                    "string",
                    "",
                    0,
                    "Addresses and ports of the endpoints.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
        let ep = json!({
            "metadata": {"name": "kube-dns", "creationTimestamp": ts(-7200)},
            "subsets": [{"addresses": [{"ip": "10.244.0.5"}, {"ip": "fd00::5"}],
                         "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                                   {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}]
        });
        assert_eq!(
            row("", "endpoints", &ep),
            [
                json!("kube-dns"),
                json!("10.244.0.5:53,[fd00::5]:53,10.244.0.5:53 + 1 more..."),
                json!("120m")
            ]
        );
        let headless = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}]},
                                          {"addresses": [{"ip": "10.0.0.2"}],
                                           "ports": [{"port": 80}]}]});
        assert_eq!(
            row("", "endpoints", &headless)[1],
            json!("10.0.0.1,10.0.0.2:80")
        );
        assert_eq!(
            row("", "endpoints", &json!({})),
            [json!(""), json!("<none>"), json!("<unknown>")]
        );
        // Subsets without addresses print nothing, not a placeholder.
        let not_ready = json!({"subsets": [{"notReadyAddresses": [{"ip": "10.0.0.3"}],
                                            "ports": [{"port": 80}]}]});
        assert_eq!(row("", "endpoints", &not_ready)[1], json!(""));
    }

    #[test]
    fn endpoint_slice_columns_match_upstream() {
        assert_columns(
            "discovery.k8s.io",
            "endpointslices",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "AddressType",
                    "string",
                    "",
                    0,
                    "Type of the addresses in the slice.",
                ),
                (
                    "Ports",
                    "string",
                    "",
                    0,
                    "Ports of the endpoints in the slice.",
                ),
                (
                    "Endpoints",
                    "string",
                    "",
                    0,
                    "Addresses of the endpoints in the slice.",
                ),
                ("Age", "string", "", 0, AGE),
            ],
        );
    }

    #[test]
    fn endpoint_slices() {
        let slice = json!({
            "metadata": {"name": "web-abc12", "creationTimestamp": ts(-30)},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443},
                      {"name": "metrics"}, {"port": 9090}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]},
                          {"addresses": ["10.0.0.4"]}]
        });
        assert_eq!(
            row("discovery.k8s.io", "endpointslices", &slice),
            [
                json!("web-abc12"),
                json!("IPv4"),
                json!("80,443,metrics + 1 more..."),
                json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."),
                json!("30s")
            ]
        );
        assert_eq!(
            row("discovery.k8s.io", "endpointslices", &json!({})),
            [
                json!(""),
                json!(""),
                json!("<unset>"),
                json!("<unset>"),
                json!("<unknown>")
            ]
        );
        // A port with neither number nor name: the defaulted name "" is printed.
        let unnamed = json!({"ports": [{"protocol": "TCP"}, {"port": 8080}]});
        assert_eq!(
            row("discovery.k8s.io", "endpointslices", &unnamed)[2],
            json!(",8080")
        );
    }
}
