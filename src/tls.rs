//! TLS for both APIs: a serving certificate reloaded when its files change, ALPN, and
//! client certificates verified against the client CA and the front-proxy CA separately,
//! so the authenticators know which one vouched for a peer.
//!
//! The handshake accepts any client certificate that chains to one of the configured CAs
//! (or none at all); which CA it chains to is decided after the handshake, per
//! connection, by [`ClientCertVerifiers::classify`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;

/// ALPN protocols of the Kubernetes API: HTTP/2 first, as kube-apiserver offers.
pub const ALPN_HTTP: &[&[u8]] = &[b"h2", b"http/1.1"];
/// ALPN protocols of the gRPC API.
pub const ALPN_GRPC: &[&[u8]] = &[b"h2"];

/// What serving TLS needs, from the command line.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// `--tls-cert-file`: the serving certificate chain, PEM.
    pub cert_file: PathBuf,
    /// `--tls-private-key-file`: its key, PEM.
    pub key_file: PathBuf,
    /// `--client-ca-file`: CAs whose client certificates authenticate users.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-client-ca-file`: CAs of the front proxy's client certificate.
    pub requestheader_ca_file: Option<PathBuf>,
}

/// Reads a PEM certificate chain and key into a key rustls can sign with.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("reading {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("reading {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no certificate in the file", cert.display()));
    }
    let der =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("reading {}: {e}", key.display()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|e| format!("{}: unusable private key: {e}", key.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| format!("{} and {}: {e}", cert.display(), key.display()))?;
    Ok(certified)
}

/// Reads a PEM bundle of CA certificates.
pub fn load_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("reading {}: {e}", path.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: not a CA certificate: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(roots)
}

/// The serving certificate, swapped in place when its files change: new handshakes use
/// the new one, established connections keep theirs.
#[derive(Debug)]
pub struct ReloadingCert {
    current: ArcSwap<CertifiedKey>,
    cert_file: PathBuf,
    key_file: PathBuf,
    seen: Mutex<FileStamp>,
}

/// What the files looked like when last loaded.
type FileStamp = [(Option<SystemTime>, u64); 2];

fn stamp(paths: [&Path; 2]) -> FileStamp {
    paths.map(|p| match std::fs::metadata(p) {
        Ok(m) => (m.modified().ok(), m.len()),
        Err(_) => (None, 0),
    })
}

impl ReloadingCert {
    /// Loads the files once; an error here stops the start.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Arc<ReloadingCert>, String> {
        let seen = stamp([cert_file, key_file]);
        let key = load_certified_key(cert_file, key_file)?;
        Ok(Arc::new(ReloadingCert {
            current: ArcSwap::from_pointee(key),
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            seen: Mutex::new(seen),
        }))
    }

    /// Reloads when the files' size or modification time changed. A pair that does not
    /// load (a half-written file, a key that does not match) keeps the old one serving,
    /// and is tried again at the next check. Returns whether a new certificate is in use.
    pub fn reload_if_changed(&self) -> bool {
        let now = stamp([&self.cert_file, &self.key_file]);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if *seen == now {
            return false;
        }
        match load_certified_key(&self.cert_file, &self.key_file) {
            Ok(key) => {
                self.current.store(Arc::new(key));
                *seen = now;
                metrics::counter!("watchd_tls_certificate_reloads_total", "result" => "success")
                    .increment(1);
                tracing::info!(cert = %self.cert_file.display(), "serving certificate reloaded");
                true
            }
            Err(e) => {
                metrics::counter!("watchd_tls_certificate_reloads_total", "result" => "failure")
                    .increment(1);
                tracing::warn!(error = %e, "serving certificate changed but does not load; keeping the old one");
                false
            }
        }
    }

    /// Checks the files every `every` until `stop` turns true.
    pub async fn watch_files(
        self: Arc<Self>,
        every: Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.changed() => return,
            }
            let me = self.clone();
            let _ = tokio::task::spawn_blocking(move || me.reload_if_changed()).await;
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The client-certificate verifiers of the two trust roots.
#[derive(Debug, Clone, Default)]
pub struct ClientCertVerifiers {
    /// `--client-ca-file`: certificates naming users.
    pub client_ca: Option<Arc<dyn ClientCertVerifier>>,
    /// `--requestheader-client-ca-file`: the front proxy's certificate.
    pub front_proxy: Option<Arc<dyn ClientCertVerifier>>,
}

/// Which trust roots a peer's certificate chains to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCertificate {
    /// The leaf certificate, DER.
    pub leaf: Vec<u8>,
    /// It chains to `--client-ca-file`.
    pub client_ca: bool,
    /// It chains to `--requestheader-client-ca-file`.
    pub front_proxy: bool,
}

fn verifier(roots: RootCertStore) -> Result<Arc<dyn ClientCertVerifier>, String> {
    WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| format!("client CA: {e}"))
}

impl ClientCertVerifiers {
    /// Loads the CA files given.
    pub fn load(client_ca: Option<&Path>, front_proxy: Option<&Path>) -> Result<Self, String> {
        Ok(ClientCertVerifiers {
            client_ca: client_ca
                .map(load_roots)
                .transpose()?
                .map(verifier)
                .transpose()?,
            front_proxy: front_proxy
                .map(load_roots)
                .transpose()?
                .map(verifier)
                .transpose()?,
        })
    }

    /// The verifier the handshake uses: accepts no certificate, or one that chains to
    /// either root set; None when no client CA is configured (no certificate is asked for).
    fn handshake(&self, files: &TlsFiles) -> Result<Option<Arc<dyn ClientCertVerifier>>, String> {
        let mut roots = RootCertStore::empty();
        for path in [&files.client_ca_file, &files.requestheader_ca_file]
            .into_iter()
            .flatten()
        {
            roots.roots.extend(load_roots(path)?.roots);
        }
        if roots.is_empty() {
            return Ok(None);
        }
        verifier(roots).map(Some)
    }

    /// Which roots the chain the peer presented leads to (it passed the handshake, so it
    /// leads to at least one).
    pub fn classify(&self, chain: &[CertificateDer<'_>]) -> Option<PeerCertificate> {
        let (leaf, intermediates) = chain.split_first()?;
        let now = UnixTime::now();
        let ok = |v: &Option<Arc<dyn ClientCertVerifier>>| {
            v.as_ref()
                .is_some_and(|v| v.verify_client_cert(leaf, intermediates, now).is_ok())
        };
        Some(PeerCertificate {
            leaf: leaf.to_vec(),
            client_ca: ok(&self.client_ca),
            front_proxy: ok(&self.front_proxy),
        })
    }
}

/// A TLS server configuration with the reloading certificate, the client verifier and
/// the ALPN protocols given.
pub fn server_config(
    cert: Arc<ReloadingCert>,
    files: &TlsFiles,
    verifiers: &ClientCertVerifiers,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match verifiers.handshake(files)? {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(cert);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// A listener's TLS: the acceptor and how to classify the client certificates it accepts.
#[derive(Clone)]
pub struct TlsServing {
    /// Performs handshakes.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// Classifies client certificates after the handshake.
    pub verifiers: ClientCertVerifiers,
}

impl TlsServing {
    /// TLS for a listener speaking `alpn`.
    pub fn new(
        cert: Arc<ReloadingCert>,
        files: &TlsFiles,
        verifiers: ClientCertVerifiers,
        alpn: &[&[u8]],
    ) -> Result<TlsServing, String> {
        let config = server_config(cert, files, &verifiers, alpn)?;
        Ok(TlsServing {
            acceptor: tokio_rustls::TlsAcceptor::from(config),
            verifiers,
        })
    }

    /// The server side of a TLS handshake on `io` from `peer`, bounded by
    /// [`crate::config::TLS_HANDSHAKE_TIMEOUT`]; None (counted in
    /// `watchd_tls_handshake_failures_total`) if it fails or times out.
    pub async fn handshake<IO>(
        &self,
        io: IO,
        peer: std::net::SocketAddr,
    ) -> Option<tokio_rustls::server::TlsStream<IO>>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let accept = self.acceptor.accept(io);
        let why = match tokio::time::timeout(crate::config::TLS_HANDSHAKE_TIMEOUT, accept).await {
            Ok(Ok(stream)) => return Some(stream),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".to_string(),
        };
        metrics::counter!("watchd_tls_handshake_failures_total").increment(1);
        tracing::debug!(%peer, error = %why, "TLS handshake failed");
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pki {
        dir: tempfile::TempDir,
        issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    }

    impl Pki {
        fn new(name: &str) -> Pki {
            let ca_key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let ca = params.self_signed(&ca_key).unwrap();
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
            Pki {
                dir,
                issuer: rcgen::Issuer::new(params, ca_key),
            }
        }

        fn leaf(&self, cn: &str, client: bool) -> (rcgen::Certificate, rcgen::KeyPair) {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            params.extended_key_usages = vec![if client {
                rcgen::ExtendedKeyUsagePurpose::ClientAuth
            } else {
                rcgen::ExtendedKeyUsagePurpose::ServerAuth
            }];
            (params.signed_by(&key, &self.issuer).unwrap(), key)
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }
    }

    #[test]
    fn a_changed_certificate_is_loaded_and_a_broken_one_keeps_the_old() {
        let pki = Pki::new("ca");
        let (c1, k1) = pki.leaf("one", false);
        std::fs::write(pki.path("tls.crt"), c1.pem()).unwrap();
        std::fs::write(pki.path("tls.key"), k1.serialize_pem()).unwrap();
        let cert = ReloadingCert::load(&pki.path("tls.crt"), &pki.path("tls.key")).unwrap();
        let first = cert.current.load_full().cert[0].to_vec();
        assert_eq!(first, c1.der().to_vec());
        assert!(!cert.reload_if_changed(), "nothing changed");

        // A certificate whose key is not written yet does not load: the old one stays.
        let (c2, k2) = pki.leaf("two-with-a-longer-name", false);
        std::fs::write(pki.path("tls.crt"), c2.pem()).unwrap();
        assert!(!cert.reload_if_changed());
        assert_eq!(cert.current.load_full().cert[0].to_vec(), first);

        std::fs::write(pki.path("tls.key"), k2.serialize_pem()).unwrap();
        assert!(cert.reload_if_changed());
        assert_eq!(cert.current.load_full().cert[0].to_vec(), c2.der().to_vec());
    }

    #[test]
    fn peers_are_classified_by_the_roots_they_chain_to() {
        let users = Pki::new("users-ca");
        let proxies = Pki::new("front-proxy-ca");
        let v =
            ClientCertVerifiers::load(Some(&users.path("ca.crt")), Some(&proxies.path("ca.crt")))
                .unwrap();
        let (alice, _) = users.leaf("alice", true);
        let (proxy, _) = proxies.leaf("front-proxy-client", true);
        let got = v.classify(&[alice.der().clone()]).unwrap();
        assert!(got.client_ca && !got.front_proxy);
        assert_eq!(got.leaf, alice.der().to_vec());
        let got = v.classify(&[proxy.der().clone()]).unwrap();
        assert!(!got.client_ca && got.front_proxy);
        // A server-only certificate is not a client certificate for either root.
        let (server, _) = users.leaf("server", false);
        let got = v.classify(&[server.der().clone()]).unwrap();
        assert!(!got.client_ca && !got.front_proxy);
        assert_eq!(v.classify(&[]), None);
    }

    #[test]
    fn unreadable_files_are_named_in_the_error() {
        let pki = Pki::new("ca");
        let e = load_certified_key(&pki.path("missing.crt"), &pki.path("missing.key")).unwrap_err();
        assert!(e.contains("missing.crt"), "{e}");
        std::fs::write(pki.path("empty.pem"), "").unwrap();
        let e = load_roots(&pki.path("empty.pem")).unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
    }
}
