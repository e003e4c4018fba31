//! HTTP/2 with prior knowledge (h2c): many watch streams on one connection, as client-go
//! multiplexes an informer factory's watches. A stream whose reader stops must not stall
//! the others: each stream has its own flow-control window.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::kube::put_object_text;
use support::{Etcd, Watchd};

const STREAMS: usize = 20;
const WRITES: usize = 40;

fn configmap(name: &str, i: usize) -> String {
    let filler = "x".repeat(8 * 1024);
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"h2","uid":"u-{name}","creationTimestamp":"2026-01-02T03:04:05Z"}},"data":{{"i":"{i}","filler":"{filler}"}}}}"#
    )
}

/// An h2c connection to `watchd` (the client's stream and connection windows given) and
/// `n` watches on it of namespace h2's config maps after `rv`, each answered 200 over
/// HTTP/2; the connection's sender (for more requests), the watches' bodies, and the
/// task driving the connection.
async fn h2c_watches(
    watchd: &Watchd,
    rv: i64,
    n: usize,
    windows: (u32, u32),
) -> (
    hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    Vec<hyper::body::Incoming>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let tcp = tokio::net::TcpStream::connect(watchd.http_addr())
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(windows.0)
        .initial_connection_window_size(windows.1)
        .handshake(TokioIo::new(tcp))
        .await
        .expect("h2c handshake");
    let driver = tokio::spawn(conn);
    let uri = format!(
        "http://{}/api/v1/namespaces/h2/configmaps?watch=true&resourceVersion={rv}",
        watchd.http_addr()
    );
    let mut bodies = Vec::new();
    for _ in 0..n {
        let req = http::Request::get(&uri)
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = sender.send_request(req).await.expect("watch request");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), http::Version::HTTP_2);
        bodies.push(resp.into_body());
    }
    (sender, bodies, driver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_watches_share_one_connection_and_a_stalled_stream_stalls_only_itself() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let rv = put_object_text(&mut kv, "/registry/configmaps/h2/cm", &configmap("cm", 0)).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);

    // A small window per stream (the stalled one fills it) and a large one for the
    // connection, as Go's HTTP/2 client has.
    let (mut sender, mut bodies, driver) =
        h2c_watches(&watchd, rv, STREAMS, (64 * 1024, 64 * 1024 * 1024)).await;
    // The first stream is never read again.
    let _stalled = bodies.remove(0);

    for i in 1..=WRITES {
        put_object_text(&mut kv, "/registry/configmaps/h2/cm", &configmap("cm", i)).await;
    }

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut readers = Vec::new();
    for mut body in bodies {
        readers.push(tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut events = 0;
            while events < WRITES && Instant::now() < deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                let Ok(Some(Ok(frame))) = tokio::time::timeout(left, body.frame()).await else {
                    break;
                };
                if let Ok(data) = frame.into_data() {
                    buf.extend_from_slice(&data);
                    while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=nl).collect();
                        let ev: serde_json::Value = serde_json::from_slice(&line).unwrap();
                        assert_eq!(ev["type"], "MODIFIED", "{ev}");
                        events += 1;
                        assert_eq!(
                            ev["object"]["data"]["i"],
                            events.to_string(),
                            "events arrive in order"
                        );
                    }
                }
            }
            events
        }));
    }
    for r in readers {
        assert_eq!(
            r.await.unwrap(),
            WRITES,
            "every unstalled stream sees every write"
        );
    }
    // The connection still serves new requests while one stream is stalled.
    let req = http::Request::get(format!("http://{}/version", watchd.http_addr()))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    driver.abort();
}

/// A config map of about 300 bytes: 100 streams' frames fit one write buffer.
fn small_configmap(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"small","namespace":"h2","uid":"u-small","creationTimestamp":"2026-01-02T03:04:05Z"}},"data":{{"i":"{i}"}}}}"#
    )
}

/// etcd holding the small config map; a client of it; the revision it was written at.
async fn etcd_with_small() -> (Etcd, etcd_client::Client, i64) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let rv = put_object_text(
        &mut kv,
        "/registry/configmaps/h2/small",
        &small_configmap(0),
    )
    .await;
    (etcd, kv, rv)
}

/// One event to many watch streams of one connection is queued by the dispatch pass that
/// wakes them (no stream's task runs) and leaves in one write: the connection's task is
/// woken once, when the pass has queued every stream's frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_event_to_a_connections_watch_streams_is_queued_by_the_pass_and_written_once() {
    const WATCHES: usize = 100;
    let (etcd, mut kv, rv) = etcd_with_small().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);

    let (_sender, mut bodies, driver) =
        h2c_watches(&watchd, rv, WATCHES, (1024 * 1024, 64 * 1024 * 1024)).await;
    // Every stream's task has stepped its watch to idle (there is nothing since `rv`).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics_url = format!("{}/metrics", watchd.base_url());
    let sample = |text: &str, name: &str| support::kube::metric(text, name, &[]).unwrap_or(0.0);
    let before = support::http::get(&metrics_url, &[]).await.text();

    put_object_text(
        &mut kv,
        "/registry/configmaps/h2/small",
        &small_configmap(1),
    )
    .await;
    for body in &mut bodies {
        let mut line = Vec::new();
        while !line.contains(&b'\n') {
            let frame = tokio::time::timeout(Duration::from_secs(30), body.frame())
                .await
                .expect("the event within 30 s")
                .expect("the stream is open")
                .expect("a frame");
            line.extend_from_slice(&frame.into_data().unwrap_or_default());
        }
        let ev: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(ev["type"], "MODIFIED", "{ev}");
        assert_eq!(ev["object"]["data"]["i"], "1");
    }

    let after = support::http::get(&metrics_url, &[]).await.text();
    let task_frames = |text: &str| {
        support::kube::metric(text, "watchd_http2_watch_task_frames_total", &[])
            .expect("watch streams count the frames their tasks queue")
    };
    let by_task = task_frames(&after) - task_frames(&before);
    assert_eq!(by_task, 0.0, "every stream's frame was queued by the pass");
    let writes = sample(&after, "watchd_http2_socket_writes_total")
        - sample(&before, "watchd_http2_socket_writes_total");
    // One write carries all 100 frames; a second would be the socket taking part of it.
    assert!(
        (1.0..=2.0).contains(&writes),
        "{WATCHES} streams' frames in {writes} writes"
    );
    driver.abort();
}

/// A client that cancels idle watch streams (RST_STREAM, as client-go does when it
/// restarts a watch) ends them at once, without an event to find them gone: the stream's
/// task hears the reset even though the dispatch pass, not the task, writes its frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_the_client_resets_end_without_waiting_for_an_event() {
    const WATCHES: usize = 10;
    let (etcd, mut kv, rv) = etcd_with_small().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);

    // hyper's default windows.
    let (_sender, mut bodies, driver) =
        h2c_watches(&watchd, rv, WATCHES, (2 * 1024 * 1024, 5 * 1024 * 1024)).await;
    // One event, written by the pass to every stream, so that each has been stepped
    // there before it is reset.
    put_object_text(
        &mut kv,
        "/registry/configmaps/h2/small",
        &small_configmap(1),
    )
    .await;
    for body in &mut bodies {
        let frame = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("the event within 30 s");
        assert!(matches!(frame, Some(Ok(_))), "the event arrives");
    }
    let metrics_url = format!("{}/metrics", watchd.base_url());
    let open = || async {
        let text = support::http::get(&metrics_url, &[]).await.text();
        support::kube::metric(&text, "watchd_watchers", &["resource=\"configmaps\""])
            .expect("the watchers gauge")
    };
    assert_eq!(open().await, WATCHES as f64);

    // Half the streams are dropped unread: hyper's client resets them.
    bodies.truncate(WATCHES / 2);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut now_open = open().await;
    while now_open > (WATCHES / 2) as f64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        now_open = open().await;
    }
    assert_eq!(
        now_open,
        (WATCHES / 2) as f64,
        "the reset watches ended, the others are open"
    );

    // The others still get events.
    put_object_text(
        &mut kv,
        "/registry/configmaps/h2/small",
        &small_configmap(2),
    )
    .await;
    for body in &mut bodies {
        let frame = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("the event within 30 s");
        let data = frame.expect("open").expect("a frame").into_data().unwrap();
        let ev: serde_json::Value = serde_json::from_slice(&data).unwrap();
        assert_eq!(ev["object"]["data"]["i"], "2");
    }
    driver.abort();
}
