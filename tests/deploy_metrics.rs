//! The metrics watchd exports and those deploy/ reads (issue #25, item 5).
//!
//! - Every metric the source records is described in `src/metrics.rs` (so `/metrics`
//!   says what it is), and every one the alert rules and the dashboard name is one of
//!   them.
//! - The alert rules and the dashboard read metrics a running watchd exports: a watchd
//!   reading etcd, a second one fed by it (the upstream source) and one that
//!   authenticates users are given the traffic and the faults the alerts are about (a
//!   watch that delivers, a consistent list, a value no decoder reads, the consistency
//!   check, a memory limit), and each metric name the two files use must be in one of
//!   their `/metrics` pages. Counters of failures that have not happened are exported at
//!   zero, so an alert on their increase sees the first one.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::http;
use support::kube::{open_watch, put_pod, put_raw};
use support::{Etcd, Watchd};

const WAIT: Duration = Duration::from_secs(15);

/// The metric names (`watchd_…`) a text mentions: in the source, and in the alert
/// rules and the dashboard. In the order they appear.
fn names_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("watchd_") {
        let tail = &rest[at..];
        let len = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..len].trim_end_matches('_').to_string());
        rest = &tail[len..];
    }
    names
}

/// The series names of a Prometheus text page (comments left out).
fn exported(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .filter(|n| n.starts_with("watchd_"))
        .map(str::to_string)
        .collect()
}

async fn scrape(base: &str, headers: &[(&str, &str)]) -> BTreeSet<String> {
    let r = http::get(&format!("{base}/metrics"), headers).await;
    assert_eq!(r.status, 200, "{base}/metrics");
    exported(&r.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_alerts_and_dashboard_read_is_exported_by_a_running_watchd() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wanted = BTreeSet::new();
    for shipped in ["deploy/alerts.yaml", "deploy/dashboard.json"] {
        let text = std::fs::read_to_string(root.join(shipped)).unwrap();
        let names: BTreeSet<String> = names_in(&text).into_iter().collect();
        assert!(names.len() >= 5, "{shipped} names {names:?}");
        wanted.extend(names);
    }

    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_pod(&mut kv, "default", "web", &[]).await;
    let watchd = Watchd::start(
        &etcd.client_url(),
        &["--memory-limit=8Gi", "--consistency-check-interval=1s"],
    );
    let base = watchd.base_url();
    let tier = Watchd::start_upstream(&base, &[]);
    // One that authenticates: per-user limits exist only where users do.
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "metrics-token,prometheus,uid-1\n").unwrap();
    let secured = Watchd::start(
        &etcd.client_url(),
        &[
            &format!("--token-auth-file={}", tokens.display()),
            "--authorization-mode=AlwaysAllow",
        ],
    );
    let bearer = [("authorization", "Bearer metrics-token")];

    // A watch that delivers an event, on each.
    let pods = "/api/v1/namespaces/default/pods";
    let mut watch = open_watch(&format!("{base}{pods}?watch=true&resourceVersion=0")).await;
    let mut tier_watch = open_watch(&format!(
        "{}{pods}?watch=true&resourceVersion=0",
        tier.base_url()
    ))
    .await;
    put_pod(&mut kv, "default", "db", &[]).await;
    for w in [&mut watch, &mut tier_watch] {
        let mut names = Vec::new();
        while !names.iter().any(|n| n == "db") {
            let event = w.next_event(WAIT).await.expect("the new pod's event");
            names.push(
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
    }
    // A consistent list (no resourceVersion) and a get.
    for url in [format!("{base}{pods}"), format!("{base}{pods}/web")] {
        assert_eq!(http::get(&url, &[]).await.status, 200, "{url}");
    }
    // A value no decoder reads.
    put_raw(
        &mut kv,
        "/registry/configmaps/default/garbled",
        b"\x01\x02".to_vec(),
    )
    .await;

    // The consistency check runs each second; the rest is there once it has.
    let deadline = Instant::now() + WAIT;
    let missing = loop {
        let mut have = scrape(&base, &[]).await;
        have.extend(scrape(&tier.base_url(), &[]).await);
        have.extend(scrape(&secured.base_url(), &bearer).await);
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|n| {
                !have.contains(*n)
                    && !["_bucket", "_count", "_sum"]
                        .iter()
                        .any(|s| have.contains(&format!("{n}{s}")))
            })
            .collect();
        if missing.is_empty() || Instant::now() > deadline {
            break missing.into_iter().cloned().collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        missing.is_empty(),
        "deploy/ reads metrics no running watchd exported: {missing:?}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A metric a histogram exports under: its name, or its name less `_bucket`,
/// `_count` or `_sum`.
fn base(name: &str) -> &str {
    ["_bucket", "_count", "_sum"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// Every metric watchd records is described (so /metrics says what it is), and every
/// one the shipped alerts and dashboard read is one watchd records.
#[test]
fn every_metric_is_described_and_the_alerts_read_real_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let described = std::fs::read_to_string(root.join("src/metrics.rs")).unwrap();
    let described: BTreeSet<String> = described
        .split("describe_")
        .skip(1)
        .flat_map(|d| names_in(d).into_iter().take(1))
        .collect();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut recorded = BTreeSet::new();
    for file in files.iter().filter(|f| !f.ends_with("metrics.rs")) {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, _) in text.match_indices("metrics::") {
            let call = &text[i..text.len().min(i + 160)];
            if let Some(name) = ["counter!(", "gauge!(", "histogram!("]
                .iter()
                .find_map(|m| call.find(m).filter(|at| *at < 20))
                .and_then(|_| names_in(call).into_iter().next())
            {
                recorded.insert(name);
            }
        }
    }
    let undescribed: Vec<_> = recorded.difference(&described).collect();
    assert!(
        undescribed.is_empty(),
        "recorded, not described: {undescribed:?}"
    );
    for shipped in ["deploy/alerts.yaml", "deploy/dashboard.json"] {
        let text = std::fs::read_to_string(root.join(shipped)).unwrap();
        let unknown: Vec<_> = names_in(&text)
            .into_iter()
            .filter(|n| !described.contains(base(n)))
            .collect();
        assert!(
            unknown.is_empty(),
            "{shipped} names metrics watchd does not export: {unknown:?}"
        );
    }
}
