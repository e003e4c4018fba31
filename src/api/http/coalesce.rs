//! HTTP/2 writes gathered per connection poll: the frames of every stream a poll of the
//! connection produced leave in one `writev`.
//!
//! The `h2` crate writes each DATA frame of 256 bytes or more as a frame of its own and
//! flushes the socket before it queues the next one, so 100 watch streams on one
//! connection, each given the same event, cost 100 `writev`s: as many syscalls as 100
//! HTTP/1.1 connections. [`Coalesced`] sits between `h2` and the socket (above TLS,
//! so TLS records are large too): writes are copied into a buffer (a memcpy of about a
//! kilobyte per frame, against a syscall and a receiver wake-up) and `poll_flush` returns
//! at once; [`FlushAfterPoll`], which drives the connection, writes the buffer to the
//! socket after each poll of the connection, when every stream that was ready has put
//! its frame in. The buffer is bounded ([`crate::config::HTTP2_WRITE_BUFFER`]): past it a
//! write first pushes the buffer to the socket, and waits when the socket is full, so a
//! connection whose peer stops reading holds at most that much here.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

struct Shared<I> {
    io: I,
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    sent: usize,
    limit: usize,
}

impl<I: AsyncWrite + Unpin> Shared<I> {
    fn pending(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// Writes the buffer to the socket until it is empty, or the socket is full.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
            metrics::counter!("watchd_http2_socket_writes_total").increment(1);
        }
        self.buf.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Makes room for `len` more bytes: drains first when they would pass the limit.
    fn reserve(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<()>> {
        if self.pending() > 0 && self.pending() + len > self.limit {
            ready!(self.drain(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

/// The connection's side of the socket: reads pass through, writes are gathered.
pub struct Coalesced<I> {
    shared: Arc<Mutex<Shared<I>>>,
}

/// The driver's side: writes what was gathered.
pub struct Flusher<I> {
    shared: Arc<Mutex<Shared<I>>>,
}

/// Splits `io` into the connection's side and the driver's side, gathering up to `limit`
/// bytes between writes to the socket.
pub fn coalesced<I>(io: I, limit: usize) -> (Coalesced<I>, Flusher<I>) {
    let shared = Arc::new(Mutex::new(Shared {
        io,
        buf: Vec::new(),
        sent: 0,
        limit,
    }));
    (
        Coalesced {
            shared: shared.clone(),
        },
        Flusher { shared },
    )
}

fn lock<I>(m: &Mutex<Shared<I>>) -> MutexGuard<'_, Shared<I>> {
    // Only the connection's task takes it: never contended, and no panic holds it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<I: AsyncWrite + Unpin> Flusher<I> {
    /// Whether anything gathered waits to be written.
    pub fn has_pending(&self) -> bool {
        lock(&self.shared).pending() > 0
    }

    /// Writes everything gathered; Pending (with the task registered) while the socket is
    /// full.
    pub fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = lock(&self.shared);
        ready!(s.drain(cx))?;
        Pin::new(&mut s.io).poll_flush(cx)
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Coalesced<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut lock(&self.shared).io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Coalesced<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut s = lock(&self.shared);
        ready!(s.reserve(cx, data.len()))?;
        s.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        let mut s = lock(&self.shared);
        ready!(s.reserve(cx, len))?;
        for b in bufs {
            s.buf.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Deferred to the driver, which writes after the connection's poll.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = lock(&self.shared);
        ready!(s.drain(cx))?;
        Pin::new(&mut s.io).poll_shutdown(cx)
    }
}

/// Drives a connection future, writing what it gathered after its polls.
///
/// A poll that gathered something does not write it at once: the task puts itself at
/// the back of the run queue and writes on its next poll. A stream written by a task of
/// its own (a list; a watch its task steps) wakes the connection when it has data; tokio
/// runs the task woken last next (its LIFO slot), so without the yield the connection
/// would run after every single stream and write one frame at a time. Yielding once lets
/// every stream woken by the same event put its frame in first, at the cost of one trip
/// through the run queue. (Watches the dispatch pass steps are all in before the pass
/// wakes the connection; writing at once after such a wake measured no cheaper.)
pub struct FlushAfterPoll<F, I> {
    conn: Pin<Box<F>>,
    flusher: Flusher<I>,
    yielded: bool,
}

impl<F, I> FlushAfterPoll<F, I> {
    /// Drives `conn`, whose socket is the other side of `flusher`.
    pub fn new(conn: F, flusher: Flusher<I>) -> Self {
        FlushAfterPoll {
            conn: Box::pin(conn),
            flusher,
            yielded: false,
        }
    }
}

/// The error of a driven connection: its own, or the socket's.
pub type ConnError = Box<dyn std::error::Error + Send + Sync>;

impl<F, I, T, E> Future for FlushAfterPoll<F, I>
where
    F: Future<Output = Result<T, E>>,
    E: Into<ConnError>,
    I: AsyncWrite + Unpin,
{
    type Output = Result<T, ConnError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let result = this.conn.as_mut().poll(cx).map_err(Into::into);
        if result.is_pending() && !this.yielded && this.flusher.has_pending() {
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.yielded = false;
        // Pending: the socket is full and this task is woken when it drains.
        if let Poll::Ready(Err(e)) = this.flusher.poll_flush(cx) {
            return Poll::Ready(Err(e.into()));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn writes_wait_for_the_flusher_and_leave_in_one_piece() {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let (mut conn, flusher) = coalesced(a, 1 << 16);
        conn.write_all(b"one ").await.unwrap();
        conn.write_all(b"two ").await.unwrap();
        conn.flush().await.unwrap();
        // Nothing reached the peer: flushing is the driver's.
        let mut got = [0u8; 16];
        let early = tokio::time::timeout(std::time::Duration::from_millis(50), b.read(&mut got));
        assert!(early.await.is_err());
        std::future::poll_fn(|cx| flusher.poll_flush(cx))
            .await
            .unwrap();
        let n = b.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"one two ");
    }

    #[tokio::test]
    async fn a_full_buffer_is_pushed_out_and_a_full_socket_holds_the_writer() {
        // The peer reads nothing and the pipe holds 8 bytes: the buffer (limit 8) fills,
        // then writes wait.
        let (a, mut b) = tokio::io::duplex(8);
        let (mut conn, flusher) = coalesced(a, 8);
        conn.write_all(b"12345678").await.unwrap();
        conn.write_all(b"abcdefgh").await.unwrap(); // pushed the first 8 into the pipe
        let blocked =
            tokio::time::timeout(std::time::Duration::from_millis(50), conn.write_all(b"X"));
        assert!(blocked.await.is_err(), "the writer waits for the socket");
        let mut got = vec![0u8; 8];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"12345678");
        std::future::poll_fn(|cx| flusher.poll_flush(cx))
            .await
            .unwrap();
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"abcdefgh");
    }

    #[tokio::test]
    async fn the_driver_writes_after_each_poll_of_the_connection() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let (mut conn, flusher) = coalesced(a, 1 << 16);
        let work = async move {
            for i in 0..3 {
                conn.write_all(format!("frame{i};").as_bytes()).await?;
            }
            Ok::<_, io::Error>(())
        };
        FlushAfterPoll::new(work, flusher).await.unwrap();
        let mut got = vec![0u8; 21];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"frame0;frame1;frame2;");
    }
}
