//! kube-apiserver's start-up validation of an EncryptionConfiguration, reproduced: the
//! same checks, in the same order, reported together, each at its field path.
//!
//! watchd reads what kube-apiserver wrote with this file, so it must accept exactly the
//! files kube-apiserver accepts: a stricter check would refuse a working cluster, a
//! looser one would read a file kube-apiserver never ran with. Checks kube-apiserver
//! makes later, while building its transformers (masking by an earlier wildcard rule),
//! are in `resources.rs`.

use std::fmt;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

use super::config::{go_duration_seconds, FileConfig, KeysEntry, KmsEntry, ProviderEntry};
use super::resources::{GroupResource, ANY_GROUP};

/// AES takes 16, 24 or 32-byte keys, for aescbc as for aesgcm.
pub const AES_KEY_SIZES: &[usize] = &[16, 24, 32];
/// Secretbox takes 32-byte keys only.
pub const SECRETBOX_KEY_SIZES: &[usize] = &[32];

/// One problem, at one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    path: String,
    /// `None`: a required value is missing; `Some(v)`: `v` is invalid.
    value: Option<String>,
    detail: String,
}

impl FieldError {
    fn required(path: String, detail: impl Into<String>) -> Self {
        FieldError {
            path,
            value: None,
            detail: detail.into(),
        }
    }

    fn invalid(path: String, value: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            path,
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// The field, as kube-apiserver names it (`resources[0].providers[1].aescbc.keys`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong with it.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            None => write!(f, "{}: Required value: {}", self.path, self.detail),
            Some(v) => write!(f, "{}: Invalid value: {v}: {}", self.path, self.detail),
        }
    }
}

/// Every problem of the file, in kube-apiserver's order; empty when it is valid.
pub fn validate(file: &FileConfig) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if file.resources.is_empty() {
        errors.push(FieldError::required(
            "resources".into(),
            "at least one resources is required",
        ));
        return errors;
    }
    let mut kms_names: Vec<&str> = Vec::new();
    for (i, rule) in file.resources.iter().enumerate() {
        let resources_path = format!("resources[{i}].resources");
        let providers_path = format!("resources[{i}].providers");
        if rule.resources.is_empty() {
            errors.push(FieldError::required(
                resources_path.clone(),
                format!("at least one {resources_path} is required"),
            ));
        }
        errors.extend(overlap_errors(&rule.resources, &resources_path));
        errors.extend(resource_name_errors(&rule.resources, &resources_path));
        if rule.providers.is_empty() {
            errors.push(FieldError::required(
                providers_path.clone(),
                format!("at least one {providers_path} is required"),
            ));
        }
        for (j, provider) in rule.providers.iter().enumerate() {
            let path = format!("{providers_path}[{j}]");
            if let Some(e) = single_provider_error(provider, &path) {
                errors.push(e);
            }
            // Like kube-apiserver, the first provider set is checked even when several are.
            if let Some(kms) = &provider.kms {
                errors.extend(kms_errors(kms, &format!("{path}.kms"), &kms_names));
                kms_names.push(&kms.name);
            } else if let Some(keys) = &provider.aesgcm {
                errors.extend(key_errors(keys, &format!("{path}.aesgcm"), AES_KEY_SIZES));
            } else if let Some(keys) = &provider.aescbc {
                errors.extend(key_errors(keys, &format!("{path}.aescbc"), AES_KEY_SIZES));
            } else if let Some(keys) = &provider.secretbox {
                errors.extend(key_errors(
                    keys,
                    &format!("{path}.secretbox"),
                    SECRETBOX_KEY_SIZES,
                ));
            }
        }
    }
    errors
}

/// Within one rule: a resource listed twice, or a wildcard listed beside what it covers.
/// Each problem is reported once per rule, as kube-apiserver does.
fn overlap_errors(resources: &[String], path: &str) -> Vec<FieldError> {
    if resources.len() < 2 {
        return Vec::new();
    }
    let parsed: Vec<GroupResource> = resources.iter().map(|r| GroupResource::parse(r)).collect();
    let (mut duplicate, mut overlap) = (false, false);
    for (i, a) in parsed.iter().enumerate() {
        for (j, b) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            // The first equal pair counts as the duplicate; later equal pairs are looked
            // at for overlap like any other pair (so `*.*` twice is both).
            if a == b && !duplicate {
                duplicate = true;
                continue;
            }
            if overlap {
                continue;
            }
            if a.is_any_group_any_resource()
                || (a.group == b.group && (a.resource == "*" || b.resource == "*"))
            {
                overlap = true;
            }
        }
    }
    let listed = format!("{resources:?}");
    let mut errors = Vec::new();
    if duplicate {
        errors.push(FieldError::invalid(
            path.into(),
            listed.clone(),
            "the same resource cannot be specified multiple times",
        ));
    }
    if overlap {
        errors.push(FieldError::invalid(
            path.into(),
            listed,
            "using overlapping resources such as 'secrets' and '*.' in the same resource list \
             is not allowed as they will be masked",
        ));
    }
    errors
}

/// Each resource name on its own: the first problem found, per name.
fn resource_name_errors(resources: &[String], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (j, name) in resources.iter().enumerate() {
        let gr = GroupResource::parse(name);
        let detail = if name.to_lowercase() != *name {
            "resource name should not contain capital letters"
        } else if name == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all \
             resources"
        } else if matches!(
            name.as_str(),
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if gr.group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use \
             'events' instead in the config file"
        } else if gr.group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if gr.group == ANY_GROUP && gr.resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errors.push(FieldError::invalid(
            format!("{path}[{j}]"),
            format!("{name:?}"),
            detail,
        ));
    }
    errors
}

fn single_provider_error(provider: &ProviderEntry, path: &str) -> Option<FieldError> {
    let set = [
        provider.kms.is_some(),
        provider.aesgcm.is_some(),
        provider.aescbc.is_some(),
        provider.secretbox.is_some(),
        provider.identity.is_some(),
    ]
    .iter()
    .filter(|s| **s)
    .count();
    let detail = match set {
        0 => {
            "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, \
             Secretbox, Identity"
        }
        1 => return None,
        _ => {
            "more than one provider specified in a single element, should split into different \
             list elements"
        }
    };
    Some(FieldError::invalid(path.into(), "{...}", detail))
}

fn key_errors(entry: &KeysEntry, provider_path: &str, sizes: &[usize]) -> Vec<FieldError> {
    let path = format!("{provider_path}.keys");
    if entry.keys.is_empty() {
        return vec![FieldError::required(path, "at least one keys is required")];
    }
    let mut errors = Vec::new();
    for (i, key) in entry.keys.iter().enumerate() {
        let key_path = format!("{path}[{i}]");
        if key.name.is_empty() {
            errors.push(FieldError::required(
                format!("{key_path}.name"),
                "name is a mandatory field for a key",
            ));
        }
        let secret_path = format!("{key_path}.secret");
        if key.secret.is_empty() {
            errors.push(FieldError::required(
                secret_path,
                "secret is a mandatory field for a key",
            ));
            continue;
        }
        match decode_secret(&key.secret) {
            Err(_) => errors.push(FieldError::invalid(
                secret_path,
                "\"REDACTED\"",
                "secrets must be base64 encoded",
            )),
            Ok(bytes) if !sizes.contains(&bytes.len()) => errors.push(FieldError::invalid(
                secret_path,
                "\"REDACTED\"",
                format!(
                    "secret is not of the expected length, got {}, expected one of {sizes:?}",
                    bytes.len()
                ),
            )),
            Ok(_) => {}
        }
    }
    errors
}

fn kms_errors(kms: &KmsEntry, path: &str, earlier_names: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let version = kms.api_version();
    let name_path = format!("{path}.name");
    if kms.name.is_empty() {
        errors.push(FieldError::required(
            name_path.clone(),
            "name is a mandatory field for a provider",
        ));
    }
    if version != "v1" && kms.name.contains(':') {
        errors.push(FieldError::invalid(
            name_path.clone(),
            format!("{:?}", kms.name),
            format!(
                "invalid KMS provider name {}, must not contain ':'",
                kms.name
            ),
        ));
    }
    // Names must be unique for KMS v2 (v1 only when the file is reloaded, which watchd
    // cannot know; kube-apiserver's default is no reload).
    if version != "v1" && earlier_names.contains(&kms.name.as_str()) {
        errors.push(FieldError::invalid(
            name_path,
            format!("{:?}", kms.name),
            format!(
                "duplicate KMS provider name {}, names must be unique",
                kms.name
            ),
        ));
    }
    // kube-apiserver's default timeout is 3s.
    let timeout = kms.timeout.as_deref().unwrap_or("3s");
    let timeout_problem = match go_duration_seconds(timeout) {
        // kube-apiserver fails earlier, while decoding, with Go's message.
        None => Some(format!("time: invalid duration {timeout:?}")),
        Some(s) if s <= 0.0 => Some("timeout should be a positive value".to_owned()),
        Some(_) => None,
    };
    if let Some(detail) = timeout_problem {
        errors.push(FieldError::invalid(
            format!("{path}.timeout"),
            format!("{timeout:?}"),
            detail,
        ));
    }
    errors.extend(kms_endpoint_error(
        &kms.endpoint,
        &format!("{path}.endpoint"),
    ));
    let cachesize_path = format!("{path}.cachesize");
    match (version, kms.cachesize) {
        ("v1", Some(0)) => errors.push(FieldError::invalid(
            cachesize_path,
            "0",
            "cachesize should be a positive value, or negative to disable",
        )),
        ("v1", _) | (_, None) => {}
        (_, Some(size)) => errors.push(FieldError::invalid(
            cachesize_path,
            size.to_string(),
            "cachesize is not supported in v2",
        )),
    }
    if version != "v1" && version != "v2" {
        errors.push(FieldError::invalid(
            format!("{path}.apiVersion"),
            format!("{version:?}"),
            "unsupported apiVersion for KMS provider, only v1 and v2 are supported",
        ));
    }
    errors
}

fn kms_endpoint_error(endpoint: &str, path: &str) -> Option<FieldError> {
    if endpoint.is_empty() {
        return Some(FieldError::invalid(
            path.into(),
            "\"\"",
            "endpoint is a mandatory field for a kms",
        ));
    }
    // The URL scheme as Go's url.Parse finds it: letters first, then letters, digits,
    // '+', '-', '.', up to the first ':'; anything else means no scheme.
    let scheme = endpoint
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
        .unwrap_or("")
        .to_ascii_lowercase();
    (scheme != "unix").then(|| {
        FieldError::invalid(
            path.into(),
            format!("{endpoint:?}"),
            format!("unsupported scheme {scheme:?} for KMS provider, only unix is supported"),
        )
    })
}

/// Decodes a key's `secret` as Go's `base64.StdEncoding` does: padding required, line
/// breaks ignored, stray bits after the last whole byte tolerated.
pub fn decode_secret(secret: &str) -> Result<Vec<u8>, base64::DecodeError> {
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    if secret.contains(['\r', '\n']) {
        let joined: String = secret
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n'))
            .collect();
        GO_STD.decode(joined)
    } else {
        GO_STD.decode(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encryption::config::decode;

    fn errors_of(rules_yaml: &str) -> Vec<String> {
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n{rules_yaml}"
        );
        let file = decode(&text).expect("decodes");
        validate(&file).iter().map(ToString::to_string).collect()
    }

    const KEY16: &str = "c2VjcmV0IGlzIHNlY3VyZQ==";
    const KEY32: &str = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=";

    #[test]
    fn config_error_no_resources() {
        assert_eq!(
            errors_of("resources: []\n"),
            ["resources: Required value: at least one resources is required"]
        );
    }

    #[test]
    fn config_error_rule_without_resources_or_providers() {
        assert_eq!(
            errors_of("resources:\n- resources: []\n  providers: []\n"),
            [
                "resources[0].resources: Required value: at least one resources[0].resources is required",
                "resources[0].providers: Required value: at least one resources[0].providers is required",
            ]
        );
    }

    #[test]
    fn config_error_empty_keys() {
        assert_eq!(
            errors_of("resources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys: []\n"),
            ["resources[0].providers[0].aesgcm.keys: Required value: at least one keys is required"]
        );
    }

    #[test]
    fn config_error_bad_base64() {
        assert_eq!(
            errors_of("resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys: [{name: k1, secret: 'not base64!'}]\n"),
            ["resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secrets must be base64 encoded"]
        );
    }

    #[test]
    fn config_error_wrong_key_size() {
        assert_eq!(
            errors_of(&format!("resources:\n- resources: [secrets]\n  providers:\n  - secretbox:\n      keys: [{{name: k1, secret: {KEY16}}}]\n")),
            ["resources[0].providers[0].secretbox.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 16, expected one of [32]"]
        );
        // "AAAA" is 3 bytes: no AES key.
        assert_eq!(
            errors_of("resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys: [{name: k1, secret: AAAA}]\n"),
            ["resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 3, expected one of [16, 24, 32]"]
        );
    }

    #[test]
    fn aescbc_accepts_every_aes_key_size_like_kube_apiserver() {
        let k24 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"; // 24 bytes
        for key in [KEY16, k24, KEY32] {
            assert!(errors_of(&format!("resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys: [{{name: k1, secret: {key}}}]\n")).is_empty());
        }
    }

    #[test]
    fn config_error_key_without_name_or_secret() {
        assert_eq!(
            errors_of("resources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys: [{secret: c2VjcmV0IGlzIHNlY3VyZQ==}, {name: k2}]\n"),
            [
                "resources[0].providers[0].aesgcm.keys[0].name: Required value: name is a mandatory field for a key",
                "resources[0].providers[0].aesgcm.keys[1].secret: Required value: secret is a mandatory field for a key",
            ]
        );
    }

    #[test]
    fn config_error_unknown_provider() {
        // An entry naming no provider kube-apiserver knows fails decoding (strict);
        // one naming none at all fails validation.
        let text = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aesctr: {keys: []}\n";
        assert!(matches!(
            decode(text),
            Err(crate::codec::encryption::ConfigError::Decode(m)) if m.contains("aesctr")
        ));
        assert_eq!(
            errors_of("resources:\n- resources: [secrets]\n  providers:\n  - {}\n"),
            ["resources[0].providers[0]: Invalid value: {...}: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"]
        );
    }

    #[test]
    fn config_error_two_providers_in_one_element() {
        assert_eq!(
            errors_of(&format!("resources:\n- resources: [secrets]\n  providers:\n  - identity: {{}}\n    secretbox:\n      keys: [{{name: k1, secret: {KEY32}}}]\n")),
            ["resources[0].providers[0]: Invalid value: {...}: more than one provider specified in a single element, should split into different list elements"]
        );
    }

    #[test]
    fn config_error_duplicate_resource_in_a_rule() {
        assert_eq!(
            errors_of("resources:\n- resources: [secrets, secrets]\n  providers: [{identity: {}}]\n"),
            ["resources[0].resources: Invalid value: [\"secrets\", \"secrets\"]: the same resource cannot be specified multiple times"]
        );
    }

    #[test]
    fn config_error_overlapping_resources_in_a_rule() {
        for list in [
            "[secrets, '*.']",
            "['*.*', deployments.apps]",
            "['*.apps', deployments.apps]",
        ] {
            let errors = errors_of(&format!(
                "resources:\n- resources: {list}\n  providers: [{{identity: {{}}}}]\n"
            ));
            assert_eq!(errors.len(), 1, "{list}: {errors:?}");
            assert!(errors[0].contains("overlapping resources"), "{errors:?}");
        }
        // Different groups do not overlap.
        assert!(errors_of("resources:\n- resources: ['*.apps', secrets, '*.batch']\n  providers: [{identity: {}}]\n").is_empty());
        // `*.*` twice is both a duplicate and an overlap.
        assert_eq!(
            errors_of("resources:\n- resources: ['*.*', '*.*']\n  providers: [{identity: {}}]\n")
                .len(),
            2
        );
    }

    #[test]
    fn config_error_invalid_resource_names() {
        let cases = [
            ("Secrets", "capital letters"),
            ("*", "use '*.'"),
            ("serviceipallocations", "do not have REST API"),
            ("events.events.k8s.io", "'events' API group"),
            (
                "deployments.extensions",
                "'extensions' group has been removed",
            ),
            ("secrets.*", "across groups"),
        ];
        for (name, expected) in cases {
            let errors = errors_of(&format!(
                "resources:\n- resources: ['{name}']\n  providers: [{{identity: {{}}}}]\n"
            ));
            assert_eq!(errors.len(), 1, "{name}: {errors:?}");
            assert!(
                errors[0].starts_with("resources[0].resources[0]: Invalid value:")
                    && errors[0].contains(expected),
                "{name}: {errors:?}"
            );
        }
    }

    #[test]
    fn config_error_kms_timeout_not_a_duration() {
        assert_eq!(
            errors_of("resources:\n- resources: [secrets]\n  providers:\n  - kms: {name: x, endpoint: 'unix:///s', timeout: 3x}\n"),
            ["resources[0].providers[0].kms.timeout: Invalid value: \"3x\": time: invalid duration \"3x\""]
        );
    }

    #[test]
    fn config_error_invalid_kms() {
        let errors = errors_of(
            "resources:\n- resources: [secrets]\n  providers:\n  - kms: {apiVersion: v3, name: foo, endpoint: 'unix:///tmp/kms.sock', timeout: 15s}\n",
        );
        assert_eq!(
            errors,
            ["resources[0].providers[0].kms.apiVersion: Invalid value: \"v3\": unsupported apiVersion for KMS provider, only v1 and v2 are supported"]
        );
        let errors = errors_of(
            "resources:\n- resources: [secrets]\n  providers:\n  - kms: {apiVersion: v2, name: 'a:b', endpoint: 'tcp://kms:1', cachesize: 5, timeout: 0s}\n",
        );
        assert_eq!(errors.len(), 4, "{errors:?}");
    }

    #[test]
    fn secret_decoding_follows_go_std_encoding() {
        assert_eq!(decode_secret("c2VjcmV0").as_deref(), Ok(&b"secret"[..]));
        // Go skips line breaks and tolerates non-zero trailing bits; it requires padding.
        assert_eq!(decode_secret("c2Vj\ncmV0").as_deref(), Ok(&b"secret"[..]));
        assert_eq!(decode_secret("YR==").as_deref(), Ok(&b"a"[..]));
        assert!(decode_secret("YQ").is_err());
        assert!(decode_secret("c2VjcmV0IGlzIHNlY3VyZQ").is_err());
    }
}
