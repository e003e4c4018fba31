//! [`ValueTransformer`]: reads one resource's stored values, as kube-apiserver's prefix
//! transformers do.
//!
//! The providers are tried in file order. A keyed provider is tried when the value
//! begins with its prefix; identity when the value does not begin with `k8s:enc:`. The
//! first that reads the value wins. A keyed provider that fails does not end the search
//! (two providers of one kind may share a prefix while keys rotate), and its error is
//! kept; identity meeting an encrypted value steps aside silently (it may be listed
//! first while a cluster migrates away from encryption). When nothing reads the value,
//! the kept errors are the answer, or "no matching prefix found" if there are none.
//! Semantics from `storage/value/transformer.go` and `encrypt/identity/identity.go`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::errors::DecryptError;
use super::providers::{printable, Provider};
use super::ENCRYPTED_PREFIX;

/// Reads the stored values of the resources one rule covers.
pub struct ValueTransformer {
    /// `None`: no rule covers the resource; plain values only.
    providers: Option<Box<[Provider]>>,
    /// `aescbc(key1), identity`, for messages and logs.
    summary: Arc<str>,
}

impl ValueTransformer {
    /// For a resource no rule covers: plain values are read as they are, an encrypted
    /// one is an error (kube-apiserver: "identity transformer tried to read encrypted
    /// data").
    pub fn identity() -> Self {
        ValueTransformer {
            providers: None,
            summary: Arc::from("identity (no rule)"),
        }
    }

    /// For the resources of a rule (or of several, when one exact pattern repeats).
    pub(super) fn with_providers(providers: Vec<Provider>) -> Self {
        let names: Vec<String> = providers.iter().map(ToString::to_string).collect();
        ValueTransformer {
            providers: Some(providers.into_boxed_slice()),
            summary: Arc::from(names.join(", ")),
        }
    }

    /// Reads a value stored at `etcd_key` (the full key, `/registry/secrets/default/s1`,
    /// which AES-GCM authenticates). A plain value read by identity is borrowed, not
    /// copied; a decrypted one is a new buffer.
    pub fn read<'v>(
        &self,
        value: &'v [u8],
        etcd_key: &[u8],
    ) -> Result<Cow<'v, [u8]>, DecryptError> {
        let encrypted = value.starts_with(ENCRYPTED_PREFIX);
        let Some(providers) = &self.providers else {
            return if encrypted {
                Err(DecryptError::NoMatchingProvider {
                    value_prefix: value_prefix(value),
                    providers: None,
                })
            } else {
                Ok(Cow::Borrowed(value))
            };
        };
        let mut errors = Vec::new();
        for provider in providers.iter() {
            match provider {
                Provider::Identity if !encrypted => return Ok(Cow::Borrowed(value)),
                Provider::Identity => {}
                Provider::Keyed(keyed) => {
                    let Some(rest) = value.strip_prefix(keyed.kind().prefix()) else {
                        continue;
                    };
                    match keyed.open(rest, etcd_key) {
                        Ok(plain) => return Ok(Cow::Owned(plain)),
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
        if !errors.is_empty() {
            return Err(DecryptError::aggregate(errors));
        }
        Err(if encrypted {
            DecryptError::NoMatchingProvider {
                value_prefix: value_prefix(value),
                providers: Some(self.summary.clone()),
            }
        } else {
            DecryptError::PlainValueNotAllowed {
                providers: self.summary.clone(),
            }
        })
    }

    /// Whether this transformer reads plain values only (no rule covers the resource).
    pub fn is_identity(&self) -> bool {
        self.providers.is_none()
    }
}

impl fmt::Display for ValueTransformer {
    /// The providers with their key names: `aescbc(key1, key2), identity`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary)
    }
}

impl fmt::Debug for ValueTransformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ValueTransformer({})", self.summary)
    }
}

/// `k8s:enc:<provider>:<version>:<key name>:` of an encrypted value, for messages:
/// up to five colons, at most 96 bytes, non-printable bytes escaped.
fn value_prefix(value: &[u8]) -> String {
    let head = &value[..value.len().min(96)];
    let end = head
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b':')
        .nth(4)
        .map_or(head.len(), |(i, _)| i + 1);
    printable(&head[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_prefix_stops_after_the_key_name() {
        assert_eq!(
            value_prefix(b"k8s:enc:kms:v2:my-plugin:\x00\x01binary"),
            "k8s:enc:kms:v2:my-plugin:"
        );
        assert_eq!(value_prefix(b"k8s:enc:odd"), "k8s:enc:odd");
        assert_eq!(value_prefix(b"k8s:enc:x:\xff:"), "k8s:enc:x:\\xff:");
    }

    #[test]
    fn identity_borrows_plain_values() {
        let t = ValueTransformer::identity();
        let value = b"{\"kind\":\"Secret\"}";
        assert!(
            matches!(t.read(value, b"/registry/secrets/a/b"), Ok(Cow::Borrowed(v)) if v == value)
        );
        let e = t.read(b"k8s:enc:aescbc:v1:k:xyz", b"/k").err();
        assert_eq!(
            e.as_ref().map(DecryptError::reason),
            Some("no_matching_provider")
        );
        assert!(e.is_some_and(|e| e
            .to_string()
            .starts_with("identity transformer tried to read encrypted data")));
    }
}
