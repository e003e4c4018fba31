//! Flags and drivers of the scenarios S2 to S7: each subcommand parses its
//! flags into its library config, runs, prints the table and writes the
//! JSON result with a Markdown table beside it.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use watchd_loadtest::demo::Storage;
use watchd_loadtest::endpoint::Protocol;
use watchd_loadtest::http::Accept;
use watchd_loadtest::scenario::report::Report;
use watchd_loadtest::scenario::servers::ServerSetup;
use watchd_loadtest::{s2, s3, s4, s5, s6, s7};

/// Where the servers come from, and where the result goes (every scenario).
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Use this etcd (comma separated) instead of starting one.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Option<Vec<String>>,
    /// PID of the given etcd, for its CPU and memory.
    #[arg(long)]
    pub etcd_pid: Option<u32>,
    /// Use this watchd (http://127.0.0.1:PORT) instead of starting one.
    #[arg(long)]
    pub watchd_url: Option<String>,
    /// PID of the given watchd, for its CPU and memory.
    #[arg(long)]
    pub watchd_pid: Option<u32>,
    /// The watchd binary (default: `watchd` next to this executable).
    #[arg(long)]
    pub watchd_bin: Option<PathBuf>,
    /// Where temporary etcd and watchd directories go.
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// Write the JSON result here (and the Markdown table beside it, .md).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl CommonArgs {
    /// The server setup these flags describe.
    pub fn setup(&self) -> ServerSetup {
        let mut s = ServerSetup {
            etcd_servers: self.etcd_servers.clone(),
            etcd_pid: self.etcd_pid,
            watchd_url: self.watchd_url.clone(),
            watchd_pid: self.watchd_pid,
            ..ServerSetup::default()
        };
        if let Some(b) = &self.watchd_bin {
            s.watchd_bin = b.clone();
        }
        if let Some(d) = &self.temp_dir {
            s.temp_root = d.clone();
        }
        s
    }
}

/// Prints the table, writes the files; `Ok(clean)`.
fn finish(report: &Report, out: Option<&std::path::Path>) -> Result<bool, String> {
    println!();
    print!("{}", report.table());
    if let Some(path) = out {
        let md = report.write(path)?;
        println!("result written to {} and {}", path.display(), md.display());
    }
    Ok(report.clean)
}

/// Flags of `s2`.
#[derive(Debug, Args)]
pub struct S2Args {
    /// Nodes, one watcher with fieldSelector=spec.nodeName each.
    #[arg(long, default_value_t = 5000)]
    pub nodes: usize,
    /// Nodes of the small-scale baseline phase (0: skip it).
    #[arg(long, default_value_t = 50)]
    pub baseline_nodes: usize,
    /// Watchers of every pod.
    #[arg(long, default_value_t = 50)]
    pub all_watchers: usize,
    /// etcd direct watchers of the pods prefix (0: skip the etcd phase).
    #[arg(long, default_value_t = 100)]
    pub etcd_watchers: usize,
    /// Pods, spread over the nodes.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Pod updates per second.
    #[arg(long, default_value_t = 500.0)]
    pub updates_per_sec: f64,
    /// Seconds of updates per phase.
    #[arg(long, default_value_t = 20)]
    pub duration: u64,
    /// Stored size of each pod (0: as built, about 1.3 KB as protobuf).
    #[arg(long, default_value_t = 0)]
    pub pod_bytes: usize,
    /// How pods are stored: protobuf (as kube-apiserver) or json.
    #[arg(long, default_value = "protobuf")]
    pub storage: Storage,
    /// What watchd's watchers ask for: protobuf (as kubelets) or json.
    #[arg(long, default_value = "protobuf")]
    pub accept: Accept,
    /// http1 (a connection per watcher) or http2 (multiplexed).
    #[arg(long, default_value = "http1")]
    pub protocol: Protocol,
    /// With http2, watch streams per connection.
    #[arg(long, default_value_t = 100)]
    pub streams_per_connection: usize,
    /// Longest wait for the watchers after the last update, seconds.
    #[arg(long, default_value_t = 15)]
    pub drain_timeout: u64,
    /// The pod field each keyed watcher selects one value of: spec.nodeName (a kubelet
    /// per node), or spec.serviceAccountName (watchd started with
    /// --index-field=pods:spec.serviceAccountName; "nodes" are then service accounts);
    /// or shard: the keyed watchers are sharded informers, each selecting one of
    /// --nodes equal ranges of the uid hash (shardSelector), together the pods watch.
    #[arg(long, value_enum, default_value = "spec.nodeName")]
    pub key_field: s2::KeyField,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `s2`.
pub async fn s2(a: S2Args) -> Result<bool, String> {
    let cfg = s2::S2Config {
        nodes: a.nodes,
        baseline_nodes: a.baseline_nodes,
        all_watchers: a.all_watchers,
        etcd_watchers: a.etcd_watchers,
        pods: a.pods,
        updates_per_sec: a.updates_per_sec,
        duration: Duration::from_secs(a.duration),
        pod_bytes: a.pod_bytes,
        storage: a.storage,
        accept: a.accept,
        protocol: a.protocol,
        streams_per_connection: a.streams_per_connection,
        drain_timeout: Duration::from_secs(a.drain_timeout),
        setup: a.common.setup(),
        key_field: a.key_field,
        ..s2::S2Config::default()
    };
    let r = s2::run(&cfg).await?;
    finish(&r, a.common.out.as_deref())
}

/// Flags of `s3`.
#[derive(Debug, Args)]
pub struct S3Args {
    /// Pods in the cache.
    #[arg(long, default_value_t = 50_000)]
    pub pods: usize,
    /// Stored size of each pod, bytes.
    #[arg(long, default_value_t = 2048)]
    pub pod_bytes: usize,
    /// How pods are stored: protobuf or json.
    #[arg(long, default_value = "protobuf")]
    pub storage: Storage,
    /// Lists at once in each storm.
    #[arg(long, default_value_t = 200)]
    pub concurrency: usize,
    /// Media types of the storms, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "json,protobuf")]
    pub accept: Vec<Accept>,
    /// http1 (a connection per list) or http2.
    #[arg(long, default_value = "http1")]
    pub protocol: Protocol,
    /// With http2, lists per connection.
    #[arg(long, default_value_t = 100)]
    pub streams_per_connection: usize,
    /// Concurrent etcd direct reads of the pods (0: no baseline; 200, the
    /// storms' concurrency, adds about 5 minutes here).
    #[arg(long, default_value_t = 50)]
    pub etcd_lists: usize,
    /// Keys per etcd range page.
    #[arg(long, default_value_t = 500)]
    pub etcd_page: i64,
    /// Ask for gzip (Accept-Encoding: gzip): full lists over 128 KiB and streaming lists
    /// come compressed (as kube-apiserver 1.37 sends them); sizes are counted as sent.
    #[arg(long)]
    pub gzip: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `s3`.
pub async fn s3(a: S3Args) -> Result<bool, String> {
    let cfg = s3::S3Config {
        pods: a.pods,
        pod_bytes: a.pod_bytes,
        storage: a.storage,
        concurrency: a.concurrency,
        accepts: a.accept,
        protocol: a.protocol,
        streams_per_connection: a.streams_per_connection,
        etcd_lists: a.etcd_lists,
        etcd_page: a.etcd_page,
        gzip: a.gzip,
        setup: a.common.setup(),
    };
    let r = s3::run(&cfg).await?;
    finish(&r, a.common.out.as_deref())
}

/// Flags of `s4`.
#[derive(Debug, Args)]
pub struct S4Args {
    /// Established watchers that drop and resume at once.
    #[arg(long, default_value_t = 10_000)]
    pub watchers: usize,
    /// http1 (a socket per watcher on each side) or http2.
    #[arg(long, default_value = "http1")]
    pub protocol: Protocol,
    /// With http2, watch streams per connection (at most 1000).
    #[arg(long, default_value_t = 1000)]
    pub streams_per_connection: usize,
    /// ConfigMaps the writer updates.
    #[arg(long, default_value_t = 100)]
    pub objects: usize,
    /// Writes per second, before, during and after the storm (every watcher
    /// receives each: 2/s to 10 000 watchers is 20 000 deliveries/s).
    #[arg(long, default_value_t = 2.0)]
    pub writes_per_sec: f64,
    /// Seconds of the quiet window and of the storm window.
    #[arg(long, default_value_t = 4)]
    pub window: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `s4`.
pub async fn s4(a: S4Args) -> Result<bool, String> {
    let cfg = s4::S4Config {
        watchers: a.watchers,
        protocol: a.protocol,
        streams_per_connection: a.streams_per_connection,
        objects: a.objects,
        writes_per_sec: a.writes_per_sec,
        window: Duration::from_secs(a.window.max(1)),
        setup: a.common.setup(),
        ..s4::S4Config::default()
    };
    let r = s4::run(&cfg).await?;
    finish(&r, a.common.out.as_deref())
}

/// Flags of `s5`.
#[derive(Debug, Args)]
pub struct S5Args {
    /// Idle watchers over HTTP/2.
    #[arg(long, default_value_t = 100_000)]
    pub watchers: usize,
    /// HTTP/2 streams per connection (watchd allows 1000).
    #[arg(long, default_value_t = 1000)]
    pub streams_per_connection: usize,
    /// Idle watchers over HTTP/1.1 [default: as many as the open-files
    /// limits allow; 0 skips the phase].
    #[arg(long)]
    pub http1_watchers: Option<usize>,
    /// Idle etcd direct watchers (0: skip the baseline).
    #[arg(long, default_value_t = 100_000)]
    pub etcd_watchers: usize,
    /// Namespaces the watchers are spread over.
    #[arg(long, default_value_t = 100)]
    pub namespaces: usize,
    /// Seconds the watchers stay open before the RSS is read.
    #[arg(long, default_value_t = 3)]
    pub settle: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `s5`.
pub async fn s5(a: S5Args) -> Result<bool, String> {
    let cfg = s5::S5Config {
        watchers: a.watchers,
        streams_per_connection: a.streams_per_connection,
        http1_watchers: a.http1_watchers,
        etcd_watchers: a.etcd_watchers,
        namespaces: a.namespaces,
        settle: Duration::from_secs(a.settle),
        setup: a.common.setup(),
    };
    let r = s5::run(&cfg).await?;
    finish(&r, a.common.out.as_deref())
}

/// Flags of `s6`.
#[derive(Debug, Args)]
pub struct S6Args {
    /// etcd events replayed (pod creates, then updates).
    #[arg(long, default_value_t = 1_000_000)]
    pub events: usize,
    /// Distinct pods.
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// Puts per etcd transaction (1: a revision per event, as kube-apiserver
    /// writes; etcd takes about 2 000 of those a second here).
    #[arg(long, default_value_t = 100)]
    pub ops_per_txn: usize,
    /// Transactions in flight.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Stored size of each pod (0: as built).
    #[arg(long, default_value_t = 0)]
    pub pod_bytes: usize,
    /// How pods are stored: protobuf or json.
    #[arg(long, default_value = "protobuf")]
    pub storage: Storage,
    /// Skip timing a second watchd's initial load.
    #[arg(long)]
    pub no_reload: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `s6`.
pub async fn s6(a: S6Args) -> Result<bool, String> {
    let cfg = s6::S6Config {
        events: a.events,
        pods: a.pods,
        ops_per_txn: a.ops_per_txn,
        concurrency: a.concurrency,
        pod_bytes: a.pod_bytes,
        storage: a.storage,
        reload: !a.no_reload,
        setup: a.common.setup(),
    };
    let r = s6::run(&cfg).await?;
    finish(&r, a.common.out.as_deref())
}

/// Flags of `s7`.
#[derive(Debug, Args)]
pub struct S7Args {
    /// Objects of mixed kinds and sizes.
    #[arg(long, default_value_t = 100_000)]
    pub objects: usize,
    /// Storage formats, a phase each, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "protobuf,json")]
    pub storage: Vec<Storage>,
    /// Seconds between ready and the reading.
    #[arg(long, default_value_t = 2)]
    pub settle: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `s7`.
pub async fn s7(a: S7Args) -> Result<bool, String> {
    let cfg = s7::S7Config {
        objects: a.objects,
        storages: a.storage,
        settle: Duration::from_secs(a.settle),
        setup: a.common.setup(),
    };
    let r = s7::run(&cfg).await?;
    finish(&r, a.common.out.as_deref())
}

/// Flags of `check-cost`.
#[derive(Debug, Args)]
pub struct CheckCostArgs {
    /// Pods in etcd.
    #[arg(long, default_value_t = 50_000)]
    pub pods: usize,
    /// Stored size of each pod, bytes.
    #[arg(long, default_value_t = 2048)]
    pub pod_bytes: usize,
    /// Reads of each kind, etcd direct.
    #[arg(long, default_value_t = 10)]
    pub reads: usize,
    /// watchd's check interval, seconds.
    #[arg(long, default_value_t = 2)]
    pub interval: u64,
    /// Each window of watchd (check off, check on), seconds.
    #[arg(long, default_value_t = 20)]
    pub window: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `check-cost`.
pub async fn check_cost(a: CheckCostArgs) -> Result<bool, String> {
    let cfg = watchd_loadtest::check_cost::CheckCostConfig {
        pods: a.pods,
        pod_bytes: a.pod_bytes,
        reads: a.reads,
        interval: Duration::from_secs(a.interval),
        window: Duration::from_secs(a.window),
        setup: a.common.setup(),
    };
    let r = watchd_loadtest::check_cost::run(&cfg).await?;
    finish(&r, a.common.out.as_deref())
}
