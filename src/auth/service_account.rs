//! ServiceAccount tokens verified locally, as kube-apiserver verifies them: a JWT signed
//! by one of `--service-account-key-file`'s keys, from a known issuer. Legacy tokens
//! (issuer `kubernetes/serviceaccount`, from token Secrets) need their ServiceAccount (with
//! the same uid) and Secret to exist; bound tokens (from the TokenRequest API) need an
//! audience of `--api-audiences`, a valid time window (one minute of leeway), their
//! ServiceAccount, and the pod, secret or node they are bound to, each with the uid the
//! token names. Existence is checked in watchd's cache.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::{ObjectLookup, UserInfo};

/// The issuer of legacy (Secret-based) tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// Leeway for `exp`, `nbf` and `iat`, as kube-apiserver allows.
const LEEWAY_SECS: i64 = 60;

/// The refusal of a token this authenticator recognised (its issuer) but rejects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

enum Key {
    Rsa(DecodingKey),
    Ec(DecodingKey),
}

/// Verifies ServiceAccount tokens.
pub struct ServiceAccountAuthenticator {
    keys: Vec<Key>,
    issuers: Vec<String>,
    audiences: Vec<String>,
    lookup: Arc<dyn ObjectLookup>,
}

#[derive(Deserialize, Default)]
struct Ref {
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
}

#[derive(Deserialize, Default)]
struct Private {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    serviceaccount: Ref,
    pod: Option<Ref>,
    secret: Option<Ref>,
    node: Option<Ref>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Default)]
struct Claims {
    #[serde(default)]
    iss: String,
    aud: Option<Audience>,
    exp: Option<i64>,
    nbf: Option<i64>,
    iat: Option<i64>,
    jti: Option<String>,
    #[serde(rename = "kubernetes.io")]
    kubernetes: Option<Private>,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace", default)]
    legacy_namespace: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name", default)]
    legacy_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid", default)]
    legacy_uid: String,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name", default)]
    legacy_secret: String,
}

fn invalidated() -> AuthError {
    AuthError("service account token has been invalidated".into())
}

/// The public keys in a PEM text: public keys (PKCS#1 RSA or SPKI RSA/EC) and
/// certificates (their public key).
fn parse_keys(pem: &str) -> Result<Vec<Key>, String> {
    let mut keys = Vec::new();
    let blocks = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes());
    for block in blocks {
        let block = block.map_err(|e| format!("not PEM: {e}"))?;
        let spki_pem = match block.label.as_str() {
            "PUBLIC KEY" | "RSA PUBLIC KEY" => pem_text(&block.label, &block.contents),
            "CERTIFICATE" => {
                let cert = block
                    .parse_x509()
                    .map_err(|e| format!("certificate: {e}"))?;
                pem_text("PUBLIC KEY", cert.public_key().raw)
            }
            other => {
                return Err(format!(
                    "a {other:?} block: give the public key or a certificate"
                ))
            }
        };
        if let Ok(k) = DecodingKey::from_rsa_pem(spki_pem.as_bytes()) {
            keys.push(Key::Rsa(k));
        } else if let Ok(k) = DecodingKey::from_ec_pem(spki_pem.as_bytes()) {
            keys.push(Key::Ec(k));
        } else {
            return Err("a public key that is neither RSA nor ECDSA".into());
        }
    }
    if keys.is_empty() {
        return Err("no public key in the file".into());
    }
    Ok(keys)
}

fn pem_text(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out + &format!("-----END {label}-----\n")
}

/// The unverified payload of a compact JWS; None if the text is not one.
fn unverified_claims(token: &str) -> Option<Claims> {
    use base64::Engine as _;
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl ServiceAccountAuthenticator {
    /// An authenticator with the keys of `pems` (one text per key file), accepting bound
    /// tokens of `issuers` for `audiences` (empty: the first issuer, as kube-apiserver
    /// defaults `--api-audiences`), and legacy tokens.
    pub fn new(
        pems: &[String],
        issuers: Vec<String>,
        audiences: Vec<String>,
        lookup: Arc<dyn ObjectLookup>,
    ) -> Result<ServiceAccountAuthenticator, String> {
        let mut keys = Vec::new();
        for pem in pems {
            keys.extend(parse_keys(pem)?);
        }
        let audiences = if audiences.is_empty() {
            issuers.first().cloned().into_iter().collect()
        } else {
            audiences
        };
        Ok(ServiceAccountAuthenticator {
            keys,
            issuers,
            audiences,
            lookup,
        })
    }

    /// The user of `token`: None when it is not a ServiceAccount token of a known issuer
    /// (another authenticator may know it); an error when it is one but is not valid.
    pub fn authenticate(
        &self,
        token: &str,
        now: SystemTime,
    ) -> Result<Option<UserInfo>, AuthError> {
        let Some(unverified) = unverified_claims(token) else {
            return Ok(None);
        };
        let legacy = unverified.iss == LEGACY_ISSUER;
        if !legacy && !self.issuers.contains(&unverified.iss) {
            return Ok(None);
        }
        let claims = self.verify(token)?;
        let now = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        if legacy {
            self.legacy(claims)
        } else {
            self.bound(claims, now)
        }
        .map(Some)
    }

    /// Checks the signature with each key of the token's algorithm family.
    fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthError(format!("malformed token: {e}")))?;
        let ec = matches!(header.alg, Algorithm::ES256 | Algorithm::ES384);
        let rsa = matches!(
            header.alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        );
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        for key in &self.keys {
            let k = match key {
                Key::Rsa(k) if rsa => k,
                Key::Ec(k) if ec => k,
                _ => continue,
            };
            if let Ok(data) = jsonwebtoken::decode::<serde_json::Value>(token, k, &validation) {
                return serde_json::from_value(data.claims)
                    .map_err(|e| AuthError(format!("malformed claims: {e}")));
            }
        }
        Err(AuthError("invalid signature".into()))
    }

    fn legacy(&self, c: Claims) -> Result<UserInfo, AuthError> {
        for (value, what) in [
            (&c.legacy_namespace, "namespace"),
            (&c.legacy_name, "service account name"),
            (&c.legacy_uid, "service account uid"),
            (&c.legacy_secret, "secret name"),
        ] {
            if value.is_empty() {
                return Err(AuthError(format!("token is missing the {what} claim")));
            }
        }
        let ns = &c.legacy_namespace;
        if self.lookup.uid("secrets", ns, &c.legacy_secret).is_none() {
            return Err(AuthError("token has been invalidated".into()));
        }
        match self.lookup.uid("serviceaccounts", ns, &c.legacy_name) {
            Some(uid) if uid == c.legacy_uid => {}
            Some(uid) => {
                return Err(AuthError(format!(
                    "service account UID ({uid}) does not match claim ({})",
                    c.legacy_uid
                )))
            }
            None => return Err(AuthError("token has been invalidated".into())),
        }
        Ok(user(ns, &c.legacy_name, &c.legacy_uid))
    }

    fn bound(&self, c: Claims, now: i64) -> Result<UserInfo, AuthError> {
        let auds = match &c.aud {
            Some(Audience::One(a)) => vec![a.clone()],
            Some(Audience::Many(v)) => v.clone(),
            None => vec![],
        };
        if !auds.iter().any(|a| self.audiences.contains(a)) {
            return Err(AuthError(format!(
                "token audiences {auds:?} is invalid for the target audiences {:?}",
                self.audiences
            )));
        }
        if c.exp.is_some_and(|exp| now > exp + LEEWAY_SECS) {
            return Err(AuthError("service account token has expired".into()));
        }
        if c.nbf.is_some_and(|nbf| now + LEEWAY_SECS < nbf)
            || c.iat.is_some_and(|iat| now + LEEWAY_SECS < iat)
        {
            return Err(AuthError("service account token is not valid yet".into()));
        }
        let k = c
            .kubernetes
            .ok_or_else(|| AuthError("token has no kubernetes.io claims".into()))?;
        if k.namespace.is_empty() || k.serviceaccount.name.is_empty() {
            return Err(AuthError("token names no service account".into()));
        }
        let ns = &k.namespace;
        let exists = |resource: &str, namespace: &str, r: &Ref| {
            self.lookup.uid(resource, namespace, &r.name).as_deref() == Some(r.uid.as_str())
        };
        if !exists("serviceaccounts", ns, &k.serviceaccount) {
            return Err(invalidated());
        }
        let mut u = user(ns, &k.serviceaccount.name, &k.serviceaccount.uid);
        if let Some(pod) = &k.pod {
            if !exists("pods", ns, pod) {
                return Err(invalidated());
            }
            u.extra.insert(
                "authentication.kubernetes.io/pod-name".into(),
                vec![pod.name.clone()],
            );
            u.extra.insert(
                "authentication.kubernetes.io/pod-uid".into(),
                vec![pod.uid.clone()],
            );
        }
        if let Some(secret) = &k.secret {
            if !exists("secrets", ns, secret) {
                return Err(invalidated());
            }
        }
        if let Some(node) = &k.node {
            if !exists("nodes", "", node) {
                return Err(invalidated());
            }
            u.extra.insert(
                "authentication.kubernetes.io/node-name".into(),
                vec![node.name.clone()],
            );
            u.extra.insert(
                "authentication.kubernetes.io/node-uid".into(),
                vec![node.uid.clone()],
            );
        }
        if let Some(jti) = c.jti.filter(|j| !j.is_empty()) {
            u.extra.insert(
                "authentication.kubernetes.io/credential-id".into(),
                vec![format!("JTI={jti}")],
            );
        }
        Ok(u)
    }
}

fn user(ns: &str, name: &str, uid: &str) -> UserInfo {
    UserInfo {
        name: format!("system:serviceaccount:{ns}:{name}"),
        uid: uid.into(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ],
        ..UserInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;

    #[derive(Default)]
    struct Objects(Mutex<HashMap<String, String>>);

    impl Objects {
        fn put(&self, resource: &str, ns: &str, name: &str, uid: &str) {
            self.0
                .lock()
                .unwrap()
                .insert(format!("{resource}/{ns}/{name}"), uid.into());
        }
        fn remove(&self, resource: &str, ns: &str, name: &str) {
            self.0
                .lock()
                .unwrap()
                .remove(&format!("{resource}/{ns}/{name}"));
        }
    }

    impl ObjectLookup for Objects {
        fn uid(&self, resource: &str, namespace: &str, name: &str) -> Option<String> {
            self.0
                .lock()
                .unwrap()
                .get(&format!("{resource}/{namespace}/{name}"))
                .cloned()
        }
    }

    const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
    const NOW: u64 = 1_800_000_000;

    struct Fixture {
        auth: ServiceAccountAuthenticator,
        objects: Arc<Objects>,
        signer: EncodingKey,
        other: EncodingKey,
    }

    fn fixture() -> Fixture {
        let key = rcgen::KeyPair::generate().unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let objects = Arc::new(Objects::default());
        objects.put("serviceaccounts", "ns1", "builder", "sa-uid");
        objects.put("pods", "ns1", "p1", "pod-uid");
        objects.put("nodes", "", "n1", "node-uid");
        objects.put("secrets", "ns1", "builder-token", "secret-uid");
        let auth = ServiceAccountAuthenticator::new(
            &[key.public_key_pem()],
            vec![ISSUER.into()],
            vec![],
            objects.clone(),
        )
        .unwrap();
        Fixture {
            auth,
            objects,
            signer: EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap(),
            other: EncodingKey::from_ec_pem(other.serialize_pem().as_bytes()).unwrap(),
        }
    }

    fn sign(key: &EncodingKey, claims: &serde_json::Value) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::ES256), claims, key).unwrap()
    }

    fn bound(extra: serde_json::Value) -> serde_json::Value {
        let mut c = json!({
            "iss": ISSUER, "aud": [ISSUER], "exp": NOW + 3600, "iat": NOW - 10, "nbf": NOW - 10,
            "sub": "system:serviceaccount:ns1:builder", "jti": "j-1",
            "kubernetes.io": {"namespace": "ns1", "serviceaccount": {"name": "builder", "uid": "sa-uid"}},
        });
        for (k, v) in extra.as_object().unwrap() {
            c["kubernetes.io"][k] = v.clone();
        }
        c
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_bound_token_names_the_service_account_and_what_it_is_bound_to() {
        let f = fixture();
        let t = sign(
            &f.signer,
            &bound(
                json!({"pod": {"name": "p1", "uid": "pod-uid"}, "node": {"name": "n1", "uid": "node-uid"}}),
            ),
        );
        let u = f.auth.authenticate(&t, at(NOW)).unwrap().unwrap();
        assert_eq!(u.name, "system:serviceaccount:ns1:builder");
        assert_eq!(u.uid, "sa-uid");
        assert_eq!(
            u.groups,
            ["system:serviceaccounts", "system:serviceaccounts:ns1"]
        );
        assert_eq!(u.extra["authentication.kubernetes.io/pod-name"], ["p1"]);
        assert_eq!(
            u.extra["authentication.kubernetes.io/node-uid"],
            ["node-uid"]
        );
        assert_eq!(
            u.extra["authentication.kubernetes.io/credential-id"],
            ["JTI=j-1"]
        );

        // The pod deleted, or replaced by one with another uid: invalidated.
        f.objects.put("pods", "ns1", "p1", "another-uid");
        assert_eq!(f.auth.authenticate(&t, at(NOW)), Err(invalidated()));
        f.objects.remove("pods", "ns1", "p1");
        assert_eq!(f.auth.authenticate(&t, at(NOW)), Err(invalidated()));
    }

    #[test]
    fn time_audience_signature_and_service_account_are_checked() {
        let f = fixture();
        let t = sign(&f.signer, &bound(json!({})));
        assert!(f.auth.authenticate(&t, at(NOW)).unwrap().is_some());
        // Within the minute of leeway, then expired; not yet valid.
        assert!(f
            .auth
            .authenticate(&t, at(NOW + 3600 + 59))
            .unwrap()
            .is_some());
        let e = f.auth.authenticate(&t, at(NOW + 3600 + 61)).unwrap_err();
        assert!(e.0.contains("expired"), "{e}");
        let e = f.auth.authenticate(&t, at(NOW - 100)).unwrap_err();
        assert!(e.0.contains("not valid yet"), "{e}");
        // Another audience.
        let mut c = bound(json!({}));
        c["aud"] = json!(["vault"]);
        let e = f
            .auth
            .authenticate(&sign(&f.signer, &c), at(NOW))
            .unwrap_err();
        assert!(e.0.contains("audiences"), "{e}");
        // Signed by another key.
        let e = f
            .auth
            .authenticate(&sign(&f.other, &bound(json!({}))), at(NOW))
            .unwrap_err();
        assert_eq!(e.0, "invalid signature");
        // The service account recreated (another uid).
        f.objects
            .put("serviceaccounts", "ns1", "builder", "new-uid");
        assert_eq!(f.auth.authenticate(&t, at(NOW)), Err(invalidated()));
    }

    #[test]
    fn other_issuers_and_non_jwts_are_left_to_other_authenticators() {
        let f = fixture();
        let mut c = bound(json!({}));
        c["iss"] = json!("https://accounts.example.com");
        assert_eq!(f.auth.authenticate(&sign(&f.signer, &c), at(NOW)), Ok(None));
        assert_eq!(f.auth.authenticate("static-token", at(NOW)), Ok(None));
        assert_eq!(f.auth.authenticate("a.b.c", at(NOW)), Ok(None));
    }

    #[test]
    fn legacy_tokens_need_their_secret_and_service_account() {
        let f = fixture();
        let c = json!({
            "iss": LEGACY_ISSUER, "sub": "system:serviceaccount:ns1:builder",
            "kubernetes.io/serviceaccount/namespace": "ns1",
            "kubernetes.io/serviceaccount/secret.name": "builder-token",
            "kubernetes.io/serviceaccount/service-account.name": "builder",
            "kubernetes.io/serviceaccount/service-account.uid": "sa-uid",
        });
        let t = sign(&f.signer, &c);
        let u = f.auth.authenticate(&t, at(NOW)).unwrap().unwrap();
        assert_eq!(u.name, "system:serviceaccount:ns1:builder");
        f.objects
            .put("serviceaccounts", "ns1", "builder", "new-uid");
        let e = f.auth.authenticate(&t, at(NOW)).unwrap_err();
        assert!(e.0.contains("does not match"), "{e}");
        f.objects.put("serviceaccounts", "ns1", "builder", "sa-uid");
        f.objects.remove("secrets", "ns1", "builder-token");
        assert!(f.auth.authenticate(&t, at(NOW)).is_err());
    }

    #[test]
    fn keys_are_read_from_public_keys_and_certificates() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["sa".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        assert_eq!(parse_keys(&key.public_key_pem()).unwrap().len(), 1);
        assert_eq!(parse_keys(&cert.pem()).unwrap().len(), 1);
        let both = format!("{}{}", key.public_key_pem(), cert.pem());
        assert_eq!(parse_keys(&both).unwrap().len(), 2);
        let e = parse_keys(&key.serialize_pem()).err().unwrap();
        assert!(e.contains("PRIVATE KEY"), "{e}");
        assert!(parse_keys("").is_err());
    }
}
