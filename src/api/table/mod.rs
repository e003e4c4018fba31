//! Server-side Table output: the columns and the row cells kube-apiserver's printers give
//! each resource, computed from the stored object's JSON.
//!
//! kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints what the
//! server computes. Like kube-apiserver, this module always prints "wide": [`cells`]
//! returns one cell per [`columns`] entry, and a column's `priority` (1 = only with
//! `-o wide`) tells the client which ones to hide. (One upstream quirk is kept: the
//! IPAddress printer gives three cells for its two columns; clients ignore the extra one.)
//!
//! Built-in printers are data: each family file exports a `PRINTERS` list of
//! `BuiltinPrinter`s, keyed by (group, resource), and `printer` finds one. Families:
//! `pods`; `core_v1` (nodes, namespaces, services, config maps, secrets); `replication`
//! (pod templates, replication controllers); `volumes` (persistent volumes and claims);
//! `endpoints` (endpoints, endpoint slices); `access` (service accounts, role bindings,
//! cluster role bindings, certificate signing requests); `policy` (pod disruption budgets,
//! resource quotas); `apps` (deployments, replica sets, stateful sets, daemon sets);
//! `controller_revisions`; `batch` (jobs, cron jobs); `autoscaling` (horizontal pod
//! autoscalers); `networking` (ingresses, ingress classes, network policies, IP addresses,
//! service CIDRs); `storage` (storage classes, volume attributes classes, volume
//! attachments); `csi` (CSI drivers, CSI nodes, CSI storage capacities); `scheduling`
//! (priority classes, runtime classes); `coordination` (leases); `admission` (webhook
//! configurations, validating and mutating admission policies and their bindings);
//! `flowcontrol` (flow schemas, priority level configurations); `resource` (DRA device
//! classes, resource claims, claim templates, resource slices); `events` (core v1 and
//! events.k8s.io events, both printed from the stored core v1 Event); `apiservices`
//! (kube-aggregator's convertor); `custom` (custom resources: `Name` plus the CRD's
//! `additionalPrinterColumns`, evaluated by `jsonpath`). Every other resource gets the
//! generic `Name` / `Created At` pair, as kube-apiserver's default convertor gives it:
//! roles, cluster roles, limit ranges, custom resource definitions among them (none has a
//! printer upstream).
//!
//! Column names, types, formats, priorities and order follow kube-apiserver's printers,
//! since clients lay out and hide columns by them. Column descriptions do not: clients do
//! not interpret them, so each is watchd's own one-sentence wording of what the column
//! shows, written beside its column (descriptions several printers share are constants
//! here and in `templates`).
//!
//! Shared pieces: `format` (label selectors, "+ N more..." lists, quantities, booleans, as
//! the printers format them), `templates` (the pod template's Containers and Images),
//! `timestamp` (RFC 3339 times); `test_support` builds the tests' resources and rows.
//!
//! [`row_conditions`] gives a row's `conditions` (kube-apiserver marks succeeded and failed
//! pods `Completed`); the caller adds them to the row next to `cells`.
//!
//! Objects come from etcd and are not validated: a missing or mistyped field reads as its
//! zero value, as a Go struct decoded from the same JSON would, so nothing here panics.
//! Where kube-apiserver applies API defaults while decoding and a cell shows the result
//! (service type, port protocol, replicas, secret type, namespace phase, volume modes and
//! reclaim policies, CSI driver flags, HPA metrics, flow-control settings, ...) the same
//! defaults are applied here.

mod access;
mod admission;
mod apiservices;
mod apps;
mod autoscaling;
mod batch;
mod controller_revisions;
mod coordination;
mod core_v1;
mod csi;
mod custom;
mod endpoints;
mod events;
mod flowcontrol;
mod format;
mod jsonpath;
mod networking;
mod pods;
mod policy;
mod replication;
mod resource;
mod scheduling;
mod storage;
mod templates;
mod timestamp;
mod volumes;

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

/// The printer kube-apiserver registers for one built-in resource.
pub(super) struct BuiltinPrinter {
    group: &'static str,
    resource: &'static str,
    columns: fn() -> Vec<Column>,
    cells: fn(&Value, i64) -> Vec<Value>,
    row_conditions: Option<fn(&Value) -> Vec<Value>>,
}

impl BuiltinPrinter {
    /// A printer for (group, resource) whose rows carry no conditions.
    const fn new(
        group: &'static str,
        resource: &'static str,
        columns: fn() -> Vec<Column>,
        cells: fn(&Value, i64) -> Vec<Value>,
    ) -> BuiltinPrinter {
        BuiltinPrinter {
            group,
            resource,
            columns,
            cells,
            row_conditions: None,
        }
    }
}

/// Every family's printers.
const FAMILIES: &[&[BuiltinPrinter]] = &[
    pods::PRINTERS,
    core_v1::PRINTERS,
    replication::PRINTERS,
    volumes::PRINTERS,
    endpoints::PRINTERS,
    access::PRINTERS,
    policy::PRINTERS,
    apps::PRINTERS,
    controller_revisions::PRINTERS,
    batch::PRINTERS,
    autoscaling::PRINTERS,
    networking::PRINTERS,
    storage::PRINTERS,
    csi::PRINTERS,
    scheduling::PRINTERS,
    coordination::PRINTERS,
    admission::PRINTERS,
    flowcontrol::PRINTERS,
    resource::PRINTERS,
    events::PRINTERS,
    apiservices::PRINTERS,
];

/// Which printer a resource uses.
enum Printer {
    Builtin(&'static BuiltinPrinter),
    Custom,
    Default,
}

fn printer(info: &ResourceInfo) -> Printer {
    if info.origin == Origin::CustomResource || !info.printer_columns.is_empty() {
        return Printer::Custom;
    }
    FAMILIES
        .iter()
        .flat_map(|family| family.iter())
        .find(|p| p.group == info.group && p.resource == info.resource)
        .map_or(Printer::Default, Printer::Builtin)
}

/// The columns for a resource.
pub fn columns(info: &ResourceInfo) -> Vec<Column> {
    match printer(info) {
        Printer::Builtin(p) => (p.columns)(),
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
        Printer::Builtin(p) => (p.cells)(object, now_unix),
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
        Printer::Builtin(BuiltinPrinter {
            row_conditions: Some(conditions),
            ..
        }) => conditions(object),
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

/// Description of every `Name` column.
const DESC_NAME: &str = "Name of the object.";
/// Description of every `Age` column (a custom resource's default one too).
const DESC_AGE: &str = "How long ago the object was created.";
/// Description of the default convertor's `Created At` column.
const DESC_CREATED: &str = "When the object was created.";

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

/// The integer behind a pointer field at `path`, `default` when it is unset (what the API's
/// defaulting stores, e.g. 1 for `spec.replicas`).
fn int_or(v: &Value, path: &[&str], default: i64) -> i64 {
    match at(v, path) {
        Some(x) if !x.is_null() => int_of(x),
        _ => default,
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

/// The string at `path`, `default` when it is missing or empty (an API default).
fn str_or<'a>(v: &'a Value, path: &[&str], default: &'a str) -> &'a str {
    match str_at(v, path) {
        "" => default,
        s => s,
    }
}

#[cfg(test)]
mod test_support;

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
        let roles = info("rbac.authorization.k8s.io", "clusterroles", "ClusterRole");
        let cols = columns(&roles);
        assert_eq!(names(&cols), ["Name", "Created At"]);
        assert_eq!(cols[0].description, DESC_NAME);
        assert_eq!(cols[1].description, DESC_CREATED);
        assert_eq!(cols[0].format, "name");
        assert_eq!(cols[1].type_, "date");
        let obj = json!({"metadata": {"name": "system:node",
                                      "creationTimestamp": "2024-01-01T02:00:00+02:00"}});
        assert_eq!(
            cells(&roles, &obj, T0),
            [json!("system:node"), json!("2024-01-01T00:00:00Z")]
        );
        // Missing metadata: empty name and Go's zero time.
        assert_eq!(
            cells(&roles, &json!({}), T0),
            [json!(""), json!("0001-01-01T00:00:00Z")]
        );
        assert!(row_conditions(&roles, &obj).is_empty());
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
        let mut infos: Vec<ResourceInfo> = FAMILIES
            .iter()
            .flat_map(|family| family.iter())
            .map(|p| info(p.group, p.resource, ""))
            .collect();
        infos.push(info("", "limitranges", "LimitRange"));
        infos.push(super::test_support::crd_info(Vec::new()));
        let garbage = [
            json!(null),
            json!(42),
            json!("pod"),
            json!([]),
            json!({}),
            json!({"metadata": 1, "spec": [], "status": "x"}),
            json!({"metadata": {"name": 7, "creationTimestamp": "yesterday"},
                   "spec": {"containers": "no", "ports": [1, null], "metrics": [null, 3],
                            "selector": {"matchExpressions": [null]}, "template": []},
                   "status": {"containerStatuses": [null, 3, {"state": []}],
                              "conditions": [null, "x"], "hard": {"cpu": 1}}}),
        ];
        for info in &infos {
            // kube-apiserver's IPAddress printer fills one cell more than it declares.
            let extra = usize::from(info.resource == "ipaddresses");
            let n = columns(info).len() + extra;
            for obj in &garbage {
                assert_eq!(cells(info, obj, T0).len(), n, "{} {obj}", info.resource);
            }
        }
    }

    #[test]
    fn every_builtin_resource_has_one_printer() {
        let mut keys: Vec<(&str, &str)> = FAMILIES
            .iter()
            .flat_map(|family| family.iter())
            .map(|p| (p.group, p.resource))
            .collect();
        let n = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), n, "a (group, resource) is printed twice");
    }

    #[test]
    fn events_api_events_use_the_event_printer() {
        let core = info("", "events", "Event");
        let events_api = info("events.k8s.io", "events", "Event");
        assert_eq!(columns(&core), columns(&events_api));
        let ev = json!({"metadata": {"name": "e"}, "reason": "Pulled", "type": "Normal"});
        assert_eq!(cells(&core, &ev, T0), cells(&events_api, &ev, T0));
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
