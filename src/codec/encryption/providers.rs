//! Providers and their named keys, built from a validated rule: what each one's prefix
//! is and which cipher opens what follows it.
//!
//! A value written by a keyed provider is `k8s:enc:<provider>:v1:<key name>:<layout>`;
//! the provider prefix selects the provider, `<key name>:` selects the key, and the
//! layout is the cipher's (`aescbc.rs`, `aesgcm.rs`, `secretbox.rs`). Identity has no
//! prefix: it claims any value not beginning with `k8s:enc:`. KMS providers are refused
//! here, where kube-apiserver would start talking to the plugin.

use std::fmt;
use std::sync::Arc;

use super::aescbc::AesCbcKey;
use super::aesgcm::AesGcmKey;
use super::config::{KeysEntry, ProviderEntry, RuleEntry};
use super::errors::{ConfigError, DecryptError, KeyError, OpenError};
use super::secretbox::SecretboxKey;
use super::validate::decode_secret;

/// A kind of provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Plain values.
    Identity,
    /// AES-CBC with PKCS#7 padding.
    AesCbc,
    /// AES-GCM.
    AesGcm,
    /// XSalsa20-Poly1305 (NaCl secretbox).
    Secretbox,
}

impl ProviderKind {
    /// The name in the configuration file.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Identity => "identity",
            ProviderKind::AesCbc => "aescbc",
            ProviderKind::AesGcm => "aesgcm",
            ProviderKind::Secretbox => "secretbox",
        }
    }

    /// What every value this provider writes begins with (empty for identity).
    pub fn prefix(self) -> &'static [u8] {
        match self {
            ProviderKind::Identity => b"",
            ProviderKind::AesCbc => b"k8s:enc:aescbc:v1:",
            ProviderKind::AesGcm => b"k8s:enc:aesgcm:v1:",
            ProviderKind::Secretbox => b"k8s:enc:secretbox:v1:",
        }
    }

    /// How kube-apiserver names the provider in "no matching key was found for the
    /// provided ... transformer".
    pub fn upstream_family(self) -> &'static str {
        match self {
            ProviderKind::AesCbc | ProviderKind::AesGcm => "AES",
            ProviderKind::Secretbox => "Secretbox",
            ProviderKind::Identity => "identity",
        }
    }
}

/// One provider of a rule. Cheap to clone: a rule's providers are shared by all its
/// resources.
#[derive(Clone)]
pub enum Provider {
    /// Reads values without the `k8s:enc:` prefix as they are.
    Identity,
    /// Reads values under its prefix with one of its keys.
    Keyed(Arc<KeyedProvider>),
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Provider {
    /// `identity`, `aescbc(key1, key2)`: names only, never secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Provider::Identity => f.write_str("identity"),
            Provider::Keyed(p) => write!(f, "{}({})", p.kind.name(), p.key_names),
        }
    }
}

/// A keyed provider: its kind and its keys in file order.
pub struct KeyedProvider {
    kind: ProviderKind,
    keys: Vec<NamedKey>,
    /// `key1, key2`, for messages.
    key_names: Arc<str>,
}

struct NamedKey {
    name: Arc<str>,
    /// `<name>:`.
    prefix: Box<[u8]>,
    cipher: KeyCipher,
}

enum KeyCipher {
    AesCbc(AesCbcKey),
    AesGcm(AesGcmKey),
    Secretbox(SecretboxKey),
}

impl KeyCipher {
    fn open(&self, data: &[u8], etcd_key: &[u8]) -> Result<Vec<u8>, OpenError> {
        match self {
            KeyCipher::AesCbc(k) => k.open(data),
            KeyCipher::AesGcm(k) => k.open(data, etcd_key),
            KeyCipher::Secretbox(k) => k.open(data),
        }
    }
}

impl KeyedProvider {
    /// The provider's kind.
    pub fn kind(&self) -> ProviderKind {
        self.kind
    }

    /// Opens `data` (the value after the provider prefix) with the key it names.
    ///
    /// As kube-apiserver's per-key prefix transformers: every key whose `<name>:`
    /// begins `data` is tried in file order, the first that opens it wins; none
    /// matching is "no matching key", all failing is their errors together.
    pub fn open(&self, data: &[u8], etcd_key: &[u8]) -> Result<Vec<u8>, DecryptError> {
        let mut errors = Vec::new();
        for key in &self.keys {
            let Some(sealed) = data.strip_prefix(&*key.prefix) else {
                continue;
            };
            match key.cipher.open(sealed, etcd_key) {
                Ok(plain) => return Ok(plain),
                Err(cause) => errors.push(DecryptError::DecryptFailed {
                    provider: self.kind,
                    key_name: key.name.clone(),
                    cause,
                }),
            }
        }
        if errors.is_empty() {
            return Err(DecryptError::NoMatchingKey {
                provider: self.kind,
                key_name: named_key(data),
                known_keys: self.key_names.clone(),
            });
        }
        Err(DecryptError::aggregate(errors))
    }
}

/// The key name a value carries, for messages: up to the next `:`, printable, bounded.
fn named_key(data: &[u8]) -> String {
    let end = data.iter().position(|b| *b == b':').unwrap_or(data.len());
    printable(&data[..end.min(64)])
}

/// Bytes as text for a message, non-printable bytes escaped.
pub fn printable(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// Builds a validated rule's providers; refuses KMS.
pub fn build_rule(index: usize, rule: &RuleEntry) -> Result<Vec<Provider>, ConfigError> {
    let mut providers = Vec::with_capacity(rule.providers.len());
    for (j, entry) in rule.providers.iter().enumerate() {
        providers.push(build_provider(entry).map_err(|e| match e {
            BuildError::Config(e) => e,
            BuildError::Kms { name, api_version } => ConfigError::KmsUnsupported {
                name,
                api_version,
                resources: rule.resources.join(", "),
                path: format!("resources[{index}].providers[{j}]"),
            },
        })?);
    }
    Ok(providers)
}

enum BuildError {
    Config(ConfigError),
    Kms { name: String, api_version: String },
}

fn build_provider(entry: &ProviderEntry) -> Result<Provider, BuildError> {
    // The same precedence as kube-apiserver when (invalidly) several are set.
    if let Some(keys) = &entry.aesgcm {
        keyed(ProviderKind::AesGcm, keys, |k| {
            AesGcmKey::new(k).map(KeyCipher::AesGcm)
        })
    } else if let Some(keys) = &entry.aescbc {
        keyed(ProviderKind::AesCbc, keys, |k| {
            AesCbcKey::new(k).map(KeyCipher::AesCbc)
        })
    } else if let Some(keys) = &entry.secretbox {
        keyed(ProviderKind::Secretbox, keys, |k| {
            SecretboxKey::new(k).map(KeyCipher::Secretbox)
        })
    } else if let Some(kms) = &entry.kms {
        Err(BuildError::Kms {
            name: kms.name.clone(),
            api_version: kms.api_version().to_owned(),
        })
    } else if entry.identity.is_some() {
        Ok(Provider::Identity)
    } else {
        // Validation refuses an entry without a provider; never reached.
        Err(BuildError::Config(ConfigError::Decode(
            "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, \
             Secretbox, Identity"
                .into(),
        )))
    }
}

fn keyed(
    kind: ProviderKind,
    entry: &KeysEntry,
    cipher: impl Fn(&[u8]) -> Result<KeyCipher, KeyError>,
) -> Result<Provider, BuildError> {
    let mut keys = Vec::with_capacity(entry.keys.len());
    for key in &entry.keys {
        let error = |cause: KeyError| {
            BuildError::Config(ConfigError::Key {
                name: key.name.clone(),
                cause,
            })
        };
        let bytes = decode_secret(&key.secret).map_err(|e| error(e.into()))?;
        keys.push(NamedKey {
            name: Arc::from(key.name.as_str()),
            prefix: format!("{}:", key.name).into_bytes().into_boxed_slice(),
            cipher: cipher(&bytes).map_err(error)?,
        });
    }
    let key_names: Vec<&str> = entry.keys.iter().map(|k| k.name.as_str()).collect();
    Ok(Provider::Keyed(Arc::new(KeyedProvider {
        kind,
        keys,
        key_names: Arc::from(key_names.join(", ")),
    })))
}
