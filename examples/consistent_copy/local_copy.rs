//! A local copy of every pod and node, kept consistent by one WatchMany stream.
//!
//! [`LocalCopy::apply`] takes the stream's messages one by one. A message holds every
//! event of the etcd revisions it covers, so after each message both maps are exactly
//! the cluster's pods and nodes at [`LocalCopy::revision`]: a pod's `spec.nodeName`
//! names a node of the map unless the cluster itself had such a pod at that revision.
//! [`run`] opens the stream, resumes it from the last revision applied after a
//! disconnect, and starts over with a full list when watchd answers 410 (the revision is
//! no longer kept).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::ControlFlow;
use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;
use tonic::metadata::errors::InvalidMetadataValue;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Channel;
use watchd::api::grpc::pb::watchd_client::WatchdClient;
use watchd::api::grpc::pb::{self, EventType};

/// The index of pods in the stream's selections.
pub const PODS: u32 = 0;
/// The index of nodes in the stream's selections.
pub const NODES: u32 = 1;

/// Largest message accepted from watchd (its messages stay under half of its
/// `--grpc-max-message-bytes` unless one object alone is larger).
const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// First wait before reconnecting; doubled after each failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A pod, as far as the copy needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// `spec.nodeName`: None while the pod is not scheduled.
    pub node: Option<String>,
    /// The etcd revision of the pod's last change.
    pub resource_version: i64,
}

/// A node, as far as the copy needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The etcd revision of the node's last change.
    pub resource_version: i64,
}

/// Pods by `namespace/name` and nodes by name, at one revision.
#[derive(Debug, Clone, Default)]
pub struct LocalCopy {
    /// Every pod, by `namespace/name`.
    pub pods: BTreeMap<String, Pod>,
    /// Every node, by name.
    pub nodes: BTreeMap<String, Node>,
    /// The last revision fully applied: every change up to it is in the maps, none
    /// after it. 0 until the first sync.
    pub revision: i64,
    /// The maps being built from a stream's initial events; they replace the maps at
    /// the bookmark that ends them.
    loading: Option<(BTreeMap<String, Pod>, BTreeMap<String, Node>)>,
}

/// What a message did to the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Changes (or a bookmark) applied: the copy is at [`LocalCopy::revision`].
    Changes,
    /// The initial events ended: the maps were replaced and are at the bookmark's
    /// revision.
    Synced,
    /// Part of the initial events: the maps are unchanged until they end.
    Loading,
    /// An ERROR event with code 410: the revision is gone; list again.
    Expired(String),
    /// Another ERROR event (the stream ends); resume.
    Failed(String),
}

/// A message the copy cannot apply: it would break the stream's contract (an event
/// out of revision order, an object without metadata, a selection not asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The pods per node at the copy's revision: the join of the two maps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Join {
    /// Pods on each node of the map (every node, 0 for one without pods).
    pub per_node: BTreeMap<String, usize>,
    /// Pods without `spec.nodeName`.
    pub unscheduled: usize,
    /// Pods whose `spec.nodeName` is not a node of the map.
    pub on_unknown_nodes: usize,
}

/// The part of a pod's JSON the copy reads.
#[derive(Deserialize)]
struct PodJson {
    #[serde(default)]
    spec: PodSpecJson,
}

#[derive(Deserialize, Default)]
struct PodSpecJson {
    #[serde(rename = "nodeName", default)]
    node_name: Option<String>,
}

impl LocalCopy {
    /// Whether the copy was synced at least once.
    pub fn is_synced(&self) -> bool {
        self.revision > 0
    }

    /// Forgets initial events received so far (their stream ended before the bookmark
    /// that closes them); the maps stay as they were.
    pub fn abandon_loading(&mut self) {
        self.loading = None;
    }

    /// Expects the initial events of a new stream: they build new maps, which replace
    /// these at the bookmark ending them.
    pub fn start_loading(&mut self) {
        self.loading = Some(Default::default());
    }

    /// Applies one message of a WatchMany over [pods, nodes] asked with
    /// `allow_watch_bookmarks`, objects in JSON. The message is applied whole or not at
    /// all: nothing of it on a [`Violation`], nor of one carrying an ERROR event (the
    /// stream ends there, and the events before the error need not complete their
    /// revision).
    pub fn apply(&mut self, message: &pb::WatchManyResponse) -> Result<Applied, Violation> {
        let mut changes = Vec::with_capacity(message.events.len());
        let mut loading = self.loading.is_some();
        // The revision applied, and the last one of the message so far.
        let mut base = self.revision;
        let mut last = self.revision;
        for e in &message.events {
            let rv = e.resource_version;
            match e.r#type() {
                EventType::Error => {
                    let (code, text) = status(&e.status);
                    return Ok(if code == Some(410) {
                        Applied::Expired(text)
                    } else {
                        Applied::Failed(text)
                    });
                }
                EventType::Bookmark if e.initial_events_end => {
                    if !loading {
                        return Err(Violation(format!(
                            "an initial-events-end bookmark at {rv} without initial events"
                        )));
                    }
                    loading = false;
                    (base, last) = (rv, rv);
                    changes.push(Change::Synced(rv));
                }
                // While loading, the maps are at no revision yet.
                EventType::Bookmark if loading => {}
                EventType::Bookmark => {
                    if rv < last {
                        return Err(Violation(format!("a bookmark at {rv} after {last}")));
                    }
                    last = rv;
                    changes.push(Change::Bookmark(rv));
                }
                t => {
                    if loading && t != EventType::Added {
                        return Err(Violation(format!("{t:?} at {rv} among initial events")));
                    }
                    if !loading && (rv <= base || rv < last) {
                        return Err(Violation(format!(
                            "{t:?} at {rv} after {last} (applied: {base})"
                        )));
                    }
                    if !loading {
                        last = rv;
                    }
                    let (key, entry) = decode(e)?;
                    changes.push(Change::Object {
                        gone: t == EventType::Deleted,
                        key,
                        entry,
                        rv,
                    });
                }
            }
        }
        let mut outcome = if self.loading.is_some() {
            Applied::Loading
        } else {
            Applied::Changes
        };
        for change in changes {
            match change {
                Change::Synced(rv) => {
                    if let Some((pods, nodes)) = self.loading.take() {
                        (self.pods, self.nodes) = (pods, nodes);
                    }
                    self.revision = rv;
                    outcome = Applied::Synced;
                }
                Change::Bookmark(rv) => self.revision = self.revision.max(rv),
                Change::Object {
                    gone,
                    key,
                    entry,
                    rv,
                } => {
                    let (pods, nodes) = match &mut self.loading {
                        Some((pods, nodes)) => (pods, nodes),
                        None => (&mut self.pods, &mut self.nodes),
                    };
                    match (entry, gone) {
                        (Entry::Pod(_), true) => {
                            pods.remove(&key);
                        }
                        (Entry::Node(_), true) => {
                            nodes.remove(&key);
                        }
                        (Entry::Pod(p), false) => {
                            pods.insert(key, p);
                        }
                        (Entry::Node(n), false) => {
                            nodes.insert(key, n);
                        }
                    }
                    // A message ends on a revision boundary: once it is applied, so is
                    // every revision up to its last event's.
                    if self.loading.is_none() {
                        self.revision = self.revision.max(rv);
                    }
                }
            }
        }
        Ok(outcome)
    }

    /// The pods per node, unscheduled pods and pods on nodes the map does not hold.
    pub fn join(&self) -> Join {
        let mut j = Join {
            per_node: self.nodes.keys().map(|n| (n.clone(), 0)).collect(),
            ..Join::default()
        };
        for pod in self.pods.values() {
            match pod.node.as_deref() {
                None | Some("") => j.unscheduled += 1,
                Some(n) => match j.per_node.get_mut(n) {
                    Some(count) => *count += 1,
                    None => j.on_unknown_nodes += 1,
                },
            }
        }
        j
    }

    /// One line: `rev R: N nodes, P pods (node-1: 25, ...), U unscheduled, K on unknown
    /// nodes`, naming at most `max_nodes` nodes (those with the most pods).
    pub fn summary(&self, max_nodes: usize) -> String {
        let j = self.join();
        let mut busiest: Vec<(&String, &usize)> = j.per_node.iter().collect();
        busiest.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut nodes: Vec<String> = busiest
            .iter()
            .take(max_nodes)
            .map(|(n, c)| format!("{n}: {c}"))
            .collect();
        if busiest.len() > max_nodes {
            nodes.push(format!("{} more", busiest.len() - max_nodes));
        }
        format!(
            "rev {}: {} nodes, {} pods ({}), {} unscheduled, {} on unknown nodes",
            self.revision,
            self.nodes.len(),
            self.pods.len(),
            nodes.join(", "),
            j.unscheduled,
            j.on_unknown_nodes
        )
    }
}

/// A pod or a node, as the copy keeps it.
enum Entry {
    Pod(Pod),
    Node(Node),
}

/// One change a message makes to the copy.
enum Change {
    /// The initial events ended at this revision.
    Synced(i64),
    /// Everything up to this revision was sent.
    Bookmark(i64),
    /// An object added, modified or deleted at `rv`.
    Object {
        gone: bool,
        key: String,
        entry: Entry,
        rv: i64,
    },
}

/// The map key and the entry of an ADDED, MODIFIED or DELETED event's object.
fn decode(e: &pb::WatchEvent) -> Result<(String, Entry), Violation> {
    let bad = |what: &str| Violation(format!("event at {}: {what}", e.resource_version));
    let o = e.object.as_ref().ok_or_else(|| bad("no object"))?;
    let m = o.metadata.as_ref().ok_or_else(|| bad("no metadata"))?;
    match e.selection {
        PODS => {
            if o.encoding() != pb::Encoding::Json {
                return Err(bad("a pod not in JSON"));
            }
            let pod: PodJson = serde_json::from_slice(&o.raw)
                .map_err(|err| bad(&format!("pod {}/{}: {err}", m.namespace, m.name)))?;
            let pod = Pod {
                node: pod.spec.node_name.filter(|n| !n.is_empty()),
                resource_version: m.resource_version,
            };
            Ok((format!("{}/{}", m.namespace, m.name), Entry::Pod(pod)))
        }
        NODES => {
            let node = Node {
                resource_version: m.resource_version,
            };
            Ok((m.name.clone(), Entry::Node(node)))
        }
        s => Err(bad(&format!("selection {s}, not asked for"))),
    }
}

/// The code and message of a Kubernetes Status in JSON.
fn status(json: &[u8]) -> (Option<i64>, String) {
    #[derive(Deserialize)]
    struct Status {
        code: Option<i64>,
        #[serde(default)]
        reason: String,
        #[serde(default)]
        message: String,
    }
    match serde_json::from_slice::<Status>(json) {
        Ok(s) => (
            s.code,
            format!("{} {}: {}", s.code.unwrap_or(0), s.reason, s.message),
        ),
        Err(_) => (None, String::from_utf8_lossy(json).into_owned()),
    }
}

/// How [`run`] runs.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Stop after this long (None: run until the callback stops it).
    pub bound: Option<Duration>,
    /// Sent as the `authorization` metadata of every call: see [`bearer`].
    pub authorization: Option<AsciiMetadataValue>,
    /// How often the callback gets a [`Moment::Tick`] (None: never).
    pub tick: Option<Duration>,
}

/// The `authorization` metadata of a bearer token.
pub fn bearer(token: &str) -> Result<AsciiMetadataValue, InvalidMetadataValue> {
    format!("Bearer {token}").parse()
}

/// What happened to the stream so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Streams opened with initial events (the first one, and each start over).
    pub lists: u64,
    /// Initial events received to their end: the maps were replaced.
    pub syncs: u64,
    /// Streams opened from the last revision applied, without initial events.
    pub resumes: u64,
    /// 410 answers (an ERROR event or an OutOfRange call): each starts over.
    pub expired: u64,
    /// Streams that ended, broke or could not be opened, other than by a 410.
    pub failures: u64,
    /// Messages that broke the stream's contract (see [`Violation`]); each starts over.
    pub violations: u64,
    /// Messages applied.
    pub messages: u64,
}

/// Why the callback is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment<'a> {
    /// The initial events ended: the maps were (re)built at the copy's revision.
    Synced,
    /// A message was applied: the copy is at its revision.
    Applied,
    /// The stream ended, failed or could not be opened; it resumes from the copy's
    /// revision after `backoff` (or lists again if the copy was never synced).
    Disconnected { error: &'a str, backoff: Duration },
    /// The revision is no longer kept (410), or a message broke the contract: the
    /// stream starts over with initial events after `backoff`.
    StartingOver { error: &'a str, backoff: Duration },
    /// [`Config::tick`] passed.
    Tick,
}

/// How a stream ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// Broken, ended or refused: resume.
    Failed,
    /// 410: list again.
    Expired,
    /// A message broke the contract: list again.
    Violation,
}

/// Keeps `copy` equal to the cluster's pods and nodes with one WatchMany stream at a
/// time until [`Config::bound`] passes or `on` returns `Break`; returns the copy and
/// what happened. `on` is called after every message applied (the copy is then at one
/// revision) and at each event of the stream's life. A copy synced already is resumed
/// from its revision.
pub async fn run<F>(
    client: WatchdClient<Channel>,
    config: &Config,
    mut copy: LocalCopy,
    mut on: F,
) -> (LocalCopy, Stats)
where
    F: FnMut(&LocalCopy, &Stats, Moment<'_>) -> ControlFlow<()>,
{
    let mut client = client.max_decoding_message_size(MAX_MESSAGE_BYTES);
    let deadline = config.bound.map(|b| Instant::now() + b);
    let mut next_tick = config.tick.map(|t| Instant::now() + t);
    let mut stats = Stats::default();
    let mut backoff = FIRST_BACKOFF;
    // Whether the next stream starts with initial events, or resumes after the copy's
    // revision.
    let mut list = !copy.is_synced();
    'streams: loop {
        let mut request = tonic::Request::new(pb::WatchManyRequest {
            selections: vec![selection("pods"), selection("nodes")],
            resource_version: if list {
                String::new()
            } else {
                copy.revision.to_string()
            },
            send_initial_events: Some(list),
            allow_watch_bookmarks: true,
            encoding: pb::Encoding::Json as i32,
            ..Default::default()
        });
        if let Some(a) = &config.authorization {
            request.metadata_mut().insert("authorization", a.clone());
        }
        let opened = match deadline {
            Some(d) => match tokio::time::timeout_at(d, client.watch_many(request)).await {
                Ok(r) => r,
                Err(_) => break,
            },
            None => client.watch_many(request).await,
        };
        // What ended the stream.
        let (error, end) = match opened {
            Err(status) if status.code() == tonic::Code::OutOfRange => {
                (status.message().to_string(), End::Expired)
            }
            Err(status) => (
                format!("{:?}: {}", status.code(), status.message()),
                End::Failed,
            ),
            Ok(response) => {
                if list {
                    stats.lists += 1;
                    copy.start_loading();
                } else {
                    stats.resumes += 1;
                }
                let mut stream = response.into_inner();
                loop {
                    let wake = match (deadline, next_tick) {
                        (Some(d), Some(t)) => Some(d.min(t)),
                        (d, t) => d.or(t),
                    };
                    let next = match wake {
                        Some(at) => tokio::time::timeout_at(at, stream.message()).await,
                        None => Ok(stream.message().await),
                    };
                    let message = match next {
                        Err(_) if deadline.is_some_and(|d| Instant::now() >= d) => break 'streams,
                        Err(_) => {
                            next_tick = config.tick.map(|t| Instant::now() + t);
                            if on(&copy, &stats, Moment::Tick).is_break() {
                                break 'streams;
                            }
                            continue;
                        }
                        Ok(Ok(Some(m))) => m,
                        Ok(Ok(None)) => break ("the stream ended".to_string(), End::Failed),
                        Ok(Err(status)) => {
                            let e = format!("{:?}: {}", status.code(), status.message());
                            break (e, End::Failed);
                        }
                    };
                    let moment = match copy.apply(&message) {
                        Ok(Applied::Loading) => {
                            backoff = FIRST_BACKOFF;
                            continue;
                        }
                        Ok(Applied::Changes) => Moment::Applied,
                        Ok(Applied::Synced) => {
                            stats.syncs += 1;
                            list = false;
                            Moment::Synced
                        }
                        Ok(Applied::Expired(e)) => break (e, End::Expired),
                        Ok(Applied::Failed(e)) => break (e, End::Failed),
                        Err(v) => break (v.0, End::Violation),
                    };
                    backoff = FIRST_BACKOFF;
                    stats.messages += 1;
                    if on(&copy, &stats, moment).is_break() {
                        break 'streams;
                    }
                }
            }
        };
        // Initial events cut short are of no use: the next stream sends them again.
        copy.abandon_loading();
        match end {
            End::Failed => stats.failures += 1,
            End::Expired => stats.expired += 1,
            End::Violation => stats.violations += 1,
        }
        let moment = if end == End::Failed {
            Moment::Disconnected {
                error: &error,
                backoff,
            }
        } else {
            list = true;
            Moment::StartingOver {
                error: &error,
                backoff,
            }
        };
        if on(&copy, &stats, moment).is_break() {
            break;
        }
        let until = Instant::now() + backoff;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        if deadline.is_some_and(|d| d <= until) {
            break;
        }
        tokio::time::sleep_until(until).await;
    }
    copy.abandon_loading();
    (copy, stats)
}

/// Every object of a core resource, in all namespaces.
fn selection(resource: &str) -> pb::Selection {
    pb::Selection {
        collection: Some(pb::Collection {
            group: String::new(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: String::new(),
        }),
        label_selector: String::new(),
        field_selector: String::new(),
        shard_selector: String::new(),
    }
}
