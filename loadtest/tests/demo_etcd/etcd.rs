//! A throwaway single-member etcd for the demo tests: free loopback ports, a
//! temporary data dir, killed by PID at the end.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, GetOptions};
use serde_json::Value;
use watchd_loadtest::demo::Storage;

const ETCD: &str = "/usr/bin/etcd";

/// A throwaway single-member etcd.
pub struct Etcd {
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
    pub async fn start(test: &str) -> Self {
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

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// (Re)starts the etcd process on the same data dir and ports.
    pub async fn spawn(&mut self) {
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
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect([self.endpoint()], None)
            .await
            .expect("connect")
    }

    /// All keys under `/registry/` with their values as JSON (protobuf is decoded).
    pub async fn dump(&self) -> BTreeMap<String, Value> {
        self.dump_as(None).await
    }

    /// Like [`Etcd::dump`], asserting every value is stored as kube-apiserver
    /// would with `storage` when given: custom resources and (for now) CRDs as
    /// JSON, built-in kinds in `storage`.
    pub async fn dump_as(&self, storage: Option<Storage>) -> BTreeMap<String, Value> {
        let resp = self
            .client()
            .await
            .get("/registry/", Some(GetOptions::new().with_prefix()))
            .await
            .expect("get");
        resp.kvs()
            .iter()
            .map(|kv| {
                let key = String::from_utf8(kv.key().to_vec()).expect("utf-8 key");
                let protobuf = kv.value().starts_with(watchd::codec::envelope::MAGIC);
                if let Some(storage) = storage {
                    let json_always = key.starts_with("/registry/apiextensions.k8s.io/")
                        || key.starts_with("/registry/demo.watchd.dev/");
                    let expected = storage == Storage::Protobuf && !json_always;
                    assert_eq!(protobuf, expected, "{key}: stored as protobuf?");
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

    /// The etcd lease of every key under `prefix`.
    pub async fn leases_under(&self, prefix: &str) -> Vec<(String, i64)> {
        let resp = self
            .client()
            .await
            .get(prefix, Some(GetOptions::new().with_prefix()))
            .await
            .expect("get");
        resp.kvs()
            .iter()
            .map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), kv.lease()))
            .collect()
    }

    /// The `renewTime` of every node Lease, by node.
    pub async fn renew_times(&self) -> BTreeMap<String, String> {
        self.dump()
            .await
            .into_iter()
            .filter_map(|(key, lease)| {
                let node = key.strip_prefix("/registry/leases/kube-node-lease/")?;
                let renewed = lease["spec"]["renewTime"].as_str()?.to_owned();
                Some((node.to_owned(), renewed))
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
