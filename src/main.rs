//! The `watchd` command line: `serve` runs the daemon; `version` prints its version.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use tokio::net::TcpListener;
use tokio::sync::watch;

use watchd::api::grpc;
use watchd::api::http::proxy::Proxy;
use watchd::api::http::{self, ApiState};
use watchd::api::read::ReadContext;
use watchd::codec::encryption::EncryptionConfig;
use watchd::dispatch::Dispatch;
use watchd::registry::index_fields::{IndexField, IndexFields};
use watchd::source::upstream::{UpstreamReader, UpstreamSource};
use watchd::source::{EtcdConfig, EtcdReader, EtcdSource, Source, SourceReader};
use watchd::store::{Cache, StoreConfig};
use watchd::{config, metrics};

/// A read-path cache for Kubernetes: serves get, list and watch from etcd to many clients.
#[derive(Parser)]
#[command(name = "watchd", version, about, long_about = None, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read etcd (or an upstream API server) and serve the Kubernetes read API, passing
    /// everything else through to the upstream if there is one.
    Serve(Box<ServeArgs>),
    /// Print the version.
    Version,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// A YAML file of these flags, each key a flag's name without the dashes
    /// (`etcd-servers: [https://127.0.0.1:2379]`, `http-address: 127.0.0.1:8080`); a flag
    /// given on the command line overrides the file's. See examples/watchd.yaml.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "General")]
    config: Option<std::path::PathBuf>,
    /// etcd endpoints, comma separated (as kube-apiserver's flag): the data source.
    /// Without them, the upstream API server is the data source.
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Source")]
    etcd_servers: Vec<String>,
    /// The Kubernetes API server watchd stands in front of (kube-apiserver, or another
    /// watchd for a tier): requests the cache does not answer pass through to it, and
    /// without --etcd-servers it is the data source too. A URL (http://, or https://
    /// verified with the system's CAs); use --upstream-kubeconfig for a CA and
    /// credentials.
    #[arg(long, value_name = "URL", conflicts_with = "upstream_kubeconfig")]
    #[arg(help_heading = "Source")]
    upstream_url: Option<String>,
    /// A kubeconfig for the upstream, read as client-go reads it: its current context's
    /// server, CA, client certificate or token (watchd's own identity upstream).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Source")]
    upstream_kubeconfig: Option<std::path::PathBuf>,
    /// Pass requests the cache does not answer (writes, subresources, exec, logs, APIs
    /// it does not cache) through to the upstream; false answers them 405 or 404.
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Source")]
    proxy: bool,
    /// Key prefix kube-apiserver stores objects under.
    #[arg(long, default_value = "/registry")]
    #[arg(help_heading = "Source")]
    etcd_prefix: String,
    /// CA file to verify etcd's certificate.
    #[arg(long)]
    #[arg(help_heading = "Source")]
    etcd_cafile: Option<String>,
    /// Client certificate for etcd.
    #[arg(long)]
    #[arg(help_heading = "Source")]
    etcd_certfile: Option<String>,
    /// Client key for etcd.
    #[arg(long)]
    #[arg(help_heading = "Source")]
    etcd_keyfile: Option<String>,
    /// kube-apiserver's EncryptionConfiguration file (the same file): values it encrypted
    /// at rest (aescbc, aesgcm, secretbox) are decrypted with its keys. kms providers
    /// are not supported.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Source")]
    encryption_provider_config: Option<std::path::PathBuf>,
    /// Address of the Kubernetes HTTP API (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:8080")]
    #[arg(help_heading = "Serving")]
    http_address: SocketAddr,
    /// Address of watchd's gRPC API (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:9090")]
    #[arg(help_heading = "Serving")]
    grpc_address: SocketAddr,
    /// Largest gRPC message: List and Snapshot pages end early (with a continue token)
    /// to stay under it, watch messages close at half of it, a single object larger than
    /// it fails its call (ResourceExhausted), and larger requests are refused. The
    /// default is what gRPC clients accept.
    #[arg(long, value_name = "BYTES", default_value_t = grpc::DEFAULT_MAX_MESSAGE_BYTES, value_parser = parse_message_bytes)]
    #[arg(help_heading = "Serving")]
    grpc_max_message_bytes: usize,
    /// Most gRPC calls (watches) one connection carries at once; more wait for one to
    /// end (as the HTTP/2 API's limit per connection).
    #[arg(long, value_name = "N", default_value_t = config::HTTP2_MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..))]
    #[arg(help_heading = "Serving")]
    grpc_max_concurrent_streams: u32,
    /// How far back watches can resume (e.g. 300s, 5m, 1h).
    #[arg(long, default_value = "5m", value_parser = watchd::config::parse_duration)]
    #[arg(help_heading = "Cache and watches")]
    history_window: Duration,
    /// Most events kept per resource for resuming watches.
    #[arg(long, default_value_t = config::DEFAULT_HISTORY_MAX_EVENTS)]
    #[arg(help_heading = "Cache and watches")]
    history_max_events: usize,
    /// Most past snapshots kept per resource for exact and paginated lists.
    #[arg(long, default_value_t = config::DEFAULT_SNAPSHOT_RING)]
    #[arg(help_heading = "Cache and watches")]
    snapshot_ring: usize,
    /// A resource's selectable field whose exact values index its watchers, so that one
    /// selecting a value (`spec.nodeName=node-1`) is woken by those objects' events only:
    /// RESOURCE:FIELD, RESOURCE as kubectl names it (`pods`, `jobs.batch`); repeatable,
    /// one field per resource. Default: pods:spec.nodeName; giving any replaces it.
    #[arg(long, value_name = "RESOURCE:FIELD", value_delimiter = ',')]
    #[arg(help_heading = "Cache and watches")]
    index_field: Vec<IndexField>,
    /// How often watches that allow bookmarks get one (kube-apiserver: about a minute).
    #[arg(long, default_value = "60s", value_parser = watchd::config::parse_duration)]
    #[arg(help_heading = "Cache and watches")]
    bookmark_interval: Duration,
    /// Hold a watch's first ready event up to this long so that events arriving meanwhile
    /// leave in the same write (fewer syscalls per delivery, at most this much added
    /// latency; e.g. 5ms). 0: every event is written as soon as it is applied.
    #[arg(long, default_value = "0", value_parser = parse_batch_window)]
    #[arg(help_heading = "Cache and watches")]
    watch_batch_window: Duration,
    /// Threads that run watchers' wake passes (and write plain HTTP/1.1 watch frames),
    /// as many shards of connections. One runs them all until the passes keep it busy;
    /// more join as the load needs them and leave when it passes. 0: one per core. At
    /// most 64.
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Cache and watches")]
    dispatch_threads: usize,
    /// The memory limit watchd defends: past 85 % of it, new full lists and new watches
    /// are answered 429 with Retry-After (gRPC: RESOURCE_EXHAUSTED) until the resident
    /// set falls, rather than the process growing until it is killed. Bytes, or
    /// with a suffix (Ki, Mi, Gi, or K, M, G); 0: none. Default: the cgroup's limit
    /// when one is set, else none.
    #[arg(long, value_name = "BYTES", value_parser = parse_memory_bytes)]
    #[arg(help_heading = "Memory")]
    memory_limit: Option<u64>,
    /// The JSON of protobuf-stored objects, rendered on a JSON read and kept for later
    /// readers, is kept up to this many bytes in all: past it, the renderings made
    /// longest ago and not read since are given up (rendered again when read). While
    /// memory is past --memory-limit's soft mark none are kept. Bytes, or with a suffix
    /// as --memory-limit; 0: none kept. Default: a quarter of the memory limit when there
    /// is one, else a quarter of the bytes of the cached objects, and at least 16 MiB.
    #[arg(long, value_name = "BYTES", value_parser = parse_memory_bytes)]
    #[arg(help_heading = "Memory")]
    rendered_json_bytes: Option<u64>,
    /// Close a connection whose peer has read nothing of what was written for this long
    /// (a watch whose client stopped reading; 0: never).
    #[arg(long, default_value = "60s", value_parser = watchd::config::parse_duration)]
    #[arg(help_heading = "Serving")]
    write_timeout: Duration,
    /// After SIGTERM (or Ctrl-C), how long to go on serving while reporting not ready
    /// (`/readyz` fails its `shutdown` check, gRPC health says NOT_SERVING), so that load
    /// balancers and clients move to another replica before the connections end; as
    /// kube-apiserver's flag of that name. 0: stop at once. A second signal stops at once.
    #[arg(long, default_value = "0s", value_parser = watchd::config::parse_duration)]
    #[arg(help_heading = "Shutdown")]
    shutdown_delay_duration: Duration,
    /// After the shutdown delay, end the open watches gradually over this period (each
    /// at its own instant, as a timeout ends it), so their clients watch again elsewhere
    /// over that time rather than all at once; then stop. As kube-apiserver's flag of
    /// that name. 0: the watches end when the server stops.
    #[arg(long, default_value = "0s", value_parser = watchd::config::parse_duration)]
    #[arg(help_heading = "Shutdown")]
    shutdown_watch_termination_grace_period: Duration,
    /// How often each resource's cache is compared with etcd at one revision (the
    /// (key, mod_revision) of every object, etcd read keys only), as kube-apiserver's
    /// cache inconsistency detector; a resource that differs is logged, counted in
    /// watchd_storage_consistency_checks_total and re-listed. 0: never. The etcd source
    /// only.
    #[arg(long, default_value = "5m", value_parser = watchd::config::parse_duration)]
    #[arg(help_heading = "Source")]
    consistency_check_interval: Duration,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    #[arg(help_heading = "General")]
    log_format: LogFormat,
    #[command(flatten)]
    secure: watchd::auth::setup::SecureArgs,
}

/// Why a flag's value is refused (clap prints it with the flag's name).
#[derive(Debug, thiserror::Error)]
enum FlagError {
    /// Not a whole number.
    #[error("{0:?}: {1}")]
    NotANumber(String, #[source] std::num::ParseIntError),
    /// A gRPC message bound too small to carry a page's envelope and a usual object.
    #[error("{0} is less than 65536, the smallest message size")]
    MessageTooSmall(usize),
    /// Not a duration.
    #[error(transparent)]
    Duration(#[from] watchd::config::DurationError),
    /// A byte size with an unknown suffix, or too large.
    #[error(
        "{0:?} is not a size in bytes (a number, optionally with Ki, Mi, Gi, Ti, K, M, G or T)"
    )]
    BadSize(String),
    /// A batch window longer than the longest a watcher can be asked to wait.
    #[error("{0:?} is longer than {max:?}, the longest batch window", max = config::MAX_WATCH_BATCH_WINDOW)]
    BatchWindowTooLong(String),
}

/// Why `watchd serve` cannot start: each names the flag or file and what to do.
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// The memory sampler's thread could not start.
    #[error("--memory-limit: cannot start the memory sampler thread: {0}")]
    MemorySampler(#[source] std::io::Error),
    /// Neither etcd nor an upstream to read.
    #[error("--index-field: {0}")]
    IndexField(String),
    #[error("no data source: give --etcd-servers, or --upstream-url or --upstream-kubeconfig")]
    NoSource,
    /// Decryption asked for without etcd to read encrypted values from.
    #[error(
        "--encryption-provider-config applies to values read from etcd: it needs --etcd-servers"
    )]
    EncryptionWithoutEtcd,
    /// `--upstream-kubeconfig` cannot be read or used.
    #[error("--upstream-kubeconfig {0}")]
    UpstreamKubeconfig(#[source] watchd::client::KubeconfigError),
    /// No client can be made for the upstream's endpoint.
    #[error("upstream: {0}")]
    UpstreamClient(#[source] watchd::client::KubeconfigError),
    /// The dispatch shard threads cannot be started.
    #[error("cannot start {threads} dispatch threads (--dispatch-threads): {source}")]
    Dispatch {
        /// How many were asked for.
        threads: usize,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The Prometheus exporter cannot be installed.
    #[error("metrics: {0}")]
    Metrics(#[from] metrics::MetricsError),
    /// `--encryption-provider-config` cannot be read.
    #[error("reading --encryption-provider-config {}: {source}", path.display())]
    EncryptionUnreadable {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--encryption-provider-config` is not a configuration watchd can use.
    #[error("--encryption-provider-config {}: {source}", path.display())]
    Encryption {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong in it.
        #[source]
        source: watchd::codec::encryption::ConfigError,
    },
    /// Authentication, authorization or TLS flags (or their files).
    #[error(transparent)]
    Security(#[from] watchd::auth::ConfigError),
    /// `--audit-log-path` cannot be opened.
    #[error(transparent)]
    Audit(#[from] watchd::auth::audit::AuditError),
    /// An address cannot be listened on (in use, or not this machine's).
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// `--grpc-max-message-bytes`: at least 64 KiB (room for a List page's envelope and an
/// object of a usual size).
fn parse_message_bytes(s: &str) -> Result<usize, FlagError> {
    let n: usize = s
        .parse()
        .map_err(|e| FlagError::NotANumber(s.to_string(), e))?;
    if n < 64 << 10 {
        return Err(FlagError::MessageTooSmall(n));
    }
    Ok(n)
}

/// `--memory-limit`: bytes, with an optional binary (Ki, Mi, Gi, Ti) or decimal (K, M,
/// G, T) suffix, as Kubernetes quantities write them.
fn parse_memory_bytes(s: &str) -> Result<u64, FlagError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|e| FlagError::NotANumber(s.to_string(), e))?;
    let unit: u64 = match suffix {
        "" => 1,
        "K" | "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return Err(FlagError::BadSize(s.to_string())),
    };
    n.checked_mul(unit)
        .ok_or_else(|| FlagError::BadSize(s.to_string()))
}

/// `--watch-batch-window`: a duration of at most a second (a longer hold would be
/// latency no watcher asked for).
fn parse_batch_window(s: &str) -> Result<Duration, FlagError> {
    let d = watchd::config::parse_duration(s)?;
    if d > config::MAX_WATCH_BATCH_WINDOW {
        return Err(FlagError::BatchWindowTooLong(s.to_string()));
    }
    Ok(d)
}

/// Reads and checks `--encryption-provider-config`; logs its rules (never its keys).
fn load_encryption_config(path: &std::path::Path) -> Result<EncryptionConfig, StartError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| StartError::EncryptionUnreadable {
            path: path.to_path_buf(),
            source,
        })?;
    let config = EncryptionConfig::parse(&text).map_err(|source| StartError::Encryption {
        path: path.to_path_buf(),
        source,
    })?;
    for rule in config.describe() {
        tracing::info!(file = %path.display(), %rule, "encryption at rest");
    }
    Ok(config)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// The upstream API server's client, if one is given.
fn upstream_client(
    args: &ServeArgs,
) -> Result<Option<Arc<watchd::client::upstream::UpstreamClient>>, StartError> {
    let endpoint = match (&args.upstream_url, &args.upstream_kubeconfig) {
        (Some(url), _) => watchd::client::Endpoint {
            server: url.clone(),
            ..Default::default()
        },
        (None, Some(path)) => {
            watchd::client::kubeconfig::load(path).map_err(StartError::UpstreamKubeconfig)?
        }
        (None, None) => return Ok(None),
    };
    let client = watchd::client::upstream::UpstreamClient::new(&endpoint)
        .map_err(StartError::UpstreamClient)?;
    Ok(Some(Arc::new(client)))
}

async fn serve(args: ServeArgs) -> Result<(), StartError> {
    init_logging(args.log_format);
    let upstream = upstream_client(&args)?;
    if args.etcd_servers.is_empty() && upstream.is_none() {
        return Err(StartError::NoSource);
    }
    let from_upstream = args.etcd_servers.is_empty();
    if from_upstream && args.encryption_provider_config.is_some() {
        return Err(StartError::EncryptionWithoutEtcd);
    }
    let prometheus = metrics::install()?;
    metrics::spawn_upkeep(prometheus.clone());
    ::metrics::gauge!("watchd_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    let etcd = EtcdConfig {
        endpoints: args.etcd_servers.clone(),
        ca_file: args.etcd_cafile.clone(),
        cert_file: args.etcd_certfile.clone(),
        key_file: args.etcd_keyfile.clone(),
    };
    let encryption = match &args.encryption_provider_config {
        Some(path) => Some(load_encryption_config(path)?),
        None => None,
    };
    let dispatch_threads = match args.dispatch_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    // Started before the cache: every resource's wake index queues on these shards.
    let dispatch = Dispatch::start(dispatch_threads).map_err(|source| StartError::Dispatch {
        threads: dispatch_threads,
        source,
    })?;
    tracing::info!(
        shards = dispatch.shards(),
        "dispatch shards started: wake passes run off ingestion"
    );
    let index_fields = if args.index_field.is_empty() {
        IndexFields::default()
    } else {
        IndexFields::new(args.index_field.clone()).map_err(StartError::IndexField)?
    };
    let store_config = StoreConfig {
        history_window: args.history_window,
        max_events: args.history_max_events.max(1),
        snapshot_ring: args.snapshot_ring.max(1),
        dispatch,
        index_fields,
    };
    let cache = if from_upstream {
        Cache::per_resource(&args.etcd_prefix, store_config)
    } else {
        Cache::with_encryption(&args.etcd_prefix, store_config, encryption)
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    // Before binding: a refused configuration never opens a port.
    let (security, tls) = watchd::auth::setup::configure(
        &args.secure,
        &cache,
        &[args.http_address, args.grpc_address],
        stop_rx.clone(),
    )?;
    let listener = listen(args.http_address)?;
    let address = local_addr(&listener, args.http_address)?;
    let grpc_listener = listen(args.grpc_address)?;
    let grpc_address = local_addr(&grpc_listener, args.grpc_address)?;
    tracing::info!(http = %address, grpc = %grpc_address, etcd = ?args.etcd_servers, upstream = ?upstream.as_ref().map(|u| u.server().to_string()), proxy = upstream.is_some() && args.proxy, prefix = %args.etcd_prefix, batch_window = ?args.watch_batch_window, "watchd starting");
    raise_fd_limit();
    let (source, reader): (Box<dyn Source>, Arc<dyn SourceReader>) = match &upstream {
        Some(client) if from_upstream => (
            Box::new(UpstreamSource::new(client.clone())),
            Arc::new(UpstreamReader::new(client.clone())),
        ),
        _ => (
            Box::new(EtcdSource {
                config: etcd.clone(),
                check_interval: args.consistency_check_interval,
            }),
            Arc::new(EtcdReader::new(etcd)),
        ),
    };
    let proxy = match &upstream {
        Some(client) if args.proxy => Some(Proxy::new(client.clone(), security.is_some())),
        _ => None,
    };
    let memory_limit = match args.memory_limit {
        Some(n) => n,
        None => watchd::memory::cgroup_limit().unwrap_or(0),
    };
    let rendered = &watchd::store::rendered::RENDERED;
    rendered.set_runtime(tokio::runtime::Handle::current());
    // Byte counts stay below the two sentinels (no budget, following the cache).
    let bytes = |n: u64| usize::try_from(n).map_or(usize::MAX - 2, |n| n.min(usize::MAX - 2));
    match args.rendered_json_bytes {
        None if memory_limit == 0 => {
            rendered.set_limit(watchd::store::rendered::FOLLOW_CACHE);
            tracing::info!(
                share = format!("1/{}", config::RENDERED_JSON_CACHE_SHARE),
                floor = config::RENDERED_JSON_MIN_BYTES,
                "rendered JSON kept up to a share of the cached bytes (--rendered-json-bytes)"
            );
        }
        n => {
            rendered.set_limit(bytes(n.unwrap_or(memory_limit / 4)));
            tracing::info!(
                bytes = rendered.budget(),
                "rendered JSON kept up to this budget (--rendered-json-bytes)"
            );
        }
    }
    let memory = Arc::new(watchd::memory::MemoryGuard::new(memory_limit));
    memory.start().map_err(StartError::MemorySampler)?;
    if memory_limit > 0 {
        tracing::info!(
            limit = memory_limit,
            from = if args.memory_limit.is_some() {
                "--memory-limit"
            } else {
                "cgroup"
            },
            "memory limit: new full lists and watches are refused past 85 % of it"
        );
    }
    let read = Arc::new(ReadContext {
        cache: cache.clone(),
        source: reader,
        bookmark_interval: args.bookmark_interval.max(Duration::from_millis(100)),
        watch_batch_window: args.watch_batch_window,
        memory,
    });
    let state = Arc::new(ApiState {
        read: read.clone(),
        metrics: Some(prometheus),
        address: address.to_string(),
        security: security.clone(),
        audit: match &args.secure.audit_log_path {
            Some(path) => Some(watchd::auth::audit::AuditLog::open(
                path,
                args.secure.audit_log_mode,
                args.secure.audit_log_batch_buffer_size,
            )?),
            None => None,
        },
        write_timeout: args.write_timeout,
        proxy,
    });
    let (shutdown_cache, shutdown_delay, watch_grace) = (
        cache.clone(),
        args.shutdown_delay_duration,
        args.shutdown_watch_termination_grace_period,
    );
    // The servers stop first, the source after them: a request still in flight at the
    // stop (a consistent list waiting for the cache to catch up) is served fresh.
    let (serve_stop_tx, serve_stop_rx) = watch::channel(false);
    let ingest = tokio::spawn(source.run(cache, stop_rx.clone()));
    let grpc = tokio::spawn(grpc::serve(
        grpc_listener,
        read,
        tls.as_ref().map(|t| t.grpc.clone()),
        security,
        args.grpc_max_message_bytes,
        args.grpc_max_concurrent_streams,
        serve_stop_rx.clone(),
    ));
    let server = tokio::spawn(http::serve(
        listener,
        state,
        tls.map(|t| t.http),
        serve_stop_rx,
    ));
    shutdown_signal().await;
    shutdown_cache.begin_shutdown();
    if !shutdown_delay.is_zero() {
        tracing::info!(delay = ?shutdown_delay, "shutting down: reporting not ready, serving on for --shutdown-delay-duration");
        tokio::select! {
            _ = tokio::time::sleep(shutdown_delay) => {}
            _ = shutdown_signal() => {}
        }
    }
    if !watch_grace.is_zero() {
        tracing::info!(grace = ?watch_grace, "shutting down: ending open watches gradually over --shutdown-watch-termination-grace-period");
        shutdown_cache.drain_watches(watch_grace);
        tokio::select! {
            // A moment past the last watch's instant, for its end to be written.
            _ = tokio::time::sleep(watch_grace + Duration::from_millis(200)) => {}
            _ = shutdown_signal() => {}
        }
    }
    tracing::info!("stopping: no new connections; requests in flight finish");
    let _ = serve_stop_tx.send(true);
    let _ = tokio::time::timeout(config::STOP_DRAIN_TIMEOUT + Duration::from_secs(1), async {
        let _ = server.await;
        let _ = grpc.await;
    })
    .await;
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(2), ingest).await;
    tracing::info!("stopped");
    Ok(())
}

/// Listens on `addr` with the largest accept queue the kernel allows (it caps the
/// backlog at `net.core.somaxconn`): thousands of watchers reconnecting at once after a
/// restart must not overflow it, or their connection attempts are retried only after
/// 1, 3 and 7 seconds. tokio's `bind` asks for 1024.
fn listen(addr: SocketAddr) -> Result<TcpListener, StartError> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    };
    let listening = socket.and_then(|s| {
        s.set_reuseaddr(true)?;
        s.bind(addr)?;
        s.listen(config::LISTEN_BACKLOG)
    });
    listening.map_err(|source| StartError::Listen { addr, source })
}

/// The address a listener bound (the port the kernel chose for `:0`).
fn local_addr(listener: &TcpListener, addr: SocketAddr) -> Result<SocketAddr, StartError> {
    listener
        .local_addr()
        .map_err(|source| StartError::Listen { addr, source })
}

/// Raises the soft limit of open files to the hard limit: every watcher over HTTP/1.1 is
/// a socket, and the usual soft limit (1024) would cap watchd at about a thousand of them.
/// The hard limit is what the machine allows an unprivileged process; it is logged, so
/// an operator sees the ceiling before clients hit it.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read the open-files limit");
        return;
    }
    let before = lim.rlim_cur;
    if before < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), soft = before, hard = lim.rlim_max, "cannot raise the open-files limit");
            return;
        }
    }
    tracing::info!(
        from = before,
        to = lim.rlim_cur,
        hard = lim.rlim_max,
        "open-files limit: each HTTP/1.1 watcher holds one; HTTP/2 and gRPC carry up to {} watches per connection",
        watchd::config::HTTP2_MAX_STREAMS
    );
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn main() {
    let command = Cli::command();
    let serve_command = command
        .find_subcommand("serve")
        .expect("the serve subcommand is defined");
    let args =
        match watchd::config_file::expand(std::env::args_os().collect(), "serve", serve_command) {
            Ok(args) => args,
            Err(e) => {
                eprintln!("watchd: {e}");
                // As clap exits for a bad flag.
                std::process::exit(2);
            }
        };
    let cli = Cli::parse_from(args);
    match cli.command {
        Command::Version => println!("watchd {}", env!("CARGO_PKG_VERSION")),
        Command::Serve(args) => {
            let args = *args;
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("watchd: cannot start the runtime: {e}");
                    std::process::exit(1);
                }
            };
            if let Err(e) = rt.block_on(serve(args)) {
                eprintln!("watchd: {e}");
                std::process::exit(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `serve --help` reads on a terminal: wrapped at 100 columns, flags grouped under
    /// headings, every flag under one.
    #[test]
    fn serve_help_is_wrapped_and_grouped() {
        let mut command = Cli::command();
        command.build();
        let serve = command.find_subcommand_mut("serve").unwrap();
        let help = serve.render_long_help().to_string();
        let widest = help.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 100, "a line of {widest} columns");
        for heading in [
            "General:",
            "Source:",
            "Serving:",
            "Cache and watches:",
            "Memory:",
            "Shutdown:",
            "Authentication:",
            "Authorization and limits:",
            "Audit:",
        ] {
            assert!(help.lines().any(|l| l == heading), "no {heading}");
        }
        let ungrouped: Vec<_> = serve
            .get_arguments()
            .filter(|a| a.get_long().is_some_and(|l| l != "help"))
            .filter(|a| a.get_help_heading().is_none())
            .map(|a| a.get_id().to_string())
            .collect();
        assert!(
            ungrouped.is_empty(),
            "flags under no heading: {ungrouped:?}"
        );
    }

    /// The documented example is a configuration `watchd serve` takes: every key one of
    /// its flags, every value one the flag reads.
    #[test]
    fn the_example_config_file_is_read_as_serve_flags() {
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/watchd.yaml");
        let args = ["watchd", "serve", &format!("--config={example}")]
            .map(std::ffi::OsString::from)
            .to_vec();
        let command = Cli::command();
        let serve = command.find_subcommand("serve").unwrap();
        let args = watchd::config_file::expand(args, "serve", serve).unwrap();
        let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{e}"));
        let Command::Serve(serve) = cli.command else {
            panic!("serve");
        };
        assert_eq!(serve.etcd_servers, ["https://127.0.0.1:2379"]);
        assert_eq!(serve.http_address.to_string(), "0.0.0.0:6444");
        assert_eq!(serve.history_window, Duration::from_secs(300));
        assert!(matches!(serve.log_format, LogFormat::Json));
    }
}
