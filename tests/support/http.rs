//! A tiny async HTTP/1.1 client for tests, on hyper's client connection API.
//!
//! One TCP connection per request, to `http://127.0.0.1:PORT/...` URLs only.
//! [`get`] and [`request`] return the whole [`Response`]; [`watch`] returns a
//! [`WatchStream`] that decodes one JSON document per `\n`-terminated line of a
//! streamed (chunked) body, the framing of Kubernetes watch responses.
//! Every wait is bounded: requests by [`REQUEST_TIMEOUT`], events by the caller.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{timeout, timeout_at, Instant};

/// Upper bound for connecting, sending a request and reading a whole response (or a watch's headers).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A complete HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code, e.g. 200.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Response {
    /// Decodes the body as JSON; panics with the body text if it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response body (status {}) is not JSON: {e}\n{}",
                self.status,
                self.text()
            )
        })
    }

    /// The body as (lossy) UTF-8 text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The value of header `name` if present and valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// `GET url` with extra headers; panics on connection errors or after [`REQUEST_TIMEOUT`].
pub async fn get(url: &str, headers: &[(&str, &str)]) -> Response {
    request("GET", url, headers, Bytes::new()).await
}

/// Sends `method url` with extra headers and a body; panics on connection errors or after [`REQUEST_TIMEOUT`].
pub async fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Response {
    try_request(method, url, headers, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
}

/// Like [`request`] but returns connection errors and timeouts instead of panicking.
pub async fn try_request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Result<Response, String> {
    let body = body.into();
    let work = async {
        let (response, _sender, conn) = send(method, url, headers, body).await?;
        let (parts, incoming) = response.into_parts();
        let collected = incoming
            .collect()
            .await
            .map_err(|e| format!("read body: {e}"));
        conn.abort();
        Ok(Response {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: collected?.to_bytes(),
        })
    };
    timeout(REQUEST_TIMEOUT, work)
        .await
        .map_err(|_| format!("timed out after {REQUEST_TIMEOUT:?}"))?
}

/// Starts a streaming `GET url` (e.g. `?watch=true`) and returns once the response headers arrived.
///
/// Panics on connection errors or if the headers do not arrive within [`REQUEST_TIMEOUT`].
pub async fn watch(url: &str, headers: &[(&str, &str)]) -> WatchStream {
    let (response, sender, conn) =
        timeout(REQUEST_TIMEOUT, send("GET", url, headers, Bytes::new()))
            .await
            .unwrap_or_else(|_| {
                panic!("watch {url}: no response headers after {REQUEST_TIMEOUT:?}")
            })
            .unwrap_or_else(|e| panic!("watch {url}: {e}"));
    let (parts, body) = response.into_parts();
    let gzipped = parts
        .headers
        .get("content-encoding")
        .is_some_and(|v| v == "gzip");
    WatchStream {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
        buf: BytesMut::new(),
        gunzip: gzipped.then(|| flate2::write::MultiGzDecoder::new(Vec::new())),
        ended: false,
        _sender: sender,
        conn,
    }
}

/// An open streaming response that yields one JSON document per line.
///
/// Dropping it closes the connection.
pub struct WatchStream {
    status: u16,
    headers: HeaderMap,
    body: Incoming,
    /// Bytes received but not yet returned as a line.
    buf: BytesMut,
    /// A gzipped body's decoder (a watch list's gzip members are decoded as they come).
    gunzip: Option<flate2::write::MultiGzDecoder<Vec<u8>>>,
    /// The body reached its end (or failed).
    ended: bool,
    /// Kept so the connection stays open as long as the stream.
    _sender: SendRequest<Full<Bytes>>,
    /// Drives the connection; aborted on drop.
    conn: JoinHandle<()>,
}

impl WatchStream {
    /// The response status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The response headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Whether the server has ended the body (no more events will come).
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The next `\n`-terminated line decoded as JSON, or `None` on timeout or end of stream.
    ///
    /// Blank lines are skipped; a line that is not JSON panics with its text.
    /// A timeout loses nothing: a later call picks up where this one stopped.
    pub async fn next_event(&mut self, wait: Duration) -> Option<serde_json::Value> {
        let line = self.next_line(wait).await?;
        Some(serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!(
                "watch line is not JSON: {e}\n{}",
                String::from_utf8_lossy(&line)
            )
        }))
    }

    /// The next non-blank `\n`-terminated line (without the newline), or `None` on timeout or end of stream.
    pub async fn next_line(&mut self, wait: Duration) -> Option<Bytes> {
        let deadline = Instant::now() + wait;
        loop {
            while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(pos + 1).freeze().slice(..pos);
                if !line.iter().all(u8::is_ascii_whitespace) {
                    return Some(line);
                }
            }
            if self.ended {
                return None;
            }
            match timeout_at(deadline, self.body.frame()).await {
                Err(_) => return None,
                Ok(None) | Ok(Some(Err(_))) => self.ended = true,
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.take(data);
                    }
                }
            }
        }
    }

    /// Adds received body bytes, decoded when gzipped (panics on a bad gzip stream).
    fn take(&mut self, data: &[u8]) {
        match self.gunzip.as_mut() {
            Some(g) => {
                use std::io::Write as _;
                g.write_all(data)
                    .and_then(|()| g.flush())
                    .expect("a well-formed gzip body");
                self.buf.extend_from_slice(g.get_ref());
                g.get_mut().clear();
            }
            None => self.buf.extend_from_slice(data),
        }
    }

    /// Collects up to `n` events, waiting at most `wait` in total.
    pub async fn next_events(&mut self, n: usize, wait: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + wait;
        let mut events = Vec::with_capacity(n);
        while events.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left).await {
                Some(event) => events.push(event),
                None => break,
            }
        }
        events
    }

    /// Reads the rest of the body (bounded by `wait`) and returns it with any buffered bytes.
    ///
    /// Meant for error responses, whose body is a single `Status` object.
    pub async fn rest(mut self, wait: Duration) -> Bytes {
        let deadline = Instant::now() + wait;
        while !self.ended {
            match timeout_at(deadline, self.body.frame()).await {
                Err(_) | Ok(None) | Ok(Some(Err(_))) => self.ended = true,
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.take(data);
                    }
                }
            }
        }
        std::mem::take(&mut self.buf).freeze()
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.conn.abort();
    }
}

/// A response with its connection's request handle and driver task.
type Sent = (
    hyper::Response<Incoming>,
    SendRequest<Full<Bytes>>,
    JoinHandle<()>,
);

/// Opens a connection to the URL's 127.0.0.1 address and sends one request.
async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Sent, String> {
    let uri: Uri = url.parse().map_err(|e| format!("bad URL {url:?}: {e}"))?;
    assert_eq!(
        uri.scheme_str(),
        Some("http"),
        "test HTTP client speaks plain http only: {url}"
    );
    assert_eq!(
        uri.host(),
        Some("127.0.0.1"),
        "tests may only talk to 127.0.0.1: {url}"
    );
    let port = uri.port_u16().unwrap_or(80);
    let method: Method = method
        .parse()
        .map_err(|e| format!("bad method {method:?}: {e}"))?;
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");

    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, format!("127.0.0.1:{port}"));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder
        .body(Full::new(body))
        .map_err(|e| format!("build request: {e}"))?;

    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
    let conn = tokio::spawn(async move {
        let _ = connection.await;
    });
    match sender.send_request(request).await {
        Ok(response) => Ok((response, sender, conn)),
        Err(e) => {
            conn.abort();
            Err(format!("send request: {e}"))
        }
    }
}

/// Decodes a chunked HTTP/1.1 body read so far (chunk extensions ignored): the chunks'
/// data, and whether the last chunk came. Panics on a malformed chunk.
pub fn dechunk(mut raw: &[u8]) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let line = std::str::from_utf8(&raw[..end]).unwrap_or("");
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|_| panic!("a chunk size line: {:?}", &raw[..end]));
        if size == 0 {
            return (data, true);
        }
        let body = end + 2;
        if raw.len() < body + size + 2 {
            break;
        }
        assert_eq!(
            &raw[body + size..body + size + 2],
            b"\r\n",
            "a chunk ends with CRLF"
        );
        data.extend_from_slice(&raw[body..body + size]);
        raw = &raw[body + size + 2..];
    }
    (data, false)
}
