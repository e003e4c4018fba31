//! The S2 report: the full-scale watchd phase beside the small-scale one
//! (the brief's baseline for "cost per event must not grow with
//! watchers"), and beside etcd direct, scaled to the same watchers.

use serde_json::json;

use super::{Phase, S2Config};
use crate::scenario::progress::mib;
use crate::scenario::report::{Figure, Report};

fn cores(p: &Phase) -> Option<f64> {
    p.cpu
        .watchd_s
        .or(p.cpu.etcd_s)
        .map(|c| c / p.cpu.window_s.max(1e-9))
}

fn deliveries(p: &Phase) -> u64 {
    p.node.accounting.delivered + p.all.accounting.delivered
}

fn lost(p: &Phase) -> u64 {
    p.node.accounting.missed + p.all.accounting.missed
}

fn wrong(p: &Phase) -> u64 {
    [&p.node, &p.all]
        .iter()
        .map(|g| g.accounting.duplicates + g.accounting.out_of_order + g.accounting.unexpected)
        .sum()
}

/// Builds the report of a run (`small`: the small-scale phase; `etcd`: the
/// etcd direct phase).
pub fn build(cfg: &S2Config, full: &Phase, small: Option<&Phase>, etcd: Option<&Phase>) -> Report {
    let w_small = format!("W = {}", cfg.baseline_nodes);
    let vs_small = |f: Figure, get: &dyn Fn(&Phase) -> Option<f64>| match small {
        Some(s) => f.against(w_small.clone(), get(s)),
        None => f,
    };
    let n = |x: u64| Some(x as f64);
    let cpu_event = |p: &Phase| p.server_cpu_us_per_event;
    let mut cpu = vs_small(
        Figure::new("watchd CPU-µs / update", full.server_cpu_us_per_event),
        &cpu_event,
    );
    if cpu.ratio.is_some() {
        let met = cpu.ratio.map(|r| r <= 1.5);
        cpu = cpu.target("ratio <= 1.5 (indexed dispatch)", met);
    }
    let mut figures = vec![
        vs_small(
            Figure::new(
                "updates acknowledged /s",
                Some(full.writes.achieved_per_sec),
            ),
            &|p| Some(p.writes.achieved_per_sec),
        ),
        cpu,
        vs_small(
            Figure::new("watchd CPU-µs / delivery", full.server_cpu_us_per_delivery),
            &|p| p.server_cpu_us_per_delivery,
        ),
        vs_small(
            Figure::new(
                "deliveries / update",
                Some(deliveries(full) as f64 / full.writes.ok.max(1) as f64),
            ),
            &|p| Some(deliveries(p) as f64 / p.writes.ok.max(1) as f64),
        ),
        vs_small(
            Figure::new("node watchers latency p50 (ms)", full.node.latency_ms.p50),
            &|p| p.node.latency_ms.p50,
        ),
        vs_small(
            Figure::new("node watchers latency p99 (ms)", full.node.latency_ms.p99),
            &|p| p.node.latency_ms.p99,
        ),
        vs_small(
            Figure::new("node watchers latency max (ms)", full.node.latency_ms.max),
            &|p| p.node.latency_ms.max,
        ),
        vs_small(
            Figure::new(
                "all-pods watchers latency p99 (ms)",
                full.all.latency_ms.p99,
            ),
            &|p| p.all.latency_ms.p99,
        ),
        vs_small(Figure::new("lost (missed) events", n(lost(full))), &|p| {
            n(lost(p))
        })
        .target("0", Some(lost(full) == 0)),
        vs_small(
            Figure::new("duplicate, reordered or misrouted", n(wrong(full))),
            &|p| n(wrong(p)),
        )
        .target("0", Some(wrong(full) == 0)),
        vs_small(
            Figure::new(
                "watchers failed",
                n((full.node.failed + full.all.failed) as u64),
            ),
            &|p| n((p.node.failed + p.all.failed) as u64),
        ),
        vs_small(Figure::new("watchd cores used", cores(full)), &cores),
        vs_small(
            Figure::new(
                "watchd peak RSS (MiB)",
                Some(mib(full.server_peak_rss_bytes)),
            ),
            &|p| Some(mib(p.server_peak_rss_bytes)),
        ),
        vs_small(
            Figure::new(
                "generator cores used",
                full.cpu
                    .generator_s
                    .map(|g| g / full.cpu.window_s.max(1e-9)),
            ),
            &|p| p.cpu.generator_s.map(|g| g / p.cpu.window_s.max(1e-9)),
        ),
    ];
    let mut notes = vec![format!(
        "{} pods on {} nodes ({} at the baseline), {} updates/s for {} s, {} B stored pods ({}), watched as {} over {}; {} all-pods watchers in both watchd phases",
        cfg.pods,
        cfg.nodes,
        cfg.baseline_nodes,
        cfg.updates_per_sec,
        cfg.duration.as_secs(),
        full.pod_bytes,
        cfg.storage.name(),
        cfg.accept.name(),
        cfg.protocol,
        cfg.all_watchers
    )];
    if let Some(e) = etcd {
        let watchers = (cfg.nodes + cfg.all_watchers) as f64;
        let e_name = format!("etcd direct x{}", cfg.etcd_watchers);
        // etcd direct also serves the writes; the etcd behind watchd served
        // the same writes (and one watch), so the difference is the fan-out.
        let fan_out_s = e
            .cpu
            .etcd_s
            .zip(full.cpu.etcd_s)
            .map(|(d, b)| (d - b).max(0.0));
        let fan_out_us = fan_out_s
            .filter(|_| deliveries(e) > 0)
            .map(|c| c * 1e6 / deliveries(e) as f64);
        let etcd_cores = fan_out_us.map(|us| us * watchers * e.writes.achieved_per_sec / 1e6);
        figures.extend([
            Figure::new("server CPU-µs / delivery", full.server_cpu_us_per_delivery)
                .against(e_name.clone(), e.server_cpu_us_per_delivery),
            Figure::new(
                "etcd fan-out CPU-µs / delivery (less the writes)",
                fan_out_us,
            ),
            Figure::new(
                "deliveries / update",
                Some(deliveries(full) as f64 / full.writes.ok.max(1) as f64),
            )
            .against("etcd: every watcher, every pod", Some(watchers)),
            Figure::new(
                format!("server cores for {} node watchers", cfg.nodes),
                cores(full),
            )
            .against(format!("etcd scaled to {}", watchers as u64), etcd_cores),
            Figure::new(
                "latency p99 of watchers of every pod (ms)",
                full.all.latency_ms.p99,
            )
            .against(e_name.clone(), e.all.latency_ms.p99),
            Figure::new("lost (missed) events", n(lost(full))).against(e_name.clone(), n(lost(e))),
            Figure::new(
                "server peak RSS (MiB)",
                Some(mib(full.server_peak_rss_bytes)),
            )
            .against(e_name, Some(mib(e.server_peak_rss_bytes))),
        ]);
        notes.push(format!(
            "etcd cannot filter on spec.nodeName: each node would watch every pod. Measured with {} watchers of the pods prefix ({} deliveries/s). The etcd cores for {} watchers are an estimate: etcd direct's CPU less that of the etcd behind watchd in the full phase (the same writes), per delivery, times {} watchers times the update rate; it assumes etcd could serve that at all",
            cfg.etcd_watchers,
            (deliveries(e) as f64 / e.cpu.window_s.max(1e-9)).round(),
            watchers,
            watchers
        ));
    }
    let clean =
        full.is_clean() && small.is_none_or(Phase::is_clean) && etcd.is_none_or(Phase::is_clean);
    Report {
        scenario: "s2".into(),
        title: format!(
            "S2 keyed by {}: {} keyed watchers + {} all-pods watchers, {} pod updates/s",
            cfg.key_field.name(),
            cfg.nodes,
            cfg.all_watchers,
            cfg.updates_per_sec
        ),
        settings: json!({
            "key_field": cfg.key_field.name(),
            "nodes": cfg.nodes,
            "baseline_nodes": cfg.baseline_nodes,
            "all_watchers": cfg.all_watchers,
            "etcd_watchers": cfg.etcd_watchers,
            "pods": cfg.pods,
            "namespaces": cfg.namespaces,
            "updates_per_sec": cfg.updates_per_sec,
            "duration_s": cfg.duration.as_secs_f64(),
            "pod_bytes": full.pod_bytes,
            "storage": cfg.storage.name(),
            "accept": cfg.accept.name(),
            "protocol": cfg.protocol.name(),
            "streams_per_connection": cfg.streams_per_connection,
        }),
        figures,
        notes,
        clean,
        details: json!({ "full": full, "baseline": small, "etcd": etcd }),
        ..Report::default()
    }
}
