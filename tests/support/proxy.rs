//! A recording TCP proxy on loopback, to see exactly what a real client sends.
//!
//! [`RecordingProxy::start`] listens on `127.0.0.1:<free port>` and forwards every
//! connection byte for byte to an upstream loopback address (watchd). It parses the
//! request heads of the client-to-server direction (HTTP/1.1, keep-alive included) and
//! records each request's method, target (path and query) and headers, so a test can
//! assert on them and a failure message can show them. Request bodies are skipped by
//! `Content-Length`; a chunked request body stops the recording of that connection
//! (the bytes are still forwarded). Must run inside a tokio runtime; dropping the
//! handle stops the listener and every forwarded connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// One request seen by the proxy.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target: path and query, e.g. `/api/v1/pods?watch=true`.
    pub target: String,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    /// The (still percent-encoded) value of query parameter `key`.
    pub fn query(&self, key: &str) -> Option<&str> {
        let (_, query) = self.target.split_once('?')?;
        query
            .split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// `METHOD target [Accept: ...]`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {} [Accept: {}]",
            self.method,
            self.target,
            self.header("accept").unwrap_or("-")
        )
    }
}

/// The largest request head the proxy parses; longer heads stop the recording.
const MAX_HEAD: usize = 64 * 1024;

/// A running recording proxy.
pub struct RecordingProxy {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl RecordingProxy {
    /// Listens on a free loopback port and forwards to `upstream` (must be loopback).
    pub async fn start(upstream: SocketAddr) -> RecordingProxy {
        assert!(
            upstream.ip().is_loopback(),
            "the proxy only forwards to loopback, got {upstream}"
        );
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy on 127.0.0.1:0");
        let addr = listener.local_addr().expect("proxy local_addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let tasks: Arc<Mutex<Vec<AbortHandle>>> = Arc::new(Mutex::new(Vec::new()));
        let (reqs, task_list) = (requests.clone(), tasks.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let reqs = reqs.clone();
                let handle = tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        forward(client, server, reqs).await;
                    }
                });
                lock(&task_list).push(handle.abort_handle());
            }
        });
        lock(&tasks).push(accept.abort_handle());
        RecordingProxy {
            addr,
            requests,
            tasks,
        }
    }

    /// `http://127.0.0.1:PORT` of the proxy.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests seen so far, in the order their heads arrived.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }

    /// One line per request seen so far, for messages.
    pub fn describe(&self) -> String {
        self.requests()
            .iter()
            .map(RecordedRequest::describe)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Copies both directions until either side closes, recording request heads.
async fn forward(client: TcpStream, server: TcpStream, reqs: Arc<Mutex<Vec<RecordedRequest>>>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async move {
        let mut parser = HeadParser::default();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for request in parser.feed(&buf[..n]) {
                lock(&reqs).push(request);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    // When the server closes (a watch's timeout), the client sees the close too; the
    // task ends once both directions have.
    tokio::join!(upstream, downstream);
}

/// Incremental parser of request heads in a client-to-server byte stream.
#[derive(Default)]
struct HeadParser {
    buf: Vec<u8>,
    /// Body bytes of the current request still to skip.
    skip: usize,
    /// Parsing gave up (chunked body, oversized or malformed head).
    stopped: bool,
}

impl HeadParser {
    fn feed(&mut self, mut data: &[u8]) -> Vec<RecordedRequest> {
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        if self.skip > 0 {
            let n = self.skip.min(data.len());
            self.skip -= n;
            data = &data[n..];
        }
        self.buf.extend_from_slice(data);
        loop {
            if self.skip > 0 {
                let n = self.skip.min(self.buf.len());
                self.skip -= n;
                self.buf.drain(..n);
                if self.skip > 0 {
                    return out;
                }
            }
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                if self.buf.len() > MAX_HEAD {
                    self.stopped = true;
                }
                return out;
            };
            let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
            self.buf.drain(..end + 4);
            let mut lines = head.split("\r\n");
            let mut first = lines.next().unwrap_or_default().split_whitespace();
            let (Some(method), Some(target)) = (first.next(), first.next()) else {
                self.stopped = true;
                return out;
            };
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let request = RecordedRequest {
                method: method.to_string(),
                target: target.to_string(),
                headers,
            };
            if request
                .header("transfer-encoding")
                .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"))
            {
                self.stopped = true;
            }
            self.skip = request
                .header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            out.push(request);
            if self.stopped {
                return out;
            }
        }
    }
}
