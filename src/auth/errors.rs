//! What can go wrong in authentication and authorization: their configuration, once at
//! start ([`ConfigError`]: a flag's value or a file it names), and a call to a webhook,
//! per request ([`WebhookError`]: the token webhook's failure refuses the request, 401;
//! the authorization webhook's has no opinion, and fails it, 500, if no later mode
//! allows).
//!
//! Each names the flag or the webhook and what to fix; none holds a token or a key.

use std::fmt;
use std::path::PathBuf;

use x509_parser::error::{PEMError, X509Error};

use crate::client::{CallError, KubeconfigError};

/// Why the authentication or authorization flags, or a file they name, cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file a flag names cannot be read.
    #[error("--{flag}: reading {}: {source}", path.display())]
    Unreadable {
        /// The flag, without its dashes (`token-auth-file`).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why reading it failed.
        #[source]
        source: std::io::Error,
    },
    /// What is wrong inside a file a flag names.
    #[error("--{flag}: {}: {source}", path.display())]
    InFile {
        /// The flag, without its dashes.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        #[source]
        source: Box<ConfigError>,
    },
    /// A token file record with fewer than kube-apiserver's three columns.
    #[error(
        "record {record} must have at least 3 columns (token, user name, user uid), found {found}"
    )]
    ShortRecord {
        /// The record's number, from 1 (blank lines are not records).
        record: usize,
        /// How many columns it has.
        found: usize,
    },
    /// A quoted CSV field without its closing quote.
    #[error("line {line}: unterminated quoted field")]
    UnterminatedQuote {
        /// The line it ends on, from 1.
        line: usize,
    },
    /// Text between a quoted CSV field's closing quote and the next comma.
    #[error("line {line}: extraneous text after a quoted field")]
    TextAfterQuote {
        /// The line, from 1.
        line: usize,
    },
    /// A quote inside a CSV field that does not begin with one (write it as `""` in a
    /// quoted field).
    #[error("line {line}: bare \" in a non-quoted field")]
    BareQuote {
        /// The line, from 1.
        line: usize,
    },
    /// One of the `--service-account-key-file` texts (numbered from 1, in the flags'
    /// order) holds no usable key.
    #[error("--service-account-key-file number {number}: {source}")]
    ServiceAccountKeys {
        /// Which of the files, from 1.
        number: usize,
        /// What is wrong in it.
        #[source]
        source: Box<ConfigError>,
    },
    /// Text that does not read as PEM.
    #[error("not PEM: {0}")]
    NotPem(#[source] PEMError),
    /// A `CERTIFICATE` block that is not an X.509 certificate.
    #[error("certificate: {0}")]
    Certificate(#[source] x509_parser::nom::Err<X509Error>),
    /// A PEM block that is neither a public key nor a certificate (a private key, say).
    #[error("a {0:?} block: give the public key or a certificate")]
    NotAPublicKey(String),
    /// A public key of an algorithm ServiceAccount tokens are not signed with.
    #[error("a public key that is neither RSA nor ECDSA")]
    UnsupportedKey,
    /// A key file without any public key.
    #[error("no public key in the file")]
    NoPublicKey,
    /// An `--authorization-mode` kube-apiserver has but watchd does not (`Node`, `ABAC`).
    #[error(
        "--authorization-mode {0} is not supported by watchd (use AlwaysAllow, AlwaysDeny, RBAC or Webhook)"
    )]
    UnsupportedMode(String),
    /// An `--authorization-mode` no one has (the names are case-sensitive).
    #[error("unknown --authorization-mode {0:?} (use AlwaysAllow, AlwaysDeny, RBAC or Webhook)")]
    UnknownMode(String),
    /// A mode listed twice in `--authorization-mode`.
    #[error("--authorization-mode lists {0} twice")]
    RepeatedMode(String),
    /// `--authorization-mode` names no mode.
    #[error("--authorization-mode is empty")]
    NoMode,
    /// The RBAC mode without the cache it reads Roles and bindings from.
    #[error("RBAC authorization needs the cache")]
    RbacWithoutCache,
    /// The Webhook mode without the webhook's kubeconfig.
    #[error("--authorization-mode Webhook needs --authorization-webhook-config-file")]
    WebhookWithoutConfig,
    /// A `--*-webhook-version` other than `v1` and `v1beta1`.
    #[error("{flag}: unsupported version {version:?}, supported versions are \"v1\", \"v1beta1\"")]
    UnsupportedVersion {
        /// The flag, with its dashes.
        flag: &'static str,
        /// The version given.
        version: String,
    },
    /// The serving certificate or a client CA file cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// One of the serving certificate's two flags without the other.
    #[error("--tls-cert-file and --tls-private-key-file go together")]
    TlsPair,
    /// A non-loopback address to serve without TLS and an authenticator: every object,
    /// Secrets included, would be open to anyone who reaches it.
    #[error(
        "refusing to serve every object, Secrets included, on {addresses} without TLS and authentication: \
         add --tls-cert-file and --tls-private-key-file, and at least one of --client-ca-file, \
         --token-auth-file, --service-account-key-file, --authentication-token-webhook-config-file \
         or --requestheader-client-ca-file \
         (or listen on 127.0.0.1; --insecure-allow-any-address for a lab)"
    )]
    PublicWithoutSecurity {
        /// The addresses, comma separated.
        addresses: String,
    },
    /// `--authorization-webhook-config-file` while no mode asks for the webhook.
    #[error(
        "--authorization-webhook-config-file is given but --authorization-mode does not list Webhook"
    )]
    WebhookNotListed,
    /// A webhook's kubeconfig gives an endpoint no client can be made for.
    #[error("--{flag} {}: {source}", path.display())]
    WebhookClient {
        /// The flag naming the kubeconfig, without its dashes.
        flag: &'static str,
        /// The kubeconfig.
        path: PathBuf,
        /// What is wrong with its endpoint.
        #[source]
        source: KubeconfigError,
    },
    /// A webhook's kubeconfig cannot be read or used.
    #[error("--{flag}: {source}")]
    WebhookConfig {
        /// The flag naming the kubeconfig, without its dashes.
        flag: &'static str,
        /// What is wrong with it.
        #[source]
        source: KubeconfigError,
    },
}

/// Which webhook a [`WebhookError`] is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    /// The TokenReview webhook (`--authentication-token-webhook-config-file`).
    Authentication,
    /// The SubjectAccessReview webhook (`--authorization-webhook-config-file`).
    Authorization,
}

impl Webhook {
    /// Posts the review `body` to `client` and decodes its answer as `T`: the one
    /// exchange of both webhooks, with their errors.
    pub(crate) async fn exchange<T: serde::de::DeserializeOwned>(
        self,
        client: &crate::client::ApiClient,
        body: bytes::Bytes,
    ) -> Result<T, WebhookError> {
        let answer = client
            .post_json(body)
            .await
            .map_err(|source| WebhookError::Call {
                webhook: self,
                source,
            })?;
        serde_json::from_slice(&answer).map_err(|source| WebhookError::Undecodable {
            webhook: self,
            source,
        })
    }

    /// The kind of the review it exchanges.
    pub fn review(self) -> &'static str {
        match self {
            Webhook::Authentication => "TokenReview",
            Webhook::Authorization => "SubjectAccessReview",
        }
    }
}

impl fmt::Display for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Webhook::Authentication => "webhook token authenticator",
            Webhook::Authorization => "webhook authorizer",
        })
    }
}

/// Why a webhook gave no answer to a request.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The call failed: no connection, no answer in time, an answer other than 2xx
    /// (after the retries a transient failure gets).
    #[error("{webhook}: {source}")]
    Call {
        /// The webhook called.
        webhook: Webhook,
        /// Why the call failed.
        #[source]
        source: CallError,
    },
    /// The answer is not the review asked for (not JSON, or fields of the wrong type).
    #[error("{webhook}: undecodable {}: {source}", webhook.review())]
    Undecodable {
        /// The webhook that answered.
        webhook: Webhook,
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
    },
    /// The token webhook answered "not authenticated" with an error (its
    /// `status.error`, shown as it is, as kube-apiserver shows it).
    #[error("{0}")]
    Reported(String),
}
