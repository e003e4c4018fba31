//! Where the cache's data comes from, behind two seams:
//!
//! - [`Source`] feeds the store: it fills the cache (an initial state, then changes in
//!   order) until shutdown, through the single writer, [`crate::store::ingest::Ingestor`].
//! - [`SourceReader`] answers what request handlers ask of the source: the revision a
//!   consistent read must wait for, and reads of resources whose cache is not ready.
//!
//! Two sources implement them: etcd (`etcd.rs`: kube-apiserver's storage, one watch of
//! the whole keyspace, so one applied revision for every resource) and an upstream
//! Kubernetes API server (`upstream/`: kube-apiserver or another watchd, one list and
//! watch per resource, so each resource has its own applied revision).
//!
//! Two errors: [`ReadError`] is what the read path is answered (and maps to a Status);
//! [`SourceError`] is what failed on the way, the cause a follower logs before it
//! reconnects, and the cause of a [`ReadError::Failed`].

pub mod client;
pub mod consistency;
pub mod etcd;
pub mod reflector;
mod revision_flight;
#[cfg(feature = "test-hooks")]
mod test_hooks;
pub mod upstream;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::client::CallError;
use crate::store::{Cache, ResourceStore};
use crate::Revision;
pub use client::{EtcdClient, EtcdConfig};
pub use etcd::{current_revision, EtcdReader, EtcdSource};

/// A boxed future, as the source traits return them (they are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Feeds the cache: loads it, then applies changes in order, until `shutdown` turns true.
/// It marks the cache synced once every resource it serves is loaded, and the watch live
/// while its change streams are up (`/readyz`).
pub trait Source: Send {
    /// Runs until `shutdown` turns true.
    fn run(
        self: Box<Self>,
        cache: Arc<Cache>,
        shutdown: watch::Receiver<bool>,
    ) -> BoxFuture<'static, ()>;
}

/// The questions the read path asks of the source.
pub trait SourceReader: Send + Sync {
    /// The revision a consistent read (resourceVersion unset) of `store` must wait for:
    /// what the source holds now, asked of it (bounded by `timeout`).
    fn current_revision<'a>(
        &'a self,
        store: &'a ResourceStore,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Revision, ReadError>>;

    /// Whether [`SourceReader::range`] answers: the reads of a resource whose cache is
    /// not ready can be served from the source (etcd), else they go to the upstream the
    /// source is, when it passes requests through.
    fn reads_unready(&self) -> bool {
        true
    }

    /// Keys in [`start`, `end`) at `revision` (None: the current one), at most `limit`
    /// (0: all): reads of a resource whose cache is not ready, as kube-apiserver reads
    /// etcd then. A source that cannot answers [`ReadError::Unsupported`].
    fn range(
        &self,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: i64,
        revision: Option<Revision>,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<RangePage, ReadError>>;
}

/// One page of a range read.
#[derive(Debug, Clone, Default)]
pub struct RangePage {
    /// (key, value, mod_revision), in key order.
    pub kvs: Vec<(Vec<u8>, Vec<u8>, Revision)>,
    /// Whether more keys follow in the range.
    pub more: bool,
    /// How many keys the whole range holds at the read revision.
    pub count: i64,
    /// The revision read at.
    pub revision: Revision,
}

/// Why a read of the source failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The revision asked for was compacted.
    #[error("required revision has been compacted")]
    Compacted,
    /// The revision asked for is ahead of etcd.
    #[error("required revision is a future revision")]
    Future,
    /// The source did not answer, or answered an error.
    #[error(transparent)]
    Failed(#[from] SourceError),
    /// The source cannot answer this kind of read.
    #[error("{0}")]
    Unsupported(String),
}

/// What failed while following or reading a source, with its cause. Its text is what a
/// log line says: the step (`connect`, `list`, `resume`, `watch`, ...) and the cause.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// An etcd TLS file (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`) cannot be
    /// read.
    #[error("reading {path}: {source}")]
    EtcdTlsFile {
        /// The file.
        path: String,
        /// Why reading it failed.
        #[source]
        source: std::io::Error,
    },
    /// One of `--etcd-certfile` and `--etcd-keyfile` without the other.
    #[error("--etcd-certfile and --etcd-keyfile go together")]
    EtcdKeyPair,
    /// etcd could not be reached, or answered an error, at step `during`. Its text goes
    /// down the error's causes (etcd-client's transport error alone says only
    /// "transport error").
    #[error("{during}: {}", etcd_causes(source))]
    Etcd {
        /// What watchd was doing: `connect`, `list`, `resume`, `watch`, `range read`.
        during: &'static str,
        /// etcd's error (boxed: it is large, and errors are rare).
        #[source]
        source: Box<etcd_client::Error>,
    },
    /// etcd did not answer a read in time.
    #[error("etcd did not answer in time")]
    EtcdTimeout,
    /// A read shared by concurrent requests failed (`revision_flight.rs`): its error's
    /// text.
    #[error("{0}")]
    Shared(String),
    /// etcd ended the watch stream.
    #[error("watch stream ended")]
    WatchEnded,
    /// etcd cancelled the watch, for the reason it gives.
    #[error("watch canceled: {0}")]
    WatchCanceled(String),
    /// The upstream API server could not be reached, or its answer not read.
    #[error(transparent)]
    Upstream(#[from] CallError),
    /// The upstream answered a status other than 200, with this Status message (or the
    /// start of the body).
    #[error("the upstream answered {code}: {message}")]
    Refused {
        /// The HTTP status.
        code: u16,
        /// The Status message, or the start of the body.
        message: String,
    },
    /// An answer of the upstream (`what`: a list, a watch event) is not the JSON
    /// expected.
    #[error("{what}: {source}")]
    Undecodable {
        /// What was read.
        what: &'static str,
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
    },
    /// A resourceVersion of the upstream is not a revision (a positive integer, as
    /// kube-apiserver's and watchd's are).
    #[error("resourceVersion {0:?} is not a revision")]
    NotARevision(String),
    /// A watch event of a type the API does not define.
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
    /// A streaming list sent a deletion before its end bookmark.
    #[error("a deletion among the initial events")]
    DeletionInInitialEvents,
    /// A streaming list sent nothing: an upstream that ignores `sendInitialEvents`.
    #[error("no initial events and no end bookmark")]
    NoEndBookmark,
    /// A streaming list ended before its end bookmark.
    #[error("the stream ended before its end bookmark")]
    EndedBeforeBookmark,
    /// The upstream ended a watch with an ERROR event.
    #[error("ERROR event {code}: {message}")]
    ErrorEvent {
        /// The Status code.
        code: u16,
        /// The Status message.
        message: String,
    },
    /// A watch stream broke while being read.
    #[error("watch stream: {0}")]
    Stream(#[source] hyper::Error),
    /// A watch event beyond what watchd reads of one.
    #[error("a watch event larger than {} MiB", .0 >> 20)]
    EventTooLarge(usize),
}

/// An error's text and its causes', each said once: `a: b: c`. A cause whose text its
/// error already says is left out.
pub(crate) fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

/// An etcd-client error's text with its causes: etcd-client's error does not expose its
/// cause (`source()`), so the transport and IO errors it wraps are read themselves.
fn etcd_causes(e: &etcd_client::Error) -> String {
    match e {
        // Its text is "transport error: " and tonic's, which is "transport error".
        etcd_client::Error::TransportError(t) => causes(t),
        etcd_client::Error::IoError(io) => format!("io error: {}", causes(io)),
        other => other.to_string(),
    }
}

/// The [`SourceError`] of an etcd call failing at step `during`.
pub(crate) fn failed(during: &'static str) -> impl FnOnce(etcd_client::Error) -> SourceError {
    move |e| SourceError::Etcd {
        during,
        source: Box::new(e),
    }
}

/// The smallest key after every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says only its kind, as tonic's transport error does.
    #[derive(Debug)]
    struct Kind(
        &'static str,
        Option<Box<dyn std::error::Error + Send + Sync>>,
    );

    impl std::fmt::Display for Kind {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Kind {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    /// etcd-client's "transport error: transport error" (its error, then tonic's, which
    /// says only its kind) now goes on to the cause.
    #[test]
    fn an_etcd_error_says_its_causes_once_each() {
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let tonic_like = Kind("transport error", Some(Box::new(refused)));
        let etcd_like = etcd_client::Error::IoError(std::io::Error::other(tonic_like));
        let text = failed("connect")(etcd_like).to_string();
        assert_eq!(
            text,
            "connect: io error: transport error: connection refused"
        );
    }

    /// Against a port where nothing listens, the error names the refusal.
    #[tokio::test]
    async fn a_refused_etcd_connection_is_named() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let config = EtcdConfig {
            endpoints: vec![format!("http://127.0.0.1:{port}")],
            ..Default::default()
        };
        let text = match config.connect().await {
            Ok(mut c) => match current_revision(&mut c).await {
                Err(e) => failed("list")(e).to_string(),
                Ok(r) => panic!("nothing listens there, yet revision {r}"),
            },
            Err(e) => e.to_string(),
        };
        assert!(text.to_lowercase().contains("connection refused"), "{text}");
    }

    #[test]
    fn prefix_end_is_the_first_key_after_the_prefix() {
        assert_eq!(prefix_end(b"/registry/"), b"/registry0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
