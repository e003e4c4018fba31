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

/// How often the history of every resource is swept of events and snapshots older than
/// the window (at most; half the window when that is shorter). A change evicts them
/// too, but a resource that went quiet after a burst would keep the burst otherwise.
pub const HISTORY_SWEEP_INTERVAL: Duration = Duration::from_secs(10);

/// A sweep that dropped this many events or snapshots (a burst's worth) gives the
/// heap's free pages back to the system: what they held is freed between objects kept.
pub const HISTORY_SWEEP_TRIM_EVENTS: usize = 1024;
/// See [`HISTORY_SWEEP_TRIM_EVENTS`].
pub const HISTORY_SWEEP_TRIM_SNAPSHOTS: usize = 64;

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
    #[error("empty duration (write one as Go does: 300s, 5m, 1h30m, 1.5h, 250ms)")]
    Empty,
    /// Not a sequence of numbers each with its unit, or a number too large to read.
    #[error("invalid duration {0:?} (write one as Go does: 300s, 5m, 1h30m, 1.5h, 250ms)")]
    Invalid(String),
    /// A number without a unit after it.
    #[error("missing unit in duration {0:?} (use ns, us, ms, s, m, h)")]
    MissingUnit(String),
    /// A number followed by something other than a unit.
    #[error("invalid unit {unit:?} in duration {input:?} (use ns, us, ms, s, m, h)")]
    Unit {
        /// The unit as written.
        unit: String,
        /// The whole duration.
        input: String,
    },
    /// Below zero: no flag takes a negative duration.
    #[error("duration {0:?} is negative")]
    Negative(String),
    /// Longer than a `Duration` holds.
    #[error("duration {0:?} is too long")]
    TooLong(String),
}

/// Parses durations as Go's `time.ParseDuration` reads them (kube-apiserver's flags
/// take them): numbers, each with a fraction if wanted and a unit (`ns`, `us` or `µs`,
/// `ms`, `s`, `m`, `h`), one after another: `300s`, `5m`, `1h30m`, `1.5h`, `250ms`, `.5s`;
/// `0` alone. A leading `+` is allowed; a negative duration is refused.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let input = s.trim();
    let invalid = || DurationError::Invalid(s.to_owned());
    let too_long = || DurationError::TooLong(s.to_owned());
    let mut rest = match input.strip_prefix('-') {
        Some("0") => return Ok(Duration::ZERO),
        Some(_) => return Err(DurationError::Negative(s.to_owned())),
        None => input.strip_prefix('+').unwrap_or(input),
    };
    if rest.is_empty() {
        return Err(if input.is_empty() {
            DurationError::Empty
        } else {
            invalid()
        });
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(f) => f.split_at(f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len())),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos_per: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(DurationError::MissingUnit(s.to_owned())),
            u => {
                return Err(DurationError::Unit {
                    unit: u.to_owned(),
                    input: s.to_owned(),
                })
            }
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_long())?
        };
        let mut nanos = whole.checked_mul(nanos_per).ok_or_else(too_long)?;
        // The fraction, to the nanosecond (digits past what a nanosecond resolves are
        // dropped, as Go drops them).
        let mut scale = nanos_per;
        for d in fraction.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            nanos += u128::from(d - b'0') * scale;
        }
        total = total.checked_add(nanos).ok_or_else(too_long)?;
        rest = after;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| too_long())?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Largest upstream `/apis` answer merged with the cache's groups (a cluster with
/// hundreds of aggregated and custom groups is well under a megabyte).
pub const MAX_DISCOVERY_BYTES: usize = 16 << 20;

/// How many etcd revisions the first list goes back, as far as etcd still has them, to
/// replay into the event log: a watch opened before watchd restarted resumes rather than
/// re-lists (kube-apiserver's default compaction keeps about 5 minutes, which a busy
/// cluster fills with tens of thousands of revisions).
pub const STARTUP_REPLAY_REVISIONS: i64 = 100_000;

/// A watch response of etcd's past this many bytes of keys and values grows tonic's
/// receive buffer for the stream's life: once caught up, the stream is opened again to
/// give it back (`source::etcd`).
pub const WATCH_RECEIVE_KEEP_BYTES: usize = 256 * 1024;

/// The least time between two such openings of the etcd watch, whatever etcd sends.
pub const WATCH_REOPEN_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// kube-apiserver's `defaultGzipThresholdBytes` (128 KiB): a complete get or list body up
/// to this is sent as it is, even to a client that accepts gzip (client-go always
/// does); a larger one is compressed as the client reads it, off the runtime's worker
/// threads (`api/http/gzip.rs`). A watch list's frame up to this is compressed where it
/// is written (a fraction of a millisecond at level 1).
pub const GZIP_THRESHOLD_BYTES: usize = 128 * 1024;

/// Input compressed per step of a streamed gzip body: about a millisecond of deflate at
/// level 1, so a step holds a compression thread briefly and other lists take turns; the
/// step's output (a frame, tens of KiB for JSON) is all a slow reader makes watchd hold
/// beyond the list's shared segments and the compressor's state.
pub const GZIP_STEP_BYTES: usize = 128 * 1024;

/// Audit lines queued for the writer thread by default (`--audit-log-batch-buffer-size`):
/// kube-apiserver's default batch buffer size.
pub const AUDIT_BUFFER_SIZE: usize = 10_000;

/// Without `--rendered-json-bytes` or a memory limit, the rendered JSON kept is at most
/// this fraction (one in N) of the bytes of the cached objects: JSON renders at about
/// three times a protobuf object's bytes, so a full JSON list of a protobuf-stored cache
/// keeping all of it would triple the cache (S7: 4.7× the raw bytes after one).
pub const RENDERED_JSON_CACHE_SHARE: usize = 4;

/// ... and at least this many bytes, so that a small cache keeps all its renderings.
pub const RENDERED_JSON_MIN_BYTES: usize = 16 << 20;

/// Rendered JSON given up (`--rendered-json-bytes`) after which the heap's free pages are
/// given back to the system ...
pub const HEAP_TRIM_AFTER_BYTES: usize = 8 << 20;

/// ... this long after (one trim for the renderings a whole list gives up) ...
pub const HEAP_TRIM_DELAY: Duration = Duration::from_secs(1);

/// ... and at most once in this long.
pub const HEAP_TRIM_MIN_INTERVAL: Duration = Duration::from_secs(5);

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
            Err(DurationError::TooLong("99999999999999999999h".into()))
        );
        // Go's grammar: fractions, every unit, a sign.
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration(".5s"), Ok(ms(500)));
        assert_eq!(parse_duration("5.s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1.004s"), Ok(ms(1004)));
        assert_eq!(parse_duration("100.00100s"), Ok(ms(100_001)));
        assert_eq!(parse_duration("300us"), Ok(Duration::from_micros(300)));
        assert_eq!(parse_duration("3\u{b5}s"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_duration("3\u{3bc}s"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_duration("100ns"), Ok(Duration::from_nanos(100)));
        assert_eq!(parse_duration("1h1m1s1ms"), Ok(ms(3_661_001)));
        assert_eq!(parse_duration("+5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("-0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.1ns"), Ok(Duration::ZERO));
        assert_eq!(
            parse_duration("-5s"),
            Err(DurationError::Negative("-5s".into()))
        );
        assert_eq!(
            parse_duration("5"),
            Err(DurationError::MissingUnit("5".into()))
        );
        assert_eq!(
            parse_duration("3d"),
            Err(DurationError::Unit {
                unit: "d".into(),
                input: "3d".into()
            })
        );
        for bad in [".s", "1h-5m", "s", "+", "1..5s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_duration("9999999999999999h"),
            Err(DurationError::TooLong("9999999999999999h".into()))
        );
    }
}
