//! The floor's receiver: a separate process (the load generator itself,
//! started with the hidden `floor-receiver` subcommand) that connects N
//! sockets to the sender and drains them all with one epoll loop, so the
//! sender's writes pay the real loopback cost: the receiver's TCP path and
//! its wake-up, on another process's account.
//!
//! It speaks to its parent in lines on stdout: `ready` once every socket is
//! connected, `progress <deliveries> <bytes>` about once a second, and
//! `result <json>` ([`ReceiverReport`]) when every socket has reached its end
//! (or `error <why>`). Each event's first 8 bytes are its send stamp (unix
//! ns, little-endian); the delivery latency is the receive time minus it.
//! It exits on its own when its parent goes away or after `max_seconds`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::s1::event::{latency_us, now_unix_nanos};
use crate::s1::report::Latency;
use crate::stats::Histogram;

/// Settings of the receiver process.
#[derive(Clone, Debug)]
pub struct ReceiverArgs {
    /// The sender's listening address.
    pub connect: SocketAddr,
    /// Sockets to connect.
    pub sockets: usize,
    /// Bytes of one event.
    pub payload_bytes: usize,
    /// Give up after this long.
    pub max_seconds: f64,
}

/// What the receiver got.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReceiverReport {
    /// Sockets connected.
    pub sockets: usize,
    /// Whole events received.
    pub deliveries: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Delivery latency (receive time − send stamp).
    pub latency_ms: Latency,
}

/// Splits one socket's byte stream into fixed-size events and reads each
/// event's stamp, whatever the reads' boundaries.
#[derive(Clone, Debug)]
pub struct Deframer {
    payload_bytes: usize,
    pos: usize,
    stamp: [u8; 8],
}

impl Deframer {
    /// For events of `payload_bytes` (at least 8: the stamp).
    pub fn new(payload_bytes: usize) -> Self {
        Self {
            payload_bytes: payload_bytes.max(8),
            pos: 0,
            stamp: [0; 8],
        }
    }

    /// Consumes `data`, calling `on_stamp` with each event's stamp as soon as
    /// its 8 bytes are in; returns the events completed.
    pub fn feed(&mut self, mut data: &[u8], mut on_stamp: impl FnMut(u64)) -> u64 {
        let mut completed = 0;
        while !data.is_empty() {
            if self.pos < 8 {
                let take = (8 - self.pos).min(data.len());
                self.stamp[self.pos..self.pos + take].copy_from_slice(&data[..take]);
                self.pos += take;
                data = &data[take..];
                if self.pos == 8 {
                    on_stamp(u64::from_le_bytes(self.stamp));
                }
            } else {
                let take = (self.payload_bytes - self.pos).min(data.len());
                self.pos += take;
                data = &data[take..];
            }
            if self.pos == self.payload_bytes {
                self.pos = 0;
                completed += 1;
            }
        }
        completed
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// One epoll instance, closed on drop.
struct Epoll(i32);

impl Epoll {
    fn new() -> Result<Self, String> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "epoll_create1: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Self(fd))
    }

    fn ctl(&self, op: i32, fd: i32, token: u64) -> Result<(), String> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` outlives the call; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.0, op, fd, &mut ev) } != 0 {
            return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Ready tokens into `events`, waiting at most `timeout_ms`.
    fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> Result<usize, String> {
        // SAFETY: `events` is valid for its length, which bounds the count.
        let n = unsafe {
            libc::epoll_wait(self.0, events.as_mut_ptr(), events.len() as i32, timeout_ms)
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(format!("epoll_wait: {e}"));
        }
        Ok(n as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: the fd is ours and closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Runs the receiver: connects, drains, reports on stdout. `Err` after
/// printing `error <why>`.
pub fn run(args: &ReceiverArgs) -> Result<(), String> {
    let r = drain(args);
    match &r {
        Ok(report) => say(&format!(
            "result {}",
            serde_json::to_string(report).map_err(|e| e.to_string())?
        )),
        Err(e) => say(&format!("error {e}")),
    }
    r.map(|_| ())
}

fn drain(args: &ReceiverArgs) -> Result<ReceiverReport, String> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.max_seconds.clamp(1.0, 7200.0));
    // SAFETY: getppid cannot fail.
    let parent = unsafe { libc::getppid() };
    let ep = Epoll::new()?;
    let mut socks: Vec<Option<TcpStream>> = Vec::with_capacity(args.sockets);
    for i in 0..args.sockets {
        let s = TcpStream::connect(args.connect)
            .map_err(|e| format!("connect socket {i} to {}: {e}", args.connect))?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        ep.ctl(libc::EPOLL_CTL_ADD, s.as_raw_fd(), i as u64)?;
        socks.push(Some(s));
    }
    say("ready");
    let mut frames: Vec<Deframer> = (0..args.sockets)
        .map(|_| Deframer::new(args.payload_bytes))
        .collect();
    let latency = Histogram::new();
    let mut report = ReceiverReport {
        sockets: args.sockets,
        ..ReceiverReport::default()
    };
    let mut open = args.sockets;
    let mut buf = vec![0u8; 1 << 16];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut last_progress = Instant::now();
    while open > 0 {
        if Instant::now() >= deadline {
            return Err(format!(
                "{open} sockets still open after {:?}",
                args.max_seconds
            ));
        }
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != parent {
            return Err("the sender went away".into());
        }
        let ready = ep.wait(&mut events, 200)?;
        for ev in &events[..ready] {
            let idx = ev.u64 as usize;
            let Some(s) = socks.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            let mut eof = false;
            // Read until a short read: level-triggered epoll reports the
            // socket again if more came in meanwhile.
            loop {
                match s.read(&mut buf) {
                    Ok(0) => {
                        ep.ctl(libc::EPOLL_CTL_DEL, s.as_raw_fd(), 0)?;
                        eof = true;
                        break;
                    }
                    Ok(n) => {
                        let now = now_unix_nanos();
                        report.bytes += n as u64;
                        report.deliveries += frames[idx].feed(&buf[..n], |sent| {
                            latency.record(latency_us(sent, now));
                        });
                        if n < buf.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("read socket {idx}: {e}")),
                }
            }
            if eof {
                socks[idx] = None;
                open -= 1;
            }
        }
        if last_progress.elapsed() >= Duration::from_secs(1) {
            last_progress = Instant::now();
            say(&format!("progress {} {}", report.deliveries, report.bytes));
        }
    }
    report.latency_ms = Latency::from_histogram(&latency);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(stamps: &[u64], size: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for s in stamps {
            let mut e = vec![b'x'; size];
            e[..8].copy_from_slice(&s.to_le_bytes());
            v.extend(e);
        }
        v
    }

    #[test]
    fn deframer_counts_events_and_stamps_across_any_split() {
        let data = events(&[11, 22, 33, 44], 20);
        for cut in 0..data.len() {
            for cut2 in cut..data.len() {
                let mut d = Deframer::new(20);
                let mut stamps = Vec::new();
                let mut n = 0;
                for part in [&data[..cut], &data[cut..cut2], &data[cut2..]] {
                    n += d.feed(part, |s| stamps.push(s));
                }
                assert_eq!(n, 4, "cuts {cut} {cut2}");
                assert_eq!(stamps, [11, 22, 33, 44], "cuts {cut} {cut2}");
            }
        }
        // Byte at a time, and a partial event left over.
        let mut d = Deframer::new(20);
        let mut stamps = Vec::new();
        let n: u64 = data[..70]
            .iter()
            .map(|b| d.feed(std::slice::from_ref(b), |s| stamps.push(s)))
            .sum();
        assert_eq!((n, stamps.as_slice()), (3, &[11, 22, 33, 44][..]));
        assert_eq!(d.feed(&data[70..], |_| {}), 1);
    }

    #[test]
    fn deframer_of_tiny_events_still_reads_a_whole_stamp() {
        let mut d = Deframer::new(3);
        let data = events(&[5, 6], 8);
        let mut got = Vec::new();
        assert_eq!(d.feed(&data, |s| got.push(s)), 2);
        assert_eq!(got, [5, 6]);
    }
}
