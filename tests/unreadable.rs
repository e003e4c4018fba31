//! Values watchd cannot read never vanish silently: a resource holding one is served as
//! kube-apiserver 1.34 serves a resource whose watch cache cannot initialize. Watches and
//! unpaginated lists get 429 `storage is (re)initializing: ...` with `Retry-After`; gets
//! and paginated lists without selectors read etcd, where the bad key answers 500 with
//! the key; other resources are unaffected. Replacing or deleting the value makes the
//! resource ready again, in a new epoch.

mod support;

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use watchd::api::grpc::pb::watchd_client::WatchdClient;
use watchd::api::grpc::pb::{self, Collection, ListRequest, Selection, SnapshotRequest};

use support::kube::*;
use support::{http, storage_tests, Etcd, Watchd};

storage_tests! {
    encrypted_value_makes_its_resource_pending_until_replaced,
    corrupt_json_value_makes_its_resource_pending_until_replaced,
    corrupt_protobuf_value_makes_its_resource_pending_until_deleted,
    value_going_bad_ends_watches_and_healing_starts_a_new_epoch,
    forged_continue_tokens_read_nothing_outside_the_requested_namespace,
}

fn sealed(n: u8) -> Vec<u8> {
    let mut v = b"k8s:enc:aescbc:v1:key1:".to_vec();
    v.extend_from_slice(&[0x8f, 0x00, n, 0xfe, 0x42, 0x7a, 0x00, 0xc1]);
    v
}

async fn undecodable(base: &str, reason: &str) -> f64 {
    let text = http::get(&format!("{base}/metrics"), &[]).await.text();
    let labels = [
        "resource=\"pods\"".to_string(),
        format!("reason=\"{reason}\""),
    ];
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    metric(&text, "watchd_undecodable_values_total", &labels).unwrap_or(0.0)
}

/// `bad` at `u/bad-1` among readable pods `u/a-good` and `u/good-1`: what every kind of
/// request gets, then the same after the value is replaced by a readable pod.
async fn check_pending_until_replaced(bad: &[u8], reason: &str, error_part: &str) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "u", "a-good", &[]).await;
    put_raw(&mut kv, &pod_key("u", "bad-1"), bad.to_vec()).await;
    put_pod(&mut kv, "u", "good-1", &[]).await;
    put_object(
        &mut kv,
        "/registry/configmaps/u/c",
        &configmap("u", "c", "v"),
    )
    .await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let key = pod_key("u", "bad-1");

    // Watches and unpaginated lists: 429 naming the key, with Retry-After.
    for path in [
        "/api/v1/namespaces/u/pods",
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/namespaces/u/pods?watch=1",
        "/api/v1/pods?limit=10&labelSelector=app%3Dweb",
    ] {
        let resp = http::get(&format!("{base}{path}"), &[]).await;
        let status = assert_status(&resp, 429, "TooManyRequests");
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("storage is (re)initializing: failed to list pods: ")
                && message.contains(&key)
                && message.contains(error_part),
            "{path}: {status}"
        );
        assert_eq!(resp.header("retry-after"), Some("1"), "{path}");
        assert_eq!(status["details"]["retryAfterSeconds"], 1, "{path}");
    }
    // A paginated list reads etcd: the page before the bad key is served, the one that
    // reaches it is a 500 naming it, never a shorter list.
    let first = get_json(&format!("{base}/api/v1/namespaces/u/pods?limit=1")).await;
    assert_eq!(item_names(&first), ["a-good"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 2, "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    let status = get_status(
        &format!("{base}/api/v1/namespaces/u/pods?limit=1&continue={token}"),
        500,
        "InternalError",
    )
    .await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Internal error occurred: unable to ") && message.contains(&key),
        "{status}"
    );
    // Gets read etcd: the bad object is a 500 with its key, the others are served.
    let status = get_status(
        &format!("{base}/api/v1/namespaces/u/pods/bad-1"),
        500,
        "InternalError",
    )
    .await;
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains(&key) && m.contains(error_part)),
        "{status}"
    );
    let good = get_json(&format!("{base}/api/v1/namespaces/u/pods/good-1")).await;
    assert_eq!(good["metadata"]["name"], "good-1");
    // Other resources, and readiness, are unaffected.
    let cms = get_json(&format!("{base}/api/v1/namespaces/u/configmaps")).await;
    assert_eq!(item_names(&cms), ["c"]);
    assert_eq!(http::get(&format!("{base}/readyz"), &[]).await.status, 200);
    assert!(
        undecodable(&base, reason).await >= 1.0,
        "counted as {reason}"
    );
    let text = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(
        metric(&text, "watchd_unreadable_objects", &["resource=\"pods\""]),
        Some(1.0)
    );
    let lines = watchd
        .log()
        .lines()
        .filter(|l| l.contains(&key) && l.contains("cannot read value"))
        .count();
    assert_eq!(lines, 1, "logged once:\n{}", watchd.log());

    // A readable value replaces it: ready again, every object served.
    let fixed = put_pod(&mut kv, "u", "bad-1", &[]).await;
    let list = get_json(&format!("{base}/api/v1/namespaces/u/pods")).await;
    assert_eq!(item_names(&list), ["a-good", "bad-1", "good-1"]);
    assert_eq!(rv(item(&list, "bad-1")), fixed);
    let mut w = open_watch(&format!(
        "{base}/api/v1/namespaces/u/pods?watch=1&resourceVersion={fixed}"
    ))
    .await;
    let added = put_pod(&mut kv, "u", "good-2", &[]).await;
    check_event(&next_event(&mut w).await, "ADDED", "good-2", added);
    let text = http::get(&format!("{base}/metrics"), &[]).await.text();
    assert_eq!(
        metric(&text, "watchd_unreadable_objects", &["resource=\"pods\""]),
        Some(0.0)
    );
}

async fn encrypted_value_makes_its_resource_pending_until_replaced() {
    // No --encryption-provider-config: kube-apiserver's identity reader refuses it.
    check_pending_until_replaced(
        &sealed(1),
        "no_matching_provider",
        "identity transformer tried to read encrypted data",
    )
    .await;
}

async fn corrupt_json_value_makes_its_resource_pending_until_replaced() {
    check_pending_until_replaced(
        br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"bad""#,
        "invalid_json",
        "invalid JSON object",
    )
    .await;
}

async fn corrupt_protobuf_value_makes_its_resource_pending_until_deleted() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "p", "good", &[]).await;
    let mut truncated = Storage::Protobuf.encode(&pod("p", "bad", &[]));
    truncated.truncate(truncated.len() - 3);
    put_raw(&mut kv, &pod_key("p", "bad"), truncated).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let status = get_status(
        &format!("{base}/api/v1/pods?watch=1"),
        429,
        "TooManyRequests",
    )
    .await;
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid protobuf")),
        "{status}"
    );
    let gone = delete_key(&mut kv, &pod_key("p", "bad")).await;
    let list = get_json(&format!("{base}/api/v1/pods")).await;
    assert_eq!(item_names(&list), ["good"]);
    assert!(rv(&list) >= gone, "{list}");
}

async fn value_going_bad_ends_watches_and_healing_starts_a_new_epoch() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "w", "a", &[]).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let from = etcd_revision(&mut kv).await;
    let mut w = open_watch(&format!(
        "{base}/api/v1/namespaces/w/pods?watch=1&resourceVersion={from}"
    ))
    .await;
    let b = put_pod(&mut kv, "w", "b", &[]).await;
    check_event(&next_event(&mut w).await, "ADDED", "b", b);
    // `a` becomes unreadable: as kube-apiserver re-initializing its cache, the stream just
    // ends (no ERROR event), and new watches wait with 429.
    put_raw(&mut kv, &pod_key("w", "a"), sealed(7)).await;
    let rest = read_to_end(&mut w, 0).await;
    assert!(
        rest.is_empty(),
        "no event for an unreadable value: {rest:?}"
    );
    get_status(
        &format!("{base}/api/v1/namespaces/w/pods?watch=1"),
        429,
        "TooManyRequests",
    )
    .await;
    // Deleting it heals the resource in a new epoch: a resume from before is too old.
    let healed = delete_key(&mut kv, &pod_key("w", "a")).await;
    let list = get_json(&format!("{base}/api/v1/namespaces/w/pods")).await;
    assert_eq!(item_names(&list), ["b"]);
    assert!(rv(&list) >= healed);
    let mut old = http::watch(
        &format!("{base}/api/v1/namespaces/w/pods?watch=1&resourceVersion={b}"),
        &[],
    )
    .await;
    let ev = old
        .next_event(Duration::from_secs(10))
        .await
        .expect("an ERROR event");
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 410, "{ev}");
    let mut fresh = open_watch(&format!(
        "{base}/api/v1/namespaces/w/pods?watch=1&resourceVersion={healed}"
    ))
    .await;
    let c = put_pod(&mut kv, "w", "c", &[]).await;
    check_event(&next_event(&mut fresh).await, "ADDED", "c", c);
}

/// A continue token of `json`, as a client would forge it.
fn forged(json: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.to_string())
}

fn pods_in(ns: &str) -> Option<Collection> {
    Some(Collection {
        group: String::new(),
        version: "v1".into(),
        resource: "pods".into(),
        namespace: ns.into(),
    })
}

/// The namespaces of gRPC objects, read from their typed metadata.
fn grpc_namespaces<'a>(objects: impl Iterator<Item = &'a pb::Object>) -> Vec<String> {
    objects
        .map(|o| o.metadata.as_ref().expect("metadata").namespace.clone())
        .collect()
}

/// A continue token's key is relative to the request's own scope and put back behind it
/// (kube-apiserver's `storage.DecodeContinue`), so a token forged with another
/// namespace's key reads nothing outside the namespace asked for: not from the cache, not
/// from etcd while the resource is pending (where the range once started at the forged key
/// and ran up to the end of the caller's namespace), not over gRPC List or Snapshot; and
/// no error names a key outside the scope. Tokens `path.Clean` would change are refused.
async fn forged_continue_tokens_read_nothing_outside_the_requested_namespace() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for (ns, name) in [
        ("a", "p1"),
        ("a", "p2"),
        ("b", "p1"),
        ("b", "p2"),
        ("c", "p1"),
    ] {
        put_pod(&mut kv, ns, name, &[]).await;
        put_object(
            &mut kv,
            &format!("/registry/configmaps/{ns}/{name}"),
            &configmap(ns, name, "v"),
        )
        .await;
    }
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let base = watchd.base_url();
    let rev = etcd_revision(&mut kv).await;
    let token = |start: &str| {
        forged(&serde_json::json!({"v": "meta.k8s.io/v1", "rv": rev, "start": start}))
    };
    let namespaces = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| {
                i["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };

    // From the cache: a key of a namespace before or after the caller's.
    for start in ["a/p1", "c/p1", "a/p1\u{0}"] {
        let list = get_json(&format!(
            "{base}/api/v1/namespaces/b/configmaps?limit=10&continue={}",
            token(start)
        ))
        .await;
        assert_eq!(namespaces(&list), ["b", "b"], "{start:?}: {list}");
    }

    // From etcd: a value no reader can read in namespace `a` makes pods pending, so a
    // paginated list without selectors reads etcd.
    let bad = pod_key("a", "bad");
    put_raw(&mut kv, &bad, b"{not json".to_vec()).await;
    let pending = format!("{base}/api/v1/namespaces/b/pods?limit=10");
    // A consistent read waits for the bad value's revision: pending from then on.
    get_status(
        &format!("{pending}&labelSelector=x%3Dy"),
        429,
        "TooManyRequests",
    )
    .await;
    for start in ["a/bad", "a/p1", "a", "/a/bad"] {
        let url = format!("{pending}&continue={}", token(start));
        let resp = http::get(&url, &[]).await;
        let body = resp.text();
        assert_eq!(resp.status, 200, "{start:?}: {body}");
        assert!(
            !body.contains("/registry/pods/a/"),
            "{start:?} names a key outside: {body}"
        );
        let list: Value = serde_json::from_str(&body).expect("a list");
        assert_eq!(namespaces(&list), ["b", "b"], "{start:?}: {list}");
    }
    // What path.Clean would change, or an empty key, is refused before anything is read.
    for start in ["", "../a/bad", "b/../a/bad", "b//p1", "./a"] {
        let status = get_status(
            &format!("{pending}&continue={}", token(start)),
            400,
            "BadRequest",
        )
        .await;
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("invalid continue token: continue key is not valid"),
            "{start:?}: {status}"
        );
        assert!(!message.contains("/registry/"), "{start:?}: {status}");
    }

    // gRPC List and Snapshot take the same tokens, so the same scope.
    let mut c = WatchdClient::connect(watchd.grpc_url())
        .await
        .expect("gRPC connect");
    for start in ["a/bad", "a/p1"] {
        let page = c
            .list(ListRequest {
                collection: pods_in("b"),
                limit: 10,
                r#continue: token(start),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{start:?}: {e}"))
            .into_inner();
        assert_eq!(grpc_namespaces(page.items.iter()), ["b", "b"], "{start:?}");
        let snapshot_token =
            forged(&serde_json::json!({"rv": rev, "selection": 0, "start": start}));
        let page = c
            .snapshot(SnapshotRequest {
                selections: vec![Selection {
                    collection: pods_in("b"),
                    ..Default::default()
                }],
                limit: 10,
                r#continue: snapshot_token,
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("snapshot {start:?}: {e}"))
            .into_inner();
        let objects = page.items.iter().filter_map(|i| i.object.as_ref());
        assert_eq!(grpc_namespaces(objects), ["b", "b"], "snapshot {start:?}");
    }
    let e = c
        .list(ListRequest {
            collection: pods_in("b"),
            limit: 10,
            r#continue: token("../a/bad"),
            ..Default::default()
        })
        .await
        .expect_err("a token path.Clean would change");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    assert!(!e.message().contains("/registry/"), "{e}");
}
