//! Reading values: every provider and layout, rotation, wrong keys, tampering,
//! truncation, and how identity and the prefixes decide.

use std::borrow::Cow;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::{config, provider, secrets, vector, vectors, OTHER_KEY};
use crate::codec::encryption::ValueTransformer;

#[test]
fn every_provider_reads_values_encrypted_as_kube_apiserver_writes_them() {
    for v in vectors() {
        let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
        let stored = v.stored();
        let read = secrets(&c).read(&stored, v.etcd_key.as_bytes());
        assert_eq!(read.as_deref(), Ok(&v.plaintext()[..]), "{}", v.name);
    }
}

#[test]
fn upstream_recorded_aesgcm_value_reads_back() {
    // kube-apiserver's recorded AES-GCM output (aes_test.go), under a configured key.
    let secret = STANDARD.encode("snorlax_awesomes");
    let c = config(&[(&["secrets"], vec![provider("aesgcm", &[("k", &secret)])])]);
    let mut stored = b"k8s:enc:aesgcm:v1:k:".to_vec();
    stored.extend_from_slice(b"\x9f'\xc8\xfc\xea\x8aX\xc4g\xd8\xe47\xdb\xf2\xd8YU\xf9\xb4\xbd\x91/N\xf9g\xd7\x88\xa0\xcb\x07y}\xac\n?\n\x08E`\\\xa8Z\xc8V+J\xe1");
    assert_eq!(
        secrets(&c).read(&stored, b"bamboo").as_deref(),
        Ok(&b"pandas are the best"[..])
    );
}

#[test]
fn aesgcm_authenticates_the_full_etcd_key_without_the_prefix() {
    let v = vector("aesgcm-256-json");
    let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
    let t = secrets(&c);
    let stored = v.stored();
    for wrong in [
        "/registry/secrets/default/s2",
        "/secrets/default/s1",
        "registry/secrets/default/s1",
        "k8s:enc:aesgcm:v1:key1:/registry/secrets/default/s1",
    ] {
        let e = t.read(&stored, wrong.as_bytes()).expect_err(wrong);
        assert_eq!(e.reason(), "decrypt_failed", "{wrong}");
        assert_eq!(
            e.to_string(),
            "aesgcm key \"key1\": cipher: message authentication failed"
        );
    }
}

#[test]
fn aescbc_and_secretbox_ignore_the_etcd_key() {
    for name in ["aescbc-256-json", "secretbox-json"] {
        let v = vector(name);
        let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
        assert_eq!(
            secrets(&c).read(&v.stored(), b"/anywhere").as_deref(),
            Ok(&v.plaintext()[..])
        );
    }
}

#[test]
fn key_rotation_old_key_still_readable() {
    for (kind, old, new) in [
        ("aescbc", "rotation-aescbc-old", "rotation-aescbc-new"),
        ("aesgcm", "rotation-aesgcm-old", "aescbc-256-json"),
        ("secretbox", "rotation-secretbox-old", "secretbox-json"),
    ] {
        let (old, new) = (vector(old), vector(new));
        // The new key first (it writes), the old one still listed.
        let c = config(&[(
            &["secrets"],
            vec![provider(kind, &[("new", &new.key), ("old", &old.key)])],
        )]);
        assert_eq!(
            secrets(&c)
                .read(&old.stored(), old.etcd_key.as_bytes())
                .as_deref(),
            Ok(&old.plaintext()[..]),
            "{kind}"
        );
    }
    let new = vector("rotation-aescbc-new");
    let old = vector("rotation-aescbc-old");
    let c = config(&[(
        &["secrets"],
        vec![provider("aescbc", &[("new", &new.key), ("old", &old.key)])],
    )]);
    assert_eq!(
        secrets(&c)
            .read(&new.stored(), new.etcd_key.as_bytes())
            .as_deref(),
        Ok(&new.plaintext()[..])
    );
}

#[test]
fn key_rotation_across_two_providers_of_one_kind() {
    // Both providers claim `k8s:enc:aescbc:v1:`; the first has no key "old" and steps
    // aside with an error that is dropped once the second reads the value.
    let (new, old) = (vector("rotation-aescbc-new"), vector("rotation-aescbc-old"));
    let c = config(&[(
        &["secrets"],
        vec![
            provider("aescbc", &[("new", &new.key)]),
            provider("aescbc", &[("old", &old.key)]),
        ],
    )]);
    assert_eq!(
        secrets(&c)
            .read(&old.stored(), old.etcd_key.as_bytes())
            .as_deref(),
        Ok(&old.plaintext()[..])
    );
}

#[test]
fn wrong_key_is_an_error() {
    for v in vectors() {
        let c = config(&[(
            &["secrets"],
            vec![provider(&v.provider, &[(&v.key_name, OTHER_KEY)])],
        )]);
        let e = secrets(&c)
            .read(&v.stored(), v.etcd_key.as_bytes())
            .expect_err(&v.name);
        assert_eq!(e.reason(), "decrypt_failed", "{}: {e}", v.name);
        assert!(
            e.to_string()
                .starts_with(&format!("{} key \"{}\": ", v.provider, v.key_name)),
            "{e}"
        );
    }
}

#[test]
fn key_not_listed_is_no_matching_key() {
    let v = vector("rotation-aescbc-old");
    let c = config(&[(
        &["secrets"],
        vec![provider("aescbc", &[("k1", OTHER_KEY), ("k2", OTHER_KEY)])],
    )]);
    let e = secrets(&c)
        .read(&v.stored(), v.etcd_key.as_bytes())
        .expect_err("no key old");
    assert_eq!(e.reason(), "no_matching_key");
    assert_eq!(
        e.to_string(),
        "no matching key was found for the provided AES transformer: the value names aescbc \
         key \"old\", the configured keys are k1, k2"
    );
    let v = vector("rotation-secretbox-old");
    let c = config(&[(
        &["secrets"],
        vec![provider("secretbox", &[("k1", OTHER_KEY)])],
    )]);
    let e = secrets(&c)
        .read(&v.stored(), b"/k")
        .expect_err("no key old");
    assert!(e
        .to_string()
        .starts_with("no matching key was found for the provided Secretbox transformer"));
}

#[test]
fn tampered_ciphertext_is_an_error() {
    for v in vectors() {
        let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
        let t = secrets(&c);
        let mut stored = v.stored();
        // The last byte: a tag byte (GCM), a ciphertext byte (secretbox), a padding
        // block byte (CBC, which only its padding check can notice).
        if let Some(last) = stored.last_mut() {
            *last ^= 0x01;
        }
        let e = t.read(&stored, v.etcd_key.as_bytes()).expect_err(&v.name);
        assert_eq!(e.reason(), "decrypt_failed", "{}", v.name);
    }
    // Authenticated layouts notice a change anywhere after the prefix.
    for name in ["aesgcm-256-json", "secretbox-json"] {
        let v = vector(name);
        let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
        let clean = v.stored();
        let body_start = format!("k8s:enc:{}:v1:key1:", v.provider).len();
        for i in body_start..clean.len() {
            let mut stored = clean.clone();
            stored[i] ^= 0x80;
            assert!(
                secrets(&c).read(&stored, v.etcd_key.as_bytes()).is_err(),
                "{name} byte {i}"
            );
        }
    }
}

#[test]
fn truncated_values_are_errors_never_panics() {
    for v in vectors() {
        let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
        let t = secrets(&c);
        let stored = v.stored();
        let plain = v.plaintext();
        for len in 0..stored.len() {
            match t.read(&stored[..len], v.etcd_key.as_bytes()) {
                Err(_) => {}
                // CBC is unauthenticated: a shorter value may still unpad, but it can
                // never give back the plaintext.
                Ok(other) => assert!(
                    v.provider == "aescbc" && *other != plain[..],
                    "{} truncated to {len} read as {other:?}",
                    v.name
                ),
            }
        }
    }
    let v = vector("aesgcm-256-json");
    let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
    let prefix_only = b"k8s:enc:aesgcm:v1:key1:";
    let e = secrets(&c)
        .read(prefix_only, b"/k")
        .expect_err("empty body");
    assert_eq!(
        e.to_string(),
        "aesgcm key \"key1\": the stored data was shorter than the required size"
    );
    let e = secrets(&c)
        .read(b"k8s:enc:aesgcm:v1:ke", b"/k")
        .expect_err("cut key");
    assert_eq!(e.reason(), "no_matching_key");
}

#[test]
fn plain_value_with_identity_is_borrowed() {
    let v = vector("aescbc-256-json");
    let c = config(&[(
        &["secrets"],
        vec![v.provider_yaml(), provider("identity", &[])],
    )]);
    let plain = b"k8s\x00\x0a\x02v1";
    match secrets(&c).read(plain, b"/registry/secrets/a/b") {
        Ok(Cow::Borrowed(read)) => assert_eq!(read, plain),
        other => panic!("{other:?}"),
    }
    // The encrypted one still reads through the keyed provider.
    assert_eq!(
        secrets(&c).read(&v.stored(), b"/k").as_deref(),
        Ok(&v.plaintext()[..])
    );
}

#[test]
fn plain_value_without_identity_is_refused() {
    let v = vector("aescbc-256-json");
    let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
    let e = secrets(&c)
        .read(b"{\"kind\":\"Secret\"}", b"/registry/secrets/a/b")
        .expect_err("plain value");
    assert_eq!(e.reason(), "plain_value_not_allowed");
    assert_eq!(
        e.to_string(),
        "no matching prefix found: the value is not encrypted, and identity is not among this \
         resource's providers (aescbc(key1))"
    );
}

#[test]
fn identity_first_still_reads_encrypted_values() {
    // Migrating away from encryption: identity writes, the old key still reads.
    let v = vector("secretbox-json");
    let c = config(&[(
        &["secrets"],
        vec![provider("identity", &[]), v.provider_yaml()],
    )]);
    assert_eq!(
        secrets(&c).read(&v.stored(), b"/k").as_deref(),
        Ok(&v.plaintext()[..])
    );
}

#[test]
fn identity_listed_and_key_not_listed_is_no_matching_key() {
    // Identity steps aside silently for an encrypted value; the keyed provider's
    // failure is the answer.
    let v = vector("rotation-aescbc-old");
    let c = config(&[(
        &["secrets"],
        vec![
            provider("identity", &[]),
            provider("aescbc", &[("new", OTHER_KEY)]),
        ],
    )]);
    let e = secrets(&c)
        .read(&v.stored(), b"/k")
        .expect_err("old not listed");
    assert_eq!(e.reason(), "no_matching_key");
}

#[test]
fn encrypted_value_under_an_identity_only_rule_matches_no_prefix() {
    let v = vector("aescbc-256-json");
    let c = config(&[(&["secrets"], vec![provider("identity", &[])])]);
    let e = secrets(&c).read(&v.stored(), b"/k").expect_err("encrypted");
    assert_eq!(e.reason(), "no_matching_provider");
    assert_eq!(
        e.to_string(),
        "no matching prefix found: the value is encrypted as k8s:enc:aescbc:v1:key1:, which none \
         of this resource's providers (identity) reads"
    );
}

#[test]
fn value_of_an_unconfigured_provider_matches_no_prefix() {
    let v = vector("aescbc-256-json");
    let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
    let e = secrets(&c)
        .read(b"k8s:enc:kms:v2:vault:\x0a\x01\x02", b"/k")
        .expect_err("kms value");
    assert_eq!(e.reason(), "no_matching_provider");
    assert!(e.to_string().contains("k8s:enc:kms:v2:vault:"), "{e}");
}

#[test]
fn resource_without_rule_reads_plain_and_refuses_encrypted() {
    let v = vector("aescbc-256-json");
    let c = config(&[(&["secrets"], vec![v.provider_yaml()])]);
    let pods = c.transformer("", "pods");
    assert!(pods.is_identity());
    let plain = b"{\"kind\":\"Pod\"}";
    assert!(matches!(
        pods.read(plain, b"/registry/pods/a/b"),
        Ok(Cow::Borrowed(_))
    ));
    let e = pods.read(&v.stored(), b"/k").expect_err("encrypted pod");
    assert_eq!(e.reason(), "no_matching_provider");
    assert!(e
        .to_string()
        .starts_with("identity transformer tried to read encrypted data"));
    assert!(ValueTransformer::identity().is_identity());
}

#[test]
fn several_failures_are_reported_together() {
    let v = vector("aescbc-256-json");
    let mut tampered = v.stored();
    if let Some(last) = tampered.last_mut() {
        *last ^= 0x01;
    }
    let c = config(&[(
        &["secrets"],
        vec![
            provider("aescbc", &[("key2", OTHER_KEY)]),
            v.provider_yaml(),
        ],
    )]);
    let e = secrets(&c).read(&tampered, b"/k").expect_err("tampered");
    assert_eq!(e.reason(), "decrypt_failed");
    let text = e.to_string();
    assert!(
        text.starts_with("[no matching key was found for the provided AES transformer")
            && text.contains(", aescbc key \"key1\": invalid"),
        "{text}"
    );
}

#[test]
fn key_names_that_prefix_each_other_are_each_tried() {
    // "a:" also begins a value written with key "a:b"; kube-apiserver tries key "a",
    // then "a:b".
    let v = vector("colon-key-name");
    let c = config(&[(
        &["secrets"],
        vec![provider("aescbc", &[("a", OTHER_KEY), ("a:b", &v.key)])],
    )]);
    assert_eq!(
        secrets(&c).read(&v.stored(), b"/k").as_deref(),
        Ok(&v.plaintext()[..])
    );
}
