//! The `aescbc` layout: `IV (16 bytes) || AES-CBC(plaintext + PKCS#7 padding)`.
//!
//! As kube-apiserver writes it (`storage/value/encrypt/aes/aes.go`): a random 16-byte
//! IV, then the padded plaintext in CBC mode; keys of 16, 24 or 32 bytes (AES-128/192/
//! 256). Nothing is authenticated and the etcd key plays no part. Padding is checked
//! with kube-apiserver's rule, not the crate's: a padding length of 1 up to the whole
//! plaintext is accepted (not only up to one block), as long as every padding byte
//! equals it. Cost: one allocation of the ciphertext's size per value.

use aes::cipher::block_padding::NoPadding;
use aes::cipher::{BlockCipherDecrypt, BlockModeDecrypt, InnerIvInit, KeyInit};
use aes::{Aes128, Aes192, Aes256};

use super::errors::{KeyError, OpenError};

const BLOCK: usize = 16;

/// An AES key for CBC.
#[derive(Clone)]
pub enum AesCbcKey {
    /// 16-byte key (boxed: key schedules are large, and a provider holds several).
    Aes128(Box<Aes128>),
    /// 24-byte key.
    Aes192(Box<Aes192>),
    /// 32-byte key.
    Aes256(Box<Aes256>),
}

impl AesCbcKey {
    /// A key of 16, 24 or 32 bytes.
    pub fn new(key: &[u8]) -> Result<Self, KeyError> {
        let invalid = |_| KeyError::AesSize(key.len());
        Ok(match key.len() {
            16 => AesCbcKey::Aes128(Box::new(Aes128::new_from_slice(key).map_err(invalid)?)),
            24 => AesCbcKey::Aes192(Box::new(Aes192::new_from_slice(key).map_err(invalid)?)),
            32 => AesCbcKey::Aes256(Box::new(Aes256::new_from_slice(key).map_err(invalid)?)),
            n => return Err(KeyError::AesSize(n)),
        })
    }

    /// Decrypts `data` (the value after `k8s:enc:aescbc:v1:<key>:`).
    pub fn open(&self, data: &[u8]) -> Result<Vec<u8>, OpenError> {
        if data.len() < BLOCK {
            return Err(OpenError::TooShort);
        }
        let (iv, body) = data.split_at(BLOCK);
        if body.len() % BLOCK != 0 {
            return Err(OpenError::NotBlockMultiple);
        }
        let mut out = vec![0; body.len()];
        let decrypted = match self {
            AesCbcKey::Aes128(c) => decrypt::<Aes128>(c, iv, body, &mut out),
            AesCbcKey::Aes192(c) => decrypt::<Aes192>(c, iv, body, &mut out),
            AesCbcKey::Aes256(c) => decrypt::<Aes256>(c, iv, body, &mut out),
        };
        // Neither can fail: the IV is one block, the body whole blocks, `out` as long.
        decrypted.map_err(|()| OpenError::NotBlockMultiple)?;
        let size = unpad(&out)?;
        out.truncate(size);
        Ok(out)
    }
}

fn decrypt<C>(cipher: &C, iv: &[u8], body: &[u8], out: &mut [u8]) -> Result<(), ()>
where
    C: BlockCipherDecrypt + Clone,
    cbc::Decryptor<C>: InnerIvInit<Inner = C> + BlockModeDecrypt,
{
    let mode = cbc::Decryptor::<C>::inner_iv_slice_init(cipher.clone(), iv).map_err(|_| ())?;
    mode.decrypt_padded_b2b::<NoPadding>(body, out)
        .map(|_| ())
        .map_err(|_| ())
}

/// The plaintext's length after kube-apiserver's PKCS#7 check.
fn unpad(plain: &[u8]) -> Result<usize, OpenError> {
    // An IV with no ciphertext has no padding byte (kube-apiserver would index out of
    // range here; an error is the useful reading).
    let Some(&last) = plain.last() else {
        return Err(OpenError::InvalidPkcs7Data);
    };
    let padding = usize::from(last);
    if padding == 0 || padding > plain.len() {
        return Err(OpenError::InvalidPkcs7Data);
    }
    let size = plain.len() - padding;
    if plain[size..].iter().any(|b| *b != last) {
        return Err(OpenError::InvalidPkcs7Padding);
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_follows_kube_apiserver() {
        assert_eq!(unpad(&[b'a', 1]), Ok(1));
        assert_eq!(unpad(&[2, 2]), Ok(0));
        // Longer than one block is accepted, as kube-apiserver does.
        assert_eq!(unpad(&[17; 32]), Ok(15));
        assert_eq!(unpad(&[0; 16]), Err(OpenError::InvalidPkcs7Data));
        assert_eq!(unpad(&[33; 32]), Err(OpenError::InvalidPkcs7Data));
        assert_eq!(unpad(&[]), Err(OpenError::InvalidPkcs7Data));
        assert_eq!(unpad(&[1, 3, 3]), Err(OpenError::InvalidPkcs7Padding));
    }

    #[test]
    fn only_aes_key_sizes() {
        for n in [16, 24, 32] {
            assert!(AesCbcKey::new(&vec![7; n]).is_ok(), "{n}");
        }
        for n in [0, 15, 31, 33, 64] {
            assert!(AesCbcKey::new(&vec![7; n]).is_err(), "{n}");
        }
    }

    #[test]
    fn truncated_values() {
        let key = AesCbcKey::new(&[7; 32]).expect("key");
        assert_eq!(key.open(&[0; 15]).err(), Some(OpenError::TooShort));
        assert_eq!(key.open(&[0; 17]).err(), Some(OpenError::NotBlockMultiple));
        assert_eq!(key.open(&[0; 16]).err(), Some(OpenError::InvalidPkcs7Data));
    }
}
