//! Response bodies made of shared `Bytes` segments, written with vectored writes: a list
//! or a batch of watch events is sent without copying the cached objects.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use futures_util::Stream;
use http_body::{Frame, SizeHint};

use crate::api::read::{ListItems, ListMeter};
use crate::api::watch::SteppedWatch;
use crate::store::ObjectRef;

/// A sequence of byte segments read as one buffer.
///
/// The first segment is held inline: a watch frame of one event (the usual one) is one
/// shared segment and costs no allocation.
#[derive(Debug, Default)]
pub struct BufList {
    /// The front segment; None only when the list is empty.
    first: Option<Bytes>,
    rest: VecDeque<Bytes>,
    remaining: usize,
    /// The same bytes framed as one HTTP/1.1 chunk, when one shared buffer holds that
    /// (a frame of one event whose chunk was cached with it): a plain HTTP/1.1
    /// connection writes it with one `write` of one buffer.
    chunked: Option<Bytes>,
}

impl BufList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a segment (empty ones are dropped).
    pub fn push(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        self.chunked = None;
        self.remaining += b.len();
        if self.first.is_none() {
            self.first = Some(b);
        } else {
            self.rest.push_back(b);
        }
    }

    /// Appends the frame inside `chunk`, an HTTP/1.1 chunk (`<hex size>\r\n<frame>\r\n`,
    /// see [`chunk_of`]); a list of only that frame keeps the chunk too.
    pub fn push_chunk(&mut self, chunk: Bytes) {
        let was_empty = self.first.is_none();
        self.push(unchunked(&chunk));
        if was_empty {
            self.chunked = Some(chunk);
        }
    }

    /// The list framed as one HTTP/1.1 chunk in one buffer, when it is one.
    pub fn chunked(&self) -> Option<&Bytes> {
        self.chunked.as_ref()
    }

    /// Appends a static segment.
    pub fn push_static(&mut self, b: &'static [u8]) {
        self.push(Bytes::from_static(b));
    }

    /// The segments, in order.
    pub fn into_segments(self) -> impl Iterator<Item = Bytes> {
        self.first.into_iter().chain(self.rest)
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }
}

/// `frame` as one HTTP/1.1 chunk: its size in hex, CRLF, the bytes, CRLF.
pub fn chunk_of(frame: &[&[u8]]) -> Bytes {
    let len: usize = frame.iter().map(|p| p.len()).sum();
    let head = format!("{len:X}\r\n");
    let mut b = Vec::with_capacity(head.len() + len + 2);
    b.extend_from_slice(head.as_bytes());
    for p in frame {
        b.extend_from_slice(p);
    }
    b.extend_from_slice(b"\r\n");
    Bytes::from(b)
}

/// The frame inside a chunk made by [`chunk_of`] (a slice of it: no copy).
pub fn unchunked(chunk: &Bytes) -> Bytes {
    let head = chunk
        .iter()
        .take(18)
        .position(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    chunk.slice(head..chunk.len().saturating_sub(2).max(head))
}

impl From<Bytes> for BufList {
    fn from(b: Bytes) -> Self {
        let mut l = BufList::new();
        l.push(b);
        l
    }
}

impl Buf for BufList {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.first.as_ref().map_or(&[], |b| b.chunk())
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let segments = self.first.iter().chain(self.rest.iter());
        for (slot, seg) in dst.iter_mut().zip(segments) {
            *slot = IoSlice::new(seg);
            n += 1;
        }
        n
    }

    fn advance(&mut self, mut cnt: usize) {
        if cnt > 0 {
            self.chunked = None;
        }
        self.remaining = self.remaining.saturating_sub(cnt);
        while cnt > 0 {
            let Some(front) = self.first.as_mut() else {
                return;
            };
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.first = self.rest.pop_front();
        }
    }
}

/// Objects per frame of a list streamed from its snapshot: a frame holds references to
/// this many cached objects and what their encoding made for them, never the whole list.
pub const LIST_BATCH: usize = 128;

/// A list body: `head`, then the objects of `items` written by `write` a batch at a
/// time (its `bool`: whether the batch starts the list), then `tail`. Each batch is read
/// from the snapshot and encoded when the connection asks for the next frame, that is once
/// the socket took the one before (HTTP/1.1) or the stream has window (HTTP/2), so a
/// response holds its snapshot and one batch, whatever the list's size. A list that ends
/// within its first batch is sent whole, with its length.
pub fn list<W>(
    head: Bytes,
    items: ListItems,
    tail: &'static [u8],
    meter: ListMeter,
    write: W,
) -> Body
where
    W: FnMut(&mut BufList, &[ObjectRef], bool) + Send + 'static,
{
    let mut frames = ListFrames {
        head: Some(head),
        items,
        tail: Some(tail),
        meter,
        write,
    };
    let first = frames.next().unwrap_or_default();
    if frames.tail.is_none() {
        return Body::segments(first);
    }
    Body::stream(futures_util::stream::iter(
        std::iter::once(first).chain(frames),
    ))
}

/// Writes each of `batch` with `write`, comma separated, a comma before the first too
/// unless the batch starts the list (`first`): the items of a JSON list.
pub fn comma_separated(
    out: &mut BufList,
    batch: &[ObjectRef],
    first: bool,
    mut write: impl FnMut(&mut BufList, &ObjectRef),
) {
    for (i, obj) in batch.iter().enumerate() {
        if i > 0 || !first {
            out.push_static(b",");
        }
        write(out, obj);
    }
}

/// The frames of a streamed list.
struct ListFrames<W> {
    /// The list's head, until the first frame took it.
    head: Option<Bytes>,
    items: ListItems,
    /// The list's tail, until the last frame took it (then the list has ended).
    tail: Option<&'static [u8]>,
    meter: ListMeter,
    write: W,
}

impl<W: FnMut(&mut BufList, &[ObjectRef], bool)> Iterator for ListFrames<W> {
    type Item = BufList;

    fn next(&mut self) -> Option<BufList> {
        let tail = self.tail?;
        let mut out = BufList::new();
        let first = match self.head.take() {
            Some(head) => {
                out.push(head);
                true
            }
            None => false,
        };
        let batch = self.items.next_batch(LIST_BATCH);
        if !batch.is_empty() {
            (self.write)(&mut out, &batch, first);
        }
        let ended = batch.len() < LIST_BATCH;
        if ended {
            out.push_static(tail);
            self.tail = None;
        }
        self.meter.add(batch.len(), out.remaining());
        if ended {
            self.meter.done();
        }
        Some(out)
    }
}

/// The body of every response: either complete bytes, or a stream of frames (lists and
/// watches).
pub enum Body {
    /// A complete body.
    Full(Option<BufList>, usize),
    /// A streamed body.
    Stream(Pin<Box<dyn Stream<Item = BufList> + Send>>),
    /// A watch, stepped by the connection that writes it (`h1` writes its frames from
    /// the watcher's wake-up); polled as a stream by everything else.
    Watch(Box<dyn SteppedWatch<BufList>>),
}

impl Body {
    /// A body of one buffer.
    pub fn full(b: impl Into<Bytes>) -> Body {
        let b: Bytes = b.into();
        let len = b.len();
        Body::Full(Some(BufList::from(b)), len)
    }

    /// A body of several segments with a known total length.
    pub fn segments(list: BufList) -> Body {
        let len = list.remaining();
        Body::Full(Some(list), len)
    }

    /// The segments of a complete body; None for a stream.
    pub fn into_segments(self) -> Option<impl Iterator<Item = Bytes>> {
        match self {
            Body::Full(b, _) => Some(b.unwrap_or_default().into_segments()),
            Body::Stream(_) | Body::Watch(_) => None,
        }
    }

    /// A streamed body; each item becomes one frame (one chunk on the wire).
    pub fn stream(s: impl Stream<Item = BufList> + Send + 'static) -> Body {
        Body::Stream(Box::pin(s))
    }

    /// The body as a stream of frames; a complete body is given back.
    pub fn into_stream(self) -> Result<Pin<Box<dyn Stream<Item = BufList> + Send>>, Body> {
        match self {
            Body::Stream(s) => Ok(s),
            Body::Watch(w) => Ok(w.into_stream()),
            full => Err(full),
        }
    }
}

impl http_body::Body for Body {
    type Data = BufList;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<BufList>, Infallible>>> {
        let this = self.get_mut();
        if let Body::Watch(_) = this {
            // Polled as a stream from now on.
            if let Ok(s) = std::mem::replace(this, Body::Full(None, 0)).into_stream() {
                *this = Body::Stream(s);
            }
        }
        match this {
            Body::Full(b, _) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::Watch(_) => Poll::Ready(None),
            Body::Stream(s) => s
                .as_mut()
                .poll_next(cx)
                .map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None, _))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(_), len) => SizeHint::with_exact(*len as u64),
            Body::Full(None, _) => SizeHint::with_exact(0),
            Body::Stream(_) | Body::Watch(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buf_list_reads_across_segments() {
        let mut l = BufList::new();
        l.push(Bytes::from_static(b"ab"));
        l.push(Bytes::new());
        l.push(Bytes::from_static(b"cde"));
        assert_eq!(l.remaining(), 5);
        assert_eq!(l.segment_count(), 2);
        let mut slices = [IoSlice::new(&[]); 4];
        assert_eq!(l.chunks_vectored(&mut slices), 2);
        l.advance(3);
        assert_eq!(l.chunk(), b"de");
        assert_eq!(l.remaining(), 2);
        let v = l.copy_to_bytes(2);
        assert_eq!(&v[..], b"de");
    }

    #[test]
    fn a_list_of_one_chunked_frame_keeps_its_chunk() {
        let chunk = chunk_of(&[b"{\"type\":", b"\"ADDED\"}\n"]);
        assert_eq!(&chunk[..], b"11\r\n{\"type\":\"ADDED\"}\n\r\n");
        assert_eq!(&unchunked(&chunk)[..], b"{\"type\":\"ADDED\"}\n");
        let mut l = BufList::new();
        l.push_chunk(chunk.clone());
        assert_eq!(l.chunked(), Some(&chunk));
        assert_eq!(l.remaining(), 17);
        l.push_chunk(chunk);
        assert_eq!(l.chunked(), None, "two frames are not one chunk");
        assert_eq!(l.remaining(), 34);
        let mut one = BufList::new();
        one.push_chunk(chunk_of(&[b"abc"]));
        one.advance(1);
        assert_eq!(
            one.chunked(),
            None,
            "a partly written list is not its chunk"
        );
    }
}
