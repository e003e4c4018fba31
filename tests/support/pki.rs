//! A throw-away PKI for the secure-serving tests (a CA, a serving certificate for
//! 127.0.0.1, client certificates and kubeconfigs, as PEM files in a temp dir), and the
//! command-line clients those tests drive: kubectl 1.33 and curl.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// A CA, the serving certificate, and client certificates, written as PEM files.
pub struct Pki {
    dir: tempfile::TempDir,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    pub fn new() -> Pki {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "watchd-test-ca");
        let ca = params.self_signed(&key).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("watchd-test-pki-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        let pki = Pki {
            dir,
            issuer: rcgen::Issuer::new(params, key),
        };
        pki.issue("server", "watchd", None, true);
        pki
    }

    /// Writes `<name>.crt` and `<name>.key`: a client certificate for user `cn` in group
    /// `org` that expires `valid_for` from now.
    pub fn issue_expiring(&self, name: &str, cn: &str, org: &str, valid_for: Duration) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, org);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let now = SystemTime::now();
        params.not_before = (now - Duration::from_secs(60)).into();
        params.not_after = (now + valid_for).into();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(self.path(&format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
    }

    /// Writes `<name>.crt` and `<name>.key`: a server certificate for 127.0.0.1, or a
    /// client certificate for user `cn` in group `org`.
    pub fn issue(&self, name: &str, cn: &str, org: Option<&str>, server: bool) {
        let key = rcgen::KeyPair::generate().unwrap();
        let sans = if server {
            vec!["localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            vec![]
        };
        let mut params = rcgen::CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        if let Some(o) = org {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, o);
        }
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(self.path(&format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn arg(&self, flag: &str, name: &str) -> String {
        format!("--{flag}={}", self.path(name).display())
    }

    /// A kubeconfig for `server` authenticating with the client certificate `name`, or
    /// with `token`.
    pub fn kubeconfig(
        &self,
        file: &str,
        server: &str,
        cert: Option<&str>,
        token: Option<&str>,
    ) -> PathBuf {
        let mut user = String::new();
        if let Some(name) = cert {
            user += &format!(
                "    client-certificate: {}\n    client-key: {}\n",
                self.path(&format!("{name}.crt")).display(),
                self.path(&format!("{name}.key")).display()
            );
        }
        if let Some(t) = token {
            user += &format!("    token: {t}\n");
        }
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: watchd\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n{user}contexts:\n- name: c\n  context:\n    cluster: watchd\n    user: u\ncurrent-context: c\n",
            self.path("ca.crt").display()
        );
        let path = self.path(file);
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// Writes a kubeconfig at `path` for a plain-HTTP `server` (no CA), authenticating with
/// `token`: what a watchd fed by another reads as `--upstream-kubeconfig`.
pub fn token_kubeconfig(path: &Path, server: &str, token: &str) {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: up\n  cluster:\n    server: {server}\nusers:\n- name: watchd\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: up\n    user: watchd\ncurrent-context: c\n"
    );
    std::fs::write(path, text).unwrap();
}

pub fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("run curl")
}

pub fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Output {
    assert!(Path::new(KUBECTL).exists(), "{KUBECTL} is required");
    Command::new(KUBECTL)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cache-dir={}", cache.display()))
        .arg("--request-timeout=30s")
        .args(args)
        .output()
        .expect("run kubectl")
}

/// kubectl against a plain-HTTP server with no kubeconfig at all.
pub fn kubectl_at(server: &str, cache: &Path, args: &[&str]) -> Output {
    assert!(Path::new(KUBECTL).exists(), "{KUBECTL} is required");
    Command::new(KUBECTL)
        .arg(format!("--server={server}"))
        .arg(format!("--cache-dir={}", cache.display()))
        .arg("--request-timeout=30s")
        .args(args)
        .env("KUBECONFIG", "/dev/null")
        .output()
        .expect("run kubectl")
}

pub fn stdout_ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// watchd against `etcd_url` over TLS with this Pki's server certificate, taking client
/// certificates of its CA, the bearer tokens of `tokens_csv` (a token file's lines) and
/// RBAC, and the flags of `extra`, as the cluster admin's probe finds it ready (the
/// admin's certificate is issued here); and its https base URL.
pub fn start_tls_with_tokens(
    pki: &Pki,
    etcd_url: &str,
    tokens_csv: &str,
    extra: &[String],
) -> (super::watchd::Watchd, String) {
    pki.issue("admin", "root", Some("system:masters"), false);
    std::fs::write(pki.path("tokens.csv"), tokens_csv).unwrap();
    let args = [
        pki.arg("tls-cert-file", "server.crt"),
        pki.arg("tls-private-key-file", "server.key"),
        pki.arg("client-ca-file", "ca.crt"),
        pki.arg("token-auth-file", "tokens.csv"),
        "--authorization-mode=RBAC".to_string(),
    ];
    let args: Vec<&str> = args.iter().chain(extra).map(String::as_str).collect();
    let watchd = super::watchd::Watchd::start_with_probe(etcd_url, &args, Some(admin_probe(pki)));
    let server = format!("https://127.0.0.1:{}", watchd.http_addr().port());
    (watchd, server)
}

/// A ready probe: `GET /readyz` over TLS as the cluster admin.
pub fn admin_probe(pki: &Pki) -> super::watchd::Probe {
    let (ca, cert, key) = (
        pki.path("ca.crt"),
        pki.path("admin.crt"),
        pki.path("admin.key"),
    );
    Arc::new(move |addr| {
        let out = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--cacert",
            ca.to_str().unwrap(),
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            &format!("https://127.0.0.1:{}/readyz", addr.port()),
        ]);
        out.stdout == b"200"
    })
}
