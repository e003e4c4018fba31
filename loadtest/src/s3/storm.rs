//! One storm of S3: N lists at once, each on its own connection (HTTP/1.1)
//! or stream (HTTP/2), every body read to its end (full lists) or until
//! the bookmark that ends a streaming list's initial events, counting
//! bytes and events without decoding objects: newlines are found with
//! `memchr`, protobuf frames by their length prefix.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::endpoint::{Endpoint, Protocol};
use crate::http::{Accept, FrameSplitter};
use crate::s1::report::Latency;
use crate::stats::Histogram;
use crate::transport::Conn;

/// The annotation on the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &[u8] = b"k8s.io/initial-events-end";
/// Longest one list may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(180);

/// A full list, or a streaming list (`sendInitialEvents`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `GET /api/v1/pods`.
    List,
    /// `GET /api/v1/pods?watch=1&sendInitialEvents=true&...`, read until
    /// the initial-events-end bookmark.
    Stream,
}

impl Kind {
    /// The request path.
    pub fn path(self) -> &'static str {
        match self {
            Kind::List => "/api/v1/pods",
            Kind::Stream => "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        }
    }

    /// `list` or `stream`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::List => "list",
            Kind::Stream => "stream",
        }
    }
}

/// Counts the events of a JSON-lines watch stream and sees the bookmark
/// that ends its initial events (a `BOOKMARK` line carrying
/// [`INITIAL_EVENTS_END`]), keeping only the start of each line.
#[derive(Debug, Default)]
pub struct LineCounter {
    /// Complete lines that were not the end bookmark.
    pub events: u64,
    /// Whether the end bookmark was seen.
    pub ended: bool,
    head: Vec<u8>,
    bookmark: bool,
}

const BOOKMARK_PREFIX: &[u8] = br#"{"type":"BOOKMARK""#;

impl LineCounter {
    /// Feeds a chunk; after `ended`, the rest is ignored.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while !self.ended && !rest.is_empty() {
            let (line, done, complete) = match memchr::memchr(b'\n', rest) {
                Some(i) => (&rest[..i], &rest[i + 1..], true),
                None => (rest, &[][..], false),
            };
            // Keep the line's start until it says whether it is a bookmark;
            // a bookmark (small) is kept whole.
            if self.head.len() < BOOKMARK_PREFIX.len() || self.bookmark {
                let take = if self.bookmark {
                    line.len()
                } else {
                    line.len().min(BOOKMARK_PREFIX.len() - self.head.len())
                };
                self.head.extend_from_slice(&line[..take]);
                if self.head.len() >= BOOKMARK_PREFIX.len() {
                    self.bookmark = self.head.starts_with(BOOKMARK_PREFIX);
                    if self.bookmark && take < line.len() {
                        self.head.extend_from_slice(&line[take..]);
                    }
                }
            }
            rest = done;
            if complete {
                if self.bookmark && memchr::memmem::find(&self.head, INITIAL_EVENTS_END).is_some() {
                    self.ended = true;
                } else if !self.head.is_empty() && !self.bookmark {
                    self.events += 1;
                }
                self.head.clear();
                self.bookmark = false;
            }
        }
    }
}

/// Counts the events of a protobuf watch stream until the end bookmark.
#[derive(Debug, Default)]
pub struct FrameCounter {
    /// Frames that were not the end bookmark.
    pub events: u64,
    /// Whether the end bookmark was seen.
    pub ended: bool,
    frames: FrameSplitter,
}

impl FrameCounter {
    /// Feeds a chunk; an error if the stream cannot be split.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), String> {
        if self.ended {
            return Ok(());
        }
        let (mut events, mut ended) = (0, false);
        self.frames.feed(chunk, |frame| {
            // WatchEvent field 1 (type) comes first: 0x0a, length, text.
            let is_bookmark = frame.get(2..10) == Some(b"BOOKMARK");
            if ended {
                return;
            }
            if is_bookmark && memchr::memmem::find(frame, INITIAL_EVENTS_END).is_some() {
                ended = true;
            } else if !is_bookmark {
                events += 1;
            }
        })?;
        self.events += events;
        self.ended |= ended;
        Ok(())
    }
}

/// One list as the client saw it.
#[derive(Clone, Debug, Default)]
pub struct Done {
    /// Body bytes read (until the end bookmark for streams), as sent: compressed when
    /// the server gzipped the body.
    pub bytes: u64,
    /// The same bytes decompressed (equal to `bytes` when not compressed).
    pub decoded_bytes: u64,
    /// Events before the end bookmark (streams).
    pub events: u64,
    /// Seconds from sending the request to the last byte needed.
    pub seconds: f64,
}

/// What a storm measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StormResult {
    /// `list` or `stream`.
    pub kind: String,
    /// `json` or `protobuf`.
    pub accept: String,
    /// Lists made.
    pub lists: usize,
    /// Lists that failed or came out short.
    pub failed: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Seconds from the first request to the last list done.
    pub wall_s: f64,
    /// Lists per second of the wall time.
    pub lists_per_sec: f64,
    /// Body bytes of all lists, as sent (compressed, with `gzip`).
    pub bytes: u64,
    /// The same decompressed.
    pub decoded_bytes: u64,
    /// Whether the lists asked for gzip (`Accept-Encoding: gzip`).
    pub gzip: bool,
    /// Lists whose body came gzipped.
    pub gzipped: usize,
    /// Aggregate output, GB/s (10^9 bytes).
    pub gb_per_sec: f64,
    /// Per-list latency (request sent to last byte).
    pub latency_ms: Latency,
    /// watchd RSS just before, bytes.
    pub idle_rss_bytes: u64,
    /// Peak watchd RSS during the storm (sampled every 20 ms), bytes.
    pub peak_rss_bytes: u64,
    /// watchd CPU seconds during the storm.
    pub server_cpu_s: Option<f64>,
    /// This generator's CPU seconds during the storm.
    pub generator_cpu_s: Option<f64>,
}

/// Runs one list of `kind` as `accept` on `conn`; `want_bytes` checks a
/// full list's length, `want_events` a stream's events.
async fn one(mut conn: Conn, storm: &Storm) -> Result<(Done, bool), String> {
    let (kind, accept) = (storm.kind, storm.accept);
    let t = Instant::now();
    let encoding = storm.gzip.then_some("gzip");
    let resp = conn.get_encoded(kind.path(), accept, encoding).await?;
    if resp.status() != 200 {
        let status = resp.status();
        let body = resp.into_body().collect().await.map(|b| b.to_bytes());
        return Err(format!("GET {}: {status}: {body:?}", kind.path()));
    }
    let gzipped = resp
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .is_some_and(|v| v == "gzip");
    // A watch list is a gzip member per flush: decoded as the members arrive.
    let mut gunzip = gzipped.then(|| flate2::write::MultiGzDecoder::new(Vec::new()));
    let mut body = resp.into_body();
    let (mut lines, mut frames) = (LineCounter::default(), FrameCounter::default());
    let (mut bytes, mut decoded_bytes) = (0u64, 0u64);
    let ended = loop {
        let Some(frame) = body.frame().await else {
            break false;
        };
        let frame = frame.map_err(|e| format!("{} body: {e}", kind.name()))?;
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        bytes += data.len() as u64;
        if let Some(g) = gunzip.as_mut() {
            use std::io::Write as _;
            g.write_all(&data)
                .and_then(|()| g.flush())
                .map_err(|e| format!("{} body: gzip: {e}", kind.name()))?;
            data = bytes::Bytes::from(std::mem::take(g.get_mut()));
        }
        decoded_bytes += data.len() as u64;
        if kind == Kind::Stream {
            match accept {
                Accept::Json => lines.feed(&data),
                Accept::Protobuf => frames.feed(&data)?,
            }
            if lines.ended || frames.ended {
                break true;
            }
        }
    };
    let seconds = t.elapsed().as_secs_f64();
    let events = lines.events + frames.events;
    let want_events = storm.want_events;
    match kind {
        Kind::List => {
            if let Some(want) = storm.want_bytes.filter(|&w| w != decoded_bytes) {
                return Err(format!(
                    "list of {decoded_bytes} bytes, the first had {want}"
                ));
            }
        }
        Kind::Stream if !ended => {
            return Err(format!(
                "stream ended after {events} events without the initial-events-end bookmark"
            ))
        }
        Kind::Stream if events != want_events => {
            return Err(format!(
                "stream had {events} initial events, expected {want_events}"
            ))
        }
        Kind::Stream => {}
    }
    Ok((
        Done {
            bytes,
            decoded_bytes,
            events,
            seconds,
        },
        gzipped,
    ))
}

/// Opens a connection (HTTP/1.1) or a stream handle of a shared connection.
async fn link(
    endpoint: &Arc<Endpoint>,
    protocol: Protocol,
    shared: &[Conn],
    i: usize,
) -> Result<Conn, String> {
    match protocol {
        Protocol::Http1 => Conn::open(endpoint, protocol, Duration::from_secs(20)).await,
        Protocol::Http2 => shared[i % shared.len()]
            .stream()
            .ok_or_else(|| "not HTTP/2".to_string()),
    }
}

/// The settings of one storm.
#[derive(Clone, Debug)]
pub struct Storm {
    /// Full or streaming lists.
    pub kind: Kind,
    /// Media type asked for.
    pub accept: Accept,
    /// Lists at once.
    pub concurrency: usize,
    /// HTTP/1.1 (a connection per list) or HTTP/2 (streams).
    pub protocol: Protocol,
    /// With HTTP/2, lists per connection.
    pub streams_per_connection: usize,
    /// A full list's expected length (the reference list's).
    pub want_bytes: Option<u64>,
    /// A stream's expected initial events (the pods).
    pub want_events: u64,
    /// Ask for gzip (`Accept-Encoding: gzip`).
    pub gzip: bool,
}

/// Runs `storm` against `endpoint`, sampling `pid`'s CPU and RSS.
pub async fn run(
    endpoint: &Arc<Endpoint>,
    storm: &Storm,
    pid: Option<u32>,
) -> Result<StormResult, String> {
    let shared = match storm.protocol {
        Protocol::Http1 => Vec::new(),
        Protocol::Http2 => {
            let n = storm
                .concurrency
                .div_ceil(storm.streams_per_connection.max(1));
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(Conn::open(endpoint, Protocol::Http2, Duration::from_secs(20)).await?);
            }
            v
        }
    };
    let idle = pid.and_then(crate::procstat::rss_bytes).unwrap_or(0);
    let sampler =
        pid.map(|p| crate::scenario::progress::RssSampler::start(p, Duration::from_millis(20)));
    let start = crate::scenario::servers::CpuMark::now(pid, None);
    let latency = Arc::new(Histogram::new());
    let finished = Arc::new(AtomicU64::new(0));
    let bytes_read = Arc::new(AtomicU64::new(0));
    let _progress = {
        let (f, b, n) = (finished.clone(), bytes_read.clone(), storm.concurrency);
        let label = format!("s3 {} {}", storm.kind.name(), storm.accept.name());
        crate::scenario::progress::Progress::every_second(label, move || {
            format!(
                "{} of {n} done, {:.2} GB read by finished lists",
                f.load(Ordering::Relaxed),
                b.load(Ordering::Relaxed) as f64 / 1e9
            )
        })
    };
    let t = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..storm.concurrency {
        let conn = link(endpoint, storm.protocol, &shared, i).await?;
        let (s, lat, fin, b) = (
            storm.clone(),
            latency.clone(),
            finished.clone(),
            bytes_read.clone(),
        );
        tasks.spawn(async move {
            let r = tokio::time::timeout(LIST_TIMEOUT, one(conn, &s))
                .await
                .unwrap_or_else(|_| Err(format!("not done after {LIST_TIMEOUT:?}")));
            if let Ok((d, _)) = &r {
                lat.record((d.seconds * 1e6) as u64);
                b.fetch_add(d.bytes, Ordering::Relaxed);
            }
            fin.fetch_add(1, Ordering::Relaxed);
            r
        });
    }
    let mut out = StormResult {
        kind: storm.kind.name().into(),
        accept: storm.accept.name().into(),
        lists: storm.concurrency,
        idle_rss_bytes: idle,
        gzip: storm.gzip,
        ..StormResult::default()
    };
    while let Some(r) = tasks.join_next().await {
        match r.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok((d, gzipped)) => {
                out.bytes += d.bytes;
                out.decoded_bytes += d.decoded_bytes;
                out.gzipped += usize::from(gzipped);
            }
            Err(e) => {
                out.failed += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    out.wall_s = t.elapsed().as_secs_f64();
    let cpu = start.until(&crate::scenario::servers::CpuMark::now(pid, None));
    out.server_cpu_s = cpu.watchd_s;
    out.generator_cpu_s = cpu.generator_s;
    out.peak_rss_bytes = match (sampler, pid) {
        (Some(s), Some(p)) => s.stop(p),
        _ => 0,
    };
    let ok = (out.lists - out.failed) as f64;
    out.lists_per_sec = ok / out.wall_s.max(1e-9);
    out.gb_per_sec = out.bytes as f64 / 1e9 / out.wall_s.max(1e-9);
    out.latency_ms = crate::scenario::report::latency_ms(&latency);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_stream(events: usize) -> Vec<u8> {
        let mut s = Vec::new();
        for i in 0..events {
            s.extend_from_slice(
                format!(
                    "{{\"type\":\"ADDED\",\"object\":{{\"n\":{i},\"pad\":\"{}\"}}}}\n",
                    "x".repeat(i % 50)
                )
                .as_bytes(),
            );
        }
        s.extend_from_slice(br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#);
        s.push(b'\n');
        s.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":{}}\n");
        s
    }

    #[test]
    fn json_lines_count_until_the_end_bookmark_at_any_chunking() {
        let s = json_stream(40);
        for size in [1, 2, 7, 18, 19, 64, 4096] {
            let mut c = LineCounter::default();
            for chunk in s.chunks(size) {
                c.feed(chunk);
            }
            assert!(c.ended, "chunks of {size}");
            assert_eq!(c.events, 40, "chunks of {size}");
        }
        // A plain bookmark (no annotation) is neither an event nor the end.
        let mut c = LineCounter::default();
        c.feed(b"{\"type\":\"BOOKMARK\",\"object\":{}}\n{\"type\":\"ADDED\"}\n");
        assert_eq!((c.events, c.ended), (1, false));
    }

    fn frame(kind: &str, body: &[u8]) -> Vec<u8> {
        let mut ev = vec![0x0a, kind.len() as u8];
        ev.extend_from_slice(kind.as_bytes());
        ev.push(0x12);
        ev.push(body.len() as u8);
        ev.extend_from_slice(body);
        let mut out = (ev.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&ev);
        out
    }

    #[test]
    fn protobuf_frames_count_until_the_end_bookmark() {
        let mut s = Vec::new();
        for _ in 0..5 {
            s.extend(frame("ADDED", b"pod"));
        }
        s.extend(frame("BOOKMARK", b"plain"));
        s.extend(frame("BOOKMARK", b"..k8s.io/initial-events-end.."));
        s.extend(frame("ADDED", b"late"));
        for size in [1, 3, 11, 1000] {
            let mut c = FrameCounter::default();
            for chunk in s.chunks(size) {
                c.feed(chunk).unwrap();
            }
            assert!(c.ended);
            assert_eq!(c.events, 5, "chunks of {size}");
        }
        assert_eq!(Kind::List.path(), "/api/v1/pods");
        assert!(Kind::Stream
            .path()
            .contains("sendInitialEvents=true&resourceVersionMatch=NotOlderThan"));
    }
}
