//! Slow and stalled watchers: clients that stop reading cost the others nothing and hold
//! no copy of the events each, and their watches end — after `--write-timeout` over HTTP/1.1, with
//! 410 once it fell out of the history window over HTTP/2 — while a thousand live
//! watchers of the same resource receive every event. Also: `--watch-batch-window`
//! gathers events that arrive within the window into one write.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::kube::{metric, put_object_text};
use support::{proc_status_bytes, Etcd, Watchd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Live watchers next to the stalled ones.
const LIVE: usize = 1000;
/// Stalled HTTP/1.1 watchers: they open a watch and never read.
const STALLED: usize = 50;
/// Large objects written while they are stalled, and the size of each one's filler.
const BULK_WRITES: usize = 20;
const BULK_FILLER: usize = 800 * 1024;
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

/// Samples watchd's resident memory every 20 ms on its own thread (the runtime's two
/// workers are busy with a thousand readers) until stopped or `until`; returns the
/// highest `VmRSS` seen.
struct RssSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start(pid: u32, until: Instant) -> RssSampler {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            // Bounded by the deadline, and by a count in case the clock misbehaves.
            let most = (PHASE.as_millis() / 20) as usize;
            for _ in 0..most {
                peak = peak.max(proc_status_bytes(pid, "VmRSS"));
                if flag.load(Ordering::Acquire) || Instant::now() >= until {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        });
        RssSampler { stop, thread }
    }

    /// The highest `VmRSS` sampled (a panic of the sampler, such as an unreadable
    /// `/proc`, is this test's failure).
    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        match self.thread.join() {
            Ok(peak) => peak,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
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
async fn stalled_http1_watchers_are_closed_by_the_write_timeout_and_cost_the_others_nothing() {
    let limit = raise_fd_limit();
    let needed = (LIVE + STALLED + 200) as u64;
    assert!(
        limit > needed,
        "this test needs {needed} open files, the hard limit is {limit}"
    );
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let live_key = "/registry/configmaps/live/cm";
    let rv = put_object_text(&mut kv, live_key, &configmap("live", "cm", 0, 900)).await;
    // Long enough that the stalled watchers are still open, their sockets full, when the
    // last bulk write has been sent to them, even on a loaded machine.
    let watchd = Watchd::start(&etcd.client_url(), &["--write-timeout=5s"]);
    let addr = watchd.http_addr();
    let pid = watchd.pid();

    // The stalled clients watch every namespace and read nothing after the head; the
    // live ones watch namespace `live` only, so the bulk writes below reach only the
    // stalled ones and fill their sockets.
    let all_path = format!("/api/v1/configmaps?watch=1&resourceVersion={rv}");
    let mut stalled = Vec::with_capacity(STALLED);
    for _ in 0..STALLED {
        stalled.push(open_h1_watch(addr, &all_path).await);
    }
    let live_path = format!("/api/v1/namespaces/live/configmaps?watch=1&resourceVersion={rv}");
    let mut live = Vec::with_capacity(LIVE);
    for _ in 0..LIVE {
        live.push(open_h1_watch(addr, &live_path).await);
    }
    let rss_before = proc_status_bytes(pid, "VmRSS");
    let hwm_before = proc_status_bytes(pid, "VmHWM");
    let until = Instant::now() + PHASE;
    let sampler = RssSampler::start(pid, until);
    let readers: Vec<_> = live
        .into_iter()
        .map(|s| tokio::spawn(read_events(s, WRITES, until)))
        .collect();

    // 16 MB for the stalled watchers (far more than loopback socket buffers hold), with
    // the live writes in between.
    let mut written = 0usize;
    for i in 1..=WRITES {
        put_object_text(&mut kv, live_key, &configmap("live", "cm", i, 900)).await;
        if i % (WRITES / BULK_WRITES) == 0 {
            let bulk = configmap("bulk", &format!("b{i}"), i, BULK_FILLER);
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

    // Every stalled connection is closed by the write timeout.
    let metrics_url = format!("{}/metrics", watchd.base_url());
    let text = loop {
        let text = support::http::get(&metrics_url, &[]).await.text();
        if metric(&text, "watchd_write_timeouts_total", &[]).is_some_and(|n| n >= STALLED as f64) {
            break text;
        }
        assert!(
            Instant::now() < until,
            "not every write timeout counted: {text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        metric(&text, "watchd_write_timeouts_total", &[]),
        Some(STALLED as f64)
    );
    // The peak while they were stalled: the highest VmRSS sampled, or VmHWM if the
    // process reached a new high meanwhile (a spike between two samples).
    let sampled = sampler.stop();
    let hwm_after = proc_status_bytes(pid, "VmHWM");
    let peak = if hwm_after > hwm_before {
        hwm_after
    } else {
        sampled
    };
    let grown = peak.saturating_sub(rss_before);

    // Reading each stalled connection now gives what its sockets held, then the end.
    let drains = stalled.into_iter().map(|mut s| async move {
        let mut sink = vec![0u8; 1 << 16];
        let mut total = 0usize;
        // Bounded: the stream ends, or the timeout below ends it.
        loop {
            match s.read(&mut sink).await {
                Ok(0) | Err(_) => return total,
                Ok(k) => total += k,
            }
        }
    });
    let drained = tokio::time::timeout(PHASE, futures_util::future::join_all(drains))
        .await
        .expect("the stalled connections are closed");
    for d in &drained {
        assert!(
            *d < written,
            "a stalled watcher got {d} of {written} bytes: it was cut off, not served"
        );
    }

    // Memory: watchd keeps each event once (the stored value in its history, its frame
    // rendered once and shared by every watcher), whatever the number of watchers. It may
    // hold a few copies of what was written at once — the etcd watch response as received,
    // the decoded value, the rendered frame, allocator slack — so the bound is
    // COPIES × written + SLACK, independent of STALLED: with 16 MB written, 128 MB.
    // A server that kept a copy of each frame per watcher would hold, at the last bulk
    // write, everything its sockets had not taken for each of the 50 stalled watchers:
    // Σ (written − drained), what each read when drained being what its sockets took —
    // about 50 × (16 − 4) MB = 600 MB with loopback's 4 MiB send buffers. The test checks
    // that it can tell the two apart: that sum is more than twice the bound.
    const COPIES: u64 = 4;
    const SLACK: u64 = 64 << 20;
    let bound = COPIES * written as u64 + SLACK;
    let per_watcher_copies: u64 = drained
        .iter()
        .map(|d| written.saturating_sub(*d) as u64)
        .sum();
    assert!(
        per_watcher_copies > 2 * bound,
        "this test cannot tell a copy per watcher ({per_watcher_copies} bytes) from none \
         (bound {bound}): write more"
    );
    assert!(
        grown < bound,
        "watchd grew {grown} bytes (peak {peak}, before {rss_before}) while {STALLED} stalled \
         watchers were sent {written} bytes each: over {bound}, the bound for shared frames \
         (a copy per watcher would be about {per_watcher_copies})"
    );
    eprintln!(
        "{STALLED} stalled watchers, {written} bytes written: grew {grown} bytes \
         (bound {bound}, a copy per watcher {per_watcher_copies})"
    );
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
        let (data, _) = support::http::dechunk(&raw);
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

/// The filler of the objects the HTTP/2 test writes: 40 of them (about 160 KiB) are more
/// than a stalled stream may take (its window, the send buffer and one frame).
const H2_FILLER: usize = 4096;

/// The window of the stalled HTTP/2 stream: smaller than one event, so the server can
/// take exactly one frame for it before the window closes.
const STALLED_WINDOW: u32 = 512;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_http2_stream_ends_with_410_once_out_of_the_history_window() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let key = "/registry/configmaps/h2/cm";
    let rv = put_object_text(&mut kv, key, &configmap("h2", "cm", 0, H2_FILLER)).await;
    // A history of 2 s: the stalled stream falls out of it.
    let watchd = Watchd::start(&etcd.client_url(), &["--history-window=2s"]);
    let uri = format!(
        "http://{}/api/v1/namespaces/h2/configmaps?watch=true&resourceVersion={rv}",
        watchd.http_addr()
    );
    // The stalled stream on a connection of the h2 crate, whose client gives window back
    // only when told (release_capacity): while the test does not, the server may send
    // the stream 512 bytes, less than one event.
    let tcp = TcpStream::connect(watchd.http_addr()).await.unwrap();
    let (mut first, conn) = h2::client::Builder::new()
        .initial_window_size(STALLED_WINDOW)
        .initial_connection_window_size(64 * 1024 * 1024)
        .handshake::<_, Bytes>(tcp)
        .await
        .expect("h2c handshake");
    let first_driver = tokio::spawn(conn);
    first = first.ready().await.unwrap();
    let req = http::Request::get(&uri).body(()).unwrap();
    let (stalled, _) = first.send_request(req, true).expect("stream opened");
    let stalled = stalled.await.expect("stalled watch");
    assert_eq!(stalled.status(), 200);
    let mut stalled = stalled.into_body();
    // The live streams: 10 connections x 100 streams, as client-go multiplexes, with
    // hyper's default windows. (Beside the stalled stream, live streams would share its
    // 512-byte window setting and could fall out of the 2 s history under load.)
    let mut senders = Vec::new();
    let mut drivers = Vec::new();
    for _ in 0..10 {
        let tcp = TcpStream::connect(watchd.http_addr()).await.unwrap();
        let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_connection_window_size(64 * 1024 * 1024)
            .handshake(TokioIo::new(tcp))
            .await
            .expect("h2c handshake");
        drivers.push(tokio::spawn(conn));
        senders.push(sender);
    }
    let until = Instant::now() + PHASE;
    let mut readers = Vec::new();
    for i in 0..LIVE {
        let req = http::Request::get(&uri)
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = senders[i % 10]
            .send_request(req)
            .await
            .expect("watch request");
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        readers.push(tokio::spawn(async move {
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
        }));
    }

    // The first write: the stalled stream's window takes 512 bytes of its event.
    put_object_text(&mut kv, key, &configmap("h2", "cm", 1, H2_FILLER)).await;
    let mut held = Vec::new();
    while held.len() < STALLED_WINDOW as usize {
        let left = until.saturating_duration_since(Instant::now());
        let data = tokio::time::timeout(left, stalled.data())
            .await
            .expect("the window's bytes arrive")
            .expect("the stream goes on")
            .expect("data");
        held.extend_from_slice(&data);
    }
    assert_eq!(
        held.len(),
        STALLED_WINDOW as usize,
        "never more than the window"
    );
    for i in 2..=WRITES {
        put_object_text(&mut kv, key, &configmap("h2", "cm", i, H2_FILLER)).await;
    }
    // One more write once the others are older than the window: it evicts them.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    put_object_text(&mut kv, key, &configmap("h2", "cm", WRITES + 1, H2_FILLER)).await;
    for r in readers {
        assert_eq!(
            r.await.unwrap(),
            WRITES + 1,
            "every live stream sees every write"
        );
    }

    // Giving the window back: what the server had taken for the stream — the window, and
    // at most its send buffer and one frame beyond — then 410 Expired, then the end.
    // The rest of the writes was never copied for it.
    let mut text = held;
    let _ = stalled
        .flow_control()
        .release_capacity(STALLED_WINDOW as usize);
    let read_all = tokio::time::timeout(PHASE, async {
        while let Some(Ok(data)) = stalled.data().await {
            let _ = stalled.flow_control().release_capacity(data.len());
            text.extend_from_slice(&data);
        }
    });
    read_all.await.expect("the stalled stream ends");
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_slice(l).expect("a JSON line"))
        .collect();
    let (last, modified) = events.split_last().expect("some events");
    assert_eq!(last["type"], "ERROR", "{last}");
    assert_eq!(last["object"]["code"], 410, "{last}");
    assert_eq!(last["object"]["reason"], "Expired", "{last}");
    let values: Vec<String> = modified
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "MODIFIED");
            e["object"]["data"]["i"].as_str().unwrap().to_string()
        })
        .collect();
    let want: Vec<String> = (1..=values.len()).map(|i| i.to_string()).collect();
    assert_eq!(values, want, "the first writes, in order, each whole");
    let event_bytes = lines[0].len() + 1;
    let taken: usize = lines[..modified.len()].iter().map(|l| l.len() + 1).sum();
    let bound = STALLED_WINDOW as usize + watchd::config::HTTP2_STREAM_SEND_BUFFER + event_bytes;
    assert!(
        taken <= bound,
        "a stalled stream holds its window, its send buffer and one frame: {taken} > {bound} bytes"
    );
    assert!(
        values.len() < WRITES,
        "{} of {WRITES} writes were taken for the stalled stream",
        values.len()
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
    first_driver.abort();
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
