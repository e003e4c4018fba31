//! ServiceAccount tokens verified locally, as kube-apiserver 1.34 verifies them (with
//! `--service-account-lookup`, its default): a JWT signed by one of
//! `--service-account-key-file`'s keys, from a known issuer, checked against the objects
//! in watchd's cache as `pkg/serviceaccount/legacy.go` and `claims.go` check them.
//!
//! - Legacy tokens (issuer `kubernetes/serviceaccount`, from token Secrets) need their
//!   claims and a `sub` naming the same ServiceAccount; their Secret, not being deleted,
//!   whose `data.token` is the token presented (compared in constant time), without the
//!   `kubernetes.io/legacy-token-invalid-since` label (the legacy token cleaner's mark);
//!   and their ServiceAccount, not being deleted, with the uid the token names. (watchd
//!   reads only: it does not stamp `kubernetes.io/legacy-token-last-used` as
//!   kube-apiserver does.)
//! - Bound tokens (from the TokenRequest API) need an audience of `--api-audiences`, a
//!   valid time window (a minute of leeway), and their ServiceAccount and the Secret, pod
//!   or node they are bound to (a pod-bound token's node is only reported), each with the
//!   uid the token names and not deleted: an object whose `deletionTimestamp` is more than
//!   the minute of leeway past is, as kube-apiserver decides (a pod ending gracefully
//!   keeps its tokens working until then).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::{ConfigError, LookedUp, ObjectLookup, UserInfo};

/// The issuer of legacy (Secret-based) tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// The label the legacy token cleaner puts on a Secret whose token it invalidated.
pub const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";

/// Leeway for `exp`, `nbf` and `iat`, and after a bound object's `deletionTimestamp`, as
/// kube-apiserver allows (go-jose's `DefaultLeeway`).
const LEEWAY_SECS: i64 = 60;

/// Why a token this authenticator recognised (by its issuer) is refused, in
/// kube-apiserver's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Not a JWS header jsonwebtoken reads.
    #[error("malformed token: {0}")]
    MalformedToken(String),
    /// Verified, but the claims do not read.
    #[error("malformed claims: {0}")]
    MalformedClaims(String),
    /// No key of the token's algorithm verifies it.
    #[error("invalid signature")]
    InvalidSignature,
    /// A legacy token lacks a claim (`sub`, `namespace`, `secretName`, ...).
    #[error("{0} claim is missing")]
    MissingClaim(&'static str),
    /// A legacy token's `sub` is not its ServiceAccount's user name.
    #[error("sub claim is invalid")]
    InvalidSubject,
    /// A bound token for none of `--api-audiences`.
    #[error("token audiences {token:?} is invalid for the target audiences {accepted:?}")]
    Audience {
        /// The token's `aud`.
        token: Vec<String>,
        /// `--api-audiences`.
        accepted: Vec<String>,
    },
    /// `exp` over a minute past.
    #[error("service account token has expired")]
    Expired,
    /// `nbf` over a minute ahead.
    #[error("service account token is not valid yet")]
    NotValidYet,
    /// `iat` over a minute ahead.
    #[error("service account token is issued in the future")]
    IssuedInTheFuture,
    /// A bound token without a namespace or ServiceAccount name.
    #[error("token names no service account")]
    NoServiceAccount,
    /// The token's ServiceAccount is not in the cache (kube-apiserver's NotFound).
    #[error("serviceaccounts {0:?} not found")]
    ServiceAccountNotFound(String),
    /// A legacy token's ServiceAccount is being deleted.
    #[error("ServiceAccount {0} has been deleted")]
    LegacyServiceAccountDeleted(String),
    /// A legacy token's ServiceAccount has another uid (it was recreated).
    #[error("ServiceAccount UID ({found}) does not match claim ({claimed})")]
    LegacyServiceAccountUid {
        /// The cached ServiceAccount's uid.
        found: String,
        /// The token's.
        claimed: String,
    },
    /// A legacy token's Secret is gone or being deleted.
    #[error("Token has been invalidated")]
    LegacyInvalidated,
    /// A legacy token's Secret holds another token (or none).
    #[error("Token does not match server's copy")]
    TokenMismatch,
    /// A legacy token's Secret carries [`INVALID_SINCE_LABEL`].
    #[error(
        "the token in secret {secret} for service account {service_account} has been marked \
         invalid. Use tokens from the TokenRequest API or manually created secret-based \
         tokens, or remove the '{INVALID_SINCE_LABEL}' label from the secret to temporarily \
         allow use of this token"
    )]
    MarkedInvalid {
        /// `namespace/name` of the Secret.
        secret: String,
        /// `namespace/name` of the ServiceAccount.
        service_account: String,
    },
    /// A bound token's ServiceAccount has been deleting for over a minute.
    #[error("service account {0} has been deleted")]
    ServiceAccountDeleted(String),
    /// A bound token's ServiceAccount has another uid (it was recreated).
    #[error("service account UID ({found}) does not match claim ({claimed})")]
    ServiceAccountUid {
        /// The cached ServiceAccount's uid.
        found: String,
        /// The token's.
        claimed: String,
    },
    /// The Secret, pod or node a bound token is bound to has another uid.
    #[error(
        "{object} UID ({found}) does not match service account {object} ref claim ({claimed})"
    )]
    BoundUid {
        /// `secret`, `pod` or `node`.
        object: &'static str,
        /// The cached object's uid.
        found: String,
        /// The token's.
        claimed: String,
    },
    /// The Secret, pod or node a bound token is bound to is gone, or has been deleting
    /// for over a minute.
    #[error("service account token has been invalidated")]
    Invalidated,
}

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
    #[serde(default)]
    sub: String,
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

/// The public keys in a PEM text: public keys (PKCS#1 RSA or SPKI RSA/EC) and
/// certificates (their public key).
fn parse_keys(pem: &str) -> Result<Vec<Key>, ConfigError> {
    let mut keys = Vec::new();
    let blocks = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes());
    for block in blocks {
        let block = block.map_err(ConfigError::NotPem)?;
        let spki_pem = match block.label.as_str() {
            "PUBLIC KEY" | "RSA PUBLIC KEY" => pem_text(&block.label, &block.contents),
            "CERTIFICATE" => {
                let cert = block.parse_x509().map_err(ConfigError::Certificate)?;
                pem_text("PUBLIC KEY", cert.public_key().raw)
            }
            other => return Err(ConfigError::NotAPublicKey(other.into())),
        };
        if let Ok(k) = DecodingKey::from_rsa_pem(spki_pem.as_bytes()) {
            keys.push(Key::Rsa(k));
        } else if let Ok(k) = DecodingKey::from_ec_pem(spki_pem.as_bytes()) {
            keys.push(Key::Ec(k));
        } else {
            return Err(ConfigError::UnsupportedKey);
        }
    }
    if keys.is_empty() {
        return Err(ConfigError::NoPublicKey);
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
    ) -> Result<ServiceAccountAuthenticator, ConfigError> {
        let mut keys = Vec::new();
        for (i, pem) in pems.iter().enumerate() {
            keys.extend(
                parse_keys(pem).map_err(|e| ConfigError::ServiceAccountKeys {
                    number: i + 1,
                    source: Box::new(e),
                })?,
            );
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
        if legacy {
            self.legacy(claims, token)
        } else {
            self.bound(claims, now)
        }
        .map(Some)
    }

    /// Checks the signature with each key of the token's algorithm family.
    fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthError::MalformedToken(e.to_string()))?;
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
                    .map_err(|e| AuthError::MalformedClaims(e.to_string()));
            }
        }
        Err(AuthError::InvalidSignature)
    }

    /// legacy.go's checks, with the lookup kube-apiserver does by default.
    fn legacy(&self, c: Claims, token: &str) -> Result<UserInfo, AuthError> {
        for (value, claim) in [
            (&c.sub, "sub"),
            (&c.legacy_namespace, "namespace"),
            (&c.legacy_secret, "secretName"),
            (&c.legacy_name, "serviceAccountName"),
            (&c.legacy_uid, "serviceAccountUID"),
        ] {
            if value.is_empty() {
                return Err(AuthError::MissingClaim(claim));
            }
        }
        let (ns, name) = (&c.legacy_namespace, &c.legacy_name);
        if split_username(&c.sub) != Some((ns.as_str(), name.as_str())) {
            return Err(AuthError::InvalidSubject);
        }
        let secret = self
            .lookup
            .get("secrets", ns, &c.legacy_secret)
            .ok_or(AuthError::LegacyInvalidated)?;
        if secret.deletion_timestamp.is_some() {
            return Err(AuthError::LegacyInvalidated);
        }
        let held = secret.token.as_deref().unwrap_or_default();
        if !constant_time_eq(held, token.as_bytes()) {
            return Err(AuthError::TokenMismatch);
        }
        let sa = self
            .lookup
            .get("serviceaccounts", ns, name)
            .ok_or_else(|| AuthError::ServiceAccountNotFound(name.clone()))?;
        if sa.deletion_timestamp.is_some() {
            return Err(AuthError::LegacyServiceAccountDeleted(format!(
                "{ns}/{name}"
            )));
        }
        if sa.uid != c.legacy_uid {
            return Err(AuthError::LegacyServiceAccountUid {
                found: sa.uid,
                claimed: c.legacy_uid,
            });
        }
        if secret
            .labels
            .get(INVALID_SINCE_LABEL)
            .is_some_and(|v| !v.is_empty())
        {
            return Err(AuthError::MarkedInvalid {
                secret: format!("{ns}/{}", c.legacy_secret),
                service_account: format!("{ns}/{name}"),
            });
        }
        Ok(user(ns, name, &c.legacy_uid))
    }

    /// claims.go's checks (jwt.go checks the audience before them).
    fn bound(&self, c: Claims, now: SystemTime) -> Result<UserInfo, AuthError> {
        let auds = match &c.aud {
            Some(Audience::One(a)) => vec![a.clone()],
            Some(Audience::Many(v)) => v.clone(),
            None => vec![],
        };
        if !auds.iter().any(|a| self.audiences.contains(a)) {
            return Err(AuthError::Audience {
                token: auds,
                accepted: self.audiences.clone(),
            });
        }
        // go-jose's order: nbf, exp, iat.
        let secs = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        if c.nbf.is_some_and(|nbf| secs + LEEWAY_SECS < nbf) {
            return Err(AuthError::NotValidYet);
        }
        if c.exp.is_some_and(|exp| secs - LEEWAY_SECS > exp) {
            return Err(AuthError::Expired);
        }
        if c.iat.is_some_and(|iat| secs + LEEWAY_SECS < iat) {
            return Err(AuthError::IssuedInTheFuture);
        }
        let k = c.kubernetes.ok_or(AuthError::NoServiceAccount)?;
        if k.namespace.is_empty() || k.serviceaccount.name.is_empty() {
            return Err(AuthError::NoServiceAccount);
        }
        // Objects deleted (their deletionTimestamp) before now less the leeway are gone.
        let invalid_before = now
            .checked_sub(std::time::Duration::from_secs(LEEWAY_SECS as u64))
            .unwrap_or(UNIX_EPOCH);
        let deleted = |o: &LookedUp| o.deletion_timestamp.is_some_and(|t| t < invalid_before);
        let ns = &k.namespace;
        let sa_ref = &k.serviceaccount;
        let sa = self
            .lookup
            .get("serviceaccounts", ns, &sa_ref.name)
            .ok_or_else(|| AuthError::ServiceAccountNotFound(sa_ref.name.clone()))?;
        if sa.uid != sa_ref.uid {
            return Err(AuthError::ServiceAccountUid {
                found: sa.uid,
                claimed: sa_ref.uid.clone(),
            });
        }
        if deleted(&sa) {
            return Err(AuthError::ServiceAccountDeleted(format!(
                "{ns}/{}",
                sa_ref.name
            )));
        }
        // The Secret, pod or node: there, with the token's uid, not deleted.
        let check = |object: &'static str,
                     resource: &str,
                     namespace: &str,
                     r: &Ref|
         -> Result<(), AuthError> {
            let found = self
                .lookup
                .get(resource, namespace, &r.name)
                .ok_or(AuthError::Invalidated)?;
            if found.uid != r.uid {
                return Err(AuthError::BoundUid {
                    object,
                    found: found.uid,
                    claimed: r.uid.clone(),
                });
            }
            if deleted(&found) {
                return Err(AuthError::Invalidated);
            }
            Ok(())
        };
        if let Some(secret) = &k.secret {
            check("secret", "secrets", ns, secret)?;
        }
        let mut u = user(ns, &sa_ref.name, &sa_ref.uid);
        if let Some(pod) = &k.pod {
            check("pod", "pods", ns, pod)?;
            u.extra.insert(
                "authentication.kubernetes.io/pod-name".into(),
                vec![pod.name.clone()],
            );
            u.extra.insert(
                "authentication.kubernetes.io/pod-uid".into(),
                vec![pod.uid.clone()],
            );
        }
        if let Some(node) = &k.node {
            // A pod-bound token names the pod's node for information only.
            if k.pod.is_none() {
                check("node", "nodes", "", node)?;
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

/// The namespace and name of a ServiceAccount's user name
/// (`system:serviceaccount:<namespace>:<name>`).
fn split_username(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only (as Go's
/// `subtle.ConstantTimeCompare`, which also answers at once for different lengths).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
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
    struct Objects(Mutex<HashMap<String, LookedUp>>);

    impl Objects {
        fn put(&self, resource: &str, ns: &str, name: &str, uid: &str) {
            self.set(resource, ns, name, |o| {
                *o = LookedUp {
                    uid: uid.into(),
                    ..LookedUp::default()
                }
            });
        }
        /// Changes the object (created empty if absent).
        fn set(&self, resource: &str, ns: &str, name: &str, f: impl FnOnce(&mut LookedUp)) {
            let mut map = self.0.lock().unwrap();
            f(map.entry(format!("{resource}/{ns}/{name}")).or_default());
        }
        fn remove(&self, resource: &str, ns: &str, name: &str) {
            self.0
                .lock()
                .unwrap()
                .remove(&format!("{resource}/{ns}/{name}"));
        }
    }

    impl ObjectLookup for Objects {
        fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<LookedUp> {
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

    fn legacy() -> serde_json::Value {
        json!({
            "iss": LEGACY_ISSUER, "sub": "system:serviceaccount:ns1:builder",
            "kubernetes.io/serviceaccount/namespace": "ns1",
            "kubernetes.io/serviceaccount/secret.name": "builder-token",
            "kubernetes.io/serviceaccount/service-account.name": "builder",
            "kubernetes.io/serviceaccount/service-account.uid": "sa-uid",
        })
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
        // A pod-bound token's node is reported, not checked (as kube-apiserver).
        f.objects.remove("nodes", "", "n1");
        assert!(f.auth.authenticate(&t, at(NOW)).unwrap().is_some());

        // The pod replaced by one with another uid, or deleted: invalidated.
        f.objects.put("pods", "ns1", "p1", "another-uid");
        assert_eq!(
            f.auth.authenticate(&t, at(NOW)),
            Err(AuthError::BoundUid {
                object: "pod",
                found: "another-uid".into(),
                claimed: "pod-uid".into()
            })
        );
        f.objects.remove("pods", "ns1", "p1");
        assert_eq!(
            f.auth.authenticate(&t, at(NOW)),
            Err(AuthError::Invalidated)
        );
    }

    #[test]
    fn bound_objects_being_deleted_are_gone_a_minute_after_their_deletion_timestamp() {
        let f = fixture();
        let deleting_at = |resource: &str, ns: &str, name: &str, secs: u64| {
            f.objects.set(resource, ns, name, |o| {
                o.deletion_timestamp = Some(at(secs))
            });
        };
        let by_pod = sign(
            &f.signer,
            &bound(json!({"pod": {"name": "p1", "uid": "pod-uid"}})),
        );
        let by_secret = sign(
            &f.signer,
            &bound(json!({"secret": {"name": "builder-token", "uid": "secret-uid"}})),
        );
        let by_node = sign(
            &f.signer,
            &bound(json!({"node": {"name": "n1", "uid": "node-uid"}})),
        );
        for (t, resource, ns, name) in [
            (&by_pod, "pods", "ns1", "p1"),
            (&by_secret, "secrets", "ns1", "builder-token"),
            (&by_node, "nodes", "", "n1"),
        ] {
            // A pod ending gracefully has a deletionTimestamp in the future.
            deleting_at(resource, ns, name, NOW + 30);
            assert!(
                f.auth.authenticate(t, at(NOW)).unwrap().is_some(),
                "{resource}"
            );
            // Exactly a minute ago is not before now less the leeway: still valid.
            deleting_at(resource, ns, name, NOW - 60);
            assert!(
                f.auth.authenticate(t, at(NOW)).unwrap().is_some(),
                "{resource}"
            );
            deleting_at(resource, ns, name, NOW - 61);
            assert_eq!(
                f.auth.authenticate(t, at(NOW)),
                Err(AuthError::Invalidated),
                "{resource}"
            );
            f.objects
                .set(resource, ns, name, |o| o.deletion_timestamp = None);
            assert!(
                f.auth.authenticate(t, at(NOW)).unwrap().is_some(),
                "{resource}"
            );
        }
        // The ServiceAccount, for any bound token.
        let plain = sign(&f.signer, &bound(json!({})));
        deleting_at("serviceaccounts", "ns1", "builder", NOW - 59);
        assert!(f.auth.authenticate(&plain, at(NOW)).unwrap().is_some());
        deleting_at("serviceaccounts", "ns1", "builder", NOW - 61);
        let e = f.auth.authenticate(&plain, at(NOW)).unwrap_err();
        assert_eq!(e, AuthError::ServiceAccountDeleted("ns1/builder".into()));
        assert_eq!(
            e.to_string(),
            "service account ns1/builder has been deleted"
        );
        // A node-bound token's node replaced.
        f.objects.put("serviceaccounts", "ns1", "builder", "sa-uid");
        f.objects.put("nodes", "", "n1", "node-2");
        let e = f.auth.authenticate(&by_node, at(NOW)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node UID (node-2) does not match service account node ref claim (node-uid)"
        );
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
        assert_eq!(e, AuthError::Expired);
        let e = f.auth.authenticate(&t, at(NOW - 100)).unwrap_err();
        assert_eq!(e, AuthError::NotValidYet);
        // Issued in the future (nbf fine).
        let mut c = bound(json!({}));
        c["iat"] = json!(NOW + 100);
        let e = f
            .auth
            .authenticate(&sign(&f.signer, &c), at(NOW))
            .unwrap_err();
        assert_eq!(e, AuthError::IssuedInTheFuture);
        // Another audience.
        let mut c = bound(json!({}));
        c["aud"] = json!(["vault"]);
        let e = f
            .auth
            .authenticate(&sign(&f.signer, &c), at(NOW))
            .unwrap_err();
        assert!(e.to_string().contains("audiences"), "{e}");
        // Signed by another key.
        let e = f
            .auth
            .authenticate(&sign(&f.other, &bound(json!({}))), at(NOW))
            .unwrap_err();
        assert_eq!(e, AuthError::InvalidSignature);
        // The service account recreated (another uid), then gone.
        f.objects
            .put("serviceaccounts", "ns1", "builder", "new-uid");
        let e = f.auth.authenticate(&t, at(NOW)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "service account UID (new-uid) does not match claim (sa-uid)"
        );
        f.objects.remove("serviceaccounts", "ns1", "builder");
        let e = f.auth.authenticate(&t, at(NOW)).unwrap_err();
        assert_eq!(e.to_string(), r#"serviceaccounts "builder" not found"#);
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

    /// The fixture's Secret holding `token`.
    fn holding(f: &Fixture, token: &str) {
        f.objects.set("secrets", "ns1", "builder-token", |o| {
            o.token = Some(token.as_bytes().to_vec())
        });
    }

    #[test]
    fn legacy_tokens_need_their_secret_holding_them_and_their_service_account() {
        let f = fixture();
        let t = sign(&f.signer, &legacy());
        // The Secret without the token (or another one): not the server's copy.
        assert_eq!(
            f.auth.authenticate(&t, at(NOW)),
            Err(AuthError::TokenMismatch)
        );
        holding(&f, &t);
        let u = f.auth.authenticate(&t, at(NOW)).unwrap().unwrap();
        assert_eq!(u.name, "system:serviceaccount:ns1:builder");
        assert_eq!(u.uid, "sa-uid");
        // Rotated: the Secret holds another token, one byte apart or of another length.
        let mut other = t.clone().into_bytes();
        let last = other.len() - 1;
        other[last] ^= 1;
        holding(&f, &String::from_utf8(other).unwrap());
        assert_eq!(
            f.auth.authenticate(&t, at(NOW)),
            Err(AuthError::TokenMismatch)
        );
        holding(&f, &format!("{t}x"));
        assert_eq!(
            f.auth.authenticate(&t, at(NOW)),
            Err(AuthError::TokenMismatch)
        );
        holding(&f, &t);
        // The Secret being deleted, whenever: invalidated (no grace for legacy tokens).
        f.objects.set("secrets", "ns1", "builder-token", |o| {
            o.deletion_timestamp = Some(at(NOW + 30))
        });
        let e = f.auth.authenticate(&t, at(NOW)).unwrap_err();
        assert_eq!(e.to_string(), "Token has been invalidated");
        f.objects.set("secrets", "ns1", "builder-token", |o| {
            o.deletion_timestamp = None
        });
        // The ServiceAccount being deleted, recreated, gone.
        f.objects.set("serviceaccounts", "ns1", "builder", |o| {
            o.deletion_timestamp = Some(at(NOW))
        });
        let e = f.auth.authenticate(&t, at(NOW)).unwrap_err();
        assert_eq!(e.to_string(), "ServiceAccount ns1/builder has been deleted");
        f.objects
            .put("serviceaccounts", "ns1", "builder", "new-uid");
        let e = f.auth.authenticate(&t, at(NOW)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ServiceAccount UID (new-uid) does not match claim (sa-uid)"
        );
        f.objects.remove("serviceaccounts", "ns1", "builder");
        assert_eq!(
            f.auth.authenticate(&t, at(NOW)),
            Err(AuthError::ServiceAccountNotFound("builder".into()))
        );
        f.objects.put("serviceaccounts", "ns1", "builder", "sa-uid");
        assert!(f.auth.authenticate(&t, at(NOW)).unwrap().is_some());
        f.objects.remove("secrets", "ns1", "builder-token");
        assert_eq!(
            f.auth.authenticate(&t, at(NOW)),
            Err(AuthError::LegacyInvalidated)
        );
    }

    #[test]
    fn legacy_tokens_of_a_secret_labelled_invalid_are_refused() {
        let f = fixture();
        let t = sign(&f.signer, &legacy());
        holding(&f, &t);
        let label = |value: &str| {
            f.objects.set("secrets", "ns1", "builder-token", |o| {
                o.labels.insert(INVALID_SINCE_LABEL.into(), value.into());
            })
        };
        label("2025-10-27");
        let e = f.auth.authenticate(&t, at(NOW)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the token in secret ns1/builder-token for service account ns1/builder has been \
             marked invalid. Use tokens from the TokenRequest API or manually created \
             secret-based tokens, or remove the 'kubernetes.io/legacy-token-invalid-since' \
             label from the secret to temporarily allow use of this token"
        );
        // An empty value is no mark (legacy.go reads the value).
        label("");
        assert!(f.auth.authenticate(&t, at(NOW)).unwrap().is_some());
    }

    #[test]
    fn legacy_claims_and_subject_are_checked() {
        let f = fixture();
        for (claim, name) in [
            ("sub", "sub"),
            ("kubernetes.io/serviceaccount/namespace", "namespace"),
            ("kubernetes.io/serviceaccount/secret.name", "secretName"),
            (
                "kubernetes.io/serviceaccount/service-account.name",
                "serviceAccountName",
            ),
            (
                "kubernetes.io/serviceaccount/service-account.uid",
                "serviceAccountUID",
            ),
        ] {
            let mut c = legacy();
            c.as_object_mut().unwrap().remove(claim);
            let e = f
                .auth
                .authenticate(&sign(&f.signer, &c), at(NOW))
                .unwrap_err();
            assert_eq!(e, AuthError::MissingClaim(name));
            assert_eq!(e.to_string(), format!("{name} claim is missing"));
        }
        for sub in [
            "system:serviceaccount:ns1:other",
            "system:serviceaccount:ns2:builder",
            "system:serviceaccount:ns1:builder:x",
            "builder",
        ] {
            let mut c = legacy();
            c["sub"] = json!(sub);
            let t = sign(&f.signer, &c);
            holding(&f, &t);
            assert_eq!(
                f.auth.authenticate(&t, at(NOW)),
                Err(AuthError::InvalidSubject),
                "{sub}"
            );
        }
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"a"));
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
        let e = parse_keys(&key.serialize_pem()).err().unwrap().to_string();
        assert!(e.contains("PRIVATE KEY"), "{e}");
        assert!(parse_keys("").is_err());
        // The authenticator says which of the key files holds no key.
        let e = ServiceAccountAuthenticator::new(
            &[key.public_key_pem(), key.serialize_pem()],
            vec![ISSUER.into()],
            vec![],
            Arc::new(Objects::default()),
        )
        .err()
        .unwrap();
        assert!(
            matches!(&e, ConfigError::ServiceAccountKeys { number: 2, .. }),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("--service-account-key-file number 2: a \"PRIVATE KEY\" block"),
            "{e}"
        );
    }
}
