//! Flags and drivers of the load scenarios (`s1`, `s1-compare`,
//! `read-latency`): parse, run, print the table, write the JSON.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Serialize;
use tracing::{error, warn};
use watchd_loadtest::demo::Storage;
use watchd_loadtest::endpoint::TokenSource;
use watchd_loadtest::fdlimit;
use watchd_loadtest::http::Accept;
use watchd_loadtest::kubeconfig;
use watchd_loadtest::launch;
use watchd_loadtest::plot;
use watchd_loadtest::read_latency::{self, ReadLatencyConfig};
use watchd_loadtest::s1::artifacts;
use watchd_loadtest::s1::compare::{baseline_ratios, CompareResult, Side};
use watchd_loadtest::s1::floor_side::{self, SideRun};
use watchd_loadtest::s1::report;
use watchd_loadtest::s1::{self as s1_run, S1Config, Target, WatchProtocol};
use watchd_loadtest::tls::TlsOptions;

/// Server under test.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TargetArg {
    /// watchd: its HTTP watch API, or its gRPC API with
    /// --protocol=grpc-watchd.
    Watchd,
    /// etcd gRPC watches (the baseline).
    Etcd,
}

/// Load flags shared by `s1` and `s1-compare`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Watch streams, all on every ConfigMap.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// ConfigMap writes per second.
    #[arg(long, default_value_t = 200.0)]
    pub writes_per_sec: f64,
    /// Seconds of writing.
    #[arg(long, default_value_t = 20)]
    pub duration: u64,
    /// Approximate JSON size of each ConfigMap (also with --storage=protobuf,
    /// where the stored value is a little smaller).
    #[arg(long, default_value_t = 1024)]
    pub object_bytes: usize,
    /// How the writer stores the ConfigMaps: `json`, or `protobuf` as
    /// kube-apiserver stores built-in kinds. Applies to every side
    /// [default: json; protobuf when an informer side runs, which needs it].
    #[arg(long)]
    pub storage: Option<Storage>,
    /// What the watchd watchers ask for: `json` lines, or `protobuf` frames
    /// as client-go informers do (needs --storage=protobuf); over watchd's
    /// gRPC API, the objects' encoding. watchd only: `s1-compare` uses it
    /// for the watchd runs; an informer side always asks for protobuf
    /// [default: json].
    #[arg(long)]
    pub accept: Option<Accept>,
    /// Namespaces the ConfigMaps are spread over.
    #[arg(long, default_value_t = 10)]
    pub namespace_count: usize,
    /// Distinct ConfigMaps, rewritten round-robin.
    #[arg(long, default_value_t = 100)]
    pub objects: usize,
    /// Use this etcd (comma separated) instead of starting one.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Option<Vec<String>>,
    /// Watch this Kubernetes API endpoint (watchd or kube-apiserver;
    /// http://HOST:PORT or https://HOST:PORT) instead of starting a watchd.
    #[arg(long, visible_alias = "watchd-url")]
    pub target_url: Option<String>,
    /// Watch the server of this kubeconfig's current context (or
    /// --context) with its CA, client certificate and token, as kubectl
    /// does: instead of --target-url, --ca-file, --insecure-skip-tls-verify,
    /// --token and --token-file.
    #[arg(
        long,
        conflicts_with_all = ["target_url", "ca_file", "insecure_skip_tls_verify", "token", "token_file"]
    )]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use instead of its current-context.
    #[arg(long, requires = "kubeconfig")]
    pub context: Option<String>,
    /// PEM bundle of the CAs that verify an https:// target's certificate.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Do not verify an https:// target's certificate.
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
    /// Bearer token sent on every request to the HTTP target.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// File holding the bearer token (read when the run starts).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// How the watchd watchers reach watchd: its Kubernetes HTTP API over
    /// `http1`, one connection per watcher, or `http2`, the watchers
    /// multiplexed as streams over ceil(watchers / streams-per-connection)
    /// connections (h2c on http://, ALPN h2 on https://); `informer`, as
    /// client-go: HTTPS with ALPN h2, multiplexed as http2, a bearer token,
    /// RBAC on in watchd and protobuf (the run's own watchd gets TLS, a
    /// token file and RBAC objects); or `grpc-watchd`, watchd's own gRPC
    /// API, one Watch call per watcher multiplexed the same way (h2c, on
    /// the watchd the run starts). With http2, informer or grpc-watchd the
    /// etcd baseline is multiplexed the same way.
    #[arg(long, default_value = "http1")]
    pub protocol: WatchProtocol,
    /// With --protocol=http2, informer or grpc-watchd, the most watch
    /// streams on one connection.
    #[arg(long, default_value_t = 100)]
    pub streams_per_connection: usize,
    /// PID of an external server under test, for its CPU and memory.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// The watchd binary (default: `watchd` next to this executable).
    #[arg(long)]
    pub watchd_bin: Option<PathBuf>,
    /// An extra argument for the watchd the run starts (repeatable), e.g.
    /// `--watchd-arg=--watch-batch-window=5ms`.
    #[arg(long = "watchd-arg", allow_hyphen_values = true)]
    pub watchd_args: Vec<String>,
    /// gRPC connections the etcd watches are spread over [default: 4; with
    /// HTTP/2 or grpc-watchd, ceil(watchers / streams-per-connection), like
    /// the watchd side].
    #[arg(long)]
    pub etcd_connections: Option<usize>,
    /// Longest wait, after the last write, for every watcher to have it.
    #[arg(long, default_value_t = 15)]
    pub drain_timeout: u64,
    /// Where temporary etcd and watchd directories go.
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// Write the JSON result here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl LoadArgs {
    /// How the ConfigMaps are stored when the watchd sides speak
    /// `protocols`: `--storage`, else protobuf if an informer is among them
    /// (it asks for protobuf, which watchd serves only for objects stored
    /// so; every side then stores the same bytes), else JSON.
    pub fn storage_for(&self, protocols: &[WatchProtocol]) -> Storage {
        match self.storage {
            Some(s) => s,
            None if protocols.contains(&WatchProtocol::Informer) => Storage::Protobuf,
            None => Storage::Json,
        }
    }

    /// Refuses flags that contradict an informer side: `--accept=json` when
    /// no other watchd side would use it (an informer asks for protobuf).
    /// `--storage=json` is refused by the informer's own settings.
    pub fn check_informer(&self, protocols: &[WatchProtocol]) -> Result<(), String> {
        let only_informers =
            !protocols.is_empty() && protocols.iter().all(|p| *p == WatchProtocol::Informer);
        if only_informers && self.accept == Some(Accept::Json) {
            return Err(
                "--accept=json does not apply to --protocol=informer: an informer asks for \
                 protobuf (Accept: application/vnd.kubernetes.protobuf)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The settings of one run against `target` over `protocol` (not yet
    /// validated), with `storage` for every side.
    pub fn config(&self, target: Target, protocol: WatchProtocol) -> Result<S1Config, String> {
        self.config_with(target, protocol, self.storage_for(&[protocol]))
    }

    /// [`LoadArgs::config`] with the storage given.
    pub fn config_with(
        &self,
        target: Target,
        protocol: WatchProtocol,
        storage: Storage,
    ) -> Result<S1Config, String> {
        let mut c = S1Config::new(
            target,
            self.watchers,
            self.writes_per_sec,
            Duration::from_secs(self.duration),
        );
        c.object_bytes = self.object_bytes;
        c.storage = storage;
        // etcd watchers receive the values as stored; asking for protobuf
        // there is refused by `S1Config::validate` in `s1`. An informer asks
        // for protobuf whatever --accept says (`set_watch_protocol`).
        c.accept = self.accept.unwrap_or_default();
        c.namespace_count = self.namespace_count;
        c.objects = self.objects;
        c.etcd_servers = self.etcd_servers.clone();
        match &self.kubeconfig {
            Some(path) => {
                let k = kubeconfig::load(path, self.context.as_deref())?;
                c.target_url = Some(k.server);
                c.tls = k.tls;
                c.token = k.token;
            }
            None => {
                c.target_url = self.target_url.clone();
                c.tls = TlsOptions {
                    ca_file: self.ca_file.clone(),
                    insecure_skip_verify: self.insecure_skip_tls_verify,
                    ..TlsOptions::default()
                };
                c.token = match (&self.token, &self.token_file) {
                    (Some(t), _) => Some(TokenSource::Inline(t.clone())),
                    (None, Some(f)) => Some(TokenSource::File(f.clone())),
                    (None, None) => None,
                };
            }
        }
        c.set_watch_protocol(protocol);
        c.streams_per_connection = self.streams_per_connection;
        c.server_pid = self.server_pid;
        if let Some(bin) = &self.watchd_bin {
            c.watchd_bin = bin.clone();
        }
        c.watchd_args = self.watchd_args.clone();
        match self.etcd_connections {
            Some(_) if protocol.multiplexed() => {
                return Err(
                    "--etcd-connections does not go with HTTP/2 or grpc-watchd: the etcd \
                     baseline then uses the same multiplexing, ceil(watchers / \
                     streams-per-connection) connections"
                        .into(),
                )
            }
            Some(n) => c.etcd_connections = n,
            None => {}
        }
        c.drain_timeout = Duration::from_secs(self.drain_timeout);
        if let Some(dir) = &self.temp_dir {
            c.temp_root = dir.clone();
        }
        Ok(c)
    }

    /// The etcd and watchd settings of `s1-compare` with `--protocol`, both
    /// checked before any run (a bad combination must not fail after the
    /// first runs): the storage applies to both, `--accept` to watchd only.
    #[cfg(test)]
    pub fn compare_configs(&self) -> Result<(S1Config, S1Config), String> {
        let (etcd, mut watchd) = self.compare_configs_for(&[self.protocol])?;
        Ok((etcd, watchd.remove(0)))
    }

    /// The etcd settings and the watchd settings per protocol, all checked.
    /// etcd direct is multiplexed like HTTP/2 when any protocol is
    /// multiplexed (HTTP/2, watchd's gRPC API), so that the comparison is
    /// fair; the target URL, TLS and token apply to the HTTP side only.
    pub fn compare_configs_for(
        &self,
        protocols: &[WatchProtocol],
    ) -> Result<(S1Config, Vec<S1Config>), String> {
        if protocols.is_empty() {
            return Err("--protocols needs at least one protocol".into());
        }
        let repeated = protocols
            .iter()
            .enumerate()
            .any(|(i, p)| protocols[..i].contains(p));
        if repeated {
            return Err(
                "--protocols takes http1, http2, grpc-watchd and informer, each once".into(),
            );
        }
        self.check_informer(protocols)?;
        let storage = self.storage_for(protocols);
        let etcd_protocol = WatchProtocol::etcd_direct_beside(protocols);
        let mut etcd = self.config_with(Target::Etcd, etcd_protocol, storage)?;
        etcd.accept = Accept::Json;
        etcd.target_url = None;
        etcd.tls = TlsOptions::default();
        etcd.token = None;
        etcd.validate()?;
        let mut watchd = Vec::new();
        for &p in protocols {
            let c = self.config_with(Target::Watchd, p, storage)?;
            c.validate()?;
            watchd.push(c);
        }
        Ok((etcd, watchd))
    }
}

/// Flags of `s1`.
#[derive(Debug, Args)]
pub struct S1Args {
    /// The server the watchers talk to.
    #[arg(long, value_enum)]
    pub target: TargetArg,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// A baseline run beside watchd in `s1-compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Baseline {
    /// The loopback floor: the cheapest possible fan-out server, same W and
    /// rate, events the size of the watch event.
    Floor,
    /// etcd direct: the same watchers as etcd gRPC watches.
    Etcd,
}

/// Flags of `s1-compare`.
#[derive(Debug, Args)]
pub struct S1CompareArgs {
    /// Rounds of runs (floor, etcd, then watchd per protocol; every other
    /// round in the reverse order); the table shows medians.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// The baselines run beside watchd; every side's figures are shown as
    /// ratios against each.
    #[arg(long, value_delimiter = ',', default_value = "floor,etcd")]
    pub baselines: Vec<Baseline>,
    /// Earlier s1-compare results (JSON) whose CPU per delivery joins this
    /// one's in the plot's CPU-against-watchers lines.
    #[arg(long, value_delimiter = ',')]
    pub plot_with: Vec<PathBuf>,
    /// Run watchd over each of these protocols beside etcd direct, e.g.
    /// `http1,http2,grpc-watchd` (instead of the one --protocol).
    #[arg(long, value_delimiter = ',', conflicts_with = "protocol")]
    pub protocols: Option<Vec<WatchProtocol>>,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// Flags of `read-latency`.
#[derive(Debug, Args)]
pub struct ReadLatencyArgs {
    /// Pairs of lists (one consistent, one resourceVersion=0) measured.
    #[arg(long, default_value_t = 1000)]
    pub requests: usize,
    /// ConfigMaps in the cache.
    #[arg(long, default_value_t = 100)]
    pub objects: usize,
    /// Approximate JSON size of each ConfigMap.
    #[arg(long, default_value_t = 1024)]
    pub object_bytes: usize,
    /// Unmeasured pairs first.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Use this etcd (comma separated) instead of starting one.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Option<Vec<String>>,
    /// Use this watchd (http://127.0.0.1:PORT) instead of starting one.
    #[arg(long)]
    pub watchd_url: Option<String>,
    /// The watchd binary (default: `watchd` next to this executable).
    #[arg(long)]
    pub watchd_bin: Option<PathBuf>,
    /// Where temporary etcd and watchd directories go.
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// Write the JSON result here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `work` unless `stop` (Ctrl-C, SIGTERM) comes first; dropping the
/// work kills the processes it started.
pub async fn run_or_stop(
    work: impl Future<Output = Result<bool, String>>,
    stop: impl Future<Output = ()>,
) -> ExitCode {
    tokio::select! {
        r = work => match r {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                error!("{e}");
                ExitCode::from(2)
            }
        },
        () = stop => ExitCode::from(130),
    }
}

/// Writes `value` as pretty JSON to `path` (nothing without a path).
pub fn write_json(path: Option<&Path>, value: &impl Serialize) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    println!("result written to {}", path.display());
    Ok(())
}

/// `s1`: one run; `Ok(false)` when events were missed or duplicated.
pub async fn s1(args: S1Args) -> Result<bool, String> {
    let target = match args.target {
        TargetArg::Watchd => Target::Watchd,
        TargetArg::Etcd => Target::Etcd,
    };
    if matches!(target, Target::Watchd) {
        check_http1_fits(&args.load, &[args.load.protocol])?;
        args.load.check_informer(&[args.load.protocol])?;
    }
    let result = s1_run::run(&args.load.config(target, args.load.protocol)?).await?;
    let table = report::single_table(&result);
    print!("{table}");
    write_json(args.load.out.as_deref(), &result)?;
    if let Some(out) = &args.load.out {
        let title = table.lines().next().unwrap_or("S1");
        let md = artifacts::single_markdown(&result);
        plot::write_beside(out, &md, title, &artifacts::single_panels(&result))?;
    }
    if !result.is_clean() {
        warn!("events were missed, duplicated or reordered, or a watcher failed");
    }
    Ok(result.is_clean())
}

/// `s1-compare`: etcd direct and watchd over each protocol, `runs` times
/// each; `Ok(false)` when any run missed or duplicated events.
pub async fn s1_compare(args: S1CompareArgs) -> Result<bool, String> {
    if args.runs == 0 || args.runs > 20 {
        return Err("--runs must be 1..=20".into());
    }
    if args.load.target_url.is_none()
        && args.load.kubeconfig.is_none()
        && args.load.watchd_bin.is_none()
        && !launch::default_watchd_bin().is_file()
    {
        return Err(format!(
            "{} not found: build watchd (cargo build --release -p watchd) or pass --watchd-bin",
            launch::default_watchd_bin().display()
        ));
    }
    let protocols = args
        .protocols
        .clone()
        .unwrap_or_else(|| vec![args.load.protocol]);
    let (etcd_cfg, watchd_cfgs) = args.load.compare_configs_for(&protocols)?;
    check_http1_fits(&args.load, &protocols)?;
    let earlier = read_results(&args.plot_with)?;
    let mut jobs: Vec<(String, String, SideRun)> = Vec::new();
    let mut floor_bytes = None;
    if args.baselines.contains(&Baseline::Floor) {
        let exe = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
        let f = floor_side::floor_config(&watchd_cfgs[0], &exe)?;
        floor_bytes = Some(f.payload_bytes);
        jobs.push(("floor".into(), "floor".into(), SideRun::Floor(f)));
    }
    if args.baselines.contains(&Baseline::Etcd) {
        jobs.push(("etcd direct".into(), "etcd".into(), SideRun::S1(etcd_cfg)));
    }
    for cfg in watchd_cfgs {
        let p = cfg.watch_protocol();
        jobs.push((p.side_name(), p.name().into(), SideRun::S1(cfg)));
    }
    let mut sides: Vec<Side> = jobs
        .iter()
        .map(|(name, short, run)| Side {
            name: name.clone(),
            short: short.clone(),
            multiplexing: run.multiplexing(),
            runs: Vec::new(),
        })
        .collect();
    for s in &sides {
        println!("{}: {}", s.name, s.multiplexing);
    }
    for i in 0..args.runs {
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        if i % 2 == 1 {
            order.reverse();
        }
        for k in order {
            let r = jobs[k].2.run().await?;
            print!("run {}/{}: {}", i + 1, args.runs, report::single_table(&r));
            sides[k].runs.push(r);
        }
    }
    let informer = protocols.contains(&WatchProtocol::Informer);
    let watched_as = if informer && protocols.len() == 1 {
        "protobuf (informer)".to_string()
    } else if informer {
        format!(
            "{} (informer: protobuf)",
            args.load.accept.unwrap_or_default().name()
        )
    } else {
        args.load.accept.unwrap_or_default().name().to_string()
    };
    let title = format!(
        "S1 compare: {} watchers x {} writes/s for {} s, ~{} B objects stored as {}, watchd watched as {}{}, median of {} run(s) each",
        args.load.watchers,
        args.load.writes_per_sec,
        args.load.duration,
        args.load.object_bytes,
        args.load.storage_for(&protocols).name(),
        watched_as,
        floor_bytes.map_or(String::new(), |b| format!(", floor events of {b} B")),
        args.runs
    );
    let shorts: Vec<&str> = sides.iter().map(|s| s.short.as_str()).collect();
    let ratios = baseline_ratios(&shorts);
    let result = CompareResult::with_ratios(sides, ratios);
    println!();
    print!("{}", result.table(&title));
    for line in artifacts::target_lines(&result) {
        println!("  {line}");
    }
    write_json(args.load.out.as_deref(), &result)?;
    if let Some(out) = &args.load.out {
        let md = artifacts::compare_markdown(&result, &title);
        plot::write_beside(
            out,
            &md,
            &title,
            &artifacts::compare_panels(&result, &earlier),
        )?;
    }
    Ok(result.is_clean())
}

/// Refuses HTTP/1.1 at more watchers than sockets fit under the open-files
/// limit (each watcher is a socket here and another in watchd).
pub fn check_http1_fits(load: &LoadArgs, protocols: &[WatchProtocol]) -> Result<(), String> {
    let given = load.target_url.is_some() || load.kubeconfig.is_some();
    if given || !protocols.contains(&WatchProtocol::Http1) {
        return Ok(());
    }
    let what = format!(
        "HTTP/1.1 at {} watchers (one connection each, here and in watchd)",
        load.watchers
    );
    fdlimit::check_sockets(load.watchers, fdlimit::soft_limit(), &what)
}

/// Reads earlier JSON results.
fn read_results(paths: &[PathBuf]) -> Result<Vec<serde_json::Value>, String> {
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
        })
        .collect()
}

/// `read-latency`.
pub async fn read_latency(args: ReadLatencyArgs) -> Result<bool, String> {
    let mut cfg = ReadLatencyConfig::new(args.requests, args.objects);
    cfg.object_bytes = args.object_bytes;
    cfg.warmup = args.warmup;
    cfg.etcd_servers = args.etcd_servers;
    cfg.watchd_url = args.watchd_url;
    if let Some(bin) = args.watchd_bin {
        cfg.watchd_bin = bin;
    }
    if let Some(dir) = args.temp_dir {
        cfg.temp_root = dir;
    }
    let r = read_latency::run(&cfg).await?;
    print!("{}", read_latency::table(&r));
    write_json(args.out.as_deref(), &r)?;
    Ok(true)
}
