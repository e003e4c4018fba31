//! Command-line entry point of `watchd-loadtest`.
//!
//! ```text
//! watchd-loadtest demo --etcd-servers=http://127.0.0.1:2379 [--once] ...
//! watchd-loadtest s1 --target=watchd|etcd --watchers=W --writes-per-sec=E --duration=S
//!                    [--protocol=http1|http2|grpc-watchd]
//! watchd-loadtest s1-compare --watchers=W --writes-per-sec=E --duration=S [--runs=3]
//!                    [--protocols=http1,http2,grpc-watchd]
//! watchd-loadtest read-latency --requests=N [--objects=K]
//! watchd-loadtest floor --watchers=N --rate=R --duration=S [--events-per-write=K]
//! watchd-loadtest s1-saturate --watchers=W --rates=A,B,C [--sides=floor,etcd,http1,http2,grpc-watchd]
//! watchd-loadtest s2|s3|s4|s5|s6|s7 [--out=result.json] ...
//! ```
//!
//! Logs go to stderr; set `RUST_LOG=debug` to see every change.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tracing::{error, info, warn};
use tracing_subscriber::EnvFilter;
use watchd_loadtest::demo::{self, DemoConfig, Storage};

mod floor_cmd;
mod saturate_cmd;
mod scenarios;
mod suite;
use scenarios::{ReadLatencyArgs, S1Args, S1CompareArgs};

/// Load and demo data generator for watchd.
#[derive(Debug, Parser)]
#[command(name = "watchd-loadtest", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a realistic demo cluster into etcd and keep it changing.
    Demo(DemoArgs),
    /// S1 broadcast: W watchers of every ConfigMap while a writer puts E/s.
    S1(S1Args),
    /// S1 against etcd direct and watchd in one invocation, side by side.
    #[command(name = "s1-compare")]
    S1Compare(S1CompareArgs),
    /// Latency a consistent list adds over resourceVersion=0 on an idle cache.
    ReadLatency(ReadLatencyArgs),
    /// The loopback floor: CPU per delivery of the cheapest possible fan-out.
    Floor(floor_cmd::FloorArgs),
    /// Drains the floor's sockets (started by the floor, not by hand).
    #[command(name = "floor-receiver", hide = true)]
    FloorReceiver(floor_cmd::ReceiverArgs),
    /// S1 at one W, the write rate raised step by step until each side stops
    /// holding it.
    #[command(name = "s1-saturate")]
    S1Saturate(saturate_cmd::SaturateArgs),
    /// S2 node-scoped: watchers with fieldSelector=spec.nodeName, at 5 000
    /// nodes vs 50, and etcd direct.
    S2(suite::S2Args),
    /// S3 list storm: concurrent full and streaming lists of 50 000 pods.
    S3(suite::S3Args),
    /// S4 reconnect storm: 10 000 watchers drop and resume at once.
    S4(suite::S4Args),
    /// S5 idle watchers: RSS per watcher, HTTP/2 and HTTP/1.1, vs etcd.
    S5(suite::S5Args),
    /// S6 ingest: 1 000 000 pod events replayed through etcd into watchd.
    S6(suite::S6Args),
    /// S7 cache memory: RSS over raw bytes of 100 000 mixed objects.
    S7(suite::S7Args),
    /// What the consistency check costs etcd and watchd, with 50 000 pods.
    CheckCost(suite::CheckCostArgs),
    /// Draws the PNG of written S2 … S7 results again (`x.json` → `x.png`).
    Plot(PlotArgs),
}

/// Flags of the `plot` subcommand.
#[derive(Debug, Args)]
struct PlotArgs {
    /// Result JSON files written by `s2` … `s7`.
    #[arg(required = true)]
    results: Vec<std::path::PathBuf>,
}

/// Flags of the `demo` subcommand.
#[derive(Debug, Args)]
struct DemoArgs {
    /// etcd endpoints, comma separated (http://host:port).
    #[arg(long, value_delimiter = ',', required = true)]
    etcd_servers: Vec<String>,
    /// Key prefix kube-apiserver uses (its --etcd-prefix).
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// Number of demo-N namespaces (default, kube-system, kube-public and
    /// kube-node-lease are always created).
    #[arg(long, default_value_t = 5)]
    namespaces: usize,
    /// Number of node-N nodes.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// Pods in each demo namespace.
    #[arg(long, default_value_t = 8)]
    pods_per_namespace: usize,
    /// Config maps in each demo namespace.
    #[arg(long, default_value_t = 3)]
    configmaps_per_namespace: usize,
    /// Random changes per second after the fill (0 = none); the status,
    /// endpoint and event writes that follow a change come on top.
    #[arg(long, default_value_t = 5.0)]
    changes_per_second: f64,
    /// Renew every Lease (one per node, as its kubelet does, and the leader
    /// elections') once per this many seconds, spread evenly (0 = never).
    #[arg(long, default_value = "10", value_parser = seconds)]
    lease_renew_seconds: Duration,
    /// Seconds Events live: the TTL of the etcd lease they are written with
    /// (kube-apiserver's --event-ttl).
    #[arg(long, default_value = "3600", value_parser = seconds)]
    event_ttl_seconds: Duration,
    /// Seed for names, uids and the choice of changes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds (0 = run until Ctrl-C).
    #[arg(long, default_value_t = 0)]
    duration: u64,
    /// Fill the cluster, then exit without making changes.
    #[arg(long)]
    once: bool,
    /// How objects are stored: `protobuf` (as kube-apiserver stores built-in kinds) or
    /// `json`.
    #[arg(long, default_value = "protobuf")]
    storage: Storage,
}

impl From<DemoArgs> for DemoConfig {
    fn from(a: DemoArgs) -> Self {
        Self {
            etcd_servers: a.etcd_servers,
            etcd_prefix: a.etcd_prefix,
            namespaces: a.namespaces,
            nodes: a.nodes,
            pods_per_namespace: a.pods_per_namespace,
            configmaps_per_namespace: a.configmaps_per_namespace,
            changes_per_second: a.changes_per_second,
            lease_renew_period: a.lease_renew_seconds,
            event_ttl: a.event_ttl_seconds,
            seed: a.seed,
            duration: (a.duration > 0).then(|| Duration::from_secs(a.duration)),
            once: a.once,
            storage: a.storage,
        }
    }
}

/// Parses a non-negative number of seconds (fractions allowed).
fn seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is not a duration in seconds"))
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM; never resolves if no handler
/// could be installed.
async fn shutdown_signal() {
    let ctrl_c = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => info!("received Ctrl-C, stopping"),
            Err(err) => {
                warn!(error = %err, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
                info!("received SIGTERM, stopping");
            }
            Err(err) => {
                warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    if !matches!(cli.command, Command::Demo(_) | Command::Plot(_)) {
        watchd_loadtest::fdlimit::raise_and_log();
    }
    match cli.command {
        Command::Floor(args) => {
            scenarios::run_or_stop(floor_cmd::run(args), shutdown_signal()).await
        }
        Command::FloorReceiver(args) => match floor_cmd::receiver(args) {
            Ok(_) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(2),
        },
        Command::S1Saturate(args) => {
            scenarios::run_or_stop(saturate_cmd::run(args), shutdown_signal()).await
        }
        Command::S1(args) => scenarios::run_or_stop(scenarios::s1(args), shutdown_signal()).await,
        Command::S1Compare(args) => {
            scenarios::run_or_stop(scenarios::s1_compare(args), shutdown_signal()).await
        }
        Command::ReadLatency(args) => {
            scenarios::run_or_stop(scenarios::read_latency(args), shutdown_signal()).await
        }
        Command::S2(args) => scenarios::run_or_stop(suite::s2(args), shutdown_signal()).await,
        Command::S3(args) => scenarios::run_or_stop(suite::s3(args), shutdown_signal()).await,
        Command::S4(args) => scenarios::run_or_stop(suite::s4(args), shutdown_signal()).await,
        Command::S5(args) => scenarios::run_or_stop(suite::s5(args), shutdown_signal()).await,
        Command::S6(args) => scenarios::run_or_stop(suite::s6(args), shutdown_signal()).await,
        Command::S7(args) => scenarios::run_or_stop(suite::s7(args), shutdown_signal()).await,
        Command::CheckCost(args) => {
            scenarios::run_or_stop(suite::check_cost(args), shutdown_signal()).await
        }
        Command::Plot(args) => {
            let mut code = ExitCode::SUCCESS;
            for json in &args.results {
                match watchd_loadtest::scenario::plot::draw_from_json(json) {
                    Ok(png) => println!("plot written to {}", png.display()),
                    Err(e) => {
                        error!("{e}");
                        code = ExitCode::from(2);
                    }
                }
            }
            code
        }
        Command::Demo(args) => {
            let cfg = DemoConfig::from(args);
            match demo::run(&cfg, shutdown_signal()).await {
                Ok(_) => ExitCode::SUCCESS,
                Err(err) => {
                    error!("{err}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "main_tests.rs"]
mod tests;
