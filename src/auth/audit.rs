//! `--audit-log-path`: one JSON line per request, in the shape of kube-apiserver's
//! `audit.k8s.io/v1` Event at the Metadata level (who, what, where from, the response
//! code, when). Gets and lists are logged when their response is complete; a watch when
//! its response starts (kube-apiserver logs a watch's start and end; the end is not
//! logged here). Lines are written by a thread of their own: a request never waits for
//! the disk, and when the queue is full a line is dropped and counted.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::Attributes;

/// Lines queued for the writer before new ones are dropped.
const QUEUE: usize = 16 * 1024;

/// The audit log.
pub struct AuditLog {
    tx: SyncSender<Vec<u8>>,
    seed: u64,
    next: AtomicU64,
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
    /// Opens `path` for appending (created if missing) and starts the writer thread.
    pub fn open(path: &Path) -> Result<Arc<AuditLog>, String> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("--audit-log-path {}: {e}", path.display()))?;
        let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
        let name = path.display().to_string();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || {
                let mut w = std::io::BufWriter::new(file);
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
            .map_err(|e| format!("audit log writer: {e}"))?;
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64
            ^ u64::from(std::process::id()).rotate_left(32);
        Ok(Arc::new(AuditLog {
            tx,
            seed,
            next: AtomicU64::new(0),
        }))
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

    /// Queues the line of `e`.
    pub fn record(&self, e: &Entry<'_>) {
        let mut line = serde_json::to_vec(&self.line(e, SystemTime::now())).unwrap_or_default();
        line.push(b'\n');
        match self.tx.try_send(line) {
            Ok(()) => metrics::counter!("watchd_audit_events_total").increment(1),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                metrics::counter!("watchd_audit_events_dropped_total").increment(1)
            }
        }
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
        let log = AuditLog::open(&path).unwrap();
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
}
