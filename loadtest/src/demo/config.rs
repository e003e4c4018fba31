//! Settings, errors and results of a demo run, and the object names it uses.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;

use super::{APPS, MAX_CHANGES_PER_SECOND};
use crate::store::StoreStats;

/// Settings of a demo run (mirrors the CLI flags).
#[derive(Clone, Debug, PartialEq)]
pub struct DemoConfig {
    /// etcd endpoints, `http://host:port` (a bare `host:port` is accepted).
    pub etcd_servers: Vec<String>,
    /// Key prefix kube-apiserver was started with (`--etcd-prefix`).
    pub etcd_prefix: String,
    /// Number of `demo-N` namespaces.
    pub namespaces: usize,
    /// Number of `node-N` nodes.
    pub nodes: usize,
    /// Pods in each demo namespace.
    pub pods_per_namespace: usize,
    /// Config maps in each demo namespace.
    pub configmaps_per_namespace: usize,
    /// Rate of the random changes after the fill (pods, config maps, widgets);
    /// 0 means none. Each change may be followed by the writes the controllers
    /// would make in response (status, endpoints, events).
    pub changes_per_second: f64,
    /// How often every Lease (one per node, plus the leader-election ones) is
    /// renewed, as the kubelet does every 10 s; zero means never.
    pub lease_renew_period: Duration,
    /// Time to live of Events: the etcd lease they are written with, as
    /// kube-apiserver's `--event-ttl` (1 h).
    pub event_ttl: Duration,
    /// PRNG seed for names, uids and the choice of changes.
    pub seed: u64,
    /// Stop after this long (fill included); `None` runs until stopped.
    pub duration: Option<Duration>,
    /// Fill, then return without making changes.
    pub once: bool,
    /// How objects are serialised in etcd.
    pub storage: Storage,
}

/// The serialisation of stored objects: protobuf (`k8s\0` + `runtime.Unknown`), as
/// kube-apiserver stores built-in kinds, or plain JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Storage {
    /// kube-apiserver's protobuf storage format (its default for built-in kinds).
    #[default]
    Protobuf,
    /// Compact single-line JSON.
    Json,
}

impl Storage {
    /// The name used in flags and results (`protobuf`, `json`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Protobuf => "protobuf",
            Self::Json => "json",
        }
    }

    /// Serialises `obj` for etcd as kube-apiserver stores it under this setting:
    /// custom resources always as JSON, CustomResourceDefinitions as
    /// [`Storage::encode_crd`] says, built-in kinds in this format. An object the
    /// protobuf schema rejects (a bug in the demo's objects) is written as JSON
    /// rather than not at all.
    pub fn encode(self, obj: &Value) -> Vec<u8> {
        if crate::objects::custom::is_custom_resource(obj) {
            return crate::objects::encode(obj);
        }
        if obj["kind"] == "CustomResourceDefinition" {
            return self.encode_crd(obj);
        }
        self.encode_builtin(obj)
    }

    /// Serialises a CustomResourceDefinition (given as `apiextensions.k8s.io/v1`) as
    /// kube-apiserver 1.34 stores it whatever `--storage-media-type` says: JSON (the
    /// apiextensions storage codec), `apiextensions.k8s.io/v1beta1`, see
    /// [`crd_storage_form`].
    pub fn encode_crd(self, crd: &Value) -> Vec<u8> {
        crate::objects::encode(&crd_storage_form(crd))
    }

    /// Serialises a built-in kind in this format.
    fn encode_builtin(self, obj: &Value) -> Vec<u8> {
        match self {
            Self::Json => crate::objects::encode(obj),
            Self::Protobuf => watchd::codec::pbjson::encode_stored(obj).unwrap_or_else(|err| {
                tracing::warn!(error = %err, "cannot encode object as protobuf; writing JSON");
                crate::objects::encode(obj)
            }),
        }
    }

    /// Reads a stored value in either format back as a JSON object (a stored CRD as the
    /// v1 object it was written from).
    pub fn decode(value: &[u8]) -> Option<Value> {
        let parsed = if value.starts_with(watchd::codec::envelope::MAGIC) {
            let rendered = watchd::codec::pbjson::render_stored(value, None).ok()?;
            serde_json::from_slice::<Value>(&rendered.json).ok()
        } else {
            serde_json::from_slice::<Value>(value).ok()
        };
        parsed
            .filter(Value::is_object)
            .map(|v| match v["apiVersion"].as_str() {
                Some("apiextensions.k8s.io/v1beta1") => crd_from_storage_form(&v),
                _ => v,
            })
    }
}

/// What kube-apiserver writes for a v1 CRD whose versions share their schema,
/// subresources, printer columns and selectable fields (every demo CRD has one
/// version): v1beta1, those hoisted to `spec`, the deprecated `spec.version` set, a
/// printer column's `jsonPath` named `JSONPath`.
pub fn crd_storage_form(crd: &Value) -> Value {
    let mut out = crd.clone();
    out["apiVersion"] = "apiextensions.k8s.io/v1beta1".into();
    let spec = &mut out["spec"];
    let mut versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if let Some(first) = versions.first() {
        spec["version"] = first["name"].clone();
    }
    let hoisted = [
        ("schema", "validation"),
        ("subresources", "subresources"),
        ("additionalPrinterColumns", "additionalPrinterColumns"),
        ("selectableFields", "selectableFields"),
    ];
    for (per_version, top) in hoisted {
        let all: Vec<Option<Value>> = versions
            .iter()
            .map(|v| v.get(per_version).cloned())
            .collect();
        let Some(Some(first)) = all.first().cloned() else {
            continue;
        };
        if all.iter().all(|v| v.as_ref() == Some(&first)) {
            for v in &mut versions {
                if let Some(map) = v.as_object_mut() {
                    map.remove(per_version);
                }
            }
            spec[top] = first;
        }
    }
    if let Some(cols) = spec["additionalPrinterColumns"].as_array_mut() {
        for c in cols {
            if let Some(map) = c.as_object_mut() {
                if let Some(path) = map.remove("jsonPath") {
                    map.insert("JSONPath".into(), path);
                }
            }
        }
    }
    spec["versions"] = Value::Array(versions);
    out
}

/// The v1 CRD [`crd_storage_form`] was made from (for re-reading what the demo wrote).
pub fn crd_from_storage_form(stored: &Value) -> Value {
    let mut out = stored.clone();
    out["apiVersion"] = "apiextensions.k8s.io/v1".into();
    let spec = &mut out["spec"];
    let top: Vec<(&str, Option<Value>)> = [
        ("schema", "validation"),
        ("subresources", "subresources"),
        ("additionalPrinterColumns", "additionalPrinterColumns"),
        ("selectableFields", "selectableFields"),
    ]
    .into_iter()
    .map(|(per_version, top)| {
        let value = spec.as_object_mut().and_then(|m| m.remove(top));
        (per_version, value)
    })
    .collect();
    if let Some(map) = spec.as_object_mut() {
        map.remove("version");
    }
    if let Some(versions) = spec["versions"].as_array_mut() {
        for v in versions {
            for (per_version, value) in &top {
                if let Some(mut value) = value.clone() {
                    if *per_version == "additionalPrinterColumns" {
                        for c in value.as_array_mut().into_iter().flatten() {
                            if let Some(map) = c.as_object_mut() {
                                if let Some(p) = map.remove("JSONPath") {
                                    map.insert("jsonPath".into(), p);
                                }
                            }
                        }
                    }
                    v[*per_version] = value;
                }
            }
        }
    }
    out
}

impl FromStr for Storage {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "protobuf" => Ok(Self::Protobuf),
            "json" => Ok(Self::Json),
            _ => Err(format!(
                "unknown storage format {s:?}: expected protobuf or json"
            )),
        }
    }
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            etcd_servers: vec!["http://127.0.0.1:2379".to_owned()],
            etcd_prefix: "/registry".to_owned(),
            namespaces: 5,
            nodes: 4,
            pods_per_namespace: 8,
            configmaps_per_namespace: 3,
            changes_per_second: 5.0,
            lease_renew_period: Duration::from_secs(10),
            event_ttl: Duration::from_secs(3600),
            seed: 1,
            duration: None,
            once: false,
            storage: Storage::Protobuf,
        }
    }
}

impl DemoConfig {
    /// Checks the settings and returns the normalised endpoint list.
    pub fn endpoints(&self) -> Result<Vec<String>, DemoError> {
        let mut out = Vec::new();
        for raw in &self.etcd_servers {
            let ep = raw.trim();
            if ep.is_empty() {
                continue;
            }
            if ep.starts_with("https://") {
                return Err(DemoError::Config(format!(
                    "{ep}: TLS endpoints are not supported by the demo writer; use http://"
                )));
            }
            if ep.contains("://") && !ep.starts_with("http://") {
                return Err(DemoError::Config(format!(
                    "{ep}: expected http://host:port"
                )));
            }
            if ep.starts_with("http://") {
                out.push(ep.to_owned());
            } else {
                out.push(format!("http://{ep}"));
            }
        }
        if out.is_empty() {
            return Err(DemoError::Config("no etcd servers given".to_owned()));
        }
        Ok(out)
    }

    /// Validates every setting.
    pub fn validate(&self) -> Result<(), DemoError> {
        self.endpoints()?;
        if !self.etcd_prefix.starts_with('/') {
            return Err(DemoError::Config(format!(
                "etcd prefix {:?} must start with '/'",
                self.etcd_prefix
            )));
        }
        if self.nodes == 0 && self.namespaces > 0 && self.pods_per_namespace > 0 {
            return Err(DemoError::Config("pods need at least one node".to_owned()));
        }
        let cps = self.changes_per_second;
        if !cps.is_finite() || !(0.0..=MAX_CHANGES_PER_SECOND).contains(&cps) {
            return Err(DemoError::Config(format!(
                "changes per second must be between 0 and {MAX_CHANGES_PER_SECOND}, got {cps}"
            )));
        }
        if !self.lease_renew_period.is_zero() && self.lease_renew_period < MIN_RENEW_PERIOD {
            return Err(DemoError::Config(format!(
                "lease renew period must be 0 (never) or at least {MIN_RENEW_PERIOD:?}, got {:?}",
                self.lease_renew_period
            )));
        }
        if self.event_ttl.as_secs() < 1 {
            return Err(DemoError::Config(format!(
                "event TTL must be at least 1 s, got {:?}",
                self.event_ttl
            )));
        }
        Ok(())
    }

    /// The etcd lease TTL of Events, in whole seconds.
    pub fn event_ttl_seconds(&self) -> i64 {
        i64::try_from(self.event_ttl.as_secs()).unwrap_or(i64::MAX)
    }
}

/// Shortest lease renew period: more often than this is a load test, not a cluster.
const MIN_RENEW_PERIOD: Duration = Duration::from_millis(10);

/// Why a demo run could not start.
#[derive(Debug)]
pub enum DemoError {
    /// Invalid settings.
    Config(String),
    /// The etcd client could not be created for the endpoints.
    Connect(etcd_client::Error),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(msg) => write!(f, "invalid demo settings: {msg}"),
            Self::Connect(err) => write!(f, "cannot set up etcd client: {err}"),
        }
    }
}

impl std::error::Error for DemoError {}

/// How a demo run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `once` was set and the fill completed.
    Filled,
    /// The configured duration elapsed.
    Duration,
    /// The caller's stop future (e.g. Ctrl-C) completed.
    Stopped,
}

/// What a demo run did.
#[derive(Clone, Debug)]
pub struct Summary {
    /// How the run ended.
    pub stop: StopReason,
    /// Random changes attempted after the fill.
    pub changes: u64,
    /// Lease renewals written.
    pub renewals: u64,
    /// Events written (created or, repeated, updated).
    pub events: u64,
    /// etcd write counters (fill included).
    pub store: StoreStats,
    /// Pods tracked at the end.
    pub pods: usize,
    /// Config maps tracked at the end.
    pub configmaps: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Names of the demo namespaces: `demo-1..=n`.
pub fn demo_namespace_names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("demo-{i}")).collect()
}

/// Names of the nodes: `node-1..=n`.
pub fn node_names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("node-{i}")).collect()
}

/// Name of the `i`-th (1-based) config map of a namespace, e.g. `web-config-1`.
pub fn configmap_name(i: usize) -> String {
    format!("{}-config-{i}", APPS[(i + APPS.len() - 1) % APPS.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(demo_namespace_names(2), ["demo-1", "demo-2"]);
        assert_eq!(node_names(3), ["node-1", "node-2", "node-3"]);
        assert_eq!(configmap_name(1), "web-config-1");
        assert_eq!(configmap_name(2), "api-config-2");
        assert_eq!(configmap_name(4), "web-config-4");
    }

    #[test]
    fn endpoint_normalisation_and_validation() {
        let mut cfg = DemoConfig {
            etcd_servers: vec!["127.0.0.1:2379".into(), " http://10.0.0.1:2379".into()],
            ..DemoConfig::default()
        };
        assert_eq!(
            cfg.endpoints().expect("valid"),
            ["http://127.0.0.1:2379", "http://10.0.0.1:2379"]
        );
        assert!(cfg.validate().is_ok());
        cfg.etcd_servers = vec!["https://x:2379".into()];
        assert!(cfg.validate().is_err());
        cfg.etcd_servers = vec![String::new()];
        assert!(cfg.validate().is_err());
        cfg.etcd_servers = vec!["http://x:2379".into()];
        cfg.changes_per_second = f64::NAN;
        assert!(cfg.validate().is_err());
        cfg.changes_per_second = 0.0;
        cfg.etcd_prefix = "registry".into();
        assert!(cfg.validate().is_err());
        cfg.etcd_prefix = "/registry".into();
        cfg.nodes = 0;
        assert!(cfg.validate().is_err());
        cfg.nodes = 1;
        cfg.lease_renew_period = Duration::from_millis(1);
        assert!(cfg.validate().is_err());
        cfg.lease_renew_period = Duration::ZERO;
        assert!(cfg.validate().is_ok());
        cfg.event_ttl = Duration::from_millis(500);
        assert!(cfg.validate().is_err());
    }

    #[test]
    fn storage_formats_round_trip() {
        assert_eq!("json".parse(), Ok(Storage::Json));
        assert_eq!("protobuf".parse(), Ok(Storage::Protobuf));
        for s in [Storage::Json, Storage::Protobuf] {
            assert_eq!(s.name().parse(), Ok(s));
        }
        assert!("yaml".parse::<Storage>().is_err());
        assert_eq!(DemoConfig::default().storage, Storage::Protobuf);
        let mut rng = crate::objects::Rng::new(3);
        let pod = crate::objects::pod(
            &crate::objects::NewPod {
                ns: "ns",
                name: "p",
                node: "node-1",
                labels: &[("app", "web")],
                owner: crate::objects::controller_ref("apps/v1", "ReplicaSet", "web", "u"),
                pod_ip: Some("10.244.1.2".to_owned()),
            },
            &mut rng,
        );
        for storage in [Storage::Json, Storage::Protobuf] {
            let bytes = storage.encode(&pod);
            let magic = bytes.starts_with(watchd::codec::envelope::MAGIC);
            assert_eq!(magic, storage == Storage::Protobuf);
            let back = Storage::decode(&bytes).expect("decodes");
            assert_eq!(back["metadata"], pod["metadata"]);
            assert_eq!(back["status"]["phase"], "Running");
        }
        assert_eq!(Storage::decode(b"k8s\0garbage"), None);
    }

    #[test]
    fn custom_resources_and_crds_are_json_in_either_format() {
        use crate::objects::custom;
        let mut rng = crate::objects::Rng::new(4);
        let objects = [
            custom::widget_crd(&mut rng),
            custom::widget("ns", "web", &mut rng),
            custom::widget_class("standard", &mut rng),
        ];
        for storage in [Storage::Json, Storage::Protobuf] {
            for obj in &objects {
                let bytes = storage.encode(obj);
                assert_eq!(bytes.first(), Some(&b'{'), "{} as {storage:?}", obj["kind"]);
                assert_eq!(Storage::decode(&bytes).as_ref(), Some(obj));
                if obj["kind"] == "CustomResourceDefinition" {
                    let stored: Value = serde_json::from_slice(&bytes).unwrap();
                    assert_eq!(stored["apiVersion"], "apiextensions.k8s.io/v1beta1");
                    assert_eq!(stored["spec"]["version"], "v1");
                    assert!(stored["spec"]["validation"]["openAPIV3Schema"].is_object());
                    assert!(stored["spec"]["versions"][0].get("schema").is_none());
                }
            }
        }
    }
}
