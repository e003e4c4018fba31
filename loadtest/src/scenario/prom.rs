//! Prometheus text exposition, read from `/metrics` of etcd (its gRPC
//! request counters, to count the requests a scenario caused) and of watchd
//! (applied revision, cached bytes): the parser and the scrape.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::endpoint::{Endpoint, Protocol};
use crate::tls::TlsOptions;
use crate::transport;

/// One sample: metric name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Labels in the order written.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses the text format: `name{k="v",...} value [timestamp]` lines;
/// comments and lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find(['{', ' ']) {
        Some(i) if line.as_bytes()[i] == b'{' => {
            let (labels, after) = parse_labels(&line[i + 1..])?;
            (&line[..i], labels, after)
        }
        Some(i) => (&line[..i], Vec::new(), &line[i..]),
        None => return None,
    };
    let value = rest.split_ascii_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Labels up to the closing `}`; returns them and the text after it.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(rest) = s.strip_prefix('}') {
            return Some((out, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        let mut chars = s[eq + 1..].char_indices();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in chars {
            match (escaped, c) {
                (true, c) => {
                    value.push(if c == 'n' { '\n' } else { c });
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(eq + 1 + i + 1);
                    break;
                }
                (false, c) => value.push(c),
            }
        }
        out.push((key, value));
        s = &s[end?..];
    }
}

/// Sum of the samples named `name` whose labels include every `(k, v)` of
/// `filter`.
pub fn sum(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && filter.iter().all(|(k, v)| s.label(k) == Some(v)))
        .map(|s| s.value)
        .sum()
}

/// Sum of the samples named `name` per value of label `key`.
pub fn by_label(samples: &[Sample], name: &str, key: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == name) {
        if let Some(v) = s.label(key) {
            *out.entry(v.to_string()).or_insert(0.0) += s.value;
        }
    }
    out
}

/// The gRPC requests etcd has started, per method (`Range`, `Put`, `Txn`,
/// `Watch`, ...): `grpc_server_started_total` summed per `grpc_method`.
pub fn etcd_requests(samples: &[Sample]) -> BTreeMap<String, f64> {
    by_label(samples, "grpc_server_started_total", "grpc_method")
}

/// What changed per key between two readings (keys of either; missing is 0).
pub fn delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for k in before.keys().chain(after.keys()) {
        let d = after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
        out.insert(k.clone(), d);
    }
    out
}

/// Fetches and parses `/metrics` of a plain-HTTP server (`http://host:port`:
/// etcd's client URL serves it, as does watchd's HTTP API), within `timeout`.
pub async fn scrape(base_url: &str, timeout: Duration) -> Result<Vec<Sample>, String> {
    let endpoint = Arc::new(Endpoint::new(base_url, &TlsOptions::default(), None)?);
    scrape_endpoint(&endpoint, timeout).await
}

/// Fetches and parses `/metrics` of `endpoint` (with its TLS and token).
pub async fn scrape_endpoint(
    endpoint: &Arc<Endpoint>,
    timeout: Duration,
) -> Result<Vec<Sample>, String> {
    let (status, body) =
        transport::get_once(endpoint, Protocol::Http1, "/metrics", timeout).await?;
    if status != 200 {
        return Err(format!("GET {}/metrics: {status}", endpoint.url.base()));
    }
    Ok(parse(&String::from_utf8_lossy(&body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ETCD: &str = r#"# HELP grpc_server_started_total Total number of RPCs started on the server.
# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 12
grpc_server_started_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 3
grpc_server_started_total{grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 1e3
etcd_debugging_mvcc_range_total 42
weird{a="x\"y,z}",b="2"} 7 1700000000
histogram_bucket{le="+Inf"} +Inf
broken{a=1} 3
"#;

    #[test]
    fn text_format_parses() {
        let s = parse(ETCD);
        assert_eq!(s.len(), 6, "{s:?}");
        assert_eq!(sum(&s, "grpc_server_started_total", &[]), 1015.0);
        assert_eq!(
            sum(&s, "grpc_server_started_total", &[("grpc_method", "Range")]),
            12.0
        );
        assert_eq!(sum(&s, "etcd_debugging_mvcc_range_total", &[]), 42.0);
        let weird = s.iter().find(|x| x.name == "weird").unwrap();
        assert_eq!(weird.label("a"), Some("x\"y,z}"));
        assert_eq!(weird.label("b"), Some("2"));
        assert_eq!(weird.value, 7.0);
        assert!(s
            .iter()
            .any(|x| x.name == "histogram_bucket" && x.value.is_infinite()));
        assert!(!s.iter().any(|x| x.name == "broken"));
    }

    #[test]
    fn etcd_requests_per_method_and_deltas() {
        let before = etcd_requests(&parse(ETCD));
        assert_eq!(before["Range"], 12.0);
        assert_eq!(before["Watch"], 3.0);
        let after = etcd_requests(&parse(
            "grpc_server_started_total{grpc_method=\"Range\"} 12\n\
             grpc_server_started_total{grpc_method=\"Put\"} 1500\n\
             grpc_server_started_total{grpc_method=\"LeaseGrant\"} 1\n",
        ));
        let d = delta(&before, &after);
        assert_eq!(d["Range"], 0.0);
        assert_eq!(d["Put"], 500.0);
        assert_eq!(d["Watch"], -3.0);
        assert_eq!(d["LeaseGrant"], 1.0);
    }
}
