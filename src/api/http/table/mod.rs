//! Server-side Table output: the columns and the row cells kube-apiserver's printers give
//! each resource, computed from the stored object's JSON.
//!
//! kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints what the
//! server computes. Like kube-apiserver, this module always prints "wide": [`cells`]
//! returns one cell per [`columns`] entry, and a column's `priority` (1 = only with
//! `-o wide`) tells the client which ones to hide.
//!
//! Printers, one file per family: `pods`; `core_v1` (nodes, namespaces, services, config
//! maps, secrets); `apps` (deployments); `events` (core v1 events); `custom` (custom
//! resources: `Name` plus the CRD's `additionalPrinterColumns`, evaluated by `jsonpath`).
//! Every other resource gets the generic `Name` / `Created At` pair. `timestamp` parses
//! and formats RFC 3339 times.
//!
//! [`row_conditions`] gives a row's `conditions` (kube-apiserver marks succeeded and failed
//! pods `Completed`); the caller adds them to the row next to `cells`.
//!
//! Objects come from etcd and are not validated: a missing or mistyped field reads as its
//! zero value, as a Go struct decoded from the same JSON would, so nothing here panics.
//! Where kube-apiserver applies API defaults while decoding (service type, port protocol,
//! deployment replicas, secret type, namespace phase) the same defaults are applied here.

mod apps;
mod core_v1;
mod custom;
mod events;
mod jsonpath;
mod pods;
mod timestamp;

use std::collections::BTreeMap;

use serde_json::Value;

use self::timestamp::Instant;
use crate::registry::{Origin, ResourceInfo};

/// One column definition as Table.columnDefinitions serializes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Header, e.g. `Ready`.
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format, e.g. `name` for the column that identifies the object.
    pub format: String,
    /// Human description of the column.
    pub description: String,
    /// 0 = shown by default; higher = only in wide output.
    pub priority: i32,
}

impl Column {
    /// `{"name","type","format","description","priority"}`, every key always present.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// Which printer a resource uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Printer {
    Pods,
    Nodes,
    Namespaces,
    Services,
    ConfigMaps,
    Secrets,
    Events,
    Deployments,
    Custom,
    Default,
}

fn printer(info: &ResourceInfo) -> Printer {
    if info.origin == Origin::CustomResource || !info.printer_columns.is_empty() {
        return Printer::Custom;
    }
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "pods") => Printer::Pods,
        ("", "nodes") => Printer::Nodes,
        ("", "namespaces") => Printer::Namespaces,
        ("", "services") => Printer::Services,
        ("", "configmaps") => Printer::ConfigMaps,
        ("", "secrets") => Printer::Secrets,
        ("", "events") => Printer::Events,
        ("apps", "deployments") => Printer::Deployments,
        _ => Printer::Default,
    }
}

/// The columns for a resource.
pub fn columns(info: &ResourceInfo) -> Vec<Column> {
    match printer(info) {
        Printer::Pods => pods::columns(),
        Printer::Nodes => core_v1::node_columns(),
        Printer::Namespaces => core_v1::namespace_columns(),
        Printer::Services => core_v1::service_columns(),
        Printer::ConfigMaps => core_v1::config_map_columns(),
        Printer::Secrets => core_v1::secret_columns(),
        Printer::Events => events::columns(),
        Printer::Deployments => apps::deployment_columns(),
        Printer::Custom => custom::columns(&info.printer_columns),
        Printer::Default => vec![
            name_column(),
            column("Created At", "date", "", 0, DESC_CREATED),
        ],
    }
}

/// The cells of one row; `now_unix` is the current time in seconds since the epoch (for Age).
pub fn cells(info: &ResourceInfo, object: &Value, now_unix: i64) -> Vec<Value> {
    match printer(info) {
        Printer::Pods => pods::cells(object, now_unix),
        Printer::Nodes => core_v1::node_cells(object, now_unix),
        Printer::Namespaces => core_v1::namespace_cells(object, now_unix),
        Printer::Services => core_v1::service_cells(object, now_unix),
        Printer::ConfigMaps => core_v1::config_map_cells(object, now_unix),
        Printer::Secrets => core_v1::secret_cells(object, now_unix),
        Printer::Events => events::cells(object, now_unix),
        Printer::Deployments => apps::deployment_cells(object, now_unix),
        Printer::Custom => custom::cells(&info.printer_columns, object, now_unix),
        Printer::Default => {
            // A missing creationTimestamp is Go's zero time, printed as such.
            let created = time_at(object, &["metadata", "creationTimestamp"])
                .unwrap_or(Instant::GO_ZERO)
                .to_rfc3339_utc();
            vec![name_cell(object), Value::String(created)]
        }
    }
}

/// Row conditions kube-apiserver attaches to a row (`rows[].conditions`): a `Completed`
/// condition for pods that succeeded or failed, nothing for anything else.
pub fn row_conditions(info: &ResourceInfo, object: &Value) -> Vec<Value> {
    match printer(info) {
        Printer::Pods => pods::row_conditions(object),
        _ => Vec::new(),
    }
}

/// Go's duration.HumanDuration, as kubectl shows ages ("45s", "5m3s", "3h", "2d4h", "3y").
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 2 * 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_remainder(minutes, "m", seconds % 60, "s");
    }
    if minutes < 3 * 60 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return with_remainder(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 8 * 24 {
        return with_remainder(days, "d", hours % 24, "h");
    }
    if hours < 2 * 365 * 24 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 8 * 365 * 24 {
        return with_remainder(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `"3h"` when `rest` is 0, `"3h5m"` otherwise.
fn with_remainder(major: i64, major_unit: &str, rest: i64, rest_unit: &str) -> String {
    if rest == 0 {
        format!("{major}{major_unit}")
    } else {
        format!("{major}{major_unit}{rest}{rest_unit}")
    }
}

// ---- column definitions shared by the printers ----

const DESC_NAME: &str = "Name of the object, unique within its namespace (or the cluster).";
const DESC_AGE: &str = "Time since the object was created (metadata.creationTimestamp).";
const DESC_CREATED: &str = "When the object was created (metadata.creationTimestamp).";

fn column(name: &str, type_: &str, format: &str, priority: i32, description: &str) -> Column {
    Column {
        name: name.into(),
        type_: type_.into(),
        format: format.into(),
        description: description.into(),
        priority,
    }
}

/// `Name`: type `string`, format `name`.
fn name_column() -> Column {
    column("Name", "string", "name", 0, DESC_NAME)
}

/// `Age`: the printers' column for metadata.creationTimestamp (a `string` holding the age).
fn age_column() -> Column {
    column("Age", "string", "", 0, DESC_AGE)
}

// ---- reading the object's JSON ----

/// The value at `path` (object keys only); None if any step is missing or not an object.
fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |cur, key| cur.as_object()?.get(*key))
}

/// The string at `path`, "" if missing or not a string.
fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

/// The integer at `path`, 0 if missing or not a number (floats truncate).
fn int_at(v: &Value, path: &[&str]) -> i64 {
    at(v, path).map_or(0, int_of)
}

fn int_of(v: &Value) -> i64 {
    match v.as_i64() {
        Some(i) => i,
        // `as` saturates, like the values a Go decoder could never have produced anyway.
        None => v.as_f64().map_or(0, |f| f as i64),
    }
}

/// The boolean at `path`, false if missing or not a boolean.
fn bool_at(v: &Value, path: &[&str]) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or(false)
}

/// The array at `path`, empty if missing or not an array.
fn list_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The object at `path` (a Go pointer field that is set), None if missing, null or not an object.
fn obj_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    at(v, path).filter(|x| x.is_object())
}

/// How many entries the map at `path` has, 0 if missing or not a map.
fn map_len(v: &Value, path: &[&str]) -> usize {
    at(v, path)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

/// The timestamp at `path`; None if missing, unparseable or Go's zero time.
fn time_at(v: &Value, path: &[&str]) -> Option<Instant> {
    at(v, path)
        .and_then(Value::as_str)
        .and_then(Instant::parse_rfc3339)
        .filter(|t| !t.is_zero())
}

/// Whether metadata.deletionTimestamp is set.
fn deleting(v: &Value) -> bool {
    at(v, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null())
}

/// The human age of `t` at `now_unix`, "<unknown>" when there is no time.
fn since(now_unix: i64, t: Option<Instant>) -> String {
    match t {
        Some(t) => human_duration(t.seconds_until(now_unix)),
        None => "<unknown>".into(),
    }
}

/// The `Name` cell: metadata.name.
fn name_cell(v: &Value) -> Value {
    Value::String(str_at(v, &["metadata", "name"]).to_owned())
}

/// The `Age` cell: the human age of metadata.creationTimestamp.
fn age_cell(v: &Value, now_unix: i64) -> Value {
    Value::String(since(
        now_unix,
        time_at(v, &["metadata", "creationTimestamp"]),
    ))
}

fn string_cell(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

/// `s`, or `"<none>"` when it is empty.
fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.to_owned()
    }
}

/// A label map as `k1=v1,k2=v2` sorted by key, `"<none>"` when empty (labels.FormatLabels).
fn format_labels(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object) else {
        return "<none>".into();
    };
    let sorted: BTreeMap<&str, &str> = map
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
        .collect();
    let text: Vec<String> = sorted.iter().map(|(k, v)| format!("{k}={v}")).collect();
    or_none(&text.join(","))
}

/// Container names and images, each comma-joined in spec order.
fn container_cells(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

#[cfg(test)]
pub(super) mod test_support {
    use crate::registry::{FieldPolicy, Origin, PrinterColumn, ResourceInfo};

    /// A resource definition for tests.
    pub fn info(group: &str, resource: &str, kind: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            singular: resource.trim_end_matches('s').into(),
            kind: kind.into(),
            namespaced: true,
            etcd_dir: resource.into(),
            storage_version: if group.is_empty() {
                "v1".into()
            } else {
                format!("{group}/v1")
            },
            short_names: Vec::new(),
            categories: Vec::new(),
            origin: Origin::Builtin,
            fields: Vec::new(),
            field_policy: FieldPolicy::meta_only("field label not supported: {}"),
            printer_columns: Vec::new(),
        }
    }

    /// A custom resource definition with the given printer columns.
    pub fn crd_info(columns: Vec<PrinterColumn>) -> ResourceInfo {
        ResourceInfo {
            origin: Origin::CustomResource,
            printer_columns: columns,
            ..info("example.com", "widgets", "Widget")
        }
    }

    /// 2024-01-01T00:00:00Z.
    pub const T0: i64 = 1_704_067_200;

    /// `T0 + offset` seconds as RFC 3339.
    pub fn ts(offset: i64) -> String {
        super::Instant::from_unix(T0 + offset).to_rfc3339_utc()
    }

    /// Column names, in order.
    pub fn names(cols: &[super::Column]) -> Vec<&str> {
        cols.iter().map(|c| c.name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::test_support::{info, names, ts, T0};
    use super::*;

    #[test]
    fn human_duration_boundaries() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (121, "2m1s"),
            (5 * 60 + 3, "5m3s"),
            (599, "9m59s"),
            (600, "10m"),
            (601, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600 - 1, "7h59m"),
            (8 * 3600, "8h"),
            (48 * 3600 - 1, "47h"),
            (48 * 3600, "2d"),
            (2 * 86400 + 4 * 3600, "2d4h"),
            (8 * 86400 - 1, "7d23h"),
            (8 * 86400, "8d"),
            (730 * 86400 - 1, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (3 * 365 * 86400, "3y"),
            (8 * 365 * 86400 - 1, "7y364d"),
            (8 * 365 * 86400, "8y"),
            (i64::MAX / 1_000_000_000, "292y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(*secs), *want, "{secs}s");
        }
    }

    #[test]
    fn column_json_has_every_key() {
        let c = name_column();
        assert_eq!(
            c.to_json(),
            json!({"name": "Name", "type": "string", "format": "name",
                   "description": DESC_NAME, "priority": 0})
        );
        let wide = column("IP", "string", "", 1, "x").to_json();
        assert_eq!(wide["format"], "");
        assert_eq!(wide["priority"], 1);
    }

    #[test]
    fn default_convertor_for_other_resources() {
        let leases = info("coordination.k8s.io", "leases", "Lease");
        let cols = columns(&leases);
        assert_eq!(names(&cols), ["Name", "Created At"]);
        assert_eq!(cols[0].format, "name");
        assert_eq!(cols[1].type_, "date");
        let obj = json!({"metadata": {"name": "kube-scheduler",
                                      "creationTimestamp": "2024-01-01T02:00:00+02:00"}});
        assert_eq!(
            cells(&leases, &obj, T0),
            [json!("kube-scheduler"), json!("2024-01-01T00:00:00Z")]
        );
        // Missing metadata: empty name and Go's zero time.
        assert_eq!(
            cells(&leases, &json!({}), T0),
            [json!(""), json!("0001-01-01T00:00:00Z")]
        );
        assert!(row_conditions(&leases, &obj).is_empty());
    }

    #[test]
    fn builtin_names_outside_their_group_use_the_default() {
        // A "deployments" resource in another group is not apps/v1 Deployment.
        let other = info("example.io", "deployments", "Deployment");
        assert_eq!(names(&columns(&other)), ["Name", "Created At"]);
        let pods_elsewhere = info("metrics.k8s.io", "pods", "PodMetrics");
        assert_eq!(names(&columns(&pods_elsewhere)), ["Name", "Created At"]);
    }

    #[test]
    fn every_printer_has_one_cell_per_column_even_for_garbage() {
        let infos = [
            info("", "pods", "Pod"),
            info("", "nodes", "Node"),
            info("", "namespaces", "Namespace"),
            info("", "services", "Service"),
            info("", "configmaps", "ConfigMap"),
            info("", "secrets", "Secret"),
            info("", "events", "Event"),
            info("apps", "deployments", "Deployment"),
            info("", "endpoints", "Endpoints"),
            super::test_support::crd_info(Vec::new()),
        ];
        let garbage = [
            json!(null),
            json!(42),
            json!("pod"),
            json!([]),
            json!({}),
            json!({"metadata": 1, "spec": [], "status": "x"}),
            json!({"metadata": {"name": 7, "creationTimestamp": "yesterday"},
                   "spec": {"containers": "no", "ports": [1, null]},
                   "status": {"containerStatuses": [null, 3, {"state": []}]}}),
        ];
        for info in &infos {
            let n = columns(info).len();
            for obj in &garbage {
                assert_eq!(cells(info, obj, T0).len(), n, "{} {obj}", info.resource);
            }
        }
    }

    #[test]
    fn helpers_read_zero_values() {
        let v = json!({"a": {"b": "x", "n": 3, "f": 2.9, "t": true, "l": [1], "m": {"k": 1}}});
        assert_eq!(str_at(&v, &["a", "b"]), "x");
        assert_eq!(str_at(&v, &["a", "n"]), "");
        assert_eq!(int_at(&v, &["a", "n"]), 3);
        assert_eq!(int_at(&v, &["a", "f"]), 2);
        assert_eq!(int_at(&v, &["a", "b"]), 0);
        assert!(bool_at(&v, &["a", "t"]));
        assert!(!bool_at(&v, &["a", "missing"]));
        assert_eq!(list_at(&v, &["a", "l"]).len(), 1);
        assert!(list_at(&v, &["a", "b", "c"]).is_empty());
        assert_eq!(map_len(&v, &["a", "m"]), 1);
        assert_eq!(map_len(&v, &["a", "l"]), 0);
        assert_eq!(format_labels(None), "<none>");
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(
            format_labels(Some(&json!({"tier": "web", "app": "shop"}))),
            "app=shop,tier=web"
        );
    }

    #[test]
    fn ages() {
        let obj = json!({"metadata": {"creationTimestamp": ts(-300)}});
        assert_eq!(age_cell(&obj, T0), json!("5m"));
        let zero = json!({"metadata": {"creationTimestamp": "0001-01-01T00:00:00Z"}});
        assert_eq!(age_cell(&zero, T0), json!("<unknown>"));
        assert_eq!(age_cell(&json!({}), T0), json!("<unknown>"));
        // Clock skew: one second in the future is "0s", more is "<invalid>".
        let future = json!({"metadata": {"creationTimestamp": ts(1)}});
        assert_eq!(age_cell(&future, T0), json!("0s"));
        let far = json!({"metadata": {"creationTimestamp": ts(60)}});
        assert_eq!(age_cell(&far, T0), json!("<invalid>"));
    }
}
