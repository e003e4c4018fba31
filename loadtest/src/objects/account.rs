//! ServiceAccounts and Secrets: the `default` account of every namespace, a
//! legacy service-account token Secret (as the token controller fills it)
//! and an Opaque application Secret.

use serde_json::{json, Value};

use super::{base64, metadata, Rng};

/// Secret type of a service-account token.
pub const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// Builds the `v1` ServiceAccount `name` in `ns` (since 1.24 with no secrets
/// listed: tokens are projected).
pub fn service_account(ns: &str, name: &str, rng: &mut Rng) -> Value {
    json!({ "kind": "ServiceAccount", "apiVersion": "v1", "metadata": metadata(name, Some(ns), &[], rng) })
}

/// URL-safe base64 without padding, as JWT segments are.
fn base64url(bytes: &[u8]) -> String {
    base64(bytes)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// Random bytes, for key material that only has to look like some.
fn random_bytes(n: usize, rng: &mut Rng) -> Vec<u8> {
    (0..n).map(|_| rng.below(256) as u8).collect()
}

/// A JWT shaped like the token controller's for `sa` (the signature is
/// random: nothing verifies it).
fn token(sa: &Value, secret: &str, rng: &mut Rng) -> String {
    let ns = sa["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = super::name(sa);
    let header = json!({ "alg": "RS256", "kid": base64url(&random_bytes(32, rng)) });
    let claims = json!({
        "iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": ns,
        "kubernetes.io/serviceaccount/secret.name": secret,
        "kubernetes.io/serviceaccount/service-account.name": name,
        "kubernetes.io/serviceaccount/service-account.uid": super::uid(sa),
        "sub": format!("system:serviceaccount:{ns}:{name}"),
    });
    format!(
        "{}.{}.{}",
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes()),
        base64url(&random_bytes(256, rng)),
    )
}

/// A PEM block of random bytes standing in for the cluster CA.
fn ca_pem(rng: &mut Rng) -> String {
    let body = base64(&random_bytes(768, rng));
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// Builds the token Secret `name` of ServiceAccount `sa` (the stored one: its
/// uid is annotated), with `ca.crt`, `namespace` and `token` filled in.
pub fn token_secret(sa: &Value, name: &str, rng: &mut Rng) -> Value {
    let ns = sa["metadata"]["namespace"].as_str().unwrap_or("default");
    let mut meta = metadata(name, Some(ns), &[], rng);
    meta["annotations"] = json!({
        SA_NAME_ANNOTATION: super::name(sa),
        SA_UID_ANNOTATION: super::uid(sa),
    });
    let token = token(sa, name, rng);
    json!({
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": meta,
        "data": {
            "ca.crt": base64(ca_pem(rng).as_bytes()),
            "namespace": base64(ns.as_bytes()),
            "token": base64(token.as_bytes()),
        },
        "type": TOKEN_TYPE,
    })
}

/// Builds an Opaque Secret `name` with an application's credentials.
pub fn opaque_secret(ns: &str, name: &str, rng: &mut Rng) -> Value {
    let labels = [("app.kubernetes.io/part-of", "demo")];
    let password = rng.name_token(24);
    let api_key = rng.hex(40);
    json!({
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": metadata(name, Some(ns), &labels, rng),
        "data": {
            "DATABASE_USER": base64(b"demo"),
            "DATABASE_PASSWORD": base64(password.as_bytes()),
            "API_KEY": base64(api_key.as_bytes()),
        },
        "type": "Opaque",
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::assert_common;
    use super::*;

    #[test]
    fn accounts_and_secrets() {
        let mut rng = Rng::new(1);
        let sa = service_account("demo-1", "default", &mut rng);
        assert_common(&sa, "ServiceAccount", "default", Some("demo-1"));
        let secret = token_secret(&sa, "default-token-x2x4b", &mut rng);
        assert_common(&secret, "Secret", "default-token-x2x4b", Some("demo-1"));
        assert_eq!(secret["type"], TOKEN_TYPE);
        let ann = &secret["metadata"]["annotations"];
        assert_eq!(ann[SA_NAME_ANNOTATION], "default");
        assert_eq!(ann[SA_UID_ANNOTATION], sa["metadata"]["uid"]);
        assert_eq!(secret["data"]["namespace"], base64(b"demo-1"));
        let opaque = opaque_secret("demo-1", "app-credentials", &mut rng);
        assert_eq!(opaque["type"], "Opaque");
        for obj in [&sa, &secret, &opaque] {
            let stored = watchd::codec::pbjson::encode_stored(obj).expect("valid");
            let back = crate::demo::Storage::decode(&stored).expect("decodes");
            assert_eq!(back["data"], obj["data"], "base64 data survives protobuf");
        }
    }

    #[test]
    fn token_is_a_three_part_jwt_naming_its_account() {
        let mut rng = Rng::new(2);
        let sa = service_account("demo-2", "default", &mut rng);
        let jwt = token(&sa, "s", &mut rng);
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert!(jwt
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
        assert!(ca_pem(&mut rng).starts_with("-----BEGIN CERTIFICATE-----\n"));
    }
}
