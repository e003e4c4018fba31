//! watchd's gRPC API against a real etcd: the same get, list and watch semantics as the
//! HTTP API, through the generated client.

mod support;

use std::time::Duration;

use serde_json::Value;
use watchd::api::grpc::pb::watchd_client::WatchdClient;
use watchd::api::grpc::pb::{self, Collection, EventType, GetRequest, ListRequest, WatchRequest};

use support::kube::{delete_key, put_object_text};
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf.
storage_tests! {
    grpc_get_and_list_serve_the_cached_objects_with_their_revisions,
    grpc_watch_streams_initial_state_then_changes_in_order,
}

fn configmap(ns: &str, name: &str, v: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","uid":"uid-{ns}-{name}","labels":{{"v":"{v}"}}}},"data":{{"v":"{v}"}}}}"#
    )
}

fn configmaps(ns: &str) -> Option<Collection> {
    Some(Collection {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: ns.into(),
    })
}

fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b).expect("object is JSON")
}

/// An object sent as JSON (the default encoding), parsed.
fn object_json(o: Option<&pb::Object>) -> Value {
    let o = o.expect("an object");
    assert_eq!(o.encoding(), pb::Encoding::Json);
    json(&o.raw)
}

async fn client(w: &Watchd) -> WatchdClient<tonic::transport::Channel> {
    WatchdClient::connect(w.grpc_url())
        .await
        .expect("gRPC connect")
}

async fn grpc_get_and_list_serve_the_cached_objects_with_their_revisions() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let one_rev = put_object_text(
        &mut kv,
        "/registry/configmaps/a/one",
        &configmap("a", "one", "1"),
    )
    .await;
    put_object_text(
        &mut kv,
        "/registry/configmaps/a/two",
        &configmap("a", "two", "2"),
    )
    .await;
    put_object_text(
        &mut kv,
        "/registry/configmaps/b/three",
        &configmap("b", "three", "3"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let mut c = client(&watchd).await;

    let got = c
        .get(GetRequest {
            collection: configmaps("a"),
            name: "one".into(),
            resource_version: String::new(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let obj = object_json(got.object.as_ref());
    assert_eq!(obj["metadata"]["name"], "one");
    assert_eq!(obj["metadata"]["resourceVersion"], one_rev.to_string());
    // The metadata as fields agrees with the object.
    let meta = got
        .object
        .as_ref()
        .and_then(|o| o.metadata.clone())
        .expect("metadata");
    assert_eq!((meta.namespace.as_str(), meta.name.as_str()), ("a", "one"));
    assert_eq!(meta.resource_version, one_rev);
    assert_eq!(meta.labels.get("v").map(String::as_str), Some("1"));
    assert_eq!(meta.uid, "uid-a-one");
    assert_eq!(meta.uid, obj["metadata"]["uid"]);

    let list = c
        .list(ListRequest {
            collection: configmaps(""),
            limit: 2,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    let names: Vec<Value> = list
        .items
        .iter()
        .map(|i| object_json(Some(i))["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, vec![Value::from("one"), Value::from("two")]);
    assert_eq!(list.remaining_item_count, Some(1));
    let rest = c
        .list(ListRequest {
            collection: configmaps(""),
            r#continue: list.r#continue.clone(),
            limit: 2,
            ..Default::default()
        })
        .await
        .expect("second page")
        .into_inner();
    assert_eq!(rest.resource_version, list.resource_version);
    assert_eq!(rest.items.len(), 1);
    assert!(rest.r#continue.is_empty());

    let selected = c
        .list(ListRequest {
            collection: configmaps(""),
            label_selector: "v in (2,3)".into(),
            ..Default::default()
        })
        .await
        .expect("selector list")
        .into_inner();
    assert_eq!(selected.items.len(), 2);
}

// One storage format: no objects; the errors come from the request alone.
#[tokio::test]
async fn grpc_errors_carry_the_kubernetes_status() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let mut c = client(&watchd).await;
    let err = c
        .get(GetRequest {
            collection: configmaps("a"),
            name: "missing".into(),
            resource_version: "0".into(),
            ..Default::default()
        })
        .await
        .expect_err("missing object");
    assert_eq!(err.code(), tonic::Code::NotFound);
    let status = json(err.details());
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["message"], "configmaps \"missing\" not found");

    let err = c
        .watch(WatchRequest {
            collection: configmaps(""),
            send_initial_events: Some(true),
            ..Default::default()
        })
        .await
        .expect_err("sendInitialEvents without NotOlderThan");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(json(err.details())["code"], 422);

    let err = c
        .list(ListRequest {
            collection: configmaps(""),
            label_selector: "a in (".into(),
            ..Default::default()
        })
        .await
        .expect_err("bad selector");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);

    // Every call is counted by method and code: a unary one by its trailers, a Watch
    // when it ends.
    c.list(ListRequest {
        collection: configmaps(""),
        ..Default::default()
    })
    .await
    .expect("an empty list");
    let mut stream = c
        .watch(WatchRequest {
            collection: configmaps(""),
            timeout_seconds: 1,
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner();
    while tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("the watch ends by its timeout")
        .expect("ends with OK")
        .is_some()
    {}
    let text = support::http::get(&format!("{}/metrics", watchd.base_url()), &[])
        .await
        .text();
    let calls = |method: &str, code: &str| {
        let method = format!("method=\"/watchd.v1.Watchd/{method}\"");
        let code = format!("code=\"{code}\"");
        support::kube::metric(&text, "watchd_grpc_calls_total", &[&method, &code])
    };
    assert_eq!(calls("Get", "NOT_FOUND"), Some(1.0), "{text}");
    assert_eq!(calls("Watch", "INVALID_ARGUMENT"), Some(1.0), "{text}");
    assert_eq!(calls("List", "INVALID_ARGUMENT"), Some(1.0), "{text}");
    assert_eq!(calls("Watch", "OK"), Some(1.0), "{text}");
    assert_eq!(calls("List", "OK"), Some(1.0), "{text}");
}

async fn grpc_watch_streams_initial_state_then_changes_in_order() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(
        &mut kv,
        "/registry/configmaps/a/one",
        &configmap("a", "one", "1"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let mut c = client(&watchd).await;
    let mut stream = c
        .watch(WatchRequest {
            collection: configmaps("a"),
            send_initial_events: Some(true),
            resource_version_match: "NotOlderThan".into(),
            allow_watch_bookmarks: true,
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner();
    let updated = put_object_text(
        &mut kv,
        "/registry/configmaps/a/one",
        &configmap("a", "one", "9"),
    )
    .await;
    let deleted = delete_key(&mut kv, "/registry/configmaps/a/one").await;
    let mut events: Vec<pb::WatchEvent> = Vec::new();
    while events.len() < 4 {
        let msg = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("events in time")
            .expect("stream ok")
            .expect("stream open");
        events.extend(msg.events);
    }
    let types: Vec<i32> = events.iter().map(|e| e.r#type).collect();
    assert_eq!(
        types,
        vec![
            EventType::Added as i32,
            EventType::Bookmark as i32,
            EventType::Modified as i32,
            EventType::Deleted as i32
        ]
    );
    assert!(events[1].initial_events_end);
    assert_eq!(events[2].resource_version, updated);
    assert_eq!(events[3].resource_version, deleted);
    assert_eq!(object_json(events[3].object.as_ref())["data"]["v"], "9");
}

/// Every page of a list, following continue tokens (at most 100 pages); each response
/// with its encoded size.
async fn all_pages(
    c: &mut WatchdClient<tonic::transport::Channel>,
    limit: i64,
) -> Vec<(pb::ListResponse, usize)> {
    use prost::Message;
    let mut pages = Vec::new();
    let mut token = String::new();
    for _ in 0..100 {
        let page = c
            .list(ListRequest {
                collection: configmaps("big"),
                limit,
                r#continue: token.clone(),
                ..Default::default()
            })
            .await
            .expect("list page")
            .into_inner();
        token = page.r#continue.clone();
        let size = page.encoded_len();
        pages.push((page, size));
        if token.is_empty() {
            break;
        }
    }
    pages
}

// Single: about message sizes, not decoding (the objects are JSON).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_lists_are_paged_by_default_and_every_message_fits_the_limit() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let filler = "x".repeat(2000);
    for i in 0..520 {
        let name = format!("cm-{i:04}");
        kv.put(
            format!("/registry/configmaps/big/{name}"),
            configmap("big", &name, &filler),
            None,
        )
        .await
        .expect("put");
    }
    let max = 65536;
    let w = Watchd::start(
        &etcd.client_url(),
        &[&format!("--grpc-max-message-bytes={max}")],
    );
    let mut c = client(&w).await;

    // No limit: pages of at most 500 objects, each message under the limit, together
    // every object once, in key order, at one resourceVersion.
    for limit in [0, 1000] {
        let pages = all_pages(&mut c, limit).await;
        assert!(
            pages.len() > 1,
            "one page of 520 objects of 2 KB in 64 KiB?"
        );
        let names: Vec<String> = pages
            .iter()
            .flat_map(|(p, _)| p.items.iter())
            .map(|o| {
                object_json(Some(o))["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let expected: Vec<String> = (0..520).map(|i| format!("cm-{i:04}")).collect();
        assert_eq!(names, expected, "limit {limit}");
        for (p, size) in &pages {
            assert!(*size <= max, "a {size}-byte message with limit {limit}");
            assert!(p.items.len() <= 500);
            assert_eq!(p.resource_version, pages[0].0.resource_version);
        }
        let first = &pages[0].0;
        assert_eq!(
            first.remaining_item_count,
            Some(520 - first.items.len() as i64)
        );
    }
    // A client's own small limit is kept.
    let small = all_pages(&mut c, 7).await;
    assert_eq!(small[0].0.items.len(), 7);
    // A streaming list's initial events come in messages under the limit too.
    {
        use prost::Message;
        let mut stream = c
            .watch(WatchRequest {
                collection: configmaps("big"),
                send_initial_events: Some(true),
                resource_version_match: "NotOlderThan".into(),
                allow_watch_bookmarks: true,
                ..Default::default()
            })
            .await
            .expect("watch")
            .into_inner();
        let (mut added, mut messages) = (0, 0);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        'read: loop {
            let msg = tokio::time::timeout_at(deadline, stream.message())
                .await
                .expect("initial events in time")
                .expect("a message")
                .expect("not ended");
            messages += 1;
            assert!(
                msg.encoded_len() <= max,
                "a {}-byte watch message",
                msg.encoded_len()
            );
            for ev in &msg.events {
                if ev.r#type() == EventType::Added {
                    added += 1;
                } else if ev.initial_events_end {
                    break 'read;
                }
            }
        }
        assert_eq!(added, 520);
        assert!(messages > 520 * 2000 / max, "{messages} messages");
    }
    // tonic names a message over a limit either way.
    let over_limit = |e: &tonic::Status| {
        matches!(
            e.code(),
            tonic::Code::OutOfRange | tonic::Code::ResourceExhausted
        )
    };
    // A request larger than the limit is refused before it is read.
    let err = c
        .list(ListRequest {
            collection: configmaps("big"),
            label_selector: "y".repeat(max + 1),
            ..Default::default()
        })
        .await
        .expect_err("a request over the limit");
    assert!(over_limit(&err), "{err:?}");
    // One object larger than the limit fails its call rather than going out in a
    // message the client would refuse. The get asks for the put's revision (not older
    // than it), so it waits for ingestion instead of racing it to a NotFound.
    let huge_rev = kv
        .put(
            "/registry/configmaps/big/huge",
            configmap("big", "huge", &"z".repeat(max + 1000)),
            None,
        )
        .await
        .expect("put")
        .header()
        .expect("a response header")
        .revision();
    let err = c
        .get(GetRequest {
            collection: configmaps("big"),
            name: "huge".into(),
            resource_version: huge_rev.to_string(),
            ..Default::default()
        })
        .await
        .expect_err("an object over the limit");
    assert!(over_limit(&err), "{err:?}");

    // With the default message size, a list without limit is 500 objects, then 20.
    let w = Watchd::start(&etcd.client_url(), &[]);
    let mut c = client(&w).await;
    let pages = all_pages(&mut c, 0).await;
    let sizes: Vec<usize> = pages.iter().map(|(p, _)| p.items.len()).collect();
    assert_eq!(sizes, [500, 21]);
}

/// Reads a stalled stream to its end: the events its window held, then how it ended;
/// one entry per message.
async fn drain<M, F: FnMut(M) -> Vec<pb::WatchEvent>>(
    stream: &mut tonic::Streaming<M>,
    mut events: F,
) -> Vec<Vec<pb::WatchEvent>> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match tokio::time::timeout_at(deadline, stream.message()).await {
            Ok(Ok(Some(m))) => out.push(events(m)),
            Ok(Ok(None)) => return out,
            Ok(Err(status)) => panic!("the stream failed: {status:?}"),
            Err(_) => panic!("the stalled stream did not end: {} messages", out.len()),
        }
    }
}

/// A client that stops reading makes the server hold no more than the stream's
/// HTTP/2 window: the server polls the stream only as the window opens, so the cursor
/// stays behind, falls out of the history window, and the stream ends with 410 Expired
/// when the client reads again, while live streams on the same connection get every
/// event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_grpc_stream_holds_only_its_window_and_ends_with_410() {
    const WRITES: usize = 40;
    const LIVE: usize = 50;
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let key = "/registry/configmaps/flow/cm";
    let filler = "f".repeat(20_000);
    let rv = put_object_text(&mut kv, key, &configmap("flow", "cm", &filler)).await;
    let w = Watchd::start(&etcd.client_url(), &["--history-window=2s"]);
    // One connection, with a stream window of 8 KiB (less than one event).
    let channel = tonic::transport::Endpoint::from_shared(w.grpc_url())
        .expect("endpoint")
        .initial_stream_window_size(8 * 1024)
        .initial_connection_window_size(64 * 1024 * 1024)
        .connect()
        .await
        .expect("connect");
    let mut c = WatchdClient::new(channel);
    let watch = WatchRequest {
        collection: configmaps("flow"),
        resource_version: rv.to_string(),
        ..Default::default()
    };
    let mut stalled = c.watch(watch.clone()).await.expect("watch").into_inner();
    let mut stalled_many = c
        .watch_many(pb::WatchManyRequest {
            selections: vec![pb::Selection {
                collection: configmaps("flow"),
                ..Default::default()
            }],
            resource_version: rv.to_string(),
            ..Default::default()
        })
        .await
        .expect("WatchMany")
        .into_inner();
    let mut readers = Vec::new();
    for _ in 0..LIVE {
        let mut live = c.watch(watch.clone()).await.expect("watch").into_inner();
        readers.push(tokio::spawn(async move {
            let mut seen = 0;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while seen < WRITES + 1 {
                match tokio::time::timeout_at(deadline, live.message()).await {
                    Ok(Ok(Some(m))) => seen += m.events.len(),
                    _ => break,
                }
            }
            seen
        }));
    }
    for i in 1..=WRITES {
        put_object_text(
            &mut kv,
            key,
            &configmap("flow", "cm", &format!("{i}{filler}")),
        )
        .await;
    }
    // One more write once the others are older than the window: it evicts them.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    put_object_text(&mut kv, key, &configmap("flow", "cm", "last")).await;
    for r in readers {
        assert_eq!(
            r.await.unwrap(),
            WRITES + 1,
            "every live stream sees every write"
        );
    }

    for (name, events) in [
        (
            "Watch",
            drain(&mut stalled, |m: pb::WatchResponse| m.events).await,
        ),
        (
            "WatchMany",
            drain(&mut stalled_many, |m: pb::WatchManyResponse| m.events).await,
        ),
    ] {
        let last = events.last().and_then(|m| m.last()).expect("some events");
        assert_eq!(last.r#type(), EventType::Error, "{name}: {last:?}");
        let status = json(&last.status);
        assert_eq!(status["code"], 410, "{name}: {status}");
        assert_eq!(status["reason"], "Expired", "{name}: {status}");
        // What the stream held while stalled: its 8 KiB window holds less than one
        // message of a 20 KB event, and the stream's send capacity is looked at once per
        // 16 KiB queued (WatchMany's messages: tonic's encoder takes them until it has
        // 32 KiB), so at most two messages of events were under way when the reader
        // stopped. A server that went on polling the stream (or queued its events
        // without regard to the window) would have sent a message per write.
        let sizes: Vec<usize> = events
            .iter()
            .map(|m| {
                m.iter()
                    .filter(|e| e.r#type() == EventType::Modified)
                    .count()
            })
            .filter(|&n| n > 0)
            .collect();
        assert!(
            sizes.len() <= 2,
            "{name}: the stalled stream got {} messages of events ({sizes:?}) before it \
             expired; its window holds at most 2",
            sizes.len()
        );
    }
}

/// One event to many Watch calls of one connection is written as HTTP/2 watch streams
/// are: queued by the dispatch pass that wakes them (no call's task runs) and sent in
/// one write, each call's message framed as gRPC frames it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_event_to_a_connections_watch_calls_is_queued_by_the_pass_and_written_once() {
    const WATCHES: usize = 100;
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let key = "/registry/configmaps/pass/cm";
    let rv = put_object_text(&mut kv, key, &configmap("pass", "cm", "0")).await;
    let w = Watchd::start(&etcd.client_url(), &[]);
    let channel = tonic::transport::Endpoint::from_shared(w.grpc_url())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let c = WatchdClient::new(channel);
    let mut streams = Vec::new();
    for _ in 0..WATCHES {
        let watch = WatchRequest {
            collection: configmaps("pass"),
            resource_version: rv.to_string(),
            ..Default::default()
        };
        streams.push(c.clone().watch(watch).await.expect("watch").into_inner());
    }
    let mut many = c
        .clone()
        .watch_many(pb::WatchManyRequest {
            selections: vec![pb::Selection {
                collection: configmaps("pass"),
                ..Default::default()
            }],
            resource_version: rv.to_string(),
            ..Default::default()
        })
        .await
        .expect("watch many")
        .into_inner();
    // Every call's task has stepped its watch to idle (there is nothing since `rv`).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics_url = format!("{}/metrics", w.base_url());
    let sample = |text: &str, name: &str| support::kube::metric(text, name, &[]).unwrap_or(0.0);
    let before = support::http::get(&metrics_url, &[]).await.text();

    let changed = put_object_text(&mut kv, key, &configmap("pass", "cm", "1")).await;
    for stream in &mut streams {
        let message = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("the event within 30 s")
            .expect("a message")
            .expect("the call goes on");
        assert_eq!(message.events.len(), 1, "{message:?}");
        let ev = &message.events[0];
        assert_eq!(ev.r#type(), EventType::Modified);
        assert_eq!(ev.resource_version, changed);
        assert_eq!(object_json(ev.object.as_ref())["data"]["v"], "1");
    }
    let message = tokio::time::timeout(Duration::from_secs(30), many.message())
        .await
        .expect("the WatchMany event within 30 s")
        .expect("a message")
        .expect("the call goes on");
    assert_eq!(message.events.len(), 1, "{message:?}");
    assert_eq!(message.events[0].resource_version, changed);

    let after = support::http::get(&metrics_url, &[]).await.text();
    let task_frames = |text: &str| {
        support::kube::metric(text, "watchd_http2_watch_task_frames_total", &[])
            .expect("watch streams count the frames their tasks queue")
    };
    assert_eq!(
        task_frames(&after) - task_frames(&before),
        0.0,
        "every call's message was queued by the pass"
    );
    let writes = sample(&after, "watchd_http2_socket_writes_total")
        - sample(&before, "watchd_http2_socket_writes_total");
    // One write carries all 100 messages; a second would be the socket taking part of it.
    assert!(
        (1.0..=2.0).contains(&writes),
        "{WATCHES} calls' messages in {writes} writes"
    );
}

/// An event whose message would be over `--grpc-max-message-bytes` ends the Watch call
/// with RESOURCE_EXHAUSTED (as a message over the limit ends any gRPC call), after the
/// events before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_event_over_the_message_limit_ends_the_call_resource_exhausted() {
    const LIMIT: usize = 64 * 1024;
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let rv = put_object_text(
        &mut kv,
        "/registry/configmaps/big/small",
        &configmap("big", "small", "0"),
    )
    .await;
    let w = Watchd::start(
        &etcd.client_url(),
        &[&format!("--grpc-max-message-bytes={LIMIT}")],
    );
    let mut c = client(&w).await;
    let mut stream = c
        .watch(WatchRequest {
            collection: configmaps("big"),
            resource_version: rv.to_string(),
            ..Default::default()
        })
        .await
        .expect("watch")
        .into_inner();
    let fits = put_object_text(
        &mut kv,
        "/registry/configmaps/big/small",
        &configmap("big", "small", "1"),
    )
    .await;
    let first = tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("the first event within 30 s")
        .expect("a message")
        .expect("the call goes on");
    assert_eq!(first.events[0].resource_version, fits);
    put_object_text(
        &mut kv,
        "/registry/configmaps/big/large",
        &configmap("big", "large", &"x".repeat(LIMIT + 1)),
    )
    .await;
    let end = tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("the call ends within 30 s")
        .expect_err("the large event ends the call");
    assert_eq!(end.code(), tonic::Code::ResourceExhausted, "{end:?}");
    assert!(
        end.message().contains("the limit is: 65536 bytes"),
        "{}",
        end.message()
    );
}
