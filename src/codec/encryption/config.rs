//! The `--encryption-provider-config` file, as written: typed structs for
//! `apiserver.config.k8s.io/v1` `EncryptionConfiguration` and its decoding.
//!
//! watchd reads the very file kube-apiserver reads, so it decodes it the same way:
//! YAML or JSON; `apiVersion` and `kind` checked first; then strictly (an unknown or
//! repeated field is an error, because kube-apiserver's decoder is strict and a typo in
//! a provider must not silently read as "no provider"). `null` reads as the empty value,
//! as in Go. Meaning (what is valid) is `validate.rs`'s business, not this file's.

use serde::{Deserialize, Deserializer};

use super::errors::ConfigError;

/// The `apiVersion` of the configuration.
pub const API_VERSION: &str = "apiserver.config.k8s.io/v1";
/// The `kind` of the configuration.
pub const KIND: &str = "EncryptionConfiguration";
/// kube-apiserver also accepts this legacy pair (an old documentation mistake it keeps
/// registered).
const LEGACY_API_VERSION: &str = "v1";
const LEGACY_KIND: &str = "EncryptionConfig";

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileConfig {
    #[allow(dead_code)] // checked by the first pass, kept so the strict pass accepts it
    api_version: Option<String>,
    #[allow(dead_code)]
    kind: Option<String>,
    /// The rules, in file order.
    #[serde(default, deserialize_with = "nullable")]
    pub resources: Vec<RuleEntry>,
}

/// One entry of `resources`: resource patterns and the providers that read them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleEntry {
    /// `secrets`, `deployments.apps`, `*.apps`, `*.`, `*.*`.
    #[serde(default, deserialize_with = "nullable")]
    pub resources: Vec<String>,
    /// In order: the first writes, all read.
    #[serde(default, deserialize_with = "nullable")]
    pub providers: Vec<ProviderEntry>,
}

/// One provider; exactly one field should be set (validation checks).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// AES-GCM keys.
    pub aesgcm: Option<KeysEntry>,
    /// AES-CBC keys.
    pub aescbc: Option<KeysEntry>,
    /// XSalsa20-Poly1305 keys.
    pub secretbox: Option<KeysEntry>,
    /// Plain values.
    pub identity: Option<IdentityEntry>,
    /// A KMS plugin (refused by watchd).
    pub kms: Option<KmsEntry>,
}

/// `{keys: [...]}` of aescbc, aesgcm and secretbox.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysEntry {
    /// Named keys, the first one writes.
    #[serde(default, deserialize_with = "nullable")]
    pub keys: Vec<KeyEntry>,
}

/// A named key; `secret` is base64.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// Written into each value after the provider prefix.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Base64 of the key bytes.
    #[serde(default, deserialize_with = "nullable")]
    pub secret: String,
}

impl std::fmt::Debug for KeyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyEntry")
            .field("name", &self.name)
            .field("secret", &"[REDACTED]")
            .finish()
    }
}

/// `identity: {}`: no fields.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityEntry {}

/// A KMS provider, read only far enough to validate it and name it in the refusal.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KmsEntry {
    /// `v1` or `v2`; empty means `v1` (kube-apiserver's default).
    #[serde(rename = "apiVersion", default, deserialize_with = "nullable")]
    pub api_version: String,
    /// The plugin's name, written into each value.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// KMS v1 only.
    pub cachesize: Option<i32>,
    /// `unix:///path/to/socket`.
    #[serde(default, deserialize_with = "nullable")]
    pub endpoint: String,
    /// A Go duration (`3s`).
    pub timeout: Option<String>,
}

impl KmsEntry {
    /// The apiVersion after kube-apiserver's defaulting.
    pub fn api_version(&self) -> &str {
        if self.api_version.is_empty() {
            "v1"
        } else {
            &self.api_version
        }
    }
}

/// Only `apiVersion` and `kind`, read first: a file of another type is named as such
/// rather than reported by its first unknown field.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default, deserialize_with = "nullable")]
    api_version: String,
    #[serde(default, deserialize_with = "nullable")]
    kind: String,
}

/// Decodes the file's text: type first, then every field strictly.
pub fn decode(text: &str) -> Result<FileConfig, ConfigError> {
    if text.is_empty() {
        return Err(ConfigError::Empty);
    }
    let meta: TypeMeta = serde_saphyr::from_str(text).map_err(decode_error)?;
    if meta.kind.is_empty() {
        return Err(ConfigError::MissingTypeMeta("kind"));
    }
    if meta.api_version.is_empty() {
        return Err(ConfigError::MissingTypeMeta("apiVersion"));
    }
    let known = (meta.api_version.as_str(), meta.kind.as_str());
    if known != (API_VERSION, KIND) && known != (LEGACY_API_VERSION, LEGACY_KIND) {
        return Err(ConfigError::WrongType {
            api_version: meta.api_version,
            kind: meta.kind,
        });
    }
    serde_saphyr::from_str(text).map_err(decode_error)
}

/// The parser's message without its multi-line source excerpt: one log line.
fn decode_error(e: serde_saphyr::Error) -> ConfigError {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    ConfigError::Decode(first.to_owned())
}

/// Go reads `null` as the zero value; serde's `default` alone only covers a missing field.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Parses a Go duration (`300ms`, `1.5h`, `2h45m`, `0`) into seconds, as
/// `time.ParseDuration` does; `None` when it is not one.
pub fn go_duration_seconds(s: &str) -> Option<f64> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0.0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Some(if negative { -total } else { total })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";

    #[test]
    fn yaml_and_json_decode_to_the_same_rules() {
        let yaml = format!(
            "{MINIMAL}resources:\n- resources: [secrets]\n  providers:\n  - identity: {{}}\n"
        );
        let json = r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
            "resources":[{"resources":["secrets"],"providers":[{"identity":{}}]}]}"#;
        for text in [yaml.as_str(), json] {
            let file = decode(text).expect("decodes");
            assert_eq!(file.resources.len(), 1);
            assert_eq!(file.resources[0].resources, ["secrets"]);
            assert!(file.resources[0].providers[0].identity.is_some());
        }
    }

    #[test]
    fn legacy_type_is_accepted_like_kube_apiserver() {
        assert!(decode("apiVersion: v1\nkind: EncryptionConfig\nresources: []\n").is_ok());
    }

    #[test]
    fn wrong_api_version_or_kind_is_named() {
        for text in [
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: EncryptionConfiguration\n",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfigurations\n",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfig\n",
        ] {
            match decode(text) {
                Err(ConfigError::WrongType { .. }) => {}
                other => panic!("{text}: {other:?}"),
            }
        }
        assert_eq!(
            decode("kind: EncryptionConfiguration\n").err(),
            Some(ConfigError::MissingTypeMeta("apiVersion"))
        );
        assert_eq!(
            decode("apiVersion: apiserver.config.k8s.io/v1\n").err(),
            Some(ConfigError::MissingTypeMeta("kind"))
        );
        assert_eq!(decode("").err(), Some(ConfigError::Empty));
    }

    #[test]
    fn unknown_fields_are_errors_as_in_strict_decoding() {
        let text = format!(
            "{MINIMAL}resources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      kyes: []\n"
        );
        match decode(&text) {
            Err(ConfigError::Decode(msg)) => assert!(msg.contains("kyes"), "{msg}"),
            other => panic!("{other:?}"),
        }
        let text = format!("{MINIMAL}resources:\n- resources: [secrets]\n  resources: [pods]\n");
        assert!(matches!(decode(&text), Err(ConfigError::Decode(_))));
    }

    #[test]
    fn null_reads_as_empty_as_in_go() {
        let text =
            format!("{MINIMAL}resources:\n- resources:\n  providers:\n  - aesgcm:\n      keys:\n");
        let file = decode(&text).expect("decodes");
        assert!(file.resources[0].resources.is_empty());
        assert!(file.resources[0].providers[0]
            .aesgcm
            .as_ref()
            .is_some_and(|k| k.keys.is_empty()));
    }

    #[test]
    fn key_debug_never_shows_the_secret() {
        let key = KeyEntry {
            name: "k1".into(),
            secret: "c2VjcmV0".into(),
        };
        assert!(!format!("{key:?}").contains("c2VjcmV0"));
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration_seconds("3s"), Some(3.0));
        assert_eq!(go_duration_seconds("1m30s"), Some(90.0));
        assert_eq!(go_duration_seconds("-1.5h"), Some(-5400.0));
        assert_eq!(go_duration_seconds("0"), Some(0.0));
        assert_eq!(go_duration_seconds("300ms"), Some(0.3));
        for bad in ["", "3", "s", "3x", "1..5s", "-"] {
            assert_eq!(go_duration_seconds(bad), None, "{bad}");
        }
    }
}
