//! The `watchd` binary under test, run as `watchd serve` against a test etcd.
//!
//! [`Watchd::start`] runs `watchd serve --etcd-servers=URL
//! --http-address=127.0.0.1:P1 --grpc-address=127.0.0.1:P2 [extra args]`
//! ([`Watchd::start_upstream`]: `--upstream-url=URL` instead of etcd) with
//! stdout and stderr appended to `watchd.log` in a temp dir, and returns once
//! `GET /readyz` answers 200 (panicking with the log's tail otherwise).
//! Dropping the handle kills the process by PID and reaps it.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::{blocking_get_status, free_port, poll_until, tail_file};

/// How long [`Watchd::start`] and [`Watchd::restart`] wait for `/readyz` to answer 200.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The line written to the log before each run.
const RUN_MARKER: &str = "--- watchd test harness: starting watchd";

/// How many times [`Watchd::start`] picks fresh ports when another process took the chosen ones.
const START_ATTEMPTS: usize = 4;

/// A `watchd serve` process listening on loopback ports.
pub struct Watchd {
    /// The process, `None` once killed or reaped.
    child: Option<Child>,
    /// PID of the most recently started process.
    pid: u32,
    etcd_url: String,
    extra_args: Vec<String>,
    http_port: u16,
    grpc_port: u16,
    /// Holds `watchd.log`; removed on drop.
    dir: TempDir,
    /// Decides readiness instead of a plain `GET /readyz` (for TLS and authentication).
    probe: Option<Probe>,
    /// Environment variables set for the process (test hooks).
    env: Vec<(String, String)>,
}

/// A readiness check given the HTTP address: true once ready.
pub type Probe = std::sync::Arc<dyn Fn(SocketAddr) -> bool + Send + Sync>;

impl Watchd {
    /// Starts `watchd serve` fed by the upstream API server at `upstream_url` (no etcd)
    /// with `extra_args`, and waits until `/readyz` is 200.
    pub fn start_upstream(upstream_url: &str, extra_args: &[&str]) -> Watchd {
        let upstream = format!("--upstream-url={upstream_url}");
        let mut args = vec![upstream.as_str()];
        args.extend_from_slice(extra_args);
        Watchd::start_with_probe("", &args, None)
    }

    /// Starts `watchd serve` against `etcd_url` with `extra_args` and waits until `/readyz` is 200.
    ///
    /// Panics with the log's tail if it exits or is not ready within [`READY_TIMEOUT`].
    pub fn start(etcd_url: &str, extra_args: &[&str]) -> Watchd {
        Watchd::start_with_probe(etcd_url, extra_args, None)
    }

    /// [`Watchd::start`] with `probe` deciding readiness (e.g. a TLS client with
    /// credentials) instead of a plain-HTTP `GET /readyz`.
    pub fn start_with_probe(etcd_url: &str, extra_args: &[&str], probe: Option<Probe>) -> Watchd {
        let mut watchd = Watchd::spawn(etcd_url, extra_args);
        watchd.probe = probe;
        for attempt in 1..=START_ATTEMPTS {
            match watchd.wait_ready(READY_TIMEOUT) {
                Ok(()) => return watchd,
                Err(_) if attempt < START_ATTEMPTS && watchd.lost_port_race() => {
                    watchd.http_port = free_port();
                    watchd.grpc_port = free_port();
                    watchd.launch();
                }
                Err(msg) => panic!("{msg}"),
            }
        }
        unreachable!("the loop above returns or panics")
    }

    /// Spawns `watchd serve` like [`Watchd::start`] but returns at once, without waiting for readiness.
    pub fn spawn(etcd_url: &str, extra_args: &[&str]) -> Watchd {
        Watchd::spawn_with_env(etcd_url, extra_args, &[])
    }

    /// [`Watchd::spawn`] with these environment variables set for the process (the test
    /// hooks of `src/source/test_hooks.rs`, built into the binary tests run).
    pub fn spawn_with_env(etcd_url: &str, extra_args: &[&str], env: &[(&str, &str)]) -> Watchd {
        let dir = tempfile::Builder::new()
            .prefix("watchd-test-watchd-")
            .tempdir()
            .expect("create temp dir for watchd");
        let mut watchd = Watchd {
            child: None,
            pid: 0,
            etcd_url: etcd_url.to_string(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            http_port: free_port(),
            grpc_port: free_port(),
            dir,
            probe: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        watchd.launch();
        watchd
    }

    /// [`Watchd::start`] with these environment variables set for the process.
    pub fn start_with_env(etcd_url: &str, extra_args: &[&str], env: &[(&str, &str)]) -> Watchd {
        let mut watchd = Watchd::spawn_with_env(etcd_url, extra_args, env);
        watchd
            .wait_ready(READY_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        watchd
    }

    /// Waits until `GET /readyz` answers 200; `Err` (with the log's tail) if it exits or times out.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let addr = self.http_addr();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_reap() {
                return Err(format!(
                    "watchd exited before it was ready ({status})\n{}",
                    self.diagnostics()
                ));
            }
            let ready = match &self.probe {
                Some(probe) => probe(addr),
                None => blocking_get_status(addr, "/readyz", Duration::from_secs(2)) == Some(200),
            };
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "watchd at {} not ready after {timeout:?}\n{}",
                    self.base_url(),
                    self.diagnostics()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The HTTP base URL, `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The HTTP listen address.
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.http_port))
    }

    /// The gRPC listen address.
    pub fn grpc_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.grpc_port))
    }

    /// The gRPC endpoint URL, `http://127.0.0.1:PORT`.
    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// PID of the most recently started watchd process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process is alive (started and not exited).
    pub fn is_running(&mut self) -> bool {
        self.child.is_some() && self.try_reap().is_none()
    }

    /// The path of the log file (stdout and stderr of every run).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("watchd.log")
    }

    /// Everything watchd printed so far (all runs of this instance).
    pub fn log(&self) -> String {
        std::fs::read(self.log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Kills watchd with SIGKILL (by PID) and reaps it; does nothing if it is not running.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM (by PID) and waits up to `timeout` for the exit; `None` if still running then.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.child.as_ref()?;
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        assert!(
            matches!(sent, Ok(s) if s.success()),
            "kill -TERM {}: {sent:?}",
            self.pid
        );
        self.wait_exit(timeout)
    }

    /// Waits up to `timeout` for the process to exit by itself and reaps it; `None` if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.child.as_ref()?;
        poll_until(timeout, Duration::from_millis(20), || self.try_reap())
    }

    /// Kills watchd (if running), starts it again with the same ports and arguments, and waits until ready.
    pub fn restart(&mut self) {
        self.kill9();
        self.launch();
        if let Err(msg) = self.wait_ready(READY_TIMEOUT) {
            panic!("watchd restart: {msg}");
        }
    }

    /// Spawns one process with the current ports and arguments.
    fn launch(&mut self) {
        let path = self.log_path();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let _ = writeln!(log, "{RUN_MARKER} on {} ---", self.base_url());
        let child = Command::new(env!("CARGO_BIN_EXE_watchd"))
            .arg("serve")
            .args((!self.etcd_url.is_empty()).then(|| format!("--etcd-servers={}", self.etcd_url)))
            .arg(format!("--http-address={}", self.http_addr()))
            .arg(format!("--grpc-address={}", self.grpc_addr()))
            .args(&self.extra_args)
            .env("RUST_BACKTRACE", "1")
            .env("NO_COLOR", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("dup watchd.log")))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", env!("CARGO_BIN_EXE_watchd")));
        self.pid = child.id();
        self.child = Some(child);
    }

    /// Reaps the process if it has exited, returning its status.
    fn try_reap(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        Some(status)
    }

    /// Whether the last run died because one of its ports was already taken.
    fn lost_port_race(&mut self) -> bool {
        self.try_reap();
        self.child.is_none()
            && self
                .last_run_log()
                .to_lowercase()
                .contains("address already in use")
    }

    /// The part of the log written by the most recent run.
    fn last_run_log(&self) -> String {
        let log = self.log();
        match log.rfind(RUN_MARKER) {
            Some(pos) => log[pos..].to_string(),
            None => log,
        }
    }

    /// The log's tail, for panic messages.
    fn diagnostics(&self) -> String {
        format!(
            "--- {} (tail) ---\n{}",
            self.log_path().display(),
            tail_file(&self.log_path(), 40)
        )
    }
}

impl Drop for Watchd {
    fn drop(&mut self) {
        self.kill9();
    }
}
