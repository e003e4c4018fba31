//! HTTP/2 connections, served on the `h2` crate (hyper's HTTP/2 underneath) without
//! hyper's server, so that a watch stream can be written by the dispatch pass that wakes
//! it ([`super::h2_watch`]) instead of by a task of its own. Both APIs are served here:
//! the HTTP API's h2c and ALPN h2 connections, and the gRPC API's, each a [`Service`].
//!
//! The connection's task drives `h2` (reading frames, accepting streams, writing what the
//! streams queued) through [`coalesce`], so everything a poll queued leaves in one write,
//! and it is woken through [`AtPassEnd`], so a pass that queues frames on many of its
//! streams wakes it once, at the end. Each request is served on a task of its own, as
//! hyper does: the handler, then the response: a complete body is queued whole, a
//! streamed body (a list) frame by frame as the stream has capacity, a watch by
//! [`super::h2_watch`], any other body (gRPC's, with trailers) frame by frame. Settings
//! are hyper's defaults except where `config` says.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use futures_util::StreamExt;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{header, HeaderMap, HeaderValue, Request, Response};
use http_body::Body as _;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::io::{AsyncRead, AsyncWrite};

use super::body::{Body, BufList};
use super::coalesce::{self, ConnError, FlushAfterPoll};
use super::conn::Connection;
use super::{handle, ApiState};
use crate::api::watch::AtPassEnd;
use crate::api::watch::SteppedWatch;
use crate::client::upstream::StreamBody;

/// hyper's defaults for a server's windows and frames.
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 1024 * 1024;
const MAX_FRAME_SIZE: u32 = 16 * 1024;
/// Streams the peer reset with an error before the connection is closed (hyper's).
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// What answers the requests of a connection.
pub(crate) trait Service: Send + Sync + 'static {
    /// The response to `req`, which came on `conn`.
    fn answer<'a>(
        &'a self,
        req: Request<RequestBody>,
        conn: &'a Arc<Connection>,
    ) -> impl Future<Output = Response<Reply>> + Send + 'a;
}

/// A response's body as a connection sends it.
pub(crate) enum Reply {
    /// The HTTP API's bodies.
    Body(Body),
    /// Any other body: its frames as it gives them, then its trailers.
    Trailed(UnsyncBoxBody<Bytes, BoxError>),
    /// A watch written by the pass ([`super::h2_watch`]), its stream ended by the trailers
    /// `end` gives once it ended.
    Watch(Box<dyn SteppedWatch<BufList>>, EndTrailers),
}

/// The trailers that end a watch's stream, asked for when it ends.
pub(crate) type EndTrailers = Box<dyn FnOnce() -> HeaderMap + Send>;

/// An error of a body.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Service for ApiState {
    async fn answer(&self, req: Request<RequestBody>, conn: &Arc<Connection>) -> Response<Reply> {
        handle(self, req, conn).await.map(Reply::Body)
    }
}

/// How a connection is served: its streams at most, and what tells it to close
/// gracefully (a GOAWAY, then the streams it has until they end), if anything does.
pub(crate) struct Settings {
    pub max_streams: u32,
    pub drain: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// Serves an HTTP/2 connection (its preface not yet read) until it closes.
pub(crate) async fn serve<I, S: Service>(
    io: I,
    service: Arc<S>,
    conn: Connection,
    settings: Settings,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let peer = conn.peer;
    let (io, flusher) = coalesce::coalesced(io, crate::config::HTTP2_WRITE_BUFFER);
    let served = FlushAfterPoll::new(drive(io, service, Arc::new(conn), settings), flusher);
    if let Err(e) = WokenAtPassEnd::new(served).await {
        tracing::debug!(error = %e, %peer, "connection ended with an error");
    }
}

/// Polls a connection with a waker that a dispatch pass holds until it ends.
struct WokenAtPassEnd<F> {
    inner: Pin<Box<F>>,
    deferred: Arc<AtPassEnd>,
    waker: Waker,
}

impl<F> WokenAtPassEnd<F> {
    fn new(inner: F) -> Self {
        let deferred = AtPassEnd::new();
        WokenAtPassEnd {
            inner: Box::pin(inner),
            waker: Waker::from(deferred.clone()),
            deferred,
        }
    }
}

impl<F: Future> Future for WokenAtPassEnd<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.deferred.register(cx.waker());
        this.inner
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker))
    }
}

/// The connection: the handshake, then streams accepted until the peer or an error ends
/// it (or, once told to drain, until its streams end), with keep-alive pings.
async fn drive<I, S: Service>(
    io: coalesce::Coalesced<I>,
    service: Arc<S>,
    conn: Arc<Connection>,
    settings: Settings,
) -> Result<(), ConnError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut h2 = h2::server::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME_SIZE)
        .max_header_list_size(crate::config::MAX_REQUEST_HEAD as u32)
        .max_concurrent_streams(settings.max_streams)
        .max_send_buffer_size(crate::config::HTTP2_STREAM_SEND_BUFFER)
        .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
        .handshake::<_, BufList>(io)
        .await?;
    let mut pings = h2.ping_pong();
    let keep_alive = keep_alive(pings.as_mut());
    tokio::pin!(keep_alive);
    let mut drain = settings.drain;
    loop {
        tokio::select! {
            _ = async { drain.as_mut().expect("guarded").await }, if drain.is_some() => {
                // Told or not (the server gone): no new streams, the open ones go on.
                drain = None;
                h2.graceful_shutdown();
            }
            accepted = h2.accept() => match accepted {
                Some(Ok((req, respond))) => {
                    let service = service.clone();
                    let conn = conn.clone();
                    tokio::spawn(serve_stream(Box::pin(answer(req, respond, service, conn))));
                }
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(()),
            },
            () = &mut keep_alive => {
                tracing::debug!(peer = %conn.peer, "HTTP/2 keep-alive ping unanswered, closing");
                h2.abrupt_shutdown(h2::Reason::NO_ERROR);
                // The GOAWAY is written by polling the connection until it closes.
                let _ = tokio::time::timeout(
                    crate::config::HTTP2_PING_TIMEOUT,
                    std::future::poll_fn(|cx| h2.poll_closed(cx)),
                )
                .await;
                return Ok(());
            }
        }
    }
}

/// Pings the peer every [`crate::config::HTTP2_PING_INTERVAL`]; returns when a ping is
/// not answered within [`crate::config::HTTP2_PING_TIMEOUT`] (never without pings).
async fn keep_alive(pings: Option<&mut h2::PingPong>) {
    let Some(pings) = pings else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(crate::config::HTTP2_PING_INTERVAL).await;
        if pings.send_ping(h2::Ping::opaque()).is_err() {
            // The connection is closing; the accept loop sees it.
            return std::future::pending().await;
        }
        let pong = std::future::poll_fn(|cx| pings.poll_pong(cx));
        match tokio::time::timeout(crate::config::HTTP2_PING_TIMEOUT, pong).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return std::future::pending().await,
            Err(_) => return,
        }
    }
}

/// A request's body, as the proxy forwards it: DATA frames as they come, their window
/// given back as they are read, then the trailers.
pub(crate) struct RequestBody {
    recv: RecvStream,
    data_done: bool,
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if !this.data_done {
            match std::task::ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(http_body::Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                None => this.data_done = true,
            }
        }
        match std::task::ready!(this.recv.poll_trailers(cx)) {
            Ok(Some(t)) => Poll::Ready(Some(Ok(http_body::Frame::trailers(t)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e.into()))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }
}

impl super::proxy::ForwardBody for RequestBody {
    fn into_stream_body(self) -> StreamBody {
        http_body_util::BodyExt::boxed_unsync(self)
    }
}

/// Serves one stream: `answering` (the request's handling and the response's head,
/// boxed by the caller: large, and done once the head is sent), then what streams (a
/// watch, a list) in a task of about 200 bytes for as long as the stream lasts.
async fn serve_stream<A: Future<Output = Streaming>>(answering: Pin<Box<A>>) {
    // Its own statement: the answer's future is freed before what streams starts.
    let streaming = answering.await;
    match streaming {
        Streaming::Done => {}
        Streaming::Watch(send, watch, end) => super::h2_watch::stream(send, watch, end).await,
        Streaming::Frames(send, frames) => {
            let frames =
                frames.map(|f| Ok::<_, std::convert::Infallible>(http_body::Frame::data(f)));
            Box::pin(pipe(send, http_body_util::StreamBody::new(frames))).await
        }
        Streaming::Trailed(send, body) => Box::pin(pipe(send, body)).await,
    }
}

/// What a stream sends after its response's head.
enum Streaming {
    /// Nothing more (the response was complete, or the stream is gone).
    Done,
    Watch(
        SendStream<BufList>,
        Box<dyn SteppedWatch<BufList>>,
        Option<EndTrailers>,
    ),
    Frames(
        SendStream<BufList>,
        Pin<Box<dyn futures_util::Stream<Item = BufList> + Send>>,
    ),
    Trailed(SendStream<BufList>, UnsyncBoxBody<Bytes, BoxError>),
}

/// Handles the request (given up if the client resets the stream first) and sends the
/// response's head, and its body when complete.
async fn answer<S: Service>(
    req: Request<RecvStream>,
    mut respond: SendResponse<BufList>,
    service: Arc<S>,
    conn: Arc<Connection>,
) -> Streaming {
    let (parts, recv) = req.into_parts();
    let req = Request::from_parts(
        parts,
        RequestBody {
            recv,
            data_done: false,
        },
    );
    let mut handling = Box::pin(service.answer(req, &conn));
    let response = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = handling.as_mut().poll(cx) {
            return Poll::Ready(Some(r));
        }
        match respond.poll_reset(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    drop(handling);
    let Some(response) = response else {
        return Streaming::Done;
    };
    let (mut head, body) = response.into_parts();
    // HTTP/2 forbids them (RFC 9113, 8.2.2): `h2` would refuse the head.
    super::proxy::strip_hop_by_hop(&mut head.headers, false);
    if !head.headers.contains_key(header::DATE) {
        if let Ok(date) = HeaderValue::from_str(&super::h1::http_date(std::time::SystemTime::now()))
        {
            head.headers.insert(header::DATE, date);
        }
    }
    let body = match body {
        Reply::Body(body) => body,
        Reply::Trailed(body) => {
            // A body that ends at once (a gRPC error: its status in the head) ends the
            // stream with the head.
            let end = body.is_end_stream();
            return match respond.send_response(Response::from_parts(head, ()), end) {
                Ok(send) if !end => Streaming::Trailed(send, body),
                _ => Streaming::Done,
            };
        }
        Reply::Watch(watch, end) => {
            return match respond.send_response(Response::from_parts(head, ()), false) {
                Ok(send) => Streaming::Watch(send, watch, Some(end)),
                Err(_) => Streaming::Done,
            };
        }
    };
    match body {
        Body::Full(list, len) => {
            if !head.headers.contains_key(header::CONTENT_LENGTH) {
                head.headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            }
            let list = list.filter(|l| l.has_remaining());
            let end = list.is_none();
            if let Ok(mut send) = respond.send_response(Response::from_parts(head, ()), end) {
                if let Some(list) = list {
                    // Queued whole: its bytes are already held (shared segments), and
                    // `h2` sends them as the windows open.
                    let _ = send.send_data(list, true);
                }
            }
            Streaming::Done
        }
        Body::Stream(frames) => {
            match respond.send_response(Response::from_parts(head, ()), false) {
                Ok(send) => Streaming::Frames(send, frames),
                Err(_) => Streaming::Done,
            }
        }
        Body::Watch(watch) => match respond.send_response(Response::from_parts(head, ()), false) {
            Ok(send) => Streaming::Watch(send, watch, None),
            Err(_) => Streaming::Done,
        },
    }
}

/// Waits until `send` has capacity; false when the client reset the stream first.
async fn room(send: &mut SendStream<BufList>) -> bool {
    send.reserve_capacity(1);
    std::future::poll_fn(|cx| {
        if send.poll_reset(cx).is_ready() {
            return Poll::Ready(false);
        }
        while send.capacity() == 0 {
            match send.poll_capacity(cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(_) => return Poll::Ready(false),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(true)
    })
    .await
}

/// Sends a body frame by frame, each once the stream has capacity (so a slow reader
/// holds one frame here), until it ends (with its trailers, if it has them, or an empty
/// end), fails (the stream is reset) or the client resets the stream.
async fn pipe<B>(mut send: SendStream<BufList>, body: B)
where
    B: http_body::Body,
    B::Data: Into<BufList>,
    B::Error: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    loop {
        let next = std::future::poll_fn(|cx| {
            if send.poll_reset(cx).is_ready() {
                return Poll::Ready(None);
            }
            body.as_mut().poll_frame(cx).map(Some)
        })
        .await;
        let Some(next) = next else {
            return;
        };
        let frame = match next {
            None => {
                let _ = send.send_data(BufList::new(), true);
                return;
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, "response body failed; resetting the stream");
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                return;
            }
            Some(Ok(frame)) => frame,
        };
        let data: BufList = match frame.into_data() {
            Ok(data) => data.into(),
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    let _ = send.send_trailers(trailers);
                }
                return;
            }
        };
        if data.remaining() == 0 {
            continue;
        }
        if !room(&mut send).await || send.send_data(data, false).is_err() {
            return;
        }
    }
}
