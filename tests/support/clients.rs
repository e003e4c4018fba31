//! Real Kubernetes client programs (Python, Node) run as child processes.
//!
//! The programs live in `tests/clients/`; the client libraries they load are installed
//! by `scripts/install-clients.sh` into `.tools/python` and `.tools/node`. A test that
//! needs one and does not find it fails with a message naming that script.
//!
//! A [`ClientProcess`] prints one JSON document per line on stdout; the test reads the
//! lines with bounded waits ([`ClientProcess::next_line`], [`ClientProcess::expect_op`]),
//! may write lines to its stdin, and collects its stderr for panic messages. Dropping
//! the handle kills the process by PID (tokio's `kill_on_drop`).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout, timeout_at, Instant};

/// The script that installs the clients.
pub const INSTALL_SCRIPT: &str = "scripts/install-clients.sh";

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/clients/<file>`.
pub fn client_program(file: &str) -> PathBuf {
    repo_root().join("tests").join("clients").join(file)
}

/// Where `scripts/install-clients.sh` puts the Python `kubernetes` package.
pub fn python_client_dir() -> PathBuf {
    repo_root().join(".tools").join("python")
}

/// Where `scripts/install-clients.sh` installs `@kubernetes/client-node` (npm prefix).
pub fn node_client_prefix() -> PathBuf {
    repo_root().join(".tools").join("node")
}

fn require_file(path: &Path, what: &str) {
    assert!(
        path.is_file(),
        "{what} is not installed ({} is missing): run {INSTALL_SCRIPT} \
         (scripts/test.sh runs it before the tests)",
        path.display()
    );
}

/// Where `scripts/install-clients.sh` puts grpcio, grpcio-reflection and protobuf.
pub fn python_grpc_dir() -> PathBuf {
    repo_root().join(".tools").join("python-grpc")
}

/// `python3 tests/clients/<program> args...` with `PYTHONPATH=.tools/python`;
/// panics, naming the install script, if the client is not installed.
pub fn python_command(program: &str, args: &[&str]) -> Command {
    let dir = python_client_dir();
    require_file(
        &dir.join("kubernetes").join("__init__.py"),
        "the Python kubernetes client",
    );
    python_with(&dir, program, args)
}

/// [`python_command`] with `PYTHONPATH=.tools/python-grpc` (grpcio, grpcio-reflection and
/// protobuf), no gRPC proxy either.
pub fn python_grpc_command(program: &str, args: &[&str]) -> Command {
    let dir = python_grpc_dir();
    for (what, package) in [
        ("the Python package grpcio", "grpc"),
        ("the Python package grpcio-reflection", "grpc_reflection"),
        ("the Python package protobuf", "google/protobuf"),
    ] {
        require_file(&dir.join(package).join("__init__.py"), what);
    }
    let mut cmd = python_with(&dir, program, args);
    // grpcio honours proxies of its own.
    cmd.env("no_grpc_proxy", "127.0.0.1,localhost")
        .env_remove("grpc_proxy");
    cmd
}

/// `python3 tests/clients/<program> args...` with `PYTHONPATH=dir`, loopback only.
fn python_with(dir: &Path, program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(client_program(program))
        .args(args)
        .env("PYTHONPATH", dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        // Loopback only: no proxy from the environment may get in the way.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy");
    cmd
}

/// `node tests/clients/<program> args...` with `NODE_CLIENT_PREFIX`/`NODE_PATH` set to
/// the installed prefix; panics, naming the install script, if the client is not installed.
pub fn node_command(program: &str, args: &[&str]) -> Command {
    let prefix = node_client_prefix();
    require_file(
        &prefix
            .join("node_modules")
            .join("@kubernetes")
            .join("client-node")
            .join("package.json"),
        "@kubernetes/client-node",
    );
    let mut cmd = Command::new("node");
    cmd.arg(client_program(program))
        .args(args)
        .env("NODE_CLIENT_PREFIX", &prefix)
        .env("NODE_PATH", prefix.join("node_modules"))
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy");
    cmd
}

/// A running client program.
pub struct ClientProcess {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<String>>,
    /// Every stdout line read so far, for panic messages.
    seen: Vec<String>,
}

impl ClientProcess {
    /// Spawns `cmd` with piped stdin, stdout and stderr; `name` labels panic messages.
    pub fn spawn(name: &str, mut cmd: Command) -> ClientProcess {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name} ({cmd:?}): {e}"));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            loop {
                match err_pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        });
        ClientProcess {
            name: name.to_string(),
            child,
            stdin,
            stdout,
            stderr,
            seen: Vec::new(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// What the program wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Everything the program printed so far, for panic messages.
    pub fn diagnostics(&self) -> String {
        format!(
            "--- {} stdout ---\n{}\n--- {} stderr ---\n{}",
            self.name,
            self.seen.join("\n"),
            self.name,
            self.stderr()
        )
    }

    /// The next stdout line as JSON; `None` at end of output or after `wait`.
    ///
    /// Panics if a line is not JSON, or if the program reports `{"op":"error"}`.
    pub async fn next_line(&mut self, wait: Duration) -> Option<Value> {
        let line = match timeout(wait, self.stdout.next_line()).await {
            Err(_) | Ok(Err(_)) | Ok(Ok(None)) => return None,
            Ok(Ok(Some(line))) => line,
        };
        self.seen.push(line.clone());
        let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "{}: output line is not JSON ({e}): {line}\n{}",
                self.name,
                self.diagnostics()
            )
        });
        if value["op"] == "error" {
            panic!(
                "{} reported an error: {}\n{}",
                self.name,
                value["message"].as_str().unwrap_or_default(),
                self.diagnostics()
            );
        }
        Some(value)
    }

    /// Reads lines until one has `"op": op` and returns it with the lines before it;
    /// panics if none comes within `wait`.
    pub async fn expect_op(&mut self, op: &str, wait: Duration) -> (Value, Vec<Value>) {
        let deadline = Instant::now() + wait;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left).await {
                Some(v) if v["op"] == op => return (v, before),
                Some(v) => before.push(v),
                None => panic!(
                    "{}: no {op:?} line within {wait:?}\n{}",
                    self.name,
                    self.diagnostics()
                ),
            }
        }
    }

    /// Reads lines until `done(lines so far)` is true; panics if that takes longer than `wait`.
    pub async fn read_until(
        &mut self,
        wait: Duration,
        mut done: impl FnMut(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut lines = Vec::new();
        while !done(&lines) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left).await {
                Some(v) => lines.push(v),
                None => panic!(
                    "{}: condition not met within {wait:?}; lines: {lines:?}\n{}",
                    self.name,
                    self.diagnostics()
                ),
            }
        }
        lines
    }

    /// Writes one line to the program's stdin.
    pub async fn send_line(&mut self, line: &str) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("{}: stdin already closed", self.name));
        let data = format!("{line}\n");
        let written = timeout(Duration::from_secs(5), stdin.write_all(data.as_bytes())).await;
        assert!(
            matches!(written, Ok(Ok(()))),
            "{}: write to stdin: {written:?}\n{}",
            self.name,
            self.diagnostics()
        );
        let _ = timeout(Duration::from_secs(5), stdin.flush()).await;
    }

    /// Closes the program's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Reads the remaining output and waits for the exit; panics after `wait` or on a
    /// non-zero exit. Returns the remaining lines.
    pub async fn finish(mut self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        self.close_stdin();
        let mut rest = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left).await {
                Some(v) => rest.push(v),
                None => break,
            }
        }
        let status = self.wait_exit(deadline).await;
        assert!(
            status.success(),
            "{} exited with {status}\n{}",
            self.name,
            self.diagnostics()
        );
        rest
    }

    /// Waits for the exit until `deadline`, killing (by PID) and panicking if it is still running.
    async fn wait_exit(&mut self, deadline: Instant) -> ExitStatus {
        match timeout_at(deadline, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => panic!("{}: wait: {e}", self.name),
            Err(_) => {
                let _ = self.child.start_kill();
                let _ = self.child.wait().await;
                panic!(
                    "{}: still running at its deadline; killed\n{}",
                    self.name,
                    self.diagnostics()
                );
            }
        }
    }
}
