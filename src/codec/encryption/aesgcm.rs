//! The `aesgcm` layout: `nonce (12 bytes) || AES-GCM ciphertext || tag (16 bytes)`,
//! authenticated with the etcd key.
//!
//! As kube-apiserver writes it (`storage/value/encrypt/aes/aes.go`): a 12-byte nonce,
//! then Go's `Seal` output, the ciphertext followed by its 16-byte tag; keys of 16, 24
//! or 32 bytes. The additional authenticated data is the value's full etcd key as
//! stored (`/registry/secrets/default/s1`, `storage/etcd3/store.go`), without any
//! `k8s:enc:` prefix: a value copied under another key fails to open. The tag check is
//! the `aes-gcm` crate's, in constant time. Cost: one allocation of the plaintext's size.

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm, Nonce};

use super::errors::{KeyError, OpenError};

const NONCE: usize = 12;

type Aes192Gcm = AesGcm<aes::Aes192, U12>;

/// An AES key for GCM.
#[derive(Clone)]
pub enum AesGcmKey {
    /// 16-byte key.
    Aes128(Box<Aes128Gcm>),
    /// 24-byte key.
    Aes192(Box<Aes192Gcm>),
    /// 32-byte key.
    Aes256(Box<Aes256Gcm>),
}

impl AesGcmKey {
    /// A key of 16, 24 or 32 bytes.
    pub fn new(key: &[u8]) -> Result<Self, KeyError> {
        let invalid = |_| KeyError::AesSize(key.len());
        Ok(match key.len() {
            16 => AesGcmKey::Aes128(Box::new(Aes128Gcm::new_from_slice(key).map_err(invalid)?)),
            24 => AesGcmKey::Aes192(Box::new(Aes192Gcm::new_from_slice(key).map_err(invalid)?)),
            32 => AesGcmKey::Aes256(Box::new(Aes256Gcm::new_from_slice(key).map_err(invalid)?)),
            n => return Err(KeyError::AesSize(n)),
        })
    }

    /// Decrypts and authenticates `data` (the value after `k8s:enc:aesgcm:v1:<key>:`),
    /// stored at `etcd_key`.
    pub fn open(&self, data: &[u8], etcd_key: &[u8]) -> Result<Vec<u8>, OpenError> {
        if data.len() < NONCE {
            return Err(OpenError::TooShort);
        }
        let (nonce, sealed) = data.split_at(NONCE);
        let nonce = Nonce::<U12>::try_from(nonce).map_err(|_| OpenError::TooShort)?;
        let payload = Payload {
            msg: sealed,
            aad: etcd_key,
        };
        match self {
            AesGcmKey::Aes128(c) => c.decrypt(&nonce, payload),
            AesGcmKey::Aes192(c) => c.decrypt(&nonce, payload),
            AesGcmKey::Aes256(c) => c.decrypt(&nonce, payload),
        }
        .map_err(|_| OpenError::GcmAuthentication)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube-apiserver's recorded AES-GCM output (`aes_test.go`, legacy data
    /// compatibility): key `snorlax_awesomes`, authenticated data `bamboo`.
    const LEGACY_CIPHERTEXT: &[u8] = b"\x9f'\xc8\xfc\xea\x8aX\xc4g\xd8\xe47\xdb\xf2\xd8YU\xf9\xb4\xbd\x91/N\xf9g\xd7\x88\xa0\xcb\x07y}\xac\n?\n\x08E`\\\xa8Z\xc8V+J\xe1";

    #[test]
    fn opens_kube_apiservers_recorded_value() {
        let key = AesGcmKey::new(b"snorlax_awesomes").expect("key");
        assert_eq!(
            key.open(LEGACY_CIPHERTEXT, b"bamboo").as_deref(),
            Ok(&b"pandas are the best"[..])
        );
        assert_eq!(
            key.open(LEGACY_CIPHERTEXT, b"bamboo!").err(),
            Some(OpenError::GcmAuthentication)
        );
    }

    #[test]
    fn truncated_values() {
        let key = AesGcmKey::new(&[7; 16]).expect("key");
        assert_eq!(key.open(&[0; 11], b"k").err(), Some(OpenError::TooShort));
        // A nonce and less than a tag cannot authenticate.
        assert_eq!(
            key.open(&[0; 27], b"k").err(),
            Some(OpenError::GcmAuthentication)
        );
    }
}
