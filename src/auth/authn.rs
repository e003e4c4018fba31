//! The authenticator chain, in kube-apiserver's order: front-proxy request headers, x509
//! client certificates, bearer tokens (static token file, then ServiceAccount tokens, then
//! the TokenReview webhook), and last the anonymous user when enabled. The first authenticator that recognises the
//! request decides; a credential that is recognised but invalid (an expired
//! ServiceAccount token) is refused even when anonymous requests are allowed, as
//! kube-apiserver's fail-on-error union does.

use std::sync::Arc;
use std::time::SystemTime;

use http::{header, HeaderMap};

use super::request_header::RequestHeaderConfig;
use super::service_account::ServiceAccountAuthenticator;
use super::token_file::{bearer_token, TokenFile};
use super::token_webhook::TokenWebhook;
use super::{UserInfo, ANONYMOUS_USER, AUTHENTICATED, UNAUTHENTICATED};
use crate::tls::PeerCertificate;

/// The configured authenticators. With none configured and anonymous requests allowed,
/// everyone is `system:anonymous`.
#[derive(Default)]
pub struct Authenticator {
    /// Front-proxy headers (`--requestheader-*`), trusted from a verified front proxy only.
    pub request_header: Option<RequestHeaderConfig>,
    /// Whether `--client-ca-file` is set: a client certificate chaining to it names a user.
    pub client_certificates: bool,
    /// `--token-auth-file`.
    pub token_file: Option<TokenFile>,
    /// `--service-account-key-file` and friends.
    pub service_accounts: Option<Arc<ServiceAccountAuthenticator>>,
    /// `--authentication-token-webhook-config-file`.
    pub token_webhook: Option<Arc<TokenWebhook>>,
    /// `--anonymous-auth`.
    pub anonymous: bool,
}

/// Why a request is not authenticated (for the log; the client sees only 401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// How a user was recognised, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Front-proxy headers.
    RequestHeader,
    /// A client certificate.
    X509,
    /// The static token file.
    TokenFile,
    /// A ServiceAccount token.
    ServiceAccount,
    /// The TokenReview webhook.
    Webhook,
    /// No credentials, anonymous allowed.
    Anonymous,
}

impl Method {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Method::RequestHeader => "requestheader",
            Method::X509 => "x509",
            Method::TokenFile => "token-file",
            Method::ServiceAccount => "serviceaccount",
            Method::Webhook => "webhook",
            Method::Anonymous => "anonymous",
        }
    }
}

impl Authenticator {
    /// Whether anything can authenticate a user (the safe-default check at start).
    pub fn has_authenticator(&self) -> bool {
        self.request_header.is_some()
            || self.client_certificates
            || self.token_file.is_some()
            || self.service_accounts.is_some()
            || self.token_webhook.is_some()
    }

    /// Decides who sent the request. The credentials are removed from `headers` (the
    /// Authorization header and every front-proxy header), so nothing after this point
    /// sees them.
    pub async fn authenticate(
        &self,
        peer: Option<&PeerCertificate>,
        headers: &mut HeaderMap,
        now: SystemTime,
    ) -> Result<(UserInfo, Method), Refused> {
        let result = self.identify(peer, headers, now).await;
        if let Some(rh) = &self.request_header {
            rh.strip(headers);
        }
        headers.remove(header::AUTHORIZATION);
        let (mut user, method) = result?;
        if method != Method::Anonymous && !user.groups.iter().any(|g| g == AUTHENTICATED) {
            user.groups.push(AUTHENTICATED.into());
        }
        Ok((user, method))
    }

    async fn identify(
        &self,
        peer: Option<&PeerCertificate>,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<(UserInfo, Method), Refused> {
        let mut errors = Vec::new();
        if let Some(rh) = &self.request_header {
            let proxy_cn = peer
                .filter(|p| p.front_proxy)
                .and_then(|p| certificate_user(&p.leaf))
                .map(|u| u.name);
            if let Some(user) = rh.authenticate(proxy_cn.as_deref(), headers) {
                return Ok((user, Method::RequestHeader));
            }
        }
        if self.client_certificates {
            if let Some(user) = peer
                .filter(|p| p.client_ca)
                .and_then(|p| certificate_user(&p.leaf))
            {
                return Ok((user, Method::X509));
            }
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        if let Some(token) = token {
            if let Some(user) = self.token_file.as_ref().and_then(|f| f.authenticate(token)) {
                return Ok((user, Method::TokenFile));
            }
            if let Some(sa) = &self.service_accounts {
                match sa.authenticate(token, now) {
                    Ok(Some(user)) => return Ok((user, Method::ServiceAccount)),
                    Ok(None) => {}
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if let Some(webhook) = &self.token_webhook {
                match webhook.authenticate(token).await {
                    Ok(Some(user)) => return Ok((user, Method::Webhook)),
                    Ok(None) => {}
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if errors.is_empty() {
                errors.push("invalid bearer token".into());
            }
        }
        if !errors.is_empty() {
            return Err(Refused(errors.join("; ")));
        }
        if self.anonymous {
            return Ok((
                UserInfo {
                    name: ANONYMOUS_USER.into(),
                    groups: vec![UNAUTHENTICATED.into()],
                    ..UserInfo::default()
                },
                Method::Anonymous,
            ));
        }
        Err(Refused("no credentials".into()))
    }
}

/// The user a client certificate names, as kube-apiserver reads it: the subject's common
/// name is the user, its organizations are the groups. A subject with several common
/// names names the last (Go's `pkix.Name` keeps the last one it reads, skipping values
/// that are not strings). None without a common name.
pub fn certificate_user(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .filter_map(|a| a.as_str().ok())
        .last()?
        .to_string();
    if name.is_empty() {
        return None;
    }
    let groups = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(str::to_string))
        .collect();
    Some(UserInfo {
        name,
        groups,
        ..UserInfo::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: &str, orgs: &[&str]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if !cn.is_empty() {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
        }
        for o in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn peer(der: Vec<u8>, client_ca: bool, front_proxy: bool) -> PeerCertificate {
        PeerCertificate {
            leaf: der,
            client_ca,
            front_proxy,
        }
    }

    fn tokens() -> TokenFile {
        TokenFile::parse("t0ken,bob,uid-bob,\"dev,ops\"\n").unwrap()
    }

    #[test]
    fn certificates_name_the_user_and_groups() {
        // (rcgen writes one value per attribute type: one organization here.)
        let u = certificate_user(&cert("alice", &["system:masters"])).unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, ["system:masters"]);
        let u = certificate_user(&cert("bob", &[])).unwrap();
        assert!(u.groups.is_empty());
        assert_eq!(certificate_user(&cert("", &["dev"])), None);
        assert_eq!(certificate_user(b"not a certificate"), None);
    }

    #[test]
    fn of_several_common_names_the_last_is_the_user_as_go_reads_it() {
        // rcgen writes one value per attribute type, so the subject is written as
        // CN=first, O=second and the organization's OID (2.5.4.10) turned into the
        // common name's (2.5.4.3): same length, so the DER stays well formed (the
        // signature breaks, which naming the user does not read).
        let der = cert("first", &["second"]);
        let (o, cn) = (
            [0x06, 0x03, 0x55, 0x04, 0x0a],
            [0x06, 0x03, 0x55, 0x04, 0x03],
        );
        let mut patched = der.clone();
        let mut found = 0;
        for i in 0..patched.len().saturating_sub(o.len()) {
            if patched[i..i + o.len()] == o {
                patched[i..i + o.len()].copy_from_slice(&cn);
                found += 1;
            }
        }
        assert_eq!(
            found, 2,
            "the subject and the issuer each name the organization once"
        );
        let (_, parsed) = x509_parser::parse_x509_certificate(&patched).unwrap();
        let names: Vec<&str> = parsed
            .subject()
            .iter_common_name()
            .filter_map(|a| a.as_str().ok())
            .collect();
        assert_eq!(names, ["first", "second"]);
        let u = certificate_user(&patched).unwrap();
        assert_eq!(u.name, "second");
        assert!(u.groups.is_empty());
    }

    #[tokio::test]
    async fn the_chain_goes_in_kube_apiserver_order_and_adds_system_authenticated() {
        let a = Authenticator {
            client_certificates: true,
            token_file: Some(tokens()),
            ..Authenticator::default()
        };
        let now = SystemTime::now();
        let alice = peer(cert("alice", &["dev"]), true, false);
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer t0ken".parse().unwrap());
        // The certificate comes before the token, and the token header is consumed.
        let (u, m) = a.authenticate(Some(&alice), &mut h, now).await.unwrap();
        assert_eq!((u.name.as_str(), m), ("alice", Method::X509));
        assert_eq!(u.groups, ["dev", AUTHENTICATED]);
        assert!(h.get(header::AUTHORIZATION).is_none());

        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer t0ken".parse().unwrap());
        let (u, m) = a.authenticate(None, &mut h, now).await.unwrap();
        assert_eq!((u.name.as_str(), m), ("bob", Method::TokenFile));
        assert_eq!(u.groups, ["dev", "ops", AUTHENTICATED]);

        // A certificate from the front-proxy CA does not name a user by itself.
        let proxy = peer(cert("front-proxy-client", &[]), false, true);
        let e = a
            .authenticate(Some(&proxy), &mut HeaderMap::new(), now)
            .await;
        assert_eq!(e, Err(Refused("no credentials".into())));
    }

    #[tokio::test]
    async fn a_bad_token_is_refused_even_when_anonymous_is_allowed() {
        let a = Authenticator {
            token_file: Some(tokens()),
            anonymous: true,
            ..Authenticator::default()
        };
        let now = SystemTime::now();
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert!(a.authenticate(None, &mut h, now).await.is_err());
        let (u, m) = a
            .authenticate(None, &mut HeaderMap::new(), now)
            .await
            .unwrap();
        assert_eq!(m, Method::Anonymous);
        assert_eq!(u.name, ANONYMOUS_USER);
        assert_eq!(u.groups, [UNAUTHENTICATED]);
        let closed = Authenticator {
            token_file: Some(tokens()),
            ..Authenticator::default()
        };
        assert!(closed
            .authenticate(None, &mut HeaderMap::new(), now)
            .await
            .is_err());
        assert!(closed.has_authenticator());
        assert!(!Authenticator::default().has_authenticator());
    }
}
