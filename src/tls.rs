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

/// Why serving TLS cannot be set up from its files, naming the file and what to fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file that cannot be read or parsed.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate file without a certificate in it.
    #[error("{}: no certificate in the file", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A private key of a kind rustls cannot sign with.
    #[error("{}: unusable private key: {source}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// A certificate and a key that are not a pair.
    #[error("{} and {}: {source}", cert.display(), key.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// A CA file holding a certificate that is not a CA's.
    #[error("{}: not a CA certificate: {source}", path.display())]
    NotCa {
        /// The CA file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// The client-certificate verifier cannot be built from the CAs.
    #[error("client CA: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// rustls refused the server configuration.
    #[error("TLS: {0}")]
    Config(#[source] rustls::Error),
}

fn read_error(path: &Path) -> impl FnOnce(rustls::pki_types::pem::Error) -> TlsError + '_ {
    move |source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads a PEM certificate chain and key into a key rustls can sign with.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(read_error(cert))?
        .collect::<Result<_, _>>()
        .map_err(read_error(cert))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert.to_path_buf(),
        });
    }
    let der = PrivateKeyDer::from_pem_file(key).map_err(read_error(key))?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&der).map_err(|source| TlsError::Key {
            path: key.to_path_buf(),
            source,
        })?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|source| TlsError::KeyMismatch {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            source,
        })?;
    Ok(certified)
}

/// Reads a PEM bundle of CA certificates.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(read_error(path))?;
    for cert in certs {
        let cert = cert.map_err(read_error(path))?;
        roots.add(cert).map_err(|source| TlsError::NotCa {
            path: path.to_path_buf(),
            source,
        })?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(roots)
}

/// The serving certificate, swapped in place when its files change: new handshakes use
/// the new one, established connections keep theirs.
#[derive(Debug)]
pub struct ReloadingCert(FollowedFiles<CertifiedKey>);

/// Files loaded into a `T` and loaded again when their size or modification time
/// changes: the serving certificate and the client CAs follow their files alike. Files
/// that do not load (half written, not matching) keep the old `T` in use, and are tried
/// again at the next check.
#[derive(Debug)]
struct FollowedFiles<T> {
    files: [Option<PathBuf>; 2],
    current: ArcSwap<T>,
    seen: Mutex<FileStamp>,
    load: fn([Option<&Path>; 2]) -> Result<T, TlsError>,
    kind: &'static FileKind,
}

/// How a [`FollowedFiles`] reports its reloads.
#[derive(Debug)]
struct FileKind {
    /// The counter, by result.
    metric: &'static str,
    /// Logged when new files are in use.
    reloaded: &'static str,
    /// Logged when changed files do not load.
    kept: &'static str,
}

const SERVING_CERTIFICATE: FileKind = FileKind {
    metric: "watchd_tls_certificate_reloads_total",
    reloaded: "serving certificate reloaded",
    kept: "serving certificate changed but does not load; keeping the old one",
};

const CLIENT_CAS: FileKind = FileKind {
    metric: "watchd_tls_client_ca_reloads_total",
    reloaded: "client CA files reloaded",
    kept: "client CA files changed but do not load; keeping the old roots",
};

impl<T> FollowedFiles<T> {
    /// Loads the files once; an error here stops the start.
    fn load(
        files: [Option<&Path>; 2],
        load: fn([Option<&Path>; 2]) -> Result<T, TlsError>,
        kind: &'static FileKind,
    ) -> Result<FollowedFiles<T>, TlsError> {
        let seen = stamp(files);
        let current = load(files)?;
        Ok(FollowedFiles {
            files: files.map(|f| f.map(Path::to_path_buf)),
            current: ArcSwap::from_pointee(current),
            seen: Mutex::new(seen),
            load,
            kind,
        })
    }

    fn paths(&self) -> [Option<&Path>; 2] {
        [self.files[0].as_deref(), self.files[1].as_deref()]
    }

    /// Reloads when the files changed; returns whether a new `T` is in use.
    fn reload_if_changed(&self) -> bool {
        let now = stamp(self.paths());
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if *seen == now {
            return false;
        }
        match (self.load)(self.paths()) {
            Ok(loaded) => {
                self.current.store(Arc::new(loaded));
                *seen = now;
                metrics::counter!(self.kind.metric, "result" => "success").increment(1);
                tracing::info!(files = ?self.paths(), "{}", self.kind.reloaded);
                true
            }
            Err(e) => {
                metrics::counter!(self.kind.metric, "result" => "failure").increment(1);
                tracing::warn!(error = %e, "{}", self.kind.kept);
                false
            }
        }
    }
}

/// What the files looked like when last loaded.
type FileStamp = [(Option<SystemTime>, u64); 2];

/// The size and modification time of each file (an absent or unreadable one, or none
/// given, reads as neither), to notice a change without reading the files.
fn stamp(paths: [Option<&Path>; 2]) -> FileStamp {
    paths.map(|p| match p.map(std::fs::metadata) {
        Some(Ok(m)) => (m.modified().ok(), m.len()),
        _ => (None, 0),
    })
}

/// Runs `reload` on the blocking pool every `every` until `stop` turns true: how both the
/// serving certificate and the client CAs follow their files.
async fn every_until(
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    reload: impl Fn() + Clone + Send + 'static,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
        let _ = tokio::task::spawn_blocking(reload.clone()).await;
    }
}

impl ReloadingCert {
    /// Loads the files once; an error here stops the start.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Arc<ReloadingCert>, TlsError> {
        fn load_pair([cert, key]: [Option<&Path>; 2]) -> Result<CertifiedKey, TlsError> {
            // Both are always given (ReloadingCert::load).
            load_certified_key(cert.unwrap_or(Path::new("")), key.unwrap_or(Path::new("")))
        }
        let files = [Some(cert_file), Some(key_file)];
        Ok(Arc::new(ReloadingCert(FollowedFiles::load(
            files,
            load_pair,
            &SERVING_CERTIFICATE,
        )?)))
    }

    /// Reloads when the files' size or modification time changed. A pair that does not
    /// load (a half-written file, a key that does not match) keeps the old one serving,
    /// and is tried again at the next check. Returns whether a new certificate is in use.
    pub fn reload_if_changed(&self) -> bool {
        self.0.reload_if_changed()
    }

    /// Checks the files every `every` until `stop` turns true.
    pub async fn watch_files(
        self: Arc<Self>,
        every: Duration,
        stop: tokio::sync::watch::Receiver<bool>,
    ) {
        every_until(every, stop, move || {
            self.reload_if_changed();
        })
        .await;
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current.load_full())
    }
}

/// The client-certificate verifiers of the two trust roots, reloaded when their files
/// change (kube-apiserver reloads `--client-ca-file` and the front-proxy CA alike): the
/// handshake and every classification use the roots loaded last.
#[derive(Debug, Clone, Default)]
pub struct ClientCertVerifiers {
    /// None when no client CA file is configured (no certificate is asked for).
    cas: Option<Arc<ReloadingCas>>,
}

/// The verifiers of one load of the CA files.
#[derive(Debug)]
struct Roots {
    /// `--client-ca-file`: certificates naming users.
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    /// `--requestheader-client-ca-file`: the front proxy's certificate.
    front_proxy: Option<Arc<dyn ClientCertVerifier>>,
    /// Either: what the handshake accepts.
    handshake: Arc<dyn ClientCertVerifier>,
}

/// The client CA files and the roots loaded from them.
type ReloadingCas = FollowedFiles<Roots>;

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

fn verifier(roots: RootCertStore) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    Ok(WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .allow_unauthenticated()
    .build()?)
}

impl Roots {
    fn load([client_ca, front_proxy]: [Option<&Path>; 2]) -> Result<Roots, TlsError> {
        let client_roots = client_ca.map(load_roots).transpose()?;
        let proxy_roots = front_proxy.map(load_roots).transpose()?;
        let mut both = RootCertStore::empty();
        for r in [&client_roots, &proxy_roots].into_iter().flatten() {
            both.roots.extend(r.roots.iter().cloned());
        }
        Ok(Roots {
            client_ca: client_roots.map(verifier).transpose()?,
            front_proxy: proxy_roots.map(verifier).transpose()?,
            handshake: verifier(both)?,
        })
    }
}

impl ClientCertVerifiers {
    /// Loads the CA files given; an error here stops the start.
    pub fn load(client_ca: Option<&Path>, front_proxy: Option<&Path>) -> Result<Self, TlsError> {
        if client_ca.is_none() && front_proxy.is_none() {
            return Ok(ClientCertVerifiers::default());
        }
        Ok(ClientCertVerifiers {
            cas: Some(Arc::new(FollowedFiles::load(
                [client_ca, front_proxy],
                Roots::load,
                &CLIENT_CAS,
            )?)),
        })
    }

    /// The verifier the handshake uses: accepts no certificate, or one that chains to
    /// either root set as loaded last; None when no client CA is configured (no
    /// certificate is asked for).
    fn handshake(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        self.cas
            .clone()
            .map(|cas| Arc::new(CurrentRoots(cas)) as Arc<dyn ClientCertVerifier>)
    }

    /// Which roots the chain the peer presented leads to now (it passed the handshake,
    /// so it led to at least one then; it may have expired, or its CA been removed,
    /// since). Run for every request, as kube-apiserver verifies the chain per request:
    /// a long HTTP/2 connection does not outlive its certificate.
    pub fn classify(&self, chain: &[CertificateDer<'_>]) -> Option<PeerCertificate> {
        let (leaf, intermediates) = chain.split_first()?;
        let now = UnixTime::now();
        let roots = self.cas.as_ref().map(|c| c.current.load_full());
        let ok = |v: Option<&Arc<dyn ClientCertVerifier>>| {
            v.is_some_and(|v| v.verify_client_cert(leaf, intermediates, now).is_ok())
        };
        Some(PeerCertificate {
            leaf: leaf.to_vec(),
            client_ca: ok(roots.as_ref().and_then(|r| r.client_ca.as_ref())),
            front_proxy: ok(roots.as_ref().and_then(|r| r.front_proxy.as_ref())),
        })
    }

    /// Reloads the CA files when their size or modification time changed. Files that
    /// do not load (half written, not a CA) keep the old roots, tried again at the next
    /// check. Returns whether new roots are in use.
    pub fn reload_if_changed(&self) -> bool {
        self.cas.as_ref().is_some_and(|cas| cas.reload_if_changed())
    }

    /// Checks the CA files every `every` until `stop` turns true.
    pub async fn watch_files(self, every: Duration, stop: tokio::sync::watch::Receiver<bool>) {
        if self.cas.is_none() {
            return;
        }
        every_until(every, stop, move || {
            self.reload_if_changed();
        })
        .await;
    }
}

/// The handshake's verifier: whichever roots were loaded last. It names no acceptable
/// CAs in its request (a list that must outlive a reload cannot be borrowed from one);
/// clients then offer their certificate whatever CA issued it, as Go's do.
#[derive(Debug)]
struct CurrentRoots(Arc<ReloadingCas>);

impl CurrentRoots {
    /// The handshake verifier of the roots loaded last.
    fn verifier(&self) -> Arc<dyn ClientCertVerifier> {
        self.0.current.load().handshake.clone()
    }
}

impl ClientCertVerifier for CurrentRoots {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        self.verifier()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

/// A TLS server configuration with the reloading certificate, the client verifier and
/// the ALPN protocols given.
pub fn server_config(
    cert: Arc<ReloadingCert>,
    verifiers: &ClientCertVerifiers,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let builder = match verifiers.handshake() {
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
        verifiers: ClientCertVerifiers,
        alpn: &[&[u8]],
    ) -> Result<TlsServing, TlsError> {
        let config = server_config(cert, &verifiers, alpn)?;
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
        let first = cert.0.current.load_full().cert[0].to_vec();
        assert_eq!(first, c1.der().to_vec());
        assert!(!cert.reload_if_changed(), "nothing changed");

        // A certificate whose key is not written yet does not load: the old one stays.
        let (c2, k2) = pki.leaf("two-with-a-longer-name", false);
        std::fs::write(pki.path("tls.crt"), c2.pem()).unwrap();
        assert!(!cert.reload_if_changed());
        assert_eq!(cert.0.current.load_full().cert[0].to_vec(), first);

        std::fs::write(pki.path("tls.key"), k2.serialize_pem()).unwrap();
        assert!(cert.reload_if_changed());
        assert_eq!(
            cert.0.current.load_full().cert[0].to_vec(),
            c2.der().to_vec()
        );
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
    fn changed_client_ca_files_are_loaded_and_broken_ones_keep_the_old_roots() {
        let old = Pki::new("old-ca");
        let new = Pki::new("new-ca");
        let ca_file = old.path("ca.crt");
        let v = ClientCertVerifiers::load(Some(&ca_file), None).unwrap();
        let (by_old, _) = old.leaf("alice", true);
        let (by_new, _) = new.leaf("bob", true);
        assert!(v.classify(&[by_old.der().clone()]).unwrap().client_ca);
        assert!(!v.classify(&[by_new.der().clone()]).unwrap().client_ca);
        assert!(!v.reload_if_changed(), "nothing changed");

        // Half written: the old roots stay.
        std::fs::write(&ca_file, "-----BEGIN CERTIFICATE-----\n").unwrap();
        assert!(!v.reload_if_changed());
        assert!(v.classify(&[by_old.der().clone()]).unwrap().client_ca);

        // Rotated: the new CA's certificates authenticate, the old one's no longer do,
        // for the handshake as for the classification.
        std::fs::copy(new.path("ca.crt"), &ca_file).unwrap();
        assert!(v.reload_if_changed());
        assert!(v.classify(&[by_new.der().clone()]).unwrap().client_ca);
        assert!(!v.classify(&[by_old.der().clone()]).unwrap().client_ca);
        let handshake = v.handshake().expect("a verifier");
        let now = UnixTime::now();
        assert!(handshake.verify_client_cert(by_new.der(), &[], now).is_ok());
        assert!(handshake
            .verify_client_cert(by_old.der(), &[], now)
            .is_err());
    }

    #[test]
    fn a_certificate_is_classified_at_each_call_so_it_expires_on_an_open_connection() {
        let users = Pki::new("users-ca");
        let v = ClientCertVerifiers::load(Some(&users.path("ca.crt")), None).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "short-lived");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let now = SystemTime::now();
        params.not_before = (now - Duration::from_secs(60)).into();
        params.not_after = (now + Duration::from_secs(2)).into();
        let cert = params.signed_by(&key, &users.issuer).unwrap();
        assert!(v.classify(&[cert.der().clone()]).unwrap().client_ca);
        std::thread::sleep(Duration::from_millis(3100));
        assert!(
            !v.classify(&[cert.der().clone()]).unwrap().client_ca,
            "expired since the first call"
        );
    }

    #[test]
    fn unreadable_files_are_named_in_the_error() {
        let pki = Pki::new("ca");
        let e = load_certified_key(&pki.path("missing.crt"), &pki.path("missing.key"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.crt"), "{e}");
        std::fs::write(pki.path("empty.pem"), "").unwrap();
        let e = load_roots(&pki.path("empty.pem")).unwrap_err().to_string();
        assert!(e.contains("no certificate"), "{e}");
    }
}
