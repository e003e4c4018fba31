//! A throw-away single-member etcd for tests.
//!
//! [`Etcd::start`] runs `/usr/bin/etcd` (etcd 3.4) in a fresh temporary data
//! directory, on loopback client and peer ports picked by [`super::free_port`],
//! logging to `etcd.log` inside that directory, and returns once `/health`
//! answers 200. The process can be SIGKILLed and restarted on the same data
//! and ports to test recovery. Dropping the handle kills the process by PID,
//! reaps it and removes the directory.
//!
//! Set `WATCHD_TEST_ETCD_BIN` to use another etcd binary.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::{blocking_get_status, free_port, tail_file};

/// The etcd binary installed by `scripts/install-deps.sh` (Debian package `etcd-server`).
pub const DEFAULT_ETCD_BIN: &str = "/usr/bin/etcd";

/// How long [`Etcd::start`] and [`Etcd::restart`] wait for `/health` to answer 200.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How many times [`Etcd::start`] picks fresh ports when another process took the chosen ones.
const START_ATTEMPTS: usize = 4;

/// A running (or deliberately killed) single-member etcd bound to 127.0.0.1.
pub struct Etcd {
    /// The etcd process, `None` after [`Etcd::kill9`].
    child: Option<Child>,
    /// PID of the most recently started process.
    pid: u32,
    /// Member name, unique per instance.
    name: String,
    client_port: u16,
    peer_port: u16,
    /// Holds `data/`, `etcd.log` and `etcd.stderr`; removed on drop.
    dir: TempDir,
    /// Flags added to every start (e.g. a smaller `--max-request-bytes`).
    extra_args: Vec<String>,
}

/// Why one start attempt did not produce a healthy etcd.
enum StartError {
    /// The chosen ports were taken by someone else: try again with new ones.
    AddressInUse,
    /// Anything else: a message with the log's tail.
    Fatal(String),
}

impl Etcd {
    /// Starts etcd on fresh loopback ports in a new temp dir and waits until it is healthy.
    ///
    /// Panics (with the log's tail) if etcd is missing, exits, or is not healthy within [`START_TIMEOUT`].
    pub fn start() -> Etcd {
        Etcd::start_with(&[])
    }

    /// [`Etcd::start`] with these flags added.
    pub fn start_with(extra_args: &[&str]) -> Etcd {
        let bin = etcd_bin();
        assert!(
            Path::new(&bin).is_file(),
            "etcd binary not found at {bin}: run scripts/install-deps.sh \
             (installs the Debian packages etcd-server and etcd-client)"
        );
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "watchd-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::Builder::new()
            .prefix("watchd-test-etcd-")
            .tempdir()
            .expect("create temp dir for etcd");
        let mut etcd = Etcd {
            child: None,
            pid: 0,
            name,
            client_port: 0,
            peer_port: 0,
            dir,
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
        };
        for attempt in 1..=START_ATTEMPTS {
            etcd.client_port = free_port();
            etcd.peer_port = free_port();
            match etcd.launch_and_wait() {
                Ok(()) => return etcd,
                Err(StartError::AddressInUse) if attempt < START_ATTEMPTS => {
                    // Start over with new ports and an empty data dir.
                    let _ = std::fs::remove_dir_all(etcd.data_dir());
                }
                Err(StartError::AddressInUse) => {
                    panic!(
                        "etcd: ports kept being taken after {START_ATTEMPTS} attempts\n{}",
                        etcd.diagnostics()
                    )
                }
                Err(StartError::Fatal(msg)) => panic!("{msg}"),
            }
        }
        unreachable!("the loop above returns or panics")
    }

    /// The client URL, `http://127.0.0.1:PORT`.
    pub fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// The client socket address, `127.0.0.1:PORT`.
    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.client_port))
    }

    /// The peer URL, `http://127.0.0.1:PORT`.
    pub fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// PID of the most recently started etcd process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the etcd process is alive (started and not exited).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The data directory (kept across [`Etcd::kill9`] and [`Etcd::restart`]).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The path of etcd's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// etcd's log so far (all runs of this instance).
    pub fn log(&self) -> String {
        std::fs::read(self.log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Kills etcd with SIGKILL (by PID) and reaps it; does nothing if it is not running.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same data dir and ports (killing it first if running) and waits until healthy.
    pub fn restart(&mut self) {
        self.kill9();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.launch_and_wait() {
                Ok(()) => return,
                // Someone grabbed a port meanwhile; it may be a short-lived client socket.
                Err(StartError::AddressInUse) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(StartError::AddressInUse) => panic!(
                    "etcd restart: ports {}/{} stayed in use\n{}",
                    self.client_port,
                    self.peer_port,
                    self.diagnostics()
                ),
                Err(StartError::Fatal(msg)) => panic!("{msg}"),
            }
        }
    }

    /// Replaces this etcd by a new, empty one at the same address: killed, its data
    /// removed, started again (revision 1).
    pub fn replace_with_empty(&mut self) {
        self.kill9();
        std::fs::remove_dir_all(self.data_dir()).expect("remove etcd's data");
        self.restart();
    }

    /// Replaces this etcd by a new, empty member of another cluster (another member name
    /// and cluster token, so another cluster ID) at the same address.
    pub fn replace_with_other_cluster(&mut self) {
        self.name = format!("{}-other", self.name);
        self.replace_with_empty();
    }

    /// `etcdctl snapshot save` of this etcd to `path`.
    pub fn snapshot_save(&self, path: &Path) {
        let endpoint = format!("--endpoints={}", self.client_url());
        let path = path.to_str().expect("a UTF-8 path");
        etcdctl(&[&endpoint, "--command-timeout=20s", "snapshot", "save", path]);
    }

    /// Restores this etcd from `snapshot` (`etcdctl snapshot restore`) at the same
    /// address, as an operator restores a backup: killed, its data replaced, started.
    pub fn restore(&mut self, snapshot: &Path) {
        self.restore_after(snapshot, Duration::ZERO);
    }

    /// [`Etcd::restore`], with the etcd down for `down` first (its clients back off).
    pub fn restore_after(&mut self, snapshot: &Path, down: Duration) {
        self.kill9();
        std::thread::sleep(down);
        std::fs::remove_dir_all(self.data_dir()).expect("remove etcd's data");
        let peer_url = self.peer_url();
        etcdctl(&[
            "snapshot",
            "restore",
            snapshot.to_str().expect("a UTF-8 path"),
            &format!("--data-dir={}", self.data_dir().display()),
            &format!("--name={}", self.name),
            &format!("--initial-cluster={}={peer_url}", self.name),
            &format!("--initial-cluster-token={}", self.name),
            &format!("--initial-advertise-peer-urls={peer_url}"),
        ]);
        self.restart();
    }

    /// Restores this etcd from `snapshot` out of its clients' sight (on another client
    /// port), writes `puts` there (`etcdctl put`), then serves it at its address: a
    /// restored etcd whose new history already went past what its clients saw.
    pub fn restore_and_write_unseen(&mut self, snapshot: &Path, puts: &[(&str, &str)]) {
        let seen = self.client_port;
        self.client_port = free_port();
        self.restore(snapshot);
        let endpoint = format!("--endpoints={}", self.client_url());
        for (key, value) in puts {
            etcdctl(&[&endpoint, "put", key, value]);
        }
        self.client_port = seen;
        self.restart();
    }

    /// Connects an `etcd_client::Client` to this etcd (bounded by 10 s).
    pub async fn client(&self) -> etcd_client::Client {
        let url = self.client_url();
        let connect = etcd_client::Client::connect([url.as_str()], None);
        match tokio::time::timeout(Duration::from_secs(10), connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => panic!("connect etcd-client to {url}: {e}"),
            Err(_) => panic!("connect etcd-client to {url}: timed out after 10 s"),
        }
    }

    /// Spawns one etcd process with the current ports and waits for `/health`.
    fn launch_and_wait(&mut self) -> Result<(), StartError> {
        let client_url = self.client_url();
        let peer_url = self.peer_url();
        let stderr = self.open_append("etcd.stderr");
        let mut cmd = Command::new(etcd_bin());
        cmd.arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster={}={peer_url}", self.name))
            .arg("--initial-cluster-state=new")
            .arg(format!("--initial-cluster-token={}", self.name))
            .arg("--logger=zap")
            .arg(format!("--log-outputs={}", self.log_path().display()))
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stderr.try_clone().expect("dup etcd.stderr")))
            .stderr(Stdio::from(stderr));
        // etcd refuses to start when an ETCD_* variable shadows a flag.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("ETCD_") {
                cmd.env_remove(key);
            }
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", etcd_bin()));
        self.pid = child.id();
        self.child = Some(child);

        let addr = self.client_addr();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                let text = format!("{}\n{}", self.log(), self.stderr_text());
                if text.contains("address already in use") {
                    return Err(StartError::AddressInUse);
                }
                return Err(StartError::Fatal(format!(
                    "etcd exited early ({status})\n{}",
                    self.diagnostics()
                )));
            }
            if blocking_get_status(addr, "/health", Duration::from_secs(2)) == Some(200) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill9();
                return Err(StartError::Fatal(format!(
                    "etcd at {client_url} not healthy after {START_TIMEOUT:?}\n{}",
                    self.diagnostics()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Opens a file in the temp dir for appending, with a marker line for this run.
    fn open_append(&self, file: &str) -> File {
        let path = self.dir.path().join(file);
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let _ = writeln!(
            f,
            "--- watchd test harness: starting etcd {} ---",
            self.name
        );
        f
    }

    fn stderr_text(&self) -> String {
        std::fs::read(self.dir.path().join("etcd.stderr"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The tails of etcd's log and stderr, for panic messages.
    fn diagnostics(&self) -> String {
        format!(
            "--- {} (tail) ---\n{}\n--- etcd stdout/stderr (tail) ---\n{}",
            self.log_path().display(),
            tail_file(&self.log_path(), 30),
            tail_file(&self.dir.path().join("etcd.stderr"), 30)
        )
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs etcdctl (v3 API, beside the etcd binary run) with `args`; panics with its
/// stderr if it fails.
fn etcdctl(args: &[&str]) {
    let bin = Path::new(&etcd_bin()).with_file_name("etcdctl");
    let out = Command::new(&bin)
        .env("ETCDCTL_API", "3")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The etcd binary to run: `$WATCHD_TEST_ETCD_BIN` or [`DEFAULT_ETCD_BIN`].
fn etcd_bin() -> String {
    std::env::var("WATCHD_TEST_ETCD_BIN").unwrap_or_else(|_| DEFAULT_ETCD_BIN.to_string())
}
