//! A watch over plain HTTP/1.1 written from its wake-up: the thread that applied an
//! event (ingestion) steps each woken watch and writes its frame to the socket with one
//! non-blocking `writev`, without waking the connection's task.
//!
//! Why: through the task, every delivery costs a task wake-up, a trip through the run
//! queue (often a futex wake of the other worker) and the poll of the connection. Here a
//! delivery is what the loopback floor does — one `writev` per socket — plus stepping
//! the session: one pass over the woken watchers per applied etcd response.
//!
//! The task stays for everything that waits: it writes the response head and the
//! initial events, anything a direct write left (a full socket: the rest of the frame
//! becomes its backlog, written with the write timeout), bookmarks and the deadline
//! (its timer), and it watches the socket for the peer closing. Who writes is decided
//! under the state's lock: the waker only ever `try_lock`s it, so ingestion never
//! waits on a connection, and a wake that finds it taken is remembered ([`Direct::missed`])
//! for the task to step again. The socket is written by its raw descriptor only while
//! the state holds the watch; the task takes the watch out (and so ends direct writes)
//! before the socket can be closed, whichever way the connection ends.

use std::future::Future;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Wake, Waker};

use bytes::{Buf, Bytes, BytesMut};
use tokio::time::Instant;

use super::body::BufList;
use super::socket::{peer_still_open, write_buf, ChunkHead, FRAME_IOV};
use super::write_deadline::WriteDeadline;
use crate::api::watch::{Step, SteppedWatch};

type Io = WriteDeadline<tokio::net::TcpStream>;

/// What the waker and the task share.
struct State {
    /// The watch; None once the task ended it (then nobody writes the descriptor).
    watch: Option<Box<dyn SteppedWatch<BufList>>>,
    /// Set while the task writes: the waker leaves the socket alone.
    task_writes: bool,
    /// What a direct write left unwritten, for the task.
    backlog: Option<BufList>,
    /// The watch ended on a direct step: the task finishes the response.
    ended: bool,
    /// A direct write failed: the task ends the connection with this.
    failed: Option<io::Error>,
    /// The task, woken to take over.
    task: Option<Waker>,
    /// When the sleeping task's timer fires.
    sleeps_until: Option<Instant>,
    /// A direct step wants the task's timer sooner.
    rearm: bool,
}

impl State {
    /// Whether the task has work the waker left it.
    fn needs_task(&self) -> bool {
        self.backlog.is_some() || self.ended || self.failed.is_some() || self.rearm
    }
}

/// A watch written from its wake-up; its `Waker` is what the watch arms.
pub struct Direct {
    state: Mutex<State>,
    fd: RawFd,
    /// A wake found the state taken: the task steps again before it sleeps.
    missed: AtomicBool,
}

impl Direct {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Steps the watch and writes its frame, if the socket is ours; otherwise leaves
    /// the work to the task. A wake that finds the state taken (by the task, or by a
    /// wake on another dispatch thread) sets `missed` first; whoever holds the state
    /// looks at it after letting go, so no wake is lost.
    fn wake_inline(self: &Arc<Self>) {
        run_or_hand_over(&self.state, &self.missed, |st| self.step_and_write(st));
    }

    fn step_and_write(self: &Arc<Self>, st: &mut State) {
        if st.task_writes || st.needs_task() {
            return;
        }
        let waker = Waker::from(self.clone());
        let Some(watch) = st.watch.as_mut() else {
            return;
        };
        match watch.step(&waker) {
            // Sooner than the task's timer (a batch window began): it re-arms.
            Step::Idle(at) if st.sleeps_until.is_some_and(|t| at < t) => {
                st.rearm = true;
                wake_task(st);
            }
            Step::Idle(_) => {}
            Step::Frame(frame) if frame.remaining() == 0 => {}
            Step::Frame(frame) => match write_now(self.fd, frame) {
                Ok(None) => {}
                Ok(Some(rest)) => {
                    st.backlog = Some(rest);
                    wake_task(st);
                }
                Err(e) => {
                    st.failed = Some(e);
                    wake_task(st);
                }
            },
            Step::End => {
                st.ended = true;
                wake_task(st);
            }
        }
    }
}

/// Runs `f` on `state` unless someone holds it (a waker never waits): the wake is
/// remembered in `missed` before trying, and whoever holds the state looks at `missed`
/// after letting go and runs `f` again, so no wake is lost.
pub(super) fn run_or_hand_over<S>(
    state: &Mutex<S>,
    missed: &AtomicBool,
    mut f: impl FnMut(&mut S),
) {
    loop {
        missed.store(true, Ordering::SeqCst);
        let Ok(mut st) = state.try_lock() else {
            return;
        };
        missed.store(false, Ordering::SeqCst);
        f(&mut st);
        drop(st);
        if !missed.load(Ordering::SeqCst) {
            return;
        }
    }
}

fn wake_task(st: &mut State) {
    if let Some(t) = st.task.take() {
        t.wake();
    }
}

impl Wake for Direct {
    fn wake(self: Arc<Self>) {
        self.wake_inline();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_inline();
    }
}

/// Writes chunk head, frame and CRLF with non-blocking `writev`s until done or the
/// socket is full; Some(the rest) when it is.
fn write_now(fd: RawFd, frame: BufList) -> io::Result<Option<BufList>> {
    // A frame of one shared event is already a chunk: one buffer, one `write`.
    if let Some(chunk) = frame.chunked() {
        return write_rest(fd, chunk.clone());
    }
    let mut out = ChunkHead::new(frame.remaining())
        .chain(frame)
        .chain(Bytes::from_static(b"\r\n"));
    while out.has_remaining() {
        let mut slices = [IoSlice::new(&[]); FRAME_IOV];
        let count = out.chunks_vectored(&mut slices);
        // SAFETY: `fd` is the connection's socket, open while the state holds the watch
        // (the caller holds the state's lock and saw the watch); the slices borrow `out`.
        let n = unsafe { libc::writev(fd, slices.as_ptr().cast(), count as libc::c_int) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => break,
                _ => return Err(e),
            }
        }
        out.advance(n as usize);
    }
    if !out.has_remaining() {
        return Ok(None);
    }
    // The socket is full: the rest goes to the task, the frame's segments as they are
    // (shared), the few bytes of the size line copied.
    let (head_and_frame, crlf) = out.into_inner();
    let (head, frame) = head_and_frame.into_inner();
    let mut rest = BufList::from(Bytes::copy_from_slice(head.chunk()));
    for segment in frame.into_segments() {
        rest.push(segment);
    }
    rest.push(crlf);
    Ok(Some(rest))
}

/// [`write_now`] of one buffer.
fn write_rest(fd: RawFd, mut chunk: Bytes) -> io::Result<Option<BufList>> {
    while !chunk.is_empty() {
        // SAFETY: as in `write_now`; the pointer and length are `chunk`'s.
        let n = unsafe { libc::write(fd, chunk.as_ptr().cast(), chunk.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(Some(BufList::from(chunk))),
                _ => return Err(e),
            }
        }
        chunk.advance(n as usize);
    }
    Ok(None)
}

/// Ends direct writes whichever way the task leaves (done, error, or dropped at
/// shutdown): the watch is taken out under the lock before the socket can close.
struct EndGuard(Arc<Direct>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        let watch = self.0.lock().watch.take();
        // Dropped outside the lock: leaving the wake index takes its set's lock.
        drop(watch);
    }
}

/// What the task does next.
enum Next {
    /// Write this frame as a chunk (outside the lock, the socket being the task's
    /// meanwhile).
    Write(BufList),
    /// Write these bytes as they are: the rest of a chunk a direct write began.
    WriteRaw(BufList),
    /// Sleep until woken, the instant given, or the socket turns readable.
    Sleep(Instant),
    /// The watch ended: write the last chunk.
    End,
}

/// Streams `watch` as chunks, written from its wake-ups, until it ends (then the last
/// chunk: Ok(true)) or the connection fails or the peer closes (Ok(false) or Err).
pub async fn stream(
    io: &mut Io,
    buf: &mut BytesMut,
    watch: Box<dyn SteppedWatch<BufList>>,
) -> io::Result<bool> {
    if buf.is_empty() {
        *buf = BytesMut::new();
    }
    let direct = Arc::new(Direct {
        state: Mutex::new(State {
            watch: Some(watch),
            task_writes: true,
            backlog: None,
            ended: false,
            failed: None,
            task: None,
            sleeps_until: None,
            rearm: false,
        }),
        fd: io.get_ref().as_raw_fd(),
        missed: AtomicBool::new(false),
    });
    let _end = EndGuard(direct.clone());
    let waker = Waker::from(direct.clone());
    let mut timer = Box::pin(tokio::time::sleep_until(Instant::now()));
    loop {
        let next = {
            let mut st = direct.lock();
            st.task_writes = true;
            st.rearm = false;
            if let Some(e) = st.failed.take() {
                return Err(e);
            }
            match st.backlog.take() {
                Some(rest) => Next::WriteRaw(rest),
                None => match st.watch.as_mut().map(|w| w.step(&waker)) {
                    Some(Step::Frame(f)) => Next::Write(f),
                    Some(Step::Idle(at)) => {
                        st.task_writes = false;
                        st.sleeps_until = Some(at);
                        Next::Sleep(at)
                    }
                    Some(Step::End) | None => Next::End,
                },
            }
        };
        match next {
            Next::Write(frame) if frame.remaining() == 0 => {}
            Next::Write(frame) => match frame.chunked().cloned() {
                Some(mut chunk) => write_buf::<1>(io, &mut chunk).await?,
                None => {
                    let mut out = ChunkHead::new(frame.remaining())
                        .chain(frame)
                        .chain(Bytes::from_static(b"\r\n"));
                    write_buf::<FRAME_IOV>(io, &mut out).await?;
                }
            },
            Next::WriteRaw(mut bytes) => write_buf::<FRAME_IOV>(io, &mut bytes).await?,
            Next::End => {
                drop(_end);
                write_buf::<1>(io, &mut Bytes::from_static(b"0\r\n\r\n")).await?;
                return Ok(true);
            }
            Next::Sleep(at) => {
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                if !wait(io, buf, &direct, timer.as_mut()).await? {
                    return Ok(false);
                }
            }
        }
    }
}

/// Waits until the waker hands over, a wake was missed, the timer fires, or the socket
/// turns readable; false when the peer closed.
async fn wait(
    io: &Io,
    buf: &mut BytesMut,
    direct: &Direct,
    mut timer: std::pin::Pin<&mut tokio::time::Sleep>,
) -> io::Result<bool> {
    loop {
        let readable = std::future::poll_fn(|cx| {
            {
                let mut st = direct.lock();
                if st.needs_task() {
                    return Poll::Ready(Ok(false));
                }
                st.task = Some(cx.waker().clone());
            }
            // Checked after the lock is let go: a wake that found it taken set the flag
            // before trying.
            if direct.missed.swap(false, Ordering::SeqCst) {
                return Poll::Ready(Ok(false));
            }
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(false));
            }
            match io.get_ref().poll_read_ready(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(true)),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await?;
        if !readable {
            return Ok(true);
        }
        if !peer_still_open(io.get_ref(), buf)? {
            return Ok(false);
        }
    }
}
