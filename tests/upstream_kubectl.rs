//! kubectl 1.33, unmodified, end to end through watchd standing in front of an upstream
//! API server (`--upstream-url`): writes, pod logs, `/version` and the APIs watchd does not
//! cache go to the upstream (the fake kube-apiserver of `support::upstream`, which keeps
//! what it is sent in the same etcd that feeds watchd), while gets, lists and watches of
//! cached resources are answered by watchd itself. With `--proxy=false` writes are
//! refused by watchd and never reach the upstream.
//!
//! Every kubectl runs as a child process with a bounded wait, is killed by its handle
//! when the handle goes (also when an assertion fails), and is run from a blocking task
//! so the fake upstream's tasks keep running meanwhile.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tempfile::TempDir;

use support::kube::{pod, pod_key, put_json};
use support::upstream::{FakeUpstream, Recorded, FOLLOW_LOG_INTERVAL, FOLLOW_LOG_LINES, LOG_BODY};
use support::{Etcd, Watchd};

/// The kubectl under test.
const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// How long one kubectl command that ends by itself may take.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a watching kubectl may take to print a line it should print.
const WATCH_WAIT: Duration = Duration::from_secs(20);

/// How long to wait for a killed or finished kubectl's stderr to be read completely.
const STDERR_WAIT: Duration = Duration::from_secs(5);

/// kubectl apply validates a manifest against the server's OpenAPI before it sends it.
/// The fake upstream answers `/openapi/v2` only as JSON (kubectl asks for, and parses,
/// protobuf) and has no `/openapi/v3`, and watchd without the proxy has no OpenAPI at
/// all (404, as the contract allows), so validation is turned off: the writes are what
/// these tests are about, and kubectl then sends `fieldValidation=Ignore`.
const VALIDATE_OFF: &str = "--validate=false";

/// How many lines of watchd's log a failure message shows.
const LOG_TAIL_LINES: usize = 60;

// ---------------------------------------------------------------------------------------
// The cluster: etcd, the fake upstream writing into it, watchd in front of both.

/// etcd, the fake upstream (writing into that etcd) and watchd with `--upstream-url`,
/// plus a temp dir for kubectl's cache and the manifests.
struct Cluster {
    // Dropped in this order: watchd, the upstream, etcd, the temp dir.
    watchd: Watchd,
    up: FakeUpstream,
    etcd: Etcd,
    dir: TempDir,
}

impl Cluster {
    /// Starts etcd, the fake upstream on it, and watchd with
    /// `--upstream-url=<the fake>` and `extra_args`.
    async fn start(extra_args: &[&str]) -> Cluster {
        let etcd = Etcd::start();
        let up = FakeUpstream::start(Some(etcd.client_url())).await;
        let mut args = vec![format!("--upstream-url={}", up.url())];
        args.extend(args_owned(extra_args));
        let etcd_url = etcd.client_url();
        // Watchd::start blocks until watchd is ready; the upstream keeps running meanwhile.
        let watchd = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Watchd::start(&etcd_url, &args)
        })
        .await
        .expect("start watchd");
        let dir = tempfile::Builder::new()
            .prefix("watchd-test-upstream-kubectl-")
            .tempdir()
            .expect("create temp dir for kubectl");
        Cluster {
            watchd,
            up,
            etcd,
            dir,
        }
    }

    /// kubectl against watchd, with its cache in this cluster's temp dir.
    fn kubectl(&self) -> Kubectl {
        Kubectl {
            server: self.watchd.base_url(),
            cache_dir: self.dir.path().join("kubectl-cache"),
        }
    }

    /// Writes `object` as JSON to `<temp dir>/<file>` and returns the path.
    fn manifest(&self, file: &str, object: &Value) -> PathBuf {
        let path = self.dir.path().join(file);
        let text = serde_json::to_string_pretty(object).expect("serialize manifest");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// What the fake upstream received and the tail of watchd's log, for failure messages.
    fn report(&self) -> String {
        let log = self.watchd.log();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        let requests: Vec<String> = self
            .up
            .requests()
            .iter()
            .map(|r| {
                format!(
                    "{} [accept: {}]",
                    r.describe(),
                    r.header("accept").unwrap_or("-")
                )
            })
            .collect();
        format!(
            "--- requests the fake upstream received ---\n{}\n--- watchd log (tail) ---\n{tail}",
            requests.join("\n")
        )
    }

    /// The requests the fake upstream received with `method` and exactly `path`.
    fn upstream_requests(&self, method: &str, path: &str) -> Vec<Recorded> {
        self.up
            .requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }
}

/// `args` as owned strings, for a closure that outlives them.
fn args_owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

// ---------------------------------------------------------------------------------------
// Running kubectl.

/// How to run kubectl against one server.
#[derive(Clone)]
struct Kubectl {
    server: String,
    cache_dir: PathBuf,
}

impl Kubectl {
    /// Starts `kubectl --server=.. --cache-dir=.. --request-timeout=30s <args>` with
    /// `KUBECONFIG=/dev/null` and both outputs piped.
    fn spawn(&self, args: &[&str]) -> Running {
        assert!(Path::new(KUBECTL).is_file(), "{KUBECTL} is required");
        let mut child = Command::new(KUBECTL)
            .arg(format!("--server={}", self.server))
            .arg(format!("--cache-dir={}", self.cache_dir.display()))
            .arg("--request-timeout=30s")
            .args(args)
            .env("KUBECONFIG", "/dev/null")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {KUBECTL}: {e}"));
        let stdout = child.stdout.take().expect("kubectl stdout");
        let stderr = child.stderr.take().expect("kubectl stderr");
        let (line_tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line_tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        let stderr_text = Arc::new(Mutex::new(Vec::new()));
        let (stderr_done_tx, stderr_done) = mpsc::channel();
        let sink = stderr_text.clone();
        std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]);
            }
            let _ = stderr_done_tx.send(());
        });
        Running {
            child,
            what: format!("kubectl {}", args.join(" ")),
            lines,
            stderr: stderr_text,
            stderr_done,
        }
    }

    /// Runs kubectl with `args` to its end (killed after [`KUBECTL_TIMEOUT`]) on a
    /// blocking task.
    async fn run(&self, args: &[&str]) -> Finished {
        let kubectl = self.clone();
        let args = args_owned(args);
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl.spawn(&args).finish(KUBECTL_TIMEOUT)
        })
        .await
        .expect("the kubectl task panicked")
    }
}

/// A kubectl child process; dropping it kills the process and reaps it.
struct Running {
    child: Child,
    what: String,
    /// stdout, line by line, with the time each line was read.
    lines: mpsc::Receiver<(Instant, String)>,
    /// stderr so far.
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Receives once stderr has reached its end.
    stderr_done: mpsc::Receiver<()>,
}

impl Running {
    /// The next stdout line within `timeout`; `None` on timeout or at the end of stdout.
    fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok().map(|(_, line)| line)
    }

    /// stderr so far.
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Reads stdout to its end and waits for the exit, both within `timeout` (killing
    /// the process when it runs longer; then the status is `None`).
    fn finish(mut self, timeout: Duration) -> Finished {
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(RecvTimeoutError::Disconnected | RecvTimeoutError::Timeout) => break,
            }
        }
        let mut status = None;
        while status.is_none() && Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(exit)) => status = Some(exit),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("wait for {}: {e}", self.what),
            }
        }
        if status.is_none() {
            self.kill();
        }
        let _ = self.stderr_done.recv_timeout(STDERR_WAIT);
        Finished {
            what: self.what.clone(),
            status,
            stdout: lines.iter().map(|(_, l)| format!("{l}\n")).collect(),
            lines,
            stderr: self.stderr(),
        }
    }

    /// Kills the process (if it still runs) and reaps it.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A kubectl run that ended (or was killed at its timeout).
struct Finished {
    what: String,
    /// `None` when it was killed at the timeout.
    status: Option<ExitStatus>,
    stdout: String,
    /// stdout's lines with the time each was read.
    lines: Vec<(Instant, String)>,
    stderr: String,
}

impl Finished {
    fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// The command, its exit and both outputs, for failure messages.
    fn describe(&self) -> String {
        let exit = match self.status {
            Some(status) => status.to_string(),
            None => format!("killed after {KUBECTL_TIMEOUT:?}"),
        };
        format!(
            "{} ({exit})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what, self.stdout, self.stderr
        )
    }

    /// Panics (with the outputs and `cluster`'s report) unless it exited 0; returns stdout.
    fn expect_success(&self, cluster: &Cluster) -> &str {
        assert!(
            self.success(),
            "{} failed:\n{}\n{}",
            self.what,
            self.describe(),
            cluster.report()
        );
        &self.stdout
    }
}

/// A ConfigMap manifest in `default` with one data entry.
fn configmap_manifest(name: &str, greeting: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"greeting": greeting},
    })
}

/// `kubectl get configmap <name> -n default -o json`, parsed.
async fn get_configmap(cluster: &Cluster, name: &str) -> Value {
    let out = cluster
        .kubectl()
        .run(&["get", "configmap", name, "-n", "default", "-o", "json"])
        .await;
    let stdout = out.expect_success(cluster);
    serde_json::from_str(stdout).unwrap_or_else(|e| {
        panic!(
            "kubectl get -o json did not print JSON ({e}):\n{}\n{}",
            out.describe(),
            cluster.report()
        )
    })
}

// ---------------------------------------------------------------------------------------
// The tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_creates_through_the_upstream_and_get_reads_it_back_from_the_cache() {
    let cluster = Cluster::start(&[]).await;
    let kubectl = cluster.kubectl();
    let name = "applied";
    let item_path = format!("/api/v1/namespaces/default/configmaps/{name}");
    let file = cluster.manifest("configmap.json", &configmap_manifest(name, "hello"));
    let file_arg = file.display().to_string();

    // Create: kubectl's GET of the object (404) is the cache's, the POST the upstream's.
    let out = kubectl.run(&["apply", VALIDATE_OFF, "-f", &file_arg]).await;
    let stdout = out.expect_success(&cluster);
    assert!(
        stdout.contains(&format!("configmap/{name} created")),
        "{}\n{}",
        out.describe(),
        cluster.report()
    );
    let posts = cluster.upstream_requests("POST", "/api/v1/namespaces/default/configmaps");
    assert_eq!(
        posts.len(),
        1,
        "expected one POST of the ConfigMap upstream\n{}",
        cluster.report()
    );
    let body = posts[0].body_text();
    assert!(
        body.contains(name) && body.contains("hello"),
        "the POST upstream does not carry the manifest: {body}"
    );

    // Read back, from watchd's cache.
    let object = get_configmap(&cluster, name).await;
    assert_eq!(object["metadata"]["name"], name, "{object}");
    assert_eq!(object["data"]["greeting"], "hello", "{object}");
    let first_rv: i64 = object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no numeric resourceVersion: {object}"));

    // Change the data and apply again: a PATCH upstream, then the new value read back.
    cluster.manifest("configmap.json", &configmap_manifest(name, "hello again"));
    let out = kubectl.run(&["apply", VALIDATE_OFF, "-f", &file_arg]).await;
    let stdout = out.expect_success(&cluster);
    assert!(
        stdout.contains(&format!("configmap/{name} configured")),
        "{}\n{}",
        out.describe(),
        cluster.report()
    );
    let patches = cluster.upstream_requests("PATCH", &item_path);
    assert_eq!(
        patches.len(),
        1,
        "expected one PATCH of the ConfigMap upstream\n{}",
        cluster.report()
    );
    assert!(
        patches[0].body_text().contains("hello again"),
        "the PATCH upstream does not carry the new value: {}",
        patches[0].body_text()
    );
    // Read-your-writes: the consistent read waits for the cache to reach etcd's revision.
    let object = get_configmap(&cluster, name).await;
    assert_eq!(object["data"]["greeting"], "hello again", "{object}");
    let second_rv: i64 = object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no numeric resourceVersion: {object}"));
    assert!(second_rv > first_rv, "{second_rv} after {first_rv}");

    // Every read of the object (kubectl apply's GETs and kubectl get) was watchd's own.
    let gets = cluster.upstream_requests("GET", &item_path);
    assert!(
        gets.is_empty(),
        "reads of a cached ConfigMap reached the upstream\n{}",
        cluster.report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_sees_a_change_written_through_watchd() {
    let cluster = Cluster::start(&[]).await;
    let kubectl = cluster.kubectl();
    let before = cluster.manifest("before.json", &configmap_manifest("before", "1"));
    let after = cluster.manifest("after.json", &configmap_manifest("after", "2"));
    kubectl
        .run(&["apply", VALIDATE_OFF, "-f", &before.display().to_string()])
        .await
        .expect_success(&cluster);

    // The watch's initial list shows the first ConfigMap; then the second is written
    // through watchd (upstream, etcd) and must arrive as a watch event.
    let watch = {
        let kubectl = kubectl.clone();
        tokio::task::spawn_blocking(move || {
            kubectl.spawn(&["get", "configmaps", "-n", "default", "-w", "-o", "name"])
        })
        .await
        .expect("spawn kubectl -w")
    };
    let mut seen = Vec::new();
    let (watch, initial) = wait_for_line(watch, "configmap/before", &mut seen).await;
    assert!(
        initial,
        "kubectl -w did not list configmap/before within {WATCH_WAIT:?}; printed {seen:?}\n\
         stderr: {}\n{}",
        watch.stderr(),
        cluster.report()
    );
    kubectl
        .run(&["apply", VALIDATE_OFF, "-f", &after.display().to_string()])
        .await
        .expect_success(&cluster);
    let (watch, changed) = wait_for_line(watch, "configmap/after", &mut seen).await;
    assert!(
        changed,
        "kubectl -w did not show configmap/after within {WATCH_WAIT:?}; printed {seen:?}\n\
         stderr: {}\n{}",
        watch.stderr(),
        cluster.report()
    );
    // The list and the watch were watchd's; only the two creations went upstream.
    let collection = "/api/v1/namespaces/default/configmaps";
    assert!(
        cluster.upstream_requests("GET", collection).is_empty(),
        "a list or watch of ConfigMaps reached the upstream\n{}",
        cluster.report()
    );
    assert_eq!(
        cluster.upstream_requests("POST", collection).len(),
        2,
        "{}",
        cluster.report()
    );
}

/// Reads lines of `watch` (on a blocking task) into `seen` until one equals `wanted`
/// (true) or [`WATCH_WAIT`] passes or stdout ends (false); hands `watch` back.
async fn wait_for_line(watch: Running, wanted: &str, seen: &mut Vec<String>) -> (Running, bool) {
    let wanted = wanted.to_string();
    let (watch, found, lines) = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + WATCH_WAIT;
        let mut lines = Vec::new();
        while let Some(line) = watch.next_line(deadline.saturating_duration_since(Instant::now())) {
            let done = line.trim() == wanted;
            lines.push(line);
            if done {
                return (watch, true, lines);
            }
        }
        (watch, false, lines)
    })
    .await
    .expect("the watch reader panicked");
    seen.extend(lines);
    (watch, found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_streams_from_the_upstream() {
    let cluster = Cluster::start(&[]).await;
    // kubectl logs reads the pod first (to find its container): that read is the cache's.
    let mut kv = cluster.etcd.client().await;
    put_json(
        &mut kv,
        &pod_key("default", "mypod"),
        &pod("default", "mypod", &[]),
    )
    .await;
    let kubectl = cluster.kubectl();
    let log_path = "/api/v1/namespaces/default/pods/mypod/log";

    let out = kubectl.run(&["logs", "-n", "default", "mypod"]).await;
    let stdout = out.expect_success(&cluster);
    assert_eq!(stdout, LOG_BODY, "{}\n{}", out.describe(), cluster.report());
    let logs = cluster.upstream_requests("GET", log_path);
    assert_eq!(logs.len(), 1, "{}", cluster.report());
    assert_ne!(
        logs[0].query_param("follow"),
        Some("true"),
        "{}",
        logs[0].describe()
    );

    // Followed: twenty lines, 100 ms apart at the upstream, arriving as they are sent.
    let out = kubectl.run(&["logs", "-f", "-n", "default", "mypod"]).await;
    out.expect_success(&cluster);
    let expected: Vec<String> = (1..=FOLLOW_LOG_LINES)
        .map(|i| format!("line {i}"))
        .collect();
    let printed: Vec<String> = out.lines.iter().map(|(_, l)| l.clone()).collect();
    assert_eq!(
        printed,
        expected,
        "{}\n{}",
        out.describe(),
        cluster.report()
    );
    let spread = out.lines[out.lines.len() - 1].0 - out.lines[0].0;
    let sent_over = FOLLOW_LOG_INTERVAL * (FOLLOW_LOG_LINES - 1);
    assert!(
        spread >= sent_over / 2,
        "the followed log arrived within {spread:?} although the upstream sent it over \
         {sent_over:?}: it was buffered, not streamed\n{}",
        cluster.report()
    );
    let logs = cluster.upstream_requests("GET", log_path);
    assert_eq!(logs.len(), 2, "{}", cluster.report());
    assert_eq!(
        logs[1].query_param("follow"),
        Some("true"),
        "{}",
        logs[1].describe()
    );

    assert!(
        cluster
            .upstream_requests("GET", "/api/v1/namespaces/default/pods/mypod")
            .is_empty(),
        "a read of the cached pod reached the upstream\n{}",
        cluster.report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_lists_the_upstreams_apis_and_the_cached_ones() {
    let cluster = Cluster::start(&[]).await;
    let kubectl = cluster.kubectl();

    // kubectl exits non-zero when some group's discovery failed but still prints the
    // rest, so the assertions are on what it printed.
    let out = kubectl.run(&["api-resources"]).await;
    let rows: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    for (resource, api_version) in [
        ("pods", "metrics.k8s.io/v1beta1"),
        ("nodes", "metrics.k8s.io/v1beta1"),
        ("pods", "v1"),
        ("configmaps", "v1"),
        ("deployments", "apps/v1"),
    ] {
        assert!(
            rows.iter()
                .any(|cols| cols.first() == Some(&resource) && cols.contains(&api_version)),
            "kubectl api-resources has no row for {resource} in {api_version}:\n{}\n{}",
            out.describe(),
            cluster.report()
        );
    }
    assert!(
        out.success(),
        "kubectl api-resources printed every API but failed:\n{}\n{}",
        out.describe(),
        cluster.report()
    );

    // /version is the upstream's.
    let out = kubectl.run(&["version", "-o", "json"]).await;
    let stdout = out.expect_success(&cluster);
    let version: Value = serde_json::from_str(stdout).unwrap_or_else(|e| {
        panic!(
            "kubectl version -o json did not print JSON ({e}):\n{}",
            out.describe()
        )
    });
    assert_eq!(
        version["serverVersion"]["gitVersion"],
        "v1.34.0-fake",
        "{}\n{}",
        out.describe(),
        cluster.report()
    );
    assert!(
        !cluster.upstream_requests("GET", "/version").is_empty(),
        "{}",
        cluster.report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_proxy_off_writes_are_refused() {
    let cluster = Cluster::start(&["--proxy=false"]).await;
    let file = cluster.manifest("configmap.json", &configmap_manifest("refused", "no"));

    let out = cluster
        .kubectl()
        .run(&["apply", VALIDATE_OFF, "-f", &file.display().to_string()])
        .await;
    assert!(
        out.status.is_some() && !out.success(),
        "kubectl apply should have failed:\n{}\n{}",
        out.describe(),
        cluster.report()
    );
    assert!(
        ["MethodNotAllowed", "405", "does not allow this method"]
            .iter()
            .any(|s| out.stderr.contains(s)),
        "kubectl apply did not fail with watchd's 405:\n{}\n{}",
        out.describe(),
        cluster.report()
    );
    let writes: Vec<Recorded> = cluster
        .up
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    assert!(
        writes.is_empty(),
        "writes reached the upstream with --proxy=false\n{}",
        cluster.report()
    );
    let mut kv = cluster.etcd.client().await;
    let stored = kv
        .get("/registry/configmaps/default/refused", None)
        .await
        .expect("etcd get");
    assert!(stored.kvs().is_empty(), "the refused ConfigMap was stored");
}
