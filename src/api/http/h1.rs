//! HTTP/1.1 for plain connections, served without hyper for what watchers send: GET
//! requests without bodies. Everything else on the connection — another method, a body,
//! an upgrade, HTTP/1.0, a head too large or malformed — goes to hyper for the rest of
//! the connection, with the bytes already read replayed ([`Rewind`]), so hyper answers
//! every edge case exactly as before. A connection that opens with the HTTP/2 preface
//! goes to hyper's HTTP/2.
//!
//! Why: a watch over HTTP/1.1 is one connection per watcher, and for each event each of
//! them is polled and written. Through hyper that poll runs its connection dispatcher,
//! its chunk encoder and its write queue, and the connection keeps hyper's 8 KiB read and
//! write buffers for as long as the watch is open. Here a streamed response is a loop
//! that takes a frame from the body and writes chunk header, frame and CRLF with one
//! `writev`, and the read buffer is dropped while the watch streams.
//!
//! While a response streams, the socket's readability is watched too: a client that
//! closes its end is noticed at once, not at the next event.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Version};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::body::Body;
use super::conn::{serve_connection, Connection, H2_PREFACE};
use super::socket::{peer_still_open, write_buf, ChunkHead, Io};
use super::{handle, ApiState};

/// Most headers a request may have on this path (hyper's limit too; more go to hyper,
/// which answers them).
const MAX_HEADERS: usize = 100;

/// Most IO slices given to one `writev` of a whole body.
const BODY_IOV: usize = 128;

/// What reading a request head gave.
enum Head {
    /// A request this path serves; the head's length in the buffer.
    Request(Box<Request<()>>, usize),
    /// The client closed, or sent nothing within the idle timeout.
    Closed,
    /// The HTTP/2 preface.
    H2,
    /// Anything else: hyper takes the connection.
    Hyper,
}

/// Serves a plain connection until it closes, or `drain` resolves (the server stopping):
/// then it closes once idle, after the response in flight.
pub async fn serve(
    io: Io,
    state: Arc<ApiState>,
    conn: Connection,
    mut drain: tokio::sync::oneshot::Receiver<()>,
) {
    use tokio::sync::oneshot::error::TryRecvError;
    let conn = Arc::new(conn);
    let mut io = io;
    let mut buf = BytesMut::new();
    let mut first = true;
    loop {
        if !matches!(drain.try_recv(), Err(TryRecvError::Empty)) {
            return;
        }
        let idle = crate::config::HTTP1_IDLE_TIMEOUT;
        // Waiting for a request with nothing of it read yet, a drain closes at once; a
        // request begun is read (and answered) first.
        let waiting = buf.is_empty();
        let read = tokio::time::timeout(idle, read_head(&mut io, &mut buf, first));
        let head = if waiting {
            tokio::select! {
                r = read => r,
                _ = &mut drain => return,
            }
        } else {
            read.await
        };
        let head = match head {
            Ok(Ok(h)) => h,
            Ok(Err(_)) | Err(_) => return,
        };
        first = false;
        let (req, len) = match head {
            Head::Request(req, len) => (req, len),
            Head::Closed => return,
            Head::H2 => {
                let io = Rewind::new(buf.freeze(), io);
                return Box::pin(serve_connection(io, true, state, (*conn).clone(), drain)).await;
            }
            Head::Hyper => {
                let io = Rewind::new(buf.freeze(), io);
                return Box::pin(serve_connection(io, false, state, (*conn).clone(), drain)).await;
            }
        };
        buf.advance(len);
        let close = wants_close(req.headers());
        // Boxed: the request's future is large and lives only until the response is
        // made; inline, it would size the connection's task for as long as a watch lasts.
        let response = Box::pin(handle(&state, *req, &conn)).await;
        match respond(&mut io, &mut buf, response, close).await {
            Ok(true) if !close => {}
            _ => return,
        }
        // Nothing pipelined: give the buffer back while the connection idles.
        if buf.is_empty() {
            buf = BytesMut::new();
        }
    }
}

/// Reads until the buffer holds a whole request head (or proves it is not one this path
/// serves).
async fn read_head(io: &mut Io, buf: &mut BytesMut, first: bool) -> io::Result<Head> {
    loop {
        if first && buf.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(buf) {
            // Could still be the HTTP/2 preface: read on.
        } else if first && buf.starts_with(H2_PREFACE) {
            return Ok(Head::H2);
        } else if let Some(head) = parse(buf) {
            return Ok(head);
        }
        if buf.len() > crate::config::MAX_REQUEST_HEAD {
            return Ok(Head::Hyper);
        }
        buf.reserve(4096);
        if io.read_buf(buf).await? == 0 {
            return Ok(if buf.is_empty() {
                Head::Closed
            } else {
                Head::Hyper
            });
        }
    }
}

/// Parses a complete head; None while it is incomplete.
fn parse(buf: &[u8]) -> Option<Head> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return None,
        Err(_) => return Some(Head::Hyper),
    };
    Some(build(&req).map_or(Head::Hyper, |r| Head::Request(Box::new(r), len)))
}

/// The request, if it is one this path serves: a GET of HTTP/1.1 without a body, an
/// upgrade or an expectation, whose target and headers `http` accepts.
fn build(req: &httparse::Request<'_, '_>) -> Option<Request<()>> {
    if req.method != Some("GET") || req.version != Some(1) {
        return None;
    }
    let mut headers = HeaderMap::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(h.value).ok()?;
        headers.append(name, value);
    }
    let bodiless = headers.get(header::CONTENT_LENGTH).is_none_or(|v| v == "0")
        && !headers.contains_key(header::TRANSFER_ENCODING)
        && !headers.contains_key(header::UPGRADE)
        && !headers.contains_key(header::EXPECT);
    if !bodiless {
        return None;
    }
    let mut request = Request::builder()
        .method(Method::GET)
        .uri(req.path?)
        .version(Version::HTTP_11)
        .body(())
        .ok()?;
    *request.headers_mut() = headers;
    Some(request)
}

/// Whether the client asked to close after this request.
fn wants_close(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("close"))
}

/// What writing a response does, boxed: the connection's task holds only a pointer to
/// it, and the allocation is the size of what this response needs (a watch's writer for
/// as long as the watch lasts), not of the largest kind of response.
type Responding<'a> = Pin<Box<dyn std::future::Future<Output = io::Result<bool>> + Send + 'a>>;

/// Writes `response`; Ok(true) when the connection may serve another request.
fn respond<'a>(
    io: &'a mut Io,
    buf: &'a mut BytesMut,
    response: Response<Body>,
    close: bool,
) -> Responding<'a> {
    let (parts, body) = response.into_parts();
    let mut head = Vec::with_capacity(256);
    let status = parts.status;
    head.extend_from_slice(b"HTTP/1.1 ");
    head.extend_from_slice(status.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    head.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if close {
        head.extend_from_slice(b"connection: close\r\n");
    }
    head.extend_from_slice(b"date: ");
    head.extend_from_slice(http_date(std::time::SystemTime::now()).as_bytes());
    head.extend_from_slice(b"\r\n");
    match body {
        Body::Full(list, len) => {
            head.extend_from_slice(format!("content-length: {len}\r\n\r\n").as_bytes());
            let mut out = Bytes::from(head).chain(list.unwrap_or_default());
            Box::pin(async move {
                write_buf::<BODY_IOV>(io, &mut out).await?;
                Ok(true)
            })
        }
        Body::Stream(frames) => {
            head.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            let mut out = Bytes::from(head);
            Box::pin(async move {
                write_buf::<1>(io, &mut out).await?;
                stream(io, buf, frames).await
            })
        }
        Body::Watch(watch) => {
            head.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            let mut out = Bytes::from(head);
            Box::pin(async move {
                write_buf::<1>(io, &mut out).await?;
                super::direct::stream(io, buf, watch).await
            })
        }
    }
}

/// Writes a streamed body as chunks, one `writev` per frame, until it ends (then the
/// last chunk) or the client closes its end.
async fn stream(
    io: &mut Io,
    buf: &mut BytesMut,
    mut frames: Pin<Box<dyn futures_util::Stream<Item = super::body::BufList> + Send>>,
) -> io::Result<bool> {
    // The read buffer is not needed while the response streams.
    if buf.is_empty() {
        *buf = BytesMut::new();
    }
    loop {
        // The body first; the socket's read readiness (its own waker slot, no lock) only
        // when no frame is ready.
        let next = std::future::poll_fn(|cx| {
            if let Poll::Ready(f) = frames.as_mut().poll_next(cx) {
                return Poll::Ready(Ok(f));
            }
            match io.get_ref().poll_read_ready(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Err(None)),
                Poll::Ready(Err(e)) => Poll::Ready(Err(Some(e))),
                Poll::Pending => Poll::Pending,
            }
        });
        let frame = match next.await {
            Ok(f) => f,
            Err(Some(e)) => return Err(e),
            Err(None) => {
                if !peer_still_open(io.get_ref(), buf)? {
                    return Ok(false);
                }
                continue;
            }
        };
        let Some(frame) = frame else {
            write_buf::<1>(io, &mut Bytes::from_static(b"0\r\n\r\n")).await?;
            return Ok(true);
        };
        let len = frame.remaining();
        if len == 0 {
            continue;
        }
        let mut out = ChunkHead::new(len)
            .chain(frame)
            .chain(Bytes::from_static(b"\r\n"));
        // A list's frame is a batch of objects: hundreds of segments.
        write_buf::<BODY_IOV>(io, &mut out).await?;
    }
}

/// `Date` as HTTP writes it (IMF-fixdate): `Tue, 15 Nov 1994 08:12:31 GMT`.
pub(super) fn http_date(t: std::time::SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = crate::codec::civil::civil_from_days(days);
    format!(
        "{}, {d:02} {} {y} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1).clamp(0, 11) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// An IO that first yields bytes already read, then reads from the socket.
pub struct Rewind<I> {
    prefix: Bytes,
    io: I,
}

impl<I> Rewind<I> {
    /// `io` with `prefix` put back in front of what it reads.
    pub fn new(prefix: Bytes, io: I) -> Self {
        Rewind { prefix, io }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Rewind<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(out.remaining());
            out.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, out)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Rewind<I> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, b)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Option<Head> {
        parse(text.as_bytes())
    }

    /// The size of the future a three-argument async function returns.
    fn future_size<F, A, B, C, R>(_: &F) -> usize
    where
        F: Fn(A, B, C) -> R,
    {
        std::mem::size_of::<R>()
    }

    /// The size of the future a four-argument async function returns.
    fn future_size4<F, A, B, C, D, R>(_: &F) -> usize
    where
        F: Fn(A, B, C, D) -> R,
    {
        std::mem::size_of::<R>()
    }

    /// An idle HTTP/1.1 watch holds its connection's loop and its writer for as long as it
    /// lasts: both stay small because what is large and passing (a request's handling,
    /// hyper's connections, another kind of response, a write's slices) is boxed or kept
    /// on the stack apart. Inlined, the loop was 1 200 bytes and its task 19 900.
    #[test]
    fn an_idle_watch_holds_small_futures() {
        let serve = future_size4(&serve);
        let writer = future_size(&super::super::direct::stream);
        assert!(serve <= 768, "the connection's loop is {serve} bytes");
        assert!(writer <= 768, "a watch's writer is {writer} bytes");
    }

    #[test]
    fn gets_are_served_here_and_the_rest_goes_to_hyper() {
        let text =
            "GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\nGET";
        let Some(Head::Request(r, len)) = head(text) else {
            panic!("a GET is served here");
        };
        assert_eq!(r.uri().path(), "/api/v1/pods");
        assert_eq!(r.uri().query(), Some("watch=1"));
        assert_eq!(r.headers()["accept"], "application/json");
        assert_eq!(
            len,
            text.len() - "GET".len(),
            "the pipelined bytes are left"
        );
        assert!(
            head("GET /api HTTP/1.1\r\nHost: x\r\n").is_none(),
            "incomplete"
        );
        for other in [
            "POST /api/v1/pods HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
            "GET /api HTTP/1.0\r\n\r\n",
            "GET /api HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET /api HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
            "GET /api HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            "GET /api HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            "BAD REQUEST LINE\r\n\r\n",
        ] {
            assert!(matches!(head(other), Some(Head::Hyper)), "{other:?}");
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: y\r\n")).collect();
        let text = format!("GET /api HTTP/1.1\r\n{many}\r\n");
        assert!(matches!(head(&text), Some(Head::Hyper)));
    }

    #[test]
    fn connection_close_is_seen_among_other_tokens() {
        let mut h = HeaderMap::new();
        assert!(!wants_close(&h));
        h.append(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Close"),
        );
        assert!(wants_close(&h));
    }

    #[test]
    fn dates_are_imf_fixdate() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(784_887_151);
        assert_eq!(http_date(t), "Tue, 15 Nov 1994 08:12:31 GMT");
        assert_eq!(
            http_date(std::time::UNIX_EPOCH),
            "Thu, 01 Jan 1970 00:00:00 GMT"
        );
    }

    #[tokio::test]
    async fn rewind_reads_the_prefix_first() {
        use tokio::io::AsyncWriteExt as _;
        let (a, mut b) = tokio::io::duplex(64);
        b.write_all(b" world").await.unwrap();
        drop(b);
        let mut r = Rewind::new(Bytes::from_static(b"hello"), a);
        let mut s = String::new();
        r.read_to_string(&mut s).await.unwrap();
        assert_eq!(s, "hello world");
    }
}
