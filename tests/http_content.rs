//! Representations beyond plain JSON, against a real etcd: Table (what kubectl prints),
//! PartialObjectMetadata(List) (metadata informers), gzip, and aggregated discovery
//! (v2 and v2beta1, each only when offered).

mod support;

use std::io::Read;
use std::time::Duration;

use support::http;
use support::kube::put_object_text;
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf.
storage_tests! {
    table_list_has_columns_rows_and_partial_metadata_objects,
    table_include_object_controls_the_row_object,
    table_watch_sends_column_definitions_only_in_the_first_event,
    metadata_informers_get_partial_object_metadata_lists_gets_and_watches,
    small_bodies_are_not_gzipped,
    watch_lists_come_in_gzip_members_and_other_watches_uncompressed,
    cbor_and_the_managed_fields_opt_out_are_not_served,
    kubectl_1_27_and_1_33_discover_resources,
    kubectl_get_pods_prints_kubectls_usual_columns,
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

fn configmap(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"a","creationTimestamp":"2026-01-02T03:04:05Z","labels":{{"k":"v"}}}},"data":{{"big":"{}"}}}}"#,
        "x".repeat(2000)
    )
}

async fn fixture() -> (Etcd, Watchd) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for n in ["c1", "c2", "c3"] {
        put_object_text(
            &mut kv,
            &format!("/registry/configmaps/a/{n}"),
            &configmap(n),
        )
        .await;
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    (etcd, w)
}

async fn table_list_has_columns_rows_and_partial_metadata_objects() {
    let (_etcd, w) = fixture().await;
    let r = http::get(
        &format!("{}/api/v1/namespaces/a/configmaps?limit=2", w.base_url()),
        &[("accept", TABLE)],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/json;as=Table;v=v1;g=meta.k8s.io")
    );
    let t = r.json();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert!(
        t["metadata"]["continue"].is_string(),
        "paging applies to tables: {}",
        t["metadata"]
    );
    let cols = t["columnDefinitions"].as_array().expect("columns");
    assert_eq!(cols[0]["name"], "Name");
    let rows = t["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["cells"][0], "c1");
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["name"], "c1");
    assert!(rows[0]["object"].get("data").is_none());
}

async fn table_include_object_controls_the_row_object() {
    let (_etcd, w) = fixture().await;
    let base = w.base_url();
    let none = http::get(
        &format!("{base}/api/v1/namespaces/a/configmaps/c1?includeObject=None"),
        &[("accept", TABLE)],
    )
    .await
    .json();
    assert_eq!(none["rows"].as_array().map(Vec::len), Some(1));
    assert!(none["rows"][0].get("object").is_none());
    let full = http::get(
        &format!("{base}/api/v1/namespaces/a/configmaps/c1?includeObject=Object"),
        &[("accept", TABLE)],
    )
    .await
    .json();
    assert_eq!(full["rows"][0]["object"]["kind"], "ConfigMap");
    assert!(full["rows"][0]["object"]["data"]["big"].is_string());
    let bad = http::get(
        &format!("{base}/api/v1/namespaces/a/configmaps?includeObject=All"),
        &[("accept", TABLE)],
    )
    .await;
    assert_eq!(bad.status, 400);
}

async fn table_watch_sends_column_definitions_only_in_the_first_event() {
    let (_etcd, w) = fixture().await;
    let mut s = http::watch(
        &format!("{}/api/v1/namespaces/a/configmaps?watch=1", w.base_url()),
        &[("accept", TABLE)],
    )
    .await;
    let events = s.next_events(3, Duration::from_secs(10)).await;
    assert_eq!(events.len(), 3);
    assert!(events[0]["object"]["columnDefinitions"].is_array());
    for e in &events[1..] {
        assert!(e["object"]["columnDefinitions"].is_null(), "{e}");
        assert_eq!(e["object"]["rows"].as_array().map(Vec::len), Some(1));
    }
}

async fn metadata_informers_get_partial_object_metadata_lists_gets_and_watches() {
    let (etcd, w) = fixture().await;
    let base = w.base_url();
    let r = http::get(
        &format!("{base}/api/v1/configmaps"),
        &[("accept", METADATA_LIST)],
    )
    .await;
    assert_eq!(
        r.header("content-type"),
        Some("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
    );
    let list = r.json();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["kind"], "PartialObjectMetadata");
    assert_eq!(items[0]["metadata"]["labels"]["k"], "v");
    assert!(items[0].get("data").is_none());

    let one = http::get(
        &format!("{base}/api/v1/namespaces/a/configmaps/c2"),
        &[("accept", METADATA)],
    )
    .await
    .json();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["name"], "c2");

    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let mut s = http::watch(
        &format!("{base}/api/v1/configmaps?watch=1&resourceVersion={rv}"),
        &[("accept", METADATA)],
    )
    .await;
    let mut kv = etcd.client().await;
    put_object_text(&mut kv, "/registry/configmaps/a/c4", &configmap("c4")).await;
    let ev = s.next_event(Duration::from_secs(10)).await.expect("event");
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(ev["object"]["metadata"]["name"], "c4");
}

/// As kube-apiserver: a get or list body up to 128 KiB (`defaultGzipThresholdBytes`) is
/// sent as it is even to a client that accepts gzip (client-go always does); larger ones
/// are gzipped (`large_gzip_lists_gunzip_to_the_identity_list_over_http1_and_http2`).
async fn small_bodies_are_not_gzipped() {
    let (_etcd, w) = fixture().await;
    let gz = [("accept-encoding", "gzip")];
    for path in ["/api/v1/configmaps", "/api/v1/namespaces/a/configmaps/c1"] {
        let r = http::get(&format!("{}{path}", w.base_url()), &gz).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-encoding"), None, "{path}");
        let identity = http::get(&format!("{}{path}", w.base_url()), &[]).await;
        assert_eq!(r.body, identity.body, "{path}");
    }
    let v = http::get(&format!("{}/api/v1/configmaps", w.base_url()), &gz)
        .await
        .json();
    assert_eq!(v["items"].as_array().map(Vec::len), Some(3));
}

/// As kube-apiserver 1.37 (`WatchListCompression`): a watch list (`sendInitialEvents` and
/// `allowWatchBookmarks`) from a client that accepts gzip comes as gzip members, each
/// complete when sent (an event made later is read while the stream is open); any other
/// watch, and one from a client that does not accept gzip, is not compressed.
async fn watch_lists_come_in_gzip_members_and_other_watches_uncompressed() {
    let (etcd, w) = fixture().await;
    let base = format!("{}/api/v1/namespaces/a/configmaps?watch=true", w.base_url());
    let list = "&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
    let gz = [("accept-encoding", "gzip")];
    let wait = Duration::from_secs(10);
    let mut s = http::watch(&format!("{base}{list}"), &gz).await;
    assert_eq!(s.status(), 200);
    assert_eq!(s.headers()["content-encoding"], "gzip");
    assert_eq!(s.headers()["vary"], "Accept-Encoding");
    let initial = s.next_events(4, wait).await;
    let types: Vec<&str> = initial.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(
        initial[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let mut kv = etcd.client().await;
    put_object_text(&mut kv, "/registry/configmaps/a/c4", &configmap("c4")).await;
    let later = s.next_event(wait).await.expect("the new object's event");
    assert_eq!(
        (
            later["type"].as_str(),
            later["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("c4"))
    );
    assert!(!s.is_ended());
    for (query, headers) in [
        ("", &gz[..]),
        (
            "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            &gz[..],
        ),
        (list, &[][..]),
    ] {
        let mut s = http::watch(&format!("{base}{query}"), headers).await;
        assert_eq!(s.status(), 200);
        assert!(
            s.headers().get("content-encoding").is_none(),
            "{query} {headers:?}"
        );
        assert!(s.next_event(wait).await.is_some(), "{query}");
    }
}

/// As kube-apiserver 1.34–1.37 with its defaults: CBOR (KEP-4222, alpha) is not served (an
/// `Accept` offering only CBOR gets 406), and the managedFields opt-out (KEP-5958, alpha)
/// is not known: its `drop=` parameter is ignored and the object comes whole.
async fn cbor_and_the_managed_fields_opt_out_are_not_served() {
    let (etcd, w) = fixture().await;
    let mut kv = etcd.client().await;
    let managed = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","namespace":"a","managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]},"data":{"k":"v"}}"#;
    // Stored as JSON whatever the scenario's storage (the tests' protobuf encoder does not
    // write managedFields).
    kv.put("/registry/configmaps/a/m", managed, None)
        .await
        .expect("put");
    let url = format!("{}/api/v1/namespaces/a/configmaps", w.base_url());
    for (path, accept) in [
        (url.clone(), "application/cbor"),
        (format!("{url}?watch=true"), "application/cbor-seq"),
    ] {
        let r = http::get(&path, &[("accept", accept)]).await;
        assert_eq!(r.status, 406, "{accept}: {}", r.text());
        assert_eq!(r.json()["reason"], "NotAcceptable");
    }
    let r = http::get(
        &format!("{url}/m"),
        &[("accept", "application/json;drop=metadata.managedFields")],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["metadata"]["managedFields"][0]["manager"],
        "kubectl"
    );
}

// One storage format: discovery does not depend on stored objects.
#[tokio::test]
async fn aggregated_discovery_is_served_only_in_the_offered_version() {
    let (_etcd, w) = fixture().await;
    let base = w.base_url();
    let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let r = http::get(&format!("{base}/apis"), &[("accept", v2)]).await;
    assert_eq!(
        r.header("content-type"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let apis = r.json();
    assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2");
    let apps = apis["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .expect("apps");
    let deploy = &apps["versions"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "deployments")
        .cloned()
        .expect("deployments");
    assert_eq!(deploy["responseKind"]["kind"], "Deployment");
    assert_eq!(deploy["scope"], "Namespaced");
    let core = http::get(&format!("{base}/api"), &[("accept", v2)])
        .await
        .json();
    let core_resources = core["items"][0]["versions"][0]["resources"]
        .as_array()
        .expect("core")
        .clone();
    assert!(core_resources.iter().any(|r| r["resource"] == "pods"));
    // kubectl 1.27 offers only v2beta1.
    let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let r = http::get(&format!("{base}/apis"), &[("accept", beta)]).await;
    assert_eq!(r.json()["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    let legacy = http::get(&format!("{base}/apis"), &[("accept", "application/json")])
        .await
        .json();
    assert_eq!(legacy["kind"], "APIGroupList");
}

fn kubectl(bin: &str, server: &str, args: &[&str]) -> String {
    let cache = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(bin)
        .arg(format!("--server={server}"))
        .arg(format!("--cache-dir={}", cache.path().display()))
        .args(args)
        .env("KUBECONFIG", "/dev/null")
        .output()
        .unwrap_or_else(|e| panic!("{bin} is required (kubectl): {e}"));
    assert!(
        out.status.success(),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn kubectl_1_27_and_1_33_discover_resources() {
    let (_etcd, w) = fixture().await;
    for bin in [
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    ] {
        let out = kubectl(bin, &w.base_url(), &["api-resources"]);
        assert!(
            out.contains("deployments") && out.contains("configmaps"),
            "{bin}: {out}"
        );
        let out = kubectl(bin, &w.base_url(), &["get", "cm", "-n", "a"]);
        assert!(out.contains("c1") && out.contains("c3"), "{bin}: {out}");
    }
}

async fn kubectl_get_pods_prints_kubectls_usual_columns() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"a","creationTimestamp":"2026-01-02T03:04:05Z"},"spec":{"nodeName":"node-1","containers":[{"name":"c","image":"i"},{"name":"d","image":"i"}]},"status":{"phase":"Running","podIP":"10.1.2.3","containerStatuses":[{"name":"c","ready":true,"restartCount":2,"state":{"running":{}}},{"name":"d","ready":false,"restartCount":1,"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}"#;
    put_object_text(&mut kv, "/registry/pods/a/web-1", pod).await;
    let w = Watchd::start(&etcd.client_url(), &[]);
    let out = kubectl(
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
        &w.base_url(),
        &["get", "pods", "-n", "a", "-o", "wide"],
    );
    let mut lines = out.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        &header[..5],
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        &row[..4],
        ["web-1", "1/2", "CrashLoopBackOff", "3"],
        "{out}"
    );
    assert!(
        row.contains(&"10.1.2.3") && row.contains(&"node-1"),
        "{out}"
    );
}

/// ConfigMaps in the large-list fixture: about 6.5 MB of list.
const BIG_ITEMS: usize = 1500;

/// A ConfigMap with 4 KiB of random base64 letters: gzip keeps about 3/4 of it, so the
/// compressed list is megabytes too.
fn noisy_configmap(i: usize) -> String {
    const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = support::Rng(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
    let noise: String = (0..4096).map(|_| LETTERS[rng.below(64)] as char).collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big-{i:05}","namespace":"big","uid":"u-{i}","creationTimestamp":"2026-01-02T03:04:05Z"}},"data":{{"noise":"{noise}"}}}}"#
    )
}

async fn big_fixture() -> (Etcd, Watchd) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for i in 0..BIG_ITEMS {
        put_object_text(
            &mut kv,
            &format!("/registry/configmaps/big/big-{i:05}"),
            &noisy_configmap(i),
        )
        .await;
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    (etcd, w)
}

fn gunzip(gz: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut plain)
        .expect("a complete gzip stream");
    plain
}

/// The list of the big fixture, uncompressed, as the cache serves it.
async fn big_identity_list(w: &Watchd) -> bytes::Bytes {
    let r = http::get(
        &format!("{}/api/v1/namespaces/big/configmaps", w.base_url()),
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["items"].as_array().map(Vec::len), Some(BIG_ITEMS));
    assert!(r.body.len() > 6_000_000, "{} bytes", r.body.len());
    r.body
}

/// Sends a gzip list request on a raw connection (`version`: "1.1" or "1.0") and returns
/// the connection, nothing of the answer read.
async fn raw_gzip_list(w: &Watchd, version: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt as _;
    let mut s = tokio::net::TcpStream::connect(w.http_addr())
        .await
        .expect("connect");
    let req = format!(
        "GET /api/v1/namespaces/big/configmaps HTTP/{version}\r\nHost: watchd\r\nAccept-Encoding: gzip\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.expect("send");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_gzip_lists_gunzip_to_the_identity_list_over_http1_and_http2() {
    use http_body_util::BodyExt as _;
    use tokio::io::AsyncReadExt as _;
    let (_etcd, w) = big_fixture().await;
    let identity = big_identity_list(&w).await;
    let url = format!("{}/api/v1/namespaces/big/configmaps", w.base_url());

    // HTTP/1.1: watchd's own path, a chunked stream of compressed frames.
    let h1 = http::get(&url, &[("accept-encoding", "gzip")]).await;
    assert_eq!(h1.status, 200);
    assert_eq!(h1.header("content-encoding"), Some("gzip"));
    assert_eq!(h1.header("vary"), Some("Accept-Encoding"));
    assert_eq!(h1.header("content-type"), Some("application/json"));
    assert!(
        gunzip(&h1.body) == identity,
        "HTTP/1.1: the gzip list is the identity list"
    );
    assert!(
        h1.body.len() > 4_000_000,
        "noise stays large: {}",
        h1.body.len()
    );

    // HTTP/1.0 goes through hyper's HTTP/1 (a body ended by closing the connection).
    let mut s = raw_gzip_list(&w, "1.0").await;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut raw))
        .await
        .expect("the HTTP/1.0 answer ends")
        .expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.0 200"), "{head}");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(
        gunzip(&raw[split + 4..]) == identity,
        "HTTP/1.0: the gzip list is the identity list"
    );

    // HTTP/2 (h2c), through hyper's HTTP/2 with its flow control.
    let tcp = tokio::net::TcpStream::connect(w.http_addr()).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .expect("h2c handshake");
    let driver = tokio::spawn(conn);
    let req = ::http::Request::get(&url)
        .header("accept-encoding", "gzip")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(60), sender.send_request(req))
        .await
        .expect("HTTP/2 answer")
        .expect("HTTP/2 request");
    assert_eq!(resp.version(), ::http::Version::HTTP_2);
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    assert_eq!(resp.headers()["vary"], "Accept-Encoding");
    let body = tokio::time::timeout(Duration::from_secs(60), resp.into_body().collect())
        .await
        .expect("HTTP/2 body")
        .expect("HTTP/2 body read")
        .to_bytes();
    assert!(
        gunzip(&body) == identity,
        "HTTP/2: the gzip list is the identity list"
    );
    driver.abort();

    // Kubernetes protobuf too.
    let pb = [("accept", "application/vnd.kubernetes.protobuf")];
    let identity = http::get(&url, &pb).await;
    assert!(identity.body.len() > 128 * 1024);
    let gz = http::get(&url, &[pb[0], ("accept-encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert!(
        gunzip(&gz.body) == identity.body,
        "protobuf: the gzip list is the identity list"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_gzip_readers_hold_neither_the_serving_threads_nor_a_compressed_copy() {
    use tokio::io::AsyncReadExt as _;
    const SLOW: usize = 8;
    let (_etcd, w) = big_fixture().await;
    let pid = w.pid();
    let identity = big_identity_list(&w).await;
    let list = format!("{}/api/v1/namespaces/big/configmaps", w.base_url());
    // Warm up once: what a compressed copy weighs, and the allocator's arenas in use.
    let gz = http::get(&list, &[("accept-encoding", "gzip")]).await;
    assert!(gunzip(&gz.body) == identity);
    let compressed = gz.body.len() as u64;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = support::proc_status_bytes(pid, "VmRSS");

    // Slow readers: each asks for the gzip list and reads nothing yet.
    let mut slow = Vec::new();
    for _ in 0..SLOW {
        slow.push(raw_gzip_list(&w, "1.1").await);
    }
    // Meanwhile, other connections are answered: a get and a small list, one after the
    // other, each within seconds.
    let get = format!(
        "{}/api/v1/namespaces/big/configmaps/big-00007",
        w.base_url()
    );
    let small = format!("{}/api/v1/namespaces/big/configmaps?limit=3", w.base_url());
    let started = std::time::Instant::now();
    let mut peak = before;
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(4) {
        for url in [&get, &small] {
            let t = std::time::Instant::now();
            match tokio::time::timeout(Duration::from_secs(5), http::get(url, &[])).await {
                Ok(r) => assert_eq!(r.status, 200),
                Err(_) => eprintln!("{url}: not answered within 5 s"),
            }
            slowest = slowest.max(t.elapsed());
        }
        peak = peak.max(support::proc_status_bytes(pid, "VmRSS"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every slow response has started: its head is there to read.
    for s in &mut slow {
        let mut head = [0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut head))
            .await
            .expect("the slow reader's answer started")
            .expect("read");
        assert!(head[..n].starts_with(b"HTTP/1.1 200"));
    }
    for _ in 0..10 {
        peak = peak.max(support::proc_status_bytes(pid, "VmRSS"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let grown = peak.saturating_sub(before);
    let seen = format!(
        "{SLOW} slow gzip readers: slowest other request {slowest:?}, RSS {before} -> peak {peak} (+{grown}), compressed list {compressed} bytes"
    );
    eprintln!("{seen}");
    assert!(
        slowest < Duration::from_secs(2),
        "requests on other connections waited while gzip lists were compressed: {seen}"
    );
    // A compressed copy per reader would be SLOW × `compressed` (over 30 MB); what is
    // held is a compressor and a frame per reader.
    assert!(
        grown < SLOW as u64 * compressed / 4,
        "RSS grew by a compressed copy per slow reader: {seen}"
    );
    // The slow readers can still read their whole list.
    let mut s = slow.pop().expect("a slow reader");
    drop(slow);
    let mut raw = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = s.read(&mut buf).await.expect("read");
            raw.extend_from_slice(&buf[..n]);
            if n == 0 || raw.ends_with(b"\r\n0\r\n\r\n") {
                return;
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the held gzip list is sent in full once read"
    );
}
