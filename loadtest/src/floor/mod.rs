//! The loopback floor of watch fan-out: what the cheapest possible server
//! pays per delivery on this machine, measured beside watchd and etcd.
//!
//! N TCP connections on 127.0.0.1; every 1/rate s the sender ([`sender`])
//! writes one pre-encoded payload about the size of a watch event to each
//! connection with one `write()` per delivery (or K events per write); a
//! separate receiver process ([`receiver`], this binary again) drains all
//! sockets with epoll. The figure is the sender thread's own CPU-seconds per
//! million deliveries, user and system separately. It is the Rust form of
//! `shared/tools/fanout-floor.c`, and agrees with it (see
//! `loadtest/README.md`); it also stamps each event, so the receiver
//! measures delivery latency as the S1 watchers do.
//!
//! The sender's sockets count against the open-files limit: when W does not
//! fit ([`crate::fdlimit`]), the floor uses as many sockets as fit and raises
//! the rate per socket so that deliveries per second stay W × rate (the cost
//! per delivery barely depends on N; the result says so).

pub mod receiver;
pub mod report;
pub mod sender;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::fdlimit;
use crate::procstat;
use crate::progress::{Meter, Reading};
use crate::s1::report::{Latency, Machine, ProcFigures};
use receiver::ReceiverReport;
use sender::{Live, Plan};

/// The payload size of a watch event of a 1 KiB object, as the C reference.
pub const DEFAULT_PAYLOAD_BYTES: usize = 1100;
/// How long the receiver may take to connect every socket, on top of 1 ms
/// per socket.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings of one floor run.
#[derive(Clone, Debug)]
pub struct FloorConfig {
    /// Deliveries per tick: one socket per watcher (see [`Self::plan`]).
    pub watchers: usize,
    /// Ticks (events per watcher) per second.
    pub rate: f64,
    /// Length of the schedule.
    pub duration: Duration,
    /// Bytes of one event (at least 16).
    pub payload_bytes: usize,
    /// Events per `write()`.
    pub events_per_write: usize,
    /// The binary run as the receiver (`floor-receiver` subcommand): this
    /// executable, or `watchd-loadtest` from a test.
    pub receiver_bin: PathBuf,
    /// Longest wait for the receiver's result after the last write.
    pub drain_timeout: Duration,
    /// How far past the schedule's end the sender may run before the rest
    /// is abandoned.
    pub overrun: Duration,
}

/// Sockets, rate per socket and ticks of a floor run, as the limit allows.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Sockets used.
    pub sockets: usize,
    /// Ticks per second per socket.
    pub rate: f64,
    /// Ticks run (a multiple of the events per write).
    pub ticks: u64,
}

impl FloorConfig {
    /// Defaults for `watchers` × `rate` for `duration`.
    pub fn new(watchers: usize, rate: f64, duration: Duration) -> Self {
        Self {
            watchers,
            rate,
            duration,
            payload_bytes: DEFAULT_PAYLOAD_BYTES,
            events_per_write: 1,
            receiver_bin: std::env::current_exe().unwrap_or_else(|_| "watchd-loadtest".into()),
            drain_timeout: Duration::from_secs(15),
            overrun: Duration::from_secs(5),
        }
    }

    /// Rejects settings that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.watchers == 0 || self.watchers > 100_000 {
            return Err("--watchers must be 1..=100000".into());
        }
        if !(self.rate > 0.0 && self.rate <= 100_000.0) {
            return Err("--rate must be in (0, 100000]".into());
        }
        if self.duration < Duration::from_millis(100) || self.duration > Duration::from_secs(3600) {
            return Err("--duration must be 0.1..=3600 s".into());
        }
        if !(16..=1 << 20).contains(&self.payload_bytes) {
            return Err("--payload-bytes must be 16..=1048576 (8 of them are the stamp)".into());
        }
        if !(1..=1000).contains(&self.events_per_write) {
            return Err("--events-per-write must be 1..=1000".into());
        }
        Ok(())
    }

    /// How the run fits under `fd_limit` open files: W sockets, or as many
    /// as fit with the rate per socket raised so that deliveries per second
    /// stay W × rate.
    pub fn shape(&self, fd_limit: u64) -> Result<Shape, String> {
        let budget = fdlimit::socket_budget(fd_limit) as usize;
        if budget == 0 {
            return Err(format!("open-files limit {fd_limit} leaves no sockets"));
        }
        let sockets = self.watchers.min(budget);
        let rate = self.rate * self.watchers as f64 / sockets as f64;
        let k = self.events_per_write as u64;
        let ticks = (rate * self.duration.as_secs_f64()).round() as u64 / k * k;
        if ticks == 0 {
            return Err(format!(
                "{rate}/s for {:?} is fewer ticks than --events-per-write={k}",
                self.duration
            ));
        }
        Ok(Shape {
            sockets,
            rate,
            ticks,
        })
    }
}

/// The sender thread's CPU over the window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SenderCpu {
    /// User seconds.
    pub user_s: f64,
    /// System seconds.
    pub system_s: f64,
    /// Both, per million deliveries: **the floor**.
    pub cpu_s_per_million: Option<f64>,
    /// User seconds per million deliveries.
    pub user_s_per_million: Option<f64>,
    /// System seconds per million deliveries.
    pub system_s_per_million: Option<f64>,
    /// User share of the thread's CPU (0..=1).
    pub user_share: Option<f64>,
    /// Cores used in the window.
    pub cores: f64,
}

impl SenderCpu {
    /// The figures of `user_s` and `system_s` for `deliveries` in `window_s`.
    pub fn new(user_s: f64, system_s: f64, deliveries: u64, window_s: f64) -> Self {
        let per_m = |s: f64| (deliveries > 0).then(|| s * 1e6 / deliveries as f64);
        let all = user_s + system_s;
        Self {
            user_s,
            system_s,
            cpu_s_per_million: per_m(all),
            user_s_per_million: per_m(user_s),
            system_s_per_million: per_m(system_s),
            user_share: (all > 0.0).then(|| user_s / all),
            cores: all / window_s.max(1e-9),
        }
    }
}

/// One floor run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FloorResult {
    /// Always `floor`.
    pub scenario: String,
    /// Watchers asked for (deliveries per tick).
    pub watchers: usize,
    /// Sockets used (fewer than `watchers` only under the open-files limit).
    pub sockets: usize,
    /// Ticks per second asked for.
    pub requested_rate: f64,
    /// Ticks per second per socket run.
    pub rate: f64,
    /// Schedule length asked for, seconds.
    pub duration_s: f64,
    /// Bytes of one event.
    pub payload_bytes: usize,
    /// Events per `write()`.
    pub events_per_write: usize,
    /// Ticks planned.
    pub ticks_planned: u64,
    /// Ticks run.
    pub ticks: u64,
    /// Ticks never run: the sender was so far behind that the schedule was
    /// abandoned.
    pub abandoned_ticks: u64,
    /// `write()` calls made.
    pub write_syscalls: u64,
    /// `write()` calls per delivery (1 / events per write when every write
    /// is taken whole).
    pub writes_per_delivery: Option<f64>,
    /// Deliveries written.
    pub deliveries_sent: u64,
    /// Deliveries the receiver counted.
    pub deliveries_received: u64,
    /// Written but never received (0 unless the receiver failed).
    pub lost: u64,
    /// First tick to the end of the last write, seconds.
    pub window_s: f64,
    /// Deliveries written per second of the window.
    pub delivered_per_sec: f64,
    /// How late the last tick started, seconds (the lag left at the end).
    pub lag_end_s: f64,
    /// How late the latest tick started, at most, seconds.
    pub lag_max_s: f64,
    /// The sender thread's CPU.
    pub sender: SenderCpu,
    /// The receiver process's CPU in the same window.
    pub receiver: ProcFigures,
    /// Delivery latency (receive time − stamp at the tick).
    pub latency_ms: Latency,
    /// The machine during the window.
    pub machine: Machine,
    /// Why the run ended early, if it did.
    pub error: Option<String>,
}

/// The receiver process, killed by PID and reaped on drop.
struct ReceiverProc(Child);

impl Drop for ReceiverProc {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A line the receiver said, as the reader thread passes it on.
enum Said {
    Ready,
    Result(Result<ReceiverReport, String>),
}

/// Reads the receiver's lines: `ready` and the result go to `tx`, each
/// `progress` becomes a progress line (once the sender has started).
fn read_receiver(out: ChildStdout, tx: mpsc::Sender<Said>, live: Arc<Live>, label: String) {
    let mut meter: Option<Meter> = None;
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        let (word, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let said = match word {
            "ready" => Said::Ready,
            "result" => Said::Result(serde_json::from_str(rest).map_err(|e| e.to_string())),
            "error" => Said::Result(Err(format!("floor receiver: {rest}"))),
            "progress" => {
                let Some(&started) = live.started.get() else {
                    continue;
                };
                let received: u64 = rest
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let sent = live.sent.load(Ordering::Relaxed);
                let reading = Reading {
                    delivered: received,
                    lag_s: live.lag_us.load(Ordering::Relaxed) as f64 / 1e6,
                    lost: 0,
                    note: Some(format!("in flight {}", sent.saturating_sub(received))),
                };
                let m = meter.get_or_insert_with(|| Meter::new(started));
                tracing::info!("{}", m.line(&label, &reading));
                continue;
            }
            _ => continue,
        };
        if tx.send(said).is_err() {
            break;
        }
    }
}

/// Accepts `n` connections within `timeout`, failing early if the receiver
/// exits.
fn accept_all(
    l: &TcpListener,
    n: usize,
    timeout: Duration,
    child: &mut ReceiverProc,
) -> Result<Vec<TcpStream>, String> {
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                s.set_nodelay(true).map_err(|e| e.to_string())?;
                out.push(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(format!("only {} of {n} floor sockets connected", out.len()));
                }
                if let Ok(Some(status)) = child.0.try_wait() {
                    return Err(format!("floor receiver exited ({status})"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    }
    Ok(out)
}

fn listen() -> Result<(TcpListener, SocketAddr), String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    // A deep accept queue: the receiver connects thousands at once.
    // SAFETY: listen on a socket we own; only its backlog changes.
    unsafe { libc::listen(l.as_raw_fd(), 65_535) };
    let addr = l.local_addr().map_err(|e| e.to_string())?;
    Ok((l, addr))
}

/// Runs the floor once, on the calling thread (its CPU is the figure): use
/// [`run`] from async code.
pub fn run_blocking(cfg: &FloorConfig) -> Result<FloorResult, String> {
    cfg.validate()?;
    let shape = cfg.shape(fdlimit::soft_limit())?;
    if shape.sockets < cfg.watchers {
        tracing::warn!(
            watchers = cfg.watchers,
            sockets = shape.sockets,
            rate_per_socket = shape.rate,
            "the floor's sockets do not all fit under the open-files limit: fewer sockets, \
             the same deliveries per second"
        );
    }
    let loadavg = procstat::loadavg_1m();
    let (listener, addr) = listen()?;
    let max_seconds =
        (CONNECT_TIMEOUT + cfg.duration + cfg.overrun + cfg.drain_timeout * 2).as_secs_f64();
    let mut child = Command::new(&cfg.receiver_bin)
        .arg("floor-receiver")
        .arg(format!("--connect={addr}"))
        .arg(format!("--sockets={}", shape.sockets))
        .arg(format!("--payload-bytes={}", cfg.payload_bytes))
        .arg(format!("--max-seconds={max_seconds:.0}"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map(ReceiverProc)
        .map_err(|e| format!("spawn {} floor-receiver: {e}", cfg.receiver_bin.display()))?;
    let receiver_pid = child.0.id();
    let out = child.0.stdout.take().ok_or("no receiver stdout")?;
    let live = Arc::new(Live::default());
    let (tx, rx) = mpsc::channel();
    let label = format!("floor {}x{}/s", cfg.watchers, cfg.rate);
    let reader = {
        let live = live.clone();
        std::thread::spawn(move || read_receiver(out, tx, live, label))
    };
    let connect_timeout = CONNECT_TIMEOUT + Duration::from_millis(shape.sockets as u64);
    let mut streams = accept_all(&listener, shape.sockets, connect_timeout, &mut child)?;
    drop(listener);
    match rx.recv_timeout(connect_timeout) {
        Ok(Said::Ready) => {}
        Ok(Said::Result(Err(e))) => return Err(e),
        _ => return Err("the floor receiver never said it was ready".into()),
    }
    // Let the connections settle, as the C reference does.
    std::thread::sleep(Duration::from_millis(200));
    let plan = Plan {
        rate: shape.rate,
        ticks: shape.ticks,
        payload_bytes: cfg.payload_bytes,
        events_per_write: cfg.events_per_write,
        hard_stop: cfg.duration + cfg.overrun,
        receiver_pid: Some(receiver_pid),
    };
    let machine0 = procstat::machine_ticks();
    let sent = sender::send(&mut streams, &plan, &live);
    let machine1 = procstat::machine_ticks();
    // The receiver finishes when every socket has reached its end.
    drop(streams);
    let got = match rx.recv_timeout(cfg.drain_timeout) {
        Ok(Said::Result(r)) => r,
        _ => Err(format!(
            "no result from the floor receiver within {:?}",
            cfg.drain_timeout
        )),
    };
    drop(child);
    let _ = reader.join();
    let got = got?;
    let receiver = ProcFigures {
        process: "floor receiver".into(),
        pid: Some(receiver_pid),
        cpu_s: sent
            .receiver_cpu
            .0
            .zip(sent.receiver_cpu.1)
            .map(|(a, b)| (b - a).max(0.0)),
        ..ProcFigures::default()
    };
    Ok(result(
        cfg,
        &shape,
        &sent,
        got,
        receiver,
        loadavg,
        machine0.zip(machine1),
    ))
}

fn result(
    cfg: &FloorConfig,
    shape: &Shape,
    sent: &sender::Report,
    got: ReceiverReport,
    mut receiver: ProcFigures,
    loadavg: Option<f64>,
    machine: Option<(procstat::MachineTicks, procstat::MachineTicks)>,
) -> FloorResult {
    let window_s = sent.window_s;
    let per_m = |c: f64| (sent.deliveries > 0).then(|| c * 1e6 / sent.deliveries as f64);
    receiver.cpu_s_per_million = receiver.cpu_s.and_then(per_m);
    receiver.cores = receiver.cpu_s.map(|c| c / window_s.max(1e-9));
    FloorResult {
        scenario: "floor".into(),
        watchers: cfg.watchers,
        sockets: shape.sockets,
        requested_rate: cfg.rate,
        rate: shape.rate,
        duration_s: cfg.duration.as_secs_f64(),
        payload_bytes: cfg.payload_bytes,
        events_per_write: cfg.events_per_write,
        ticks_planned: shape.ticks,
        ticks: sent.ticks,
        abandoned_ticks: sent.abandoned_ticks,
        write_syscalls: sent.syscalls,
        writes_per_delivery: (sent.deliveries > 0)
            .then(|| sent.syscalls as f64 / sent.deliveries as f64),
        deliveries_sent: sent.deliveries,
        deliveries_received: got.deliveries,
        lost: sent.deliveries.saturating_sub(got.deliveries),
        window_s,
        delivered_per_sec: sent.deliveries as f64 / window_s.max(1e-9),
        lag_end_s: sent.lag_end_s,
        lag_max_s: sent.lag_max_s,
        sender: SenderCpu::new(sent.user_s, sent.system_s, sent.deliveries, window_s),
        receiver,
        latency_ms: got.latency_ms,
        machine: Machine {
            cpus: procstat::cpus(),
            busy_share: machine.and_then(|(a, b)| procstat::busy_share(a, b)),
            loadavg_1m_start: loadavg,
            tokio_workers: crate::s1::report::TokioWorkers::now(false),
        },
        error: sent.error.clone(),
    }
}

/// Runs the floor once on a blocking thread of its own.
pub async fn run(cfg: &FloorConfig) -> Result<FloorResult, String> {
    let cfg = cfg.clone();
    tokio::task::spawn_blocking(move || run_blocking(&cfg))
        .await
        .map_err(|e| format!("floor thread: {e}"))?
}

/// Whether every delivery written arrived and none failed.
pub fn is_clean(r: &FloorResult) -> bool {
    r.error.is_none() && r.lost == 0 && r.deliveries_sent > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_validate() {
        let ok = FloorConfig::new(10, 100.0, Duration::from_secs(2));
        assert!(ok.validate().is_ok());
        assert_eq!(ok.payload_bytes, 1100);
        for bad in [
            FloorConfig::new(0, 100.0, Duration::from_secs(2)),
            FloorConfig::new(10, 0.0, Duration::from_secs(2)),
            FloorConfig::new(10, 100.0, Duration::ZERO),
            FloorConfig {
                payload_bytes: 8,
                ..ok.clone()
            },
            FloorConfig {
                events_per_write: 0,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shape_keeps_deliveries_per_second_under_the_limit() {
        let c = FloorConfig::new(1000, 100.0, Duration::from_secs(10));
        assert_eq!(
            c.shape(20_000).unwrap(),
            Shape {
                sockets: 1000,
                rate: 100.0,
                ticks: 1000
            }
        );
        // 20 000 watchers do not fit under 20 000 open files.
        let c = FloorConfig::new(20_000, 10.0, Duration::from_secs(10));
        let s = c.shape(20_000).unwrap();
        assert_eq!(s.sockets, 19_744);
        assert!((s.sockets as f64 * s.rate - 200_000.0).abs() < 1e-6);
        // Ticks are whole rounds of K events.
        let c = FloorConfig {
            events_per_write: 4,
            ..FloorConfig::new(10, 7.0, Duration::from_secs(3))
        };
        assert_eq!(c.shape(20_000).unwrap().ticks, 20);
        let c = FloorConfig {
            events_per_write: 100,
            ..FloorConfig::new(10, 7.0, Duration::from_secs(3))
        };
        assert!(c.shape(20_000).is_err());
        assert!(FloorConfig::new(10, 1.0, Duration::from_secs(1))
            .shape(100)
            .is_err());
    }

    #[test]
    fn accounting_per_million_and_loss() {
        let cpu = SenderCpu::new(0.1, 0.9, 2_000_000, 4.0);
        assert_eq!(cpu.cpu_s_per_million, Some(0.5));
        assert_eq!(cpu.user_s_per_million, Some(0.05));
        assert_eq!(cpu.system_s_per_million, Some(0.45));
        assert_eq!(cpu.user_share, Some(0.1));
        assert_eq!(cpu.cores, 0.25);
        assert_eq!(SenderCpu::new(0.0, 0.0, 0, 1.0).cpu_s_per_million, None);
        let cfg = FloorConfig::new(4, 10.0, Duration::from_secs(2));
        let shape = cfg.shape(20_000).unwrap();
        let sent = sender::Report {
            ticks: 20,
            rounds: 20,
            syscalls: 80,
            deliveries: 80,
            user_s: 0.001,
            system_s: 0.003,
            window_s: 1.9,
            receiver_cpu: (Some(1.0), Some(1.5)),
            ..sender::Report::default()
        };
        let got = ReceiverReport {
            sockets: 4,
            deliveries: 78,
            bytes: 78 * 1100,
            latency_ms: Latency::default(),
        };
        let receiver = ProcFigures {
            cpu_s: Some(0.5),
            ..ProcFigures::default()
        };
        let r = result(&cfg, &shape, &sent, got, receiver, None, None);
        assert_eq!(
            (r.deliveries_sent, r.deliveries_received, r.lost),
            (80, 78, 2)
        );
        assert!(!is_clean(&r));
        assert_eq!(r.writes_per_delivery, Some(1.0));
        assert!((r.sender.cpu_s_per_million.unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(r.receiver.cpu_s_per_million, Some(6250.0));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["scenario"], "floor");
        assert_eq!(v["sender"]["user_share"], 0.25);
    }
}
