//! Flags and driver of `s1-saturate`: the sides, the ladder of rates and
//! what "held" means, on top of the S1 load flags (`--duration` is each
//! step's length; `--writes-per-sec` is replaced by the ladder).

use clap::{Args, ValueEnum};
use watchd_loadtest::plot;
use watchd_loadtest::s1::floor_side::{self, SideRun};
use watchd_loadtest::s1::saturate::{self, Limits, SideSpec, MAX_STEPS};
use watchd_loadtest::s1::{Target, WatchProtocol};

use crate::scenarios::{check_http1_fits, write_json, LoadArgs};

/// A side of a saturation run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SideArg {
    /// The loopback floor.
    Floor,
    /// etcd direct (multiplexed like HTTP/2 when http2 or grpc-watchd is a
    /// side).
    Etcd,
    /// watchd over HTTP/1.1, a connection per watcher.
    Http1,
    /// watchd over HTTP/2, --streams-per-connection streams per connection.
    Http2,
    /// watchd's own gRPC API, --streams-per-connection Watch calls per
    /// connection.
    GrpcWatchd,
    /// watchd as client-go informers watch it: HTTPS (ALPN h2,
    /// --streams-per-connection streams per connection), a bearer token,
    /// RBAC, protobuf.
    Informer,
}

impl SideArg {
    /// The watchd protocol of a watchd side.
    fn protocol(self) -> Option<WatchProtocol> {
        match self {
            SideArg::Floor | SideArg::Etcd => None,
            SideArg::Http1 => Some(WatchProtocol::Http1),
            SideArg::Http2 => Some(WatchProtocol::Http2),
            SideArg::GrpcWatchd => Some(WatchProtocol::GrpcWatchd),
            SideArg::Informer => Some(WatchProtocol::Informer),
        }
    }
}

/// Flags of `s1-saturate`.
#[derive(Debug, Args)]
pub struct SaturateArgs {
    /// The sides, each run at every step until it stops holding (also
    /// `grpc-watchd`: watchd's gRPC API; `informer`: HTTPS, token, RBAC,
    /// protobuf).
    #[arg(long, value_delimiter = ',', default_value = "floor,etcd,http1,http2")]
    pub sides: Vec<SideArg>,
    /// The write rates (per second) of the steps, ascending [default: from
    /// --start-rate, times --rate-factor, up to --max-rate].
    #[arg(long, value_delimiter = ',')]
    pub rates: Option<Vec<f64>>,
    /// The first step's write rate.
    #[arg(long, default_value_t = 10.0)]
    pub start_rate: f64,
    /// Each step's rate over the last one's.
    #[arg(long, default_value_t = 2.0)]
    pub rate_factor: f64,
    /// The highest rate tried.
    #[arg(long, default_value_t = 640.0)]
    pub max_rate: f64,
    /// Held only if every watcher has the last write this many seconds
    /// after the writer's last acknowledgement (the lag did not grow).
    #[arg(long, default_value_t = 1.0)]
    pub max_lag: f64,
    /// Held only if the p99 delivery latency is at most this (ms).
    #[arg(long, default_value_t = 1000.0)]
    pub max_p99_ms: f64,
    /// Steps a side still runs after its first step not held (to show its
    /// cost past saturation).
    #[arg(long, default_value_t = 1)]
    pub past_saturation: usize,
    #[command(flatten)]
    pub load: LoadArgs,
}

impl SaturateArgs {
    /// The rates of the steps, checked.
    pub fn ladder(&self) -> Result<Vec<f64>, String> {
        let Some(rates) = &self.rates else {
            return saturate::ladder(self.start_rate, self.rate_factor, self.max_rate);
        };
        if rates.is_empty() || rates.len() > MAX_STEPS {
            return Err(format!("--rates takes 1..={MAX_STEPS} rates"));
        }
        if rates.iter().any(|r| !(*r > 0.0 && *r <= 100_000.0)) {
            return Err("--rates must be in (0, 100000]".into());
        }
        if rates.windows(2).any(|w| w[0] >= w[1]) {
            return Err("--rates must be ascending".into());
        }
        Ok(rates.clone())
    }

    /// The sides, each with its run (at the first rate; each step sets its
    /// own), all checked before any step runs.
    pub fn specs(&self) -> Result<Vec<SideSpec>, String> {
        if self.sides.is_empty() {
            return Err("--sides needs at least one side".into());
        }
        let protocols: Vec<WatchProtocol> = WatchProtocol::ALL
            .into_iter()
            .filter(|p| self.sides.iter().any(|s| s.protocol() == Some(*p)))
            .collect();
        let (etcd, watchd) = if protocols.is_empty() {
            // etcd direct multiplexed as --protocol would multiplex watchd.
            let like = WatchProtocol::etcd_direct_beside(&[self.load.protocol]);
            let etcd = self.load.config(Target::Etcd, like)?;
            etcd.validate()?;
            (etcd, Vec::new())
        } else {
            check_http1_fits(&self.load, &protocols)?;
            self.load.compare_configs_for(&protocols)?
        };
        let spec = |name: &str, short: &str, run| SideSpec {
            name: name.into(),
            short: short.into(),
            run,
        };
        let mut out = Vec::new();
        for side in [
            SideArg::Floor,
            SideArg::Etcd,
            SideArg::Http1,
            SideArg::Http2,
            SideArg::GrpcWatchd,
            SideArg::Informer,
        ] {
            if !self.sides.contains(&side) {
                continue;
            }
            out.push(match side {
                SideArg::Floor => {
                    let exe =
                        std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
                    // Events the size of the first watchd side's (JSON
                    // lines without one).
                    let shape = match watchd.first() {
                        Some(c) => c.clone(),
                        None => self.load.config(Target::Watchd, WatchProtocol::Http1)?,
                    };
                    spec(
                        "floor",
                        "floor",
                        SideRun::Floor(floor_side::floor_config(&shape, &exe)?),
                    )
                }
                SideArg::Etcd => spec("etcd direct", "etcd", SideRun::S1(etcd.clone())),
                SideArg::Http1 | SideArg::Http2 | SideArg::GrpcWatchd | SideArg::Informer => {
                    let p = side.protocol().ok_or("not a watchd side")?;
                    let cfg = watchd
                        .iter()
                        .find(|c| c.watch_protocol() == p)
                        .ok_or("no watchd side")?;
                    spec(&p.side_name(), p.name(), SideRun::S1(cfg.clone()))
                }
            });
        }
        Ok(out)
    }
}

/// `s1-saturate`: `Ok(false)` when no side held any step.
pub async fn run(args: SaturateArgs) -> Result<bool, String> {
    let rates = args.ladder()?;
    let specs = args.specs()?;
    if !(args.max_lag > 0.0 && args.max_p99_ms > 0.0) {
        return Err("--max-lag and --max-p99-ms must be positive".into());
    }
    let limits = Limits {
        max_lag_s: args.max_lag,
        max_p99_ms: args.max_p99_ms,
        ..Limits::default()
    };
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    println!(
        "s1-saturate: {} watchers, sides {names:?}, rates {rates:?}, {} s per step",
        args.load.watchers, args.load.duration
    );
    let step_s = args.load.duration as f64;
    let r = saturate::run(
        &specs,
        &rates,
        &limits,
        args.past_saturation,
        args.load.watchers,
        step_s,
    )
    .await;
    println!();
    print!("{}", saturate::table(&r));
    write_json(args.load.out.as_deref(), &r)?;
    if let Some(out) = &args.load.out {
        plot::write_beside(
            out,
            &saturate::markdown(&r),
            &saturate::title(&r),
            &saturate::panels(&r),
        )?;
    }
    Ok(r.sides.iter().any(|s| s.highest_held.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(argv: &[&str]) -> SaturateArgs {
        let mut all = vec!["watchd-loadtest", "s1-saturate"];
        all.extend_from_slice(argv);
        match crate::Cli::try_parse_from(all).expect("parses").command {
            crate::Command::S1Saturate(a) => a,
            _ => panic!("not s1-saturate"),
        }
    }

    #[test]
    fn rates_come_from_the_list_or_the_ladder() {
        assert_eq!(
            args(&[]).ladder().unwrap(),
            [10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0]
        );
        let a = args(&["--start-rate=5", "--rate-factor=3", "--max-rate=50"]);
        assert_eq!(a.ladder().unwrap(), [5.0, 15.0, 45.0]);
        assert_eq!(
            args(&["--rates=20,40,60"]).ladder().unwrap(),
            [20.0, 40.0, 60.0]
        );
        for bad in ["--rates=40,20", "--rates=0,10", "--rates=10,10"] {
            assert!(args(&[bad]).ladder().is_err(), "{bad}");
        }
    }

    #[test]
    fn sides_are_built_in_order_with_etcd_multiplexed_like_http2() {
        let _ = watchd_loadtest::fdlimit::raise();
        let specs = args(&["--watchers=500"]).specs().unwrap();
        let names: Vec<&str> = specs.iter().map(|s| s.short.as_str()).collect();
        assert_eq!(names, ["floor", "etcd", "http1", "http2"]);
        let shapes: Vec<(String, usize)> = specs
            .iter()
            .map(|s| {
                let m = s.run.multiplexing();
                (m.protocol, m.connections)
            })
            .collect();
        assert_eq!(shapes[1], ("grpc".to_string(), 5));
        assert_eq!(shapes[3], ("http2".to_string(), 5));
        let SideRun::Floor(f) = &specs[0].run else {
            panic!("floor first");
        };
        assert!(f.payload_bytes > 1024, "the watch event's size");
        // 20 000 watchers: HTTP/1.1 does not fit under the open-files limit
        // (when the hard limit is 20 000, as here); HTTP/2 does.
        let a = args(&["--watchers=20000", "--sides=floor,etcd,http2"]);
        let specs = a.specs().unwrap();
        assert_eq!(specs[2].run.multiplexing().connections, 200);
        if watchd_loadtest::fdlimit::soft_limit() <= 20_000 {
            let e = args(&["--watchers=20000"]).specs().unwrap_err();
            assert!(e.contains("HTTP/1.1 at 20000 watchers"), "{e}");
        }
        // watchd's gRPC API as a side of its own; etcd direct multiplexed
        // like it.
        let specs = args(&["--watchers=500", "--sides=etcd,http1,grpc-watchd"])
            .specs()
            .unwrap();
        let shapes: Vec<(String, String, usize)> = specs
            .iter()
            .map(|s| {
                let m = s.run.multiplexing();
                (s.short.clone(), m.protocol, m.connections)
            })
            .collect();
        assert_eq!(
            shapes,
            [
                ("etcd".into(), "grpc".into(), 5),
                ("http1".into(), "http1".into(), 500),
                ("grpc-watchd".into(), "grpc-watchd".into(), 5),
            ]
        );
        assert_eq!(specs[2].name, "watchd grpc");
        // Without a watchd side, etcd direct follows --protocol.
        let specs = args(&["--sides=etcd", "--watchers=1000"]).specs().unwrap();
        assert_eq!(specs[0].run.multiplexing().connections, 4);
        assert!(crate::Cli::try_parse_from(["x", "s1-saturate", "--sides=grpc"]).is_err());
    }

    #[test]
    fn the_informer_is_a_side_of_its_own_beside_h2c_on_protobuf_storage() {
        let _ = watchd_loadtest::fdlimit::raise();
        let a = args(&["--watchers=500", "--sides=floor,etcd,http2,informer"]);
        let specs = a.specs().unwrap();
        let shapes: Vec<(String, String, usize, bool)> = specs
            .iter()
            .map(|s| {
                let m = s.run.multiplexing();
                (s.short.clone(), m.protocol, m.connections, m.tls)
            })
            .collect();
        assert_eq!(
            shapes,
            [
                ("floor".into(), "tcp".into(), 500, false),
                ("etcd".into(), "grpc".into(), 5, false),
                ("http2".into(), "http2".into(), 5, false),
                ("informer".into(), "informer".into(), 5, true),
            ]
        );
        assert_eq!(specs[3].name, "watchd informer");
        // Every side stores protobuf (the informer needs it); the informer
        // asks for protobuf, h2c for JSON (--accept's default).
        let cfg = |i: usize| match &specs[i].run {
            SideRun::S1(c) => c.clone(),
            SideRun::Floor(_) => panic!("not an S1 side"),
        };
        use watchd_loadtest::demo::Storage;
        use watchd_loadtest::http::Accept;
        assert_eq!(
            [1, 2, 3].map(|i| (cfg(i).storage, cfg(i).accept)),
            [
                (Storage::Protobuf, Accept::Json),
                (Storage::Protobuf, Accept::Json),
                (Storage::Protobuf, Accept::Protobuf)
            ]
        );
        // An explicit --storage=json cannot serve it.
        let e = args(&["--sides=informer", "--storage=json"])
            .specs()
            .unwrap_err();
        assert!(e.contains("--storage=protobuf"), "{e}");
    }
}
