//! Where the HTTP watchers go and how: the target URL (`http://` or
//! `https://` to watchd or any Kubernetes API endpoint), the HTTP version
//! ([`Protocol`]), the bearer token, and the resolved [`Endpoint`] that the
//! connections of [`crate::transport`] are opened to.
//!
//! URLs are parsed by hand (the load generator needs little of RFC 3986):
//! `scheme://host[:port][/path-prefix]`, where host is a DNS name, an IPv4
//! address or a bracketed IPv6 address. User info, queries and fragments are
//! refused rather than ignored.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use hyper::header::HeaderValue;

use crate::tls::{TlsClient, TlsOptions};

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS.
    Https,
}

impl Scheme {
    /// The scheme as written in URLs.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port a URL without one means.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// A parsed target URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetUrl {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// The host as written, lower-cased, without the brackets of an IPv6
    /// address: what TLS sends as the server name.
    pub host: String,
    /// The port written in the URL, if any.
    pub port: Option<u16>,
    /// A path the API is served under (`""` or `/prefix`, no trailing `/`),
    /// put before every request path.
    pub path_prefix: String,
}

impl TargetUrl {
    /// Parses `scheme://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{url:?}: {why}");
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("not a URL: expected http://HOST:PORT or https://HOST:PORT"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(bad(&format!("scheme {other:?}: only http and https"))),
        };
        if rest.contains(['?', '#']) {
            return Err(bad("a query or fragment is not allowed"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(bad(
                "user info is not supported (use --token or --token-file)",
            ));
        }
        let (host, port) = split_host_port(authority).map_err(|e| bad(&e))?;
        let path_prefix = path.trim_end_matches('/').to_string();
        if path_prefix.contains(|c: char| c.is_ascii_whitespace() || c.is_ascii_control()) {
            return Err(bad("the path holds whitespace or control characters"));
        }
        Ok(Self {
            scheme,
            host,
            port,
            path_prefix,
        })
    }

    /// The port to connect to: the URL's, or the scheme's default.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(self.scheme.default_port())
    }

    /// `host:port` for the `Host` header and HTTP/2's `:authority`
    /// (brackets around an IPv6 address).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port())
        } else {
            format!("{}:{}", self.host, self.port())
        }
    }

    /// The URL in normal form, without a trailing `/`.
    pub fn base(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.name(),
            self.authority(),
            self.path_prefix
        )
    }

    /// The first address the host resolves to (an address literal resolves
    /// to itself, `localhost` through the system resolver).
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        let port = self.port();
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, port));
        }
        (self.host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("resolve {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("resolve {}: no address", self.host))
    }
}

impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base())
    }
}

/// Splits an authority into a checked, lower-cased host and its port.
fn split_host_port(authority: &str) -> Result<(String, Option<u16>), String> {
    if authority.is_empty() {
        return Err("no host".into());
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address without its closing ]")?;
        v6.parse::<Ipv6Addr>()
            .map_err(|_| format!("{v6:?} is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("junk after the IPv6 address")?),
        };
        (v6.to_ascii_lowercase(), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if port.is_some_and(|p| p.contains(':')) {
            return Err("an IPv6 address must be in brackets: https://[::1]:6443".into());
        }
        check_host(host)?;
        (host.to_ascii_lowercase(), port)
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err(format!("port {p:?} is not 1..=65535")),
            Ok(n) => Some(n),
        },
    };
    Ok((host, port))
}

/// An IPv4 address or a DNS name (letters, digits and `-` in dot-separated
/// labels of 1 to 63 characters, not beginning or ending with `-`).
fn check_host(host: &str) -> Result<(), String> {
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok(());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
        return Err(format!("{host:?} is not a host name or address"));
    }
    // All-numeric labels that are not a valid IPv4 address (999.1.1.1).
    if host
        .split('.')
        .all(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("{host:?} is not an IPv4 address"));
    }
    Ok(())
}

/// The HTTP version the watchers speak to an HTTP target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// HTTP/1.1: one connection per watcher, as an informer without HTTP/2.
    #[default]
    Http1,
    /// HTTP/2: the watchers as streams multiplexed over few connections
    /// (h2c with prior knowledge on `http://`, ALPN `h2` on `https://`), as
    /// client-go multiplexes every watch of a process.
    Http2,
}

impl Protocol {
    /// The name used in flags and results (`http1`, `http2`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::Http2 => "http2",
        }
    }

    /// The ALPN protocol offered over TLS.
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Protocol::Http1 => b"http/1.1",
            Protocol::Http2 => b"h2",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "http1" => Ok(Protocol::Http1),
            "http2" => Ok(Protocol::Http2),
            _ => Err(format!("unknown protocol {s:?}: expected http1 or http2")),
        }
    }
}

/// Where the bearer token comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// Given on the command line.
    Inline(String),
    /// Read from this file when the run starts (surrounding whitespace
    /// removed, as client-go reads a token file).
    File(PathBuf),
    /// A kubeconfig user's `tokenFile` (already taken from the kubeconfig's
    /// directory), read as [`TokenSource::File`].
    KubeconfigFile {
        /// The token file.
        file: PathBuf,
        /// The kubeconfig naming it.
        kubeconfig: PathBuf,
    },
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Inline(_) => f.write_str("Inline(<redacted>)"),
            TokenSource::File(p) => f.debug_tuple("File").field(p).finish(),
            TokenSource::KubeconfigFile { file, kubeconfig } => f
                .debug_struct("KubeconfigFile")
                .field("file", file)
                .field("kubeconfig", kubeconfig)
                .finish(),
        }
    }
}

impl TokenSource {
    /// The `Authorization: Bearer <token>` header value (marked sensitive,
    /// so it is never printed).
    pub fn header(&self) -> Result<HeaderValue, String> {
        let read = |p: &PathBuf, from: String| {
            std::fs::read_to_string(p)
                .map(|text| (text.trim().to_string(), from.clone()))
                .map_err(|e| format!("{from}: {e}"))
        };
        let (token, from) = match self {
            TokenSource::Inline(t) => (t.trim().to_string(), "--token".to_string()),
            TokenSource::File(p) => read(p, format!("--token-file {}", p.display()))?,
            TokenSource::KubeconfigFile { file, kubeconfig } => read(
                file,
                format!(
                    "kubeconfig {}: tokenFile {}",
                    kubeconfig.display(),
                    file.display()
                ),
            )?,
        };
        if token.is_empty() {
            return Err(format!("{from}: the token is empty"));
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| format!("{from}: the token holds characters a header cannot carry"))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// A resolved HTTP target: its URL and address, TLS settings for each
/// protocol, and the `Authorization` header every request carries.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The URL.
    pub url: TargetUrl,
    /// The address connections go to.
    pub addr: SocketAddr,
    /// TLS, for `https://`.
    pub tls: Option<TlsClient>,
    /// `Bearer <token>`, when a token is set.
    pub authorization: Option<HeaderValue>,
}

impl Endpoint {
    /// Plain HTTP to `addr`, without credentials (a watchd this process
    /// started).
    pub fn plain(addr: SocketAddr) -> Self {
        Self {
            url: TargetUrl {
                scheme: Scheme::Http,
                host: addr.ip().to_string(),
                port: Some(addr.port()),
                path_prefix: String::new(),
            },
            addr,
            tls: None,
            authorization: None,
        }
    }

    /// Parses and resolves `url`, loads the TLS settings (`https://` only)
    /// and reads the token.
    pub fn new(url: &str, tls: &TlsOptions, token: Option<&TokenSource>) -> Result<Self, String> {
        let url = TargetUrl::parse(url)?;
        tls.check_for(url.scheme)?;
        let tls = match url.scheme {
            Scheme::Http => None,
            Scheme::Https => Some(TlsClient::new(tls, &url.host)?),
        };
        let addr = url.resolve()?;
        let authorization = token.map(TokenSource::header).transpose()?;
        Ok(Self {
            url,
            addr,
            tls,
            authorization,
        })
    }

    /// Whether connections use TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> TargetUrl {
        TargetUrl::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn urls_parse_into_scheme_host_port_and_prefix() {
        let u = url("http://127.0.0.1:8080/");
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.path_prefix.as_str()),
            (Scheme::Http, "127.0.0.1", Some(8080), "")
        );
        assert_eq!(u.authority(), "127.0.0.1:8080");
        let u = url("HTTPS://LocalHost:6443/k8s/clusters/c1//");
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port(), u.path_prefix.as_str()),
            (Scheme::Https, "localhost", 6443, "/k8s/clusters/c1")
        );
        assert_eq!(u.base(), "https://localhost:6443/k8s/clusters/c1");
        let u = url("https://[::1]:6443");
        assert_eq!((u.host.as_str(), u.port()), ("::1", 6443));
        assert_eq!(u.authority(), "[::1]:6443");
        assert_eq!(u.resolve().unwrap(), "[::1]:6443".parse().unwrap());
        // Default ports.
        assert_eq!(url("https://kube.example").port(), 443);
        assert_eq!(url("http://[::1]").authority(), "[::1]:80");
        let u = url("https://my-api.internal:6443");
        assert_eq!((u.host.as_str(), u.port), ("my-api.internal", Some(6443)));
    }

    #[test]
    fn bad_urls_are_refused_with_a_reason() {
        for (bad, why) in [
            ("127.0.0.1:8080", "not a URL"),
            ("ftp://127.0.0.1:21", "only http and https"),
            ("http://", "no host"),
            ("http://:8080", "not a host name"),
            ("http://127.0.0.1:", "not 1..=65535"),
            ("http://127.0.0.1:0", "not 1..=65535"),
            ("http://127.0.0.1:70000", "not 1..=65535"),
            ("http://127.0.0.1:80x", "not 1..=65535"),
            ("http://::1:8080", "in brackets"),
            ("http://[::1:8080", "closing ]"),
            ("http://[::g]:1", "not an IPv6 address"),
            ("http://[::1]x", "junk"),
            ("https://user:pw@127.0.0.1:6443", "user info"),
            ("https://127.0.0.1:6443/?watch=1", "query"),
            ("https://127.0.0.1:6443/#x", "fragment"),
            ("https://exa_mple.com", "not a host name"),
            ("https://-a.com", "not a host name"),
            ("https://a..com", "not a host name"),
            ("https://trailing.dot.", "not a host name"),
            ("https://999.1.1.1", "not an IPv4 address"),
            ("https://127.0.0.1:6443/a b", "whitespace"),
        ] {
            let err = TargetUrl::parse(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn names_resolve_and_addresses_need_no_lookup() {
        assert_eq!(
            url("http://127.0.0.1:9").resolve().unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        // localhost resolves to a loopback address on any sane machine.
        let a = url("http://localhost:9").resolve().unwrap();
        assert!(a.ip().is_loopback() && a.port() == 9, "{a}");
    }

    #[test]
    fn protocols_parse() {
        assert_eq!("http1".parse(), Ok(Protocol::Http1));
        assert_eq!("http2".parse(), Ok(Protocol::Http2));
        for bad in ["h2", "HTTP2", "http3", ""] {
            let e = bad.parse::<Protocol>().expect_err(bad);
            assert!(e.contains("http1 or http2"), "{e}");
        }
        assert_eq!(Protocol::default(), Protocol::Http1);
        assert_eq!(Protocol::Http2.alpn(), b"h2");
        assert_eq!(Protocol::Http1.alpn(), b"http/1.1");
        assert_eq!(Protocol::Http2.to_string(), "http2");
    }

    #[test]
    fn tokens_become_sensitive_bearer_headers() {
        let h = TokenSource::Inline(" abc.def \n".into()).header().unwrap();
        assert_eq!(h, "Bearer abc.def");
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("abc"), "never printed");
        assert!(!format!("{:?}", TokenSource::Inline("abc".into())).contains("abc"));
        let dir = std::env::temp_dir().join(format!("lt-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "from-a-file\n").unwrap();
        let h = TokenSource::File(file.clone()).header().unwrap();
        assert_eq!(h, "Bearer from-a-file");
        std::fs::write(&file, "  \n").unwrap();
        let e = TokenSource::File(file.clone()).header().unwrap_err();
        assert!(e.contains("empty"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = TokenSource::File(dir.join("gone")).header().unwrap_err();
        assert!(e.contains("--token-file"), "{e}");
        let e = TokenSource::Inline("a\u{7f}b".into()).header().unwrap_err();
        assert!(e.contains("header"), "{e}");
    }

    #[test]
    fn plain_endpoints_and_tls_checks() {
        let e = Endpoint::plain("127.0.0.1:8080".parse().unwrap());
        assert_eq!(e.url.base(), "http://127.0.0.1:8080");
        assert!(!e.is_tls() && e.authorization.is_none());
        let none = TlsOptions::default();
        let token = TokenSource::Inline("t".into());
        let e = Endpoint::new("http://localhost:8080/", &none, Some(&token)).unwrap();
        assert_eq!(e.authorization.as_ref().unwrap(), "Bearer t");
        assert!(!e.is_tls());
        let err = Endpoint::new("https://127.0.0.1:6443", &none, None).unwrap_err();
        assert!(err.contains("--ca-file"), "{err}");
        let insecure = TlsOptions {
            insecure_skip_verify: true,
            ..TlsOptions::default()
        };
        let e = Endpoint::new("https://127.0.0.1:6443", &insecure, None).unwrap();
        assert!(e.is_tls());
        let err = Endpoint::new("http://127.0.0.1:8080", &insecure, None).unwrap_err();
        assert!(err.contains("https"), "{err}");
    }
}
