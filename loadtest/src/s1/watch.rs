//! The S1 watchers: W watch streams on all-namespace ConfigMaps, either as
//! HTTP watches on watchd or another Kubernetes API endpoint (JSON lines or,
//! like client-go informers of built-in kinds, protobuf frames), over
//! HTTP/1.1 with one connection each or over HTTP/2 as streams of
//! ceil(W / streams-per-connection) connections, as client-go multiplexes
//! them; or as `Watch` calls of watchd's own gRPC API (one server-streaming
//! call each, dealt round-robin over ceil(W / streams-per-connection) HTTP/2
//! connections alike); or as etcd gRPC watches on the key prefix (one stream
//! each, spread over a number of gRPC connections).
//!
//! Each watcher is a task that keeps its own [`Tally`], publishes the highest
//! revision it has seen (so the run knows when all have caught up), records
//! delivery latency into the shared histogram, and returns when told to stop.
//! Each watcher task reads its own response body, so a watcher that falls
//! behind holds back only its own stream.
//! A stream that fails is not reopened: the failure and the events it lost
//! are reported.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use tonic::transport::Channel;
use watchd::api::grpc::pb;
use watchd::api::grpc::pb::watchd_client::WatchdClient;

use super::event::{
    latency_us, now_unix_nanos, parse_grpc_event, parse_object_stamp, parse_watch_frame,
    parse_watch_line, Received,
};
use crate::endpoint::{Endpoint, Protocol};
use crate::grpc;
use crate::http::{Accept, FrameSplitter, LineSplitter, PROTOBUF_WATCH};
use crate::stats::{Histogram, Tally};
use crate::transport::Conn;

/// How long opening one watch may take.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(20);
/// Watches being opened at once.
pub const OPEN_CONCURRENCY: usize = 64;

/// What all watchers share.
pub struct Shared {
    /// Delivery latency, microseconds.
    pub latency: Histogram,
    /// Highest revision seen, per watcher.
    pub last_seen: Vec<AtomicI64>,
    /// Events without a usable stamp (not writer events, or undecodable).
    pub unstamped: AtomicU64,
    /// Revisions skipped so far, over all watchers: the writer's revisions
    /// are consecutive, so a jump is a loss (a live estimate for the
    /// progress line; the final accounting is exact).
    pub gaps: AtomicU64,
}

impl Shared {
    /// State for `watchers` watchers starting after revision `base`.
    pub fn new(watchers: usize, base: i64) -> Self {
        Self {
            latency: Histogram::new(),
            last_seen: (0..watchers).map(|_| AtomicI64::new(base)).collect(),
            unstamped: AtomicU64::new(0),
            gaps: AtomicU64::new(0),
        }
    }

    /// The lowest revision every watcher has reached.
    pub fn min_seen(&self) -> i64 {
        self.last_seen
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .min()
            .unwrap_or(i64::MAX)
    }
}

/// How one watcher ended.
#[derive(Debug)]
pub struct Outcome {
    /// Which watcher (0-based, in the order opened).
    pub index: usize,
    /// What it received.
    pub tally: Tally,
    /// Why its stream ended before it was told to stop, if it did.
    pub error: Option<String>,
    /// `ERROR` events received (watchd).
    pub error_events: u64,
}

/// The running watchers.
pub struct Watchers {
    /// Shared counters.
    pub shared: Arc<Shared>,
    /// Each task ends with the outcomes of its watchers: one, or every stream of an
    /// HTTP/2 connection.
    tasks: JoinSet<Vec<Outcome>>,
    stop: watch::Sender<bool>,
}

impl Watchers {
    /// Tells every watcher to stop and collects what each received.
    pub async fn stop(mut self, timeout: Duration) -> Vec<Outcome> {
        let _ = self.stop.send(true);
        let mut out = Vec::new();
        let collect = async {
            while let Some(r) = self.tasks.join_next().await {
                if let Ok(o) = r {
                    out.extend(o);
                }
            }
        };
        if tokio::time::timeout(timeout, collect).await.is_err() {
            self.tasks.abort_all();
        }
        out
    }
}

/// Where the watchers connect.
#[derive(Clone, Debug)]
pub enum Source {
    /// A Kubernetes HTTP API (watchd's, or any other).
    Http {
        /// Where and with which credentials.
        endpoint: Arc<Endpoint>,
        /// What the watch requests ask for.
        accept: Accept,
        /// HTTP/1.1 (a connection per watcher) or HTTP/2.
        protocol: Protocol,
        /// With HTTP/2, the most watchers on one connection.
        streams_per_connection: usize,
    },
    /// watchd's own gRPC API (plain-text HTTP/2 on a loopback address).
    Grpc {
        /// watchd's gRPC listener.
        addr: SocketAddr,
        /// The object encoding asked for (JSON, or protobuf as the HTTP
        /// watchers' `Accept` says).
        accept: Accept,
        /// The most watchers (`Watch` calls) on one connection.
        streams_per_connection: usize,
    },
    /// etcd, over this many gRPC connections.
    Etcd {
        /// Endpoints.
        endpoints: Vec<String>,
        /// gRPC connections to spread the streams over.
        connections: usize,
        /// Key prefix watched.
        prefix: String,
    },
}

/// Opens `count` watchers starting after revision `base` and returns once all
/// are established (or the first fails to open).
pub async fn open(source: &Source, count: usize, base: i64) -> Result<Watchers, String> {
    open_paths(source, count, base, |_| {
        "/api/v1/configmaps?watch=1".to_string()
    })
    .await
}

/// Like [`open`], with watcher `i`'s HTTP request path (its collection,
/// `watch=1` and any selector) given by `path(i)`; `&resourceVersion=<base>`
/// is appended. etcd watchers watch the source's prefix, and gRPC watchers
/// every ConfigMap, whatever the path.
pub async fn open_paths(
    source: &Source,
    count: usize,
    base: i64,
    path: impl Fn(usize) -> String,
) -> Result<Watchers, String> {
    let shared = Arc::new(Shared::new(count, base));
    let (stop, stop_rx) = watch::channel(false);
    let (ready_tx, mut ready_rx) = mpsc::channel::<Result<(), String>>(count.max(1));
    let gate = Arc::new(Semaphore::new(OPEN_CONCURRENCY));
    let mut tasks = JoinSet::new();
    let clients = match source {
        Source::Etcd {
            endpoints,
            connections,
            ..
        } => {
            let mut v = Vec::new();
            for _ in 0..(*connections).clamp(1, count.max(1)) {
                let c = Client::connect(endpoints, Some(crate::launch::etcd_options()))
                    .await
                    .map_err(|e| format!("etcd connect: {e}"))?;
                v.push(c);
            }
            v
        }
        Source::Http { .. } | Source::Grpc { .. } => Vec::new(),
    };
    let shared_conns = match source {
        Source::Http {
            endpoint,
            protocol: Protocol::Http2,
            streams_per_connection,
            ..
        } => {
            let n = count.div_ceil((*streams_per_connection).max(1));
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                let c = Conn::open(endpoint, Protocol::Http2, OPEN_TIMEOUT)
                    .await
                    .map_err(|e| format!("opening HTTP/2 connection {}/{n}: {e}", i + 1))?;
                v.push(c);
            }
            v
        }
        _ => Vec::new(),
    };
    // gRPC: ceil(W / streams_per_connection) connections, the calls dealt
    // round-robin over them as the HTTP/2 streams are.
    let channels = match source {
        Source::Grpc {
            addr,
            streams_per_connection,
            ..
        } => {
            let n = count.div_ceil((*streams_per_connection).max(1));
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                let c = grpc::connect(*addr, OPEN_TIMEOUT)
                    .await
                    .map_err(|e| format!("opening gRPC connection {}/{n}: {e}", i + 1))?;
                v.push(c);
            }
            v
        }
        _ => Vec::new(),
    };
    // HTTP/2: the watchers of each connection, read by one task.
    let mut groups: Vec<Vec<(Ctx, String)>> = (0..shared_conns.len()).map(|_| Vec::new()).collect();
    for idx in 0..count {
        let ctx = Ctx {
            idx,
            base,
            shared: shared.clone(),
            ready: ready_tx.clone(),
            stop: stop_rx.clone(),
            gate: gate.clone(),
        };
        match source {
            Source::Http {
                endpoint, accept, ..
            } => {
                // HTTP/2: the watchers are dealt round-robin over the
                // ceil(W / streams_per_connection) connections (as the etcd
                // watchers over theirs), so none has more than that many.
                let path = format!("{}&resourceVersion={base}", path(idx));
                if shared_conns.is_empty() {
                    let (link, accept) = (Link::Own(endpoint.clone()), *accept);
                    tasks.spawn(async move { vec![http_watcher(ctx, link, accept, path).await] });
                } else {
                    groups[idx % shared_conns.len()].push((ctx, path));
                }
            }
            Source::Grpc { accept, .. } => {
                let client = grpc::client(channels[idx % channels.len()].clone());
                let encoding = grpc::encoding(*accept);
                tasks.spawn(async move { vec![grpc_watcher(ctx, client, encoding).await] });
            }
            Source::Etcd { prefix, .. } => {
                let client = clients[idx % clients.len()].clone();
                let prefix = prefix.clone();
                tasks.spawn(async move { vec![etcd_watcher(ctx, client, prefix).await] });
            }
        }
    }
    if let Source::Http { accept, .. } = source {
        for (conn, group) in shared_conns.iter().zip(groups) {
            let conn = conn.stream().ok_or("not an HTTP/2 connection")?;
            tasks.spawn(http2_watchers(group, conn, *accept));
        }
    }
    drop(ready_tx);
    let deadline =
        tokio::time::Instant::now() + OPEN_TIMEOUT + Duration::from_millis(5 * count as u64);
    let mut opened = 0;
    let watchers = Watchers {
        shared,
        tasks,
        stop,
    };
    while opened < count {
        match tokio::time::timeout_at(deadline, ready_rx.recv()).await {
            Ok(Some(Ok(()))) => opened += 1,
            Ok(Some(Err(e))) => {
                watchers.stop(Duration::from_secs(5)).await;
                return Err(format!("opening watcher {}/{count}: {e}", opened + 1));
            }
            Ok(None) | Err(_) => {
                watchers.stop(Duration::from_secs(5)).await;
                return Err(format!("only {opened} of {count} watchers opened in time"));
            }
        }
    }
    Ok(watchers)
}

struct Ctx {
    idx: usize,
    base: i64,
    shared: Arc<Shared>,
    ready: mpsc::Sender<Result<(), String>>,
    stop: watch::Receiver<bool>,
    gate: Arc<Semaphore>,
}

impl Ctx {
    /// Tells [`open_paths`] how opening the watch went: the opened watch,
    /// or the outcome the watcher returns at once.
    async fn report_open<T>(&self, opened: Result<T, String>) -> Result<T, Outcome> {
        match opened {
            Ok(x) => {
                let _ = self.ready.send(Ok(())).await;
                Ok(x)
            }
            Err(e) => {
                let _ = self.ready.send(Err(e.clone())).await;
                Err(self.outcome(Tally::new(self.base), Some(e), 0))
            }
        }
    }

    fn outcome(&self, tally: Tally, error: Option<String>, error_events: u64) -> Outcome {
        Outcome {
            index: self.idx,
            tally,
            error,
            error_events,
        }
    }

    /// Accounts for one event received at `now_ns`.
    fn record(&self, tally: &mut Tally, revision: Option<i64>, sent_ns: Option<u64>, now_ns: u64) {
        if let Some(rev) = revision {
            let before = tally.last();
            if rev > before + 1 {
                let skipped = (rev - before - 1) as u64;
                self.shared.gaps.fetch_add(skipped, Ordering::Relaxed);
            }
            tally.record(rev);
            self.shared.last_seen[self.idx].store(tally.last(), Ordering::Relaxed);
        }
        match sent_ns {
            Some(sent) if sent > 0 => self.shared.latency.record(latency_us(sent, now_ns)),
            _ => {
                self.shared.unstamped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Accounts for one watchd event received at `now_ns`, as the HTTP and
    /// gRPC watchers alike: an `ERROR` is counted in `error_events` and ends
    /// the watcher, a `BOOKMARK` is skipped, any other event recorded, and
    /// an undecodable one ends the watcher; `bad` keeps the first reason.
    fn watchd_event(
        &self,
        tally: &mut Tally,
        ev: Result<Received, String>,
        now_ns: u64,
        error_events: &mut u64,
        bad: &mut Option<String>,
    ) {
        match ev {
            Ok(ev) if ev.kind == "ERROR" => {
                *error_events += 1;
                bad.get_or_insert_with(|| ev.detail.unwrap_or_else(|| "ERROR event".into()));
            }
            Ok(ev) if ev.kind == "BOOKMARK" => {}
            Ok(ev) => self.record(tally, ev.revision, ev.sent_ns, now_ns),
            Err(e) => {
                bad.get_or_insert(e);
            }
        }
    }
}

/// Splits a watchd watch body into events as its media type says.
enum Events {
    Lines(LineSplitter),
    Frames(FrameSplitter),
}

impl Events {
    fn for_accept(accept: Accept) -> Self {
        match accept {
            Accept::Json => Events::Lines(LineSplitter::default()),
            Accept::Protobuf => Events::Frames(FrameSplitter::default()),
        }
    }

    /// Calls `event` with every event decoded from `chunk`; an error if the
    /// stream cannot be split any further.
    fn feed(
        &mut self,
        chunk: &[u8],
        mut event: impl FnMut(Result<Received, String>),
    ) -> Result<(), String> {
        match self {
            Events::Lines(lines) => {
                lines.feed(chunk, |line| event(parse_watch_line(line)));
                Ok(())
            }
            Events::Frames(frames) => frames.feed(chunk, |frame| event(parse_watch_frame(frame))),
        }
    }
}

/// The connection a watcher's request goes on.
enum Link {
    /// A connection of its own (HTTP/1.1), opened by the watcher.
    Own(Arc<Endpoint>),
    /// A stream on a shared HTTP/2 connection.
    Stream(Conn),
}

async fn http_watcher(ctx: Ctx, link: Link, accept: Accept, path: String) -> Outcome {
    let (_conn, mut body) = match open_http(&ctx, link, accept, &path).await {
        Ok(x) => x,
        Err(outcome) => return outcome,
    };
    let mut reader = Reader::new(accept, ctx.base);
    let mut stop = ctx.stop.clone();
    let error = loop {
        let frame = tokio::select! {
            _ = stop.changed() => break None,
            f = body.frame() => f,
        };
        if let Some(e) = reader.frame(&ctx, frame) {
            break Some(e);
        }
    };
    reader.outcome(&ctx, error)
}

/// What one HTTP watcher has read so far.
struct Reader {
    tally: Tally,
    events: Events,
    error_events: u64,
}

impl Reader {
    fn new(accept: Accept, base: i64) -> Self {
        Reader {
            tally: Tally::new(base),
            events: Events::for_accept(accept),
            error_events: 0,
        }
    }

    /// Takes a frame of the body (None: it ended); Some(why) when the watcher ends.
    fn frame(
        &mut self,
        ctx: &Ctx,
        frame: Option<Result<hyper::body::Frame<bytes::Bytes>, hyper::Error>>,
    ) -> Option<String> {
        let data = match frame {
            None => return Some("watch stream ended".to_string()),
            Some(Err(e)) => return Some(format!("watch stream failed: {e}")),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(d) => d,
                Err(_) => return None,
            },
        };
        let now = now_unix_nanos();
        let mut bad: Option<String> = None;
        let (tally, error_events) = (&mut self.tally, &mut self.error_events);
        let fed = self.events.feed(&data, |ev| {
            ctx.watchd_event(tally, ev, now, error_events, &mut bad)
        });
        if let Err(e) = fed {
            bad.get_or_insert(e);
        }
        bad
    }

    fn outcome(self, ctx: &Ctx, error: Option<String>) -> Outcome {
        ctx.outcome(self.tally, error, self.error_events)
    }
}

/// The watchers of one HTTP/2 connection, read by one task: a frame that reaches many
/// streams at once (the same event to each) wakes this task once, not a task per
/// stream, so the generator keeps up with what it measures.
async fn http2_watchers(watchers: Vec<(Ctx, String)>, conn: Conn, accept: Accept) -> Vec<Outcome> {
    use futures_util::StreamExt;
    let opened = futures_util::future::join_all(watchers.into_iter().map(|(ctx, path)| {
        let conn = conn.stream();
        async move {
            let opened = match conn {
                Some(conn) => open_http(&ctx, Link::Stream(conn), accept, &path).await,
                None => {
                    ctx.report_open(Err("not an HTTP/2 connection".to_string()))
                        .await
                }
            };
            opened.map(|(_conn, body)| (ctx, body))
        }
    }))
    .await;
    let mut outcomes = Vec::new();
    let mut readers = Vec::new();
    let mut bodies = futures_util::stream::SelectAll::new();
    for o in opened {
        match o {
            Ok((ctx, body)) => {
                let i = readers.len();
                let reader = Reader::new(accept, ctx.base);
                readers.push((ctx, reader, None::<String>));
                // Each frame tagged with its watcher; the end of a body too.
                let frames = futures_util::stream::unfold(Some(body), |body| async move {
                    let mut body = body?;
                    match body.frame().await {
                        Some(f) => Some((Some(f), Some(body))),
                        None => Some((None, None)),
                    }
                })
                .map(move |f| (i, f));
                bodies.push(Box::pin(frames));
            }
            Err(outcome) => outcomes.push(outcome),
        }
    }
    let Some(mut stop) = readers.first().map(|(ctx, _, _)| ctx.stop.clone()) else {
        return outcomes;
    };
    let mut open = readers.len();
    while open > 0 {
        let (i, frame) = tokio::select! {
            _ = stop.changed() => break,
            next = bodies.next() => match next {
                Some(x) => x,
                None => break,
            },
        };
        let (ctx, reader, ended) = &mut readers[i];
        if ended.is_some() {
            continue;
        }
        if let Some(e) = reader.frame(ctx, frame) {
            *ended = Some(e);
            open -= 1;
        }
    }
    outcomes.extend(
        readers
            .into_iter()
            .map(|(ctx, reader, ended)| reader.outcome(&ctx, ended)),
    );
    outcomes
}

/// Opens watcher `ctx`'s watch (`GET path`) on `link` and tells [`open_paths`] how it
/// went; the response's body, or the outcome the watcher returns at once.
async fn open_http(
    ctx: &Ctx,
    link: Link,
    accept: Accept,
    path: &str,
) -> Result<(Conn, Incoming), Outcome> {
    let opened = async {
        let _permit = ctx.gate.acquire().await.map_err(|e| e.to_string())?;
        let mut conn = match link {
            Link::Own(endpoint) => Conn::open(&endpoint, Protocol::Http1, OPEN_TIMEOUT).await?,
            Link::Stream(conn) => conn,
        };
        let resp = tokio::time::timeout(OPEN_TIMEOUT, conn.get_as(path, accept))
            .await
            .map_err(|_| format!("GET {path}: no response in {OPEN_TIMEOUT:?}"))??;
        if resp.status() != 200 {
            let status = resp.status();
            let body = resp.into_body().collect().await.map(|b| b.to_bytes());
            return Err(format!("GET {path}: {status}: {body:?}"));
        }
        if accept == Accept::Protobuf {
            let ct = resp.headers().get(hyper::header::CONTENT_TYPE);
            if ct.and_then(|v| v.to_str().ok()) != Some(PROTOBUF_WATCH) {
                return Err(format!(
                    "GET {path}: asked for protobuf, got Content-Type {ct:?} instead of {PROTOBUF_WATCH}"
                ));
            }
        }
        Ok::<_, String>((conn, resp.into_body()))
    };
    ctx.report_open(opened.await).await
}

/// One `Watch` call of watchd's gRPC API from revision `base`: opened once
/// the response head arrives (watchd has started the watch session by
/// then); every event of every message is accounted for as the HTTP
/// watchers' are, BOOKMARKs skipped, ERRORs counted and ending the watcher.
async fn grpc_watcher(
    ctx: Ctx,
    mut client: WatchdClient<Channel>,
    encoding: pb::Encoding,
) -> Outcome {
    let opened = async {
        let _permit = ctx.gate.acquire().await.map_err(|e| e.to_string())?;
        let req = grpc::watch_request(ctx.base, encoding);
        let resp = tokio::time::timeout(OPEN_TIMEOUT, client.watch(req))
            .await
            .map_err(|_| format!("gRPC Watch configmaps: no response in {OPEN_TIMEOUT:?}"))?
            .map_err(|s| format!("gRPC Watch configmaps: {}", grpc::status_text(&s)))?;
        Ok::<_, String>(resp.into_inner())
    };
    let mut stream = match ctx.report_open(opened.await).await {
        Ok(x) => x,
        Err(outcome) => return outcome,
    };
    let mut tally = Tally::new(ctx.base);
    let mut error_events = 0;
    let mut stop = ctx.stop.clone();
    let error = loop {
        let msg = tokio::select! {
            _ = stop.changed() => break None,
            m = stream.message() => m,
        };
        let resp = match msg {
            Ok(Some(r)) => r,
            Ok(None) => break Some("gRPC watch stream ended".to_string()),
            Err(s) => break Some(format!("gRPC watch failed: {}", grpc::status_text(&s))),
        };
        let now = now_unix_nanos();
        let mut bad: Option<String> = None;
        for ev in &resp.events {
            let ev = parse_grpc_event(ev, encoding);
            ctx.watchd_event(&mut tally, ev, now, &mut error_events, &mut bad);
        }
        if let Some(e) = bad {
            break Some(e);
        }
    };
    ctx.outcome(tally, error, error_events)
}

async fn etcd_watcher(ctx: Ctx, mut client: Client, prefix: String) -> Outcome {
    let opened = async {
        let _permit = ctx.gate.acquire().await.map_err(|e| e.to_string())?;
        let opts = WatchOptions::new()
            .with_prefix()
            .with_start_revision(ctx.base + 1);
        let mut stream =
            tokio::time::timeout(OPEN_TIMEOUT, client.watch(prefix.clone(), Some(opts)))
                .await
                .map_err(|_| format!("watch {prefix}: not opened in {OPEN_TIMEOUT:?}"))?
                .map_err(|e| format!("watch {prefix}: {e}"))?;
        // etcd confirms the watch with an empty `created` response.
        let first = tokio::time::timeout(OPEN_TIMEOUT, stream.message())
            .await
            .map_err(|_| format!("watch {prefix}: not confirmed in {OPEN_TIMEOUT:?}"))?
            .map_err(|e| format!("watch {prefix}: {e}"))?
            .ok_or_else(|| format!("watch {prefix}: stream closed"))?;
        if !first.created() || first.canceled() {
            return Err(format!("watch {prefix}: not created: {first:?}"));
        }
        Ok::<_, String>((stream, first))
    };
    let (mut stream, first) = match ctx.report_open(opened.await).await {
        Ok(x) => x,
        Err(outcome) => return outcome,
    };
    let mut tally = Tally::new(ctx.base);
    let mut stop = ctx.stop.clone();
    let mut pending = Some(first);
    let error = loop {
        let resp = match pending.take() {
            Some(r) => r,
            None => {
                let msg = tokio::select! {
                    _ = stop.changed() => break None,
                    m = stream.message() => m,
                };
                match msg {
                    Ok(Some(r)) => r,
                    Ok(None) => break Some("etcd watch stream ended".to_string()),
                    Err(e) => break Some(format!("etcd watch failed: {e}")),
                }
            }
        };
        if resp.canceled() {
            break Some(format!(
                "etcd watch canceled: {} (compact revision {})",
                resp.cancel_reason(),
                resp.compact_revision()
            ));
        }
        let now = now_unix_nanos();
        let mut bad = None;
        for ev in resp.events() {
            let Some(kv) = ev.kv() else { continue };
            if ev.event_type() == EventType::Delete {
                ctx.record(&mut tally, Some(kv.mod_revision()), None, now);
                continue;
            }
            let sent = match parse_object_stamp(kv.value()) {
                Ok(s) => s,
                Err(e) => {
                    bad.get_or_insert(e);
                    None
                }
            };
            ctx.record(&mut tally, Some(kv.mod_revision()), sent, now);
        }
        if let Some(e) = bad {
            break Some(e);
        }
    };
    ctx.outcome(tally, error, 0)
}
