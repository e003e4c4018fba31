//! What a `--protocol=informer` run needs from the watchd it starts: the
//! watchers are client-go informers, so watchd serves HTTPS, knows their
//! bearer token and authorizes them by RBAC, as a kube-apiserver would.
//!
//! In a temp dir ([`Credentials`], removed when dropped): a CA and a
//! serving certificate it signed for `127.0.0.1` and `localhost` (rcgen,
//! ECDSA P-256), a static token file in kube-apiserver's format
//! (`token,user,uid,"group1,group2"`) with a random token for [`USER`],
//! and that token alone for the watchers. watchd starts with
//! `--tls-cert-file`, `--tls-private-key-file`, `--token-auth-file` and
//! `--authorization-mode=RBAC`; before it starts, etcd gets, as
//! kube-apiserver stores them (JSON here), a ClusterRole [`CLUSTER_ROLE`]
//! (get, list, watch configmaps) bound to the user by the ClusterRoleBinding
//! [`BINDING`], and kube-apiserver's bootstrap `system:public-info-viewer`
//! (GET `/healthz`, `/livez`, `/readyz`, `/version` for everyone; written
//! only if absent) so that the readiness probe, made as the user, is
//! allowed. The user is in no group that RBAC lets through unchecked.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use serde_json::{json, Value};

use crate::endpoint::TokenSource;
use crate::launch::{self, Watchd, WatchdOptions};
use crate::tls::TlsOptions;

/// The informers' user (the token file's second column).
pub const USER: &str = "watchd-loadtest-informer";
/// Its uid.
pub const UID: &str = "watchd-loadtest-informer-uid";
/// Its group (not one RBAC lets through unchecked).
pub const GROUP: &str = "watchd-loadtest";
/// The ClusterRole that lets it get, list and watch configmaps.
pub const CLUSTER_ROLE: &str = "watchd-loadtest-configmap-reader";
/// The ClusterRoleBinding of [`CLUSTER_ROLE`] to [`USER`].
pub const BINDING: &str = "watchd-loadtest-informer";
/// kube-apiserver's bootstrap role for the health and version endpoints.
pub const PUBLIC_INFO: &str = "system:public-info-viewer";

/// The PKI, token and watchd flags of an informer run, in a temp dir
/// removed when dropped.
#[derive(Debug)]
pub struct Credentials {
    dir: PathBuf,
    /// Verifies watchd's serving certificate (`ca.crt`).
    pub tls: TlsOptions,
    /// The informers' bearer token (the `token` file).
    pub token: TokenSource,
    /// `--tls-cert-file`, `--tls-private-key-file`, `--token-auth-file`,
    /// `--authorization-mode=RBAC`.
    pub watchd_args: Vec<String>,
}

impl Drop for Credentials {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Credentials {
    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn write_file(path: &Path, text: &str, private: bool) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// 32 hex digits from the kernel's random source.
fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `ca.crt`, and `server.crt` and `server.key` for `127.0.0.1` and
/// `localhost` signed by it, into `dir`; returns the CA, to sign more with.
pub fn write_pki(dir: &Path) -> Result<rcgen::Issuer<'static, rcgen::KeyPair>, String> {
    fn e(what: &'static str) -> impl Fn(rcgen::Error) -> String {
        move |err| format!("{what}: {err}")
    }
    let ca_key = rcgen::KeyPair::generate().map_err(e("CA key"))?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(e("CA"))?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "watchd-loadtest-ca");
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(e("CA certificate"))?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().map_err(e("server key"))?;
    let mut server = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .map_err(e("server"))?;
    server
        .distinguished_name
        .push(rcgen::DnType::CommonName, "watchd");
    server.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = server
        .signed_by(&key, &issuer)
        .map_err(e("server certificate"))?;
    write_file(&dir.join("ca.crt"), &ca_cert.pem(), false)?;
    write_file(&dir.join("server.crt"), &cert.pem(), false)?;
    write_file(&dir.join("server.key"), &key.serialize_pem(), true)?;
    Ok(issuer)
}

/// One line of kube-apiserver's static token file:
/// `token,user,uid,"group1,group2"`.
pub fn token_file_line(token: &str, user: &str, uid: &str, groups: &[&str]) -> String {
    format!("{token},{user},{uid},\"{}\"\n", groups.join(","))
}

/// Makes the CA, the serving certificate, the token file and the token
/// under `root`, and the watchd flags that use them.
pub fn prepare(root: &Path) -> Result<Credentials, String> {
    let dir = launch::temp_dir(root, "informer")?;
    let arg = |flag: &str, file: &str| format!("--{flag}={}", dir.join(file).display());
    // Made before the files are written: dropped on an error, it removes the dir.
    let creds = Credentials {
        tls: TlsOptions {
            ca_file: Some(dir.join("ca.crt")),
            ..TlsOptions::default()
        },
        token: TokenSource::File(dir.join("token")),
        watchd_args: vec![
            arg("tls-cert-file", "server.crt"),
            arg("tls-private-key-file", "server.key"),
            arg("token-auth-file", "tokens.csv"),
            "--authorization-mode=RBAC".into(),
        ],
        dir: dir.clone(),
    };
    write_pki(&dir)?;
    let token = random_token()?;
    write_file(
        &dir.join("tokens.csv"),
        &token_file_line(&token, USER, UID, &[GROUP]),
        true,
    )?;
    write_file(&dir.join("token"), &format!("{token}\n"), true)?;
    Ok(creds)
}

/// The RBAC objects an informer run writes: (etcd key under the prefix,
/// object, whether to write it only if absent).
pub fn rbac_objects(user: &str) -> Vec<(String, Value, bool)> {
    let meta = |name: &str| {
        json!({
            "name": name,
            "uid": crate::rng::stable_uuid(&format!("watchd-loadtest/{name}")),
            "creationTimestamp": crate::rng::now_rfc3339(),
        })
    };
    let role_ref = |name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name});
    vec![
        (
            format!("clusterroles/{CLUSTER_ROLE}"),
            json!({
                "kind": "ClusterRole",
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": meta(CLUSTER_ROLE),
                "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}],
            }),
            false,
        ),
        (
            format!("clusterrolebindings/{BINDING}"),
            json!({
                "kind": "ClusterRoleBinding",
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": meta(BINDING),
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
                "roleRef": role_ref(CLUSTER_ROLE),
            }),
            false,
        ),
        (
            format!("clusterroles/{PUBLIC_INFO}"),
            json!({
                "kind": "ClusterRole",
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": meta(PUBLIC_INFO),
                "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]}],
            }),
            true,
        ),
        (
            format!("clusterrolebindings/{PUBLIC_INFO}"),
            json!({
                "kind": "ClusterRoleBinding",
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": meta(PUBLIC_INFO),
                "subjects": [
                    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"},
                    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:unauthenticated"},
                ],
                "roleRef": role_ref(PUBLIC_INFO),
            }),
            true,
        ),
    ]
}

/// Writes [`rbac_objects`] for [`USER`] under `prefix` (`/registry`).
pub async fn write_rbac(client: &mut Client, prefix: &str) -> Result<(), String> {
    for (key, object, if_absent) in rbac_objects(USER) {
        let key = format!("{}/{key}", prefix.trim_end_matches('/'));
        let value = serde_json::to_vec(&object).map_err(|e| e.to_string())?;
        let put = TxnOp::put(key.clone(), value, None);
        let txn = if if_absent {
            Txn::new()
                .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
                .and_then([put])
        } else {
            Txn::new().and_then([put])
        };
        client
            .txn(txn)
            .await
            .map_err(|e| format!("etcd put {key}: {e}"))?;
    }
    Ok(())
}

/// Starts `bin serve` against `etcd` as an informer run needs it (see the
/// module documentation): the RBAC objects first, then watchd with TLS, the
/// token file and RBAC, ready once `/readyz` answers 200 over TLS to the
/// informers' token. `extra` are more watchd flags (`--watchd-arg`).
pub async fn start_watchd(
    bin: &Path,
    etcd: &str,
    root: &Path,
    prefix: &str,
    extra: &[String],
) -> Result<(Watchd, Credentials), String> {
    let creds = prepare(root)?;
    let mut client = Client::connect([etcd], Some(launch::etcd_options()))
        .await
        .map_err(|e| format!("etcd connect: {e}"))?;
    write_rbac(&mut client, prefix).await?;
    let mut args = creds.watchd_args.clone();
    if prefix != "/registry" {
        args.push(format!("--etcd-prefix={prefix}"));
    }
    args.extend_from_slice(extra);
    let options = WatchdOptions {
        args,
        tls: Some(creds.tls.clone()),
        token: Some(creds.token.clone()),
    };
    let watchd = launch::start_watchd_with(bin, etcd, root, &options).await?;
    Ok((watchd, creds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_made_in_a_temp_dir_removed_after() {
        let creds = prepare(&std::env::temp_dir()).unwrap();
        let dir = creds.dir().to_path_buf();
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        let token = read("token").trim().to_string();
        assert_eq!(token.len(), 32, "{token}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            read("tokens.csv"),
            format!("{token},{USER},{UID},\"{GROUP}\"\n")
        );
        // Only the owner reads the key and the tokens.
        for secret in ["server.key", "tokens.csv", "token"] {
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(dir.join(secret)).unwrap().permissions(),
            );
            assert_eq!(mode & 0o777, 0o600, "{secret}");
        }
        // The serving certificate verifies against the CA for 127.0.0.1.
        let tls = crate::tls::TlsClient::new(&creds.tls, "127.0.0.1").unwrap();
        assert!(!tls.client_auth);
        assert!(read("server.crt").starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(
            creds.token.header().unwrap(),
            format!("Bearer {token}").as_str()
        );
        let flags: Vec<&str> = creds
            .watchd_args
            .iter()
            .map(|a| a.split('=').next().unwrap())
            .collect();
        assert_eq!(
            flags,
            [
                "--tls-cert-file",
                "--tls-private-key-file",
                "--token-auth-file",
                "--authorization-mode"
            ]
        );
        assert!(creds
            .watchd_args
            .contains(&"--authorization-mode=RBAC".to_string()));
        // Two runs do not share a token.
        let other = prepare(&std::env::temp_dir()).unwrap();
        assert_ne!(other.token.header().unwrap(), creds.token.header().unwrap());
        drop(creds);
        assert!(!dir.exists(), "removed when dropped");
    }

    #[test]
    fn rbac_lets_the_user_read_configmaps_and_everyone_the_health_endpoints() {
        let objects = rbac_objects("u");
        let keys: Vec<&str> = objects.iter().map(|o| o.0.as_str()).collect();
        assert_eq!(
            keys,
            [
                "clusterroles/watchd-loadtest-configmap-reader",
                "clusterrolebindings/watchd-loadtest-informer",
                "clusterroles/system:public-info-viewer",
                "clusterrolebindings/system:public-info-viewer"
            ]
        );
        let (role, binding) = (&objects[0].1, &objects[1].1);
        assert_eq!(
            role["rules"],
            json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}])
        );
        assert_eq!(binding["subjects"][0]["name"], "u");
        assert_eq!(binding["subjects"][0]["kind"], "User");
        assert_eq!(binding["roleRef"]["name"], CLUSTER_ROLE);
        // The bootstrap role only where the cluster has none.
        assert_eq!(
            objects.iter().map(|o| o.2).collect::<Vec<_>>(),
            [false, false, true, true]
        );
        assert!(objects[2].1["rules"][0]["nonResourceURLs"]
            .as_array()
            .unwrap()
            .contains(&json!("/readyz")));
    }
}
