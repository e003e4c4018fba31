//! The floor's sender: one thread, N blocking loopback sockets, a schedule of
//! ticks. Every tick stamps one pre-encoded payload with its send time (one
//! 8-byte store, shared by all sockets); every K ticks the K stamped payloads
//! go to each socket with one `write()` (more only if the kernel takes part
//! of it, which is counted). Nothing else happens per delivery: no encoding,
//! no allocation, no wake-up of another thread — the cheapest fan-out a
//! server could do, which is what the figure measures.
//!
//! The thread's own CPU (user and system separately, `getrusage
//! (RUSAGE_THREAD)`) is read at the first tick and after the last write, so
//! setup and teardown are not counted. When a socket's buffer is full the
//! write blocks (the receiver is behind) and the schedule slips: that is the
//! floor falling behind, reported as schedule lag.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::procstat;
use crate::s1::event::now_unix_nanos;

/// CPU time of the calling thread: (user, system) seconds.
pub fn thread_cpu() -> Option<(f64, f64)> {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct passed.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((secs(ru.ru_utime), secs(ru.ru_stime)))
}

/// What the sender is to do.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Ticks per second (events per socket per second).
    pub rate: f64,
    /// Ticks to run, a multiple of `events_per_write`.
    pub ticks: u64,
    /// Bytes of one event.
    pub payload_bytes: usize,
    /// Events per `write()`.
    pub events_per_write: usize,
    /// Past this time after the first tick the rest of the schedule is
    /// abandoned (the sender fell far behind).
    pub hard_stop: Duration,
    /// The receiver process, whose CPU is read at the same instants.
    pub receiver_pid: Option<u32>,
}

/// What the sender shares while it runs (read by the progress line).
#[derive(Debug, Default)]
pub struct Live {
    /// When the first tick was due.
    pub started: OnceLock<Instant>,
    /// Deliveries written so far.
    pub sent: AtomicU64,
    /// How late the latest tick started, microseconds.
    pub lag_us: AtomicU64,
}

/// What the sender did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Ticks run.
    pub ticks: u64,
    /// Ticks of the plan never run (the hard stop came first).
    pub abandoned_ticks: u64,
    /// Rounds of writes (one write per socket each).
    pub rounds: u64,
    /// `write()` calls made.
    pub syscalls: u64,
    /// Deliveries written (sockets × events, round by round).
    pub deliveries: u64,
    /// Thread CPU in the window: user seconds.
    pub user_s: f64,
    /// Thread CPU in the window: system seconds.
    pub system_s: f64,
    /// First tick to the end of the last write, seconds.
    pub window_s: f64,
    /// How late the last tick started, seconds.
    pub lag_end_s: f64,
    /// The largest lateness of a tick, seconds.
    pub lag_max_s: f64,
    /// The receiver's CPU seconds at the start and end of the window.
    pub receiver_cpu: (Option<f64>, Option<f64>),
    /// The first write error, which ends the run.
    pub error: Option<String>,
}

/// One delivery of `buf` to `s`; counts each `write()` made.
fn write_counted(s: &mut TcpStream, mut buf: &[u8], syscalls: &mut u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        *syscalls += 1;
        match s.write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The payload of one write: `events` events of `payload_bytes` each, filled
/// like a JSON line's bulk; the first 8 bytes of each event are its stamp.
pub fn payload(payload_bytes: usize, events: usize) -> Vec<u8> {
    let mut buf = vec![b'x'; payload_bytes * events];
    for e in 0..events {
        buf[(e + 1) * payload_bytes - 1] = b'\n';
    }
    buf
}

/// Runs `plan` over `streams` on the calling thread; `live` is updated as it
/// goes. The caller closes the streams when it wants the receiver to see
/// the end.
pub fn send(streams: &mut [TcpStream], plan: &Plan, live: &Live) -> Report {
    let k = plan.events_per_write.max(1);
    let mut buf = payload(plan.payload_bytes, k);
    let mut r = Report::default();
    let period = 1.0 / plan.rate;
    let cpu0 = thread_cpu();
    r.receiver_cpu.0 = plan.receiver_pid.and_then(procstat::cpu_seconds);
    let t0 = Instant::now();
    let _ = live.started.set(t0);
    'ticks: for tick in 0..plan.ticks {
        let due = t0 + Duration::from_secs_f64(tick as f64 * period);
        let mut now = Instant::now();
        if now < due {
            std::thread::sleep(due - now);
            now = Instant::now();
        }
        if now.duration_since(t0) > plan.hard_stop {
            r.abandoned_ticks = plan.ticks - tick;
            break;
        }
        let lag = now.saturating_duration_since(due);
        r.lag_end_s = lag.as_secs_f64();
        r.lag_max_s = r.lag_max_s.max(r.lag_end_s);
        live.lag_us.store(lag.as_micros() as u64, Ordering::Relaxed);
        let slot = (tick as usize) % k;
        let at = slot * plan.payload_bytes;
        buf[at..at + 8].copy_from_slice(&now_unix_nanos().to_le_bytes());
        r.ticks += 1;
        if slot + 1 < k {
            continue;
        }
        for (i, s) in streams.iter_mut().enumerate() {
            if let Err(e) = write_counted(s, &buf, &mut r.syscalls) {
                r.error = Some(format!("write to socket {i}: {e}"));
                break 'ticks;
            }
            r.deliveries += k as u64;
        }
        r.rounds += 1;
        live.sent.store(r.deliveries, Ordering::Relaxed);
    }
    r.window_s = t0.elapsed().as_secs_f64();
    r.receiver_cpu.1 = plan.receiver_pid.and_then(procstat::cpu_seconds);
    if let (Some(a), Some(b)) = (cpu0, thread_cpu()) {
        r.user_s = (b.0 - a.0).max(0.0);
        r.system_s = (b.1 - a.1).max(0.0);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn payload_is_events_of_the_given_size() {
        let p = payload(16, 3);
        assert_eq!(p.len(), 48);
        assert_eq!(p.iter().filter(|&&b| b == b'\n').count(), 3);
        assert_eq!(p[15], b'\n');
    }

    #[test]
    fn thread_cpu_grows_with_work() {
        let (u0, s0) = thread_cpu().expect("getrusage");
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let (u1, s1) = thread_cpu().unwrap();
        assert!(u1 + s1 > u0 + s0, "{u0}+{s0} -> {u1}+{s1}");
    }

    #[test]
    fn sends_every_round_to_every_socket_and_counts_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut clients: Vec<TcpStream> =
            (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut streams: Vec<TcpStream> = (0..3).map(|_| l.accept().unwrap().0).collect();
        let plan = Plan {
            rate: 500.0,
            ticks: 10,
            payload_bytes: 32,
            events_per_write: 2,
            hard_stop: Duration::from_secs(5),
            receiver_pid: None,
        };
        let live = Live::default();
        let r = send(&mut streams, &plan, &live);
        assert_eq!((r.ticks, r.rounds, r.abandoned_ticks), (10, 5, 0));
        assert_eq!(r.deliveries, 3 * 10);
        assert_eq!(r.syscalls, 3 * 5, "one write per socket per round");
        assert_eq!(live.sent.load(Ordering::Relaxed), 30);
        assert!(r.error.is_none() && r.window_s >= 0.017, "{r:?}");
        drop(streams);
        for c in &mut clients {
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            assert_eq!(got.len(), 10 * 32);
            let stamp = u64::from_le_bytes(got[32..40].try_into().unwrap());
            assert!(stamp > 1_600_000_000_000_000_000, "stamped: {stamp}");
        }
    }
}
