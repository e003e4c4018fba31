//! Connections to watchd's own gRPC API (`proto/watchd.proto`; the client
//! is the one generated in `watchd::api::grpc::pb`): plain-text HTTP/2 (h2c)
//! to the loopback address of a watchd this process started, one
//! connection per [`connect`], whose [`client`]s each carry their calls as
//! streams of it.
//!
//! Like the HTTP/2 client of [`crate::transport`], a connection advertises
//! large flow-control windows, so the generator is never what a stream
//! waits for, and each call's response stream is read by the task that
//! owns it.

use std::net::SocketAddr;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use watchd::api::grpc::pb;
use watchd::api::grpc::pb::watchd_client::WatchdClient;

use crate::http::Accept;
use crate::transport::{H2_CONNECTION_WINDOW, H2_STREAM_WINDOW};

/// The largest message a client decodes: a watch message holds the events
/// ready at once, at most half of watchd's `--grpc-max-message-bytes` unless
/// one object alone is larger; the bound the HTTP watchers put on a
/// protobuf frame (64 MiB).
pub const MAX_MESSAGE_BYTES: usize = crate::http::MAX_FRAME_BYTES;

/// Opens one HTTP/2 connection to watchd's gRPC listener at `addr`
/// (TCP_NODELAY), within `timeout`.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| format!("gRPC endpoint {addr}: {e}"))?
        .connect_timeout(timeout)
        .tcp_nodelay(true)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW);
    tokio::time::timeout(timeout, endpoint.connect())
        .await
        .map_err(|_| format!("gRPC connect {addr}: not connected in {timeout:?}"))?
        .map_err(|e| format!("gRPC connect {addr}: {e}"))
}

/// A client whose calls go as streams on `channel`'s connection.
pub fn client(channel: Channel) -> WatchdClient<Channel> {
    WatchdClient::new(channel).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// Every ConfigMap, in all namespaces (`/api/v1/configmaps`).
pub fn configmaps() -> pb::Collection {
    pb::Collection {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
        namespace: String::new(),
    }
}

/// The object encoding that matches the HTTP watchers' `Accept`.
pub fn encoding(accept: Accept) -> pb::Encoding {
    match accept {
        Accept::Json => pb::Encoding::Json,
        Accept::Protobuf => pb::Encoding::Protobuf,
    }
}

/// A gRPC status as text: `<code>: <message>`.
pub fn status_text(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// The revision of a consistent list of every ConfigMap (one object is
/// enough: only the list's revision is used).
pub async fn list_revision(
    client: &mut WatchdClient<Channel>,
    timeout: Duration,
) -> Result<i64, String> {
    let req = pb::ListRequest {
        collection: Some(configmaps()),
        limit: 1,
        ..Default::default()
    };
    let resp = tokio::time::timeout(timeout, client.list(req))
        .await
        .map_err(|_| format!("gRPC List configmaps: no answer in {timeout:?}"))?
        .map_err(|s| format!("gRPC List configmaps: {}", status_text(&s)))?;
    Ok(resp.into_inner().resource_version)
}

/// The `Watch` request of every ConfigMap after revision `base`, objects in
/// `encoding`: what the HTTP watchers ask with
/// `/api/v1/configmaps?watch=1&resourceVersion=<base>`.
pub fn watch_request(base: i64, encoding: pb::Encoding) -> pb::WatchRequest {
    pb::WatchRequest {
        collection: Some(configmaps()),
        resource_version: base.to_string(),
        encoding: encoding as i32,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_ask_what_the_http_watchers_ask() {
        let w = watch_request(42, encoding(Accept::Protobuf));
        let c = w.collection.as_ref().unwrap();
        assert_eq!(
            (c.group.as_str(), c.version.as_str(), c.resource.as_str()),
            ("", "v1", "configmaps")
        );
        assert!(c.namespace.is_empty(), "all namespaces");
        assert_eq!(w.resource_version, "42");
        assert_eq!(w.encoding, pb::Encoding::Protobuf as i32);
        assert_eq!(w.send_initial_events, None);
        assert!(!w.allow_watch_bookmarks && w.label_selector.is_empty());
        assert_eq!(encoding(Accept::Json), pb::Encoding::Json);
        let s = tonic::Status::not_found("no resource");
        assert_eq!(status_text(&s), "NotFound: no resource");
    }
}
