//! A small fake kube-apiserver ("the upstream") for tests of what watchd passes through.
//!
//! [`FakeUpstream::start`] listens on `127.0.0.1:<port picked by the kernel>` and serves
//! HTTP/1.1 (with connection upgrades) and HTTP/2 with prior knowledge (h2c) on the same
//! port. It records every request it receives ([`Recorded`]: method, path, raw query,
//! headers, the whole body) before it answers, so a test can check that what a client
//! sent through watchd arrived unchanged. It answers:
//!
//! - writes to objects (`POST` to a collection, `PUT`, `PATCH` and `DELETE` of an item,
//!   under `/api/v1/...` or `/apis/{group}/{version}/...`): against a real etcd when one
//!   was given, where kube-apiserver would keep them, with `dryRun=All` honoured;
//!   without etcd, every `POST`, `PUT`, `PATCH` and `DELETE` (on any path) is answered
//!   200 with a JSON echo of the method, path, query and body;
//! - `GET /api/v1/namespaces/{ns}/pods/{name}/log`: three lines, or with `follow=true`
//!   twenty lines, one frame every 100 ms, so a test can see that a stream is not buffered;
//! - `exec`, `attach` and `portforward` upgrades (WebSocket or SPDY): `101 Switching
//!   Protocols`, then every byte received on the upgraded connection is echoed back;
//! - an aggregated API (`metrics.k8s.io/v1beta1`, pods and nodes) and legacy discovery
//!   (`/api`, `/apis`, `/version`, `/openapi/v2`);
//! - anything else: 404 with a Kubernetes `Status` (reason `NotFound`).
//!
//! Every answer except a 101 carries `x-fake-upstream: yes`.
//!
//! Limits a test writer must know:
//! - etcd keys are `/registry/{resource}/[{ns}/]{name}` for the core group and
//!   `/registry/{group}/[{ns}/]...` with the group first for any other group. That is
//!   right for configmaps, secrets, namespaces and custom resources, not for resources
//!   kube-apiserver stores elsewhere (nodes are `minions`, services `services/specs`,
//!   `apps` and other built-in groups have no group prefix, ...).
//! - Objects are stored as compact JSON; a stored value that is not JSON (protobuf)
//!   cannot be replaced, patched or deleted (500 `InternalError`).
//! - Subresources (`/status`, `/scale`, `/eviction`, ...) and collection deletes are not
//!   object writes: with etcd they get the 404 `Status`, without etcd the echo.
//! - No optimistic concurrency: a `resourceVersion` in a `PUT` body is ignored.
//!   `application/apply-patch+yaml` bodies must be JSON text (as kubectl sends); apply
//!   replaces the whole object (no field management). A strategic merge patch is applied
//!   as an RFC 7386 JSON merge patch (lists are replaced, `$patch` directives are not
//!   understood). JSON patch (`application/json-patch+json`) is answered 415.
//! - Upgraded connections are echoed as raw bytes: there is no WebSocket or SPDY framing.
//!   Upgrades need HTTP/1.1 (HTTP/2 has no `Connection: Upgrade`).
//! - Recorded headers keep the order of the first occurrence of each name, with all
//!   values of one name together (as `http::HeaderMap` holds them). HTTP/2 requests have
//!   no `host` header (the authority is in the URI, which is not recorded).
//!
//! Must run inside a tokio runtime. Dropping the handle aborts the accept loop, every
//! connection, every HTTP/2 stream, every log stream and every upgraded echo.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use serde_json::{json, Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// How long [`FakeUpstream::start`] waits for the etcd client to connect.
const ETCD_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one etcd operation (get, transaction) may take before the write is answered 500.
const ETCD_OP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the upstream waits for a request body to arrive completely.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How many lines a followed pod log streams.
pub const FOLLOW_LOG_LINES: u32 = 20;

/// The pause between two lines of a followed pod log.
pub const FOLLOW_LOG_INTERVAL: Duration = Duration::from_millis(100);

/// The body of a pod log without `follow=true`.
pub const LOG_BODY: &str = "line 1\nline 2\nline 3\n";

/// The header every answer except a 101 carries, with the value `yes`.
pub const MARKER_HEADER: &str = "x-fake-upstream";

/// How often a write re-reads the object when etcd changed it between read and write.
const WRITE_ATTEMPTS: usize = 10;

/// The GUID RFC 6455 appends to `Sec-WebSocket-Key` before hashing.
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The group and version of the fake aggregated API.
const METRICS_GROUP: &str = "metrics.k8s.io";
const METRICS_VERSION: &str = "v1beta1";

/// The timestamp of every metrics item.
const METRICS_TIMESTAMP: &str = "2026-11-26T10:00:00Z";

/// The body type of every answer.
type Body = UnsyncBoxBody<Bytes, Infallible>;

/// One request the fake upstream received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, still percent-encoded, without the query.
    pub path: String,
    /// The raw query string (after `?`), undecoded; `None` when the target had no `?`.
    pub query: Option<String>,
    /// Header names (lower case) and values, every value of every header.
    pub headers: Vec<(String, String)>,
    /// The whole request body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name` (case-insensitive), in order.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The raw (still percent-encoded) value of query parameter `key`; `""` for a key
    /// without `=`.
    pub fn query_param(&self, key: &str) -> Option<&str> {
        query_param(self.query.as_deref(), key)
    }

    /// The path and, if any, `?` and the query, as the request target had them.
    pub fn target(&self) -> String {
        match &self.query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.clone(),
        }
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `METHOD target (N body bytes)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {} ({} body bytes)",
            self.method,
            self.target(),
            self.body.len()
        )
    }
}

/// A running fake kube-apiserver on loopback; see the module documentation.
pub struct FakeUpstream {
    shared: Arc<Shared>,
}

impl FakeUpstream {
    /// Listens on `127.0.0.1:<free port>` and serves HTTP/1.1 (with upgrades) and h2c
    /// (prior knowledge).
    ///
    /// `etcd`: when `Some(client URL)` (a loopback URL such as `http://127.0.0.1:2379`,
    /// e.g. [`super::Etcd::client_url`]), object writes go to that etcd; when `None`,
    /// writes are only echoed. Panics if the etcd URL is not loopback or the client
    /// cannot connect within 10 s.
    pub async fn start(etcd: Option<String>) -> FakeUpstream {
        let etcd = match etcd {
            Some(url) => Some(connect_etcd(&url).await),
            None => None,
        };
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake upstream on 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("local_addr of the fake upstream");
        let shared = Arc::new(Shared {
            addr,
            etcd,
            requests: Mutex::new(Vec::new()),
            tasks: Tasks::default(),
        });
        let accept_shared = shared.clone();
        shared.tasks.spawn(accept_loop(listener, accept_shared));
        FakeUpstream { shared }
    }

    /// The listening address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Every request received so far, in the order their bodies were complete.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// The requests received so far whose path starts with `path_prefix`.
    pub fn requests_to(&self, path_prefix: &str) -> Vec<Recorded> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.path.starts_with(path_prefix))
            .cloned()
            .collect()
    }

    /// Waits until at least `count` requests to `path_prefix` were received and returns
    /// them all; panics (listing every request received) after `timeout`.
    pub async fn wait_for_requests(
        &self,
        path_prefix: &str,
        count: usize,
        timeout: Duration,
    ) -> Vec<Recorded> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.requests_to(path_prefix);
            if seen.len() >= count {
                return seen;
            }
            if Instant::now() >= deadline {
                panic!(
                    "fake upstream: {} of {count} requests to {path_prefix} after {timeout:?}; \
                     received:\n{}",
                    seen.len(),
                    self.describe()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// One line per request received so far, for messages.
    pub fn describe(&self) -> String {
        self.requests()
            .iter()
            .map(Recorded::describe)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.shared.tasks.abort_all();
    }
}

/// State shared by the handle, the accept loop and every connection.
struct Shared {
    addr: SocketAddr,
    etcd: Option<Client>,
    requests: Mutex<Vec<Recorded>>,
    tasks: Tasks,
}

/// Every task the upstream spawned, so that dropping it can abort them all.
///
/// Also the executor of HTTP/2 streams, so those are tracked too.
#[derive(Clone, Default)]
struct Tasks(Arc<Mutex<TaskList>>);

#[derive(Default)]
struct TaskList {
    handles: Vec<AbortHandle>,
    /// Set by [`Tasks::abort_all`]: a task spawned afterwards is aborted at once.
    closed: bool,
}

impl Tasks {
    fn spawn<F>(&self, fut: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = tokio::spawn(fut).abort_handle();
        let mut list = lock(&self.0);
        if list.closed {
            handle.abort();
            return;
        }
        list.handles.retain(|h| !h.is_finished());
        list.handles.push(handle);
    }

    fn abort_all(&self) {
        let mut list = lock(&self.0);
        list.closed = true;
        for handle in list.handles.drain(..) {
            handle.abort();
        }
    }
}

impl<F> hyper::rt::Executor<F> for Tasks
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        self.spawn(fut);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Connects an etcd client to the loopback `url`, bounded by [`ETCD_CONNECT_TIMEOUT`].
async fn connect_etcd(url: &str) -> Client {
    assert!(
        ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"]
            .iter()
            .any(|prefix| url.starts_with(prefix)),
        "the fake upstream only talks to a loopback etcd, got {url}"
    );
    match tokio::time::timeout(ETCD_CONNECT_TIMEOUT, Client::connect([url], None)).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => panic!("fake upstream: connect etcd-client to {url}: {e}"),
        Err(_) => panic!(
            "fake upstream: connect etcd-client to {url}: timed out after {ETCD_CONNECT_TIMEOUT:?}"
        ),
    }
}

/// Accepts connections until the task is aborted.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let conn_shared = shared.clone();
                shared.tasks.spawn(serve_connection(stream, conn_shared));
            }
            // Out of file descriptors and the like: try again shortly.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Serves one connection: HTTP/1.1 with upgrades, or h2c when it starts with the preface.
async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let builder = auto::Builder::new(shared.tasks.clone());
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(&shared, req).await) }
    });
    let _ = builder
        .serve_connection_with_upgrades(TokioIo::new(stream), service)
        .await;
}

/// Records the request (body included), then answers it.
async fn handle(shared: &Arc<Shared>, mut req: Request<Incoming>) -> Response<Body> {
    let upgrade = upgrade_protocol(&req);
    let on_upgrade = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let (body, body_error) = match tokio::time::timeout(BODY_READ_TIMEOUT, body.collect()).await {
        Ok(Ok(collected)) => (collected.to_bytes().to_vec(), None),
        Ok(Err(e)) => (
            Vec::new(),
            Some(format!(
                "fake upstream: reading the request body failed: {e}"
            )),
        ),
        Err(_) => (
            Vec::new(),
            Some(format!(
                "fake upstream: the request body did not arrive within {BODY_READ_TIMEOUT:?}"
            )),
        ),
    };
    let recorded = Recorded {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    lock(&shared.requests).push(recorded.clone());

    if let Some(message) = body_error {
        return marked(status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &message,
            None,
        ));
    }
    if let (Some(protocol), Some(on_upgrade)) = (upgrade, on_upgrade) {
        return switch_protocols(shared, &parts.headers, protocol, on_upgrade);
    }
    marked(route(shared, &recorded).await)
}

/// Adds the [`MARKER_HEADER`].
fn marked(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut()
        .insert(MARKER_HEADER, HeaderValue::from_static("yes"));
    resp
}

/// Answers a request that is not an upgrade.
async fn route(shared: &Shared, r: &Recorded) -> Response<Body> {
    match r.method.as_str() {
        "GET" => get_route(shared, r),
        "POST" | "PUT" | "PATCH" | "DELETE" => match &shared.etcd {
            None => echo(r),
            Some(client) => match ObjectPath::parse(&r.path) {
                Some(target) => write_object(client, &target, r).await,
                None => no_route(r),
            },
        },
        _ => no_route(r),
    }
}

/// The 404 `Status` for a request nothing here answers.
fn no_route(r: &Recorded) -> Response<Body> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("fake upstream: no route for {} {}", r.method, r.path),
        None,
    )
}

/// The echo every write gets when there is no etcd.
fn echo(r: &Recorded) -> Response<Body> {
    json_response(
        StatusCode::OK,
        &json!({"echo": {
            "method": r.method,
            "path": r.path,
            "query": r.query,
            "body": r.body_text(),
        }}),
    )
}

// ---------------------------------------------------------------------------------------
// GET: discovery, the aggregated API and pod logs.

fn get_route(shared: &Shared, r: &Recorded) -> Response<Body> {
    let group_version = format!("{METRICS_GROUP}/{METRICS_VERSION}");
    let group = json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": METRICS_GROUP,
        "versions": [{"groupVersion": group_version, "version": METRICS_VERSION}],
        "preferredVersion": {"groupVersion": group_version, "version": METRICS_VERSION},
    });
    match r.path.as_str() {
        "/api" => {
            return json_response(
                StatusCode::OK,
                &json!({
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{
                        "clientCIDR": "0.0.0.0/0",
                        "serverAddress": shared.addr.to_string(),
                    }],
                }),
            )
        }
        "/apis" => {
            let mut group = group;
            if let Some(g) = group.as_object_mut() {
                g.remove("kind");
                g.remove("apiVersion");
            }
            return json_response(
                StatusCode::OK,
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}),
            );
        }
        "/version" => {
            return json_response(
                StatusCode::OK,
                &json!({
                    "major": "1",
                    "minor": "34",
                    "gitVersion": "v1.34.0-fake",
                    "platform": "linux/amd64",
                }),
            )
        }
        "/openapi/v2" => {
            return json_response(
                StatusCode::OK,
                &json!({
                    "swagger": "2.0",
                    "info": {"title": "fake", "version": "v1.34.0"},
                    "paths": {},
                }),
            )
        }
        _ => {}
    }
    if r.path == format!("/apis/{METRICS_GROUP}") {
        return json_response(StatusCode::OK, &group);
    }
    let metrics_root = format!("/apis/{group_version}");
    if r.path == metrics_root {
        return json_response(
            StatusCode::OK,
            &json!({
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": [
                    {
                        "name": "pods",
                        "singularName": "",
                        "namespaced": true,
                        "kind": "PodMetrics",
                        "verbs": ["get", "list"],
                    },
                    {
                        "name": "nodes",
                        "singularName": "",
                        "namespaced": false,
                        "kind": "NodeMetrics",
                        "verbs": ["get", "list"],
                    },
                ],
            }),
        );
    }
    if let Some(rest) = r.path.strip_prefix(&format!("{metrics_root}/")) {
        let segments: Vec<&str> = rest.split('/').collect();
        match segments.as_slice() {
            ["pods"] => return pod_metrics("default"),
            ["namespaces", ns, "pods"] if !ns.is_empty() => return pod_metrics(ns),
            ["nodes"] => return node_metrics(),
            _ => return no_route(r),
        }
    }
    let segments: Vec<&str> = r.path.split('/').collect();
    if let ["", "api", "v1", "namespaces", ns, "pods", name, "log"] = segments.as_slice() {
        if !ns.is_empty() && !name.is_empty() {
            return pod_log(shared, r.query_param("follow") == Some("true"));
        }
    }
    no_route(r)
}

/// A PodMetricsList with one item, `fake-metrics` in namespace `ns`.
fn pod_metrics(ns: &str) -> Response<Body> {
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "PodMetricsList",
            "apiVersion": format!("{METRICS_GROUP}/{METRICS_VERSION}"),
            "metadata": {},
            "items": [{
                "metadata": {"name": "fake-metrics", "namespace": ns},
                "timestamp": METRICS_TIMESTAMP,
                "window": "10s",
                "containers": [],
            }],
        }),
    )
}

/// A NodeMetricsList with one item, `fake-node`.
fn node_metrics() -> Response<Body> {
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "NodeMetricsList",
            "apiVersion": format!("{METRICS_GROUP}/{METRICS_VERSION}"),
            "metadata": {},
            "items": [{
                "metadata": {"name": "fake-node"},
                "timestamp": METRICS_TIMESTAMP,
                "window": "10s",
                "usage": {"cpu": "100m", "memory": "128Mi"},
            }],
        }),
    )
}

/// A pod's log: [`LOG_BODY`], or when following, [`FOLLOW_LOG_LINES`] lines, each its own
/// body frame, [`FOLLOW_LOG_INTERVAL`] apart.
fn pod_log(shared: &Shared, follow: bool) -> Response<Body> {
    let body = if follow {
        let (tx, rx) = mpsc::channel(1);
        shared.tasks.spawn(async move {
            for i in 1..=FOLLOW_LOG_LINES {
                if i > 1 {
                    tokio::time::sleep(FOLLOW_LOG_INTERVAL).await;
                }
                if tx.send(Bytes::from(format!("line {i}\n"))).await.is_err() {
                    return; // the client went away
                }
            }
        });
        ChannelBody(rx).boxed_unsync()
    } else {
        full(LOG_BODY)
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// A response body whose every chunk received on the channel is one data frame; it ends
/// when the sender is dropped.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|data| Ok(Frame::data(data))))
    }
}

// ---------------------------------------------------------------------------------------
// Upgrades: exec, attach and portforward.

/// The `Upgrade` header of a request that asks to upgrade an exec, attach or
/// portforward connection; `None` for every other request.
fn upgrade_protocol(req: &Request<Incoming>) -> Option<HeaderValue> {
    let path = req.uri().path();
    if !["/exec", "/attach", "/portforward"]
        .iter()
        .any(|suffix| path.ends_with(suffix))
    {
        return None;
    }
    let wants_upgrade = req
        .headers()
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    if !wants_upgrade {
        return None;
    }
    req.headers().get(header::UPGRADE).cloned()
}

/// Answers 101 and echoes every byte on the upgraded connection until EOF.
fn switch_protocols(
    shared: &Shared,
    headers: &HeaderMap,
    protocol: HeaderValue,
    on_upgrade: OnUpgrade,
) -> Response<Body> {
    let mut resp = Response::new(Empty::new().boxed_unsync());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    let websocket = protocol
        .to_str()
        .is_ok_and(|p| p.trim().eq_ignore_ascii_case("websocket"));
    if websocket {
        let Some(key) = headers
            .get(header::SEC_WEBSOCKET_KEY)
            .and_then(|v| v.to_str().ok())
        else {
            return marked(status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "fake upstream: a WebSocket upgrade without Sec-WebSocket-Key",
                None,
            ));
        };
        let accept = websocket_accept(key);
        resp.headers_mut()
            .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        if let Ok(value) = HeaderValue::from_str(&accept) {
            resp.headers_mut()
                .insert(header::SEC_WEBSOCKET_ACCEPT, value);
        }
        if let Some(value) = first_token(headers, &header::SEC_WEBSOCKET_PROTOCOL) {
            resp.headers_mut()
                .insert(header::SEC_WEBSOCKET_PROTOCOL, value);
        }
    } else {
        resp.headers_mut().insert(header::UPGRADE, protocol);
        let version = HeaderName::from_static("x-stream-protocol-version");
        if let Some(value) = first_token(headers, &version) {
            resp.headers_mut().insert(version, value);
        }
    }
    shared.tasks.spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let (mut reader, mut writer) = tokio::io::split(TokioIo::new(upgraded));
        let _ = tokio::io::copy(&mut reader, &mut writer).await;
        let _ = writer.shutdown().await;
    });
    resp
}

/// `Sec-WebSocket-Accept` for `key`: base64 of the SHA-1 of the key and the RFC 6455 GUID.
pub fn websocket_accept(key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{}{WEBSOCKET_GUID}", key.trim()).as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// The first comma-separated value of the first `name` header, if any.
fn first_token(headers: &HeaderMap, name: &HeaderName) -> Option<HeaderValue> {
    let first = headers.get(name)?.to_str().ok()?.split(',').next()?.trim();
    if first.is_empty() {
        return None;
    }
    HeaderValue::from_str(first).ok()
}

// ---------------------------------------------------------------------------------------
// Object writes against etcd.

/// Where an object write goes: parsed from `/api/v1/...` or `/apis/{group}/{version}/...`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ObjectPath {
    /// `None` for the core group.
    group: Option<String>,
    namespace: Option<String>,
    resource: String,
    /// `None` for a collection.
    name: Option<String>,
}

impl ObjectPath {
    fn parse(path: &str) -> Option<ObjectPath> {
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return None;
        }
        let (group, rest) = match segments.as_slice() {
            ["api", "v1", rest @ ..] => (None, rest),
            ["apis", group, _version, rest @ ..] => (Some(group.to_string()), rest),
            _ => return None,
        };
        let (namespace, resource, name) = match rest {
            ["namespaces", ns, resource] => (Some(*ns), *resource, None),
            ["namespaces", ns, resource, name] => (Some(*ns), *resource, Some(*name)),
            [resource] => (None, *resource, None),
            [resource, name] => (None, *resource, Some(*name)),
            _ => return None,
        };
        Some(ObjectPath {
            group,
            namespace: namespace.map(str::to_string),
            resource: resource.to_string(),
            name: name.map(str::to_string),
        })
    }

    /// The etcd key of object `name` of this path's resource.
    fn key(&self, name: &str) -> String {
        let mut key = String::from("/registry/");
        if let Some(group) = &self.group {
            key.push_str(group);
            key.push('/');
        }
        key.push_str(&self.resource);
        key.push('/');
        if let Some(ns) = &self.namespace {
            key.push_str(ns);
            key.push('/');
        }
        key.push_str(name);
        key
    }

    /// `details` of a Status about object `name`.
    fn details(&self, name: &str) -> Value {
        let mut details = json!({"name": name, "kind": self.resource});
        if let (Some(group), Some(d)) = (&self.group, details.as_object_mut()) {
            d.insert("group".into(), Value::String(group.clone()));
        }
        details
    }

    /// `configmaps "x"` or `widgets.example.com "x"`, as kube-apiserver names an object.
    fn describe(&self, name: &str) -> String {
        match &self.group {
            Some(group) => format!("{}.{group} \"{name}\"", self.resource),
            None => format!("{} \"{name}\"", self.resource),
        }
    }
}

/// What a write does once it has seen the current object.
enum Plan {
    /// Store this object and answer it with this code.
    Put(Value, StatusCode),
    /// Delete the key and answer with this (the current) object.
    Delete(Value),
    /// Change nothing and answer this.
    Answer(Response<Body>),
}

/// Answers an object write (`r` is a POST, PUT, PATCH or DELETE).
async fn write_object(client: &Client, target: &ObjectPath, r: &Recorded) -> Response<Body> {
    let dry_run = r.query_param("dryRun") == Some("All");
    let store = Store(client.clone());
    match (r.method.as_str(), &target.name) {
        ("POST", None) => {
            let object = match object_from_body(&r.body, target, None) {
                Ok(object) => object,
                Err(message) => return bad_request(&message),
            };
            let Some(name) = meta_str(&object, "name") else {
                return status(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    "fake upstream: metadata.name or metadata.generateName is required",
                    None,
                );
            };
            let key = target.key(&name);
            store
                .write(&key, dry_run, |current| match current {
                    Some(_) => Plan::Answer(status(
                        StatusCode::CONFLICT,
                        "AlreadyExists",
                        &format!("{} already exists", target.describe(&name)),
                        Some(target.details(&name)),
                    )),
                    None => Plan::Put(stamped(object.clone(), None), StatusCode::CREATED),
                })
                .await
        }
        ("PUT", Some(name)) => {
            let object = match object_from_body(&r.body, target, Some(name)) {
                Ok(object) => object,
                Err(message) => return bad_request(&message),
            };
            store
                .write(&target.key(name), dry_run, |current| {
                    replace(&object, current)
                })
                .await
        }
        ("PATCH", Some(name)) => patch(&store, target, name, r, dry_run).await,
        ("DELETE", Some(name)) => {
            store
                .write(&target.key(name), dry_run, |current| match current {
                    Some(current) => Plan::Delete(current.clone()),
                    None => Plan::Answer(not_found(target, name)),
                })
                .await
        }
        _ => no_route(r),
    }
}

/// A PATCH of object `name`, by content type.
async fn patch(
    store: &Store,
    target: &ObjectPath,
    name: &str,
    r: &Recorded,
    dry_run: bool,
) -> Response<Body> {
    let content_type = r
        .header("content-type")
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let key = target.key(name);
    match content_type.as_str() {
        "application/apply-patch+yaml" => {
            let object = match object_from_body(&r.body, target, Some(name)) {
                Ok(object) => object,
                Err(message) => return bad_request(&message),
            };
            store
                .write(&key, dry_run, |current| replace(&object, current))
                .await
        }
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            let patch: Value = match serde_json::from_slice(&r.body) {
                Ok(patch @ Value::Object(_)) => patch,
                _ => {
                    return status(
                        StatusCode::BAD_REQUEST,
                        "BadRequest",
                        "fake upstream: a merge patch must be a JSON object",
                        None,
                    )
                }
            };
            store
                .write(&key, dry_run, |current| {
                    let Some(current) = current else {
                        return Plan::Answer(not_found(target, name));
                    };
                    let mut object = current.clone();
                    merge_patch(&mut object, &patch);
                    // Identity and bookkeeping stay the stored object's.
                    for field in ["name", "namespace", "uid", "creationTimestamp"] {
                        set_meta(&mut object, field, current_meta(current, field));
                    }
                    Plan::Put(object, StatusCode::OK)
                })
                .await
        }
        other => status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            &format!("fake upstream: the patch content type {other:?} is not supported"),
            None,
        ),
    }
}

/// Replaces (or creates) an object with `object`, keeping the current uid and
/// creationTimestamp: 200 when it existed, 201 when it did not.
fn replace(object: &Value, current: Option<&Value>) -> Plan {
    match current {
        Some(current) => Plan::Put(stamped(object.clone(), Some(current)), StatusCode::OK),
        None => Plan::Put(stamped(object.clone(), None), StatusCode::CREATED),
    }
}

/// `object` with the uid and creationTimestamp of `current`, or new ones.
fn stamped(mut object: Value, current: Option<&Value>) -> Value {
    let (uid, created) = match current {
        Some(current) => (
            current_meta(current, "uid"),
            current_meta(current, "creationTimestamp"),
        ),
        None => (None, None),
    };
    set_meta(
        &mut object,
        "uid",
        Some(uid.unwrap_or_else(|| Value::String(new_uid()))),
    );
    set_meta(
        &mut object,
        "creationTimestamp",
        Some(created.unwrap_or_else(|| Value::String(rfc3339_now()))),
    );
    object
}

/// The 404 `Status` for a missing object.
fn not_found(target: &ObjectPath, name: &str) -> Response<Body> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{} not found", target.describe(name)),
        Some(target.details(name)),
    )
}

/// Parses a write's body as a JSON object and checks it against the URL: the name (when
/// the URL has one; filled in when the body has none), the namespace (filled in when
/// absent) and `generateName` (turned into a name when there is none). An error is the
/// message of a 400 `BadRequest` (see [`bad_request`]).
fn object_from_body(
    body: &[u8],
    target: &ObjectPath,
    url_name: Option<&str>,
) -> Result<Value, String> {
    let bad_request = |message: String| format!("fake upstream: {message}");
    let mut object: Value = serde_json::from_slice(body)
        .map_err(|e| bad_request(format!("the body is not JSON ({e})")))?;
    let Some(fields) = object.as_object_mut() else {
        return Err(bad_request("the body is not a JSON object".into()));
    };
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(bad_request("metadata is not a JSON object".into()));
    };
    metadata.remove("resourceVersion");
    let body_name = metadata
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string);
    match (url_name, body_name) {
        (Some(url), Some(body)) if url != body => {
            return Err(bad_request(format!(
                "the name of the object ({body}) does not match the name on the URL ({url})"
            )))
        }
        (Some(url), None) => {
            metadata.insert("name".into(), Value::String(url.to_string()));
        }
        (None, None) => {
            if let Some(prefix) = metadata.get("generateName").and_then(Value::as_str) {
                let name = format!("{prefix}{}", name_suffix());
                metadata.insert("name".into(), Value::String(name));
            }
        }
        _ => {}
    }
    if let Some(ns) = &target.namespace {
        match metadata.get("namespace").and_then(Value::as_str) {
            Some(body_ns) if body_ns != ns => {
                return Err(bad_request(format!(
                    "the namespace of the object ({body_ns}) does not match the namespace \
                     on the URL ({ns})"
                )))
            }
            Some(_) => {}
            None => {
                metadata.insert("namespace".into(), Value::String(ns.clone()));
            }
        }
    }
    Ok(object)
}

/// `metadata.<field>` of `object` as a string.
fn meta_str(object: &Value, field: &str) -> Option<String> {
    object
        .get("metadata")?
        .get(field)?
        .as_str()
        .map(str::to_string)
}

/// `metadata.<field>` of `object`, if set.
fn current_meta(object: &Value, field: &str) -> Option<Value> {
    object.get("metadata")?.get(field).cloned()
}

/// Sets (`Some`) or removes (`None`) `metadata.<field>`, creating `metadata` if needed.
fn set_meta(object: &mut Value, field: &str, value: Option<Value>) {
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(metadata) = metadata.as_object_mut() {
        match value {
            Some(value) => {
                metadata.insert(field.to_string(), value);
            }
            None => {
                metadata.remove(field);
            }
        }
    }
}

/// Applies an RFC 7386 JSON merge patch: objects merge recursively, `null` removes a
/// member, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// An etcd client with the few bounded operations writes need.
struct Store(Client);

impl Store {
    /// Reads the object at `key`, plans the write from it and applies the plan in a
    /// transaction that fails if the key changed since it was read (then starts over).
    /// With `dry_run`, answers the plan's object without writing.
    async fn write(
        &self,
        key: &str,
        dry_run: bool,
        plan: impl Fn(Option<&Value>) -> Plan,
    ) -> Response<Body> {
        for _ in 0..WRITE_ATTEMPTS {
            let current = match self.get(key).await {
                Ok(current) => current,
                Err(message) => return internal_error(&message),
            };
            let (current_object, mod_revision) = match current {
                None => (None, None),
                Some((value, mod_revision)) => match serde_json::from_slice::<Value>(&value) {
                    Ok(object) => (Some(object), Some(mod_revision)),
                    Err(_) => {
                        return internal_error(&format!(
                            "fake upstream: the value at {key} is not JSON (protobuf cannot \
                             be read here)"
                        ))
                    }
                },
            };
            let (op, mut object, code) = match plan(current_object.as_ref()) {
                Plan::Answer(resp) => return resp,
                Plan::Put(object, code) => {
                    let mut stored = object.clone();
                    set_meta(&mut stored, "resourceVersion", None);
                    (TxnOp::put(key, stored.to_string(), None), stored, code)
                }
                Plan::Delete(object) => (TxnOp::delete(key, None), object, StatusCode::OK),
            };
            let revision = if dry_run {
                mod_revision.unwrap_or(0)
            } else {
                match self.transact(key, mod_revision, op).await {
                    Ok(Some(revision)) => revision,
                    Ok(None) => continue, // changed meanwhile: read again
                    Err(message) => return internal_error(&message),
                }
            };
            set_meta(
                &mut object,
                "resourceVersion",
                Some(Value::String(revision.to_string())),
            );
            return json_response(code, &object);
        }
        status(
            StatusCode::CONFLICT,
            "Conflict",
            &format!("fake upstream: {key} kept changing during {WRITE_ATTEMPTS} attempts"),
            None,
        )
    }

    /// The value and mod_revision at `key`, if it exists.
    async fn get(&self, key: &str) -> Result<Option<(Vec<u8>, i64)>, String> {
        let mut client = self.0.clone();
        let resp = bounded(&format!("get {key}"), client.get(key, None)).await?;
        Ok(resp
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision())))
    }

    /// Runs `op` if `key` still has `mod_revision` (`None`: does not exist); returns the
    /// revision of the transaction, or `None` when the key had changed.
    async fn transact(
        &self,
        key: &str,
        mod_revision: Option<i64>,
        op: TxnOp,
    ) -> Result<Option<i64>, String> {
        let unchanged = match mod_revision {
            Some(revision) => Compare::mod_revision(key, CompareOp::Equal, revision),
            None => Compare::create_revision(key, CompareOp::Equal, 0),
        };
        let txn = Txn::new().when([unchanged]).and_then([op]);
        let mut client = self.0.clone();
        let what = format!("transaction on {key}");
        let resp = bounded(&what, client.txn(txn)).await?;
        if !resp.succeeded() {
            return Ok(None);
        }
        resp.header()
            .map(|h| Some(h.revision()))
            .ok_or_else(|| format!("etcd {what}: no response header"))
    }
}

/// Runs one etcd call bounded by [`ETCD_OP_TIMEOUT`]; errors become messages.
async fn bounded<T>(
    what: &str,
    call: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(ETCD_OP_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("fake upstream: etcd {what}: {e}")),
        Err(_) => Err(format!(
            "fake upstream: etcd {what}: timed out after {ETCD_OP_TIMEOUT:?}"
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Small helpers.

/// The raw value of query parameter `key` in `query`.
fn query_param<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed_unsync()
}

/// A JSON answer with `Content-Type: application/json`.
fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    let mut resp = Response::new(full(value.to_string()));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A Kubernetes `Status` (failure) answer.
fn status(code: StatusCode, reason: &str, message: &str, details: Option<Value>) -> Response<Body> {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if let (Some(details), Some(fields)) = (details, body.as_object_mut()) {
        fields.insert("details".into(), details);
    }
    json_response(code, &body)
}

/// A 400 `Status` (reason `BadRequest`).
fn bad_request(message: &str) -> Response<Body> {
    status(StatusCode::BAD_REQUEST, "BadRequest", message, None)
}

/// A 500 `Status` (reason `InternalError`).
fn internal_error(message: &str) -> Response<Body> {
    status(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        message,
        None,
    )
}

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A number that differs on every call in this process.
fn next_count() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// A UUID-shaped uid, unique across calls (a counter) and processes (the PID).
fn new_uid() -> String {
    let count = next_count();
    let time = unix_nanos() as u64;
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        std::process::id(),
        (time >> 24) & 0xffff,
        (time >> 12) & 0xfff,
        time & 0xfff,
        count & 0xffff_ffff_ffff
    )
}

/// Five lower-case letters and digits for a `generateName`, different on every call.
fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = next_count()
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(unix_nanos() as u64);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// The current UTC time as `2026-11-26T10:00:00Z`.
pub fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
fn rfc3339(secs: u64) -> String {
    let is_leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let mut days = secs / 86_400;
    let mut year = 1970;
    loop {
        let length = if is_leap(year) { 366 } else { 365 };
        if days < length {
            break;
        }
        days -= length;
        year += 1;
    }
    let february = if is_leap(year) { 29 } else { 28 };
    let month_lengths = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 1;
    for length in month_lengths {
        if days < length {
            break;
        }
        days -= length;
        month += 1;
    }
    let time = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{:02}T{:02}:{:02}:{:02}Z",
        days + 1,
        time / 3600,
        time / 60 % 60,
        time % 60
    )
}
