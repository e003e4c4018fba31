//! The floor's figures as a text table (printed) and a Markdown table
//! (written beside the JSON result).

use super::FloorResult;
use crate::s1::report::fmt_num;

/// The heading of a floor run.
pub fn title(r: &FloorResult) -> String {
    let sockets = if r.sockets == r.watchers {
        format!("{} sockets", r.sockets)
    } else {
        format!(
            "{} sockets for {} watchers (open-files limit; {:.1}/s per socket)",
            r.sockets, r.watchers, r.rate
        )
    };
    format!(
        "loopback floor: {sockets} x {}/s for {} s, {} B events, {} per write ({} cpus, load {} at start)",
        r.requested_rate,
        r.duration_s,
        r.payload_bytes,
        r.events_per_write,
        r.machine.cpus,
        fmt_num(r.machine.loadavg_1m_start)
    )
}

/// Every figure of a floor run: label and value.
pub fn rows(r: &FloorResult) -> Vec<(&'static str, String)> {
    let n = |v: f64| fmt_num(Some(v));
    let o = fmt_num;
    let pct = |v: Option<f64>| fmt_num(v.map(|x| x * 100.0));
    vec![
        ("deliveries written", n(r.deliveries_sent as f64)),
        ("deliveries received", n(r.deliveries_received as f64)),
        ("lost", n(r.lost as f64)),
        ("delivered /s", n(r.delivered_per_sec)),
        (
            "sender CPU-s / 1M deliveries (floor)",
            o(r.sender.cpu_s_per_million),
        ),
        ("  user CPU-s / 1M", o(r.sender.user_s_per_million)),
        ("  system CPU-s / 1M", o(r.sender.system_s_per_million)),
        ("sender user share (%)", pct(r.sender.user_share)),
        ("sender cores used", n(r.sender.cores)),
        ("write() calls per delivery", o(r.writes_per_delivery)),
        ("schedule lag at end (ms)", n(r.lag_end_s * 1000.0)),
        ("schedule lag max (ms)", n(r.lag_max_s * 1000.0)),
        ("latency p50 (ms)", o(r.latency_ms.p50)),
        ("latency p99 (ms)", o(r.latency_ms.p99)),
        ("latency max (ms)", o(r.latency_ms.max)),
        (
            "receiver CPU-s / 1M deliveries",
            o(r.receiver.cpu_s_per_million),
        ),
        ("receiver cores used", o(r.receiver.cores)),
        ("machine busy (%)", pct(r.machine.busy_share)),
    ]
}

/// The text table of a floor run.
pub fn table(r: &FloorResult) -> String {
    let mut out = format!("{}\n", title(r));
    for (label, value) in rows(r) {
        out.push_str(&format!("  {label:<38} {value:>12}\n"));
    }
    if r.abandoned_ticks > 0 {
        out.push_str(&format!(
            "  WARNING: {} of {} ticks never run: the sender fell behind its schedule\n",
            r.abandoned_ticks, r.ticks_planned
        ));
    }
    if let Some(e) = &r.error {
        out.push_str(&format!("  ERROR: {e}\n"));
    }
    out
}

/// The Markdown table of a floor run.
pub fn markdown(r: &FloorResult) -> String {
    let mut out = format!("### {}\n\n| figure | value |\n|---|---|\n", title(r));
    for (label, value) in rows(r) {
        out.push_str(&format!("| {} | {value} |\n", label.trim()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::SenderCpu;

    #[test]
    fn tables_show_the_floor_and_the_limit() {
        let r = FloorResult {
            watchers: 20_000,
            sockets: 19_744,
            requested_rate: 10.0,
            rate: 10.13,
            duration_s: 10.0,
            payload_bytes: 1100,
            events_per_write: 1,
            sender: SenderCpu::new(0.07, 0.63, 1_000_000, 10.0),
            abandoned_ticks: 3,
            ticks_planned: 100,
            ..FloorResult::default()
        };
        let t = table(&r);
        assert!(t.contains("19744 sockets for 20000 watchers"), "{t}");
        assert!(t.contains("sender CPU-s / 1M deliveries (floor)"), "{t}");
        assert!(t.contains("0.700"), "{t}");
        assert!(t.contains("3 of 100 ticks never run"), "{t}");
        let md = markdown(&r);
        assert!(md.contains("| user CPU-s / 1M | 0.070 |"), "{md}");
        assert!(md.contains("| sender user share (%) | 10.0 |"), "{md}");
    }
}
