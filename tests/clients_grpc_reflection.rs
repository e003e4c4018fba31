//! A generic gRPC client against watchd, as grpcurl works: it has no `.proto` file and no
//! generated code, and learns every service, method and message from server reflection.
//!
//! The client is tests/clients/grpc_reflection.py, built on PyPI's `grpcio`,
//! `grpcio-reflection` and `protobuf` (pinned in scripts/install-clients.sh, installed in
//! `.tools/python-grpc`): `ProtoReflectionDescriptorDatabase` feeding a `DescriptorPool`,
//! message classes made from the descriptors, requests parsed from and responses printed
//! as proto3 JSON. grpcurl itself is not packaged by Debian; README.md's grpcurl commands
//! send exactly the requests below.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use support::clients::{python_grpc_command, repo_root, ClientProcess};
use support::kube::{assert_served, configmap, etcd_revision, node, pod, pod_key, put_json};
use support::kubepb;
use support::{Etcd, Watchd};

/// Bound for one client run (start-up, reflection and the call).
const RUN_WAIT: Duration = Duration::from_secs(30);

/// The client's own deadline for the whole run, every RPC included (`--timeout`), within
/// [`RUN_WAIT`]: a call that does not end fails inside the client, with its status.
const CLIENT_TIMEOUT: &str = "20";

/// The requests README.md's grpcurl commands send, as JSON text in the proto3 mapping.
const GET_PROTOBUF: &str = r#"{"collection":{"version":"v1","resource":"configmaps","namespace":"kube-system"},"name":"kube-proxy","encoding":"PROTOBUF"}"#;
const SNAPSHOT_PODS_NODES: &str = r#"{"selections":[{"collection":{"version":"v1","resource":"pods"}},{"collection":{"version":"v1","resource":"nodes"}}]}"#;
const WATCH_MANY_PODS_NODES: &str = r#"{"selections":[{"collection":{"version":"v1","resource":"pods"}},{"collection":{"version":"v1","resource":"nodes"}}],"sendInitialEvents":true,"allowWatchBookmarks":true,"timeoutSeconds":30}"#;

/// `python3 tests/clients/grpc_reflection.py --timeout .. [--max-messages N] ADDR args..`
/// with the gRPC packages (see [`python_grpc_command`]).
fn grpc_client(addr: SocketAddr, max_messages: Option<usize>, args: &[&str]) -> ClientProcess {
    let (max, addr) = (max_messages.map(|n| n.to_string()), addr.to_string());
    let mut argv = vec!["--timeout", CLIENT_TIMEOUT];
    if let Some(n) = &max {
        argv.extend(["--max-messages", n.as_str()]);
    }
    argv.push(&addr);
    argv.extend(args);
    ClientProcess::spawn(
        "grpc_reflection.py",
        python_grpc_command("grpc_reflection.py", &argv),
    )
}

/// Runs the client to its end (exit 0, else a panic with its output); returns its lines
/// up to and with `done`.
async fn run(addr: SocketAddr, max_messages: Option<usize>, args: &[&str]) -> Vec<Value> {
    let mut client = grpc_client(addr, max_messages, args);
    let (done, mut lines) = client.expect_op("done", RUN_WAIT).await;
    lines.push(done);
    let rest = client.finish(RUN_WAIT).await;
    assert!(rest.is_empty(), "lines after done: {rest:?}\n{lines:?}");
    lines
}

/// The one line with `"op": op`.
fn line<'a>(lines: &'a [Value], op: &str) -> &'a Value {
    let found: Vec<&Value> = lines.iter().filter(|l| l["op"] == op).collect();
    assert_eq!(found.len(), 1, "one {op:?} line expected: {lines:?}");
    found[0]
}

/// `call METHOD REQUEST`: the response messages (at most `max_messages` of a stream).
async fn call(
    addr: SocketAddr,
    method: &str,
    request: &str,
    max_messages: Option<usize>,
) -> Vec<Value> {
    let lines = run(addr, max_messages, &["call", method, request]).await;
    let messages: Vec<Value> = lines
        .iter()
        .filter(|l| l["op"] == "message")
        .map(|l| l["message"].clone())
        .collect();
    let done = line(&lines, "done");
    assert_eq!(done["messages"], json!(messages.len()), "{done}");
    messages
}

/// A `bytes` field as proto3 JSON carries it: standard base64.
fn base64_field(value: &Value) -> Vec<u8> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("bytes as a base64 string: {value}"));
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("not base64 ({e}): {text}"))
}

/// The kube-proxy ConfigMap, as a cluster has it (and `scripts/demo.sh` writes it).
fn kube_proxy_config() -> Value {
    let mut cm = configmap("kube-system", "kube-proxy", "");
    cm["metadata"]["labels"] = json!({"app": "kube-proxy"});
    cm["data"] = json!({"config.conf": "mode: iptables\n"});
    cm
}

/// etcd and watchd with pods, nodes and ConfigMaps, written as JSON before watchd starts.
struct Cluster {
    watchd: Watchd,
    _etcd: Etcd,
    /// The revision of the kube-proxy ConfigMap's write.
    config_rv: i64,
    /// The revision after every write.
    now: i64,
}

impl Cluster {
    async fn start() -> Cluster {
        let etcd = Etcd::start();
        let mut kv = etcd.client().await;
        let config_rv = put_json(
            &mut kv,
            "/registry/configmaps/kube-system/kube-proxy",
            &kube_proxy_config(),
        )
        .await;
        put_json(
            &mut kv,
            "/registry/configmaps/apps/settings",
            &configmap("apps", "settings", "1"),
        )
        .await;
        for name in ["node-1", "node-2"] {
            put_json(&mut kv, &format!("/registry/minions/{name}"), &node(name)).await;
        }
        for (ns, name) in [("apps", "web-1"), ("apps", "web-2"), ("other", "db-1")] {
            put_json(
                &mut kv,
                &pod_key(ns, name),
                &pod(ns, name, &[("app", name)]),
            )
            .await;
        }
        let now = etcd_revision(&mut kv).await;
        let watchd = Watchd::start(&etcd.client_url(), &[]);
        Cluster {
            watchd,
            _etcd: etcd,
            config_rv,
            now,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.watchd.grpc_addr()
    }
}

/// `(selection, namespace, name, type)` of each event; proto3 JSON leaves out fields at
/// their default (selection 0, type ADDED, namespace "").
fn events(message: &Value) -> Vec<(u64, String, String, String)> {
    message["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events: {message}"))
        .iter()
        .map(|e| {
            let meta = &e["object"]["metadata"];
            (
                e["selection"].as_u64().unwrap_or(0),
                meta["namespace"].as_str().unwrap_or("").to_string(),
                meta["name"].as_str().unwrap_or("").to_string(),
                e["type"].as_str().unwrap_or("ADDED").to_string(),
            )
        })
        .collect()
}

fn ev(selection: u64, ns: &str, name: &str, t: &str) -> (u64, String, String, String) {
    (selection, ns.to_string(), name.to_string(), t.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_and_describes_the_services_and_health_is_serving() {
    let cluster = Cluster::start().await;
    let addr = cluster.addr();

    let lines = run(addr, None, &["list"]).await;
    let services = &line(&lines, "services")["services"];
    for service in [
        "watchd.v1.Watchd",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        assert!(
            services
                .as_array()
                .is_some_and(|s| s.contains(&json!(service))),
            "{service} not listed: {services}"
        );
    }

    let lines = run(addr, None, &["describe", "watchd.v1.Watchd"]).await;
    let described = line(&lines, "describe");
    assert_eq!(described["kind"], "service", "{described}");
    let methods: Vec<(&str, bool)> = described["methods"]
        .as_array()
        .unwrap_or_else(|| panic!("no methods: {described}"))
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default(),
                m["serverStreaming"] == true,
            )
        })
        .collect();
    assert_eq!(
        methods,
        vec![
            ("Get", false),
            ("List", false),
            ("Watch", true),
            ("ListResources", false),
            ("Snapshot", false),
            ("WatchMany", true),
        ],
        "{described}"
    );
    let text = described["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(
            "rpc WatchMany ( .watchd.v1.WatchManyRequest ) returns ( stream .watchd.v1.WatchManyResponse );"
        ),
        "{text}"
    );

    // A message, from its name alone: the fields with their JSON names.
    let lines = run(addr, None, &["describe", "watchd.v1.WatchManyRequest"]).await;
    let described = line(&lines, "describe");
    assert_eq!(described["kind"], "message", "{described}");
    let json_names: Vec<&str> = described["fields"]
        .as_array()
        .unwrap_or_else(|| panic!("no fields: {described}"))
        .iter()
        .map(|f| f["jsonName"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        json_names,
        vec![
            "selections",
            "resourceVersion",
            "sendInitialEvents",
            "allowWatchBookmarks",
            "timeoutSeconds",
            "encoding"
        ],
        "{described}"
    );

    // The health service follows readiness a few times a second: watchd is ready (its
    // /readyz said so), and the service says SERVING within a few checks.
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let lines = run(addr, None, &["health"]).await;
        let status = line(&lines, "health")["status"].clone();
        statuses.push(status.clone());
        if status == "SERVING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(statuses.last(), Some(&json!("SERVING")), "{statuses:?}");
    let lines = run(addr, None, &["health", "watchd.v1.Watchd"]).await;
    assert_eq!(line(&lines, "health")["status"], "SERVING", "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_calls_built_from_reflection_list_resources_get_and_snapshot() {
    let cluster = Cluster::start().await;
    let addr = cluster.addr();

    let messages = call(addr, "watchd.v1.Watchd/ListResources", "{}", None).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let resources = messages[0]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("no resources: {messages:?}"));
    let pods: Vec<&Value> = resources
        .iter()
        .filter(|r| r["resource"] == "pods" && r.get("group").is_none())
        .collect();
    assert_eq!(
        pods,
        vec![&json!({
            "version": "v1",
            "resource": "pods",
            "kind": "Pod",
            "namespaced": true,
            "verbs": ["get", "list", "watch"],
        })],
        "{resources:?}"
    );

    // Get, as JSON: the typed metadata, and the object itself in `raw` (base64).
    let messages = call(
        addr,
        "watchd.v1.Watchd/Get",
        r#"{"collection":{"version":"v1","resource":"configmaps","namespace":"kube-system"},"name":"kube-proxy"}"#,
        None,
    )
    .await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let object = &messages[0]["object"];
    let rv = cluster.config_rv.to_string();
    assert_eq!(
        object["metadata"],
        json!({
            "namespace": "kube-system",
            "name": "kube-proxy",
            "uid": "uid-cm-kube-system-kube-proxy",
            "resourceVersion": rv,
            "labels": {"app": "kube-proxy"},
        }),
        "{object}"
    );
    assert_eq!(
        object.get("encoding"),
        None,
        "JSON is the default: {object}"
    );
    let raw: Value = serde_json::from_slice(&base64_field(&object["raw"]))
        .unwrap_or_else(|e| panic!("raw is not JSON ({e}): {object}"));
    assert_served(&raw, &kube_proxy_config(), cluster.config_rv);

    // Get, as Kubernetes protobuf (README's command).
    let messages = call(addr, "watchd.v1.Watchd/Get", GET_PROTOBUF, None).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let object = &messages[0]["object"];
    assert_eq!(object["encoding"], "PROTOBUF", "{object}");
    assert_eq!(object["metadata"]["name"], "kube-proxy", "{object}");
    let raw = base64_field(&object["raw"]);
    assert!(raw.starts_with(b"k8s\0"), "{object}");
    // Encoded from the stored JSON as kube-apiserver would; read by the tests' own decoder.
    kubepb::assert_protobuf_as_written(&raw, &kube_proxy_config(), cluster.config_rv);

    // Snapshot of pods and nodes (README's command): both at one revision, the current.
    let messages = call(addr, "watchd.v1.Watchd/Snapshot", SNAPSHOT_PODS_NODES, None).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let snapshot = &messages[0];
    assert_eq!(
        snapshot["resourceVersion"],
        cluster.now.to_string(),
        "{snapshot}"
    );
    assert_eq!(snapshot.get("continue"), None, "{snapshot}");
    let items: Vec<(u64, String, String, String)> = snapshot["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {snapshot}"))
        .iter()
        .map(|i| {
            let meta = &i["object"]["metadata"];
            ev(
                i["selection"].as_u64().unwrap_or(0),
                meta["namespace"].as_str().unwrap_or(""),
                meta["name"].as_str().unwrap_or(""),
                i["object"]["encoding"].as_str().unwrap_or("JSON"),
            )
        })
        .collect();
    assert_eq!(
        items,
        vec![
            ev(0, "apps", "web-1", "JSON"),
            ev(0, "apps", "web-2", "JSON"),
            ev(0, "other", "db-1", "JSON"),
            ev(1, "", "node-1", "JSON"),
            ev(1, "", "node-2", "JSON"),
        ],
        "{snapshot}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_many_streams_are_read_up_to_max_messages() {
    let cluster = Cluster::start().await;
    let addr = cluster.addr();
    let now = cluster.now.to_string();

    // The initial state of a few objects fits one message: one message holds the ADDED
    // events, by selection, and the bookmark that ends them. The stream would go on (for
    // its timeoutSeconds); the client cancels it after that message.
    let messages = call(
        addr,
        "watchd.v1.Watchd/WatchMany",
        r#"{"selections":[{"collection":{"version":"v1","resource":"configmaps"}},{"collection":{"version":"v1","resource":"nodes"}}],"allowWatchBookmarks":true,"timeoutSeconds":30}"#,
        Some(1),
    )
    .await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(
        events(&messages[0]),
        vec![
            ev(0, "apps", "settings", "ADDED"),
            ev(0, "kube-system", "kube-proxy", "ADDED"),
            ev(1, "", "node-1", "ADDED"),
            ev(1, "", "node-2", "ADDED"),
            ev(0, "", "", "BOOKMARK"),
        ],
        "{messages:?}"
    );
    let kube_proxy = &messages[0]["events"][1]["object"];
    assert_eq!(
        kube_proxy["metadata"]["labels"],
        json!({"app": "kube-proxy"}),
        "{kube_proxy}"
    );
    let raw: Value = serde_json::from_slice(&base64_field(&kube_proxy["raw"])).expect("JSON");
    assert_served(&raw, &kube_proxy_config(), cluster.config_rv);
    let bookmark = &messages[0]["events"][4];
    assert_eq!(bookmark["initialEventsEnd"], true, "{bookmark}");
    assert_eq!(bookmark["resourceVersion"], now, "{bookmark}");

    // README's command: pods and nodes, initial events asked for explicitly.
    let messages = call(
        addr,
        "watchd.v1.Watchd/WatchMany",
        WATCH_MANY_PODS_NODES,
        Some(1),
    )
    .await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(
        events(&messages[0]),
        vec![
            ev(0, "apps", "web-1", "ADDED"),
            ev(0, "apps", "web-2", "ADDED"),
            ev(0, "other", "db-1", "ADDED"),
            ev(1, "", "node-1", "ADDED"),
            ev(1, "", "node-2", "ADDED"),
            ev(0, "", "", "BOOKMARK"),
        ],
        "{messages:?}"
    );
    let bookmark = &messages[0]["events"][5];
    assert_eq!(bookmark["initialEventsEnd"], true, "{bookmark}");
    assert_eq!(bookmark["resourceVersion"], now, "{bookmark}");
}

/// README.md's grpcurl commands send the requests the tests above send (the tool aside,
/// they are the same calls).
#[test]
fn readme_grpcurl_commands_send_the_tested_requests() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("read README.md");
    for (request, method) in [
        ("{}", "watchd.v1.Watchd/ListResources"),
        (GET_PROTOBUF, "watchd.v1.Watchd/Get"),
        (SNAPSHOT_PODS_NODES, "watchd.v1.Watchd/Snapshot"),
        (WATCH_MANY_PODS_NODES, "watchd.v1.Watchd/WatchMany"),
    ] {
        let command = readme
            .split("grpcurl -plaintext ")
            .find(|c| c.contains(method))
            .unwrap_or_else(|| panic!("README.md has no grpcurl command calling {method}"));
        assert!(
            command.starts_with(&format!("-d '{request}'")),
            "README.md's grpcurl call of {method} should send {request}: {command}"
        );
    }
}
