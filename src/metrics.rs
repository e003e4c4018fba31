//! Prometheus metrics: the recorder, and the description of every metric watchd exports.

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

/// How often histogram samples are folded into their buckets: without it they would be
/// kept one by one until `/metrics` is read.
pub const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds histogram samples into buckets every [`UPKEEP_INTERVAL`], for as long as the
/// process runs.
pub fn spawn_upkeep(handle: PrometheusHandle) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            handle.run_upkeep();
        }
    });
}

/// Records the standard process metrics (as Prometheus's client libraries name them),
/// read from `/proc/self` when `/metrics` is rendered: CPU seconds (whole seconds, as a
/// counter holds them), resident and virtual memory, open and allowed file descriptors,
/// and the start time.
pub fn record_process() {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // The fields after the command, which is in parentheses and may hold spaces.
    let Some(fields) = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect::<Vec<_>>())
    else {
        return;
    };
    // SAFETY: sysconf has no preconditions; it reads constants of the system.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let ticks = ticks.max(1) as f64;
    // Field numbers as proc(5) counts them, less the two before the fields read here.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    if let (Some(utime), Some(stime)) = (field(14), field(15)) {
        metrics::counter!("process_cpu_seconds_total").absolute(((utime + stime) / ticks) as u64);
    }
    if let Some(vsize) = field(23) {
        metrics::gauge!("process_virtual_memory_bytes").set(vsize);
    }
    if let Some(rss) = field(24) {
        metrics::gauge!("process_resident_memory_bytes").set(rss * page.max(1) as f64);
    }
    if let (Some(start), Some(boot)) = (field(22), boot_time()) {
        metrics::gauge!("process_start_time_seconds").set(boot + start / ticks);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        metrics::gauge!("process_open_fds").set(fds.count() as f64);
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        metrics::gauge!("process_max_fds").set(limit.rlim_cur as f64);
    }
}

/// When the machine booted, seconds since the epoch (`btime` in `/proc/stat`).
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Why the metrics recorder could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The histogram buckets of the `_seconds` metrics were refused (a bug in watchd).
    #[error("invalid histogram buckets for the *_seconds metrics: {0}")]
    Buckets(#[source] BuildError),
    /// The global recorder could not be installed (one was already, or the upkeep could
    /// not start).
    #[error("cannot install the Prometheus recorder: {0}")]
    Install(#[source] BuildError),
}

/// Installs the global recorder and describes every metric; the handle renders `/metrics`.
pub fn install() -> Result<PrometheusHandle, MetricsError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
            // Up to a minute: a list of a large resource, a consistent read waiting for
            // a slow source, a webhook timing out.
            &[
                0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0,
            ],
        )
        .map_err(MetricsError::Buckets)?
        .install_recorder()
        .map_err(MetricsError::Install)?;
    describe();
    // Exported from the start, at zero, rather than from their first change: a
    // dashboard shows them and an alert on them sees the first one.
    for name in [
        "watchd_rendered_json_bytes",
        "watchd_encoded_protobuf_bytes",
    ] {
        metrics::gauge!(name).increment(0.0);
    }
    metrics::counter!("watchd_rendered_json_evictions_total").increment(0);
    Ok(handle)
}

fn describe() {
    describe_counter!(
        "watchd_openapi_renders_total",
        "OpenAPI documents rendered: on the first /openapi request, and on the first after the served resources change (a CRD added, changed or removed)."
    );
    describe_counter!(
        "watchd_authentications_total",
        "Requests authenticated, by method (x509, token-file, serviceaccount, webhook, requestheader, anonymous) and result."
    );
    describe_counter!(
        "watchd_authorization_denials_total",
        "Requests refused by the authorizers (403, or 500 when one failed and none allowed)."
    );
    describe_counter!(
        "watchd_authorization_webhook_errors_total",
        "Authorization webhook calls that failed (the mode then has no opinion)."
    );
    describe_counter!(
        "watchd_webhook_requests_total",
        "Calls to the TokenReview and SubjectAccessReview webhooks, each attempt, by HTTP code (<error>: no answer)."
    );
    describe_histogram!(
        "watchd_webhook_request_duration_seconds",
        Unit::Seconds,
        "Duration of one webhook call attempt, by HTTP code."
    );
    describe_counter!(
        "watchd_webhook_cache_total",
        "Webhook decisions looked up in the cache, by webhook (authentication, authorization) and result (hit, miss)."
    );
    describe_counter!(
        "watchd_rbac_index_updates_total",
        "Times the RBAC index took in a changed RBAC resource (Roles, ClusterRoles, RoleBindings, ClusterRoleBindings), off the request path, by how: objects (the changed objects its event log names) or rebuild (read whole: a new epoch, or events lost; objects that did not change are skipped)."
    );
    describe_counter!(
        "watchd_rbac_index_objects_applied_total",
        "Roles, ClusterRoles and bindings (re)read into the RBAC index."
    );
    describe_counter!(
        "watchd_watch_permission_rechecks_total",
        "Times an open watch's permission was checked again because an RBAC change concerned its user (any RBAC change with a Webhook authorization mode)."
    );
    describe_gauge!(
        "watchd_rbac_unreadable_objects",
        "RBAC objects in the cache the authorizer could not read (they grant nothing)."
    );
    describe_counter!(
        "watchd_audit_events_total",
        "Audit lines queued for --audit-log-path."
    );
    describe_counter!(
        "watchd_audit_events_dropped_total",
        "Audit lines dropped: the writer's queue was full in --audit-log-mode=batch, or the writer had stopped."
    );
    describe_counter!(
        "watchd_audit_events_blocked_total",
        "Requests that waited for room in the audit log's queue (--audit-log-mode=blocking)."
    );
    describe_counter!(
        "watchd_http_gzip_errors_total",
        "Gzip responses compressed as they stream that ended early (the client sees a truncated body)."
    );
    describe_counter!(
        "watchd_audit_write_errors_total",
        "Failed writes to the audit log file."
    );
    describe_counter!(
        "watchd_watches_revoked_total",
        "Open watches ended with 403 because an RBAC change no longer allows them."
    );
    describe_counter!(
        "watchd_user_limit_rejections_total",
        "Requests answered 429 because the user was at a per-user limit, by kind (watch, list)."
    );
    describe_counter!(
        "watchd_tls_handshake_failures_total",
        "TLS handshakes that failed or timed out."
    );
    describe_counter!(
        "watchd_tls_certificate_reloads_total",
        "Serving certificate reloads after its files changed, by result (a failure keeps the old one)."
    );
    describe_counter!(
        "watchd_tls_client_ca_reloads_total",
        "Client and front-proxy CA reloads after their files changed, by result (a failure keeps the old ones)."
    );
    describe_gauge!(
        "watchd_applied_revision",
        "Newest etcd revision fully applied to the cache."
    );
    describe_gauge!(
        "watchd_etcd_revision",
        "etcd's store revision as last reported by the watch."
    );
    describe_gauge!(
        "watchd_revision_lag",
        "Revisions etcd is ahead of the cache."
    );
    describe_gauge!("watchd_epoch", "Cache epoch; bumped by each full re-list.");
    describe_counter!(
        "watchd_events_ingested_total",
        "Object changes applied, per resource."
    );
    describe_counter!(
        "watchd_undecodable_values_total",
        "etcd values that could not be decrypted or decoded, per resource and reason; each makes its resource pending until fixed."
    );
    describe_gauge!(
        "watchd_unreadable_objects",
        "Keys of a resource whose current etcd value cannot be read; while above 0 the resource answers as a watch cache that is not ready (429, or reads from etcd)."
    );
    describe_counter!(
        "watchd_json_protobuf_encodes_total",
        "Protobuf encodings of JSON-stored object revisions, for protobuf readers: at most one per revision."
    );
    describe_counter!(
        "watchd_json_protobuf_encode_failures_total",
        "JSON-stored objects without a protobuf form (their JSON does not fit their kind's schema); served as JSON only."
    );
    describe_gauge!(
        "watchd_encoded_protobuf_bytes",
        Unit::Bytes,
        "Bytes of protobuf encoded on first use from JSON-stored objects and still cached (not in watchd_cached_bytes)."
    );
    describe_counter!(
        "watchd_protobuf_json_renders_total",
        "JSON renderings of protobuf-stored object revisions: at most one per revision, on first use by a JSON reader."
    );
    describe_counter!(
        "watchd_protobuf_metadata_renders_total",
        "metadata-only JSON renderings of protobuf-stored object revisions, for PartialObjectMetadata readers: at most one per revision."
    );
    describe_gauge!(
        "watchd_rendered_json_bytes",
        Unit::Bytes,
        "Bytes of JSON (whole objects and metadata alone) rendered on first use from protobuf-stored objects and still cached (not in watchd_cached_bytes)."
    );
    describe_counter!(
        "watchd_protobuf_render_failures_total",
        "Protobuf values that validated at ingest but failed to render (served as metadata only); always 0 unless there is a bug."
    );
    describe_counter!(
        "watchd_protobuf_unknown_fields_total",
        "Protobuf fields skipped because the schema (Kubernetes 1.34) does not know them, per kind."
    );
    describe_counter!(
        "watchd_protobuf_unknown_kinds_total",
        "Protobuf objects of kinds newer than the schema, served with metadata only, per kind."
    );
    describe_counter!(
        "watchd_etcd_reconnects_total",
        "Times the etcd connection was re-established."
    );
    describe_counter!(
        "watchd_relists_total",
        "Full re-lists after etcd compacted past the resume revision."
    );
    describe_counter!(
        "watchd_upstream_relists_total",
        "Re-lists of one resource from the upstream API server (it answered 410 to the resume), per resource."
    );
    describe_counter!(
        "watchd_upstream_reconnects_total",
        "Lists or watches of the upstream API server that failed and were retried after a backoff, per resource."
    );
    describe_counter!(
        "watchd_upstream_progress_probes_total",
        "Probe watches of the upstream that proved a quiet resource current for a consistent read (result: proven, unproven)."
    );
    describe_counter!(
        "watchd_proxy_requests_total",
        "Requests passed through to the upstream API server, by the upstream's status code (<error>: not reached)."
    );
    describe_histogram!(
        "watchd_proxy_response_head_seconds",
        Unit::Seconds,
        "Time until the upstream answered a passed-through request's head."
    );
    describe_gauge!(
        "watchd_proxy_upgraded_connections",
        "Upgraded connections (exec, attach, port-forward) being carried to the upstream."
    );
    describe_gauge!("watchd_cached_objects", "Objects cached, per resource.");
    describe_counter!(
        "watchd_deletions_without_last_state_total",
        "Deletions of objects the cache never held whose last state etcd had compacted before watchd read it: no DELETED event was sent for them."
    );
    describe_counter!(
        "watchd_history_swept_total",
        "Events and past snapshots (kind) dropped from resources' history by the periodic sweep, once older than --history-window with no change since to evict them."
    );
    describe_gauge!(
        "watchd_history_events",
        "Events held in a resource's history (what watches resume from), per resource."
    );
    describe_gauge!(
        "watchd_history_oldest_revision",
        "The oldest revision a watch of the resource can resume from, per resource."
    );
    describe_histogram!(
        "watchd_consistent_read_wait_seconds",
        Unit::Seconds,
        "How long consistent reads (resourceVersion unset) waited for the cache to reach the source's current revision, asking it included, per resource."
    );
    describe_gauge!(
        "watchd_build_info",
        "Always 1; its labels say which watchd runs (version)."
    );
    describe_counter!(
        "watchd_list_objects_total",
        "Objects sent in HTTP list responses whose body was written to its end, per resource."
    );
    describe_counter!(
        "watchd_list_bytes_total",
        Unit::Bytes,
        "Bytes of HTTP list responses written to their end (before any gzip), per resource."
    );
    describe_histogram!(
        "watchd_list_duration_seconds",
        Unit::Seconds,
        "From a list page's making to the end of its body as the client took it, per resource."
    );
    describe_counter!(
        "watchd_grpc_calls_total",
        "gRPC calls ended, by method (/package.Service/Method) and status code (OK, NOT_FOUND, ...)."
    );
    describe_counter!(
        "process_cpu_seconds_total",
        Unit::Seconds,
        "User and system CPU time the process used, whole seconds."
    );
    describe_gauge!(
        "process_resident_memory_bytes",
        Unit::Bytes,
        "Resident memory."
    );
    describe_gauge!(
        "process_virtual_memory_bytes",
        Unit::Bytes,
        "Virtual memory."
    );
    describe_gauge!("process_open_fds", "Open file descriptors.");
    describe_gauge!("process_max_fds", "The open file descriptor limit.");
    describe_gauge!(
        "process_start_time_seconds",
        Unit::Seconds,
        "When the process started, seconds since the epoch."
    );
    describe_gauge!(
        "watchd_resource_init_seconds",
        Unit::Seconds,
        "Seconds from the start until a resource was first loaded and served from the cache, per resource."
    );
    describe_counter!(
        "watchd_storage_consistency_checks_total",
        "Consistency checks of a resource's cache against etcd (--consistency-check-interval), per resource and result: match, mismatch (logged, and the resource re-listed), error (etcd did not answer)."
    );
    describe_gauge!(
        "watchd_storage_consistency_check_seconds",
        "How long the last consistency check of every resource took, seconds."
    );
    describe_counter!(
        "watchd_dispatch_passes_total",
        "Wake passes run, per dispatch thread."
    );
    describe_counter!(
        "watchd_dispatch_wakes_total",
        "Watchers woken by wake passes, per dispatch thread (with an indexed field, only those an event concerns)."
    );
    describe_gauge!(
        "watchd_dispatch_threads_active",
        "Dispatch threads running wake passes now (they join as the load needs them)."
    );
    describe_counter!(
        "watchd_etcd_watch_fragments_total",
        "Fragments of etcd watch responses received (a response over etcd's request limit, sent in parts)."
    );
    describe_counter!(
        "watchd_etcd_watch_reopens_total",
        "etcd watch streams opened again once caught up after large responses, to give back the receive buffer they grew."
    );
    describe_gauge!(
        "watchd_rendered_json_budget_bytes",
        "The budget of rendered JSON kept (--rendered-json-bytes, or a quarter of the memory limit)."
    );
    describe_counter!(
        "watchd_rendered_json_evictions_total",
        "Rendered JSON given up to stay within its budget (rendered again when read)."
    );
    describe_gauge!(
        "watchd_cached_bytes",
        Unit::Bytes,
        "Bytes of cached objects, per resource."
    );
    describe_gauge!("watchd_watchers", "Open watches, per resource.");
    describe_counter!(
        "watchd_etcd_replaced_total",
        "Times the etcd answering was not the one the cache followed (another cluster ID, a revision below the applied one, or a history without the last change applied: restored from a backup, or replaced); each ended every watch with 410 and re-listed."
    );
    describe_counter!(
        "watchd_consistent_reads_source_behind_total",
        "Consistent reads refused with 429 because the source's current revision was below the cache's applied one (an etcd restored or replaced, not yet noticed by ingestion)."
    );
    describe_counter!(
        "watchd_json_values_normalized_total",
        "JSON values read through serde_json before caching because keys on the way to metadata or a selectable field were duplicated or escaped (JSON readers keep the last duplicate)."
    );
    describe_gauge!(
        "watchd_grpc_watch_many_streams",
        "Open gRPC WatchMany streams (each also holds a cursor per collection)."
    );
    describe_counter!(
        "watchd_grpc_watch_many_events_sent_total",
        "Events (changes, initial ADDED events, bookmarks and errors) sent on gRPC WatchMany streams."
    );
    describe_counter!(
        "watchd_grpc_watch_many_expired_total",
        "gRPC WatchMany streams ended with 410 Expired (a cursor fell out of the history window, or a new epoch)."
    );
    describe_counter!(
        "watchd_watchers_ended_total",
        "Watches ended, per resource and reason: timeout (timeoutSeconds), expired (410, out of the history window), relist (410, new epoch), reinitializing (the resource's cache re-initializes), closed (the client went away, the connection closed or timed out writing, or a 403 ended it)."
    );
    describe_counter!(
        "watchd_watch_events_sent_total",
        "Items written to watchers (events, synthetic ADDED events, and the ERROR or end-of-initial-events BOOKMARK in the same frames), per resource."
    );
    describe_counter!(
        "watchd_watch_bytes_sent_total",
        Unit::Bytes,
        "Bytes of watch frames handed to the connections, per resource."
    );
    describe_counter!(
        "watchd_watch_bookmarks_sent_total",
        "BOOKMARK events sent, per resource."
    );
    describe_histogram!(
        "watchd_watch_dispatch_lag_seconds",
        Unit::Seconds,
        "Time from an event's being applied to the cache until a watcher's frame holding it is built (the oldest event of each frame)."
    );
    describe_gauge!(
        "watchd_memory_limit_bytes",
        Unit::Bytes,
        "--memory-limit (default: the cgroup's limit); 0: none."
    );
    describe_gauge!(
        "watchd_memory_soft_limit_bytes",
        Unit::Bytes,
        "The resident set past which new full lists and new watches are refused (85 % of the limit)."
    );
    describe_gauge!(
        "watchd_memory_resident_bytes",
        Unit::Bytes,
        "The process's resident set, read every 200 ms while a memory limit is set."
    );
    describe_gauge!(
        "watchd_memory_pressure",
        "1 while the resident set is past the soft mark and new full lists and watches are refused, else 0."
    );
    describe_counter!(
        "watchd_memory_refusals_total",
        "New full lists and watches refused with 429 (gRPC: RESOURCE_EXHAUSTED) past the memory soft mark, by kind (list, watch)."
    );
    describe_counter!(
        "watchd_write_timeouts_total",
        "Connections closed because the peer read nothing of what was written for --write-timeout."
    );
    describe_counter!(
        "watchd_http2_socket_writes_total",
        "Writes to HTTP/2 sockets: each carries the frames of every stream a poll of the connection produced."
    );
    describe_counter!(
        "watchd_http2_watch_task_frames_total",
        "Frames of HTTP/2 watch streams queued by the stream's own task (initial events, its timer, or a stream that was out of send capacity) rather than by the dispatch pass that woke the watch."
    );
    describe_counter!(
        "watchd_watchers_expired_total",
        "Watches ended with 410 Expired (fell out of the history window or epoch ended), per resource."
    );
    describe_counter!(
        "watchd_requests_total",
        "HTTP requests by verb, resource and status code."
    );
    describe_histogram!(
        "watchd_request_duration_seconds",
        Unit::Seconds,
        "Latency of HTTP requests until the response head (watches: until the stream starts)."
    );
}
