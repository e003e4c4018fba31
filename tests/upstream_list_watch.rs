//! The upstream source against an API server without streaming lists: a watchd fed by
//! another watchd (over a real etcd) through a filtering proxy that makes the tier above
//! look like an older kube-apiserver. The proxy refuses streaming lists (422, as an
//! apiserver without the WatchList feature does), strips `kind` and `apiVersion` from
//! list items (as kube-apiserver writes lists of built-in kinds), streams everything else
//! through unchanged, and can answer one watch with 410 Expired. So the second tier must
//! fall back for good to paged lists (`limit`, `continue`) and watches from the list's
//! resourceVersion, restore the items' type meta, and re-list a resource on 410.
//!
//! Layout: etcd → tier 1 (`Watchd::start`) → [`FilterProxy`] → tier 2
//! (`Watchd::start_upstream`).

mod support;

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use bytes::Bytes;
use etcd_client::Client;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use support::http as client;
use support::kube::{
    check_event, configmap, delete_key, get_json, item, item_names, metric, next_event, open_watch,
    pod, pod_key, put_json, rv, EVENT_WAIT,
};
use support::{Etcd, Watchd};

/// The namespace of the test's ConfigMaps.
const NS: &str = "lw";
/// Tier 2's collection of ConfigMaps (the path it lists and watches on the tier above).
const CONFIGMAPS: &str = "/api/v1/configmaps";
/// How long the proxy waits for tier 1 to connect and answer a request's head, or to
/// send a whole list.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the test waits for tier 2 to notice something (a re-list).
const SETTLE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// The filtering proxy.
// ---------------------------------------------------------------------------------------

type ProxyBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// What the proxy saw and did, readable by the test.
#[derive(Default)]
struct Counters {
    /// List responses (GETs without `watch`, JSON with `items`) passed on rewritten.
    lists: AtomicUsize,
    /// Of those, the pages asked for with a `continue` token.
    continued_lists: AtomicUsize,
    /// List items whose `kind` or `apiVersion` was removed.
    stripped_items: AtomicUsize,
    /// Watch requests (including those answered 410 here).
    watches: AtomicUsize,
    /// Streaming lists (`sendInitialEvents`) answered 422 without asking tier 1.
    refused_streaming_lists: AtomicUsize,
    /// Watches answered 410 Expired here.
    expired_watches: AtomicUsize,
}

struct ProxyState {
    upstream: SocketAddr,
    counters: Counters,
    /// Paths whose next watch request is answered 410.
    expire_next_watch: Mutex<HashSet<String>>,
    /// Every task the proxy spawned (accept loop, connections, upstream connections).
    tasks: Mutex<Vec<AbortHandle>>,
}

impl ProxyState {
    fn track(&self, task: AbortHandle) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }
}

/// An HTTP/1.1 proxy on 127.0.0.1 in front of tier 1 that makes it look like a
/// kube-apiserver without streaming lists. Dropping it aborts every task it started.
struct FilterProxy {
    addr: SocketAddr,
    state: Arc<ProxyState>,
}

impl FilterProxy {
    async fn start(upstream: SocketAddr) -> FilterProxy {
        assert!(upstream.ip().is_loopback(), "{upstream}");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy on 127.0.0.1:0");
        let addr = listener.local_addr().expect("the proxy's address");
        let state = Arc::new(ProxyState {
            upstream,
            counters: Counters::default(),
            expire_next_watch: Mutex::new(HashSet::new()),
            tasks: Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let conn_state = shared.clone();
                let conn = tokio::spawn(async move {
                    let service = service_fn(move |req| handle(conn_state.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                shared.track(conn.abort_handle());
            }
        });
        state.track(accept.abort_handle());
        FilterProxy { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn count(&self, pick: impl Fn(&Counters) -> &AtomicUsize) -> usize {
        pick(&self.state.counters).load(Ordering::SeqCst)
    }

    fn lists(&self) -> usize {
        self.count(|c| &c.lists)
    }

    fn continued_lists(&self) -> usize {
        self.count(|c| &c.continued_lists)
    }

    fn stripped_items(&self) -> usize {
        self.count(|c| &c.stripped_items)
    }

    fn watches(&self) -> usize {
        self.count(|c| &c.watches)
    }

    fn refused_streaming_lists(&self) -> usize {
        self.count(|c| &c.refused_streaming_lists)
    }

    fn expired_watches(&self) -> usize {
        self.count(|c| &c.expired_watches)
    }

    /// Answers the next watch request for `path` with 410 Expired.
    fn expire_next_watch(&self, path: &str) {
        lock(&self.state.expire_next_watch).insert(path.to_string());
    }

    /// Whether a watch of `path` is still to be answered 410.
    fn expiry_pending(&self, path: &str) -> bool {
        lock(&self.state.expire_next_watch).contains(path)
    }

    fn describe(&self) -> String {
        format!(
            "proxy: {} lists ({} continued, {} items stripped), {} watches ({} answered 410), {} streaming lists refused",
            self.lists(),
            self.continued_lists(),
            self.stripped_items(),
            self.watches(),
            self.expired_watches(),
            self.refused_streaming_lists(),
        )
    }
}

impl Drop for FilterProxy {
    fn drop(&mut self) {
        for task in lock(&self.state.tasks).drain(..) {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the query has parameter `key` (with or without a value).
fn has_param(query: &str, key: &str) -> bool {
    query.split('&').any(|kv| kv.split('=').next() == Some(key))
}

fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A Kubernetes `Status` answer.
fn status(code: u16, reason: &str, message: &str) -> Response<ProxyBody> {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    Response::builder()
        .status(StatusCode::from_u16(code).expect("a status code"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(body.to_string()))
        .expect("a Status response")
}

async fn handle(
    state: Arc<ProxyState>,
    mut req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let c = &state.counters;
    if has_param(&query, "sendInitialEvents") {
        c.refused_streaming_lists.fetch_add(1, Ordering::SeqCst);
        return Ok(status(
            422,
            "Invalid",
            "resourceVersionMatch is forbidden for watch",
        ));
    }
    if has_param(&query, "watch") {
        c.watches.fetch_add(1, Ordering::SeqCst);
        if lock(&state.expire_next_watch).remove(&path) {
            c.expired_watches.fetch_add(1, Ordering::SeqCst);
            return Ok(status(
                410,
                "Expired",
                "too old resource version (the test's proxy says so)",
            ));
        }
    }
    if req.method() != Method::GET || has_param(&query, "watch") {
        // Streamed through frame by frame, as tier 1 sends it.
        return Ok(match send_upstream(&state, req).await {
            Ok(resp) => resp.map(BodyExt::boxed_unsync),
            Err(e) => status(503, "ServiceUnavailable", &e),
        });
    }
    // A list (or a get): read whole, and rewritten if it is a list. The proxy cannot
    // rewrite a compressed body, so it asks for none.
    req.headers_mut().remove(header::ACCEPT_ENCODING);
    let resp = match send_upstream(&state, req).await {
        Ok(resp) => resp,
        Err(e) => return Ok(status(503, "ServiceUnavailable", &e)),
    };
    let (mut parts, body) = resp.into_parts();
    let body = match tokio::time::timeout(UPSTREAM_TIMEOUT, body.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) => return Ok(status(503, "ServiceUnavailable", &format!("body: {e}"))),
        Err(_) => return Ok(status(504, "Timeout", "tier 1's body took too long")),
    };
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    let rewritten = if parts.status == StatusCode::OK && json {
        strip_list_items(&body, has_param(&query, "continue"), c)
    } else {
        None
    };
    let body = rewritten.map_or(body, Bytes::from);
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts.headers.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from_str(&body.len().to_string()).expect("a length"),
    );
    Ok(Response::from_parts(parts, full(body)))
}

/// A list body with `kind` and `apiVersion` removed from each item, as kube-apiserver
/// writes lists of built-in kinds; None if `body` is not a list.
fn strip_list_items(body: &[u8], continued: bool, c: &Counters) -> Option<Vec<u8>> {
    let mut list: Value = serde_json::from_slice(body).ok()?;
    let items = list.get_mut("items")?.as_array_mut()?;
    let mut stripped = 0;
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        let kind = item.remove("kind").is_some();
        let api_version = item.remove("apiVersion").is_some();
        if kind || api_version {
            stripped += 1;
        }
    }
    c.lists.fetch_add(1, Ordering::SeqCst);
    if continued {
        c.continued_lists.fetch_add(1, Ordering::SeqCst);
    }
    c.stripped_items.fetch_add(stripped, Ordering::SeqCst);
    Some(serde_json::to_vec(&list).expect("a list re-serializes"))
}

/// Sends `req` to tier 1 on a connection of its own; the response head, its body still
/// streaming (the connection's task lives until the body is read or the proxy dropped).
async fn send_upstream(
    state: &ProxyState,
    req: Request<Incoming>,
) -> Result<Response<Incoming>, String> {
    let upstream = state.upstream;
    let exchange = async {
        let stream = TcpStream::connect(upstream)
            .await
            .map_err(|e| format!("connect tier 1 at {upstream}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake with tier 1: {e}"))?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        state.track(driver.abort_handle());
        sender
            .send_request(req)
            .await
            .map_err(|e| format!("tier 1: {e}"))
    };
    tokio::time::timeout(UPSTREAM_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("tier 1 did not answer within {UPSTREAM_TIMEOUT:?}"))?
}

// ---------------------------------------------------------------------------------------
// The chain: etcd → tier 1 → proxy → tier 2.
// ---------------------------------------------------------------------------------------

struct Chain {
    // Dropped in this order: the reader first, the source last.
    tier2: Watchd,
    proxy: FilterProxy,
    tier1: Watchd,
    kv: Client,
    _etcd: Etcd,
}

fn cm_name(i: usize) -> String {
    format!("cm-{i:03}")
}

fn cm_key(name: &str) -> String {
    format!("/registry/configmaps/{NS}/{name}")
}

impl Chain {
    /// etcd with `configmaps` ConfigMaps in [`NS`] and one pod, and the chain over it.
    async fn start(configmaps: usize) -> Chain {
        let etcd = tokio::task::block_in_place(Etcd::start);
        let mut kv = etcd.client().await;
        for i in 0..configmaps {
            let name = cm_name(i);
            put_json(&mut kv, &cm_key(&name), &configmap(NS, &name, "0")).await;
        }
        put_json(
            &mut kv,
            &pod_key("default", "web"),
            &pod("default", "web", &[("app", "web")]),
        )
        .await;
        let url = etcd.client_url();
        let tier1 = tokio::task::block_in_place(|| Watchd::start(&url, &[]));
        let proxy = FilterProxy::start(tier1.http_addr()).await;
        let upstream = proxy.url();
        // Blocking while the proxy (on this runtime) serves tier 2's first lists.
        let tier2 = tokio::task::block_in_place(|| Watchd::start_upstream(&upstream, &[]));
        Chain {
            tier2,
            proxy,
            tier1,
            kv,
            _etcd: etcd,
        }
    }

    fn b1(&self) -> String {
        self.tier1.base_url()
    }

    fn b2(&self) -> String {
        self.tier2.base_url()
    }

    /// What went on, for failure messages: the proxy's counts and the tiers' log tails.
    fn evidence(&self) -> String {
        format!(
            "{}\n--- tier 2 log (tail) ---\n{}\n--- tier 1 log (tail) ---\n{}",
            self.proxy.describe(),
            tail(&self.tier2.log(), 40),
            tail(&self.tier1.log(), 15)
        )
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn items(list: &Value) -> &Vec<Value> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list without items: {list}"))
}

/// Asserts that two lists hold the same objects (type meta, resourceVersions and all),
/// naming the first difference rather than printing hundreds of objects.
fn assert_same_items(tier1: &Value, tier2: &Value, what: &str, evidence: &str) {
    let (a, b) = (items(tier1), items(tier2));
    assert_eq!(
        item_names(tier1),
        item_names(tier2),
        "{what}: tier 2 lists other objects than tier 1\n{evidence}"
    );
    if let Some((x, y)) = a.iter().zip(b).find(|(x, y)| x != y) {
        panic!("{what}: an object differs between the tiers\ntier 1: {x}\ntier 2: {y}\n{evidence}");
    }
}

/// GETs tier 2's `/metrics`: `watchd_upstream_relists_total` of ConfigMaps (0 if none yet).
async fn configmap_relists(base: &str) -> f64 {
    let text = client::get(&format!("{base}/metrics"), &[]).await.text();
    metric(
        &text,
        "watchd_upstream_relists_total",
        &["resource=\"configmaps\""],
    )
    .unwrap_or(0.0)
}

// ---------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_without_streaming_lists_is_listed_and_watched() {
    // More than one page of 500: the paged list must follow `continue`.
    let mut chain = Chain::start(520).await;
    let (b1, b2) = (chain.b1(), chain.b2());
    let path = format!("/api/v1/namespaces/{NS}/configmaps");

    let l1 = get_json(&format!("{b1}{path}")).await;
    let l2 = get_json(&format!("{b2}{path}")).await;
    assert_eq!(items(&l1).len(), 520, "tier 1 serves every ConfigMap");
    assert_same_items(&l1, &l2, "ConfigMaps", &chain.evidence());
    for o in items(&l2) {
        assert_eq!(
            (&o["kind"], &o["apiVersion"]),
            (&json!("ConfigMap"), &json!("v1")),
            "tier 2 restored the type meta the list items lacked: {o}"
        );
    }
    assert_eq!(
        rv(&l2),
        rv(&l1),
        "both tiers list at the same resourceVersion\n{}",
        chain.evidence()
    );
    let p1 = get_json(&format!("{b1}/api/v1/pods")).await;
    let p2 = get_json(&format!("{b2}/api/v1/pods")).await;
    assert_same_items(&p1, &p2, "pods", &chain.evidence());
    assert_eq!(item(&p2, "web")["kind"], "Pod");

    // Tier 2 really took the fallback path.
    let proxy = &chain.proxy;
    assert!(
        proxy.refused_streaming_lists() >= 1,
        "tier 2 tried a streaming list first\n{}",
        chain.evidence()
    );
    assert!(
        proxy.continued_lists() >= 1,
        "the ConfigMaps were listed in pages\n{}",
        chain.evidence()
    );
    assert!(
        proxy.stripped_items() >= 521,
        "tier 2 was given list items without type meta\n{}",
        chain.evidence()
    );
    assert!(proxy.watches() >= 1, "{}", chain.evidence());
    let refused = proxy.refused_streaming_lists();

    // Watched from the list's resourceVersion: etcd's changes, at etcd's revisions.
    let from = rv(&l2);
    let mut w = open_watch(&format!("{b2}{path}?watch=1&resourceVersion={from}")).await;
    let changed = cm_name(7);
    let modified = put_json(
        &mut chain.kv,
        &cm_key(&changed),
        &configmap(NS, &changed, "changed"),
    )
    .await;
    let gone = cm_name(8);
    let deleted = delete_key(&mut chain.kv, &cm_key(&gone)).await;
    let ev = next_event(&mut w).await;
    check_event(&ev, "MODIFIED", &changed, modified);
    assert_eq!(ev["object"]["data"]["value"], "changed", "{ev}");
    assert_eq!(ev["object"]["kind"], "ConfigMap", "{ev}");
    let ev = next_event(&mut w).await;
    check_event(&ev, "DELETED", &gone, deleted);

    // A consistent list afterwards has both.
    let l2 = get_json(&format!("{b2}{path}")).await;
    assert!(rv(&l2) >= deleted, "{} < {deleted}", rv(&l2));
    assert_eq!(items(&l2).len(), 519);
    assert!(!item_names(&l2).contains(&gone), "{gone} was deleted");
    let now = item(&l2, &changed);
    assert_eq!(now["data"]["value"], "changed", "{now}");
    assert_eq!(rv(now), modified, "{now}");
    let l1 = get_json(&format!("{b1}{path}")).await;
    assert_same_items(&l1, &l2, "ConfigMaps after the changes", &chain.evidence());
    assert_eq!(
        chain.proxy.refused_streaming_lists(),
        refused,
        "once refused, tier 2 asks for no more streaming lists\n{}",
        chain.evidence()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_from_the_upstream_makes_the_second_tier_relist_that_resource() {
    let mut chain = Chain::start(20).await;
    let (b1, b2) = (chain.b1(), chain.b2());
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    let before = get_json(&format!("{b2}{path}")).await;
    assert_eq!(items(&before).len(), 20, "{}", chain.evidence());
    assert_eq!(configmap_relists(&b2).await, 0.0, "{}", chain.evidence());
    let from = rv(&before);
    let mut old = open_watch(&format!("{b2}{path}?watch=1&resourceVersion={from}")).await;
    let (lists, refused) = (chain.proxy.lists(), chain.proxy.refused_streaming_lists());

    // Tier 1 goes away; tier 2's ConfigMap watch breaks, and when it resumes the proxy
    // says the resourceVersion is gone. Meanwhile a ConfigMap changes in etcd.
    chain.proxy.expire_next_watch(CONFIGMAPS);
    chain.tier1.kill9();
    let changed = cm_name(3);
    let during = put_json(
        &mut chain.kv,
        &cm_key(&changed),
        &configmap(NS, &changed, "during the outage"),
    )
    .await;
    tokio::task::block_in_place(|| chain.tier1.restart());

    let deadline = Instant::now() + SETTLE;
    while configmap_relists(&b2).await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "tier 2 did not re-list ConfigMaps within {SETTLE:?} (410 still pending: {})\n{}",
            chain.proxy.expiry_pending(CONFIGMAPS),
            chain.evidence()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(chain.proxy.expired_watches(), 1, "{}", chain.evidence());

    // The watcher from before the re-list: its history ended with the old epoch, so it
    // ends with an ERROR event carrying 410 Expired (a stream that just closed would
    // leave its client to resume from a resourceVersion the new epoch does not hold).
    let mut seen = Vec::new();
    let error = loop {
        match old.next_event(EVENT_WAIT).await {
            Some(ev) if ev["type"] == "ERROR" => break ev,
            Some(ev) => {
                seen.push(ev);
                assert!(seen.len() < 100, "the old watcher never ends: {seen:?}");
            }
            None => panic!(
                "the watcher from before the re-list got no 410 ERROR event within \
                 {EVENT_WAIT:?} (ended: {}); it saw {seen:?}\n{}",
                old.is_ended(),
                chain.evidence()
            ),
        }
    };
    assert_eq!(error["object"]["kind"], "Status", "{error}");
    assert_eq!(error["object"]["code"], 410, "{error}");
    assert_eq!(error["object"]["reason"], "Expired", "{error}");
    assert!(
        seen.is_empty(),
        "the old watcher saw events before its 410: {seen:?}"
    );

    // After the re-list tier 2 serves the current state, with the change made while tier 1
    // was down, at etcd's revision.
    let after = get_json(&format!("{b2}{path}")).await;
    let now = item(&after, &changed);
    assert_eq!(
        now["data"]["value"],
        "during the outage",
        "{now}\n{}",
        chain.evidence()
    );
    assert_eq!(rv(now), during, "{now}");
    assert_eq!(now["kind"], "ConfigMap", "{now}");
    let l1 = get_json(&format!("{b1}{path}")).await;
    assert_same_items(
        &l1,
        &after,
        "ConfigMaps after the re-list",
        &chain.evidence(),
    );

    // The re-list was a paged list; streaming lists stay off.
    assert!(
        chain.proxy.lists() > lists,
        "the re-list went through the proxy as a list\n{}",
        chain.evidence()
    );
    assert_eq!(
        chain.proxy.refused_streaming_lists(),
        refused,
        "{}",
        chain.evidence()
    );

    // And tier 2 follows again: a new watch from the new list sees the next change.
    let mut w = open_watch(&format!(
        "{b2}{path}?watch=1&resourceVersion={}",
        rv(&after)
    ))
    .await;
    let next = cm_name(4);
    let written = put_json(
        &mut chain.kv,
        &cm_key(&next),
        &configmap(NS, &next, "after"),
    )
    .await;
    let ev = next_event(&mut w).await;
    check_event(&ev, "MODIFIED", &next, written);
}
