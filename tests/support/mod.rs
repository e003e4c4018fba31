//! Shared helpers for watchd's integration tests.
//!
//! Every file in `tests/` pulls this in with `mod support;`. It provides:
//! - [`etcd::Etcd`]: a throw-away single-member etcd on loopback ports;
//! - [`watchd::Watchd`]: the `watchd serve` binary under test, started against an etcd;
//! - [`http`]: a tiny async HTTP/1.1 client (plain requests and streaming watches).
//! - [`kube`]: Kubernetes-shaped objects written to etcd as kube-apiserver lays them out,
//!   in JSON or protobuf ([`kube::Storage`]), and checks of API answers (Status objects,
//!   lists, watch events, metrics);
//! - [`kubepb`]: the tests' own Kubernetes protobuf (`k8s-pb` and `k8s-openapi`), which
//!   writes protobuf objects and checks what is served without watchd's codec;
//! - [`storage_tests!`]: runs each scenario once per storage format;
//! - [`clients`]: real Kubernetes client programs (`tests/clients/`) run as child processes;
//! - [`proxy`]: a loopback proxy that records what a client sends;
//! - [`pki`]: certificates and kubeconfigs for TLS, and the kubectl and curl clients;
//! - [`upstream`]: a fake kube-apiserver that records what watchd passes through to it
//!   (writes to etcd or echoed, streamed pod logs, exec/attach/portforward upgrades,
//!   discovery and an aggregated API).
//!
//! Everything here talks to 127.0.0.1 only, bounds every wait with a timeout and
//! kills the processes it started (by PID) when its handle is dropped, so several
//! test binaries can run in parallel.
//!
//! Not every test file uses every helper, hence the `allow` below.
#![allow(dead_code, unused_imports, unused_macros)]

pub mod clients;
pub mod etcd;
pub mod http;
pub mod kube;
pub mod kubepb;
pub mod pki;
pub mod proxy;
pub mod upstream;
pub mod watchd;

pub use self::etcd::Etcd;
pub use self::watchd::Watchd;

/// Deterministic xorshift, so a failure can be replayed.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Runs each named scenario twice: once with built-in objects stored in etcd as JSON and
/// once as Kubernetes protobuf (see [`kube::Storage`]).
///
/// A scenario is a plain `async fn name()` of the test file (no `#[tokio::test]`, so its
/// body stays ordinary, rustfmt-formatted code). Listing it,
///
/// ```ignore
/// storage_tests! {
///     get_returns_the_object,
///     #[ignore = "why"] list_of_something,
/// }
/// ```
///
/// generates the tests `json::get_returns_the_object` and
/// `protobuf::get_returns_the_object`, each a `#[tokio::test]` that runs the scenario
/// within [`kube::Storage::scope`] of its format, so every [`kube::put_object`] (and
/// [`kube::put_pod`] ...) it makes writes that format. Attributes before a name go on both
/// tests; `storage_tests! { multi_thread: ... }` runs the scenarios on a two-worker
/// runtime. A scenario left out of the list is never run (and rustc reports it as dead
/// code); one listed but missing does not compile. Tasks a scenario spawns do not inherit
/// the format: wrap them in `Storage::current().scope(..)`. A file has one list.
macro_rules! storage_tests {
    (multi_thread: $($scenarios:tt)*) => {
        $crate::support::storage_tests!(
            @tests [tokio::test(flavor = "multi_thread", worker_threads = 2)] $($scenarios)*
        );
    };
    (@tests [$test:meta] $($(#[$attr:meta])* $name:ident),* $(,)?) => {
        /// The scenarios with built-in objects stored as JSON.
        mod json {
            $(
                #[$test]
                $(#[$attr])*
                async fn $name() {
                    $crate::support::kube::Storage::Json.scope(super::$name()).await
                }
            )*
        }
        /// The same scenarios with built-in objects stored as Kubernetes protobuf.
        mod protobuf {
            $(
                #[$test]
                $(#[$attr])*
                async fn $name() {
                    $crate::support::kube::Storage::Protobuf.scope(super::$name()).await
                }
            )*
        }
    };
    ($($scenarios:tt)*) => {
        $crate::support::storage_tests!(@tests [tokio::test] $($scenarios)*);
    };
}
pub(crate) use storage_tests;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Returns a loopback TCP port that is free right now and was not handed out before by this process.
///
/// The port comes from binding `127.0.0.1:0` (the kernel picks it); ports already
/// returned in this process are skipped, which keeps tests of one binary apart.
/// Another process may still take the port before it is used, so callers that
/// start servers retry with fresh ports when the server reports "address already in use".
pub fn free_port() -> u16 {
    static HANDED_OUT: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let handed_out = HANDED_OUT.get_or_init(|| Mutex::new(HashSet::new()));
    for _ in 0..100 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local_addr").port();
        drop(listener);
        if handed_out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port)
        {
            return port;
        }
    }
    panic!("could not find a free loopback port after 100 tries");
}

/// A `/proc/<pid>/status` field given in kB (`VmRSS`, `VmHWM`), in bytes. An unreadable
/// file, a missing field or 0 kB is a failure, never a 0 that passes a bound.
pub fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let path = format!("/proc/{pid}/status");
    let status =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {field} in kB in {path}:\n{status}"));
    assert!(kb > 0, "{field} of {pid} is 0 kB");
    kb * 1024
}

/// Polls `check` every `interval` until it returns `Some`, or returns `None` once `timeout` has passed.
pub fn poll_until<T>(
    timeout: Duration,
    interval: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(interval);
    }
}

/// Blocking `GET path` on a loopback address; returns the status code, or `None` on any error or timeout.
///
/// Used for readiness probes from synchronous code (no async runtime needed).
pub fn blocking_get_status(addr: SocketAddr, path: &str, timeout: Duration) -> Option<u16> {
    assert!(
        addr.ip().is_loopback(),
        "tests only talk to loopback, got {addr}"
    );
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    // The status line is all we need; read until it is complete.
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut parts = line.split_whitespace();
    match parts.next() {
        Some(version) if version.starts_with("HTTP/") => parts.next()?.parse().ok(),
        _ => None,
    }
}

/// Returns the last `max_lines` lines of the file at `path` (empty if it cannot be read).
pub fn tail_file(path: &Path, max_lines: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(max_lines);
    lines[start..].join("\n")
}
