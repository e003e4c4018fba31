//! TLS for `https://` targets: rustls with the ring provider (the one the
//! workspace already uses), the server verified against `--ca-file` or, with
//! `--insecure-skip-tls-verify`, not at all (the handshake's signatures are
//! still checked, so the connection is TLS all the same). The server name
//! sent (SNI) and verified is the URL's host; ALPN offers exactly the
//! protocol the watchers speak.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use crate::endpoint::{Protocol, Scheme};

/// How the server of an `https://` target is verified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM bundle of the CAs the server's certificate must chain to.
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate (kubectl's `--insecure-skip-tls-verify`).
    pub insecure_skip_verify: bool,
}

impl TlsOptions {
    /// Whether any TLS option is set.
    pub fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.insecure_skip_verify
    }

    /// Refuses options that do not fit a URL of `scheme`: TLS options on
    /// `http://`, none or both on `https://` (kubectl refuses both too).
    pub fn check_for(&self, scheme: Scheme) -> Result<(), String> {
        match scheme {
            Scheme::Http if self.is_set() => {
                Err("--ca-file and --insecure-skip-tls-verify need an https:// --target-url".into())
            }
            Scheme::Http => Ok(()),
            Scheme::Https => match (&self.ca_file, self.insecure_skip_verify) {
                (Some(_), true) => Err(
                    "--ca-file and --insecure-skip-tls-verify together: choose one (as kubectl)"
                        .into(),
                ),
                (None, false) => Err("an https:// target needs --ca-file=PEM to verify the \
                     server (or --insecure-skip-tls-verify)"
                    .into()),
                _ => Ok(()),
            },
        }
    }
}

/// Client TLS settings for one host, one configuration per protocol (they
/// differ only in the ALPN offered).
#[derive(Clone, Debug)]
pub struct TlsClient {
    /// The name sent as SNI and checked against the certificate: the URL's
    /// host (a DNS name, or an IP address matched against IP SANs).
    pub server_name: ServerName<'static>,
    http1: Arc<ClientConfig>,
    http2: Arc<ClientConfig>,
}

impl TlsClient {
    /// Loads the CA file (if any) and builds the configurations for `host`.
    pub fn new(options: &TlsOptions, host: &str) -> Result<Self, String> {
        options.check_for(Scheme::Https)?;
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("{host:?} is not a TLS server name: {e}"))?;
        // watchd's own client TLS: the same CA reading and the same verifier for
        // --insecure-skip-tls-verify (which still checks the handshake's signatures).
        let endpoint = watchd::client::Endpoint {
            ca_pem: match &options.ca_file {
                Some(path) => Some(
                    std::fs::read(path)
                        .map_err(|e| format!("--ca-file {}: {e}", path.display()))?,
                ),
                None => None,
            },
            insecure_skip_tls_verify: options.insecure_skip_verify,
            ..Default::default()
        };
        let config = |protocol: Protocol| -> Result<Arc<ClientConfig>, String> {
            let mut c =
                watchd::client::tls_config(&endpoint).map_err(|e| match &options.ca_file {
                    Some(path) => format!("--ca-file {}: {e}", path.display()),
                    None => e.to_string(),
                })?;
            c.alpn_protocols = vec![protocol.alpn().to_vec()];
            Ok(Arc::new(c))
        };
        Ok(Self {
            server_name,
            http1: config(Protocol::Http1)?,
            http2: config(Protocol::Http2)?,
        })
    }

    /// The configuration offering `protocol` by ALPN.
    pub fn config(&self, protocol: Protocol) -> Arc<ClientConfig> {
        match protocol {
            Protocol::Http1 => self.http1.clone(),
            Protocol::Http2 => self.http2.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lt-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn options_fit_the_scheme() {
        let none = TlsOptions::default();
        let ca = TlsOptions {
            ca_file: Some("ca.pem".into()),
            insecure_skip_verify: false,
        };
        let insecure = TlsOptions {
            ca_file: None,
            insecure_skip_verify: true,
        };
        let both = TlsOptions {
            ca_file: Some("ca.pem".into()),
            insecure_skip_verify: true,
        };
        assert!(none.check_for(Scheme::Http).is_ok());
        assert!(ca.check_for(Scheme::Http).is_err());
        assert!(insecure.check_for(Scheme::Http).is_err());
        assert!(none.check_for(Scheme::Https).is_err());
        assert!(ca.check_for(Scheme::Https).is_ok());
        assert!(insecure.check_for(Scheme::Https).is_ok());
        let e = both.check_for(Scheme::Https).unwrap_err();
        assert!(e.contains("choose one"), "{e}");
    }

    #[test]
    fn ca_files_are_read_and_checked() {
        let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let good = temp_file("good", &ca.cert.pem());
        let opts = |p: &PathBuf| TlsOptions {
            ca_file: Some(p.clone()),
            insecure_skip_verify: false,
        };
        let c = TlsClient::new(&opts(&good), "127.0.0.1").unwrap();
        assert_eq!(c.config(Protocol::Http2).alpn_protocols, [b"h2".to_vec()]);
        assert_eq!(
            c.config(Protocol::Http1).alpn_protocols,
            [b"http/1.1".to_vec()]
        );
        assert!(matches!(c.server_name, ServerName::IpAddress(_)));
        let c = TlsClient::new(&opts(&good), "localhost").unwrap();
        assert!(matches!(c.server_name, ServerName::DnsName(_)));
        let empty = temp_file("empty", "no PEM here\n");
        let e = TlsClient::new(&opts(&empty), "localhost").unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
        let e = TlsClient::new(&opts(&good.with_file_name("gone.pem")), "localhost").unwrap_err();
        assert!(e.contains("--ca-file"), "{e}");
        for p in [good, empty] {
            std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
        }
        let insecure = TlsOptions {
            ca_file: None,
            insecure_skip_verify: true,
        };
        assert!(TlsClient::new(&insecure, "localhost").is_ok());
    }
}
