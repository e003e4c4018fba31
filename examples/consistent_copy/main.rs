//! Keeps a consistent local copy of every pod and node with one WatchMany stream, and
//! prints which node the pods are on.
//!
//! ```sh
//! cargo run --example consistent_copy -- --grpc-url http://127.0.0.1:9090 --for 60
//! ```
//!
//! Both maps come from one stream in etcd's revision order, a message holding every
//! event of its revisions, so after each message they are the cluster at one revision:
//! the join "pods per node" never sees a pod on a node that is not there yet, or no
//! longer (unless the cluster itself has such a pod). The logic is in `local_copy.rs`,
//! which `tests/example_client.rs` runs against a real etcd and watchd.

mod local_copy;

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tokio::time::Instant;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use watchd::api::grpc::pb::watchd_client::WatchdClient;

use local_copy::{LocalCopy, Moment};

/// Nodes named in a summary line (those with the most pods).
const NODES_IN_SUMMARY: usize = 8;

/// Keeps a local copy of pods and nodes in sync with watchd's WatchMany and prints pods
/// per node.
#[derive(Parser)]
struct Args {
    /// watchd's gRPC address (`http://` or, with `--ca-file`, `https://`).
    #[arg(long, default_value = "http://127.0.0.1:9090")]
    grpc_url: String,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long = "for", value_name = "SECONDS")]
    for_seconds: Option<u64>,
    /// A bearer token, sent as `authorization: Bearer <token>` metadata.
    #[arg(long, env = "WATCHD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The CA certificate (PEM) watchd's serving certificate chains to, for `https://`.
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Print a summary this often, in seconds, besides at each sync.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    every: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("consistent_copy: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let mut endpoint = Endpoint::from_shared(args.grpc_url.clone())
        .map_err(|e| format!("--grpc-url {}: {e}", args.grpc_url))?
        .connect_timeout(Duration::from_secs(5))
        // A dead server's stream ends instead of waiting forever.
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    if let Some(ca) = &args.ca_file {
        let pem = std::fs::read(ca).map_err(|e| format!("--ca-file {}: {e}", ca.display()))?;
        let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| format!("--ca-file: {e}"))?;
    }
    // Connected at the first call, and again after a disconnect.
    let client = WatchdClient::new(endpoint.connect_lazy());
    let config = local_copy::Config {
        bound: args.for_seconds.map(Duration::from_secs),
        authorization: match &args.token {
            Some(t) => {
                Some(local_copy::bearer(t).map_err(|_| "--token: not a valid header value")?)
            }
            None => None,
        },
        tick: Some(Duration::from_secs(args.every.max(1))),
    };
    let started = Instant::now();
    let (copy, stats) =
        local_copy::run(client, &config, LocalCopy::default(), |copy, _, moment| {
            match moment {
                Moment::Synced => {
                    println!("synced at revision {}", copy.revision);
                    println!("{}", copy.summary(NODES_IN_SUMMARY));
                }
                Moment::Tick if copy.is_synced() => println!("{}", copy.summary(NODES_IN_SUMMARY)),
                Moment::Tick | Moment::Applied => {}
                Moment::Disconnected { error, backoff } if copy.is_synced() => eprintln!(
                    "stream broken ({error}); resuming after revision {} in {backoff:?}",
                    copy.revision
                ),
                Moment::Disconnected { error, backoff } => {
                    eprintln!("no stream ({error}); listing in {backoff:?}")
                }
                Moment::StartingOver { error, backoff } => {
                    eprintln!("starting over ({error}); listing again in {backoff:?}")
                }
            }
            ControlFlow::Continue(())
        })
        .await;
    if copy.is_synced() {
        println!("{}", copy.summary(NODES_IN_SUMMARY));
    }
    println!(
        "after {:.0?}: {} messages; {} lists, {} syncs, {} resumes, {} expired, {} failures",
        started.elapsed(),
        stats.messages,
        stats.lists,
        stats.syncs,
        stats.resumes,
        stats.expired,
        stats.failures
    );
    if copy.is_synced() {
        Ok(())
    } else {
        Err("never synced".into())
    }
}
