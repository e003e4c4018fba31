//! kube-rs (the `kube` crate's client and runtime, with k8s-openapi's types) against
//! watchd: `watcher` with the default list-then-watch strategy and with streaming lists,
//! a `reflector` store that must end equal to etcd after many random changes, recovery
//! from a 410 after watchd missed changes, and a metadata-only watcher
//! (`Api<PartialObjectMeta<Pod>>`, which asks for PartialObjectMetadata).
//!
//! Every client talks to watchd through a recording proxy, so a failure shows exactly
//! what kube-rs asked for (method, path, query, Accept).

mod support;

use std::collections::BTreeSet;
use std::pin::pin;
use std::time::Duration;

use etcd_client::GetOptions;
use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, ResourceExt};
use support::kube::{delete_key, etcd_revision, pod, pod_key, put_object};
use support::proxy::RecordingProxy;
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with the pods stored as JSON and as protobuf.
storage_tests! {
    multi_thread:
    kube_rs_watcher_lists_then_watches_init_apply_done_then_apply_and_delete,
    kube_rs_watcher_streaming_list_sends_initial_events_then_apply_and_delete,
    kube_rs_reflector_store_equals_etcd_after_random_creates_updates_deletes,
    kube_rs_reflector_with_paginated_initial_list_equals_etcd_after_random_changes,
    kube_rs_streaming_list_reflector_store_equals_etcd_after_random_changes,
    kube_rs_watcher_relists_after_410_for_changes_made_while_watchd_was_down,
    kube_rs_watcher_resumes_across_a_watchd_restart,
    kube_rs_metadata_watcher_lists_and_watches_partial_object_metadata,
}

/// How long a test waits for one watcher event.
const EVENT_WAIT: Duration = Duration::from_secs(15);

/// Random creates/updates/deletes made by the reflector tests.
const RANDOM_CHANGES: usize = 200;

/// A kube-rs client for `base_url` (plain http, no credentials).
fn client(base_url: &str) -> Client {
    let url = base_url
        .parse()
        .unwrap_or_else(|e| panic!("bad url {base_url}: {e}"));
    Client::try_from(kube::Config::new(url)).expect("build kube client")
}

/// `name@resourceVersion` of an object.
fn at<K: ResourceExt>(obj: &K) -> String {
    format!(
        "{}@{}",
        obj.name_any(),
        obj.resource_version().unwrap_or_default()
    )
}

/// A watcher event as a short string: `Init`, `InitApply(a@5)`, `InitDone`, `Apply(c@7)`, `Delete(b@9)`.
fn describe<K: ResourceExt>(event: &Event<K>) -> String {
    match event {
        Event::Init => "Init".to_string(),
        Event::InitApply(o) => format!("InitApply({})", at(o)),
        Event::InitDone => "InitDone".to_string(),
        Event::Apply(o) => format!("Apply({})", at(o)),
        Event::Delete(o) => format!("Delete({})", at(o)),
    }
}

/// The next `n` events, described; panics on a watcher error or after [`EVENT_WAIT`] per event.
async fn next_events<K, S>(stream: &mut S, n: usize, proxy: &RecordingProxy) -> Vec<String>
where
    K: ResourceExt,
    S: Stream<Item = watcher::Result<Event<K>>> + Unpin,
{
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout(EVENT_WAIT, stream.next()).await {
            Ok(Some(Ok(event))) => out.push(describe(&event)),
            Ok(Some(Err(e))) => panic!(
                "watcher error after {out:?}: {e} ({e:?})\nrequests:\n{}",
                proxy.describe()
            ),
            Ok(None) => panic!("watcher stream ended after {out:?}"),
            Err(_) => panic!(
                "no watcher event within {EVENT_WAIT:?} after {out:?}\nrequests:\n{}",
                proxy.describe()
            ),
        }
    }
    out
}

/// Seeds pods `a`, `b` in `ns` and one in another namespace; returns their revisions.
async fn seed(kv: &mut etcd_client::Client, ns: &str) -> (i64, i64) {
    let a = put_object(kv, &pod_key(ns, "a"), &pod(ns, "a", &[])).await;
    let b = put_object(kv, &pod_key(ns, "b"), &pod(ns, "b", &[])).await;
    put_object(kv, &pod_key("elsewhere", "z"), &pod("elsewhere", "z", &[])).await;
    (a, b)
}

/// Creates `c`, updates `a`, deletes `b` in `ns`; returns the three revisions.
async fn change(kv: &mut etcd_client::Client, ns: &str) -> (i64, i64, i64) {
    let c = put_object(kv, &pod_key(ns, "c"), &pod(ns, "c", &[])).await;
    let a = put_object(kv, &pod_key(ns, "a"), &pod(ns, "a", &[("v", "2")])).await;
    put_object(kv, &pod_key("elsewhere", "y"), &pod("elsewhere", "y", &[])).await;
    let b = delete_key(kv, &pod_key(ns, "b")).await;
    (c, a, b)
}

async fn kube_rs_watcher_lists_then_watches_init_apply_done_then_apply_and_delete() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let (a, b) = seed(&mut kv, "kr").await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;
    let listed_at = etcd_revision(&mut kv).await;

    let api: Api<Pod> = Api::namespaced(client(&proxy.base_url()), "kr");
    let mut stream = pin!(watcher(api, watcher::Config::default()));
    assert_eq!(
        next_events(&mut stream, 4, &proxy).await,
        vec![
            "Init".to_string(),
            format!("InitApply(a@{a})"),
            format!("InitApply(b@{b})"),
            "InitDone".to_string(),
        ]
    );
    let (c2, a2, b_deleted) = change(&mut kv, "kr").await;
    assert_eq!(
        next_events(&mut stream, 3, &proxy).await,
        vec![
            format!("Apply(c@{c2})"),
            format!("Apply(a@{a2})"),
            format!("Delete(b@{b_deleted})"),
        ],
        "requests:\n{}",
        proxy.describe()
    );

    // A paginated list of the most recent state, then a watch from its resourceVersion.
    let seen = proxy.requests();
    let requests = proxy.describe();
    assert_eq!(seen.len(), 2, "{requests}");
    assert_eq!(seen[0].path(), "/api/v1/namespaces/kr/pods", "{requests}");
    assert_eq!(seen[0].query("watch"), None, "{requests}");
    assert_eq!(seen[0].query("limit"), Some("500"), "{requests}");
    assert_eq!(seen[1].path(), "/api/v1/namespaces/kr/pods", "{requests}");
    assert_eq!(seen[1].query("watch"), Some("true"), "{requests}");
    assert_eq!(
        seen[1].query("allowWatchBookmarks"),
        Some("true"),
        "{requests}"
    );
    assert_eq!(
        seen[1].query("resourceVersion"),
        Some(listed_at.to_string().as_str()),
        "{requests}"
    );
}

async fn kube_rs_watcher_streaming_list_sends_initial_events_then_apply_and_delete() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let (a, b) = seed(&mut kv, "kr").await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;

    let api: Api<Pod> = Api::namespaced(client(&proxy.base_url()), "kr");
    let config = watcher::Config::default().streaming_lists();
    let mut stream = pin!(watcher(api, config));
    // InitDone comes from the bookmark annotated k8s.io/initial-events-end.
    assert_eq!(
        next_events(&mut stream, 4, &proxy).await,
        vec![
            "Init".to_string(),
            format!("InitApply(a@{a})"),
            format!("InitApply(b@{b})"),
            "InitDone".to_string(),
        ]
    );
    let (c2, a2, b_deleted) = change(&mut kv, "kr").await;
    assert_eq!(
        next_events(&mut stream, 3, &proxy).await,
        vec![
            format!("Apply(c@{c2})"),
            format!("Apply(a@{a2})"),
            format!("Delete(b@{b_deleted})"),
        ]
    );

    // One watch request, no list.
    let seen = proxy.requests();
    let requests = proxy.describe();
    assert_eq!(seen.len(), 1, "{requests}");
    let w = &seen[0];
    assert_eq!(w.path(), "/api/v1/namespaces/kr/pods", "{requests}");
    assert_eq!(w.query("watch"), Some("true"), "{requests}");
    assert_eq!(w.query("sendInitialEvents"), Some("true"), "{requests}");
    assert_eq!(
        w.query("resourceVersionMatch"),
        Some("NotOlderThan"),
        "{requests}"
    );
    assert_eq!(w.query("resourceVersion"), Some("0"), "{requests}");
    assert_eq!(w.query("allowWatchBookmarks"), Some("true"), "{requests}");
}

/// A small deterministic pseudo-random generator (xorshift64*), so runs are repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `namespace/name@mod_revision` of every pod in etcd.
async fn etcd_pods(kv: &mut etcd_client::Client) -> BTreeSet<String> {
    let prefix = "/registry/pods/";
    let resp = kv
        .get(prefix, Some(GetOptions::new().with_prefix()))
        .await
        .unwrap_or_else(|e| panic!("etcd range {prefix}: {e}"));
    resp.kvs()
        .iter()
        .map(|kv| {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let id = key.strip_prefix(prefix).unwrap_or(&key).to_string();
            format!("{id}@{}", kv.mod_revision())
        })
        .collect()
}

/// `namespace/name@resourceVersion` of every pod in the reflector's store.
fn store_pods(store: &Store<Pod>) -> BTreeSet<String> {
    store
        .state()
        .iter()
        .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), at(p.as_ref())))
        .collect()
}

/// Makes `count` random creates, updates and deletes of pods in two namespaces.
async fn random_changes(kv: &mut etcd_client::Client, rng: &mut Rng, count: usize) {
    const NAMES: u64 = 24;
    for i in 0..count {
        let ns = if rng.below(2) == 0 { "r1" } else { "r2" };
        let name = format!("p{}", rng.below(NAMES));
        let key = pod_key(ns, &name);
        let exists = kv
            .get(key.as_str(), None)
            .await
            .unwrap_or_else(|e| panic!("etcd get {key}: {e}"))
            .count()
            > 0;
        if exists && rng.below(3) == 0 {
            delete_key(kv, &key).await;
        } else {
            let step = i.to_string();
            put_object(kv, &key, &pod(ns, &name, &[("step", step.as_str())])).await;
        }
    }
}

/// Runs a reflector (all namespaces) with `config` while random changes happen in etcd,
/// and checks that its store ends equal to etcd's state.
async fn reflector_matches_etcd_after_random_changes(config: watcher::Config, seed_value: u64) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let mut rng = Rng(seed_value);
    random_changes(&mut kv, &mut rng, 20).await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;

    let api: Api<Pod> = Api::all(client(&proxy.base_url()));
    let (store, writer) = reflector::store::<Pod>();
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let errors_in_task = errors.clone();
    let driver = tokio::spawn(async move {
        let stream = reflector::reflector(writer, watcher(api, config)).default_backoff();
        let mut stream = pin!(stream);
        while let Some(item) = stream.next().await {
            if let Err(e) = item {
                errors_in_task
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(e.to_string());
            }
        }
    });

    // Changes while the reflector lists and starts watching, then once it is ready.
    random_changes(&mut kv, &mut rng, RANDOM_CHANGES / 2).await;
    let ready = tokio::time::timeout(Duration::from_secs(20), store.wait_until_ready()).await;
    assert!(
        matches!(ready, Ok(Ok(()))),
        "reflector not ready: {ready:?}\nrequests:\n{}",
        proxy.describe()
    );
    random_changes(&mut kv, &mut rng, RANDOM_CHANGES / 2).await;

    let want = etcd_pods(&mut kv).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut got = store_pods(&store);
    while got != want && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        got = store_pods(&store);
    }
    driver.abort();
    let errors = errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        got,
        want,
        "reflector store != etcd\nonly in store: {:?}\nonly in etcd: {:?}\nwatcher errors: {errors:?}\nrequests:\n{}",
        got.difference(&want).collect::<Vec<_>>(),
        want.difference(&got).collect::<Vec<_>>(),
        proxy.describe()
    );
    assert!(errors.is_empty(), "watcher errors: {errors:?}");
}

async fn kube_rs_reflector_store_equals_etcd_after_random_creates_updates_deletes() {
    reflector_matches_etcd_after_random_changes(watcher::Config::default(), 0x9E37_79B9_7F4A_7C15)
        .await;
}

async fn kube_rs_reflector_with_paginated_initial_list_equals_etcd_after_random_changes() {
    // Pages of 5 items: the initial list follows `continue` tokens, all of one snapshot.
    reflector_matches_etcd_after_random_changes(
        watcher::Config::default().page_size(5),
        0x2545_F491_4F6C_DD1D,
    )
    .await;
}

async fn kube_rs_streaming_list_reflector_store_equals_etcd_after_random_changes() {
    reflector_matches_etcd_after_random_changes(
        watcher::Config::default().streaming_lists(),
        0xD1B5_4A32_D192_ED03,
    )
    .await;
}

async fn kube_rs_watcher_relists_after_410_for_changes_made_while_watchd_was_down() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let (a, b) = seed(&mut kv, "kr").await;
    let mut watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;

    let api: Api<Pod> = Api::namespaced(client(&proxy.base_url()), "kr");
    let mut stream = pin!(watcher(api, watcher::Config::default()).default_backoff());
    assert_eq!(
        next_events(&mut stream, 4, &proxy).await,
        vec![
            "Init".to_string(),
            format!("InitApply(a@{a})"),
            format!("InitApply(b@{b})"),
            "InitDone".to_string(),
        ]
    );
    let c = put_object(&mut kv, &pod_key("kr", "c"), &pod("kr", "c", &[])).await;
    assert_eq!(
        next_events(&mut stream, 1, &proxy).await,
        vec![format!("Apply(c@{c})")]
    );

    // watchd goes away; etcd changes meanwhile and compacts them away, so a new watchd
    // has no history of them (it replays only what etcd still has).
    watchd.kill9();
    let d = put_object(&mut kv, &pod_key("kr", "d"), &pod("kr", "d", &[])).await;
    let gone = delete_key(&mut kv, &pod_key("kr", "a")).await;
    kv.compact(gone, None).await.expect("etcd compact");
    watchd.restart();

    // The watcher resumes from its last resourceVersion, gets 410, and lists again.
    let mut events = Vec::new();
    let mut errors = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !events.iter().any(|e| e == "InitDone") {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(event))) => events.push(describe(&event)),
            Ok(Some(Err(e))) => errors.push(format!("{e}")),
            Ok(None) | Err(_) => panic!(
                "no re-list after the restart: events {events:?}, errors {errors:?}\nrequests:\n{}",
                proxy.describe()
            ),
        }
    }
    assert_eq!(
        events,
        vec![
            "Init".to_string(),
            format!("InitApply(b@{b})"),
            format!("InitApply(c@{c})"),
            format!("InitApply(d@{d})"),
            "InitDone".to_string(),
        ],
        "errors: {errors:?}\nrequests:\n{}",
        proxy.describe()
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("410") || e.contains("too old")),
        "expected the watch to be answered 410 Expired; errors: {errors:?}\nrequests:\n{}",
        proxy.describe()
    );
    // And it keeps watching.
    let e = put_object(&mut kv, &pod_key("kr", "e"), &pod("kr", "e", &[])).await;
    assert_eq!(
        next_events(&mut stream, 1, &proxy).await,
        vec![format!("Apply(e@{e})")]
    );
}

async fn kube_rs_watcher_resumes_across_a_watchd_restart() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let (a, b) = seed(&mut kv, "kr").await;
    let mut watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;
    let api: Api<Pod> = Api::namespaced(client(&proxy.base_url()), "kr");
    let mut stream = pin!(watcher(api, watcher::Config::default()).default_backoff());
    assert_eq!(
        next_events(&mut stream, 4, &proxy).await,
        vec![
            "Init".to_string(),
            format!("InitApply(a@{a})"),
            format!("InitApply(b@{b})"),
            "InitDone".to_string(),
        ]
    );

    // watchd goes away and etcd changes meanwhile; the new watchd replays etcd's history
    // into its event log, so the watcher resumes from its resourceVersion: the changes
    // arrive as events, without a re-list.
    watchd.kill9();
    let c = put_object(&mut kv, &pod_key("kr", "c"), &pod("kr", "c", &[])).await;
    let gone = delete_key(&mut kv, &pod_key("kr", "a")).await;
    watchd.restart();
    let mut events = Vec::new();
    let mut errors = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while events.len() < 2 {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(event))) => events.push(describe(&event)),
            Ok(Some(Err(e))) => errors.push(format!("{e}")),
            Ok(None) | Err(_) => panic!(
                "no events after the restart: events {events:?}, errors {errors:?}\nrequests:\n{}",
                proxy.describe()
            ),
        }
    }
    assert_eq!(
        events,
        vec![format!("Apply(c@{c})"), format!("Delete(a@{gone})")],
        "errors: {errors:?}\nrequests:\n{}",
        proxy.describe()
    );
    assert!(
        errors
            .iter()
            .all(|e| !e.contains("410") && !e.contains("too old")),
        "the watch resumed without 410: {errors:?}"
    );
    let lists = proxy
        .requests()
        .iter()
        .filter(|r| r.query("watch").is_none())
        .count();
    assert_eq!(
        lists,
        1,
        "one list, before the restart\nrequests:\n{}",
        proxy.describe()
    );
}

async fn kube_rs_metadata_watcher_lists_and_watches_partial_object_metadata() {
    // kube-rs asks for PartialObjectMetadataList / PartialObjectMetadata (Accept
    // `application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`, no fallback).
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let (a, b) = seed(&mut kv, "kr").await;
    let watchd = Watchd::start(&etcd.client_url(), &[]);
    let proxy = RecordingProxy::start(watchd.http_addr()).await;

    let api: Api<PartialObjectMeta<Pod>> = Api::namespaced(client(&proxy.base_url()), "kr");
    let mut stream = pin!(watcher(api, watcher::Config::default()));
    let mut events = Vec::new();
    for _ in 0..4 {
        match tokio::time::timeout(EVENT_WAIT, stream.next()).await {
            Ok(Some(Ok(event))) => events.push(describe(&event)),
            other => panic!(
                "metadata_watcher: {other:?} after {events:?}\nrequests:\n{}",
                proxy.describe()
            ),
        }
    }
    assert_eq!(
        events,
        vec![
            "Init".to_string(),
            format!("InitApply(a@{a})"),
            format!("InitApply(b@{b})"),
            "InitDone".to_string(),
        ]
    );
    let (c2, a2, b_deleted) = change(&mut kv, "kr").await;
    assert_eq!(
        next_events(&mut stream, 3, &proxy).await,
        vec![
            format!("Apply(c@{c2})"),
            format!("Apply(a@{a2})"),
            format!("Delete(b@{b_deleted})"),
        ]
    );
    let seen = proxy.requests();
    assert_eq!(
        seen[0].header("accept"),
        Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
        "{}",
        proxy.describe()
    );
}
