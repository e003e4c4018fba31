//! What can go wrong: loading the configuration ([`ConfigError`], once at start; a key
//! that makes no cipher is a [`KeyError`]) and
//! reading a value ([`DecryptError`], per value, counted by [`DecryptError::reason`]).
//!
//! Messages begin with kube-apiserver's own wording where it has one (so an operator can
//! search for it), followed by what watchd knows besides: the rule, the provider and the
//! key name. Never a secret.

use std::fmt;
use std::sync::Arc;

use super::providers::ProviderKind;
use super::validate::FieldError;

/// Why an encryption configuration cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file is empty (kube-apiserver refuses it before decoding).
    #[error("encryption provider configuration file is empty")]
    Empty,
    /// Not YAML (or JSON), or not of the file's schema: a syntax error, a wrong type, an
    /// unknown or repeated field (kube-apiserver decodes strictly).
    #[error("error decoding encryption provider configuration: {0}")]
    Decode(String),
    /// `apiVersion` or `kind` is missing.
    #[error(
        "error decoding encryption provider configuration: {0} is missing \
         (expected apiVersion: apiserver.config.k8s.io/v1, kind: EncryptionConfiguration)"
    )]
    MissingTypeMeta(&'static str),
    /// `apiVersion`/`kind` name something other than an EncryptionConfiguration.
    #[error(
        "no kind {kind:?} is registered for version {api_version:?} \
         (expected apiVersion: apiserver.config.k8s.io/v1, kind: EncryptionConfiguration)"
    )]
    WrongType {
        /// The file's `apiVersion`.
        api_version: String,
        /// The file's `kind`.
        kind: String,
    },
    /// kube-apiserver's validation failed; every problem found, in its order.
    #[error("invalid encryption configuration: {}", join_field_errors(.0))]
    Invalid(Vec<FieldError>),
    /// A resource listed after a wildcard rule that already covers it.
    #[error("resource {resource:?} is masked by earlier rule {earlier:?}")]
    Masked {
        /// The resource as kube-apiserver prints it (`secrets`, `*.apps`, `*.`).
        resource: String,
        /// The earlier wildcard (`*.apps`, `*.`, `*.*`).
        earlier: String,
    },
    /// A `kms` provider: its keys live in a plugin watchd cannot call.
    #[error(
        "watchd cannot decrypt kms-encrypted values: the KMS plugin {name:?} \
         (kms apiVersion {api_version}) configured for {resources} at {path} is not \
         supported; watchd reads etcd without kube-apiserver's KMS plugins. Remove this \
         provider from the copy of the configuration given to watchd (values it encrypted \
         are then counted and skipped), or store these resources with aescbc, aesgcm or \
         secretbox"
    )]
    KmsUnsupported {
        /// The provider's `name`.
        name: String,
        /// `v1` or `v2`.
        api_version: String,
        /// The rule's resources, comma-separated.
        resources: String,
        /// Where in the file (`resources[0].providers[1]`).
        path: String,
    },
    /// A key that passed validation could not be turned into a cipher (kube-apiserver:
    /// "error while creating cipher for named key ...").
    #[error("error while creating cipher for named key {name}: {cause}")]
    Key {
        /// The key's name.
        name: String,
        /// Why its secret makes no cipher.
        #[source]
        cause: KeyError,
    },
}

/// Why a key's secret cannot become a cipher (kube-apiserver's messages; validation
/// refuses these first, with the field's path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The secret is not standard base64.
    #[error("{0}")]
    Base64(#[from] base64::DecodeError),
    /// AES (`aescbc`, `aesgcm`) takes keys of 16, 24 or 32 bytes.
    #[error("crypto/aes: invalid key size {0}")]
    AesSize(usize),
    /// `secretbox` takes keys of 32 bytes.
    #[error("expected key size 32 for secretbox provider, got {0}")]
    SecretboxSize(usize),
}

fn join_field_errors(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => {
            let all: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", all.join(", "))
        }
    }
}

/// Why one key failed to open a value that named it (kube-apiserver's messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// Shorter than the layout's fixed part (IV, nonce, tag).
    TooShort,
    /// AES-CBC: the ciphertext is not whole 16-byte blocks.
    NotBlockMultiple,
    /// AES-CBC: no ciphertext at all, or a padding length of 0 or past the start.
    InvalidPkcs7Data,
    /// AES-CBC: the padding bytes differ from its length byte.
    InvalidPkcs7Padding,
    /// AES-GCM: the tag does not match (wrong key, tampered value, or another etcd key).
    GcmAuthentication,
    /// Secretbox: the Poly1305 tag does not match (wrong key or tampered value).
    SecretboxAuthentication,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenError::TooShort => "the stored data was shorter than the required size",
            OpenError::NotBlockMultiple => "the stored data is not a multiple of the block size",
            OpenError::InvalidPkcs7Data => "invalid PKCS7 data (empty or not padded)",
            OpenError::InvalidPkcs7Padding => "invalid padding on input",
            OpenError::GcmAuthentication => "cipher: message authentication failed",
            // kube-apiserver's text for a failed secretbox open, misleading as it is.
            OpenError::SecretboxAuthentication => {
                "output array was not large enough for encryption \
                 (secretbox: message authentication failed)"
            }
        })
    }
}

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecryptError {
    /// The value is not encrypted, and the resource's providers do not include identity
    /// (kube-apiserver: "no matching prefix found").
    PlainValueNotAllowed {
        /// The rule's providers, as [`super::ValueTransformer`] prints them.
        providers: Arc<str>,
    },
    /// The value is encrypted, by a provider this resource is not configured with.
    NoMatchingProvider {
        /// The value's leading `k8s:enc:<provider>:<version>:<key>:` (printable part).
        value_prefix: String,
        /// The resource's providers; `None` when no rule covers the resource (then
        /// kube-apiserver says "identity transformer tried to read encrypted data").
        providers: Option<Arc<str>>,
    },
    /// The provider matched, none of its keys is the one the value names.
    NoMatchingKey {
        /// The provider.
        provider: ProviderKind,
        /// The key name the value carries (up to its next `:`).
        key_name: String,
        /// The provider's key names, comma-separated.
        known_keys: Arc<str>,
    },
    /// The named key could not open the value.
    DecryptFailed {
        /// The provider.
        provider: ProviderKind,
        /// The key's name.
        key_name: Arc<str>,
        /// Why.
        cause: OpenError,
    },
    /// Several providers or keys matched the value's prefix and each failed; in the
    /// order tried (kube-apiserver aggregates them the same way).
    Several(Vec<DecryptError>),
}

impl DecryptError {
    /// A short stable label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            DecryptError::PlainValueNotAllowed { .. } => "plain_value_not_allowed",
            DecryptError::NoMatchingProvider { .. } => "no_matching_provider",
            DecryptError::NoMatchingKey { .. } => "no_matching_key",
            DecryptError::DecryptFailed { .. } => "decrypt_failed",
            // A key that was found and failed says more than keys that were not there.
            DecryptError::Several(errors) => errors
                .iter()
                .map(DecryptError::reason)
                .find(|r| *r == "decrypt_failed")
                .unwrap_or("no_matching_key"),
        }
    }

    /// Combines the failures of several candidates the way kube-apiserver's prefix
    /// transformers do: one error stays itself, nested lists are flattened.
    pub(super) fn aggregate(mut errors: Vec<DecryptError>) -> DecryptError {
        if errors.len() == 1 {
            if let Some(one) = errors.pop() {
                return one;
            }
        }
        let mut flat = Vec::with_capacity(errors.len());
        for e in errors {
            match e {
                DecryptError::Several(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        DecryptError::Several(flat)
    }
}

impl fmt::Display for DecryptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecryptError::PlainValueNotAllowed { providers } => write!(
                f,
                "no matching prefix found: the value is not encrypted, and identity is not \
                 among this resource's providers ({providers})"
            ),
            DecryptError::NoMatchingProvider {
                value_prefix,
                providers: Some(providers),
            } => write!(
                f,
                "no matching prefix found: the value is encrypted as {value_prefix}, which none \
                 of this resource's providers ({providers}) reads"
            ),
            DecryptError::NoMatchingProvider {
                value_prefix,
                providers: None,
            } => write!(
                f,
                "identity transformer tried to read encrypted data: the value is encrypted as \
                 {value_prefix}, and no rule of the encryption configuration covers this resource"
            ),
            DecryptError::NoMatchingKey {
                provider,
                key_name,
                known_keys,
            } => write!(
                f,
                "no matching key was found for the provided {} transformer: the value names \
                 {} key {key_name:?}, the configured keys are {known_keys}",
                provider.upstream_family(),
                provider.name(),
            ),
            DecryptError::DecryptFailed {
                provider,
                key_name,
                cause,
            } => write!(f, "{} key {key_name:?}: {cause}", provider.name()),
            DecryptError::Several(errors) => {
                // kube-apiserver prints an aggregate as "[a, b]", each distinct message once.
                let mut seen: Vec<String> = Vec::with_capacity(errors.len());
                for e in errors {
                    let msg = e.to_string();
                    if !seen.contains(&msg) {
                        seen.push(msg);
                    }
                }
                match seen.as_slice() {
                    [one] => f.write_str(one),
                    many => write!(f, "[{}]", many.join(", ")),
                }
            }
        }
    }
}

impl std::error::Error for DecryptError {}
