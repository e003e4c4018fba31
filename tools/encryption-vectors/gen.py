#!/usr/bin/env python3
"""Test vectors for watchd's encryption-at-rest reader (src/codec/encryption/).

Each vector is a value exactly as kube-apiserver 1.34 stores it in etcd, produced here
by an implementation independent of watchd's Rust code: the `cryptography` package for
AES-CBC and AES-GCM, PyNaCl (libsodium) for secretbox. The Rust tests read the output,
tests/data/encryption/vectors.json, with include_str!.

Run it (from the repository root; Python 3.9 or later):

    pip install --target /tmp/encvec cryptography pynacl
    PYTHONPATH=/tmp/encvec python3 tools/encryption-vectors/gen.py          # rewrite
    PYTHONPATH=/tmp/encvec python3 tools/encryption-vectors/gen.py --check  # compare

Keys, IVs and nonces are derived from each vector's name (SHA-256), so the output is the
same on every run and --check can compare it. kube-apiserver draws them at random; a
reader cannot tell the difference.

Where each layout fact comes from (kubernetes/kubernetes, staging/src/k8s.io/apiserver/,
Kubernetes 1.34):
- Prefixes `k8s:enc:aescbc:v1:`, `k8s:enc:aesgcm:v1:`, `k8s:enc:secretbox:v1:`, each
  followed by `<key name>:`: pkg/server/options/encryptionconfig/config.go (the provider
  prefix constants; aesPrefixTransformer and secretboxPrefixTransformer add the key
  name and a colon), matched in order by pkg/storage/value/transformer.go.
- aescbc: a 16-byte IV, then AES-CBC of the plaintext with PKCS#7 padding to 16 bytes
  (a whole block of padding when the plaintext is a multiple of 16); keys of 16, 24 or
  32 bytes: pkg/storage/value/encrypt/aes/aes.go (cbc.TransformToStorage), key sizes in
  pkg/apis/apiserver/validation/validation_encryption.go (aesKeySizes).
- aesgcm: a 12-byte nonce, then Go's AEAD Seal output (ciphertext, then the 16-byte
  tag); the additional authenticated data is the full etcd key the value is stored at,
  without any prefix: pkg/storage/value/encrypt/aes/aes.go (gcm.TransformToStorage,
  newGCM checks the nonce size) and pkg/storage/etcd3/store.go and watcher.go
  (authenticatedDataString of the key as stored in etcd, --etcd-prefix included:
  /registry/secrets/default/s1).
- secretbox: a 24-byte nonce, then NaCl secretbox.Seal's output (the 16-byte Poly1305
  tag, then the XSalsa20 ciphertext); 32-byte keys; no authenticated data:
  pkg/storage/value/encrypt/secretbox/secretbox.go.
"""

import base64
import hashlib
import json
import os
import sys

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
import nacl.secret

OUT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..", "..", "tests", "data", "encryption", "vectors.json",
)

SECRET_JSON = (
    b'{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s1","namespace":"default",'
    b'"uid":"5d1c7a3e-0000-4000-8000-000000000001"},"data":{"password":"aHVudGVyMg=="},'
    b'"type":"Opaque"}\n'
)
# A protobuf-stored ConfigMap, what kube-apiserver encrypts for built-in types (binary,
# with zero bytes): `k8s\0`, runtime.Unknown{typeMeta{v1, ConfigMap}, raw:
# ConfigMap{metadata{name c1, generateName "", namespace default}, data{k: value!}},
# contentEncoding "", contentType ""}.
CONFIGMAP_PROTOBUF = (
    b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x1e\n\x0f\n\x02c1\x12\x00\x1a\x07default"
    b"\x12\x0b\n\x01k\x12\x06value!\x1a\x00\"\x00"
)


def derive(label, n):
    """n bytes that depend only on `label`."""
    out = b""
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:n]


def aescbc(key, plaintext, iv):
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext) + padder.finalize()
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return iv + enc.update(padded) + enc.finalize()


def aesgcm(key, plaintext, nonce, etcd_key):
    return nonce + AESGCM(key).encrypt(nonce, plaintext, etcd_key)


def secretbox(key, plaintext, nonce):
    # PyNaCl's combined form is nonce || tag || ciphertext, the same bytes as Go's
    # secretbox.Seal(nonce[:], ...).
    return bytes(nacl.secret.SecretBox(key).encrypt(plaintext, nonce))


def vector(name, provider, key_name, key_size, etcd_key, plaintext):
    key = derive(f"{name}/key", key_size)
    if provider == "aescbc":
        body = aescbc(key, plaintext, derive(f"{name}/iv", 16))
    elif provider == "aesgcm":
        body = aesgcm(key, plaintext, derive(f"{name}/nonce", 12), etcd_key)
    elif provider == "secretbox":
        body = secretbox(key, plaintext, derive(f"{name}/nonce", 24))
    else:
        raise ValueError(provider)
    stored = f"k8s:enc:{provider}:v1:{key_name}:".encode() + body
    return {
        "name": name,
        "provider": provider,
        "key_name": key_name,
        "key": base64.b64encode(key).decode(),
        "etcd_key": etcd_key.decode(),
        "plaintext": base64.b64encode(plaintext).decode(),
        "stored": base64.b64encode(stored).decode(),
    }


def vectors():
    secret_key = b"/registry/secrets/default/s1"
    cm_key = b"/registry/configmaps/default/c1"
    deploy_key = b"/registry/deployments/default/d1"
    return [
        vector("aescbc-256-json", "aescbc", "key1", 32, secret_key, SECRET_JSON),
        vector("aescbc-128-one-block", "aescbc", "key1", 16, secret_key, b"0123456789abcdef"),
        vector("aescbc-192-empty", "aescbc", "key1", 24, secret_key, b""),
        vector("aescbc-256-protobuf", "aescbc", "key1", 32, cm_key, CONFIGMAP_PROTOBUF),
        vector("aesgcm-256-json", "aesgcm", "key1", 32, secret_key, SECRET_JSON),
        vector("aesgcm-128-protobuf", "aesgcm", "key1", 16, cm_key, CONFIGMAP_PROTOBUF),
        vector("aesgcm-192-empty", "aesgcm", "key1", 24, deploy_key, b""),
        vector("secretbox-json", "secretbox", "key1", 32, secret_key, SECRET_JSON),
        vector("secretbox-empty", "secretbox", "key1", 32, cm_key, b""),
        # Key rotation: the same resource, the old key still listed second.
        vector("rotation-aescbc-old", "aescbc", "old", 32, secret_key, b"written with old"),
        vector("rotation-aescbc-new", "aescbc", "new", 32, secret_key, b"written with new"),
        vector("rotation-aesgcm-old", "aesgcm", "old", 32, secret_key, b"written with old"),
        vector("rotation-secretbox-old", "secretbox", "old", 32, secret_key, b"written with old"),
        # A key name containing ':' (kube-apiserver allows it): `a:` also prefixes it.
        vector("colon-key-name", "aescbc", "a:b", 32, secret_key, b"written with a:b"),
    ]


def main():
    text = json.dumps({"vectors": vectors()}, indent=1) + "\n"
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            if f.read() != text:
                sys.exit(f"{OUT} differs from what gen.py writes")
        print("vectors.json is up to date")
        return
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
