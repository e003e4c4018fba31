//! Flags and drivers of `floor` (the loopback floor on its own) and of the
//! hidden `floor-receiver` (the process that drains the floor's sockets).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use watchd_loadtest::floor::{self, receiver, report, FloorConfig, FloorResult};
use watchd_loadtest::plot::{self, Panel, Series};
use watchd_loadtest::s1::artifacts;

use crate::scenarios::write_json;

/// Flags of `floor`.
#[derive(Debug, Args)]
pub struct FloorArgs {
    /// Sockets (watchers), each receiving every event.
    #[arg(long, default_value_t = 1000)]
    pub watchers: usize,
    /// Events per socket per second.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Seconds of sending.
    #[arg(long, default_value = "10", value_parser = crate::seconds)]
    pub duration: Duration,
    /// Bytes of one event (about a watch event of a 1 KiB object).
    #[arg(long, default_value_t = floor::DEFAULT_PAYLOAD_BYTES)]
    pub payload_bytes: usize,
    /// Events per write(): K events go out together every K ticks.
    #[arg(long, default_value_t = 1)]
    pub events_per_write: usize,
    /// Write the JSON result here (and a Markdown table and a PNG beside it).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl FloorArgs {
    /// The run's settings.
    pub fn config(&self) -> FloorConfig {
        let mut c = FloorConfig::new(self.watchers, self.rate, self.duration);
        c.payload_bytes = self.payload_bytes;
        c.events_per_write = self.events_per_write;
        c
    }
}

/// Flags of the hidden `floor-receiver`.
#[derive(Debug, Args)]
pub struct ReceiverArgs {
    /// The sender's address.
    #[arg(long)]
    pub connect: SocketAddr,
    /// Sockets to connect.
    #[arg(long)]
    pub sockets: usize,
    /// Bytes of one event.
    #[arg(long)]
    pub payload_bytes: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub max_seconds: f64,
}

/// `floor-receiver`: drains the sockets, reports on stdout.
pub fn receiver(a: ReceiverArgs) -> Result<bool, String> {
    receiver::run(&receiver::ReceiverArgs {
        connect: a.connect,
        sockets: a.sockets,
        payload_bytes: a.payload_bytes,
        max_seconds: a.max_seconds,
    })
    .map(|()| true)
}

/// The plot of one floor run: its latency distribution, and its CPU per
/// delivery (user, system, both) at its W.
fn panels(r: &FloorResult) -> Vec<Panel> {
    let w = r.watchers as f64;
    let cpu = |name: &str, v: Option<f64>, color| Series {
        name: name.into(),
        points: v.map(|v| vec![(w, v)]).unwrap_or_default(),
        color,
        ..Series::default()
    };
    vec![
        artifacts::latency_panel(&[("floor".to_string(), &r.latency_ms)]),
        Panel {
            title: "sender CPU per delivery".into(),
            x_label: "watchers (sockets)".into(),
            y_label: "CPU-s / 1M deliveries".into(),
            log_x: true,
            series: vec![
                cpu("user + system", r.sender.cpu_s_per_million, 0),
                cpu("system", r.sender.system_s_per_million, 2),
                cpu("user", r.sender.user_s_per_million, 1),
            ],
            ..Panel::default()
        },
    ]
}

/// `floor`: one run; `Ok(false)` when deliveries were lost.
pub async fn run(args: FloorArgs) -> Result<bool, String> {
    let r = floor::run(&args.config()).await?;
    print!("{}", report::table(&r));
    if let Some(out) = &args.out {
        write_json(Some(out), &r)?;
        plot::write_beside(out, &report::markdown(&r), &report::title(&r), &panels(&r))?;
    }
    Ok(floor::is_clean(&r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(argv: &[&str]) -> Result<crate::Command, clap::Error> {
        let mut all = vec!["watchd-loadtest"];
        all.extend_from_slice(argv);
        crate::Cli::try_parse_from(all).map(|c| c.command)
    }

    #[test]
    fn floor_flags_parse_with_the_c_reference_defaults() {
        let Ok(crate::Command::Floor(a)) = parse(&["floor"]) else {
            panic!("floor");
        };
        let c = a.config();
        assert_eq!((c.watchers, c.rate, c.payload_bytes), (1000, 100.0, 1100));
        assert_eq!(
            (c.duration, c.events_per_write),
            (Duration::from_secs(10), 1)
        );
        let Ok(crate::Command::Floor(a)) = parse(&[
            "floor",
            "--watchers=5000",
            "--rate=40",
            "--duration=2.5",
            "--payload-bytes=1200",
            "--events-per-write=4",
            "--out=f.json",
        ]) else {
            panic!("floor");
        };
        let c = a.config();
        assert_eq!((c.watchers, c.rate, c.payload_bytes), (5000, 40.0, 1200));
        assert_eq!(c.duration, Duration::from_millis(2500));
        assert_eq!(c.events_per_write, 4);
        assert_eq!(a.out.as_deref(), Some("f.json".as_ref()));
        assert!(parse(&["floor", "--duration=soon"]).is_err());
        assert!(parse(&["floor", "--events-per-write=x"]).is_err());
    }

    #[test]
    fn the_receiver_is_hidden_and_takes_its_address() {
        let Ok(crate::Command::FloorReceiver(a)) = parse(&[
            "floor-receiver",
            "--connect=127.0.0.1:4000",
            "--sockets=3",
            "--payload-bytes=100",
        ]) else {
            panic!("floor-receiver");
        };
        assert_eq!(a.connect.port(), 4000);
        assert_eq!((a.sockets, a.payload_bytes, a.max_seconds), (3, 100, 600.0));
        assert!(parse(&[
            "floor-receiver",
            "--connect=nowhere",
            "--sockets=1",
            "--payload-bytes=9"
        ])
        .is_err());
        use clap::CommandFactory;
        let help = crate::Cli::command().render_help().to_string();
        assert!(
            help.contains("floor") && !help.contains("floor-receiver"),
            "{help}"
        );
    }
}
