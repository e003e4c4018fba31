//! `--audit-log-path`: one JSON line per request, in the shape of kube-apiserver's
//! `audit.k8s.io/v1` Event at the Metadata level (who, what, where from, the response
//! code, when). Gets and lists are logged when their response is complete; a watch when
//! its response starts (kube-apiserver logs a watch's start and end; the end is not
//! logged here).
//!
//! Lines are written by a thread of their own through a bounded queue
//! (`--audit-log-batch-buffer-size` lines). What a request does when the queue is full is
//! `--audit-log-mode`, as kube-apiserver's:
//! - `blocking` (the default): the request waits until its line is queued; no line is
//!   lost. Requests run on tokio's worker threads, so the wait is a
//!   [`tokio::task::block_in_place`]: the worker hands its other tasks to another thread
//!   before it blocks, and other connections are served meanwhile. Only a request that
//!   finds the queue full pays for it (the usual path is one `try_send`).
//! - `batch`: the request goes on and the line is dropped and counted
//!   (`watchd_audit_events_dropped_total`), as kube-apiserver's batch backend drops
//!   events its full buffer cannot take.
//!
//! The file is created with mode 0600. An existing file is appended to with its
//! permissions as they are (kube-apiserver does not change them either); a warning says
//! so when others than its owner may read it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::Attributes;

/// `--audit-log-mode`: what a request does when the audit log's queue is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditMode {
    /// Wait until the line is queued (kube-apiserver's default): no line is lost.
    #[default]
    Blocking,
    /// Drop the line and count it: requests never wait for the audit log.
    Batch,
}

/// Why the audit log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file could not be opened or created.
    #[error("--audit-log-path {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The writer thread could not be started.
    #[error("audit log writer thread: {0}")]
    Thread(std::io::Error),
}

/// The audit log.
pub struct AuditLog {
    tx: SyncSender<Vec<u8>>,
    mode: AuditMode,
    seed: u64,
    next: AtomicU64,
    dropped: AtomicU64,
}

/// One request, as the audit line records it.
pub struct Entry<'a> {
    /// Who asked what: user (empty name when authentication is off), verb, and the
    /// object or collection of a resource request.
    pub attrs: &'a Attributes,
    /// The request URI (path and query).
    pub uri: &'a str,
    /// The peer.
    pub peer: SocketAddr,
    /// The User-Agent header.
    pub user_agent: Option<&'a str>,
    /// The response code.
    pub code: u16,
    /// When the request arrived.
    pub received: SystemTime,
    /// `ResponseComplete`, or `ResponseStarted` for watches.
    pub stage: &'static str,
}

fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = Vec::new();
    crate::codec::gojson::timestamp(&mut out, d.as_secs() as i64, Some(d.subsec_micros()));
    String::from_utf8_lossy(&out).trim_matches('"').to_string()
}

impl AuditLog {
    /// Opens `path` for appending (created with mode 0600 if missing) and starts the
    /// writer thread; `buffer` lines may wait for it (at least one).
    pub fn open(path: &Path, mode: AuditMode, buffer: usize) -> Result<Arc<AuditLog>, AuditError> {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|source| AuditError::Open {
                path: path.display().to_string(),
                source,
            })?;
        if let Ok(meta) = file.metadata() {
            let perms = meta.permissions().mode() & 0o777;
            if meta.is_file() && perms & 0o077 != 0 {
                tracing::warn!(
                    file = %path.display(),
                    mode = format!("{perms:o}"),
                    "the audit log file may be read by others than its owner; it is appended to as it is (chmod 600 it)"
                );
            }
        }
        AuditLog::with_writer(file, path.display().to_string(), mode, buffer)
    }

    /// The log written to `out` by a thread of its own (`name` in its warnings).
    pub fn with_writer(
        out: impl Write + Send + 'static,
        name: String,
        mode: AuditMode,
        buffer: usize,
    ) -> Result<Arc<AuditLog>, AuditError> {
        let (tx, rx) = sync_channel::<Vec<u8>>(buffer.max(1));
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || {
                let mut w = std::io::BufWriter::new(out);
                while let Ok(line) = rx.recv() {
                    let mut ok = w.write_all(&line).is_ok();
                    // Write what is queued, then flush once.
                    while let Ok(more) = rx.try_recv() {
                        ok &= w.write_all(&more).is_ok();
                    }
                    ok &= w.flush().is_ok();
                    if !ok {
                        metrics::counter!("watchd_audit_write_errors_total").increment(1);
                        tracing::warn!(file = %name, "audit log write failed");
                    }
                }
            })
            .map_err(AuditError::Thread)?;
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64
            ^ u64::from(std::process::id()).rotate_left(32);
        Ok(Arc::new(AuditLog {
            tx,
            mode,
            seed,
            next: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }))
    }

    /// Lines dropped so far (batch mode with a full queue, or a writer that stopped).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// A unique id, formatted as a UUID.
    fn audit_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mix = |x: u64| {
            let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let (a, b) = (mix(self.seed ^ n), mix(self.seed.rotate_left(17) ^ !n));
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            (a & 0x0fff) | 0x4000,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    /// The line of `e`.
    pub fn line(&self, e: &Entry<'_>, now: SystemTime) -> Value {
        let mut v = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": self.audit_id(),
            "stage": e.stage,
            "requestURI": e.uri,
            "verb": e.attrs.verb,
            "user": {},
            "sourceIPs": [e.peer.ip().to_string()],
            "responseStatus": {"metadata": {}, "code": e.code},
            "requestReceivedTimestamp": timestamp(e.received),
            "stageTimestamp": timestamp(now),
        });
        let u = &e.attrs.user;
        if !u.name.is_empty() {
            let mut user = json!({"username": u.name});
            if !u.uid.is_empty() {
                user["uid"] = json!(u.uid);
            }
            if !u.groups.is_empty() {
                user["groups"] = json!(u.groups);
            }
            if !u.extra.is_empty() {
                user["extra"] = json!(u.extra);
            }
            v["user"] = user;
        }
        if let Some(ua) = e.user_agent {
            v["userAgent"] = json!(ua);
        }
        if e.attrs.resource_request {
            let a = e.attrs;
            let mut r = json!({"resource": a.resource, "apiVersion": a.api_version});
            for (k, val) in [
                ("namespace", &a.namespace),
                ("name", &a.name),
                ("apiGroup", &a.api_group),
                ("subresource", &a.subresource),
            ] {
                if !val.is_empty() {
                    r[k] = json!(val);
                }
            }
            v["objectRef"] = r;
        }
        v
    }

    /// Queues the line of `e`; with the queue full, waits for room (blocking mode) or
    /// drops it (batch mode).
    pub fn record(&self, e: &Entry<'_>) {
        let mut line = serde_json::to_vec(&self.line(e, SystemTime::now())).unwrap_or_default();
        line.push(b'\n');
        let queued = match self.tx.try_send(line) {
            Ok(()) => true,
            Err(TrySendError::Full(line)) if self.mode == AuditMode::Blocking => {
                metrics::counter!("watchd_audit_events_blocked_total").increment(1);
                send_blocking(&self.tx, line)
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        };
        if queued {
            metrics::counter!("watchd_audit_events_total").increment(1);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("watchd_audit_events_dropped_total").increment(1);
        }
    }
}

/// Waits until `line` is queued (false: the writer is gone). On a worker thread of a
/// multi-threaded runtime, through `block_in_place`, so the worker's other tasks move to
/// another thread; anywhere else (a plain thread, a current-thread runtime) the thread
/// itself waits.
fn send_blocking(tx: &SyncSender<Vec<u8>>, line: Vec<u8>) -> bool {
    let send = move || tx.send(line).is_ok();
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(send)
        }
        _ => send(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::UserInfo;
    use std::time::Duration;

    #[test]
    fn lines_have_the_audit_event_shape_and_reach_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let log = AuditLog::open(&path, AuditMode::Blocking, 16).unwrap();
        let attrs = Attributes {
            user: UserInfo {
                name: "alice".into(),
                groups: vec!["dev".into(), "system:authenticated".into()],
                ..UserInfo::default()
            },
            verb: "list".into(),
            resource_request: true,
            api_version: "v1".into(),
            resource: "pods".into(),
            namespace: "ns1".into(),
            ..Attributes::default()
        };
        let received = UNIX_EPOCH + Duration::from_micros(1_800_000_000_123_456);
        let e = Entry {
            attrs: &attrs,
            uri: "/api/v1/namespaces/ns1/pods?limit=5",
            peer: "127.0.0.1:5555".parse().unwrap(),
            user_agent: Some("kubectl/v1.33"),
            code: 200,
            received,
            stage: "ResponseComplete",
        };
        let v = log.line(&e, received + Duration::from_millis(2));
        assert_eq!(v["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(v["level"], "Metadata");
        assert_eq!(v["user"]["username"], "alice");
        assert_eq!(v["user"]["groups"][1], "system:authenticated");
        assert_eq!(
            v["objectRef"],
            json!({"resource": "pods", "namespace": "ns1", "apiVersion": "v1"})
        );
        assert_eq!(v["responseStatus"]["code"], 200);
        assert_eq!(v["sourceIPs"], json!(["127.0.0.1"]));
        assert_eq!(v["requestReceivedTimestamp"], "2027-01-15T08:00:00.123456Z");
        assert_eq!(v["stageTimestamp"], "2027-01-15T08:00:00.125456Z");
        let id = v["auditID"].as_str().unwrap().to_string();
        assert_eq!(id.len(), 36);
        assert_ne!(
            log.line(&e, received)["auditID"],
            json!(id),
            "ids are unique"
        );

        log.record(&e);
        let found = (0..200).find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            text.lines().next().map(String::from)
        });
        let line: Value = serde_json::from_str(&found.expect("a line is written")).unwrap();
        assert_eq!(line["verb"], "list");
        assert_eq!(line["requestURI"], "/api/v1/namespaces/ns1/pods?limit=5");
    }

    /// A writer that takes nothing until its gate opens, then keeps what it is given; it
    /// says when it starts waiting at the gate.
    struct Gated {
        gate: Option<std::sync::mpsc::Receiver<()>>,
        waiting: std::sync::mpsc::Sender<()>,
        out: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl Write for Gated {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if let Some(gate) = self.gate.take() {
                let _ = self.waiting.send(());
                let _ = gate.recv();
            }
            self.out.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            self.write(&[]).map(|_| ())
        }
    }

    /// A log of `mode` with a queue of 2 lines and a writer stalled until the sender
    /// returned is used (or dropped). The writer thread holds exactly one line, `"/held"`,
    /// when this returns, so the queue's room is known: its 2 lines.
    fn stalled(
        mode: AuditMode,
    ) -> (
        Arc<AuditLog>,
        std::sync::mpsc::Sender<()>,
        Arc<std::sync::Mutex<Vec<u8>>>,
    ) {
        let (open, gate) = std::sync::mpsc::channel();
        let (waiting_tx, waiting) = std::sync::mpsc::channel();
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        let w = Gated {
            gate: Some(gate),
            waiting: waiting_tx,
            out: out.clone(),
        };
        let log = AuditLog::with_writer(w, "test".into(), mode, 2).unwrap();
        record_uri(&log, "/held");
        waiting
            .recv_timeout(Duration::from_secs(10))
            .expect("the writer takes the first line and waits at its gate");
        (log, open, out)
    }

    fn record_uri(log: &AuditLog, uri: &str) {
        let attrs = Attributes {
            verb: "get".into(),
            ..Attributes::default()
        };
        log.record(&Entry {
            attrs: &attrs,
            uri,
            peer: "127.0.0.1:1".parse().unwrap(),
            user_agent: None,
            code: 200,
            received: SystemTime::now(),
            stage: "ResponseComplete",
        });
    }

    /// The requestURIs of the lines written, once `n` arrived (10 s at most).
    fn written_uris(out: &std::sync::Mutex<Vec<u8>>, n: usize) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
            let uris: Vec<String> = text
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["requestURI"].to_string())
                .collect();
            if uris.len() >= n || std::time::Instant::now() > deadline {
                return uris;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn blocking_mode_waits_for_room_and_loses_no_line() {
        let (log, open, out) = stalled(AuditMode::Blocking);
        let writer = {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    record_uri(&log, &format!("/r/{i}"));
                }
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !writer.is_finished(),
            "50 lines cannot all be queued while the writer is stalled"
        );
        open.send(()).unwrap();
        writer.join().unwrap();
        let uris = written_uris(&out, 51);
        let want: Vec<String> = std::iter::once("\"/held\"".to_string())
            .chain((0..50).map(|i| format!("\"/r/{i}\"")))
            .collect();
        assert_eq!(uris, want, "every line, once, in order");
        assert_eq!(log.dropped(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_request_waiting_for_the_queue_does_not_hold_its_worker() {
        let (log, open, out) = stalled(AuditMode::Blocking);
        let recorder = {
            let log = log.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    record_uri(&log, &format!("/w/{i}"));
                }
            })
        };
        // The one worker's other tasks still run while the recorder waits.
        let ticks = tokio::spawn(async {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        tokio::time::timeout(Duration::from_secs(10), ticks)
            .await
            .expect("other tasks run while a request waits for the audit queue")
            .unwrap();
        assert!(!recorder.is_finished());
        open.send(()).unwrap();
        recorder.await.unwrap();
        assert_eq!(written_uris(&out, 21).len(), 21, "the held line and 20");
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn batch_mode_drops_and_counts_what_a_full_queue_cannot_take() {
        let (log, open, out) = stalled(AuditMode::Batch);
        let started = std::time::Instant::now();
        for i in 0..50 {
            record_uri(&log, &format!("/b/{i}"));
        }
        assert!(started.elapsed() < Duration::from_secs(5), "never waits");
        assert_eq!(
            log.dropped(),
            48,
            "the queue's 2 lines are kept, the rest dropped"
        );
        open.send(()).unwrap();
        let want = ["\"/held\"", "\"/b/0\"", "\"/b/1\""];
        assert_eq!(written_uris(&out, 3), want);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(written_uris(&out, 3), want, "nothing else is written");
    }

    #[test]
    fn the_file_is_created_0600_and_an_existing_one_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.log");
        let _log = AuditLog::open(&path, AuditMode::Blocking, 4).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        let old = dir.path().join("old.log");
        std::fs::write(&old, b"").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o640)).unwrap();
        let _log = AuditLog::open(&old, AuditMode::Blocking, 4).unwrap();
        let mode = std::fs::metadata(&old).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o640,
            "as kube-apiserver, an existing file is not chmodded"
        );
    }
}
