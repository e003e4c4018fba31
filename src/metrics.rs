//! Prometheus metrics: the recorder, and the description of every metric watchd exports.

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Installs the global recorder and describes every metric; the handle renders `/metrics`.
pub fn install() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
            &[0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0],
        )
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())?;
    describe();
    Ok(handle)
}

fn describe() {
    describe_counter!(
        "watchd_authentications_total",
        "Requests authenticated, by method (x509, token-file, serviceaccount, requestheader, anonymous) and result."
    );
    describe_counter!(
        "watchd_authorization_denials_total",
        "Requests refused with 403 by the authorizers."
    );
    describe_counter!(
        "watchd_rbac_policy_builds_total",
        "Times the RBAC index was rebuilt because a Role, ClusterRole or binding changed."
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
        "Audit lines dropped because the writer's queue was full."
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
    describe_gauge!("watchd_cached_objects", "Objects cached, per resource.");
    describe_gauge!(
        "watchd_cached_bytes",
        Unit::Bytes,
        "Bytes of cached objects, per resource."
    );
    describe_gauge!("watchd_watchers", "Open watches, per resource.");
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
