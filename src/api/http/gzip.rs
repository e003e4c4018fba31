//! `Content-Encoding: gzip` for get and list bodies, and for watch lists as kube-apiserver
//! 1.37 compresses them ([`compress_watch`]; other watches are never compressed).
//!
//! A complete body up to [`config::GZIP_THRESHOLD_BYTES`] is sent as it is, as
//! kube-apiserver sends one (its `defaultGzipThresholdBytes`): client-go asks for gzip on
//! every request, and deflating a small get costs more than it saves. A larger one, and a
//! list streamed from its snapshot, is compressed as the client reads it: the body becomes a stream
//! whose every step takes up to [`config::GZIP_STEP_BYTES`] of the list's segments (shared
//! `Bytes`, sliced, not copied; a streamed list's next batch read only when a step needs it),
//! compresses them on tokio's blocking pool and yields what came out as one frame. The next
//! step runs only when the connection asks for the next frame, that is once the socket took
//! the previous one (HTTP/1.1) or the stream has window again (HTTP/2): a slow reader holds
//! its compressor's state and one frame, never the whole compressed copy, and the threads
//! that serve other connections never run deflate for more than a small watch frame.
//!
//! Steps of every response share [`limiter`]'s permits: at most half the cores (at least
//! one) compress at once, so concurrent gzip lists cannot take every core from the other
//! connections. A step that finds no permit waits for one asynchronously (in FIFO order,
//! holding no thread): the lists then advance in turn, each more slowly; none is refused.

use std::collections::VecDeque;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use futures_util::{Stream, StreamExt as _};
use tokio::sync::Semaphore;

use super::body::{Body, BufList};
use crate::config;

/// Why a streamed gzip body ended early (its headers are sent: the client sees a
/// truncated gzip stream).
#[derive(Debug, thiserror::Error)]
enum GzipError {
    /// The compressor failed (it writes to memory, so this is not expected).
    #[error("gzip compression failed: {0}")]
    Compress(#[from] std::io::Error),
    /// The blocking task of a step panicked or was cancelled at shutdown.
    #[error("gzip step did not complete: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// The limiter was closed (never done).
    #[error("gzip limiter closed: {0}")]
    Closed(#[from] tokio::sync::AcquireError),
}

/// kube-apiserver's level (`defaultGzipContentEncodingLevel = 1`): the least CPU for a
/// ratio close to the higher levels'.
fn level() -> Compression {
    Compression::fast()
}

/// The permits of compression steps shared by every response.
fn limiter() -> &'static Arc<Semaphore> {
    static LIMITER: OnceLock<Arc<Semaphore>> = OnceLock::new();
    LIMITER.get_or_init(|| Arc::new(Semaphore::new(gzip_threads())))
}

/// Steps that may run at once: half the cores, at least one.
fn gzip_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// A streamed body with its first frames read until they pass the threshold, as
/// kube-apiserver's writer buffers a response before it decides on gzip: a body that
/// ends first is complete (and so sent as it is by [`compress`]); else the frames read
/// go back in front of the rest. Holds at most the threshold and one frame (a list's
/// batch).
pub async fn settle(body: Body) -> Body {
    let Body::Stream(mut frames) = body else {
        return body;
    };
    let mut held = BufList::new();
    while bytes::Buf::remaining(&held) <= config::GZIP_THRESHOLD_BYTES {
        match frames.next().await {
            Some(frame) => {
                for seg in frame.into_segments() {
                    held.push(seg);
                }
            }
            None => return Body::segments(held),
        }
    }
    Body::stream(futures_util::stream::iter([held]).chain(frames))
}

/// `body` gzipped as the client reads it: a complete body over the threshold, or a
/// streamed list (past the threshold, once [`settle`]d). A complete body up to the threshold and a watch (watch lists have
/// [`compress_watch`]) are given back as they are. Needs a tokio runtime.
pub fn compress(body: Body) -> Result<Body, Body> {
    let input: Frames = match body {
        Body::Full(_, len) if len <= config::GZIP_THRESHOLD_BYTES => return Err(body),
        // One frame: the steps take it a step's worth at a time.
        Body::Full(Some(list), _) => Box::pin(futures_util::stream::iter([list])),
        Body::Stream(s) => s,
        body @ (Body::Full(None, _) | Body::Watch(_)) => return Err(body),
    };
    Ok(streamed(input, config::GZIP_STEP_BYTES))
}

/// The frames of a body that is compressed as it is read.
type Frames = Pin<Box<dyn Stream<Item = BufList> + Send>>;

/// A watch list's stream gzipped as kube-apiserver 1.37 gzips one (`WatchListCompression`:
/// a watch with `sendInitialEvents=true` and `allowWatchBookmarks=true`, from a client
/// that accepts gzip): every frame the watch yields (the events of one pass) becomes a
/// gzip member of its own, complete when sent, so the client decodes each event as it
/// arrives; the body is the members one after another, as kube-apiserver's writer that
/// closes its gzip stream at every flush makes it. A frame larger than the threshold
/// is compressed on the blocking pool under [`limiter`]'s permits, as a list's steps
/// are. A complete body (an error answered at once) is given back, not compressed.
pub fn compress_watch(body: Body) -> Result<Body, Body> {
    let frames = body.into_stream()?;
    let members = frames
        .then(member)
        .take_while(|m| {
            if let Err(e) = m {
                // In memory this does not fail; the watch ends, its stream truncated.
                tracing::warn!(error = %e, "watch gzip member failed");
            }
            std::future::ready(m.is_ok())
        })
        .filter_map(|m| std::future::ready(m.ok()))
        .map(|gz| BufList::from(Bytes::from(gz)));
    Ok(Body::stream(members))
}

/// One gzip member of `frame`: here when small, else on the blocking pool.
async fn member(frame: BufList) -> Result<Vec<u8>, GzipError> {
    if bytes::Buf::remaining(&frame) <= config::GZIP_THRESHOLD_BYTES {
        return Ok(inline(frame)?);
    }
    let permit = limiter().clone().acquire_owned().await?;
    let gz = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        inline(frame)
    })
    .await??;
    Ok(gz)
}

/// The whole of `body`, gzipped here.
fn inline(body: BufList) -> std::io::Result<Vec<u8>> {
    let mut enc = GzEncoder::new(Vec::new(), level());
    for seg in body.into_segments() {
        enc.write_all(&seg)?;
    }
    enc.finish()
}

/// What a streamed body has left: the input and the compressor (None once finished).
struct Pending {
    input: Frames,
    /// Input read from `input` and not compressed yet.
    held: VecDeque<Bytes>,
    /// Whether `input` ended.
    ended: bool,
    encoder: Option<GzEncoder<Vec<u8>>>,
    step: usize,
}

impl Pending {
    /// Takes up to `step` bytes of input (the last segment taken is split if needed),
    /// reading the body's frames as it needs them.
    async fn take_step(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut budget = self.step;
        while budget > 0 {
            let Some(front) = self.held.front_mut() else {
                if self.read_frame().await {
                    continue;
                }
                break;
            };
            if front.len() <= budget {
                budget -= front.len();
                if let Some(seg) = self.held.pop_front() {
                    out.push(seg);
                }
            } else {
                out.push(front.split_to(budget));
                budget = 0;
            }
        }
        out
    }

    /// Whether every byte of input was taken.
    async fn exhausted(&mut self) -> bool {
        while self.held.is_empty() && self.read_frame().await {}
        self.held.is_empty()
    }

    /// Reads the body's next frame into `held`; false once the body has ended.
    async fn read_frame(&mut self) -> bool {
        if self.ended {
            return false;
        }
        match self.input.next().await {
            Some(frame) => self.held.extend(frame.into_segments()),
            None => self.ended = true,
        }
        !self.ended
    }
}

/// What a step gives back: the compressor (None when finished) and the compressed bytes
/// the step produced (possibly none: deflate keeps some input until its block fills).
type Stepped = (Option<GzEncoder<Vec<u8>>>, Vec<u8>);

/// Compresses `batch`; with `last`, finishes the stream.
fn run_step(
    mut encoder: GzEncoder<Vec<u8>>,
    batch: Vec<Bytes>,
    last: bool,
) -> std::io::Result<Stepped> {
    for seg in &batch {
        encoder.write_all(seg)?;
    }
    if last {
        return encoder.finish().map(|out| (None, out));
    }
    // The encoder only appends to its output: what it wrote so far can be taken.
    let out = std::mem::take(encoder.get_mut());
    Ok((Some(encoder), out))
}

/// One frame of compressed output (None at the end); runs as many steps as it takes to
/// produce some.
async fn next_frame(mut p: Pending) -> Result<Option<(BufList, Pending)>, GzipError> {
    loop {
        let Some(encoder) = p.encoder.take() else {
            return Ok(None);
        };
        let batch = p.take_step().await;
        let last = p.exhausted().await;
        let permit = limiter().clone().acquire_owned().await?;
        let (encoder, out) = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            run_step(encoder, batch, last)
        })
        .await??;
        p.encoder = encoder;
        if !out.is_empty() {
            return Ok(Some((BufList::from(Bytes::from(out)), p)));
        }
    }
}

/// `input` as a stream of gzip frames, compressed `step` bytes of input at a time off
/// the runtime's worker threads.
fn streamed(input: Frames, step: usize) -> Body {
    let start = Pending {
        input,
        held: VecDeque::new(),
        ended: false,
        encoder: Some(GzEncoder::new(Vec::new(), level())),
        step: step.max(1),
    };
    Body::stream(futures_util::stream::unfold(
        Some(start),
        |state| async move {
            match next_frame(state?).await {
                Ok(Some((frame, rest))) => Some((frame, Some(rest))),
                Ok(None) => None,
                Err(e) => {
                    metrics::counter!("watchd_http_gzip_errors_total").increment(1);
                    tracing::warn!(error = %e, "gzip response ended early");
                    None
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use std::io::Read as _;

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .expect("valid gzip");
        out
    }

    fn segments(n: usize) -> (BufList, Vec<u8>) {
        let mut list = BufList::new();
        let mut plain = Vec::new();
        for i in 0..n {
            let seg = Bytes::from(format!(
                "{{\"i\":{i},\"pad\":\"{}\"}},",
                "ab".repeat(i % 700)
            ));
            plain.extend_from_slice(&seg);
            list.push(seg);
        }
        (list, plain)
    }

    async fn collect(body: Body) -> (Vec<u8>, usize) {
        let mut s = match body.into_stream() {
            Ok(s) => s,
            Err(_) => panic!("a large body is streamed"),
        };
        let (mut all, mut frames) = (Vec::new(), 0);
        while let Some(mut f) = s.next().await {
            use bytes::Buf as _;
            let b = f.copy_to_bytes(f.remaining());
            assert!(!b.is_empty(), "no empty frames");
            all.extend_from_slice(&b);
            frames += 1;
        }
        (all, frames)
    }

    #[tokio::test]
    async fn a_large_body_is_streamed_in_bounded_steps_and_gunzips_to_itself() {
        let (list, plain) = segments(4000);
        assert!(plain.len() > 4 * config::GZIP_THRESHOLD_BYTES);
        let Ok(body) = compress(Body::segments(list)) else {
            panic!("a large body is compressed");
        };
        assert!(matches!(body, Body::Stream(_)));
        let (gz, frames) = collect(body).await;
        assert_eq!(gunzip(&gz), plain);
        assert!(frames > 1, "{frames} frames");
    }

    #[tokio::test]
    async fn one_segment_larger_than_a_step_is_split() {
        let big = Bytes::from(
            (0..600_000u32)
                .flat_map(|i| (i.wrapping_mul(2_654_435_761) >> 24).to_le_bytes())
                .collect::<Vec<u8>>(),
        );
        let body = streamed(
            Box::pin(futures_util::stream::iter([BufList::from(big.clone())])),
            64 * 1024,
        );
        let (gz, frames) = collect(body).await;
        assert_eq!(gunzip(&gz), big);
        // Poorly compressible input: each 64 KiB step yields a frame of its own.
        assert!(frames >= 8, "{frames} frames for 2.4 MB in 64 KiB steps");
    }

    #[test]
    fn a_small_body_is_sent_as_it_is() {
        let (list, plain) = segments(10);
        assert!(plain.len() <= config::GZIP_THRESHOLD_BYTES);
        let Err(body) = compress(Body::segments(list)) else {
            panic!("a small body is not compressed");
        };
        let Some(segs) = body.into_segments() else {
            panic!("a small body stays complete");
        };
        assert_eq!(segs.flat_map(|b| b.to_vec()).collect::<Vec<u8>>(), plain);
        assert!(compress(Body::full(Bytes::new())).is_err());
    }

    #[tokio::test]
    async fn steps_take_the_limiter_and_wait_for_it() {
        let permits = gzip_threads();
        let held = limiter()
            .clone()
            .acquire_many_owned(permits as u32)
            .await
            .unwrap();
        let (list, plain) = segments(4000);
        let Ok(body) = compress(Body::segments(list)) else {
            panic!("a large body is compressed");
        };
        let mut s = match body.into_stream() {
            Ok(s) => s,
            Err(_) => panic!("streamed"),
        };
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(200), s.next()).await;
        assert!(waiting.is_err(), "no step runs while every permit is held");
        drop(held);
        // The step that waited is resumed, not lost.
        let (gz, _) = collect(Body::Stream(s)).await;
        assert_eq!(gunzip(&gz), plain);
    }

    /// A watch list's every frame is a complete gzip member of its own (kube-apiserver
    /// closes its gzip stream at every flush), a large one compressed off the workers.
    #[tokio::test]
    async fn each_watch_frame_is_a_gzip_member_of_its_own() {
        let (big, big_plain) = segments(4000);
        assert!(big_plain.len() > config::GZIP_THRESHOLD_BYTES);
        let frames = vec![
            BufList::from(Bytes::from_static(b"{\"type\":\"ADDED\"}\n")),
            big,
            BufList::from(Bytes::from_static(b"{\"type\":\"BOOKMARK\"}\n")),
        ];
        let plains: Vec<Vec<u8>> = vec![
            b"{\"type\":\"ADDED\"}\n".to_vec(),
            big_plain,
            b"{\"type\":\"BOOKMARK\"}\n".to_vec(),
        ];
        let Ok(body) = compress_watch(Body::stream(futures_util::stream::iter(frames))) else {
            panic!("a stream is compressed");
        };
        let Ok(mut s) = body.into_stream() else {
            panic!("streamed");
        };
        let mut members = Vec::new();
        while let Some(mut f) = s.next().await {
            use bytes::Buf as _;
            members.push(f.copy_to_bytes(f.remaining()));
        }
        assert_eq!(members.len(), 3);
        for (member, plain) in members.iter().zip(plains) {
            assert_eq!(gunzip(member), plain, "each member decodes alone");
        }
        let complete = Body::full(Bytes::from_static(b"{}"));
        assert!(
            compress_watch(complete).is_err(),
            "an error answered at once stays"
        );
    }

    /// A streamed list is read up to the threshold before the decision: one that ends
    /// within it becomes complete (and is sent as it is), a longer one keeps every byte,
    /// in order, and is compressed.
    #[tokio::test]
    async fn a_streamed_body_is_settled_at_the_threshold() {
        let frames = |n: usize| {
            let (list, plain) = segments(n);
            let per_frame: Vec<BufList> = list.into_segments().map(BufList::from).collect();
            (Body::stream(futures_util::stream::iter(per_frame)), plain)
        };
        let (small, plain) = frames(10);
        assert!(plain.len() <= config::GZIP_THRESHOLD_BYTES);
        let settled = settle(small).await;
        assert!(
            matches!(settled, Body::Full(..)),
            "a short stream ends complete"
        );
        let Err(as_is) = compress(settled) else {
            panic!("not compressed");
        };
        let got: Vec<u8> = as_is
            .into_segments()
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        assert_eq!(got, plain);
        let (large, plain) = frames(4000);
        let settled = settle(large).await;
        let Ok(gz) = compress(settled) else {
            panic!("a long stream is compressed");
        };
        let (gz, _) = collect(gz).await;
        assert_eq!(gunzip(&gz), plain);
    }
}
