//! The write timeout of a connection: a peer that reads nothing of what is written for
//! `--write-timeout` has its connection closed.
//!
//! A watch whose client stops reading costs nothing while it waits (its cursor stays
//! where it is, its connection is not polled) and holds at most its socket's buffers and
//! one frame; but without a bound it would hold its socket and its session forever. The
//! timer is armed only while a write is blocked, so connections that keep up pay one
//! branch per write and no timer.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// An IO whose writes fail with `TimedOut` once they have been blocked for the timeout.
pub struct WriteDeadline<I> {
    io: I,
    timeout: Duration,
    /// The deadline of the write blocked now, if one is.
    blocked: Option<Pin<Box<Sleep>>>,
}

impl<I> WriteDeadline<I> {
    /// Wraps `io`; a zero `timeout` never fires.
    pub fn new(io: I, timeout: Duration) -> Self {
        WriteDeadline {
            io,
            timeout,
            blocked: None,
        }
    }

    /// The wrapped IO.
    pub fn get_ref(&self) -> &I {
        &self.io
    }

    /// Passes a write's result on: bytes written end a blockage; a blocked write arms
    /// the timer (once per blockage) and fails when it fires. A flush that completes is
    /// not progress (a socket's always does).
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
        progressed: impl FnOnce(&T) -> bool,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending if !self.timeout.is_zero() => {
                let timeout = self.timeout;
                let sleep = self
                    .blocked
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if sleep.as_mut().poll(cx).is_ready() {
                    metrics::counter!("watchd_write_timeouts_total").increment(1);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the peer read nothing for {timeout:?}"),
                    )));
                }
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(v)) => {
                if progressed(&v) {
                    self.blocked = None;
                }
                Poll::Ready(Ok(v))
            }
            err => err,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for WriteDeadline<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.check(cx, r, |n| *n > 0)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.check(cx, r, |n| *n > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.check(cx, r, |_| false)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn a_write_blocked_past_the_timeout_fails_and_progress_resets_it() {
        let (a, mut b) = tokio::io::duplex(4);
        let mut w = WriteDeadline::new(a, Duration::from_secs(10));
        w.write_all(b"1234").await.unwrap();
        // The pipe is full: the next write waits; reading within the timeout lets it go.
        let reader = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(9)).await;
            let mut got = [0u8; 4];
            b.read_exact(&mut got).await.unwrap();
            b
        });
        w.write_all(b"5678").await.unwrap();
        let _b = reader.await.unwrap();
        // Nobody reads now: the write fails after the timeout, counted from its blocking.
        let started = Instant::now();
        let e = w.write_all(b"9").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_timeout_waits_for_ever() {
        let (a, _b) = tokio::io::duplex(1);
        let mut w = WriteDeadline::new(a, Duration::ZERO);
        w.write_all(b"x").await.unwrap();
        let blocked = tokio::time::timeout(Duration::from_secs(3600), w.write_all(b"y"));
        assert!(blocked.await.is_err());
    }
}
