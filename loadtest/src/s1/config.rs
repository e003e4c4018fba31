//! The settings of one S1 run ([`S1Config`]): the server under test, the
//! load, the storage and media type, and the transport of the watchers
//! (target URL, TLS, token, HTTP/1.1 or HTTP/2 and how many streams share a
//! connection, the client-go informer's HTTPS + token + RBAC + protobuf, or
//! watchd's own gRPC API: [`WatchProtocol`]), with the rules that refuse
//! what cannot run or would not compare fairly.

use std::path::PathBuf;
use std::time::Duration;

use super::protocol::{WatchApi, WatchProtocol, GRPC_WATCHD, INFORMER};
use super::report::Multiplexing;
use crate::demo::Storage;
use crate::endpoint::{Protocol, Scheme, TargetUrl, TokenSource};
use crate::http::Accept;
use crate::launch;
use crate::tls::TlsOptions;

/// Which server the watchers talk to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// HTTP watches on watchd (started by the run, or any Kubernetes API
    /// endpoint given as `target_url`).
    Watchd,
    /// gRPC watches on etcd itself.
    Etcd,
}

impl Target {
    /// The name used in results.
    pub fn name(self) -> &'static str {
        match self {
            Target::Watchd => "watchd",
            Target::Etcd => "etcd",
        }
    }
}

/// The most HTTP/2 streams per connection `streams_per_connection` may ask
/// for: watchd's limit of concurrent streams on a connection (HTTP/2 and
/// gRPC alike: `--grpc-max-concurrent-streams` defaults to the same 1000).
pub const MAX_STREAMS_PER_CONNECTION: usize = 1000;

/// Settings of one S1 run.
#[derive(Clone, Debug)]
pub struct S1Config {
    /// Server under test.
    pub target: Target,
    /// Watch streams.
    pub watchers: usize,
    /// Writes per second.
    pub writes_per_sec: f64,
    /// Length of the write phase.
    pub duration: Duration,
    /// Approximate JSON size of each object (also when stored as protobuf).
    pub object_bytes: usize,
    /// How the writer stores the ConfigMaps in etcd (default JSON, unlike
    /// the demo: results stay comparable with the earlier JSON-only ones).
    pub storage: Storage,
    /// What the watchd watchers ask for; protobuf needs protobuf storage
    /// (watchd serves protobuf only for objects stored so). Not used by the
    /// etcd target, whose watchers get the stored values.
    pub accept: Accept,
    /// Namespaces the objects are spread over.
    pub namespace_count: usize,
    /// Distinct objects, rewritten round-robin.
    pub objects: usize,
    /// Use this etcd instead of starting one.
    pub etcd_servers: Option<Vec<String>>,
    /// Use this Kubernetes API endpoint (`http://` or `https://`, watchd or
    /// kube-apiserver) instead of starting a watchd.
    pub target_url: Option<String>,
    /// How the HTTP target's server is verified (`https://` only).
    pub tls: TlsOptions,
    /// The bearer token every request to the HTTP target carries.
    pub token: Option<TokenSource>,
    /// HTTP/1.1 (a connection per watcher) or HTTP/2 (multiplexed). For
    /// the etcd target, `Http2` means "multiplexed as the HTTP/2 watchers
    /// are": `streams_per_connection` gRPC streams per connection, instead
    /// of `etcd_connections`. With `api` gRPC, always `Http2`.
    pub protocol: Protocol,
    /// watchd's HTTP API or its gRPC API (the watchd target only); set
    /// with `protocol` by [`S1Config::set_watch_protocol`].
    pub api: WatchApi,
    /// The watchers are client-go informers (`--protocol=informer`): HTTPS
    /// with ALPN h2, a bearer token, protobuf (`accept` and `storage` must
    /// say so). Without `target_url` the run starts watchd with TLS, a
    /// static token file and `--authorization-mode=RBAC`, and writes the
    /// RBAC objects that let the informer's user watch configmaps
    /// ([`super::informer`]). Set by [`S1Config::set_watch_protocol`].
    pub informer: bool,
    /// With HTTP/2, the most watch streams on one connection: W watchers
    /// use ceil(W / this) connections.
    pub streams_per_connection: usize,
    /// PID of the external server, for CPU and memory figures.
    pub server_pid: Option<u32>,
    /// The watchd binary to start.
    pub watchd_bin: PathBuf,
    /// Extra arguments of the watchd the run starts.
    pub watchd_args: Vec<String>,
    /// gRPC connections the etcd watches are spread over.
    pub etcd_connections: usize,
    /// Longest wait for the watchers to catch up after the last write.
    pub drain_timeout: Duration,
    /// Where temp data dirs go.
    pub temp_root: PathBuf,
    /// etcd key prefix (kube-apiserver's `--etcd-prefix`).
    pub prefix: String,
}

impl S1Config {
    /// Defaults for `target` with `watchers` × `writes_per_sec` for `duration`.
    pub fn new(target: Target, watchers: usize, writes_per_sec: f64, duration: Duration) -> Self {
        Self {
            target,
            watchers,
            writes_per_sec,
            duration,
            object_bytes: 1024,
            storage: Storage::Json,
            accept: Accept::Json,
            namespace_count: 10,
            objects: 100,
            etcd_servers: None,
            target_url: None,
            tls: TlsOptions::default(),
            token: None,
            protocol: Protocol::Http1,
            api: WatchApi::Http,
            informer: false,
            streams_per_connection: 100,
            server_pid: None,
            watchd_bin: launch::default_watchd_bin(),
            watchd_args: Vec::new(),
            etcd_connections: 4,
            drain_timeout: Duration::from_secs(15),
            temp_root: std::env::temp_dir(),
            prefix: "/registry".to_string(),
        }
    }

    /// Sets `protocol`, `api` and `informer` as `--protocol` names them;
    /// an informer asks for protobuf (`accept`; the storage is the
    /// caller's, see [`S1Config::validate`]).
    pub fn set_watch_protocol(&mut self, p: WatchProtocol) {
        self.protocol = p.http();
        self.api = p.api();
        self.informer = p == WatchProtocol::Informer;
        if self.informer {
            self.accept = Accept::Protobuf;
        }
    }

    /// `protocol`, `api` and `informer` as `--protocol` names them.
    pub fn watch_protocol(&self) -> WatchProtocol {
        match self.api {
            WatchApi::Grpc => WatchProtocol::GrpcWatchd,
            WatchApi::Http if self.informer => WatchProtocol::Informer,
            WatchApi::Http => self.protocol.into(),
        }
    }

    /// Rejects settings that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.watchers == 0 || self.watchers > 100_000 {
            return Err("--watchers must be 1..=100000".into());
        }
        if !(self.writes_per_sec > 0.0 && self.writes_per_sec <= 100_000.0) {
            return Err("--writes-per-sec must be in (0, 100000]".into());
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return Err("--duration must be 1..=3600 s".into());
        }
        if self.objects == 0 || self.namespace_count == 0 {
            return Err("--objects and --namespace-count must be positive".into());
        }
        if self.object_bytes > 1 << 20 {
            return Err("--object-bytes must be at most 1 MiB".into());
        }
        if !(1..=MAX_STREAMS_PER_CONNECTION).contains(&self.streams_per_connection) {
            return Err(format!(
                "--streams-per-connection must be 1..={MAX_STREAMS_PER_CONNECTION} (watchd \
                 allows at most 1000 concurrent streams on a connection)"
            ));
        }
        if self.etcd_connections == 0 {
            return Err("--etcd-connections must be positive".into());
        }
        self.check_grpc()?;
        self.check_informer()?;
        self.check_http_target()?;
        if self.accept == Accept::Protobuf {
            if self.target == Target::Etcd {
                return Err(
                    "--accept=protobuf applies to watchd's watch streams only: etcd \
                     watchers receive the values as stored (use --storage=protobuf)"
                        .into(),
                );
            }
            if self.storage != Storage::Protobuf {
                return Err("--accept=protobuf needs --storage=protobuf: watchd serves \
                     protobuf only for objects stored as protobuf"
                    .into());
            }
        }
        Ok(())
    }

    /// watchd's gRPC API: on the watchd this run starts (whose gRPC address
    /// it knows), over HTTP/2.
    fn check_grpc(&self) -> Result<(), String> {
        if self.api != WatchApi::Grpc {
            return Ok(());
        }
        if self.target == Target::Etcd {
            return Err(format!(
                "--protocol={GRPC_WATCHD} is watchd's gRPC API: etcd direct speaks etcd's \
                 gRPC already (--protocol=http2 multiplexes it like the gRPC watchers)"
            ));
        }
        if self.target_url.is_some() {
            return Err(format!(
                "--protocol={GRPC_WATCHD} needs the watchd this run starts (its gRPC \
                 listener on 127.0.0.1): --target-url names an HTTP API only"
            ));
        }
        if self.protocol != Protocol::Http2 {
            return Err("watchd's gRPC API runs over HTTP/2 only".into());
        }
        Ok(())
    }

    /// The informer: watchd's HTTP API over HTTPS (ALPN h2), with
    /// credentials, asking for protobuf, which watchd serves only for
    /// objects stored so.
    fn check_informer(&self) -> Result<(), String> {
        if !self.informer {
            return Ok(());
        }
        if self.target == Target::Etcd || self.api != WatchApi::Http {
            return Err(format!(
                "--protocol={INFORMER} watches watchd's HTTP API (etcd direct and watchd's gRPC \
                 API have their own sides)"
            ));
        }
        if self.protocol != Protocol::Http2 {
            return Err(format!(
                "--protocol={INFORMER} runs over HTTP/2 (ALPN h2), as client-go does"
            ));
        }
        if self.accept != Accept::Protobuf {
            return Err(format!(
                "--protocol={INFORMER} asks for protobuf (Accept: \
                 application/vnd.kubernetes.protobuf), as client-go's informers of built-in kinds"
            ));
        }
        if self.storage != Storage::Protobuf {
            return Err(format!(
                "--protocol={INFORMER} needs --storage=protobuf: watchd serves protobuf only for \
                 objects stored as protobuf (drop --storage=json; protobuf is implied)"
            ));
        }
        if let Some(url) = &self.target_url {
            if TargetUrl::parse(url)?.scheme != Scheme::Https {
                return Err(format!(
                    "--protocol={INFORMER} speaks HTTPS: the target {url} is not https://"
                ));
            }
            if self.token.is_none() && self.tls.client_cert.is_none() {
                return Err(format!(
                    "--protocol={INFORMER} authenticates: give --token, --token-file or a \
                     kubeconfig user with a token or a client certificate"
                ));
            }
        }
        Ok(())
    }

    /// The target URL, TLS and token settings: for the HTTP target only,
    /// and consistent with the URL's scheme.
    fn check_http_target(&self) -> Result<(), String> {
        let given = self.target_url.is_some()
            || self.tls.is_set()
            || self.tls.kubeconfig.is_some()
            || self.token.is_some();
        match (self.target, &self.target_url) {
            (Target::Etcd, _) if given => Err(
                "--target-url, --kubeconfig, --ca-file, --insecure-skip-tls-verify and --token \
                 apply to the HTTP target (--target=watchd), not to etcd direct"
                    .into(),
            ),
            (Target::Etcd, _) => Ok(()),
            (Target::Watchd, None) if given => Err(
                "--ca-file, --insecure-skip-tls-verify and --token need a --target-url \
                 (the watchd this run starts serves plain HTTP without authentication, \
                 or, with --protocol=informer, the TLS and token the run makes)"
                    .into(),
            ),
            (Target::Watchd, None) => Ok(()),
            (Target::Watchd, Some(url)) => self.tls.check_for(TargetUrl::parse(url)?.scheme),
        }
    }

    /// How the watch streams are carried: protocol, connections, most
    /// streams on one connection, TLS.
    pub fn multiplexing(&self) -> Multiplexing {
        let w = self.watchers.max(1);
        let per_connection = |connections: usize| w.div_ceil(connections);
        let multiplexed = w.div_ceil(self.streams_per_connection.max(1));
        match (self.target, self.protocol) {
            // gRPC calls dealt over HTTP/2 connections as the HTTP/2
            // watchers' streams are; plain TCP (the run's own watchd).
            (Target::Watchd, _) if self.api == WatchApi::Grpc => Multiplexing {
                protocol: GRPC_WATCHD.into(),
                connections: multiplexed,
                streams_per_connection: per_connection(multiplexed),
                tls: false,
            },
            // HTTPS always: the run's own watchd serves TLS for it, a given
            // target must be https://.
            (Target::Watchd, _) if self.informer => Multiplexing {
                protocol: INFORMER.into(),
                connections: multiplexed,
                streams_per_connection: per_connection(multiplexed),
                tls: true,
            },
            (Target::Watchd, Protocol::Http1) => Multiplexing {
                protocol: "http1".into(),
                connections: w,
                streams_per_connection: 1,
                tls: self.is_tls(),
            },
            (Target::Watchd, Protocol::Http2) => Multiplexing {
                protocol: "http2".into(),
                connections: multiplexed,
                streams_per_connection: per_connection(multiplexed),
                tls: self.is_tls(),
            },
            (Target::Etcd, protocol) => {
                let connections = match protocol {
                    Protocol::Http1 => self.etcd_connections.clamp(1, w),
                    Protocol::Http2 => multiplexed,
                };
                Multiplexing {
                    protocol: "grpc".into(),
                    connections,
                    streams_per_connection: per_connection(connections),
                    tls: false,
                }
            }
        }
    }

    fn is_tls(&self) -> bool {
        self.target_url
            .as_deref()
            .and_then(|u| TargetUrl::parse(u).ok())
            .is_some_and(|u| u.scheme == Scheme::Https)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_and_accept_combinations_validate() {
        let cfg = |target, storage, accept| {
            let mut c = S1Config::new(target, 1, 1.0, Duration::from_secs(1));
            c.storage = storage;
            c.accept = accept;
            c.validate()
        };
        let new = S1Config::new(Target::Watchd, 1, 1.0, Duration::from_secs(1));
        assert_eq!(
            (new.storage, new.accept),
            (Storage::Json, Accept::Json),
            "JSON by default, as the recorded results"
        );
        for storage in [Storage::Json, Storage::Protobuf] {
            assert!(cfg(Target::Watchd, storage, Accept::Json).is_ok());
            assert!(cfg(Target::Etcd, storage, Accept::Json).is_ok());
        }
        assert!(cfg(Target::Watchd, Storage::Protobuf, Accept::Protobuf).is_ok());
        let e = cfg(Target::Watchd, Storage::Json, Accept::Protobuf).unwrap_err();
        assert!(e.contains("--storage=protobuf"), "{e}");
        let e = cfg(Target::Etcd, Storage::Protobuf, Accept::Protobuf).unwrap_err();
        assert!(e.contains("watchd"), "{e}");
    }
}

#[cfg(test)]
mod transport_tests {
    use super::*;

    fn cfg(target: Target, watchers: usize, protocol: Protocol, per_conn: usize) -> S1Config {
        let mut c = S1Config::new(target, watchers, 1.0, Duration::from_secs(1));
        c.protocol = protocol;
        c.streams_per_connection = per_conn;
        c
    }

    fn shape(m: &Multiplexing) -> (&str, usize, usize, bool) {
        (
            m.protocol.as_str(),
            m.connections,
            m.streams_per_connection,
            m.tls,
        )
    }

    #[test]
    fn multiplexing_follows_the_protocol_on_both_targets() {
        let m = |t, w, p, n| cfg(t, w, p, n).multiplexing();
        use Protocol::{Http1, Http2};
        use Target::{Etcd, Watchd};
        assert_eq!(
            shape(&m(Watchd, 1000, Http1, 100)),
            ("http1", 1000, 1, false)
        );
        assert_eq!(
            shape(&m(Watchd, 1000, Http2, 100)),
            ("http2", 10, 100, false)
        );
        // 250 over ceil(250/100) = 3 connections, dealt round-robin.
        assert_eq!(shape(&m(Watchd, 250, Http2, 100)), ("http2", 3, 84, false));
        assert_eq!(shape(&m(Watchd, 5, Http2, 100)), ("http2", 1, 5, false));
        // etcd direct: --etcd-connections (4) unless multiplexed like HTTP/2.
        assert_eq!(shape(&m(Etcd, 1000, Http1, 100)), ("grpc", 4, 250, false));
        assert_eq!(shape(&m(Etcd, 2, Http1, 100)), ("grpc", 2, 1, false));
        assert_eq!(shape(&m(Etcd, 1000, Http2, 100)), ("grpc", 10, 100, false));
        assert_eq!(shape(&m(Etcd, 250, Http2, 100)), ("grpc", 3, 84, false));
        let mut tls = cfg(Watchd, 10, Http2, 100);
        tls.target_url = Some("https://127.0.0.1:6443".into());
        assert!(tls.multiplexing().tls);
        assert_eq!(
            tls.multiplexing().to_string(),
            "HTTP/2 over TLS, 1 connection x <=10 streams"
        );
        assert_eq!(
            m(Watchd, 3, Http1, 100).to_string(),
            "HTTP/1.1, 3 connections x 1 stream"
        );
    }

    #[test]
    fn streams_per_connection_and_http_target_settings_validate() {
        use Protocol::Http2;
        assert!(cfg(Target::Watchd, 10, Http2, 1).validate().is_ok());
        assert!(cfg(Target::Watchd, 10, Http2, 1000).validate().is_ok());
        for bad in [0, 1001] {
            let e = cfg(Target::Watchd, 10, Http2, bad).validate().unwrap_err();
            assert!(e.contains("--streams-per-connection"), "{e}");
        }
        let with = |target, url: Option<&str>, tls: TlsOptions, token: bool| {
            let mut c = cfg(target, 1, Http2, 100);
            c.target_url = url.map(String::from);
            c.tls = tls;
            c.token = token.then(|| TokenSource::Inline("t".into()));
            c.validate()
        };
        let ca = TlsOptions {
            ca_file: Some("ca.pem".into()),
            ..TlsOptions::default()
        };
        let none = TlsOptions::default();
        let https = Some("https://127.0.0.1:6443");
        assert!(with(Target::Watchd, https, ca.clone(), true).is_ok());
        assert!(with(
            Target::Watchd,
            Some("http://127.0.0.1:8080"),
            none.clone(),
            true
        )
        .is_ok());
        let e = with(Target::Watchd, https, none.clone(), false).unwrap_err();
        assert!(e.contains("--ca-file"), "{e}");
        let e = with(
            Target::Watchd,
            Some("http://127.0.0.1:8080"),
            ca.clone(),
            false,
        );
        assert!(e.unwrap_err().contains("https://"));
        let e = with(Target::Watchd, Some("ftp://x"), none.clone(), false).unwrap_err();
        assert!(e.contains("only http and https"), "{e}");
        let e = with(Target::Watchd, None, none.clone(), true).unwrap_err();
        assert!(e.contains("need a --target-url"), "{e}");
        let e = with(Target::Etcd, https, ca, false).unwrap_err();
        assert!(e.contains("not to etcd direct"), "{e}");
        assert!(with(Target::Etcd, None, none, false).is_ok());
    }
}

#[cfg(test)]
mod grpc_tests {
    use super::*;

    fn grpc(watchers: usize, per_conn: usize) -> S1Config {
        let mut c = S1Config::new(Target::Watchd, watchers, 1.0, Duration::from_secs(1));
        c.set_watch_protocol(WatchProtocol::GrpcWatchd);
        c.streams_per_connection = per_conn;
        c
    }

    #[test]
    fn grpc_watchd_is_multiplexed_like_http2() {
        let shape = |c: &S1Config| {
            let m = c.multiplexing();
            (m.protocol, m.connections, m.streams_per_connection, m.tls)
        };
        assert_eq!(
            shape(&grpc(1000, 100)),
            (GRPC_WATCHD.to_string(), 10, 100, false)
        );
        assert_eq!(
            shape(&grpc(250, 100)),
            (GRPC_WATCHD.to_string(), 3, 84, false)
        );
        assert_eq!(shape(&grpc(5, 2)), (GRPC_WATCHD.to_string(), 3, 2, false));
        assert_eq!(
            grpc(1000, 100).multiplexing().to_string(),
            "watchd gRPC (h2c), 10 connections x <=100 streams"
        );
    }

    #[test]
    fn grpc_watchd_needs_the_run_s_own_watchd() {
        assert!(grpc(10, 100).validate().is_ok());
        let mut c = grpc(10, 100);
        c.target = Target::Etcd;
        let e = c.validate().unwrap_err();
        assert!(e.contains("etcd direct"), "{e}");
        let mut c = grpc(10, 100);
        c.target_url = Some("http://127.0.0.1:8080".into());
        let e = c.validate().unwrap_err();
        assert!(e.contains("--target-url"), "{e}");
        let mut c = grpc(10, 100);
        c.protocol = Protocol::Http1;
        assert!(c.validate().unwrap_err().contains("HTTP/2"));
        for bad in [0, 1001] {
            let e = grpc(10, bad).validate().unwrap_err();
            assert!(e.contains("--streams-per-connection"), "{e}");
        }
        // The encoding follows --accept, with the HTTP API's rule.
        let mut c = grpc(10, 100);
        c.accept = Accept::Protobuf;
        assert!(c.validate().unwrap_err().contains("--storage=protobuf"));
        c.storage = Storage::Protobuf;
        assert!(c.validate().is_ok());
    }
}

#[cfg(test)]
mod informer_tests {
    use super::*;

    fn informer(watchers: usize, per_conn: usize) -> S1Config {
        let mut c = S1Config::new(Target::Watchd, watchers, 1.0, Duration::from_secs(1));
        c.storage = Storage::Protobuf;
        c.set_watch_protocol(WatchProtocol::Informer);
        c.streams_per_connection = per_conn;
        c
    }

    #[test]
    fn an_informer_is_https_h2_and_protobuf_multiplexed_like_http2() {
        let c = informer(250, 100);
        assert!(c.validate().is_ok(), "{:?}", c.validate());
        assert_eq!((c.protocol, c.accept), (Protocol::Http2, Accept::Protobuf));
        let m = c.multiplexing();
        assert_eq!(
            (
                m.protocol.as_str(),
                m.connections,
                m.streams_per_connection,
                m.tls
            ),
            (INFORMER, 3, 84, true)
        );
        assert_eq!(
            m.to_string(),
            "informer (HTTP/2 over TLS, protobuf), 3 connections x <=84 streams"
        );
    }

    #[test]
    fn what_an_informer_cannot_be_is_refused() {
        let mut c = informer(10, 100);
        c.storage = Storage::Json;
        assert!(c.validate().unwrap_err().contains("--storage=protobuf"));
        let mut c = informer(10, 100);
        c.accept = Accept::Json;
        assert!(c.validate().unwrap_err().contains("asks for protobuf"));
        let mut c = informer(10, 100);
        c.target = Target::Etcd;
        assert!(c.validate().is_err());
        // A given target: https:// and credentials.
        let mut c = informer(10, 100);
        c.target_url = Some("http://127.0.0.1:8080".into());
        assert!(c.validate().unwrap_err().contains("not https://"));
        c.target_url = Some("https://127.0.0.1:6443".into());
        c.tls.insecure_skip_verify = true;
        assert!(c.validate().unwrap_err().contains("authenticates"));
        c.token = Some(TokenSource::Inline("t".into()));
        assert!(c.validate().is_ok());
        // The TLS and token of the run's own watchd are the run's.
        let mut c = informer(10, 100);
        c.token = Some(TokenSource::Inline("t".into()));
        assert!(c.validate().unwrap_err().contains("need a --target-url"));
    }
}
