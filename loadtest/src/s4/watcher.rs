//! The S4 watchers: each keeps one watch of every ConfigMap open and, when
//! the generation changes (a storm), drops its connection (HTTP/1.1) or
//! stream (HTTP/2, whose connections the storm replaces) and watches again
//! from the last `resourceVersion` it received, as an informer resumes.
//! Its [`Tally`] runs across the reconnects, so an event lost or repeated
//! by a resume is counted.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use tokio::sync::{watch, Semaphore};

use crate::endpoint::{Endpoint, Protocol};
use crate::http::{Accept, LineSplitter};
use crate::s1::event::parse_watch_line;
use crate::stats::{Histogram, Tally};
use crate::transport::Conn;

/// How long one (re)open may take.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// The storm signal: generation `n` means "be watching on the n-th set of
/// connections"; [`STOP`] ends the watchers.
pub const STOP: u32 = u32::MAX;

/// What all watchers share.
pub struct Shared {
    /// Highest revision received, per watcher.
    pub last_seen: Vec<AtomicI64>,
    /// Watchers whose watch of generation `g` is open (response head in).
    pub opened: Vec<AtomicU64>,
    /// Time from the storm's start to each watcher's resumed watch, µs.
    pub resume_us: Histogram,
    /// When the current storm began.
    pub storm_start: Mutex<Option<Instant>>,
    /// HTTP/2 connections of the current generation (empty for HTTP/1.1).
    pub h2: Mutex<Vec<Conn>>,
    /// ERROR events received.
    pub error_events: AtomicU64,
}

impl Shared {
    /// State for `n` watchers starting after `base`, with `generations`
    /// generations (the first opening, then one per storm).
    pub fn new(n: usize, base: i64, generations: usize) -> Self {
        Self {
            last_seen: (0..n).map(|_| AtomicI64::new(base)).collect(),
            opened: (0..generations).map(|_| AtomicU64::new(0)).collect(),
            resume_us: Histogram::new(),
            storm_start: Mutex::new(None),
            h2: Mutex::new(Vec::new()),
            error_events: AtomicU64::new(0),
        }
    }

    /// Lowest revision every watcher has reached.
    pub fn min_seen(&self) -> i64 {
        self.last_seen
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .min()
            .unwrap_or(i64::MAX)
    }

    /// Watchers open in generation `g`.
    pub fn opened(&self, g: u32) -> u64 {
        self.opened
            .get(g as usize)
            .map_or(0, |a| a.load(Ordering::Relaxed))
    }
}

/// How one watcher ended.
#[derive(Debug)]
pub struct Outcome {
    /// What it received over every generation.
    pub tally: Tally,
    /// Why it gave up, if it did.
    pub error: Option<String>,
}

/// One watcher's settings.
pub struct Watcher {
    /// Index into [`Shared::last_seen`].
    pub idx: usize,
    /// The HTTP API.
    pub endpoint: Arc<Endpoint>,
    /// HTTP/1.1 or HTTP/2 (streams on [`Shared::h2`]).
    pub protocol: Protocol,
    /// Revision the first watch starts after.
    pub base: i64,
    /// Shared counters.
    pub shared: Arc<Shared>,
    /// The generation signal.
    pub generation: watch::Receiver<u32>,
    /// Limits the opens in flight (the first opening; storms may be unbounded).
    pub gate: Arc<Semaphore>,
}

/// Opens a watch from `rv` on a fresh connection or stream.
async fn open(w: &Watcher, rv: i64) -> Result<(Conn, hyper::body::Incoming), String> {
    let mut conn = match w.protocol {
        Protocol::Http1 => Conn::open(&w.endpoint, Protocol::Http1, OPEN_TIMEOUT).await?,
        Protocol::Http2 => {
            let conns = w.shared.h2.lock().map_err(|e| e.to_string())?;
            let c = conns
                .get(w.idx % conns.len().max(1))
                .ok_or("no HTTP/2 connection")?;
            c.stream().ok_or("not HTTP/2")?
        }
    };
    let path = format!("/api/v1/configmaps?watch=1&resourceVersion={rv}");
    let resp = tokio::time::timeout(OPEN_TIMEOUT, conn.get_as(&path, Accept::Json))
        .await
        .map_err(|_| format!("GET {path}: no response in {OPEN_TIMEOUT:?}"))??;
    if resp.status() != 200 {
        return Err(format!("GET {path}: {}", resp.status()));
    }
    Ok((conn, resp.into_body()))
}

/// Runs a watcher until [`STOP`]: watches, and re-watches from the last
/// revision at each new generation.
pub async fn run(mut w: Watcher) -> Outcome {
    let mut tally = Tally::new(w.base);
    let mut generation = *w.generation.borrow();
    loop {
        if generation == STOP {
            return Outcome { tally, error: None };
        }
        let opened = {
            let _permit = if generation == 0 {
                w.gate.acquire().await.ok()
            } else {
                None
            };
            open(&w, tally.last()).await
        };
        let (_conn, mut body) = match opened {
            Ok(x) => x,
            Err(e) => {
                return Outcome {
                    tally,
                    error: Some(format!("generation {generation}: {e}")),
                }
            }
        };
        if let Some(a) = w.shared.opened.get(generation as usize) {
            a.fetch_add(1, Ordering::Relaxed);
        }
        if generation > 0 {
            if let Some(t0) = *w
                .shared
                .storm_start
                .lock()
                .unwrap_or_else(|e| e.into_inner())
            {
                w.shared.resume_us.record(t0.elapsed().as_micros() as u64);
            }
        }
        let mut lines = LineSplitter::default();
        let ended = loop {
            let frame = tokio::select! {
                r = w.generation.changed() => {
                    generation = if r.is_ok() { *w.generation.borrow() } else { STOP };
                    break None;
                }
                f = body.frame() => f,
            };
            let data = match frame {
                None => break Some("watch stream ended".to_string()),
                Some(Err(e)) => break Some(format!("watch stream failed: {e}")),
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
            };
            let mut bad = None;
            lines.feed(&data, |line| match parse_watch_line(line) {
                Ok(ev) if ev.kind == "ERROR" => {
                    w.shared.error_events.fetch_add(1, Ordering::Relaxed);
                    bad.get_or_insert(ev.detail.unwrap_or_default());
                }
                Ok(ev) if ev.kind == "BOOKMARK" => {}
                Ok(ev) => {
                    if let Some(rev) = ev.revision {
                        tally.record(rev);
                        w.shared.last_seen[w.idx].store(tally.last(), Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    bad.get_or_insert(e);
                }
            });
            if let Some(e) = bad {
                break Some(e);
            }
        };
        if let Some(e) = ended {
            return Outcome {
                tally,
                error: Some(e),
            };
        }
    }
}
