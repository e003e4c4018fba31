//! The HTTP client watchd itself uses to call out: the authentication and authorization
//! webhooks (TokenReview, SubjectAccessReview), configured by kubeconfig files as
//! kube-apiserver's are. TLS is rustls (the ring provider, as everywhere in watchd),
//! HTTP/2 when the server offers it by ALPN, connections pooled.
//!
//! Calls are retried as client-go's webhook client retries them: on a connection error,
//! a timeout, a 429, a 5xx or any answer with `Retry-After`, with exponential backoff
//! (500 ms × 1.5, jittered, five attempts in all).
//!
//! Two errors, for two questions: [`KubeconfigError`] (`kubeconfig.rs`) says why a
//! client cannot be built from its configuration, [`CallError`] why a call failed.

pub mod kubeconfig;
pub mod upstream;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

pub use self::kubeconfig::{Endpoint, KubeconfigError, Token};

/// How long one attempt may take (connect, send, and read the whole answer).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a `tokenFile` is read again (client-go re-reads it about once a minute, so
/// a rotated projected token is picked up).
const TOKEN_FILE_REFRESH: Duration = Duration::from_secs(60);

/// The backoff between attempts, as kube-apiserver's webhooks use by default.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// Each delay is the last times this.
    pub factor: f64,
    /// Up to this fraction of each delay is added at random.
    pub jitter: f64,
    /// Attempts in all.
    pub steps: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            factor: 1.5,
            jitter: 0.2,
            steps: 5,
        }
    }
}

/// A cause from the HTTP stack (hyper, hyper-util, a body), whose type varies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a call failed. Logs show only `Display`, so a transport error's text is its
/// whole chain of causes (hyper's own text alone says little: "client error (Connect)").
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Could not connect, or the connection broke.
    #[error("{}", error_chain(.0.as_ref()))]
    Transport(#[source] BoxError),
    /// The answer's body could not be read (the connection broke, or it was too long).
    #[error("reading the answer: {0}")]
    Body(#[source] BoxError),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The `tokenFile` cannot be read, and no token was read from it before.
    #[error("tokenFile {}: {source}", path.display())]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why reading it failed.
        #[source]
        source: std::io::Error,
    },
    /// The bearer token holds characters a header cannot carry.
    #[error(
        "the bearer token is not a valid header value (check the kubeconfig's token or tokenFile)"
    )]
    InvalidToken,
    /// The request cannot be built: a path and query that is no URI, or a bad header.
    #[error("{target:?}: {source}")]
    Request {
        /// The URI, or the path and query, asked for.
        target: String,
        /// Why it cannot be sent.
        #[source]
        source: http::Error,
    },
    /// An answer other than 2xx.
    #[error("the server answered {code}: {body}")]
    Status {
        /// The HTTP status.
        code: u16,
        /// The start of the body, for the log.
        body: String,
        /// Whether it asked to retry (`Retry-After`).
        retry_after: bool,
    },
}

impl CallError {
    /// Whether another attempt may succeed, as client-go's webhook decides.
    fn transient(&self) -> bool {
        match self {
            // A token file being rotated may be readable, or valid, at the next attempt.
            CallError::Transport(_)
            | CallError::Body(_)
            | CallError::Timeout(_)
            | CallError::TokenFile { .. }
            | CallError::InvalidToken => true,
            CallError::Request { .. } => false,
            CallError::Status {
                code, retry_after, ..
            } => *retry_after || *code == 429 || *code >= 500,
        }
    }
}

/// A client of one server, from a kubeconfig's endpoint.
pub struct ApiClient {
    uri: Uri,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    token: Option<TokenSource>,
    backoff: Backoff,
}

impl ApiClient {
    /// A client for `endpoint`; fails on unreadable certificates or keys.
    pub fn new(endpoint: &Endpoint) -> Result<ApiClient, KubeconfigError> {
        let uri: Uri = endpoint
            .server
            .parse()
            .map_err(|source| KubeconfigError::ServerUrl {
                server: endpoint.server.clone(),
                source,
            })?;
        let connector = connector(endpoint, false, HttpConnector::new())?;
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Ok(ApiClient {
            uri,
            http,
            token: endpoint.token.as_ref().map(TokenSource::new),
            backoff: Backoff::default(),
        })
    }

    /// The same client with another backoff (tests use a short one).
    pub fn with_backoff(mut self, backoff: Backoff) -> ApiClient {
        self.backoff = backoff;
        self
    }

    /// POSTs `body` (JSON) to the server URL itself, as kube-apiserver's webhooks do,
    /// retrying transient failures; the answer's body on a 2xx.
    pub async fn post_json(&self, body: Bytes) -> Result<Bytes, CallError> {
        let mut delay = self.backoff.initial;
        let mut attempt = 1;
        loop {
            let started = Instant::now();
            let result = self.attempt(body.clone()).await;
            let code = match &result {
                Ok(_) => "200".to_string(),
                Err(CallError::Status { code, .. }) => code.to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics::counter!("watchd_webhook_requests_total", "code" => code.clone()).increment(1);
            metrics::histogram!("watchd_webhook_request_duration_seconds", "code" => code)
                .record(started.elapsed().as_secs_f64());
            match result {
                Err(e) if e.transient() && attempt < self.backoff.steps => {
                    let jitter = 1.0 + self.backoff.jitter * fraction();
                    tokio::time::sleep(delay.mul_f64(jitter)).await;
                    delay = delay.mul_f64(self.backoff.factor);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn attempt(&self, body: Bytes) -> Result<Bytes, CallError> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .header(
                header::USER_AGENT,
                concat!("watchd/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(body))
            .map_err(|source| CallError::Request {
                target: self.uri.to_string(),
                source,
            })?;
        if let Some(token) = &self.token {
            req.headers_mut()
                .insert(header::AUTHORIZATION, token.header()?);
        }
        let call = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| CallError::Transport(Box::new(e)))?;
            let status = resp.status();
            let retry_after = resp.headers().contains_key(header::RETRY_AFTER);
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| CallError::Body(Box::new(e)))?
                .to_bytes();
            if status.is_success() {
                return Ok(body);
            }
            Err(CallError::Status {
                code: status.as_u16(),
                body: String::from_utf8_lossy(&body[..body.len().min(256)]).into_owned(),
                retry_after: retry_after || status == StatusCode::TOO_MANY_REQUESTS,
            })
        };
        tokio::time::timeout(ATTEMPT_TIMEOUT, call)
            .await
            .map_err(|_| CallError::Timeout(ATTEMPT_TIMEOUT))?
    }
}

/// The connector of `endpoint` (http:// or https:// with its TLS and server name) over
/// `tcp`: HTTP/2 by ALPN as well as HTTP/1.1, or HTTP/1.1 alone with `http1_only`.
pub fn connector(
    endpoint: &Endpoint,
    http1_only: bool,
    mut tcp: HttpConnector,
) -> Result<HttpsConnector<HttpConnector>, KubeconfigError> {
    // TLS is layered on top: the TCP connector must take https:// URLs too.
    tcp.enforce_http(false);
    // ALPN is set by the builder: HTTP/1.1 alone, or h2 first.
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(endpoint)?)
        .https_or_http();
    let builder = match &endpoint.tls_server_name {
        Some(name) => {
            let name = ServerName::try_from(name.clone()).map_err(|source| {
                KubeconfigError::TlsServerName {
                    name: name.clone(),
                    source,
                }
            })?;
            builder.with_server_name_resolver(FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    Ok(if http1_only {
        builder.enable_http1().wrap_connector(tcp)
    } else {
        builder.enable_all_versions().wrap_connector(tcp)
    })
}

/// A number in [0, 1) that differs from call to call; jitter needs no better.
fn fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

/// `e`'s text followed by each of its causes'.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// A bearer token, re-read from its file once a minute.
struct TokenSource {
    token: Token,
    cached: Mutex<Option<(Instant, String)>>,
}

impl TokenSource {
    fn new(token: &Token) -> TokenSource {
        TokenSource {
            token: token.clone(),
            cached: Mutex::new(None),
        }
    }

    /// The `Authorization` header carrying the token.
    fn header(&self) -> Result<HeaderValue, CallError> {
        HeaderValue::from_str(&format!("Bearer {}", self.get()?))
            .map_err(|_| CallError::InvalidToken)
    }

    fn get(&self) -> Result<String, CallError> {
        let path = match &self.token {
            Token::Value(t) => return Ok(t.clone()),
            Token::File(path) => path,
        };
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, t)) = cached.as_ref() {
            if at.elapsed() < TOKEN_FILE_REFRESH {
                return Ok(t.clone());
            }
        }
        match std::fs::read_to_string(path) {
            Ok(t) => {
                let t = t.trim().to_string();
                *cached = Some((Instant::now(), t.clone()));
                Ok(t)
            }
            // A file being rotated: keep using the last token read.
            Err(source) => match cached.as_ref() {
                Some((_, t)) => Ok(t.clone()),
                None => Err(CallError::TokenFile {
                    path: path.clone(),
                    source,
                }),
            },
        }
    }
}

/// The TLS client configuration of `endpoint` (its CA, or the system's, or none with
/// `insecure-skip-tls-verify`, and its client certificate); no ALPN set.
pub fn tls_config(endpoint: &Endpoint) -> Result<rustls::ClientConfig, KubeconfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(KubeconfigError::Tls)?;
    let builder = if endpoint.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        builder.with_root_certificates(roots(endpoint.ca_pem.as_deref())?)
    };
    match &endpoint.client_cert {
        Some((cert, key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<_, _>>()
                .map_err(|source| KubeconfigError::Pem {
                    what: "client certificate",
                    source,
                })?;
            if chain.is_empty() {
                return Err(KubeconfigError::NoCertificate {
                    what: "client certificate",
                });
            }
            let key =
                PrivateKeyDer::from_pem_slice(key).map_err(|source| KubeconfigError::Pem {
                    what: "client key",
                    source,
                })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(KubeconfigError::ClientCertificate)
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

/// The CAs of the kubeconfig, or the system's when it names none (as Go does).
fn roots(ca_pem: Option<&[u8]>) -> Result<rustls::RootCertStore, KubeconfigError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_pem {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|source| KubeconfigError::Pem {
                    what: "certificate-authority",
                    source,
                })?;
                roots
                    .add(cert)
                    .map_err(KubeconfigError::CertificateAuthority)?;
            }
            if roots.is_empty() {
                return Err(KubeconfigError::NoCertificate {
                    what: "certificate-authority",
                });
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                tracing::warn!(
                    "no certificate-authority given and no system CA found: https servers cannot be verified"
                );
            }
        }
    }
    Ok(roots)
}

/// `insecure-skip-tls-verify`: any certificate is accepted, signatures are still checked.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A server on loopback answering each request with the next of `answers` (the
    /// last one repeats); returns its URL and how many requests it got.
    async fn server(answers: Vec<(u16, &'static str)>) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/review", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let answers = answers.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let svc =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            let n = seen.fetch_add(1, Ordering::SeqCst);
                            let (code, body) = answers[n.min(answers.len() - 1)];
                            let auth = req.headers().get(header::AUTHORIZATION).cloned();
                            async move {
                                let mut r =
                                    http::Response::new(Full::new(Bytes::from(match auth {
                                        Some(a) => {
                                            format!("{body} {}", a.to_str().unwrap_or_default())
                                        }
                                        None => body.to_string(),
                                    })));
                                *r.status_mut() = StatusCode::from_u16(code).unwrap();
                                Ok::<_, std::convert::Infallible>(r)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        (url, count)
    }

    fn quick() -> Backoff {
        Backoff {
            initial: Duration::from_millis(1),
            factor: 1.0,
            jitter: 0.0,
            steps: 3,
        }
    }

    fn client(url: &str, token: Option<Token>) -> ApiClient {
        let e = Endpoint {
            server: url.into(),
            token,
            ..Endpoint::default()
        };
        ApiClient::new(&e).unwrap().with_backoff(quick())
    }

    #[tokio::test]
    async fn transient_failures_are_retried_and_the_token_is_sent() {
        let (url, count) = server(vec![(500, "no"), (429, "busy"), (200, "ok")]).await;
        let c = client(&url, Some(Token::Value("s3cret".into())));
        let body = c.post_json(Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(&body[..], b"ok Bearer s3cret");
        assert_eq!(count.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_client_error_is_not_retried_and_attempts_are_bounded() {
        let (url, count) = server(vec![(403, "denied")]).await;
        let e = client(&url, None)
            .post_json(Bytes::new())
            .await
            .unwrap_err();
        assert!(matches!(e, CallError::Status { code: 403, .. }), "{e}");
        assert_eq!(count.load(Ordering::SeqCst), 1);
        let (url, count) = server(vec![(503, "down")]).await;
        let e = client(&url, None)
            .post_json(Bytes::new())
            .await
            .unwrap_err();
        assert!(matches!(e, CallError::Status { code: 503, .. }), "{e}");
        assert_eq!(count.load(Ordering::SeqCst), 3, "steps bound the attempts");
    }

    #[tokio::test]
    async fn a_token_file_is_read_and_a_refused_connection_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t"), "from-file\n").unwrap();
        let (url, _) = server(vec![(200, "ok")]).await;
        let c = client(&url, Some(Token::File(dir.path().join("t"))));
        let body = c.post_json(Bytes::new()).await.unwrap();
        assert_eq!(&body[..], b"ok Bearer from-file");
        // Nothing listens on a port just released.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", l.local_addr().unwrap());
        drop(l);
        let e = client(&url, None)
            .post_json(Bytes::new())
            .await
            .unwrap_err();
        assert!(matches!(e, CallError::Transport(_)), "{e}");
        // The log line says why, from the whole chain, and the cause stays reachable.
        assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
        assert!(std::error::Error::source(&e).is_some(), "{e:?}");
        // A token file never read is named.
        let missing = dir.path().join("gone");
        let e = client(&url, Some(Token::File(missing.clone())))
            .post_json(Bytes::new())
            .await
            .unwrap_err();
        assert!(matches!(e, CallError::TokenFile { .. }), "{e}");
        assert!(e.to_string().contains(&*missing.to_string_lossy()), "{e}");
    }
}
