//! Starting the servers under test: a throwaway etcd (`/usr/bin/etcd`, temp
//! data dir, free loopback ports) and `watchd serve` against it (plain
//! HTTP, or with the TLS and authentication flags a caller passes).
//!
//! Each process is owned by a [`Proc`], which kills it by PID and reaps it
//! when dropped, then removes its temp dir; every wait is bounded.

use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, ConnectOptions, GetOptions};

use crate::endpoint::{Endpoint, Protocol, TokenSource};
use crate::tls::TlsOptions;
use crate::transport;

/// The etcd binary (Debian's `etcd-server`).
pub const ETCD_BIN: &str = "/usr/bin/etcd";
/// How long etcd and watchd may take to become ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A loopback port that was free a moment ago.
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local addr: {e}"))
}

/// A fresh directory under `root` for one process's data and log.
pub fn temp_dir(root: &Path, what: &str) -> Result<PathBuf, String> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = root.join(format!(
        "watchd-loadtest-{what}-{}-{nanos}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The last `n` lines of a file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A child process killed (by PID) and reaped on drop; its dir is removed.
pub struct Proc {
    name: &'static str,
    child: Option<Child>,
    pid: u32,
    dir: PathBuf,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &'static str, mut cmd: Command, dir: PathBuf) -> Result<Self, String> {
        let log = dir.join(format!("{name}.log"));
        let out = fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("{name} log: {e}"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn {name} ({cmd:?}): {e}"))?;
        Ok(Self {
            name,
            pid: child.id(),
            child: Some(child),
            dir,
            log,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `Err` with the log's tail if the process has exited.
    fn check_alive(&mut self) -> Result<(), String> {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Err(format!(
                    "{} exited ({status}); log tail:\n{}",
                    self.name,
                    tail(&self.log, 20)
                ));
            }
        }
        Ok(())
    }

    /// The log's last lines.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log, n)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A running single-member etcd.
pub struct Etcd {
    /// The process.
    pub proc: Proc,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

/// Short timeouts for probes and setup requests.
pub fn etcd_options() -> ConnectOptions {
    ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(10))
}

/// Starts etcd with its data under `root` and waits until it answers a range.
pub async fn start_etcd(root: &Path) -> Result<Etcd, String> {
    start_etcd_with(root, &[]).await
}

/// Like [`start_etcd`], with more etcd flags (`--quota-backend-bytes=...`).
pub async fn start_etcd_with(root: &Path, extra_args: &[String]) -> Result<Etcd, String> {
    if !Path::new(ETCD_BIN).exists() {
        return Err(format!(
            "{ETCD_BIN} is not installed; run scripts/install-deps.sh"
        ));
    }
    let dir = temp_dir(root, "etcd")?;
    let (client_port, peer_port) = (free_port()?, free_port()?);
    let endpoint = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let mut cmd = Command::new(ETCD_BIN);
    cmd.arg("--name=loadtest")
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .arg(format!("--listen-client-urls={endpoint}"))
        .arg(format!("--advertise-client-urls={endpoint}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster=loadtest={peer}"))
        .arg("--initial-cluster-state=new")
        .arg("--logger=zap")
        .arg("--log-level=warn")
        .args(extra_args);
    let mut proc = Proc::spawn("etcd", cmd, dir)?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        proc.check_alive()?;
        if etcd_answers(&endpoint).await {
            return Ok(Etcd { proc, endpoint });
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "etcd at {endpoint} not ready after {READY_TIMEOUT:?}; log tail:\n{}",
                proc.log_tail(20)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether etcd at `endpoint` answers a count-only range within a second.
pub async fn etcd_answers(endpoint: &str) -> bool {
    let probe = async {
        let mut c = Client::connect([endpoint], Some(etcd_options()))
            .await
            .ok()?;
        c.get("/", Some(GetOptions::new().with_count_only()))
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), probe).await,
        Ok(Some(_))
    )
}

/// A running `watchd serve`.
pub struct Watchd {
    /// The process.
    pub proc: Proc,
    /// Its HTTP address.
    pub addr: SocketAddr,
    /// Its gRPC API's address (`--grpc-address`, on 127.0.0.1; plain text
    /// unless the args give watchd TLS).
    pub grpc_addr: SocketAddr,
    /// Its HTTP API (`http://` or, with TLS, `https://127.0.0.1:PORT`) with
    /// the credentials the readiness probe used.
    pub endpoint: Arc<Endpoint>,
}

/// How to start watchd beyond the etcd and listen addresses.
#[derive(Clone, Debug, Default)]
pub struct WatchdOptions {
    /// More `watchd serve` flags (`--tls-cert-file=...`, `--token-auth-file=...`).
    pub args: Vec<String>,
    /// With `Some`, watchd serves TLS (the args give its certificate): the
    /// readiness probe goes to `https://127.0.0.1:PORT`, verified so.
    pub tls: Option<TlsOptions>,
    /// The bearer token the readiness probe sends.
    pub token: Option<TokenSource>,
}

/// `watchd` next to this executable (`target/release/watchd` when this is
/// `target/release/watchd-loadtest`).
pub fn default_watchd_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("watchd")))
        .unwrap_or_else(|| PathBuf::from("target/release/watchd"))
}

/// Starts `bin serve` against `etcd` on free loopback ports and waits until
/// `/readyz` answers 200.
pub async fn start_watchd(bin: &Path, etcd: &str, root: &Path) -> Result<Watchd, String> {
    start_watchd_with(bin, etcd, root, &WatchdOptions::default()).await
}

/// Starts `bin serve` against `etcd` on free loopback ports with `options`
/// and waits until `/readyz` answers 200 (over TLS and with the token when
/// the options say so). A free port may be taken by another socket before
/// watchd binds it (tests run side by side, and load runs open thousands):
/// then it starts again on other ports, three times at most.
pub async fn start_watchd_with(
    bin: &Path,
    etcd: &str,
    root: &Path,
    options: &WatchdOptions,
) -> Result<Watchd, String> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match start_watchd_once(bin, etcd, root, options).await {
            Err(e) if attempt < 3 && e.contains("Address already in use") => {
                tracing::warn!("watchd's port was taken; starting it again");
            }
            other => return other,
        }
    }
}

async fn start_watchd_once(
    bin: &Path,
    etcd: &str,
    root: &Path,
    options: &WatchdOptions,
) -> Result<Watchd, String> {
    if !bin.is_file() {
        return Err(format!(
            "{}: no watchd binary (build it: cargo build --release -p watchd, or pass --watchd-bin)",
            bin.display()
        ));
    }
    let dir = temp_dir(root, "watchd")?;
    let http_port = free_port()?;
    let grpc_port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], http_port));
    let grpc_addr = SocketAddr::from(([127, 0, 0, 1], grpc_port));
    let url = match options.tls {
        Some(_) => format!("https://{addr}"),
        None => format!("http://{addr}"),
    };
    let endpoint = Arc::new(Endpoint::new(
        &url,
        &options.tls.clone().unwrap_or_default(),
        options.token.as_ref(),
    )?);
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg(format!("--etcd-servers={etcd}"))
        .arg(format!("--http-address={addr}"))
        .arg(format!("--grpc-address={grpc_addr}"))
        .args(&options.args);
    let mut proc = Proc::spawn("watchd", cmd, dir)?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        proc.check_alive()?;
        let probe = transport::get_once(
            &endpoint,
            Protocol::Http1,
            "/readyz",
            Duration::from_secs(1),
        )
        .await;
        if matches!(probe, Ok((200, _))) {
            return Ok(Watchd {
                proc,
                addr,
                grpc_addr,
                endpoint,
            });
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "watchd at {url} not ready after {READY_TIMEOUT:?} (last: {probe:?}); log tail:\n{}",
                proc.log_tail(20)
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
