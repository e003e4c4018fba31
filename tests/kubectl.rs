//! kubectl 1.33, unmodified, against watchd in front of a real etcd: the commands the
//! issue names (`-o yaml`, `-l`, `--field-selector spec.nodeName=...`, `-w` seeing a change).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::kube::put_object_text;
use support::pki::{kubectl_at, stdout_ok, KUBECTL};
use support::{storage_tests, Etcd, Watchd};

// Each scenario runs with built-in objects stored as JSON and as protobuf.
storage_tests! {
    kubectl_get_pods_o_yaml_prints_the_objects,
    kubectl_get_pods_with_label_selector,
    kubectl_get_pods_with_node_name_field_selector,
    kubectl_get_pods_watch_sees_a_change_made_during_the_test,
}

fn pod(name: &str, node: &str, app: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"demo","uid":"u-{name}","creationTimestamp":"2026-01-02T03:04:05Z","labels":{{"app":"{app}"}}}},"spec":{{"nodeName":"{node}","containers":[{{"name":"c","image":"nginx"}}]}},"status":{{"phase":"Running"}}}}"#
    )
}

fn kubectl(server: &str, cache: &std::path::Path, args: &[&str]) -> String {
    stdout_ok(
        &kubectl_at(server, cache, args),
        &format!("kubectl {args:?}"),
    )
}

async fn cluster() -> (Etcd, Watchd, tempfile::TempDir) {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    for (name, node, app) in [
        ("web-1", "node-1", "web"),
        ("web-2", "node-2", "web"),
        ("db-1", "node-1", "db"),
    ] {
        put_object_text(
            &mut kv,
            &format!("/registry/pods/demo/{name}"),
            &pod(name, node, app),
        )
        .await;
    }
    let w = Watchd::start(&etcd.client_url(), &[]);
    (etcd, w, tempfile::tempdir().expect("tempdir"))
}

fn names(out: &str) -> Vec<String> {
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

async fn kubectl_get_pods_o_yaml_prints_the_objects() {
    let (_etcd, w, cache) = cluster().await;
    let out = kubectl(
        &w.base_url(),
        cache.path(),
        &["get", "pods", "-n", "demo", "-o", "yaml"],
    );
    assert!(
        out.contains("kind: List") || out.contains("kind: PodList"),
        "{out}"
    );
    for n in [
        "name: web-1",
        "name: web-2",
        "name: db-1",
        "nodeName: node-1",
        "resourceVersion:",
    ] {
        assert!(out.contains(n), "missing {n}: {out}");
    }
}

async fn kubectl_get_pods_with_label_selector() {
    let (_etcd, w, cache) = cluster().await;
    let out = kubectl(
        &w.base_url(),
        cache.path(),
        &["get", "pods", "-n", "demo", "-l", "app=web"],
    );
    assert_eq!(names(&out), ["web-1", "web-2"], "{out}");
    let out = kubectl(
        &w.base_url(),
        cache.path(),
        &["get", "pods", "-A", "-l", "app notin (web)"],
    );
    assert!(out.contains("db-1") && !out.contains("web-1"), "{out}");
}

async fn kubectl_get_pods_with_node_name_field_selector() {
    let (_etcd, w, cache) = cluster().await;
    let out = kubectl(
        &w.base_url(),
        cache.path(),
        &[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "spec.nodeName=node-1",
        ],
    );
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(
        out.contains("web-1") && out.contains("db-1") && !out.contains("web-2"),
        "{out}"
    );
}

async fn kubectl_get_pods_watch_sees_a_change_made_during_the_test() {
    let (etcd, w, cache) = cluster().await;
    assert!(
        std::path::Path::new(KUBECTL).exists(),
        "{KUBECTL} is required"
    );
    let mut child = Command::new(KUBECTL)
        .arg(format!("--server={}", w.base_url()))
        .arg(format!("--cache-dir={}", cache.path().display()))
        .args(["get", "pods", "-n", "demo", "-w"])
        .env("KUBECONFIG", "/dev/null")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kubectl -w");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    // The initial listing: header plus three pods.
    while seen.len() < 4 {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    let mut kv = etcd.client().await;
    put_object_text(
        &mut kv,
        "/registry/pods/demo/web-3",
        &pod("web-3", "node-2", "web"),
    )
    .await;
    let mut found = false;
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(20)) {
        let done = l.starts_with("web-3");
        seen.push(l);
        if done {
            found = true;
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(found, "kubectl -w did not show web-3:\n{}", seen.join("\n"));
    assert!(
        seen[0].starts_with("NAME") && seen[0].contains("STATUS"),
        "{seen:?}"
    );
}

/// `--config=FILE` as an operator uses it: the data source and settings from the file,
/// the listen address from the command line overriding the file's, and kubectl served
/// through the result; a key that is no flag stops the start with a message naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_gives_the_flags_and_the_command_line_overrides_it() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object_text(
        &mut kv,
        "/registry/pods/demo/from-config",
        &pod("from-config", "node-1", "web"),
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("watchd.yaml");
    // An address nothing can serve on: the command line's must win.
    std::fs::write(
        &config,
        format!(
            "etcd-servers:\n  - {}\nhttp-address: 192.0.2.1:1\nhistory-window: 2m\nlog-format: json\n",
            etcd.client_url()
        ),
    )
    .unwrap();
    // No --etcd-servers on the command line: only the file names etcd.
    let w = Watchd::start("", &[&format!("--config={}", config.display())]);
    let out = kubectl(&w.base_url(), dir.path(), &["get", "pods", "-n", "demo"]);
    assert_eq!(names(&out), ["from-config"], "{out}");

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "etcd_servers: [http://127.0.0.1:1]\n").unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_watchd"))
        .args(["serve", &format!("--config={}", bad.display())])
        .output()
        .expect("run watchd");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("\"etcd_servers\" is not a flag of `serve`"),
        "{stderr}"
    );
}
