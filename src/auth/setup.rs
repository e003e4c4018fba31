//! From the command line to the serving TLS, the authenticators and the authorizers, and
//! the safe-default rule: a non-loopback address needs TLS and an authenticator.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::authn::Authenticator;
use super::authz::{Authorizer, Mode};
use super::authz_webhook::AuthzWebhook;
use super::cached::{CacheLookup, RbacCache};
use super::request_header::RequestHeaderConfig;
use super::service_account::ServiceAccountAuthenticator;
use super::token_file::TokenFile;
use super::token_webhook::{ReviewVersion, TokenWebhook};
use super::{ConfigError, Security};
use crate::client::{kubeconfig, ApiClient};
use crate::config::parse_duration;
use crate::store::Cache;
use crate::tls::{self, ClientCertVerifiers, ReloadingCert, TlsServing};

/// Secure serving, authentication and authorization; flags as kube-apiserver names them.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct SecureArgs {
    /// Serving certificate (PEM, with its chain). With it both addresses speak TLS only
    /// (HTTP/2 and HTTP/1.1 by ALPN); the files are re-read when they change.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    #[arg(help_heading = "Serving")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    #[arg(help_heading = "Serving")]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA bundle: a client certificate signed by it authenticates its common name as the
    /// user and its organizations as the groups.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    #[arg(help_heading = "Authentication")]
    pub client_ca_file: Option<PathBuf>,
    /// CA bundle of the front proxy (aggregation layer): only a client certificate
    /// signed by it may assert the user in the request headers below.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    #[arg(help_heading = "Authentication")]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Common names the front proxy's certificate may have (empty: any).
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Authentication")]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the user, first present wins (`X-Remote-User` is common; none by
    /// default, as kube-apiserver).
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Authentication")]
    pub requestheader_username_headers: Vec<String>,
    /// Headers naming the groups (`X-Remote-Group` is common).
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Authentication")]
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers carrying extra user attributes (`X-Remote-Extra-` is common).
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Authentication")]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// Static bearer tokens, kube-apiserver's CSV format: token,user,uid,"group1,group2".
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Authentication")]
    pub token_auth_file: Option<PathBuf>,
    /// Public keys (PEM) verifying ServiceAccount tokens; repeatable.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Authentication")]
    pub service_account_key_file: Vec<PathBuf>,
    /// Issuers of ServiceAccount tokens accepted; repeatable.
    #[arg(long)]
    #[arg(help_heading = "Authentication")]
    pub service_account_issuer: Vec<String>,
    /// Audiences a bound ServiceAccount token must name one of (default: the first
    /// issuer, as kube-apiserver).
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Authentication")]
    pub api_audiences: Vec<String>,
    /// kubeconfig of a TokenReview service that authenticates bearer tokens no other
    /// authenticator knows.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Authentication")]
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// How long the TokenReview service's answers are cached (0: not at all).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    #[arg(help_heading = "Authentication")]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// The authentication.k8s.io TokenReview version sent: v1 (kube-apiserver has served
    /// only v1 since 1.22) or v1beta1.
    #[arg(long, default_value = "v1")]
    #[arg(help_heading = "Authentication")]
    pub authentication_token_webhook_version: String,
    /// Serve requests without credentials as system:anonymous (group
    /// system:unauthenticated) instead of answering 401.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    #[arg(help_heading = "Authentication")]
    pub anonymous_auth: bool,
    /// Paths answered without authentication or authorization, as
    /// kube-controller-manager's flag of that name (a trailing `*` matches a prefix): the
    /// health endpoints by default, so that a probe depends neither on the credentials
    /// of whoever probes nor on RBAC objects, token or authorization webhooks (the
    /// apiserver) that watchd reports on. Paths of the API's resources are never exempt.
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    #[arg(help_heading = "Authorization and limits")]
    pub authorization_always_allow_paths: Vec<String>,
    /// Authorizers in order: AlwaysAllow, AlwaysDeny, RBAC (RBAC reads Roles and
    /// bindings from the cache), Webhook. Default: RBAC when any authenticator is
    /// configured.
    #[arg(long)]
    #[arg(help_heading = "Authorization and limits")]
    pub authorization_mode: Option<String>,
    /// kubeconfig of the SubjectAccessReview service of the Webhook mode.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Authorization and limits")]
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// The authorization.k8s.io SubjectAccessReview version sent: v1 (kube-apiserver has
    /// served only v1 since 1.22) or v1beta1.
    #[arg(long, default_value = "v1")]
    #[arg(help_heading = "Authorization and limits")]
    pub authorization_webhook_version: String,
    /// How long the Webhook mode's "allowed" answers are cached.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    #[arg(help_heading = "Authorization and limits")]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long the Webhook mode's other answers are cached.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    #[arg(help_heading = "Authorization and limits")]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Most watches one user may have open at once (0: no limit); more are answered 429.
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Authorization and limits")]
    pub max_watches_per_user: usize,
    /// Most lists one user may have in flight at once (0: no limit); more are answered 429.
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Authorization and limits")]
    pub max_inflight_lists_per_user: usize,
    /// Append one JSON line per request (audit.k8s.io/v1 Event, Metadata level) to this
    /// file.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "Audit")]
    pub audit_log_path: Option<PathBuf>,
    /// What a request does when the audit log's queue is full: `blocking` (the default,
    /// kube-apiserver's) waits until its line is queued, so no line is lost; `batch` goes
    /// on and drops the line (counted in watchd_audit_events_dropped_total).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = super::audit::AuditMode::Blocking)]
    #[arg(help_heading = "Audit")]
    pub audit_log_mode: super::audit::AuditMode,
    /// Audit lines queued for the file's writer (at least 1): past it a request waits
    /// (blocking mode) or its line is dropped (batch mode).
    #[arg(long, value_name = "LINES", default_value_t = crate::config::AUDIT_BUFFER_SIZE)]
    #[arg(help_heading = "Audit")]
    pub audit_log_batch_buffer_size: usize,
    /// Allow a non-loopback address without TLS and an authenticator (a lab only: every
    /// object, Secrets included, is served to anyone who reaches the port).
    #[arg(long, default_value_t = false)]
    #[arg(help_heading = "Serving")]
    pub insecure_allow_any_address: bool,
}

/// The TLS of both listeners.
pub struct ServingTls {
    /// The Kubernetes API (h2 and http/1.1).
    pub http: TlsServing,
    /// The gRPC API (h2).
    pub grpc: TlsServing,
}

impl SecureArgs {
    /// Whether any flag of secure serving or authentication is given.
    fn any_given(&self) -> bool {
        self.tls_cert_file.is_some()
            || self.token_auth_file.is_some()
            || !self.service_account_key_file.is_empty()
            || self.authentication_token_webhook_config_file.is_some()
            || self.anonymous_auth
            || self.authorization_mode.is_some()
    }
}

/// Builds what `args` ask for. Without any of these flags the daemon serves plain HTTP to
/// everyone, which is allowed on loopback addresses only (unless
/// `--insecure-allow-any-address`). `stop` ends the certificate reloader.
pub fn configure(
    args: &SecureArgs,
    cache: &Arc<Cache>,
    addresses: &[SocketAddr],
    stop: watch::Receiver<bool>,
) -> Result<(Option<Arc<Security>>, Option<ServingTls>), ConfigError> {
    let tls = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(cert), Some(key)) => {
            let reloading = ReloadingCert::load(cert, key)?;
            tokio::spawn(
                reloading
                    .clone()
                    .watch_files(crate::config::TLS_RELOAD_INTERVAL, stop.clone()),
            );
            let verifiers = ClientCertVerifiers::load(
                args.client_ca_file.as_deref(),
                args.requestheader_client_ca_file.as_deref(),
            )?;
            tokio::spawn(
                verifiers
                    .clone()
                    .watch_files(crate::config::TLS_RELOAD_INTERVAL, stop),
            );
            Some(ServingTls {
                http: TlsServing::new(reloading.clone(), verifiers.clone(), tls::ALPN_HTTP)?,
                grpc: TlsServing::new(reloading, verifiers, tls::ALPN_GRPC)?,
            })
        }
        (None, None) => None,
        _ => return Err(ConfigError::TlsPair),
    };
    let authenticator = authenticator(args, cache)?;
    let public: Vec<&SocketAddr> = addresses.iter().filter(|a| !a.ip().is_loopback()).collect();
    if !public.is_empty()
        && !args.insecure_allow_any_address
        && (tls.is_none() || !authenticator.has_authenticator())
    {
        return Err(ConfigError::PublicWithoutSecurity {
            addresses: public
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    if !args.any_given() && !authenticator.has_authenticator() {
        tracing::warn!("no authentication configured: every request is served (loopback only)");
        return Ok((None, tls));
    }
    let modes = match &args.authorization_mode {
        Some(list) => Mode::parse_list(list)?,
        None => vec![Mode::Rbac],
    };
    let rbac = modes
        .contains(&Mode::Rbac)
        .then(|| Arc::new(RbacCache::new(cache.clone())));
    let webhook = authorization_webhook(args, &modes)?;
    let authorizer = Authorizer::new(modes, rbac, webhook)?;
    tracing::info!(
        tls = tls.is_some(),
        client_certificates = authenticator.client_certificates,
        front_proxy = authenticator.request_header.is_some(),
        token_file = authenticator.token_file.is_some(),
        service_accounts = authenticator.service_accounts.is_some(),
        token_webhook = authenticator.token_webhook.is_some(),
        anonymous = authenticator.anonymous,
        authorization = %authorizer.modes().iter().map(|m| m.name()).collect::<Vec<_>>().join(","),
        "authentication and authorization"
    );
    Ok((
        Some(Arc::new(Security {
            authenticator,
            authorizer,
            always_allow_paths: args.authorization_always_allow_paths.clone(),
            limits: super::limits::UserLimits::new(
                args.max_watches_per_user,
                args.max_inflight_lists_per_user,
            ),
        })),
        tls,
    ))
}

/// The client of a webhook from its kubeconfig, `flag` naming it in errors.
fn webhook_client(path: &std::path::Path, flag: &'static str) -> Result<ApiClient, ConfigError> {
    let endpoint =
        kubeconfig::load(path).map_err(|source| ConfigError::WebhookConfig { flag, source })?;
    ApiClient::new(&endpoint).map_err(|source| ConfigError::WebhookClient {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

/// The SubjectAccessReview webhook, when the Webhook mode is asked for.
fn authorization_webhook(
    args: &SecureArgs,
    modes: &[Mode],
) -> Result<Option<Arc<AuthzWebhook>>, ConfigError> {
    const FLAG: &str = "authorization-webhook-config-file";
    let path = match (
        &args.authorization_webhook_config_file,
        modes.contains(&Mode::Webhook),
    ) {
        (Some(path), true) => path,
        (None, false) => return Ok(None),
        (None, true) => return Err(ConfigError::WebhookWithoutConfig),
        (Some(_), false) => return Err(ConfigError::WebhookNotListed),
    };
    let version = ReviewVersion::parse(
        &args.authorization_webhook_version,
        "--authorization-webhook-version",
    )?;
    Ok(Some(Arc::new(AuthzWebhook::new(
        webhook_client(path, FLAG)?,
        version,
        args.authorization_webhook_cache_authorized_ttl,
        args.authorization_webhook_cache_unauthorized_ttl,
    ))))
}

/// The API audiences: `--api-audiences`, else the first ServiceAccount issuer, as
/// kube-apiserver defaults them.
fn api_audiences(args: &SecureArgs) -> Vec<String> {
    if args.api_audiences.is_empty() {
        args.service_account_issuer
            .iter()
            .take(1)
            .cloned()
            .collect()
    } else {
        args.api_audiences.clone()
    }
}

fn authenticator(args: &SecureArgs, cache: &Arc<Cache>) -> Result<Authenticator, ConfigError> {
    let request_header = args
        .requestheader_client_ca_file
        .as_ref()
        .map(|_| RequestHeaderConfig {
            username_headers: args.requestheader_username_headers.clone(),
            group_headers: args.requestheader_group_headers.clone(),
            extra_headers_prefixes: args.requestheader_extra_headers_prefix.clone(),
            allowed_names: args.requestheader_allowed_names.clone(),
        });
    let token_file = match &args.token_auth_file {
        Some(path) => Some(TokenFile::load(path)?),
        None => None,
    };
    let service_accounts = if args.service_account_key_file.is_empty() {
        None
    } else {
        let mut pems = Vec::new();
        for path in &args.service_account_key_file {
            pems.push(
                std::fs::read_to_string(path).map_err(|source| ConfigError::Unreadable {
                    flag: "service-account-key-file",
                    path: path.clone(),
                    source,
                })?,
            );
        }
        let lookup = Arc::new(CacheLookup {
            cache: cache.clone(),
        });
        Some(Arc::new(ServiceAccountAuthenticator::new(
            &pems,
            args.service_account_issuer.clone(),
            args.api_audiences.clone(),
            lookup,
        )?))
    };
    let token_webhook = match &args.authentication_token_webhook_config_file {
        Some(path) => {
            let version = ReviewVersion::parse(
                &args.authentication_token_webhook_version,
                "--authentication-token-webhook-version",
            )?;
            Some(Arc::new(TokenWebhook::new(
                webhook_client(path, "authentication-token-webhook-config-file")?,
                version,
                api_audiences(args),
                args.authentication_token_webhook_cache_ttl,
            )))
        }
        None => None,
    };
    Ok(Authenticator {
        request_header,
        client_certificates: args.client_ca_file.is_some(),
        token_file,
        service_accounts,
        token_webhook,
        anonymous: args.anonymous_auth,
    })
}
