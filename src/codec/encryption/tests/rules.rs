//! Loading configurations and choosing a resource's rule: precedence, wildcards,
//! sharing, the startup summary, and the errors that stop loading.

use std::sync::Arc;

use super::{config, config_text, provider, OTHER_KEY};
use crate::codec::encryption::{is_encrypted, ConfigError, EncryptionConfig, FieldError};

/// The example of kube-apiserver's EncryptionConfiguration documentation, keys aside.
fn documented_example() -> EncryptionConfig {
    let (k1, k2, k3) = (
        provider("aescbc", &[("key1", OTHER_KEY)]),
        provider("aescbc", &[("key2", OTHER_KEY)]),
        provider("aescbc", &[("key3", OTHER_KEY)]),
    );
    config(&[
        (&["events"], vec![provider("identity", &[])]),
        (
            &["secrets", "configmaps", "pandas.awesome.bears.example"],
            vec![k1],
        ),
        (&["*.apps"], vec![k2]),
        (&["*.*"], vec![k3]),
    ])
}

#[test]
fn resource_matching_exact_then_group_wildcard_then_any() {
    let c = documented_example();
    let cases = [
        ("", "events", "identity"),
        ("", "secrets", "aescbc(key1)"),
        ("", "configmaps", "aescbc(key1)"),
        ("awesome.bears.example", "pandas", "aescbc(key1)"),
        ("apps", "deployments", "aescbc(key2)"),
        ("apps", "statefulsets", "aescbc(key2)"),
        ("batch", "jobs", "aescbc(key3)"),
        ("", "pods", "aescbc(key3)"),
        ("awesome.bears.example", "koalas", "aescbc(key3)"),
    ];
    for (group, resource, expected) in cases {
        assert_eq!(
            c.transformer(group, resource).to_string(),
            expected,
            "{group}/{resource}"
        );
    }
}

#[test]
fn resource_matching_core_group_wildcard() {
    let c = config(&[
        (
            &["secrets"],
            vec![provider("secretbox", &[("sb", OTHER_KEY)])],
        ),
        (&["*."], vec![provider("aesgcm", &[("core", OTHER_KEY)])]),
    ]);
    assert_eq!(c.transformer("", "secrets").to_string(), "secretbox(sb)");
    assert_eq!(c.transformer("", "pods").to_string(), "aesgcm(core)");
    // `*.` is the core group only.
    assert!(c.transformer("apps", "deployments").is_identity());
}

#[test]
fn resource_matching_same_resource_in_two_rules_concatenates() {
    let c = config(&[
        (&["secrets"], vec![provider("aesgcm", &[("k1", OTHER_KEY)])]),
        (&["configmaps", "secrets"], vec![provider("identity", &[])]),
    ]);
    assert_eq!(
        c.transformer("", "secrets").to_string(),
        "aesgcm(k1), identity"
    );
    assert_eq!(c.transformer("", "configmaps").to_string(), "identity");
}

#[test]
fn transformers_are_shared_not_rebuilt() {
    let c = documented_example();
    assert!(Arc::ptr_eq(
        &c.transformer("apps", "deployments"),
        &c.transformer("apps", "daemonsets")
    ));
    assert!(Arc::ptr_eq(
        &c.transformer("x", "y"),
        &c.transformer("", "pods")
    ));
    let no_rule = config(&[(&["secrets"], vec![provider("identity", &[])])]);
    assert!(Arc::ptr_eq(
        &no_rule.transformer("", "pods"),
        &no_rule.transformer("apps", "deployments")
    ));
}

#[test]
fn describe_names_rules_providers_and_keys_never_secrets() {
    let c = documented_example();
    assert_eq!(
        c.describe(),
        [
            "events → identity",
            "secrets, configmaps, pandas.awesome.bears.example → aescbc(key1)",
            "*.apps → aescbc(key2)",
            "*.* → aescbc(key3)",
        ]
    );
    assert!(!c.describe().concat().contains(OTHER_KEY));
    assert!(!format!("{c:?}").contains(OTHER_KEY));
}

#[test]
fn config_error_masked_by_earlier_rule() {
    let text = config_text(&[
        (&["*."], vec![provider("identity", &[])]),
        (&["secrets"], vec![provider("identity", &[])]),
    ]);
    assert_eq!(
        EncryptionConfig::parse(&text)
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("resource \"secrets\" is masked by earlier rule \"*.\"")
    );
}

#[test]
fn config_error_kms_is_refused() {
    let text = config_text(&[(
        &["secrets", "configmaps"],
        vec![
            provider("identity", &[]),
            "{kms: {apiVersion: v2, name: vault, endpoint: 'unix:///run/kms.sock'}}".into(),
        ],
    )]);
    let e = EncryptionConfig::parse(&text).expect_err("kms");
    assert!(matches!(&e, ConfigError::KmsUnsupported { name, .. } if name == "vault"));
    let text = e.to_string();
    assert!(
        text.starts_with(
            "watchd cannot decrypt kms-encrypted values: the KMS plugin \"vault\" (kms \
             apiVersion v2) configured for secrets, configmaps at resources[0].providers[1] \
             is not supported"
        ),
        "{text}"
    );
}

#[test]
fn config_error_invalid_is_reported_with_every_problem() {
    let text = config_text(&[(
        &["Secrets"],
        vec!["{aesgcm: {keys: [{name: k1, secret: 'AAAA'}]}}".into()],
    )]);
    match EncryptionConfig::parse(&text) {
        Err(ConfigError::Invalid(problems)) => {
            let paths: Vec<&str> = problems.iter().map(FieldError::path).collect();
            assert_eq!(
                paths,
                [
                    "resources[0].resources[0]",
                    "resources[0].providers[0].aesgcm.keys[0].secret"
                ]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn config_error_wrong_api_version() {
    let text = config_text(&[(&["secrets"], vec![provider("identity", &[])])]).replace(
        "apiserver.config.k8s.io/v1",
        "apiserver.config.k8s.io/v1alpha1",
    );
    assert!(matches!(
        EncryptionConfig::parse(&text),
        Err(ConfigError::WrongType { .. })
    ));
}

#[test]
fn upstream_test_configurations_load() {
    // The shapes of kube-apiserver's own test configurations (testdata/valid-configs),
    // key material replaced.
    let json = format!(
        r#"{{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1",
        "resources":[{{"resources":["ignored"],"providers":[{{"aescbc":{{"keys":[
        {{"name":"A","secret":"{OTHER_KEY}"}},{{"name":"B","secret":"{OTHER_KEY}"}}]}}}}]}}]}}"#
    );
    let c = EncryptionConfig::parse(&json).expect("json config");
    assert_eq!(c.describe(), ["ignored → aescbc(A, B)"]);
    let legacy = format!(
        "kind: EncryptionConfig\napiVersion: v1\nresources:\n  - resources:\n      - secrets\n      - namespaces\n    providers:\n      - identity: {{}}\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: {OTHER_KEY}\n      - secretbox:\n          keys:\n            - name: key1\n              secret: {OTHER_KEY}\n"
    );
    let c = EncryptionConfig::parse(&legacy).expect("legacy config");
    assert_eq!(
        c.transformer("", "namespaces").to_string(),
        "identity, aesgcm(key1), secretbox(key1)"
    );
}

#[test]
fn is_encrypted_checks_the_reserved_prefix() {
    assert!(is_encrypted(b"k8s:enc:aescbc:v1:k:"));
    assert!(is_encrypted(b"k8s:enc:"));
    assert!(!is_encrypted(b"k8s\x00\x0a"));
    assert!(!is_encrypted(b"{\"kind\":\"Secret\"}"));
    assert!(!is_encrypted(b"k8s:en"));
}
