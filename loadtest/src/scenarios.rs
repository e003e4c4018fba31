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
use watchd_loadtest::http::Accept;
use watchd_loadtest::launch;
use watchd_loadtest::read_latency::{self, ReadLatencyConfig};
use watchd_loadtest::s1::report::{self, CompareResult};
use watchd_loadtest::s1::{self as s1_run, S1Config, Target};

/// Server under test.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TargetArg {
    /// watchd's HTTP watch API.
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
    /// kube-apiserver stores built-in kinds. Applies to both targets.
    #[arg(long, default_value = "json")]
    pub storage: Storage,
    /// What the watchd watchers ask for: `json` lines, or `protobuf` frames
    /// as client-go informers do (needs --storage=protobuf). watchd only:
    /// `s1-compare` uses it for the watchd runs.
    #[arg(long, default_value = "json")]
    pub accept: Accept,
    /// Namespaces the ConfigMaps are spread over.
    #[arg(long, default_value_t = 10)]
    pub namespace_count: usize,
    /// Distinct ConfigMaps, rewritten round-robin.
    #[arg(long, default_value_t = 100)]
    pub objects: usize,
    /// Use this etcd (comma separated) instead of starting one.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Option<Vec<String>>,
    /// Use this watchd (http://127.0.0.1:PORT) instead of starting one.
    #[arg(long)]
    pub watchd_url: Option<String>,
    /// PID of an external server under test, for its CPU and memory.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// The watchd binary (default: `watchd` next to this executable).
    #[arg(long)]
    pub watchd_bin: Option<PathBuf>,
    /// gRPC connections the etcd watches are spread over.
    #[arg(long, default_value_t = 4)]
    pub etcd_connections: usize,
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
    fn config(&self, target: Target) -> S1Config {
        let mut c = S1Config::new(
            target,
            self.watchers,
            self.writes_per_sec,
            Duration::from_secs(self.duration),
        );
        c.object_bytes = self.object_bytes;
        c.storage = self.storage;
        // etcd watchers receive the values as stored; asking for protobuf
        // there is refused by `S1Config::validate` in `s1`.
        c.accept = self.accept;
        c.namespace_count = self.namespace_count;
        c.objects = self.objects;
        c.etcd_servers = self.etcd_servers.clone();
        c.watchd_url = self.watchd_url.clone();
        c.server_pid = self.server_pid;
        if let Some(bin) = &self.watchd_bin {
            c.watchd_bin = bin.clone();
        }
        c.etcd_connections = self.etcd_connections;
        c.drain_timeout = Duration::from_secs(self.drain_timeout);
        if let Some(dir) = &self.temp_dir {
            c.temp_root = dir.clone();
        }
        c
    }

    /// The etcd and watchd settings of `s1-compare`, both checked before any
    /// run (a bad combination must not fail after the first runs): the
    /// storage applies to both, `--accept` to watchd only.
    pub fn compare_configs(&self) -> Result<(S1Config, S1Config), String> {
        let mut etcd = self.config(Target::Etcd);
        etcd.accept = Accept::Json;
        let watchd = self.config(Target::Watchd);
        etcd.validate()?;
        watchd.validate()?;
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

/// Flags of `s1-compare`.
#[derive(Debug, Args)]
pub struct S1CompareArgs {
    /// Pairs of runs (etcd and watchd, alternating which goes first); the
    /// table shows medians.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
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

fn write_json(path: Option<&Path>, value: &impl Serialize) -> Result<(), String> {
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
    let result = s1_run::run(&args.load.config(target)).await?;
    print!("{}", report::single_table(&result));
    write_json(args.load.out.as_deref(), &result)?;
    if !result.is_clean() {
        warn!("events were missed, duplicated or reordered, or a watcher failed");
    }
    Ok(result.is_clean())
}

/// `s1-compare`: etcd direct and watchd, `runs` times each.
pub async fn s1_compare(args: S1CompareArgs) -> Result<bool, String> {
    if args.runs == 0 || args.runs > 20 {
        return Err("--runs must be 1..=20".into());
    }
    if args.load.watchd_url.is_none()
        && args.load.watchd_bin.is_none()
        && !launch::default_watchd_bin().is_file()
    {
        return Err(format!(
            "{} not found: build watchd (cargo build --release -p watchd) or pass --watchd-bin",
            launch::default_watchd_bin().display()
        ));
    }
    let (etcd_cfg, watchd_cfg) = args.load.compare_configs()?;
    let (mut etcd_runs, mut watchd_runs) = (Vec::new(), Vec::new());
    for i in 0..args.runs {
        let order = if i % 2 == 0 {
            [Target::Etcd, Target::Watchd]
        } else {
            [Target::Watchd, Target::Etcd]
        };
        for target in order {
            let cfg = match target {
                Target::Etcd => &etcd_cfg,
                Target::Watchd => &watchd_cfg,
            };
            let r = s1_run::run(cfg).await?;
            print!("run {}/{}: {}", i + 1, args.runs, report::single_table(&r));
            match target {
                Target::Etcd => etcd_runs.push(r),
                Target::Watchd => watchd_runs.push(r),
            }
        }
    }
    let median = report::compare(&etcd_runs, &watchd_runs);
    let title = format!(
        "S1 compare: {} watchers x {} writes/s for {} s, ~{} B objects stored as {}, watchd watched as {}, median of {} run(s) each",
        args.load.watchers,
        args.load.writes_per_sec,
        args.load.duration,
        args.load.object_bytes,
        args.load.storage.name(),
        args.load.accept.name(),
        args.runs
    );
    println!();
    print!("{}", report::compare_table(&title, &median));
    let clean = etcd_runs.iter().chain(&watchd_runs).all(|r| r.is_clean());
    let result = CompareResult {
        scenario: "s1-compare".into(),
        etcd_runs,
        watchd_runs,
        median,
    };
    write_json(args.load.out.as_deref(), &result)?;
    Ok(clean)
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
