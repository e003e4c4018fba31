//! How the watchd watchers reach watchd ([`WatchProtocol`]): its Kubernetes
//! HTTP API over HTTP/1.1 or HTTP/2, as a client-go informer does (HTTPS
//! with ALPN h2, a bearer token, RBAC, protobuf), or its own gRPC API
//! ([`WatchApi`]), with the names flags, results and ratio labels give them.

use crate::endpoint::Protocol;

/// The protocol label of watchd's gRPC API in flags, results and ratio
/// labels. Not `grpc`: that label is etcd direct's (etcd's own gRPC API).
pub const GRPC_WATCHD: &str = "grpc-watchd";
/// The protocol label of the informer watchers (HTTPS, ALPN h2, a bearer
/// token, RBAC, protobuf).
pub const INFORMER: &str = "informer";

/// Which of watchd's APIs the watchd watchers use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WatchApi {
    /// The Kubernetes HTTP API: `GET /api/v1/configmaps?watch=1`, over
    /// HTTP/1.1 or HTTP/2 as `S1Config::protocol` says.
    #[default]
    Http,
    /// watchd's own gRPC API (`proto/watchd.proto`): one server-streaming
    /// `Watch` call per watcher, the calls dealt over ceil(W /
    /// streams-per-connection) HTTP/2 connections.
    Grpc,
}

/// How the watchers reach watchd, as `--protocol` and `--protocols` name
/// it: its Kubernetes HTTP API over HTTP/1.1 (`http1`) or HTTP/2 (`http2`),
/// as a client-go informer (`informer`), or its own gRPC API
/// (`grpc-watchd`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WatchProtocol {
    /// The HTTP API, one connection per watcher.
    #[default]
    Http1,
    /// The HTTP API, the watchers multiplexed as HTTP/2 streams.
    Http2,
    /// The gRPC API, the watchers multiplexed as gRPC calls (HTTP/2 streams).
    GrpcWatchd,
    /// The HTTP API as a client-go informer reaches it: HTTPS with ALPN h2
    /// (the watchers multiplexed as streams, like `Http2`), a bearer token
    /// (or a kubeconfig's client certificate), RBAC on in watchd, and
    /// `Accept: application/vnd.kubernetes.protobuf`.
    Informer,
}

impl WatchProtocol {
    /// Every protocol, in the order of the comparison's columns.
    pub const ALL: [WatchProtocol; 4] = [
        WatchProtocol::Http1,
        WatchProtocol::Http2,
        WatchProtocol::GrpcWatchd,
        WatchProtocol::Informer,
    ];

    /// The name used in flags, results and ratio labels.
    pub fn name(self) -> &'static str {
        match self {
            WatchProtocol::Http1 => "http1",
            WatchProtocol::Http2 => "http2",
            WatchProtocol::GrpcWatchd => GRPC_WATCHD,
            WatchProtocol::Informer => INFORMER,
        }
    }

    /// The column heading of a watchd side with this protocol.
    pub fn side_name(self) -> String {
        match self {
            WatchProtocol::GrpcWatchd => "watchd grpc".into(),
            p => format!("watchd {}", p.name()),
        }
    }

    /// Which API of watchd.
    pub fn api(self) -> WatchApi {
        match self {
            WatchProtocol::GrpcWatchd => WatchApi::Grpc,
            _ => WatchApi::Http,
        }
    }

    /// The HTTP version of the connections (gRPC runs over HTTP/2).
    pub fn http(self) -> Protocol {
        match self {
            WatchProtocol::Http1 => Protocol::Http1,
            WatchProtocol::Http2 | WatchProtocol::GrpcWatchd | WatchProtocol::Informer => {
                Protocol::Http2
            }
        }
    }

    /// Whether the watchers are streams sharing connections (etcd direct is
    /// then multiplexed the same way in a comparison:
    /// [`WatchProtocol::etcd_direct_beside`]).
    pub fn multiplexed(self) -> bool {
        self.http() == Protocol::Http2
    }

    /// How etcd direct is carried beside watchd over `watchd`: multiplexed
    /// like HTTP/2 when any of them is (HTTP/2, the informer, watchd's gRPC
    /// API), so that
    /// the comparison is fair; else as with HTTP/1.1, over
    /// `--etcd-connections`.
    pub fn etcd_direct_beside(watchd: &[WatchProtocol]) -> WatchProtocol {
        if watchd.iter().any(|p| p.multiplexed()) {
            WatchProtocol::Http2
        } else {
            WatchProtocol::Http1
        }
    }
}

impl From<Protocol> for WatchProtocol {
    fn from(p: Protocol) -> Self {
        match p {
            Protocol::Http1 => WatchProtocol::Http1,
            Protocol::Http2 => WatchProtocol::Http2,
        }
    }
}

impl std::fmt::Display for WatchProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WatchProtocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "http1" => Ok(WatchProtocol::Http1),
            "http2" => Ok(WatchProtocol::Http2),
            GRPC_WATCHD => Ok(WatchProtocol::GrpcWatchd),
            INFORMER => Ok(WatchProtocol::Informer),
            "grpc" => Err(format!(
                "unknown protocol \"grpc\": etcd direct is the etcd baseline's gRPC; \
                 watchd's gRPC API is {GRPC_WATCHD}"
            )),
            _ => Err(format!(
                "unknown protocol {s:?}: expected http1, http2, {GRPC_WATCHD} or {INFORMER}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::s1::config::{S1Config, Target};

    #[test]
    fn watch_protocols_parse_by_name_and_map_to_api_and_http_version() {
        for p in WatchProtocol::ALL {
            assert_eq!(p.name().parse::<WatchProtocol>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
            let mut c = S1Config::new(Target::Watchd, 1, 1.0, Duration::from_secs(1));
            c.set_watch_protocol(p);
            assert_eq!(c.watch_protocol(), p);
        }
        use WatchProtocol::{GrpcWatchd, Http1, Http2, Informer};
        assert_eq!(
            (Informer.api(), Informer.http(), Informer.side_name()),
            (WatchApi::Http, Protocol::Http2, "watchd informer".into())
        );
        assert!(Informer.multiplexed());
        assert_eq!(
            (GrpcWatchd.api(), GrpcWatchd.http()),
            (WatchApi::Grpc, Protocol::Http2)
        );
        assert_eq!(
            (Http2.api(), Http2.http()),
            (WatchApi::Http, Protocol::Http2)
        );
        assert_eq!(
            [Http1, Http2, GrpcWatchd].map(WatchProtocol::multiplexed),
            [false, true, true]
        );
        assert_eq!(
            [Http1, Http2, GrpcWatchd].map(WatchProtocol::side_name),
            ["watchd http1", "watchd http2", "watchd grpc"]
        );
        assert_eq!(WatchProtocol::from(Protocol::Http2), Http2);
        assert_eq!(WatchProtocol::default(), Http1);
        // "grpc" is etcd direct's label: refused, pointing at the right name.
        let e = "grpc".parse::<WatchProtocol>().unwrap_err();
        assert!(e.contains(GRPC_WATCHD), "{e}");
        let e = "h3".parse::<WatchProtocol>().unwrap_err();
        assert!(e.contains("http1, http2, grpc-watchd or informer"), "{e}");
    }

    #[test]
    fn etcd_direct_is_multiplexed_when_any_watchd_protocol_is() {
        use WatchProtocol::{GrpcWatchd, Http1, Http2, Informer};
        let beside = WatchProtocol::etcd_direct_beside;
        assert_eq!(beside(&[Http1]), Http1);
        assert_eq!(beside(&[Http1, Informer]), Http2);
        assert_eq!(beside(&[Http1, Http2]), Http2);
        assert_eq!(beside(&[GrpcWatchd]), Http2);
        assert_eq!(beside(&[]), Http1);
    }
}
