//! watch over HTTP against a real etcd: which events a watcher gets, with which
//! resourceVersions, bookmarks, streaming lists, expiry and timeouts.

mod support;

use std::time::Duration;

use support::kube::*;
use support::{http, storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf.
storage_tests! {
    watch_from_resource_version_delivers_later_changes_in_order,
    watch_of_cluster_scoped_resource_from_resource_version,
    watch_without_resource_version_starts_with_synthetic_added_events,
    watch_with_label_selector_adds_and_deletes_as_objects_start_and_stop_matching,
    watch_list_sends_initial_events_then_an_initial_events_end_bookmark,
    watch_without_allow_bookmarks_never_sends_a_bookmark,
    watch_from_resource_version_older_than_history_gets_expired_error_event,
    watch_with_timeout_seconds_ends_the_stream,
    watch_path_naming_an_object_requires_a_field_selector_naming_it,
}

async fn watch_from_resource_version_delivers_later_changes_in_order() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "w", "existing", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let from = put_pod(&mut kv, "w", "before-watch", &[]).await;

    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/w/pods?watch=true&resourceVersion={from}"
    ))
    .await;
    assert_eq!(
        stream
            .headers()
            .get("transfer-encoding")
            .and_then(|v| v.to_str().ok()),
        Some("chunked")
    );
    let added = put_pod(&mut kv, "w", "x", &[("v", "1")]).await;
    put_pod(&mut kv, "elsewhere", "y", &[]).await;
    let modified = put_pod(&mut kv, "w", "x", &[("v", "2")]).await;
    let deleted = delete_key(&mut kv, &pod_key("w", "x")).await;
    let sentinel = put_pod(&mut kv, "w", "sentinel", &[]).await;

    let ev = next_event(&mut stream).await;
    check_event(&ev, "ADDED", "x", added);
    assert_eq!(
        (
            ev["object"]["kind"].as_str(),
            ev["object"]["apiVersion"].as_str()
        ),
        (Some("Pod"), Some("v1"))
    );
    assert_served(&ev["object"], &pod("w", "x", &[("v", "1")]), added);
    let ev = next_event(&mut stream).await;
    check_event(&ev, "MODIFIED", "x", modified);
    assert_served(&ev["object"], &pod("w", "x", &[("v", "2")]), modified);
    let ev = next_event(&mut stream).await;
    check_event(&ev, "DELETED", "x", deleted);
    // DELETED carries the last state, at the revision of the deletion.
    assert_served(&ev["object"], &pod("w", "x", &[("v", "2")]), deleted);
    // Nothing in between: not the other namespace, not the objects that existed at `from`.
    check_event(
        &next_event(&mut stream).await,
        "ADDED",
        "sentinel",
        sentinel,
    );
    assert!(added > from && modified > added && deleted > modified);
}

async fn watch_of_cluster_scoped_resource_from_resource_version() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let from = etcd_revision(&mut kv).await;
    let mut stream = open_watch(&format!(
        "{base}/api/v1/nodes?watch=1&resourceVersion={from}"
    ))
    .await;
    let added = put_object(&mut kv, "/registry/minions/n1", &node("n1")).await;
    let deleted = delete_key(&mut kv, "/registry/minions/n1").await;
    let ev = next_event(&mut stream).await;
    check_event(&ev, "ADDED", "n1", added);
    assert_served(&ev["object"], &node("n1"), added);
    let ev = next_event(&mut stream).await;
    check_event(&ev, "DELETED", "n1", deleted);
    assert_served(&ev["object"], &node("n1"), deleted);
}

async fn watch_without_resource_version_starts_with_synthetic_added_events() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_pod(&mut kv, "s", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    // Written after start: the initial events come from a consistent snapshot.
    let rb = put_pod(&mut kv, "s", "b", &[]).await;

    let mut stream = open_watch(&format!("{base}/api/v1/namespaces/s/pods?watch=1")).await;
    let initial = stream.next_events(2, EVENT_WAIT).await;
    assert_eq!(initial.len(), 2, "{initial:?}");
    check_event(&initial[0], "ADDED", "a", ra);
    check_event(&initial[1], "ADDED", "b", rb);

    let rc = put_pod(&mut kv, "s", "c", &[]).await;
    let rb2 = put_pod(&mut kv, "s", "b", &[("v", "2")]).await;
    check_event(&next_event(&mut stream).await, "ADDED", "c", rc);
    check_event(&next_event(&mut stream).await, "MODIFIED", "b", rb2);
}

async fn watch_with_label_selector_adds_and_deletes_as_objects_start_and_stop_matching() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "l", "already", &[("app", "web")]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let from = etcd_revision(&mut kv).await;
    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/l/pods?watch=true&resourceVersion={from}&labelSelector=app%3Dweb"
    ))
    .await;

    put_pod(&mut kv, "l", "x", &[("app", "db")]).await;
    let starts = put_pod(&mut kv, "l", "x", &[("app", "web"), ("v", "1")]).await;
    let changes = put_pod(&mut kv, "l", "x", &[("app", "web"), ("v", "2")]).await;
    let stops = put_pod(&mut kv, "l", "x", &[("app", "db")]).await;
    delete_key(&mut kv, &pod_key("l", "x")).await;
    let sentinel = put_pod(&mut kv, "l", "sentinel", &[("app", "web")]).await;

    let ev = next_event(&mut stream).await;
    check_event(&ev, "ADDED", "x", starts);
    assert_eq!(ev["object"]["metadata"]["labels"]["app"], "web");
    check_event(&next_event(&mut stream).await, "MODIFIED", "x", changes);
    let ev = next_event(&mut stream).await;
    check_event(&ev, "DELETED", "x", stops);
    // kube-apiserver sends the last matching state at the revision it stopped matching.
    assert_eq!(ev["object"]["metadata"]["labels"]["app"], "web", "{ev}");
    check_event(
        &next_event(&mut stream).await,
        "ADDED",
        "sentinel",
        sentinel,
    );
}

async fn watch_list_sends_initial_events_then_an_initial_events_end_bookmark() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_pod(&mut kv, "wl", "a", &[]).await;
    put_pod(&mut kv, "other", "o", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let rb = put_pod(&mut kv, "wl", "b", &[]).await;

    let query = "watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
    let mut expected = vec![("a".to_string(), ra), ("b".to_string(), rb)];
    // A consistent start (client-go), then resourceVersion=0 (kube-rs).
    for rv_param in ["", "&resourceVersion=0"] {
        let mut stream = open_watch(&format!(
            "{base}/api/v1/namespaces/wl/pods?{query}{rv_param}"
        ))
        .await;
        for (name, revision) in &expected {
            check_event(&next_event(&mut stream).await, "ADDED", name, *revision);
        }
        let bookmark = next_event(&mut stream).await;
        assert_eq!(bookmark["type"], "BOOKMARK", "{rv_param}: {bookmark}");
        let object = &bookmark["object"];
        assert_eq!(object["kind"], "Pod", "{bookmark}");
        assert_eq!(object["apiVersion"], "v1", "{bookmark}");
        assert_eq!(
            object["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
            "{bookmark}"
        );
        let newest = expected.iter().map(|(_, r)| *r).max().unwrap();
        assert!(rv(object) >= newest, "{bookmark}");

        let name = format!("live{}", expected.len());
        let live = put_pod(&mut kv, "wl", &name, &[]).await;
        check_event(&next_event(&mut stream).await, "ADDED", &name, live);
        expected.push((name, live));
    }
}

async fn watch_without_allow_bookmarks_never_sends_a_bookmark() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "nb", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    for query in [
        "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=3",
        "watch=true&timeoutSeconds=3",
    ] {
        let mut stream = open_watch(&format!("{base}/api/v1/namespaces/nb/pods?{query}")).await;
        put_pod(&mut kv, "nb", "b", &[]).await;
        let events = read_to_end(&mut stream, 100).await;
        assert!(
            events.iter().all(|e| e["type"] != "BOOKMARK"),
            "{query}: {events:?}"
        );
        let types: Vec<&str> = events
            .iter()
            .map(|e| e["type"].as_str().unwrap_or(""))
            .collect();
        assert!(
            types.len() >= 2 && types.iter().all(|t| *t == "ADDED" || *t == "MODIFIED"),
            "{query}: {types:?}"
        );
    }
}

// One storage format: no objects; the 422s come from the query alone.
#[tokio::test]
async fn send_initial_events_without_resource_version_match_is_invalid() {
    let etcd = Etcd::start();
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let cases = [
        (
            "watch=true&sendInitialEvents=true",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=5",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=5",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
    ];
    for (query, message) in cases {
        let status = get_status(&format!("{base}/api/v1/pods?{query}"), 422, "Invalid").await;
        assert!(
            status["message"].as_str().unwrap().contains(message),
            "{query}: {status}"
        );
        assert_eq!(status["details"]["kind"], "ListOptions", "{query}");
        assert_eq!(status["details"]["group"], "meta.k8s.io", "{query}");
        assert_eq!(
            status["details"]["causes"][0]["field"], "resourceVersionMatch",
            "{query}"
        );
        assert_eq!(
            status["details"]["causes"][0]["reason"], "FieldValueForbidden",
            "{query}"
        );
    }
}

async fn watch_from_resource_version_older_than_history_gets_expired_error_event() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &["--history-window=1s"]);
    let base = watchd.base_url();
    let old = put_pod(&mut kv, "h", "a", &[]).await;
    let newer = put_pod(&mut kv, "h", "b", &[]).await;
    get_json(&format!("{base}/api/v1/namespaces/h/pods")).await;
    // Let both events age out of the 1 s window, then write once more: appending evicts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let last = put_pod(&mut kv, "h", "c", &[]).await;
    get_json(&format!("{base}/api/v1/namespaces/h/pods")).await;

    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/h/pods?watch=true&resourceVersion={old}"
    ))
    .await;
    let events = read_to_end(&mut stream, 5).await;
    assert_eq!(events.len(), 1, "one ERROR event, then the end: {events:?}");
    assert_eq!(events[0]["type"], "ERROR", "{events:?}");
    let status = &events[0]["object"];
    check_status(status, 410, "Expired");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("too old resource version: {old} (")),
        "{status}"
    );

    // The newest kept revision still resumes.
    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/h/pods?watch=true&resourceVersion={newer}"
    ))
    .await;
    check_event(&next_event(&mut stream).await, "ADDED", "c", last);
}

async fn watch_with_timeout_seconds_ends_the_stream() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let ra = put_pod(&mut kv, "t", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/t/pods?watch=true&timeoutSeconds=2"
    ))
    .await;
    let events = read_to_end(&mut stream, 10).await;
    assert_eq!(events.len(), 1, "{events:?}");
    check_event(&events[0], "ADDED", "a", ra);
    assert!(stream.is_ended());
    // Bookmarks were allowed here, so one may come before the end; the stream still ends.
    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/t/pods?watch=true&timeoutSeconds=2&allowWatchBookmarks=true&resourceVersion={ra}"
    ))
    .await;
    let events = read_to_end(&mut stream, 10).await;
    assert!(events.iter().all(|e| e["type"] == "BOOKMARK"), "{events:?}");
    for e in &events {
        assert_eq!(e["object"]["kind"], "Pod", "{e}");
        assert!(rv(&e["object"]) >= ra, "{e}");
    }
}

/// A resource that went quiet after a burst drops the burst's events and past snapshots
/// once the window passed, with no change to evict them: a watch or an Exact list from
/// before answers 410, the sweep is counted, and a watch from the last revision resumes.
#[tokio::test]
async fn history_past_the_window_is_dropped_while_the_resource_is_quiet() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start(&etcd.client_url(), &["--history-window=1s"]);
    let base = watchd.base_url();
    let first = put_pod(&mut kv, "q", "a", &[]).await;
    put_pod(&mut kv, "q", "b", &[]).await;
    let last = put_pod(&mut kv, "q", "c", &[]).await;
    let list = get_json(&format!(
        "{base}/api/v1/namespaces/q/pods?resourceVersion={last}&resourceVersionMatch=NotOlderThan"
    ))
    .await;
    assert_eq!(item_names(&list), ["a", "b", "c"]);
    // Nothing is written from here on: the sweep (every half window here) drops the events.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
        let swept = metric(&metrics, "watchd_history_swept_total", &["kind=\"events\""]);
        let held = metric(&metrics, "watchd_history_events", &["resource=\"pods\""]);
        // A write slower than the window evicts earlier ones itself: the sweep drops
        // the rest.
        if swept >= Some(1.0) && held == Some(0.0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "history not swept: swept {swept:?}, pods' events held {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/q/pods?watch=true&resourceVersion={first}"
    ))
    .await;
    let events = read_to_end(&mut stream, 5).await;
    assert_eq!(events.len(), 1, "one ERROR event: {events:?}");
    check_status(&events[0]["object"], 410, "Expired");
    get_status(
        &format!(
            "{base}/api/v1/namespaces/q/pods?resourceVersion={first}&resourceVersionMatch=Exact"
        ),
        410,
        "Expired",
    )
    .await;
    // The newest state is still served, and a watch from its revision resumes.
    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/q/pods?watch=true&resourceVersion={last}"
    ))
    .await;
    let next = put_pod(&mut kv, "q", "d", &[]).await;
    check_event(&next_event(&mut stream).await, "ADDED", "d", next);
}

/// watchd's etcd watch asks for no previous values: a deletion carries the cache's last
/// state of the object, and for one the cache never held (here its creation's event was
/// dropped by the test hook, as a watch that lost it would), etcd's, read at the revision
/// before the deletion.
#[tokio::test]
async fn a_deleted_object_the_cache_never_held_carries_etcd_s_last_state() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let watchd = Watchd::start_with_env(
        &etcd.client_url(),
        &[],
        &[("WATCHD_TEST_DROP_EVENT", "/pods/d/unheld")],
    );
    let base = watchd.base_url();
    put_pod(&mut kv, "d", "unheld", &[("app", "x")]).await;
    let seen = put_pod(&mut kv, "d", "seen", &[]).await;
    let list = get_json(&format!(
        "{base}/api/v1/namespaces/d/pods?resourceVersion={seen}&resourceVersionMatch=NotOlderThan"
    ))
    .await;
    assert_eq!(
        item_names(&list),
        ["seen"],
        "the creation of unheld was dropped"
    );
    let mut stream = open_watch(&format!(
        "{base}/api/v1/namespaces/d/pods?watch=true&resourceVersion={seen}"
    ))
    .await;
    let gone = delete_key(&mut kv, &pod_key("d", "unheld")).await;
    let event = next_event(&mut stream).await;
    check_event(&event, "DELETED", "unheld", gone);
    assert_eq!(event["object"]["metadata"]["labels"]["app"], "x", "{event}");
    let gone = delete_key(&mut kv, &pod_key("d", "seen")).await;
    check_event(&next_event(&mut stream).await, "DELETED", "seen", gone);
}

// JSON storage only: it is about pretty-printed JSON values (written raw).
#[tokio::test]
async fn watch_frames_are_single_lines_even_for_pretty_printed_values() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let pretty =
        serde_json::to_string_pretty(&pod("pp", "stored-before", &[("app", "pretty")])).unwrap();
    assert!(pretty.contains('\n'));
    let r1 = put_raw(&mut kv, &pod_key("pp", "stored-before"), pretty.clone()).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();

    let mut stream = http::watch(&format!("{base}/api/v1/namespaces/pp/pods?watch=1"), &[]).await;
    assert_eq!(stream.status(), 200);
    let after = pretty.replace("stored-before", "stored-after");
    let r2 = put_raw(&mut kv, &pod_key("pp", "stored-after"), after).await;
    for (name, revision) in [("stored-before", r1), ("stored-after", r2)] {
        let line = stream.next_line(EVENT_WAIT).await.expect("a watch frame");
        let event: serde_json::Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!(
                "frame is not one JSON line ({e}): {}",
                String::from_utf8_lossy(&line)
            )
        });
        check_event(&event, "ADDED", name, revision);
        assert_eq!(event["object"]["metadata"]["labels"]["app"], "pretty");
        assert_eq!(event["object"]["spec"]["containers"][0]["name"], "main");
    }
    let list = get_json(&format!("{base}/api/v1/namespaces/pp/pods")).await;
    assert_eq!(item_names(&list), ["stored-after", "stored-before"]);
}

// JSON storage only: values written as other JSON writers write them (raw).
/// A value any JSON reader reads is served, however it was spaced or keyed: Python's
/// `json.dumps` spacing (the issue's ConfigMap), tabs, duplicate metadata (readers keep
/// the last); in the initial list and in the watch alike, and the metric counts the
/// values that needed normalizing.
#[tokio::test]
async fn values_spaced_or_keyed_as_any_json_writer_writes_them_are_served() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let python = r#"{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "namespace": "default", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"}}, "data": {"k": "v"}}"#;
    let r1 = put_raw(&mut kv, "/registry/configmaps/default/a", python).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let list = get_json(&format!("{base}/api/v1/namespaces/default/configmaps")).await;
    assert_eq!(item_names(&list), ["a"], "{list}");
    assert_eq!(list["items"][0]["data"]["k"], "v");
    assert_eq!(rv(&list["items"][0]), r1);
    let selected = get_json(&format!(
        "{base}/api/v1/namespaces/default/configmaps?labelSelector=a%3Db"
    ))
    .await;
    assert_eq!(item_names(&selected), ["a"]);

    let mut stream = http::watch(
        &format!("{base}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={r1}"),
        &[],
    )
    .await;
    assert_eq!(stream.status(), 200);
    let tabs = "{\t\"kind\" :\t\"ConfigMap\" , \"apiVersion\":\"v1\",\"metadata\" : {\"name\":\"b\",\"namespace\":\"default\"} }";
    let r2 = put_raw(&mut kv, "/registry/configmaps/default/b", tabs).await;
    let twice = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"default","labels":{"old":"x"}},"metadata":{"name":"c","namespace":"default","labels":{"new":"y"}}}"#;
    let r3 = put_raw(&mut kv, "/registry/configmaps/default/c", twice).await;
    for (name, revision) in [("b", r2), ("c", r3)] {
        let line = stream.next_line(EVENT_WAIT).await.expect("a watch frame");
        let event: serde_json::Value = serde_json::from_slice(&line).expect("one JSON line");
        check_event(&event, "ADDED", name, revision);
    }
    let c = get_json(&format!("{base}/api/v1/namespaces/default/configmaps/c")).await;
    assert_eq!(
        c["metadata"]["labels"],
        serde_json::json!({"new": "y"}),
        "{c}"
    );
    assert_eq!(rv(&c), r3);
    let metrics = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(
        metric(&metrics, "watchd_json_values_normalized_total", &[]),
        Some(1.0),
        "only the value with duplicate metadata needed normalizing"
    );
}

/// kube-apiserver's rule (handlers/get.go): a watch at a path that names an object takes
/// its field selector as given if it names that object with `=`, else 400; no selector
/// means the object. A plain object path with `watch=true` is a get.
async fn watch_path_naming_an_object_requires_a_field_selector_naming_it() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "n", "a", &[]).await;
    put_pod(&mut kv, "n", "b", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    for selector in [
        "metadata.name%3Db",
        "status.phase%3DRunning",
        "metadata.name!%3Da",
    ] {
        let status = get_status(
            &format!("{base}/api/v1/watch/namespaces/n/pods/a?fieldSelector={selector}"),
            400,
            "BadRequest",
        )
        .await;
        assert_eq!(
            status["message"], "fieldSelector metadata.name doesn't match requested name",
            "{selector}"
        );
    }
    for selector in [
        "",
        "&fieldSelector=metadata.name%3Da",
        "&fieldSelector=metadata.name%3D%3Da%2Cstatus.phase%3DRunning",
    ] {
        let mut w = open_watch(&format!(
            "{base}/api/v1/watch/namespaces/n/pods/a?resourceVersion=0{selector}"
        ))
        .await;
        let ev = next_event(&mut w).await;
        assert_eq!(
            (
                ev["type"].as_str(),
                ev["object"]["metadata"]["name"].as_str()
            ),
            (Some("ADDED"), Some("a")),
            "{selector}: {ev}"
        );
    }
    // A selector term besides the name still filters.
    let mut w = open_watch(&format!(
        "{base}/api/v1/watch/namespaces/n/pods/a?resourceVersion=0&fieldSelector=metadata.name%3Da%2Cstatus.phase%3DPending"
    ))
    .await;
    let b = put_pod(&mut kv, "n", "b", &[("v", "2")]).await;
    let a = put_pod(&mut kv, "n", "a", &[("v", "2")]).await;
    assert!(
        w.next_event(Duration::from_millis(500)).await.is_none(),
        "a is not Pending"
    );
    assert!(a > b);
    // The object path itself is a get, even with watch=true and a selector.
    let got = get_json(&format!(
        "{base}/api/v1/namespaces/n/pods/a?watch=true&fieldSelector=metadata.name%3Db"
    ))
    .await;
    assert_eq!(
        (got["kind"].as_str(), got["metadata"]["name"].as_str()),
        (Some("Pod"), Some("a"))
    );
}
