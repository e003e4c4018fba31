//! The `secretbox` layout: `nonce (24 bytes) || Poly1305 tag (16 bytes) || XSalsa20
//! ciphertext` — NaCl's secretbox with the nonce in front.
//!
//! As kube-apiserver writes it (`storage/value/encrypt/secretbox/secretbox.go`, Go's
//! `nacl/secretbox`): a random 24-byte nonce, then `secretbox.Seal`'s output, whose
//! 16-byte tag comes before the ciphertext; 32-byte keys only. The etcd key plays no
//! part. The tag check is the `crypto_secretbox` crate's, in constant time. Cost: one
//! allocation of the plaintext's size.

use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Nonce, XSalsa20Poly1305};

use super::errors::{KeyError, OpenError};

const NONCE: usize = 24;
const TAG: usize = 16;

/// A 32-byte secretbox key.
#[derive(Clone)]
pub struct SecretboxKey(Box<XSalsa20Poly1305>);

impl SecretboxKey {
    /// A key of exactly 32 bytes.
    pub fn new(key: &[u8]) -> Result<Self, KeyError> {
        XSalsa20Poly1305::new_from_slice(key)
            .map(|c| SecretboxKey(Box::new(c)))
            .map_err(|_| KeyError::SecretboxSize(key.len()))
    }

    /// Decrypts and authenticates `data` (the value after `k8s:enc:secretbox:v1:<key>:`).
    pub fn open(&self, data: &[u8]) -> Result<Vec<u8>, OpenError> {
        if data.len() < NONCE + TAG {
            return Err(OpenError::TooShort);
        }
        let (nonce, sealed) = data.split_at(NONCE);
        self.0
            .decrypt(Nonce::from_slice(nonce), sealed)
            .map_err(|_| OpenError::SecretboxAuthentication)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_32_byte_keys() {
        assert!(SecretboxKey::new(&[1; 32]).is_ok());
        for n in [16, 24, 31, 33] {
            assert!(SecretboxKey::new(&vec![1; n]).is_err(), "{n}");
        }
    }

    #[test]
    fn truncated_values() {
        let key = SecretboxKey::new(&[1; 32]).expect("key");
        assert_eq!(key.open(&[0; 39]).err(), Some(OpenError::TooShort));
        assert_eq!(
            key.open(&[0; 40]).err(),
            Some(OpenError::SecretboxAuthentication)
        );
    }
}
