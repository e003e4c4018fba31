//! TLS for `https://` targets: rustls with the ring provider (the one the
//! workspace already uses), the server verified against `--ca-file` (or a
//! kubeconfig's `certificate-authority[-data]`, or the system's roots when a
//! kubeconfig names none, as kubectl) or, with `--insecure-skip-tls-verify`,
//! not at all (the handshake's signatures are still checked, so the
//! connection is TLS all the same). A kubeconfig's client certificate is
//! presented when the server asks (TLS client authentication). The server
//! name sent (SNI) and verified is the URL's host, or the kubeconfig's
//! `tls-server-name`; ALPN offers exactly the protocol the watchers speak.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use crate::endpoint::{Protocol, Scheme};

/// A client certificate chain and its private key, PEM: TLS client
/// authentication (the key is never printed).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The certificate chain.
    pub cert_pem: Vec<u8>,
    /// Its private key.
    pub key_pem: Vec<u8>,
}

impl fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ClientCert({} B of certificate, key redacted)",
            self.cert_pem.len()
        )
    }
}

/// How the server of an `https://` target is verified, and what the client
/// shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM bundle of the CAs the server's certificate must chain to.
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate (kubectl's `--insecure-skip-tls-verify`).
    pub insecure_skip_verify: bool,
    /// The CAs as PEM read from a kubeconfig (`certificate-authority-data`,
    /// or the file `certificate-authority` names).
    pub ca_pem: Option<Vec<u8>>,
    /// A client certificate to present (a kubeconfig's user).
    pub client_cert: Option<ClientCert>,
    /// The name to verify the server's certificate against instead of the
    /// URL's host (a kubeconfig's `tls-server-name`).
    pub server_name: Option<String>,
    /// The kubeconfig these settings come from (its rules apply: no CA
    /// means the system's roots; errors name the file).
    pub kubeconfig: Option<PathBuf>,
}

impl TlsOptions {
    /// Whether any TLS option of the command line is set.
    pub fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.insecure_skip_verify
    }

    /// Where the settings come from, for messages.
    fn origin(&self) -> String {
        match &self.kubeconfig {
            Some(k) => format!("kubeconfig {}", k.display()),
            None => "--ca-file".into(),
        }
    }

    /// Refuses options that do not fit a URL of `scheme`: TLS options on
    /// `http://`, none or both on `https://` (kubectl refuses both too). A
    /// kubeconfig's settings follow client-go: its CA and
    /// `insecure-skip-tls-verify` together are refused, neither means the
    /// system's roots, and on `http://` they are not used.
    pub fn check_for(&self, scheme: Scheme) -> Result<(), String> {
        if let Some(k) = &self.kubeconfig {
            let ca = self.ca_pem.is_some() || self.ca_file.is_some();
            if scheme == Scheme::Https && ca && self.insecure_skip_verify {
                return Err(format!(
                    "kubeconfig {}: certificate-authority and insecure-skip-tls-verify \
                     together (client-go refuses them too)",
                    k.display()
                ));
            }
            return Ok(());
        }
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
    /// host (a DNS name, or an IP address matched against IP SANs), or the
    /// kubeconfig's `tls-server-name`.
    pub server_name: ServerName<'static>,
    /// Whether a client certificate is presented.
    pub client_auth: bool,
    http1: Arc<ClientConfig>,
    http2: Arc<ClientConfig>,
}

impl TlsClient {
    /// Loads the CAs (if any) and the client certificate (if any) and
    /// builds the configurations for `host`.
    pub fn new(options: &TlsOptions, host: &str) -> Result<Self, String> {
        options.check_for(Scheme::Https)?;
        let name = options.server_name.as_deref().unwrap_or(host);
        let server_name = ServerName::try_from(name.to_string())
            .map_err(|e| format!("{name:?} is not a TLS server name: {e}"))?;
        // watchd's own client TLS: the same CA reading, the same verifier for
        // --insecure-skip-tls-verify (which still checks the handshake's
        // signatures) and the same client certificate loading.
        let ca_pem = match (&options.ca_pem, &options.ca_file) {
            (Some(pem), _) => Some(pem.clone()),
            (None, Some(path)) => Some(
                std::fs::read(path)
                    .map_err(|e| format!("{} {}: {e}", options.origin(), path.display()))?,
            ),
            (None, None) => None,
        };
        let endpoint = watchd::client::Endpoint {
            ca_pem,
            insecure_skip_tls_verify: options.insecure_skip_verify,
            client_cert: options
                .client_cert
                .as_ref()
                .map(|c| (c.cert_pem.clone(), c.key_pem.clone())),
            ..Default::default()
        };
        let config = |protocol: Protocol| -> Result<Arc<ClientConfig>, String> {
            let mut c = watchd::client::tls_config(&endpoint).map_err(|e| {
                match (&options.kubeconfig, &options.ca_file) {
                    (Some(_), _) => format!("{}: {e}", options.origin()),
                    (None, Some(path)) => format!("--ca-file {}: {e}", path.display()),
                    (None, None) => e.to_string(),
                }
            })?;
            c.alpn_protocols = vec![protocol.alpn().to_vec()];
            Ok(Arc::new(c))
        };
        Ok(Self {
            server_name,
            client_auth: options.client_cert.is_some(),
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
            ..TlsOptions::default()
        };
        let insecure = TlsOptions {
            insecure_skip_verify: true,
            ..TlsOptions::default()
        };
        let both = TlsOptions {
            ca_file: Some("ca.pem".into()),
            insecure_skip_verify: true,
            ..TlsOptions::default()
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
            ..TlsOptions::default()
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
            insecure_skip_verify: true,
            ..TlsOptions::default()
        };
        assert!(TlsClient::new(&insecure, "localhost").is_ok());
    }
}
