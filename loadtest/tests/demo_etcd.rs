//! End-to-end tests of the demo writer against a real etcd that each test
//! starts itself (free loopback ports, temporary data dir, killed at the end).
//! They fail with a message naming `scripts/install-deps.sh` when `/usr/bin/etcd` is not
//! installed: a test that cannot run must not pass.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, GetOptions};
use serde_json::Value;
use watchd_loadtest::demo::{self, DemoConfig, StopReason, Storage};

const ETCD: &str = "/usr/bin/etcd";

/// A throwaway single-member etcd.
struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

impl Etcd {
    /// Starts etcd; panics if it is not installed.
    async fn start(test: &str) -> Self {
        assert!(
            Path::new(ETCD).exists(),
            "{test}: {ETCD} is not installed; run scripts/install-deps.sh"
        );
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "watchd-loadtest-{test}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        let mut etcd = Self {
            child: None,
            dir,
            client_port: free_port(),
            peer_port: free_port(),
        };
        etcd.spawn().await;
        etcd
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// (Re)starts the etcd process on the same data dir and ports.
    async fn spawn(&mut self) {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("etcd.log"))
            .expect("etcd log file");
        let child = Command::new(ETCD)
            .arg("--name=default")
            .arg(format!("--data-dir={}", self.dir.join("data").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=default={peer}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = Client::connect([client.as_str()], None).await {
                if c.status().await.is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not come up; see {}",
                self.dir.join("etcd.log").display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the etcd process (by its PID) and waits for it to exit.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// All keys under `/registry/` with their values as JSON (protobuf is decoded).
    async fn dump(&self) -> BTreeMap<String, Value> {
        self.dump_as(None).await
    }

    /// Like [`Etcd::dump`], asserting every value is stored in `storage` when given.
    async fn dump_as(&self, storage: Option<Storage>) -> BTreeMap<String, Value> {
        let mut client = Client::connect([self.endpoint()], None)
            .await
            .expect("connect");
        let resp = client
            .get("/registry/", Some(GetOptions::new().with_prefix()))
            .await
            .expect("get");
        resp.kvs()
            .iter()
            .map(|kv| {
                let key = String::from_utf8(kv.key().to_vec()).expect("utf-8 key");
                let protobuf = kv.value().starts_with(watchd::codec::envelope::MAGIC);
                if let Some(storage) = storage {
                    assert_eq!(protobuf, storage == Storage::Protobuf, "{key}: format");
                }
                if !protobuf {
                    let raw = kv.value_str().expect("utf-8 value");
                    assert!(!raw.contains('\n'), "{key}: value is not a single line");
                }
                let value = Storage::decode(kv.value()).expect("a JSON or protobuf object");
                (key, value)
            })
            .collect()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn small_config(endpoint: String) -> DemoConfig {
    DemoConfig {
        etcd_servers: vec![endpoint],
        namespaces: 2,
        nodes: 3,
        pods_per_namespace: 5,
        configmaps_per_namespace: 2,
        changes_per_second: 50.0,
        duration: Some(Duration::from_secs(60)),
        once: true,
        ..DemoConfig::default()
    }
}

fn keys_under<'a>(dump: &'a BTreeMap<String, Value>, prefix: &str) -> Vec<&'a str> {
    dump.keys().filter_map(|k| k.strip_prefix(prefix)).collect()
}

/// Checks the layout and shape of everything the demo wrote.
fn check_cluster(dump: &BTreeMap<String, Value>, cfg: &DemoConfig) {
    let namespaces = keys_under(dump, "/registry/namespaces/");
    assert_eq!(
        namespaces,
        [
            "default",
            "demo-1",
            "demo-2",
            "kube-node-lease",
            "kube-public",
            "kube-system"
        ]
    );
    assert_eq!(
        keys_under(dump, "/registry/minions/"),
        ["node-1", "node-2", "node-3"]
    );
    for ns in ["demo-1", "demo-2"] {
        let pods = keys_under(dump, &format!("/registry/pods/{ns}/"));
        assert_eq!(pods.len(), cfg.pods_per_namespace, "pods in {ns}: {pods:?}");
        for name in pods {
            let parts: Vec<&str> = name.split('-').collect();
            assert_eq!(parts.len(), 3, "pod name {name}");
            assert!(demo::APPS.contains(&parts[0]), "pod name {name}");
            assert_eq!((parts[1].len(), parts[2].len()), (10, 5), "pod name {name}");
        }
        assert_eq!(
            keys_under(dump, &format!("/registry/configmaps/{ns}/")),
            ["api-config-2", "web-config-1"]
        );
    }
    let mut uids = std::collections::HashSet::new();
    for (key, obj) in dump {
        let meta = &obj["metadata"];
        assert!(obj["apiVersion"].is_string(), "{key}: apiVersion");
        assert!(
            meta.get("resourceVersion").is_none(),
            "{key}: resourceVersion"
        );
        assert!(key.ends_with(&format!("/{}", meta["name"].as_str().unwrap_or("?"))));
        let kind = obj["kind"].as_str().unwrap_or_default();
        let expected = match key.split('/').nth(2) {
            Some("namespaces") => "Namespace",
            Some("minions") => "Node",
            Some("pods") => "Pod",
            Some("configmaps") => "ConfigMap",
            other => panic!("unexpected resource {other:?} in {key}"),
        };
        assert_eq!(kind, expected, "{key}");
        if kind == "Pod" || kind == "ConfigMap" {
            assert_eq!(
                Some(meta["namespace"].as_str().unwrap_or("?")),
                key.split('/').nth(3)
            );
        }
        let uid = meta["uid"].as_str().expect("uid").to_owned();
        assert!(uids.insert(uid), "{key}: duplicate uid");
    }
}

async fn pods_per_namespace(etcd: &Etcd) -> Vec<usize> {
    let dump = etcd.dump().await;
    ["demo-1", "demo-2"]
        .iter()
        .map(|ns| keys_under(&dump, &format!("/registry/pods/{ns}/")).len())
        .collect()
}

#[tokio::test]
async fn demo_once_fills_etcd_idempotently_then_churns() {
    once_then_churn(Storage::Protobuf).await;
}

#[tokio::test]
async fn demo_once_fills_etcd_idempotently_then_churns_json() {
    once_then_churn(Storage::Json).await;
}

async fn once_then_churn(storage: Storage) {
    let etcd = Etcd::start(&format!("once-{storage:?}")).await;
    let cfg = DemoConfig {
        storage,
        ..small_config(etcd.endpoint())
    };

    let first = demo::run(&cfg, std::future::pending()).await.expect("run");
    assert_eq!(first.stop, StopReason::Filled);
    assert_eq!(first.changes, 0);
    // 6 namespaces + 3 nodes + 2 * (5 pods + 2 config maps)
    assert_eq!(first.store.creates, 23);
    let dump = etcd.dump_as(Some(storage)).await;
    assert_eq!(dump.len(), 23);
    check_cluster(&dump, &cfg);

    // Re-running adopts everything and writes nothing.
    let second = demo::run(&cfg, std::future::pending())
        .await
        .expect("rerun");
    assert_eq!(second.store.creates, 0);
    assert_eq!(etcd.dump().await, dump);

    // Churn for a moment: changes happen, sizes stay at their targets.
    let churn = DemoConfig {
        once: false,
        duration: Some(Duration::from_millis(1500)),
        ..cfg.clone()
    };
    let third = demo::run(&churn, std::future::pending())
        .await
        .expect("churn");
    assert_eq!(third.stop, StopReason::Duration);
    assert!(third.changes >= 20, "only {} changes", third.changes);
    assert!(third.store.updates > 0 && third.store.failures == 0);
    let after = etcd.dump_as(Some(storage)).await;
    check_cluster(&after, &cfg);
    assert_ne!(after, dump);

    // A stop signal ends the run cleanly too.
    let stop = tokio::time::sleep(Duration::from_millis(500));
    let fourth = demo::run(&churn, stop).await.expect("stopped run");
    assert_eq!(fourth.stop, StopReason::Stopped);
    check_cluster(&etcd.dump().await, &cfg);
}

#[tokio::test]
async fn demo_survives_etcd_restart() {
    let mut etcd = Etcd::start("restart").await;
    let cfg = DemoConfig {
        once: false,
        duration: Some(Duration::from_secs(7)),
        ..small_config(etcd.endpoint())
    };
    let run = tokio::spawn({
        let cfg = cfg.clone();
        async move { demo::run(&cfg, std::future::pending()).await }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    etcd.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    etcd.spawn().await;
    let summary = run.await.expect("join").expect("run");
    assert_eq!(summary.stop, StopReason::Duration);
    assert!(summary.store.failures > 0, "{summary:?}");
    assert!(summary.store.reconnects > 0, "{summary:?}");
    assert!(summary.changes > 50, "{summary:?}");
    assert_eq!(pods_per_namespace(&etcd).await, [5, 5]);
    check_cluster(&etcd.dump().await, &cfg);
}

#[tokio::test]
async fn binary_exits_zero() {
    let etcd = Etcd::start("binary").await;
    let bin = env!("CARGO_BIN_EXE_watchd-loadtest");
    let endpoint = format!("--etcd-servers={}", etcd.endpoint());
    let status = |args: &[&str]| {
        Command::new(bin)
            .arg("demo")
            .arg(&endpoint)
            .args(["--namespaces=2", "--nodes=3", "--pods-per-namespace=5"])
            .args(["--configmaps-per-namespace=2"])
            .args(args)
            .stderr(Stdio::null())
            .status()
            .expect("run binary")
    };
    assert!(status(&["--once"]).success());
    assert!(status(&["--duration=1", "--changes-per-second=20"]).success());
    let dump = etcd.dump_as(Some(Storage::Protobuf)).await;
    check_cluster(&dump, &small_config(etcd.endpoint()));
    // Objects written as JSON are adopted and kept up to date by a protobuf run.
    let json = Etcd::start("binary-json").await;
    let json_endpoint = format!("--etcd-servers={}", json.endpoint());
    let run = |args: &[&str]| {
        Command::new(bin)
            .args(["demo", &json_endpoint, "--namespaces=2", "--nodes=3"])
            .args(["--pods-per-namespace=5", "--configmaps-per-namespace=2"])
            .args(args)
            .stderr(Stdio::null())
            .status()
            .expect("run binary")
    };
    assert!(run(&["--once", "--storage=json"]).success());
    check_cluster(
        &json.dump_as(Some(Storage::Json)).await,
        &small_config(json.endpoint()),
    );
    assert!(run(&["--duration=1", "--changes-per-second=20"]).success());
    check_cluster(&json.dump().await, &small_config(json.endpoint()));
    let bad = Command::new(bin)
        .args(["demo", "--etcd-servers=https://127.0.0.1:1", "--once"])
        .stderr(Stdio::null())
        .status()
        .expect("run binary");
    assert_eq!(bad.code(), Some(2));
}
