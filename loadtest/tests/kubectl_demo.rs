//! kubectl 1.33, unmodified, against watchd serving the demo cluster: for every kind the
//! demo writes, `kubectl explain`, `kubectl describe` (with the extra lists it makes, such as a pod's
//! events by `involvedObject` field selectors), and `kubectl get` with `-o wide`,
//! `--show-kind` and `--sort-by` (Table rows with their objects, `includeObject`).

// Only its watchd binary is used here.
#[allow(dead_code)]
#[path = "s1/support.rs"]
mod support;

use std::path::Path;
use std::process::Command;

use watchd_loadtest::demo::{self, DemoConfig};
use watchd_loadtest::launch;

const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// kubectl's stdout; panics with its stderr when it fails.
fn kubectl(server: &str, cache: &Path, args: &[&str]) -> String {
    assert!(Path::new(KUBECTL).exists(), "{KUBECTL} is required");
    let out = Command::new(KUBECTL)
        .arg(format!("--server={server}"))
        .arg(format!("--cache-dir={}", cache.display()))
        .arg("--request-timeout=30s")
        .args(args)
        .env("KUBECONFIG", "/dev/null")
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Where the column headed `name` starts in a table's header line.
fn column(header: &str, name: &str) -> Option<usize> {
    header.match_indices(name).map(|(i, _)| i).find(|&i| {
        let before = i == 0 || header.as_bytes()[i - 1] == b' ';
        let after = header
            .as_bytes()
            .get(i + name.len())
            .is_none_or(|&b| b == b' ');
        before && after
    })
}

/// A directory for the test's processes, removed at the end.
struct TempRoot(std::path::PathBuf);

impl TempRoot {
    fn new() -> TempRoot {
        let dir = std::env::temp_dir().join(format!("kubectl-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempRoot(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_describes_and_prints_every_kind_of_the_demo() {
    let root = TempRoot::new();
    let etcd = launch::start_etcd(root.path()).await.expect("etcd");
    let cfg = DemoConfig {
        etcd_servers: vec![etcd.endpoint.clone()],
        namespaces: 2,
        nodes: 3,
        pods_per_namespace: 4,
        configmaps_per_namespace: 2,
        once: true,
        ..DemoConfig::default()
    };
    demo::run(&cfg, std::future::pending())
        .await
        .expect("demo fill");
    let watchd = launch::start_watchd(&support::watchd_bin(), &etcd.endpoint, root.path())
        .await
        .expect("watchd");
    let server = format!("http://{}", watchd.addr);
    let cache = root.path().join("kube-cache");
    let get = |args: &[&str]| kubectl(&server, &cache, args);

    let resources = get(&["api-resources", "--verbs=list", "-o", "name"]);
    let mut served = Vec::new();
    let api_versions = get(&["api-versions"]);
    for r in resources.lines() {
        // explain: every served kind's schema, from /openapi/v3 (explain takes a field
        // path after the resource's first dot, and its group-version by flag).
        let explained = match r.split_once('.') {
            None => get(&["explain", r]),
            Some((resource, group)) => {
                let gv = api_versions
                    .lines()
                    .find(|gv| gv.split_once('/').is_some_and(|(g, _)| g == group))
                    .unwrap_or_else(|| panic!("{group} in {api_versions}"));
                get(&["explain", resource, &format!("--api-version={gv}")])
            }
        };
        assert!(
            explained.contains("KIND:") && explained.contains("FIELDS:"),
            "{r} explain:\n{explained}"
        );
        let names: Vec<String> = get(&["get", r, "-A", "-o", "name"])
            .lines()
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            continue;
        }
        served.push(r.to_string());
        let n = names.len();

        // -o wide: a row per object under the header.
        let wide = get(&["get", r, "-A", "-o", "wide"]);
        assert_eq!(wide.lines().count(), n + 1, "{r} -o wide:\n{wide}");

        // --show-kind: each row names its object as -o name does (events show their
        // name only with -o wide).
        let shown = get(&["get", r, "-A", "-o", "wide", "--show-kind", "--no-headers"]);
        assert_eq!(shown.lines().count(), n, "{r} --show-kind:\n{shown}");
        let tokens: std::collections::HashSet<&str> = shown.split_whitespace().collect();
        for name in &names {
            assert!(
                tokens.contains(name.as_str()),
                "{r} --show-kind: {name}:\n{shown}"
            );
        }

        // --sort-by: kubectl sorts the Table rows by the objects the server includes
        // with them (by uid: not the name order the server lists in; kubectl 1.33
        // compares strings byte by byte). The NAME column (events show it only with
        // -o wide) is read where its header is.
        // In the namespace of the first object (cluster-scoped: the flag is ignored).
        let first_ns = get(&[
            "get",
            r,
            "-A",
            "-o",
            "jsonpath={.items[0].metadata.namespace}",
        ]);
        let ns = format!(
            "--namespace={}",
            Some(first_ns.trim())
                .filter(|n| !n.is_empty())
                .unwrap_or("default")
        );
        let ns = ns.as_str();
        let pairs = get(&[
            "get",
            r,
            ns,
            "-o",
            "jsonpath={range .items[*]}{.metadata.uid} {.metadata.name}{\"\\n\"}{end}",
        ]);
        let mut by_uid: Vec<(&str, &str)> =
            pairs.lines().filter_map(|l| l.split_once(' ')).collect();
        by_uid.sort_unstable();
        let want: Vec<&str> = by_uid.iter().map(|(_, name)| *name).collect();
        let sorted = get(&["get", r, ns, "-o", "wide", "--sort-by=.metadata.uid"]);
        let mut lines = sorted.lines();
        let header = lines.next().unwrap_or_default();
        let at = column(header, "NAME").unwrap_or_else(|| panic!("{r}: no NAME in {header}"));
        let got: Vec<&str> = lines
            .filter_map(|l| l.get(at..)?.split_whitespace().next())
            .collect();
        assert_eq!(got, want, "{r} --sort-by=.metadata.uid:\n{sorted}");

        // describe: one description per object.
        let described = get(&["describe", r, "-A"]);
        let count = described.lines().filter(|l| l.starts_with("Name:")).count();
        assert_eq!(count, n, "{r} describe");
    }
    for kind in [
        "pods",
        "nodes",
        "namespaces",
        "configmaps",
        "secrets",
        "services",
        "endpoints",
        "events",
        "serviceaccounts",
        "deployments.apps",
        "replicasets.apps",
        "daemonsets.apps",
        "endpointslices.discovery.k8s.io",
        "leases.coordination.k8s.io",
        "events.events.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
        "widgets.demo.watchd.dev",
    ] {
        assert!(served.iter().any(|s| s == kind), "{kind} in {served:?}");
    }

    // A pod's description lists its events, found by involvedObject field selectors;
    // pods -o wide have the node and IP columns.
    let pod = get(&["get", "pods", "-n", "demo-1", "-o", "name"]);
    let pod = pod.lines().next().expect("a demo pod");
    let described = get(&["describe", "-n", "demo-1", pod]);
    assert!(
        described.contains("Successfully assigned demo-1/"),
        "{described}"
    );
    let wide = get(&["get", "pods", "-n", "demo-1", "-o", "wide"]);
    let header = wide.lines().next().unwrap_or_default();
    assert!(
        header.contains(" IP ") && header.contains(" NODE "),
        "{header}"
    );
}
