//! Shared by the benchmarks: the criterion settings, realistic Kubernetes objects, and the
//! ratio summary printed after a run.
//!
//! Every benchmark is a pair, a watchd path and a baseline measured in the same run, so
//! its result reads as a ratio of the two medians: on a noisy 2-core machine absolute
//! times drift between runs, while a ratio of two measurements taken minutes apart
//! mostly does not.

// Each bench target uses only some of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use criterion::Criterion;
use serde_json::Value;
use watchd::config;
use watchd::registry::{builtin, ResourceInfo};
use watchd::store::ingest::Ingestor;
use watchd::store::{Cache, ObjectRef, StoreConfig};
use watchd::Revision;

/// Short settings so that `cargo bench` finishes in minutes on 2 cores; command-line
/// options (`--quick`, `--measurement-time`, a filter) still override them.
pub fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args()
}

/// A Pod as kube-apiserver stores it in JSON: compact, fields in the Go structs' order
/// (`kind`, `apiVersion`, `metadata`, `spec`, `status`; `name` first in `metadata`),
/// which decides how far watchd's scanner walks to find `metadata.resourceVersion`.
/// About 2 KiB: the usual metadata (labels, annotations, an owner), one container with
/// ports and a mount, and a running status. `generation` changes an annotation, as an
/// update would.
pub fn pod(ns: &str, name: &str, generation: u64) -> Vec<u8> {
    const POD: &str = concat!(
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"$NAME","#,
        r#""generateName":"web-7d9f8b6c5-","namespace":"$NS","#,
        r#""uid":"4b1e0c7a-$GEN-4d3e-9f6a-1c2b3a4d5e6f","resourceVersion":"1234567","#,
        r#""creationTimestamp":"2024-05-01T10:00:00Z","labels":{"app":"web","#,
        r#""app.kubernetes.io/name":"web","pod-template-hash":"7d9f8b6c5","tier":"frontend"},"#,
        r#""annotations":{"prometheus.io/port":"9090","prometheus.io/scrape":"true","#,
        r#""watchd.bench/generation":"$GEN"},"ownerReferences":[{"apiVersion":"apps/v1","#,
        r#""kind":"ReplicaSet","name":"web-7d9f8b6c5","uid":"9a8b7c6d-1111-2222-3333-444455556666","#,
        r#""controller":true,"blockOwnerDeletion":true}]},"#,
        r#""spec":{"volumes":[{"name":"config","configMap":{"name":"web-config","defaultMode":420}}],"#,
        r#""containers":[{"name":"web","image":"registry.example.com/storefront/web:1.24.3","#,
        r#""ports":[{"name":"http","containerPort":8080,"protocol":"TCP"},"#,
        r#"{"name":"metrics","containerPort":9090,"protocol":"TCP"}],"#,
        r#""resources":{"limits":{"cpu":"1","memory":"512Mi"},"requests":{"cpu":"250m","memory":"256Mi"}},"#,
        r#""volumeMounts":[{"name":"config","readOnly":true,"mountPath":"/etc/web"}],"#,
        r#""terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","#,
        r#""imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","#,
        r#""terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","#,
        r#""serviceAccountName":"default","serviceAccount":"default","nodeName":"$NODE","#,
        r#""securityContext":{},"schedulerName":"default-scheduler","#,
        r#""priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"#,
        r#""status":{"phase":"Running","conditions":["#,
        r#"{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2024-05-01T10:00:09Z"},"#,
        r#"{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2024-05-01T10:00:00Z"}],"#,
        r#""hostIP":"10.0.3.17","podIP":"10.244.3.41","podIPs":[{"ip":"10.244.3.41"}],"#,
        r#""startTime":"2024-05-01T10:00:00Z","containerStatuses":[{"name":"web","#,
        r#""state":{"running":{"startedAt":"2024-05-01T10:00:04Z"}},"lastState":{},"ready":true,"#,
        r#""restartCount":0,"image":"registry.example.com/storefront/web:1.24.3","#,
        r#""containerID":"containerd://8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d","#,
        r#""started":true}],"qosClass":"Burstable"}}"#,
    );
    let node = format!("node-{:03}", name.len() * 7 % 100);
    POD.replace("$NAME", name)
        .replace("$NS", ns)
        .replace("$GEN", &format!("{generation:08x}"))
        .replace("$NODE", &node)
        .into_bytes()
}

/// A ConfigMap of about 10 KiB, compact and in kube-apiserver's field order (`metadata`
/// before `data`): a handful of configuration files as multi-line strings with quotes,
/// so the JSON has escapes as real ones do.
pub fn configmap(ns: &str, name: &str) -> Vec<u8> {
    let mut data = serde_json::Map::new();
    for file in 0..6 {
        let mut text = String::new();
        for line in 0..24 {
            text.push_str(&format!(
                "[section.{file}.{line}]\nname = \"value-{line}\"\tenabled = true # see \"docs\"\n"
            ));
        }
        data.insert(format!("app-{file}.toml"), Value::String(text));
    }
    let head = concat!(
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"$NAME","namespace":"$NS","#,
        r#""uid":"0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f","resourceVersion":"987654","#,
        r#""creationTimestamp":"2024-05-01T10:00:00Z","#,
        r#""labels":{"app":"web","app.kubernetes.io/part-of":"storefront"},"#,
        r#""annotations":{"meta.helm.sh/release-name":"storefront","meta.helm.sh/release-namespace":"$NS"}},"#,
        r#""data":"#,
    )
    .replace("$NAME", name)
    .replace("$NS", ns);
    let data = serde_json::to_string(&data).expect("a JSON map serializes");
    format!("{head}{data}}}").into_bytes()
}

/// The built-in resource `resource` (plural, e.g. `pods`), with its selectable fields.
pub fn builtin(resource: &str) -> ResourceInfo {
    builtin::builtin_resources()
        .into_iter()
        .find(|r| r.resource == resource)
        .expect("a built-in resource")
}

/// A pod cached at `revision` under the key `ns/name`, made the way ingestion makes it
/// (through a one-object cache), so the benchmarks depend on public entry points only.
pub fn cached_pod(ns: &str, name: &str, revision: Revision) -> ObjectRef {
    let cache = Cache::new(
        "/registry",
        StoreConfig {
            history_window: config::DEFAULT_HISTORY_WINDOW,
            max_events: 1,
            snapshot_ring: 1,
            dispatch: watchd::dispatch::Dispatch::inline(),
            index_fields: Default::default(),
        },
    );
    let key = format!("/registry/pods/{ns}/{name}").into_bytes();
    Ingestor::new(cache.clone()).load_epoch(revision, vec![(key, pod(ns, name, 1), revision)]);
    let pods = cache
        .resources()
        .by_dir("pods")
        .next()
        .expect("pods are a built-in resource")
        .snapshot();
    let object = pods.objects.get(format!("{ns}/{name}").as_str()).cloned();
    object.expect("the bench pod decodes")
}

/// One comparison: a watchd benchmark and its baseline, by criterion id
/// (`group/function[/parameter]`).
pub struct Pair {
    /// What the ratio means, e.g. "decode Pod 2 KiB".
    pub label: String,
    /// The watchd path.
    pub subject: String,
    /// The baseline.
    pub baseline: String,
}

impl Pair {
    /// A pair of criterion ids.
    pub fn new(
        label: impl Into<String>,
        subject: impl Into<String>,
        baseline: impl Into<String>,
    ) -> Self {
        Pair {
            label: label.into(),
            subject: subject.into(),
            baseline: baseline.into(),
        }
    }
}

/// Where criterion writes its results, as criterion itself decides it: `$CRITERION_HOME`,
/// `$CARGO_TARGET_DIR/criterion`, or `criterion/` in the target directory (found from the
/// bench executable, which cargo puts in `<target>/<profile>/deps/`).
fn output_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        dirs.push(PathBuf::from(home));
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        dirs.push(Path::new(&target).join("criterion"));
    }
    if let Ok(exe) = std::env::current_exe() {
        // <target>/<profile>/deps/<exe>, or <target>/<triple>/<profile>/deps/<exe>.
        for up in [3, 4] {
            if let Some(target) = exe.ancestors().nth(up) {
                dirs.push(target.join("criterion"));
            }
        }
    }
    dirs.push(PathBuf::from("target/criterion"));
    dirs
}

/// The median (ns per iteration) criterion saved for `id` during this run, if any.
fn median_ns(id: &str, since: SystemTime) -> Option<f64> {
    output_dirs().into_iter().find_map(|dir| {
        let file = dir.join(id).join("new").join("estimates.json");
        let fresh = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= since);
        if !fresh {
            return None;
        }
        let text = std::fs::read(&file).ok()?;
        let estimates: Value = serde_json::from_slice(&text).ok()?;
        estimates["median"]["point_estimate"].as_f64()
    })
}

fn human(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.3} s", n / 1e9),
        n if n >= 1e6 => format!("{:.3} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.3} µs", n / 1e3),
        n => format!("{n:.1} ns"),
    }
}

/// Prints, for every pair measured in this run (those a filter skipped, and runs in
/// `--test` or `--list` mode, print nothing), both medians and baseline ÷ watchd: above 1
/// means watchd's path is that many times faster than the baseline.
pub fn print_ratios(title: &str, since: SystemTime, pairs: &[Pair]) {
    let rows: Vec<String> = pairs
        .iter()
        .filter_map(|p| {
            let subject = median_ns(&p.subject, since)?;
            let baseline = median_ns(&p.baseline, since)?;
            Some(format!(
                "  {:<44} {:>12} vs baseline {:>12}  ratio {:>7.2}x",
                p.label,
                human(subject),
                human(baseline),
                baseline / subject
            ))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    println!("\n{title}: median per iteration, watchd vs baseline; ratio = baseline / watchd");
    for row in rows {
        println!("{row}");
    }
}
