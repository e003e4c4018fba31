//! kubeconfig files, as client-go reads them for a non-interactive client: the current
//! context's cluster (server, CA, `insecure-skip-tls-verify`, `tls-server-name`) and user
//! (client certificate and key, `token` or `tokenFile`), with file paths relative to the
//! kubeconfig's own directory. kube-apiserver's webhook configuration files are
//! kubeconfigs read this way; so are the credentials of an upstream apiserver.
//!
//! Credentials that need a program or a browser (`exec`, `auth-provider`) and basic
//! auth are refused with a message that names them, rather than silently ignored.
//!
//! [`KubeconfigError`] says why a kubeconfig, or the endpoint it gives, cannot be used:
//! the file, the context, the credentials, the server URL, the certificates.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

/// Where to reach a server and how to prove who we are, from one kubeconfig context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// The server URL (`https://host:port[/path]`, or `http://`).
    pub server: String,
    /// PEM of the CAs that verify the server; None: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Skip verifying the server's certificate.
    pub insecure_skip_tls_verify: bool,
    /// The name to verify the server's certificate against, if not the URL's host.
    pub tls_server_name: Option<String>,
    /// PEM of the client certificate chain and its key.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// A bearer token.
    pub token: Option<Token>,
}

/// A bearer token: given in the file, or read from a file (re-read as it rotates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// `token:`.
    Value(String),
    /// `tokenFile:`.
    File(PathBuf),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    clusters: Vec<Named<Cluster>>,
    #[serde(default)]
    users: Vec<Named<User>>,
    #[serde(default)]
    contexts: Vec<Named<Context>>,
    #[serde(default)]
    current_context: Option<String>,
}

/// A `{name, <kind>}` entry: the entry's payload is under `cluster`, `user` or `context`.
#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context", default)]
    value: Option<T>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    #[serde(default)]
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    username: Option<String>,
    exec: Option<serde_json::Value>,
    auth_provider: Option<serde_json::Value>,
}

#[derive(Deserialize, Default, Clone)]
struct Context {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

/// Why a kubeconfig, or the endpoint read from it (or given as `--upstream-url`), cannot
/// be used. Each names what to fix: the file, the entry, the field.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The kubeconfig file cannot be read.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The kubeconfig.
        path: PathBuf,
        /// Why reading it failed.
        #[source]
        source: std::io::Error,
    },
    /// What is wrong inside the kubeconfig file at `path`.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The kubeconfig.
        path: PathBuf,
        /// What is wrong in it.
        #[source]
        source: Box<KubeconfigError>,
    },
    /// The text is not YAML of a kubeconfig (its first line of explanation is shown).
    #[error("{}", first_line(.0))]
    Yaml(#[source] Box<serde_saphyr::Error>),
    /// `current-context` names no context of the file.
    #[error("current-context {0:?} is not among the contexts")]
    NoSuchContext(String),
    /// Several contexts and none chosen.
    #[error("several contexts and no current-context")]
    SeveralContexts,
    /// The context names a cluster the file does not hold.
    #[error("cluster {0:?} is not among the clusters")]
    NoSuchCluster(String),
    /// The context names a user the file does not hold.
    #[error("user {0:?} is not among the users")]
    NoSuchUser(String),
    /// The file holds no cluster.
    #[error("no cluster")]
    NoCluster,
    /// Several clusters or users, and no context to choose.
    #[error("no current-context")]
    NoCurrentContext,
    /// The cluster has no `server`.
    #[error("the cluster has no server")]
    NoServer,
    /// The server URL is neither https:// nor http://.
    #[error("server {0:?}: only https:// and http:// URLs are supported")]
    UnsupportedScheme(String),
    /// The server is not a URL.
    #[error("server {server:?}: {source}")]
    ServerUrl {
        /// The server as given.
        server: String,
        /// Why it is not a URL.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The server is a URL, but not an absolute http:// or https:// one.
    #[error("server {0:?}: not an http:// or https:// URL")]
    NotHttpUrl(String),
    /// `proxy-url` is set.
    #[error("proxy-url is not supported")]
    ProxyUrl,
    /// The user authenticates with a program or a browser.
    #[error("exec and auth-provider credentials are not supported: use a client certificate, token or tokenFile")]
    ExecCredentials,
    /// The user authenticates with a username and password.
    #[error("basic authentication (username) is not supported")]
    BasicAuth,
    /// A `<what>-data` field is not base64.
    #[error("{what}-data: {source}")]
    Base64 {
        /// The field, without `-data`.
        what: &'static str,
        /// Why it does not decode.
        #[source]
        source: base64::DecodeError,
    },
    /// A file the kubeconfig names cannot be read.
    #[error("{what} {}: {source}", path.display())]
    NamedFile {
        /// The field naming it.
        what: &'static str,
        /// The file, taken from the kubeconfig's directory.
        path: PathBuf,
        /// Why reading it failed.
        #[source]
        source: std::io::Error,
    },
    /// One of `client-certificate` and `client-key` without the other.
    #[error("client-certificate and client-key go together")]
    CertificateWithoutKey,
    /// `tls-server-name` is not a DNS name or an IP address.
    #[error("tls-server-name {name:?}: {source}")]
    TlsServerName {
        /// The name as given.
        name: String,
        /// Why it is not a server name.
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS configuration cannot be built.
    #[error("TLS: {0}")]
    Tls(#[source] rustls::Error),
    /// A PEM field (`what`: certificate-authority, client certificate, client key) does
    /// not parse.
    #[error("{what}: {source}")]
    Pem {
        /// The field.
        what: &'static str,
        /// Why it does not parse.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A PEM field (`what`) holds no certificate.
    #[error("{what}: no certificate in it")]
    NoCertificate {
        /// The field.
        what: &'static str,
    },
    /// A certificate of `certificate-authority` is not usable as a root.
    #[error("certificate-authority: {0}")]
    CertificateAuthority(#[source] rustls::Error),
    /// The client certificate and key cannot be used together.
    #[error("client certificate: {0}")]
    ClientCertificate(#[source] rustls::Error),
}

/// The first line of `e`'s message: the YAML reader's explanation without its excerpt.
fn first_line(e: &serde_saphyr::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// Reads the kubeconfig at `path` into the endpoint of its current context.
pub fn load(path: &Path) -> Result<Endpoint, KubeconfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| KubeconfigError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse(&text, dir).map_err(|e| KubeconfigError::InFile {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

/// Parses kubeconfig `text`; relative file paths are taken from `dir`.
pub fn parse(text: &str, dir: &Path) -> Result<Endpoint, KubeconfigError> {
    let file: File = if text.trim().is_empty() {
        File::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| KubeconfigError::Yaml(Box::new(e)))?
    };
    let (cluster, user) = select(&file)?;
    endpoint(&cluster, &user, dir)
}

/// The current context's cluster and user. Without `current-context`, a file with one
/// context uses it, and a file with no context but one cluster (and at most one user)
/// uses those, as webhook configuration files often are written.
fn select(file: &File) -> Result<(Cluster, User), KubeconfigError> {
    let context = match &file.current_context {
        Some(name) if !name.is_empty() => Some(
            find(&file.contexts, name)
                .ok_or_else(|| KubeconfigError::NoSuchContext(name.clone()))?,
        ),
        _ => match file.contexts.as_slice() {
            [one] => Some(one.value.clone().unwrap_or_default()),
            [] => None,
            _ => return Err(KubeconfigError::SeveralContexts),
        },
    };
    let (cluster, user) = match context {
        Some(c) => (
            find(&file.clusters, &c.cluster)
                .ok_or_else(|| KubeconfigError::NoSuchCluster(c.cluster.clone()))?,
            if c.user.is_empty() {
                User::default()
            } else {
                find(&file.users, &c.user)
                    .ok_or_else(|| KubeconfigError::NoSuchUser(c.user.clone()))?
            },
        ),
        None => match (file.clusters.as_slice(), file.users.as_slice()) {
            ([c], []) => (c.value.clone().unwrap_or_default(), User::default()),
            ([c], [u]) => (
                c.value.clone().unwrap_or_default(),
                u.value.clone().unwrap_or_default(),
            ),
            ([], _) => return Err(KubeconfigError::NoCluster),
            _ => return Err(KubeconfigError::NoCurrentContext),
        },
    };
    Ok((cluster, user))
}

fn find<T: Clone + Default>(list: &[Named<T>], name: &str) -> Option<T> {
    list.iter()
        .find(|n| n.name == name)
        .map(|n| n.value.clone().unwrap_or_default())
}

fn endpoint(cluster: &Cluster, user: &User, dir: &Path) -> Result<Endpoint, KubeconfigError> {
    if cluster.server.is_empty() {
        return Err(KubeconfigError::NoServer);
    }
    if !(cluster.server.starts_with("https://") || cluster.server.starts_with("http://")) {
        return Err(KubeconfigError::UnsupportedScheme(cluster.server.clone()));
    }
    if cluster.proxy_url.is_some() {
        return Err(KubeconfigError::ProxyUrl);
    }
    if user.exec.is_some() || user.auth_provider.is_some() {
        return Err(KubeconfigError::ExecCredentials);
    }
    if user.username.is_some() {
        return Err(KubeconfigError::BasicAuth);
    }
    let ca_pem = data_or_file(
        "certificate-authority",
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
        dir,
    )?;
    let cert = data_or_file(
        "client-certificate",
        &user.client_certificate_data,
        &user.client_certificate,
        dir,
    )?;
    let key = data_or_file("client-key", &user.client_key_data, &user.client_key, dir)?;
    let client_cert = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err(KubeconfigError::CertificateWithoutKey),
    };
    let token = match (&user.token, &user.token_file) {
        (Some(t), _) if !t.is_empty() => Some(Token::Value(t.clone())),
        (_, Some(f)) if !f.is_empty() => Some(Token::File(dir.join(f))),
        _ => None,
    };
    Ok(Endpoint {
        server: cluster.server.trim_end_matches('/').to_string(),
        ca_pem,
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
        tls_server_name: cluster.tls_server_name.clone().filter(|s| !s.is_empty()),
        client_cert,
        token,
    })
}

/// `<what>-data` (base64) wins over `<what>` (a path), as client-go decides.
fn data_or_file(
    what: &'static str,
    data: &Option<String>,
    file: &Option<String>,
    dir: &Path,
) -> Result<Option<Vec<u8>>, KubeconfigError> {
    if let Some(d) = data.as_deref().filter(|d| !d.is_empty()) {
        let compact: String = d.split_whitespace().collect();
        return base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map(Some)
            .map_err(|source| KubeconfigError::Base64 { what, source });
    }
    match file.as_deref().filter(|f| !f.is_empty()) {
        Some(f) => {
            let path = dir.join(f);
            match std::fs::read(&path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(source) => Err(KubeconfigError::NamedFile { what, path, source }),
            }
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(text: &str) -> Result<Endpoint, KubeconfigError> {
        parse(text, Path::new("/etc/watchd"))
    }

    #[test]
    fn the_current_context_picks_cluster_and_user() {
        let text = "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://a:6443/\n    insecure-skip-tls-verify: true\n- name: b\n  cluster:\n    server: https://b:6443\n    certificate-authority-data: aGVsbG8=\n    tls-server-name: kubernetes\nusers:\n- name: u\n  user:\n    token: abc\n- name: v\n  user:\n    tokenFile: token\ncontexts:\n- name: ca\n  context:\n    cluster: a\n    user: u\n- name: cb\n  context:\n    cluster: b\n    user: v\ncurrent-context: cb\n";
        let e = parse_in(text).unwrap();
        assert_eq!(e.server, "https://b:6443");
        assert_eq!(e.ca_pem.as_deref(), Some(&b"hello"[..]));
        assert_eq!(e.tls_server_name.as_deref(), Some("kubernetes"));
        assert_eq!(e.token, Some(Token::File("/etc/watchd/token".into())));
        assert!(!e.insecure_skip_tls_verify);
        let e = parse_in(&text.replace("current-context: cb", "current-context: ca")).unwrap();
        assert_eq!(e.server, "https://a:6443");
        assert!(e.insecure_skip_tls_verify);
        assert_eq!(e.token, Some(Token::Value("abc".into())));
    }

    #[test]
    fn a_webhook_file_with_one_cluster_needs_no_context() {
        let e = parse_in("clusters:\n- name: authn\n  cluster:\n    server: http://127.0.0.1:9000/authenticate\n").unwrap();
        assert_eq!(e.server, "http://127.0.0.1:9000/authenticate");
        assert_eq!(e.token, None);
        assert_eq!(e.client_cert, None);
    }

    #[test]
    fn what_cannot_be_used_is_named() {
        let base =
            "clusters:\n- name: c\n  cluster:\n    server: https://s\nusers:\n- name: u\n  user:\n";
        let cases = [
            ("    exec:\n      command: aws\n", "exec"),
            ("    username: admin\n", "basic"),
            ("    client-certificate-data: aGVsbG8=\n", "go together"),
            (
                "    client-key: missing.key\n    client-certificate: missing.crt\n",
                "missing.crt",
            ),
        ];
        for (user, want) in cases {
            let e = parse_in(&format!("{base}{user}")).unwrap_err().to_string();
            assert!(e.contains(want), "{user}: {e}");
        }
        let e = parse_in("clusters:\n- name: c\n  cluster:\n    server: ftp://s\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("only https"), "{e}");
        let e = parse_in("current-context: x\n").unwrap_err().to_string();
        assert!(e.contains("\"x\""), "{e}");
        assert_eq!(parse_in("").unwrap_err().to_string(), "no cluster");
        let e = parse_in("clusters: [").unwrap_err();
        assert!(matches!(e, KubeconfigError::Yaml(_)), "{e}");
        let e = e.to_string();
        assert!(!e.is_empty() && !e.contains('\n'), "{e}");
    }

    #[test]
    fn relative_paths_are_read_beside_the_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), "CA").unwrap();
        std::fs::write(dir.path().join("c.crt"), "CERT").unwrap();
        std::fs::write(dir.path().join("c.key"), "KEY").unwrap();
        let text = "clusters:\n- name: c\n  cluster:\n    server: https://s\n    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n    client-certificate: c.crt\n    client-key: c.key\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n";
        std::fs::write(dir.path().join("kubeconfig"), text).unwrap();
        let e = load(&dir.path().join("kubeconfig")).unwrap();
        assert_eq!(e.ca_pem.as_deref(), Some(&b"CA"[..]));
        assert_eq!(e.client_cert, Some((b"CERT".to_vec(), b"KEY".to_vec())));
    }
}
