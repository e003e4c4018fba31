//! `--kubeconfig=PATH [--context=NAME]`: the HTTP target, its TLS and its
//! credentials from a kubeconfig, as kubectl reads one, instead of
//! `--target-url`, `--ca-file` and `--token`/`--token-file`.
//!
//! The file is read by watchd's own kubeconfig reader
//! ([`watchd::client::kubeconfig`], the one its webhooks and upstream use):
//! the current context's cluster (`server`, `certificate-authority` or
//! `certificate-authority-data`, `insecure-skip-tls-verify`,
//! `tls-server-name`) and user (`token`, `tokenFile`,
//! `client-certificate[-data]` and `client-key[-data]`), relative paths
//! taken from the kubeconfig's directory, `exec`, `auth-provider` and basic
//! auth refused by name. `--context` picks another context than
//! `current-context`: the file is read as YAML, its `current-context` set to
//! the one asked for (which must be among its contexts), and that given to
//! the same reader. Every error names the file.

use std::path::Path;

use serde_json::Value;
use watchd::client::kubeconfig::{self as kc, Token};

use crate::endpoint::TokenSource;
use crate::tls::{ClientCert, TlsOptions};

/// The HTTP target a kubeconfig names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeTarget {
    /// The cluster's `server` (becomes the target URL).
    pub server: String,
    /// Its CA, `insecure-skip-tls-verify`, `tls-server-name` and the user's
    /// client certificate.
    pub tls: TlsOptions,
    /// The user's `token` or `tokenFile`.
    pub token: Option<TokenSource>,
}

/// Reads `path` (its current context, or `context`).
pub fn load(path: &Path, context: Option<&str>) -> Result<KubeTarget, String> {
    let endpoint = match context {
        None => kc::load(path).map_err(|e| format!("kubeconfig {e}"))?,
        Some(name) => {
            let text = with_context(path, name)?;
            let dir = path.parent().unwrap_or(Path::new("."));
            kc::parse(&text, dir).map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
    };
    let token = endpoint.token.map(|t| match t {
        Token::Value(v) => TokenSource::Inline(v),
        Token::File(file) => TokenSource::KubeconfigFile {
            file,
            kubeconfig: path.to_path_buf(),
        },
    });
    Ok(KubeTarget {
        server: endpoint.server,
        tls: TlsOptions {
            ca_pem: endpoint.ca_pem,
            insecure_skip_verify: endpoint.insecure_skip_tls_verify,
            client_cert: endpoint
                .client_cert
                .map(|(cert_pem, key_pem)| ClientCert { cert_pem, key_pem }),
            server_name: endpoint.tls_server_name,
            kubeconfig: Some(path.to_path_buf()),
            ..TlsOptions::default()
        },
        token,
    })
}

/// The kubeconfig at `path` with `current-context` set to `context`, as
/// JSON (which the YAML reader reads as well).
fn with_context(path: &Path, context: &str) -> Result<String, String> {
    let at = |what: String| format!("kubeconfig {}: {what}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let mut doc: Value = serde_saphyr::from_str(&text).map_err(|e| {
        let e = e.to_string();
        at(e.lines().next().unwrap_or_default().to_string())
    })?;
    let names: Vec<&str> = doc["contexts"]
        .as_array()
        .map(|v| v.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    if !names.contains(&context) {
        return Err(at(format!(
            "context {context:?} is not among the contexts ({})",
            if names.is_empty() {
                "it has none".to_string()
            } else {
                names.join(", ")
            }
        )));
    }
    let Some(map) = doc.as_object_mut() else {
        return Err(at("not a kubeconfig (no mapping at the top)".into()));
    };
    map.insert("current-context".into(), Value::String(context.into()));
    serde_json::to_string(&doc).map_err(|e| at(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::endpoint::Endpoint;

    /// A directory removed when dropped.
    struct Dir(PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("lt-kubeconfig-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// A CA, and a client certificate and key it signed, as PEM.
    fn pki() -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let mut user = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        user.distinguished_name
            .push(rcgen::DnType::CommonName, "loadtest");
        let cert = user.signed_by(&key, &issuer).unwrap();
        (ca_cert.pem(), cert.pem(), key.serialize_pem())
    }

    const TWO_CONTEXTS: &str = "apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: pki/ca.crt
    tls-server-name: kubernetes
- name: lab
  cluster:
    server: http://127.0.0.1:8080/prefix
users:
- name: cert-user
  user:
    client-certificate: pki/user.crt
    client-key: pki/user.key
- name: token-user
  user:
    tokenFile: token
contexts:
- name: by-cert
  context: {cluster: local, user: cert-user}
- name: by-token
  context: {cluster: lab, user: token-user}
current-context: by-cert
";

    #[test]
    fn the_current_context_gives_url_ca_and_client_certificate_from_relative_paths() {
        let d = dir("current");
        let (ca, cert, key) = pki();
        std::fs::create_dir_all(d.0.join("pki")).unwrap();
        for (name, pem) in [("ca.crt", &ca), ("user.crt", &cert), ("user.key", &key)] {
            std::fs::write(d.0.join("pki").join(name), pem).unwrap();
        }
        std::fs::write(d.0.join("token"), "from-the-token-file\n").unwrap();
        let path = d.0.join("config");
        std::fs::write(&path, TWO_CONTEXTS).unwrap();

        let t = load(&path, None).unwrap();
        assert_eq!(t.server, "https://127.0.0.1:6443");
        assert_eq!(t.tls.ca_pem.as_deref(), Some(ca.as_bytes()));
        assert_eq!(t.tls.server_name.as_deref(), Some("kubernetes"));
        let c = t.tls.client_cert.clone().expect("client certificate");
        assert_eq!(
            (c.cert_pem, c.key_pem),
            (cert.into_bytes(), key.into_bytes())
        );
        assert!(
            !format!("{:?}", t.tls).contains("PRIVATE KEY"),
            "never printed"
        );
        assert_eq!(t.token, None);
        // The endpoint a run builds presents the certificate and verifies
        // the server as the kubeconfig's tls-server-name.
        let e = Endpoint::new(&t.server, &t.tls, t.token.as_ref()).unwrap();
        let tls = e.tls.expect("https");
        assert!(tls.client_auth);
        assert!(tls
            .config(crate::endpoint::Protocol::Http2)
            .client_auth_cert_resolver
            .has_certs());
        assert_eq!(
            tls.server_name,
            rustls::pki_types::ServerName::try_from("kubernetes").unwrap()
        );

        // --context picks the other one: a token file beside the kubeconfig,
        // a URL with a path prefix.
        let r = load(&path, Some("by-token")).unwrap();
        assert_eq!(r.server, "http://127.0.0.1:8080/prefix");
        assert_eq!(r.tls.client_cert, None);
        let e = Endpoint::new(&r.server, &r.tls, r.token.as_ref()).unwrap();
        assert_eq!(e.url.path_prefix, "/prefix");
        assert_eq!(
            e.authorization.expect("a token"),
            "Bearer from-the-token-file"
        );
    }

    #[test]
    fn what_is_wrong_or_missing_is_named_with_the_file() {
        let d = dir("errors");
        let path = d.0.join("config");
        let err = |text: &str, context: Option<&str>| {
            std::fs::write(&path, text).unwrap();
            let e = load(&path, context).unwrap_err();
            assert!(e.contains(&path.display().to_string()), "{e}");
            e
        };
        // Files it names that are not there (relative to its directory).
        let e = err(TWO_CONTEXTS, None);
        assert!(
            e.contains("certificate-authority") && e.contains("pki/ca.crt"),
            "{e}"
        );
        let e = err(TWO_CONTEXTS, Some("nope"));
        assert!(
            e.contains("\"nope\" is not among the contexts (by-cert, by-token)"),
            "{e}"
        );
        let e = err("clusters:\n- name: c\n  cluster: {}\n", None);
        assert!(e.contains("no server"), "{e}");
        let e = err(
            "clusters:\n- name: c\n  cluster:\n    server: https://s\nusers:\n- name: u\n  user:\n    exec: {command: aws}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
            None,
        );
        assert!(e.contains("exec"), "{e}");
        let e = err(
            "clusters:\n- name: c\n  cluster:\n    server: https://s\nusers:\n- name: u\n  user:\n    client-key-data: aGVsbG8=\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n",
            Some("x"),
        );
        assert!(e.contains("go together"), "{e}");
        let e = err("clusters: [", Some("x"));
        assert!(!e.contains('\n'), "one line: {e}");
        let gone = d.0.join("gone");
        let e = load(&gone, None).unwrap_err();
        assert!(e.contains(&gone.display().to_string()), "{e}");
        // A token file that vanished is named when the run reads it.
        std::fs::write(
            &path,
            "clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\nusers:\n- name: u\n  user:\n    tokenFile: missing-token\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
        )
        .unwrap();
        let t = load(&path, None).unwrap();
        let e = t.token.unwrap().header().unwrap_err();
        assert!(
            e.contains("kubeconfig") && e.contains("tokenFile") && e.contains("missing-token"),
            "{e}"
        );
    }

    #[test]
    fn tls_settings_follow_client_go() {
        let d = dir("tls");
        let path = d.0.join("config");
        let cfg = |cluster: &str| {
            std::fs::write(
                &path,
                format!("clusters:\n- name: c\n  cluster:\n{cluster}users:\n- name: u\n  user:\n    token: abc\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"),
            )
            .unwrap();
            load(&path, None).unwrap()
        };
        // No CA: the system's roots, as kubectl (not an error as for
        // --target-url without --ca-file).
        let t = cfg("    server: https://127.0.0.1:6443\n");
        assert_eq!(t.token, Some(TokenSource::Inline("abc".into())));
        assert!(t.tls.check_for(crate::endpoint::Scheme::Https).is_ok());
        // A CA and insecure-skip-tls-verify together: refused, naming the file.
        let t = cfg("    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\n    certificate-authority-data: aGVsbG8=\n");
        let e = Endpoint::new(&t.server, &t.tls, None).unwrap_err();
        assert!(
            e.contains("together") && e.contains(&path.display().to_string()),
            "{e}"
        );
        // A CA that is no PEM: named with the file.
        let t =
            cfg("    server: https://127.0.0.1:6443\n    certificate-authority-data: aGVsbG8=\n");
        let e = Endpoint::new(&t.server, &t.tls, None).unwrap_err();
        assert!(
            e.contains("certificate-authority") && e.contains(&path.display().to_string()),
            "{e}"
        );
        let t = cfg("    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\n");
        assert!(Endpoint::new(&t.server, &t.tls, None).unwrap().is_tls());
    }
}
