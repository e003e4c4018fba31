//! Every tunable default of the daemon in one place, each with the reason for its value.

use std::time::Duration;

/// How long a consistent read waits for ingestion to reach etcd's current revision before
/// answering 504, as kube-apiserver does.
pub const CONSISTENT_READ_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a "not older than N" read waits for the cache to reach N (kube-apiserver: 3 s).
pub const RESOURCE_VERSION_WAIT: Duration = Duration::from_secs(3);

/// How far back watches may resume: etcd's default compaction keeps 5 minutes, and
/// kube-apiserver's clients expect about that much.
pub const DEFAULT_HISTORY_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Upper bound of events kept per resource, whatever the window: kube-apiserver's largest
/// watch cache capacity. Slots are allocated in chunks as they fill, so idle resources
/// pay for one chunk only.
pub const DEFAULT_HISTORY_MAX_EVENTS: usize = 102_400;

/// Older snapshots kept per resource for `Exact` and paginated lists (bounded by the
/// history window too). Snapshots share structure, so each costs about the keys it changed.
pub const DEFAULT_SNAPSHOT_RING: usize = 4096;

/// Keys per page of the initial etcd range; small enough to stay far below gRPC message
/// limits with 2 KiB objects, large enough that a 100k-object cluster loads in 100 calls.
pub const INITIAL_LIST_PAGE: i64 = 1000;

/// Keys per page of the consistency check's keys-only range (about 100 bytes each).
pub const CONSISTENCY_CHECK_PAGE: i64 = 10_000;

/// Largest etcd response accepted (etcd's own request limit is 1.5 MiB per value).
pub const ETCD_MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// At the stop, how long the requests in flight (a list streaming) are given to finish
/// before the connections left are aborted.
pub const STOP_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The first delay before a source is followed again after a failure, as client-go's
/// reflector (800 ms, doubling to [`RECONNECT_BACKOFF_MAX`], each wait jittered up to
/// twice its length), so that replicas and tiers that lost their source together do not
/// come back, and re-list, in lockstep.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(800);
/// Largest delay between etcd reconnect attempts.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// An attempt that followed its source this long without failing resets the backoff
/// (client-go's reflector: two minutes).
pub const RECONNECT_BACKOFF_RESET: Duration = Duration::from_secs(120);

/// How long before a watch's `timeoutSeconds` ends its last bookmark is sent.
pub const BOOKMARK_BEFORE_TIMEOUT: Duration = Duration::from_secs(2);

/// Upper bound on an HTTP request line plus headers (kube-apiserver's is 1 MiB).
pub const MAX_REQUEST_HEAD: usize = 1024 * 1024;

/// Longest query string accepted before answering 400 (protects selector parsers). Below
/// hyper's fixed 64 KiB request-target limit, past which it answers 414 by itself.
pub const MAX_QUERY_LEN: usize = 32 * 1024;

/// Largest `timeoutSeconds` honoured for a watch; longer ones are clamped.
pub const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Default watch duration when the client sends no `timeoutSeconds` (kube-apiserver picks
/// a random value in [30m, 60m); a fixed long one is fine since clients resume).
pub const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(45 * 60);

/// Most events written to one watcher in one vectored write.
pub const WATCH_BATCH_MAX: usize = 256;

/// The longest `--watch-batch-window` accepted: past a second the added latency would
/// pass the latency budget of every Kubernetes client (and bookmarks' timing).
pub const MAX_WATCH_BATCH_WINDOW: Duration = Duration::from_secs(1);

/// Items per body frame when streaming a list from a snapshot.
pub const LIST_FRAME_ITEMS: usize = 256;

/// Longest a TLS handshake may take before the connection is dropped (a peer that opens
/// a connection and says nothing must not hold it forever).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the serving certificate's and the client CAs' files are checked for a change.
pub const TLS_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// Concurrent HTTP/2 streams per connection: kube-apiserver's default
/// (`--http2-max-streams-per-connection`), enough for an informer factory's watches.
pub const HTTP2_MAX_STREAMS: u32 = 1000;

/// The accept queue asked for on the listening sockets; the kernel caps it at
/// `net.core.somaxconn` (4096 on most systems).
pub const LISTEN_BACKLOG: u32 = 65_535;

/// Most bytes an HTTP/2 stream queues beyond what its flow-control window lets out
/// (hyper's default is 400 KiB): past it the stream's watch is not polled, so a stalled
/// stream holds its cursor and at most this plus one frame, not a copy of every event.
/// Enough for a frame of a batch of kilobyte events while the window is open.
pub const HTTP2_STREAM_SEND_BUFFER: usize = 64 * 1024;

/// Most bytes an HTTP/2 connection gathers from its streams before writing them to the
/// socket (see `api::http::coalesce`): room for a poll's frames of a few hundred watch
/// streams of kilobyte objects, and the bound of what a stalled peer holds here.
pub const HTTP2_WRITE_BUFFER: usize = 256 * 1024;

/// How long an HTTP/1.1 connection may wait for the next request's headers (idle
/// between requests, or a client sending its headers slowly) before it is closed:
/// kube-apiserver's idle timeout, which is also client-go's pool keep-alive, so a client
/// rarely reuses a connection the server is closing.
pub const HTTP1_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How often an HTTP/2 connection is pinged when no frame arrived, and how long the
/// answer may take before the peer is taken for dead and the connection (with its
/// watches) is closed: a client that vanished without a FIN does not hold its streams.
pub const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);
/// See [`HTTP2_PING_INTERVAL`].
pub const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// How often an open watch looks whether the RBAC policy changed (and, if it did, whether
/// the watch is still allowed): a revoked permission ends the watch within this.
pub const PERMISSION_RECHECK_INTERVAL: Duration = Duration::from_secs(1);

/// `Retry-After` seconds of a request refused by a per-user limit.
pub const USER_LIMIT_RETRY_AFTER: u64 = 1;

/// Why a duration (a flag's value) cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing but whitespace.
    #[error("empty duration (write one as Go does: 300s, 5m, 1h30m, 250ms)")]
    Empty,
    /// A unit without a number before it, or a number too large to read.
    #[error("invalid duration {0:?} (write one as Go does: 300s, 5m, 1h30m, 250ms)")]
    Invalid(String),
    /// A number followed by something other than `ms`, `s`, `m` or `h`.
    #[error("invalid unit {unit:?} in duration {input:?} (use ms, s, m, h)")]
    Unit {
        /// The unit as written.
        unit: String,
        /// The whole duration.
        input: String,
    },
    /// Longer than a `Duration` holds.
    #[error("duration {0:?} is too long")]
    TooLong(String),
}

/// Parses Go-style durations: `300s`, `5m`, `1h30m`, `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(DurationError::Empty);
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    let too_long = || DurationError::TooLong(s.to_owned());
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| DurationError::Invalid(s.to_owned()))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let seconds_per = match &rest[..unit_len] {
            "ms" => None,
            "s" => Some(1),
            "m" => Some(60),
            "h" => Some(3600),
            u => {
                return Err(DurationError::Unit {
                    unit: u.to_owned(),
                    input: s.to_owned(),
                })
            }
        };
        let unit = match seconds_per {
            None => Duration::from_millis(n),
            Some(k) => Duration::from_secs(n.checked_mul(k).ok_or_else(too_long)?),
        };
        total = total.checked_add(unit).ok_or_else(too_long)?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Largest upstream `/apis` answer merged with the cache's groups (a cluster with
/// hundreds of aggregated and custom groups is well under a megabyte).
pub const MAX_DISCOVERY_BYTES: usize = 16 << 20;

/// How many etcd revisions the first list goes back, as far as etcd still has them, to
/// replay into the event log: a watch opened before watchd restarted resumes rather than
/// re-lists (kube-apiserver's default compaction keeps about 5 minutes, which a busy
/// cluster fills with tens of thousands of revisions).
pub const STARTUP_REPLAY_REVISIONS: i64 = 100_000;

/// Largest get or list body gzipped at once on the thread that handles the request:
/// kube-apiserver's `defaultGzipThresholdBytes` (128 KiB), its line between small and
/// large responses; at level 1 that is a fraction of a millisecond. Larger bodies are
/// compressed as the client reads them, off the runtime's worker threads
/// (`api/http/gzip.rs`).
pub const GZIP_INLINE_MAX_BYTES: usize = 128 * 1024;

/// Input compressed per step of a streamed gzip body: about a millisecond of deflate at
/// level 1, so a step holds a compression thread briefly and other lists take turns; the
/// step's output (a frame, tens of KiB for JSON) is all a slow reader makes watchd hold
/// beyond the list's shared segments and the compressor's state.
pub const GZIP_STEP_BYTES: usize = 128 * 1024;

/// Audit lines queued for the writer thread by default (`--audit-log-batch-buffer-size`):
/// kube-apiserver's default batch buffer size.
pub const AUDIT_BUFFER_SIZE: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2m0s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(
            parse_duration("99999999999999999999h"),
            Err(DurationError::Invalid("99999999999999999999h".into()))
        );
        assert_eq!(
            parse_duration("9999999999999999h"),
            Err(DurationError::TooLong("9999999999999999h".into()))
        );
    }
}
