//! A minimal HTTP/1.1 client on hyper's connection API: one TCP connection
//! per [`Conn`], as a Kubernetes informer has. Loopback (or any literal
//! `host:port`) only; no TLS, no proxies.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Parses `http://host:port[/]` into a socket address.
pub fn parse_base_url(url: &str) -> Result<SocketAddr, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let hostport = rest.trim_end_matches('/');
    hostport
        .to_socket_addrs()
        .map_err(|e| format!("{url}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url}: no address"))
}

/// One HTTP/1.1 connection; requests on it are sequential.
pub struct Conn {
    addr: SocketAddr,
    sender: SendRequest<Empty<Bytes>>,
}

impl Conn {
    /// Connects to `addr` (TCP_NODELAY, like client-go) within `timeout`.
    pub async fn open(addr: SocketAddr, timeout: Duration) -> Result<Self, String> {
        let connect = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect {addr}: {e}"))?;
            let _ = tcp.set_nodelay(true);
            let (sender, conn) = http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(|e| format!("handshake {addr}: {e}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Self { addr, sender })
        };
        tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| format!("connect {addr}: timed out after {timeout:?}"))?
    }

    /// Sends `GET path_and_query` and returns the response head; the body
    /// streams afterwards.
    pub async fn get(&mut self, path_and_query: &str) -> Result<Response<Incoming>, String> {
        self.sender
            .ready()
            .await
            .map_err(|e| format!("GET {path_and_query}: connection closed: {e}"))?;
        let req = Request::get(path_and_query)
            .header(hyper::header::HOST, self.addr.to_string())
            .header(hyper::header::ACCEPT, "application/json")
            .body(Empty::new())
            .map_err(|e| format!("GET {path_and_query}: {e}"))?;
        self.sender
            .send_request(req)
            .await
            .map_err(|e| format!("GET {path_and_query}: {e}"))
    }

    /// `GET` with the whole body collected, within `timeout`.
    pub async fn get_body(
        &mut self,
        path_and_query: &str,
        timeout: Duration,
    ) -> Result<(u16, Bytes), String> {
        let fetch = async {
            let resp = self.get(path_and_query).await?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("GET {path_and_query}: body: {e}"))?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, fetch)
            .await
            .map_err(|_| format!("GET {path_and_query}: timed out after {timeout:?}"))?
    }
}

/// One `GET` on a fresh connection: (status, body).
pub async fn get_once(
    addr: SocketAddr,
    path_and_query: &str,
    timeout: Duration,
) -> Result<(u16, Bytes), String> {
    let mut conn = Conn::open(addr, timeout).await?;
    conn.get_body(path_and_query, timeout).await
}

/// Splits a byte stream into `\n`-terminated lines across chunk boundaries.
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// Feeds `chunk`, calling `line` for every complete line (without its
    /// `\n`; empty lines skipped).
    pub fn feed(&mut self, chunk: &[u8], mut line: impl FnMut(&[u8])) {
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(pos);
            if self.partial.is_empty() {
                if !head.is_empty() {
                    line(head);
                }
            } else {
                self.partial.extend_from_slice(head);
                line(&self.partial);
                self.partial.clear();
            }
            rest = &tail[1..];
        }
        self.partial.extend_from_slice(rest);
    }

    /// Bytes of an unfinished line held back.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_parse() {
        assert_eq!(
            parse_base_url("http://127.0.0.1:8080/").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert!(parse_base_url("https://127.0.0.1:8080").is_err());
        assert!(parse_base_url("http://127.0.0.1").is_err());
    }

    #[test]
    fn lines_split_across_chunks() {
        let mut s = LineSplitter::default();
        let mut got: Vec<String> = Vec::new();
        let mut push = |l: &[u8]| got.push(String::from_utf8(l.to_vec()).unwrap());
        s.feed(b"{\"a\":1}\n{\"b\"", &mut push);
        s.feed(b":2}", &mut push);
        assert_eq!(s.pending(), 7);
        s.feed(b"\n\n{\"c\":3}\n", &mut push);
        assert_eq!(got, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
        assert_eq!(s.pending(), 0);
    }
}
