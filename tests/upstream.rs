//! watchd in front of an upstream API server (`--upstream-url`, `--upstream-kubeconfig`):
//! what the cache does not answer passes through unchanged and streamed (checked against
//! a fake kube-apiserver that records every request), identities are carried as
//! impersonation, and a watchd fed by another watchd (a tier) serves the same objects at
//! the same resourceVersions, at the cost of one watch per resource on the tier above.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::http;
use support::kube::{configmap, pod, put_json};
use support::pki::{self, Pki};
use support::upstream::{FakeUpstream, FOLLOW_LOG_INTERVAL, FOLLOW_LOG_LINES, MARKER_HEADER};
use support::{Etcd, Watchd};

const WAIT: Duration = Duration::from_secs(10);

fn from_upstream(r: &http::Response) -> bool {
    r.header(MARKER_HEADER) == Some("yes")
}

/// etcd with one pod and one ConfigMap, a fake upstream writing to it, and watchd
/// reading etcd and passing the rest through.
async fn fronted(extra: &[&str]) -> (Etcd, FakeUpstream, Watchd) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_json(
        &mut kv,
        "/registry/pods/default/web",
        &pod("default", "web", &[]),
    )
    .await;
    put_json(
        &mut kv,
        "/registry/configmaps/default/settings",
        &configmap("default", "settings", "a"),
    )
    .await;
    let up = FakeUpstream::start(Some(etcd.client_url())).await;
    let upstream = format!("--upstream-url={}", up.url());
    let mut args = vec![upstream.as_str()];
    args.extend_from_slice(extra);
    let watchd = Watchd::start(&etcd.client_url(), &args);
    (etcd, up, watchd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_pass_through_unchanged_and_are_read_back_from_the_cache() {
    let (_etcd, up, watchd) = fronted(&[]).await;
    let base = watchd.base_url();
    let body = json!({
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "created", "namespace": "default"},
        "data": {"k": "v"},
    })
    .to_string();
    let r = http::request(
        "POST",
        &format!("{base}/api/v1/namespaces/default/configmaps?fieldManager=t%20m&dryRun=All"),
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer the-clients-own"),
            ("X-Custom", "one"),
            ("User-Agent", "test-client/1.0"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(from_upstream(&r), "the upstream answered the dry run");
    let seen = up.requests_to("/api/v1/namespaces/default/configmaps");
    let post = seen.last().expect("the POST reached the upstream");
    assert_eq!(post.method, "POST");
    assert_eq!(post.query.as_deref(), Some("fieldManager=t%20m&dryRun=All"));
    assert_eq!(post.body, body.as_bytes(), "the body arrives unchanged");
    // No authentication here: the client's own credentials go upstream, and nothing of
    // watchd's.
    assert_eq!(post.header("authorization"), Some("Bearer the-clients-own"));
    assert_eq!(post.header("x-custom"), Some("one"));
    assert_eq!(post.header("user-agent"), Some("test-client/1.0"));
    assert_eq!(post.header("content-type"), Some("application/json"));
    assert_eq!(post.header("x-forwarded-for"), Some("127.0.0.1"));

    // A real create, then a consistent read: the cache answers with the write in it.
    let r = http::request(
        "POST",
        &format!("{base}/api/v1/namespaces/default/configmaps"),
        &[("Content-Type", "application/json")],
        body,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let written_rv = r.json()["metadata"]["resourceVersion"].clone();
    let got = http::get(
        &format!("{base}/api/v1/namespaces/default/configmaps/created"),
        &[],
    )
    .await;
    assert_eq!(got.status, 200, "read-your-writes: {}", got.text());
    assert!(
        !from_upstream(&got),
        "reads of cached resources are the cache's"
    );
    assert_eq!(got.json()["metadata"]["resourceVersion"], written_rv);
    assert_eq!(got.json()["data"]["k"], "v");
    // PUT, PATCH (server-side apply) and DELETE of the object, and of a subresource.
    let patched = http::request(
        "PATCH",
        &format!("{base}/api/v1/namespaces/default/configmaps/created?fieldManager=t"),
        &[("Content-Type", "application/merge-patch+json")],
        r#"{"data":{"k":"w"}}"#,
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let got = http::get(
        &format!("{base}/api/v1/namespaces/default/configmaps/created"),
        &[],
    )
    .await;
    assert_eq!(got.json()["data"]["k"], "w", "the patch is read back");
    let deleted = http::request(
        "DELETE",
        &format!("{base}/api/v1/namespaces/default/configmaps/created"),
        &[],
        "",
    )
    .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let gone = http::get(
        &format!("{base}/api/v1/namespaces/default/configmaps/created"),
        &[],
    )
    .await;
    assert_eq!(gone.status, 404, "the delete is read back");
    assert!(!from_upstream(&gone));
    let methods: Vec<String> = up
        .requests_to("/api/v1/namespaces/default/configmaps")
        .iter()
        .map(|r| r.method.clone())
        .collect();
    assert_eq!(
        methods,
        ["POST", "POST", "PATCH", "DELETE"],
        "{}",
        up.describe()
    );
    let eviction = http::request(
        "POST",
        &format!("{base}/api/v1/namespaces/default/pods/web/eviction"),
        &[("Content-Type", "application/json")],
        r#"{"kind":"Eviction"}"#,
    )
    .await;
    assert!(from_upstream(&eviction), "subresources go upstream");
    assert_eq!(
        up.requests_to("/api/v1/namespaces/default/pods/web/eviction")
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_the_cache_does_not_hold_go_upstream_and_its_own_do_not() {
    let (_etcd, up, watchd) = fronted(&[]).await;
    let base = watchd.base_url();
    for path in [
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
        "/apis/metrics.k8s.io/v1beta1/nodes",
        "/openapi/v2",
        "/version",
        "/some/unknown/path",
    ] {
        let r = http::get(
            &format!("{base}{path}?x=1"),
            &[("Accept", "application/json")],
        )
        .await;
        assert!(from_upstream(&r), "{path} is the upstream's: {}", r.text());
        let seen = up.requests_to(path);
        assert_eq!(seen.len(), 1, "{path}: {}", up.describe());
        assert_eq!(seen[0].query.as_deref(), Some("x=1"));
        assert_eq!(seen[0].header("accept"), Some("application/json"));
    }
    let metrics = http::get(&format!("{base}/apis/metrics.k8s.io/v1beta1/nodes"), &[]).await;
    assert_eq!(metrics.json()["kind"], "NodeMetricsList");
    let version = http::get(&format!("{base}/version"), &[]).await;
    assert_eq!(version.json()["gitVersion"], "v1.34.0-fake");
    // The cache's own: reads, watches, status, health and metrics.
    for path in [
        "/api/v1/pods",
        "/api/v1/namespaces/default/pods/web",
        "/api/v1/namespaces/default/pods/web/status",
        "/api/v1/namespaces/default/configmaps?limit=1",
        "/readyz",
        "/metrics",
    ] {
        let r = http::get(&format!("{base}{path}"), &[]).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert!(!from_upstream(&r), "{path} is the cache's");
    }
    let mut w = http::watch(&format!("{base}/api/v1/pods?watch=1"), &[]).await;
    assert_eq!(w.status(), 200);
    let ev = w.next_event(WAIT).await.expect("the initial ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "web");
    assert!(
        up.requests_to("/api/v1/pods").is_empty()
            && up.requests_to("/api/v1/namespaces").is_empty(),
        "{}",
        up.describe()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_log_streams_line_by_line() {
    let (_etcd, up, watchd) = fronted(&[]).await;
    let url = format!(
        "{}/api/v1/namespaces/default/pods/web/log?follow=true&container=main",
        watchd.base_url()
    );
    let mut log = http::watch(&url, &[]).await;
    assert_eq!(log.status(), 200);
    assert_eq!(
        log.headers()
            .get(MARKER_HEADER)
            .and_then(|v| v.to_str().ok()),
        Some("yes")
    );
    // Each line with the time it arrived. The stream ends within a bounded count: the
    // upstream writes FOLLOW_LOG_LINES lines and closes.
    let mut lines: Vec<(Instant, String)> = Vec::new();
    while let Some(l) = log.next_line(WAIT).await {
        lines.push((Instant::now(), String::from_utf8_lossy(&l).into_owned()));
        assert!(
            lines.len() <= FOLLOW_LOG_LINES as usize,
            "more lines than the upstream wrote: {lines:?}"
        );
    }
    let printed: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    let expected: Vec<String> = (1..=FOLLOW_LOG_LINES)
        .map(|i| format!("line {i}"))
        .collect();
    assert_eq!(printed, expected);
    // Not buffered: the upstream writes one line every FOLLOW_LOG_INTERVAL, so lines
    // passed on as they come arrive spread over about that span; a body held until the
    // upstream ended (or held for many lines) arrives at once. Half the span allows for
    // a slow machine delaying the first line, as upstream_kubectl.rs does.
    let spread = lines[lines.len() - 1].0 - lines[0].0;
    let sent_over = FOLLOW_LOG_INTERVAL * (FOLLOW_LOG_LINES - 1);
    assert!(
        spread >= sent_over / 2,
        "the followed log arrived within {spread:?} although the upstream sent it over \
         {sent_over:?}: it was buffered, not streamed"
    );
    let seen = up.requests_to("/api/v1/namespaces/default/pods/web/log");
    assert_eq!(seen[0].query.as_deref(), Some("follow=true&container=main"));
}

/// Sends an upgrade request on a raw connection; the head of the answer, and the stream.
async fn upgrade(base: &str, path: &str, headers: &[&str]) -> (String, TcpStream) {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(WAIT, s.read(&mut byte))
            .await
            .expect("an answer to the upgrade")
            .unwrap();
        assert_eq!(
            n,
            1,
            "closed before the head ended: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    (String::from_utf8_lossy(&head).to_lowercase(), s)
}

async fn echoes(s: &mut TcpStream, payload: &[u8]) {
    s.write_all(payload).await.unwrap();
    let mut got = vec![0u8; payload.len()];
    tokio::time::timeout(WAIT, s.read_exact(&mut got))
        .await
        .expect("the echo in time")
        .unwrap();
    assert_eq!(got, payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_port_forward_upgrades_are_carried_both_ways() {
    let (_etcd, up, watchd) = fronted(&[]).await;
    let base = watchd.base_url();
    let (head, mut s) = upgrade(
        &base,
        "/api/v1/namespaces/default/pods/web/exec?command=sh&stdin=true",
        &[
            "Upgrade: SPDY/3.1",
            "X-Stream-Protocol-Version: v4.channel.k8s.io",
        ],
    )
    .await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: spdy/3.1"), "{head}");
    assert!(
        head.contains("x-stream-protocol-version: v4.channel.k8s.io"),
        "{head}"
    );
    echoes(&mut s, b"spdy frames, opaque to watchd").await;
    echoes(&mut s, &[0u8, 1, 2, 255]).await;

    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let (head, mut s) = upgrade(
        &base,
        "/api/v1/namespaces/default/pods/web/portforward?ports=80",
        &[
            "Upgrade: websocket",
            &format!("Sec-WebSocket-Key: {key}"),
            "Sec-WebSocket-Version: 13",
            "Sec-WebSocket-Protocol: v4.channel.k8s.io, portforward.k8s.io",
        ],
    )
    .await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    assert!(
        head.contains("sec-websocket-protocol: v4.channel.k8s.io"),
        "{head}"
    );
    echoes(&mut s, b"\x82\x05hello").await;
    let seen = up.requests_to("/api/v1/namespaces/default/pods/web/portforward");
    assert_eq!(seen[0].header("sec-websocket-key"), Some(key));
    assert_eq!(seen[0].header("upgrade"), Some("websocket"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_is_the_upstreams_with_the_caches_groups_added() {
    let (_etcd, up, watchd) = fronted(&[]).await;
    let base = watchd.base_url();
    let groups = http::get(&format!("{base}/apis"), &[]).await;
    assert_eq!(groups.status, 200);
    let names: Vec<String> = groups.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names[0], "metrics.k8s.io",
        "the upstream's first: {names:?}"
    );
    assert!(names.iter().any(|n| n == "apps"), "{names:?}");
    assert_eq!(up.requests_to("/apis").len(), 1);
    // A group only the upstream serves, and one it does not answer (the fake serves no
    // /apis/apps/v1: watchd's own).
    let metrics = http::get(&format!("{base}/apis/metrics.k8s.io/v1beta1"), &[]).await;
    assert_eq!(metrics.json()["resources"][0]["kind"], "PodMetrics");
    let apps = http::get(&format!("{base}/apis/apps/v1"), &[]).await;
    assert_eq!(apps.status, 200);
    assert!(apps.text().contains("\"deployments\""), "{}", apps.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_proxy_off_writes_are_refused_and_nothing_goes_upstream() {
    let (_etcd, up, watchd) = fronted(&["--proxy=false"]).await;
    let base = watchd.base_url();
    let r = http::request(
        "POST",
        &format!("{base}/api/v1/namespaces/default/configmaps"),
        &[("Content-Type", "application/json")],
        "{}",
    )
    .await;
    assert_eq!(r.status, 405, "{}", r.text());
    let log = http::get(
        &format!("{base}/api/v1/namespaces/default/pods/web/log"),
        &[],
    )
    .await;
    assert_eq!(log.status, 404);
    assert!(up.requests().is_empty(), "{}", up.describe());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authenticated_users_are_impersonated_under_watchds_own_credentials() {
    let pki = Pki::new();
    let etcd = Etcd::start();
    let up = FakeUpstream::start(None).await;
    let upstream_kubeconfig = pki.path("upstream.kubeconfig");
    pki::token_kubeconfig(&upstream_kubeconfig, &up.url(), "watchds-own-token");
    let (_watchd, server) = pki::start_tls_with_tokens(
        &pki,
        &etcd.client_url(),
        "bob-token,bob,uid-bob,\"viewers,dev\"\n",
        &[format!(
            "--upstream-kubeconfig={}",
            upstream_kubeconfig.display()
        )],
    );
    let ca = pki.path("ca.crt");
    let ca = ca.to_str().unwrap();
    let url = format!("{server}/api/v1/namespaces/default/configmaps");
    let out = pki::curl(&[
        "--cacert",
        ca,
        "-X",
        "POST",
        "-H",
        "Authorization: Bearer bob-token",
        "-H",
        "Content-Type: application/json",
        "-d",
        "{}",
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let echoed: Value = serde_json::from_slice(&out.stdout).expect("the upstream's echo");
    assert_eq!(echoed["echo"]["method"], "POST");
    let seen = up.requests_to("/api/v1/namespaces/default/configmaps");
    assert_eq!(seen.len(), 1, "{}", up.describe());
    let r = &seen[0];
    assert_eq!(r.header("authorization"), Some("Bearer watchds-own-token"));
    assert_eq!(r.header("impersonate-user"), Some("bob"));
    assert_eq!(r.header("impersonate-uid"), Some("uid-bob"));
    assert_eq!(
        r.headers_named("impersonate-group"),
        ["viewers", "dev", "system:authenticated"]
    );
    assert!(
        r.headers.iter().all(|(_, v)| !v.contains("bob-token")),
        "the client's credential never goes upstream: {:?}",
        r.headers
    );
    // A request that impersonates itself is refused here: its impersonation could not be
    // checked, and watchd's credentials must not lend it rights.
    let out = pki::curl(&[
        "--cacert",
        ca,
        "-X",
        "POST",
        "-H",
        "Authorization: Bearer bob-token",
        "-H",
        "Impersonate-User: root",
        "-d",
        "{}",
        "-w",
        "\n%{http_code}",
        &url,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.ends_with("\n403"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("impersonation is not supported through watchd"),
        "{text}"
    );
    // Without credentials: 401 here, nothing upstream.
    let out = pki::curl(&[
        "--cacert",
        ca,
        "-X",
        "POST",
        "-d",
        "{}",
        "-w",
        "\n%{http_code}",
        &url,
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("\n401"));
    assert_eq!(
        up.requests_to("/api/v1/namespaces/default/configmaps")
            .len(),
        1
    );
    // A review of oneself is answered here, from watchd's own authentication, not
    // passed upstream under its credentials.
    let (cert, key) = (pki.path("admin.crt"), pki.path("admin.key"));
    let out = pki::curl(&[
        "--cacert",
        ca,
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        "{}",
        &format!("{server}{SELF_REVIEWS}"),
    ]);
    let review: Value = serde_json::from_slice(&out.stdout).expect("a SelfSubjectReview");
    assert_eq!(review["status"]["userInfo"]["username"], "root", "{review}");
    assert!(up.requests_to(SELF_REVIEWS).is_empty(), "{}", up.describe());
}

const SELF_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// Without authentication of its own, watchd passes a review of oneself to the upstream,
/// which knows who is asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_authentication_reviews_of_oneself_pass_through() {
    let (_etcd, up, watchd) = fronted(&[]).await;
    let r = http::request(
        "POST",
        &format!("{}{SELF_REVIEWS}", watchd.base_url()),
        &[("content-type", "application/json")],
        "{}",
    )
    .await;
    assert!(from_upstream(&r), "{}", r.text());
    assert_eq!(up.requests_to(SELF_REVIEWS).len(), 1, "{}", up.describe());
}

fn gauge(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_tier_serves_the_same_objects_at_the_same_versions_with_one_watch_upstream() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for i in 0..5 {
        let name = format!("cm-{i}");
        put_json(
            &mut kv,
            &format!("/registry/configmaps/default/{name}"),
            &configmap("default", &name, "0"),
        )
        .await;
    }
    let tier1 = Watchd::start(&etcd.client_url(), &[]);
    let tier2 = Watchd::start_upstream(&tier1.base_url(), &[]);
    let (b1, b2) = (tier1.base_url(), tier2.base_url());
    let list = |b: String| async move {
        let r = http::get(&format!("{b}/api/v1/namespaces/default/configmaps"), &[]).await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    let (l1, l2) = (list(b1.clone()).await, list(b2.clone()).await);
    assert_eq!(
        l1["items"], l2["items"],
        "the same objects, byte for byte as JSON"
    );

    // Many watchers below cost the tier above one watch of the resource.
    let rv = l2["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watchers = Vec::new();
    for _ in 0..200 {
        let w = http::watch(
            &format!("{b2}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
            &[],
        )
        .await;
        assert_eq!(w.status(), 200);
        watchers.push(w);
    }
    let written = put_json(
        &mut kv,
        "/registry/configmaps/default/cm-2",
        &configmap("default", "cm-2", "1"),
    )
    .await;
    for w in &mut watchers {
        let ev = w.next_event(WAIT).await.expect("the change reaches tier 2");
        assert_eq!(ev["type"], "MODIFIED");
        assert_eq!(
            ev["object"]["metadata"]["resourceVersion"],
            written.to_string()
        );
        assert_eq!(ev["object"]["data"]["value"], "1");
    }
    let m1 = http::get(&format!("{b1}/metrics"), &[]).await.text();
    let m2 = http::get(&format!("{b2}/metrics"), &[]).await.text();
    assert_eq!(
        gauge(&m2, "watchd_watchers{resource=\"configmaps\"}"),
        200.0
    );
    assert_eq!(
        gauge(&m1, "watchd_watchers{resource=\"configmaps\"}"),
        1.0,
        "tier 1 serves tier 2 one watch:\n{m1}"
    );

    // A resourceVersion moves between tiers: a watch on tier 1 from tier 2's list.
    let mut w1 = http::watch(
        &format!("{b1}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
        &[],
    )
    .await;
    let ev = w1
        .next_event(WAIT)
        .await
        .expect("the same change on tier 1");
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        written.to_string()
    );

    // A consistent read on tier 2 of a resource nobody changed waits for tier 2 to prove
    // it has what tier 1 has, and answers.
    let r = http::get(&format!("{b2}/api/v1/namespaces"), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ns_rv: i64 = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ns_rv >= written, "{ns_rv} < {written}");
}

/// A CRD as kube-apiserver 1.34 stores it (apiextensions.k8s.io/v1, JSON).
fn gadget_crd() -> Value {
    json!({
        "kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
        "metadata": {"name": "gadgets.example.org", "uid": "crd-gadgets",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"group": "example.org",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                 "scope": "Namespaced",
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
        "status": {"storedVersions": ["v1"]}
    })
}

/// Polls `url` until it answers `code` (at most 15 s); the last answer.
async fn until_status(url: &str, code: u16) -> http::Response {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = http::get(url, &[]).await;
        if r.status == code || std::time::Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_come_and_go_on_a_second_tier_with_their_definitions() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let tier1 = Watchd::start(&etcd.client_url(), &[]);
    let tier2 = Watchd::start_upstream(&tier1.base_url(), &["--proxy=false"]);
    let gadgets = format!(
        "{}/apis/example.org/v1/namespaces/a/gadgets",
        tier2.base_url()
    );
    assert_eq!(
        http::get(&gadgets, &[]).await.status,
        404,
        "not defined yet"
    );

    let crd_key = "/registry/apiextensions.k8s.io/customresourcedefinitions/gadgets.example.org";
    put_json(&mut kv, crd_key, &gadget_crd()).await;
    let g = json!({"apiVersion": "example.org/v1", "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": "a", "uid": "g1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"size": 1}});
    let rv = put_json(&mut kv, "/registry/example.org/gadgets/a/g1", &g).await;
    let r = until_status(&format!("{gadgets}?resourceVersion={rv}"), 200).await;
    assert_eq!(
        r.status,
        200,
        "tier 2 serves the new resource: {}",
        tier2.log()
    );
    let items = r.json()["items"].clone();
    assert_eq!(items.as_array().map(Vec::len), Some(1), "{items}");
    assert_eq!(items[0]["metadata"]["resourceVersion"], rv.to_string());
    let discovery = http::get(&format!("{}/apis/example.org/v1", tier2.base_url()), &[]).await;
    assert!(
        discovery.text().contains("\"gadgets\""),
        "{}",
        discovery.text()
    );

    support::kube::delete_key(&mut kv, crd_key).await;
    let r = until_status(&gadgets, 404).await;
    assert_eq!(r.status, 404, "gone with its definition: {}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_writing_through_watchd_sees_its_own_writes() {
    use futures_util::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::watcher::{self, watcher, Event};

    let (etcd, up, watchd) = fronted(&[]).await;
    let mut kv = etcd.client().await;
    for i in 0..3 {
        let mut cm = configmap("ctl", &format!("src-{i}"), &format!("v{i}"));
        cm["metadata"]["labels"] = json!({"role": "source"});
        put_json(&mut kv, &format!("/registry/configmaps/ctl/src-{i}"), &cm).await;
    }
    let url = watchd.base_url().parse().unwrap();
    let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "ctl");
    // The controller: for every source ConfigMap it sees, apply a copy (server-side
    // apply, through watchd to the upstream); it is done when it has seen every copy.
    let mut events = std::pin::pin!(watcher(api.clone(), watcher::Config::default()));
    let mut copies_seen = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while copies_seen.len() < 3 {
        let ev = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap_or_else(|_| panic!("copies seen: {copies_seen:?}\n{}", up.describe()))
            .expect("the watch goes on")
            .expect("no watcher error");
        let objects = match ev {
            Event::Apply(o) | Event::InitApply(o) => vec![o],
            _ => continue,
        };
        for cm in objects {
            let name = cm.metadata.name.clone().unwrap_or_default();
            if let Some(source) = name.strip_prefix("src-") {
                let copy = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("copy-{source}"), "namespace": "ctl"},
                    "data": cm.data.clone()});
                api.patch(
                    &format!("copy-{source}"),
                    &PatchParams::apply("copier"),
                    &Patch::Apply(copy),
                )
                .await
                .expect("apply through watchd");
            } else if name.starts_with("copy-") {
                copies_seen.insert(name);
            }
        }
    }
    let copy = api
        .get("copy-1")
        .await
        .expect("a copy read back from the cache");
    assert_eq!(copy.data.unwrap()["value"], "v1");
    let applies = up.requests_to("/api/v1/namespaces/ctl/configmaps/copy-");
    assert_eq!(applies.len(), 3, "{}", up.describe());
    assert!(applies
        .iter()
        .all(|r| r.method == "PATCH"
            && r.header("content-type") == Some("application/apply-patch+yaml")));
    assert!(
        up.requests().iter().all(|r| r.method != "GET"),
        "every read was the cache's: {}",
        up.describe()
    );
}
