//! Slow and stalled watchers: a client that stops reading costs the others nothing and
//! holds bounded memory, and its watch ends — after `--write-timeout` over HTTP/1.1, with
//! 410 once it fell out of the history window over HTTP/2 — while a thousand live
//! watchers of the same resource receive every event. Also: `--watch-batch-window`
//! gathers events that arrive within the window into one write.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::kube::{metric, put_object_text};
use support::{Etcd, Watchd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Live watchers next to the stalled one.
const LIVE: usize = 1000;
/// Events every live watcher must receive.
const WRITES: usize = 40;
/// How long any phase may take before the test gives up.
const PHASE: Duration = Duration::from_secs(90);

fn configmap(ns: &str, name: &str, i: usize, filler: usize) -> String {
    let filler = "x".repeat(filler);
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","uid":"u-{ns}-{name}","creationTimestamp":"2026-01-02T03:04:05Z"}},"data":{{"i":"{i}","filler":"{filler}"}}}}"#
    )
}

/// Raises this process's soft open-files limit to the hard one: a thousand watchers are
/// a thousand sockets here too. Returns the limit in force.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

/// VmRSS of `pid` in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Opens an HTTP/1.1 watch on its own connection and reads the response head.
async fn open_h1_watch(addr: std::net::SocketAddr, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: watchd\r\nAccept: application/json\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).await.unwrap(), 1, "watch head cut short");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s
}

/// Counts `needle` in a byte stream read in pieces (a match may straddle two reads).
struct Counter {
    needle: &'static [u8],
    carry: Vec<u8>,
    seen: usize,
}

impl Counter {
    fn new(needle: &'static [u8]) -> Self {
        Counter {
            needle,
            carry: Vec::new(),
            seen: 0,
        }
    }

    fn feed(&mut self, data: &[u8]) {
        self.carry.extend_from_slice(data);
        self.seen += self
            .carry
            .windows(self.needle.len())
            .filter(|w| *w == self.needle)
            .count();
        let keep = self.needle.len().saturating_sub(1).min(self.carry.len());
        self.carry.drain(..self.carry.len() - keep);
    }
}

/// Reads `s` until `n` MODIFIED events arrived or the phase ends; returns how many did.
async fn read_events(mut s: TcpStream, n: usize, until: Instant) -> usize {
    let mut counter = Counter::new(br#"{"type":"MODIFIED""#);
    let mut buf = vec![0u8; 16 * 1024];
    while counter.seen < n {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(k)) if k > 0 => counter.feed(&buf[..k]),
            _ => break,
        }
    }
    counter.seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_http1_watcher_is_closed_by_the_write_timeout_and_costs_the_others_nothing() {
    let limit = raise_fd_limit();
    assert!(
        limit > LIVE as u64 + 200,
        "this test needs {} open files, the hard limit is {limit}",
        LIVE + 200
    );
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let live_key = "/registry/configmaps/live/cm";
    let rv = put_object_text(&mut kv, live_key, &configmap("live", "cm", 0, 900)).await;
    let watchd = Watchd::start(&etcd.client_url(), &["--write-timeout=2s"]);
    let addr = watchd.http_addr();

    // The stalled client watches every namespace and reads nothing after the head; the
    // live ones watch namespace `live` only, so the bulk writes below reach only the
    // stalled one and fill its socket.
    let stalled = open_h1_watch(
        addr,
        &format!("/api/v1/configmaps?watch=1&resourceVersion={rv}"),
    )
    .await;
    let live_path = format!("/api/v1/namespaces/live/configmaps?watch=1&resourceVersion={rv}");
    let mut live = Vec::with_capacity(LIVE);
    for _ in 0..LIVE {
        live.push(open_h1_watch(addr, &live_path).await);
    }
    let rss_before = rss(watchd.pid());
    let until = Instant::now() + PHASE;
    let readers: Vec<_> = live
        .into_iter()
        .map(|s| tokio::spawn(read_events(s, WRITES, until)))
        .collect();

    // 6 MiB for the stalled watcher (more than loopback socket buffers hold), with the
    // live writes in between.
    let mut written = 0usize;
    for i in 1..=WRITES {
        put_object_text(&mut kv, live_key, &configmap("live", "cm", i, 900)).await;
        if i % 2 == 0 {
            let bulk = configmap("bulk", &format!("b{i}"), i, 300 * 1024);
            written += bulk.len();
            put_object_text(&mut kv, &format!("/registry/configmaps/bulk/b{i}"), &bulk).await;
        }
    }
    for r in readers {
        assert_eq!(
            r.await.unwrap(),
            WRITES,
            "every live watcher sees every write"
        );
    }

    // The stalled connection is closed by the write timeout: reading it now gives what
    // its socket held, then the end.
    let metrics_url = format!("{}/metrics", watchd.base_url());
    let text = loop {
        let text = support::http::get(&metrics_url, &[]).await.text();
        if metric(&text, "watchd_write_timeouts_total", &[]).is_some_and(|n| n >= 1.0) {
            break text;
        }
        assert!(Instant::now() < until, "no write timeout counted: {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(metric(&text, "watchd_write_timeouts_total", &[]), Some(1.0));
    let mut stalled = stalled;
    let mut sink = vec![0u8; 1 << 16];
    let drained = tokio::time::timeout(PHASE, async {
        let mut total = 0usize;
        loop {
            match stalled.read(&mut sink).await {
                Ok(0) | Err(_) => return total,
                Ok(k) => total += k,
            }
        }
    })
    .await
    .expect("the stalled connection is closed");
    assert!(
        drained < written,
        "the stalled watcher got {drained} of {written} bytes: it was cut off, not served"
    );
    // Its memory stayed bounded: no copy per stalled watcher, only the shared events.
    let grown = rss(watchd.pid()).saturating_sub(rss_before);
    assert!(
        grown < written as u64 + (64 << 20),
        "watchd grew {grown} bytes while {written} bytes were written to etcd"
    );
}

/// Decodes a chunked body read so far: the chunks' data, and whether the last chunk came.
fn dechunk(mut raw: &[u8]) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..end]).unwrap(), 16)
            .unwrap_or_else(|_| panic!("a chunk size line: {:?}", &raw[..end]));
        if size == 0 {
            return (data, true);
        }
        let body = end + 2;
        if raw.len() < body + size + 2 {
            break;
        }
        assert_eq!(
            &raw[body + size..body + size + 2],
            b"\r\n",
            "a chunk ends with CRLF"
        );
        data.extend_from_slice(&raw[body..body + size]);
        raw = &raw[body + size + 2..];
    }
    (data, false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_http1_watcher_gets_every_event_intact_once_it_reads_again() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let key = "/registry/configmaps/slow/cm";
    let rv = put_object_text(&mut kv, key, &configmap("slow", "cm", 0, 10)).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let path = format!(
        "/api/v1/namespaces/slow/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=30"
    );
    let mut s = open_h1_watch(watchd.http_addr(), &path).await;
    // 12 MiB while the client reads nothing: the socket fills, and the rest of a frame
    // waits in watchd until it reads again.
    const BIG: usize = 40;
    for i in 1..=BIG {
        put_object_text(&mut kv, key, &configmap("slow", "cm", i, 300 * 1024)).await;
    }
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let until = Instant::now() + PHASE;
    let events = loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(k)) if k > 0 => raw.extend_from_slice(&buf[..k]),
            other => panic!("the watch stopped early: {other:?}"),
        }
        let (data, _) = dechunk(&raw);
        let lines = data.iter().filter(|&&b| b == b'\n').count();
        if lines >= BIG {
            break data;
        }
    };
    let values: Vec<String> = events
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let ev: serde_json::Value = serde_json::from_slice(l).expect("an intact JSON line");
            ev["object"]["data"]["i"].as_str().unwrap().to_string()
        })
        .collect();
    let want: Vec<String> = (1..=BIG).map(|i| i.to_string()).collect();
    assert_eq!(values, want, "every event, in order, each whole");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_http2_stream_ends_with_410_once_out_of_the_history_window() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let key = "/registry/configmaps/h2/cm";
    let rv = put_object_text(&mut kv, key, &configmap("h2", "cm", 0, 900)).await;
    // A history of 2 s: the stalled stream falls out of it.
    let watchd = Watchd::start(&etcd.client_url(), &["--history-window=2s"]);
    let uri = format!(
        "http://{}/api/v1/namespaces/h2/configmaps?watch=true&resourceVersion={rv}",
        watchd.http_addr()
    );
    // 10 connections x 100 streams, as client-go multiplexes; the stalled stream shares
    // the first connection, with a stream window of 8 KiB (a few events).
    let mut senders = Vec::new();
    let mut drivers = Vec::new();
    for _ in 0..10 {
        let tcp = TcpStream::connect(watchd.http_addr()).await.unwrap();
        let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(8 * 1024)
            .initial_connection_window_size(64 * 1024 * 1024)
            .handshake(TokioIo::new(tcp))
            .await
            .expect("h2c handshake");
        drivers.push(tokio::spawn(conn));
        senders.push(sender);
    }
    let watch = |sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>| {
        let req = http::Request::get(&uri)
            .body(Empty::<Bytes>::new())
            .unwrap();
        sender.send_request(req)
    };
    let stalled = watch(&mut senders[0]).await.expect("stalled watch");
    assert_eq!(stalled.status(), 200);
    let mut stalled = stalled.into_body();
    let mut bodies = Vec::new();
    for i in 0..LIVE {
        let resp = watch(&mut senders[i % 10]).await.expect("watch request");
        assert_eq!(resp.status(), 200);
        bodies.push(resp.into_body());
    }
    let until = Instant::now() + PHASE;
    let readers: Vec<_> = bodies
        .into_iter()
        .map(|mut body| {
            tokio::spawn(async move {
                let mut counter = Counter::new(br#"{"type":"MODIFIED""#);
                while counter.seen < WRITES + 1 {
                    let left = until.saturating_duration_since(Instant::now());
                    let Ok(Some(Ok(frame))) = tokio::time::timeout(left, body.frame()).await else {
                        break;
                    };
                    if let Ok(data) = frame.into_data() {
                        counter.feed(&data);
                    }
                }
                counter.seen
            })
        })
        .collect();
    for i in 1..=WRITES {
        put_object_text(&mut kv, key, &configmap("h2", "cm", i, 900)).await;
    }
    // One more write once the others are older than the window: it evicts them.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    put_object_text(&mut kv, key, &configmap("h2", "cm", WRITES + 1, 900)).await;
    for r in readers {
        assert_eq!(
            r.await.unwrap(),
            WRITES + 1,
            "every live stream sees every write"
        );
    }

    // Reading the stalled stream now: what its window held, then 410 Expired, then the end.
    let mut text = Vec::new();
    let read_all = tokio::time::timeout(PHASE, async {
        while let Some(Ok(frame)) = stalled.frame().await {
            if let Ok(data) = frame.into_data() {
                text.extend_from_slice(&data);
            }
        }
    });
    read_all.await.expect("the stalled stream ends");
    let lines: Vec<serde_json::Value> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("a JSON line"))
        .collect();
    let last = lines.last().expect("some events");
    assert_eq!(last["type"], "ERROR", "{last}");
    assert_eq!(last["object"]["code"], 410, "{last}");
    assert_eq!(last["object"]["reason"], "Expired", "{last}");
    let modified = lines.iter().filter(|e| e["type"] == "MODIFIED").count();
    assert!(
        modified < WRITES,
        "the stalled stream got {modified} events before it expired"
    );
    let text = support::http::get(&format!("{}/metrics", watchd.base_url()), &[])
        .await
        .text();
    assert_eq!(
        metric(
            &text,
            "watchd_watchers_ended_total",
            &[r#"reason="expired""#]
        ),
        Some(1.0)
    );
    for d in drivers {
        d.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_window_sends_events_that_arrive_within_it_in_one_write() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let key = "/registry/configmaps/bw/cm";
    let rv = put_object_text(&mut kv, key, &configmap("bw", "cm", 0, 10)).await;
    // A window far longer than three local etcd writes take.
    let watchd = Watchd::start(&etcd.client_url(), &["--watch-batch-window=800ms"]);
    let mut s = open_h1_watch(
        watchd.http_addr(),
        &format!("/api/v1/namespaces/bw/configmaps?watch=1&resourceVersion={rv}"),
    )
    .await;
    for i in 1..=3 {
        put_object_text(&mut kv, key, &configmap("bw", "cm", i, 10)).await;
    }
    // One chunk: its size line, then three events.
    let mut chunk = Vec::new();
    let mut buf = vec![0u8; 4096];
    let until = Instant::now() + Duration::from_secs(20);
    let size = loop {
        let left = until.saturating_duration_since(Instant::now());
        let k = match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(k)) if k > 0 => k,
            other => panic!("no chunk: {other:?}"),
        };
        chunk.extend_from_slice(&buf[..k]);
        if let Some(end) = chunk.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(std::str::from_utf8(&chunk[..end]).unwrap(), 16)
                .expect("a chunk size");
            if chunk.len() >= end + 2 + size {
                break (end + 2, size);
            }
        }
    };
    let body = &chunk[size.0..size.0 + size.1];
    let events: Vec<serde_json::Value> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let values: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["data"]["i"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["1", "2", "3"], "three events in the first chunk");

    // A window past a second is refused at start, with the reason.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_watchd"))
        .args([
            "serve",
            "--etcd-servers",
            &etcd.client_url(),
            "--watch-batch-window=2s",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("longest batch window"), "{err}");
}
