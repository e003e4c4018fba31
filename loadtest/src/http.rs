//! What the HTTP watchers ask for and how they read it: the media types
//! ([`Accept`]) and the splitters that cut a watch body into events (JSON
//! lines, Kubernetes protobuf frames) across chunk boundaries. The
//! connections themselves are in [`crate::transport`], the target URL in
//! [`crate::endpoint`].

use std::net::SocketAddr;

use crate::endpoint::{Scheme, TargetUrl};

/// Parses `http://host:port[/]` (the port written out) into a socket
/// address: the plain-HTTP watchd of `read-latency`.
pub fn parse_base_url(url: &str) -> Result<SocketAddr, String> {
    let parsed = TargetUrl::parse(url)?;
    if parsed.scheme != Scheme::Http {
        return Err(format!("{url}: only http:// URLs are supported"));
    }
    if parsed.port.is_none() {
        return Err(format!("{url}: no port"));
    }
    parsed.resolve()
}

/// The media type a request asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Accept {
    /// `application/json` (watch streams: JSON lines).
    #[default]
    Json,
    /// `application/vnd.kubernetes.protobuf`, as client-go informers ask for
    /// built-in kinds (watch streams: length-prefixed `WatchEvent` frames).
    Protobuf,
}

/// Kubernetes protobuf.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// The content type of a Kubernetes protobuf watch stream.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

impl Accept {
    /// The `Accept` header value.
    pub fn media_type(self) -> &'static str {
        match self {
            Accept::Json => "application/json",
            Accept::Protobuf => PROTOBUF,
        }
    }

    /// The name used in flags and results (`json`, `protobuf`).
    pub fn name(self) -> &'static str {
        match self {
            Accept::Json => "json",
            Accept::Protobuf => "protobuf",
        }
    }
}

impl std::str::FromStr for Accept {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" => Ok(Accept::Json),
            "protobuf" => Ok(Accept::Protobuf),
            _ => Err(format!(
                "unknown media type {s:?}: expected json or protobuf"
            )),
        }
    }
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

/// Longest watch frame [`FrameSplitter`] accepts by default: far above any
/// object etcd can hold (1.5 MiB by default), low enough not to allocate
/// whatever a corrupt length prefix says.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// Splits a Kubernetes protobuf watch stream into frames across chunk
/// boundaries: each frame is a 4-byte big-endian length, then that many
/// bytes (one `WatchEvent` message).
#[derive(Debug)]
pub struct FrameSplitter {
    partial: Vec<u8>,
    max: usize,
}

impl Default for FrameSplitter {
    fn default() -> Self {
        Self::new(MAX_FRAME_BYTES)
    }
}

impl FrameSplitter {
    /// A splitter that rejects frames longer than `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            partial: Vec::new(),
            max,
        }
    }

    fn length(&self, prefix: [u8; 4]) -> Result<usize, String> {
        let len = u32::from_be_bytes(prefix) as usize;
        if len > self.max {
            return Err(format!(
                "watch frame of {len} bytes is longer than the {} allowed",
                self.max
            ));
        }
        Ok(len)
    }

    /// Feeds `chunk`, calling `frame` for every complete frame (without its
    /// length prefix). A length over the limit is an error; the stream
    /// cannot be read past it.
    pub fn feed(&mut self, chunk: &[u8], mut frame: impl FnMut(&[u8])) -> Result<(), String> {
        let mut rest = chunk;
        // Every pass consumes bytes of `rest` or returns.
        while !rest.is_empty() {
            if self.partial.is_empty() {
                let Some(prefix) = rest.first_chunk::<4>() else {
                    self.partial.extend_from_slice(rest);
                    return Ok(());
                };
                let end = 4 + self.length(*prefix)?;
                match rest.get(4..end) {
                    Some(body) => {
                        frame(body);
                        rest = &rest[end..];
                    }
                    None => {
                        self.partial.extend_from_slice(rest);
                        return Ok(());
                    }
                }
                continue;
            }
            // A frame begun in an earlier chunk: first its length, then its body.
            let have = self.partial.len();
            if have < 4 {
                let take = (4 - have).min(rest.len());
                self.partial.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if self.partial.len() < 4 {
                    return Ok(());
                }
            }
            let mut prefix = [0u8; 4];
            prefix.copy_from_slice(&self.partial[..4]);
            let end = 4 + self.length(prefix)?;
            let take = (end - self.partial.len()).min(rest.len());
            self.partial.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.partial.len() < end {
                return Ok(());
            }
            frame(&self.partial[4..]);
            self.partial.clear();
        }
        Ok(())
    }

    /// Bytes of an unfinished frame held back.
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

    fn framed(bodies: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    fn split_all(s: &mut FrameSplitter, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        for c in chunks {
            s.feed(c, |f| got.push(f.to_vec()))
                .expect("frames within bounds");
        }
        got
    }

    #[test]
    fn coalesced_frames_split() {
        let stream = framed(&[b"one", b"", b"three"]);
        let mut s = FrameSplitter::default();
        assert_eq!(
            split_all(&mut s, &[&stream]),
            [b"one".to_vec(), Vec::new(), b"three".to_vec()]
        );
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn frames_split_across_chunks_at_every_offset() {
        let bodies: [&[u8]; 3] = [b"first frame", b"2", &[0u8; 300]];
        let stream = framed(&bodies);
        let want: Vec<Vec<u8>> = bodies.iter().map(|b| b.to_vec()).collect();
        // Two chunks cut at every offset, including inside a length prefix.
        for cut in 0..=stream.len() {
            let mut s = FrameSplitter::default();
            let (a, b) = stream.split_at(cut);
            assert_eq!(split_all(&mut s, &[a, b]), want, "cut at {cut}");
            assert_eq!(s.pending(), 0, "cut at {cut}");
        }
        // One byte at a time.
        let mut s = FrameSplitter::default();
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(split_all(&mut s, &bytes), want);
        // A frame still incomplete is held back.
        let mut s = FrameSplitter::default();
        assert_eq!(split_all(&mut s, &[&stream[..stream.len() - 1]]).len(), 2);
        assert_eq!(s.pending(), 4 + 299);
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut s = FrameSplitter::new(8);
        let ok = framed(&[b"12345678"]);
        assert_eq!(split_all(&mut s, &[&ok]), [b"12345678".to_vec()]);
        let mut got = 0;
        let big = framed(&[b"123456789"]);
        assert!(s.feed(&big, |_| got += 1).is_err());
        // Also when the length arrives a byte at a time, before any body.
        let mut s = FrameSplitter::default();
        let huge = (u32::MAX).to_be_bytes();
        assert!(s.feed(&huge[..3], |_| got += 1).is_ok());
        let err = s.feed(&huge[3..], |_| got += 1).expect_err("refused");
        assert!(err.contains("longer than"), "{err}");
        assert_eq!(got, 0);
        assert!(s.pending() < 8, "nothing allocated for the body");
    }

    #[test]
    fn accept_names_parse() {
        assert_eq!("json".parse(), Ok(Accept::Json));
        assert_eq!("protobuf".parse(), Ok(Accept::Protobuf));
        assert!("yaml".parse::<Accept>().is_err());
        assert_eq!(Accept::default(), Accept::Json);
        assert_eq!(Accept::Protobuf.media_type(), PROTOBUF);
        assert_eq!(Accept::Protobuf.name(), "protobuf");
    }
}
