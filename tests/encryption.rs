//! Encryption at rest, end to end: values encrypted exactly as kube-apiserver encrypts
//! them (by an independent implementation, `tools/encryption-vectors/gen.py`), stored at
//! their keys in a real etcd, are served decrypted by a watchd given the same
//! `--encryption-provider-config`; a value with a key it was not given makes its
//! resource pending with kube-apiserver's error; a kms provider fails at start.

mod support;

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use support::kube::*;
use support::{http, Etcd, Watchd};

const VECTORS: &str = include_str!("data/encryption/vectors.json");

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("vector base64")
}

/// The vector called `name`: (key, stored value, plaintext).
fn vector(name: &str) -> (String, Vec<u8>, Vec<u8>) {
    let all: Value = serde_json::from_str(VECTORS).expect("vectors.json");
    let v = all["vectors"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == name))
        .unwrap_or_else(|| panic!("no vector {name}"));
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    (s("key"), b64(&s("stored")), b64(&s("plaintext")))
}

/// A configuration as an operator writes it for kube-apiserver: secrets with every
/// keyed provider and identity, configmaps with aesgcm only.
fn config() -> String {
    let (gcm, _, _) = vector("aesgcm-256-json");
    let (cbc, _, _) = vector("aescbc-256-json");
    let (sb, _, _) = vector("secretbox-json");
    let (gcm128, _, _) = vector("aesgcm-128-protobuf");
    format!(
        "apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: {gcm}
      - aescbc:
          keys:
            - name: key1
              secret: {cbc}
      - secretbox:
          keys:
            - name: key1
              secret: {sb}
      - identity: {{}}
  - resources:
      - configmaps
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: {gcm128}
"
    )
}

fn write_config(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("encryption.yaml");
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

/// The served object: the plaintext with `metadata.resourceVersion` set.
fn served(plaintext: &[u8], rv: i64) -> Value {
    let mut v: Value = serde_json::from_slice(plaintext).expect("JSON plaintext");
    v["metadata"]["resourceVersion"] = rv.to_string().into();
    v
}

#[tokio::test]
async fn values_encrypted_by_each_provider_are_served_decrypted() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    let (_, gcm_value, secret_json) = vector("aesgcm-256-json");
    let s1 = "/registry/secrets/default/s1";
    let first = put_raw(&mut kv, s1, gcm_value).await;
    let (_, cm_value, cm_protobuf) = vector("aesgcm-128-protobuf");
    put_raw(&mut kv, "/registry/configmaps/default/c1", cm_value).await;
    put_object(
        &mut kv,
        "/registry/secrets/default/plain",
        &configmap_as_secret(),
    )
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_config(&dir, &config());
    let watchd = Watchd::start(&etcd.client_url(), &["--encryption-provider-config", &path]);
    let base = watchd.base_url();

    let got = get_json(&format!("{base}/api/v1/namespaces/default/secrets/s1")).await;
    assert_eq!(got, served(&secret_json, first));
    // The protobuf ConfigMap inside the aesgcm value is transcoded like any other.
    let cm = get_json(&format!("{base}/api/v1/namespaces/default/configmaps/c1")).await;
    let env = watchd::codec::envelope::parse(&cm_protobuf).expect("protobuf plaintext");
    assert_eq!(
        (cm["kind"].as_str(), env.kind),
        (Some("ConfigMap"), "ConfigMap")
    );
    assert_eq!(cm["metadata"]["name"], "c1");
    assert_eq!(cm["data"], serde_json::json!({"k": "value!"}));
    // Plain values: identity is listed for secrets.
    let plain = get_json(&format!("{base}/api/v1/namespaces/default/secrets/plain")).await;
    assert_eq!(plain["metadata"]["name"], "plain");

    // The same secret rewritten by each provider, as a key rotation writes it.
    for name in ["aescbc-256-json", "secretbox-json"] {
        let (_, value, plaintext) = vector(name);
        let rev = put_raw(&mut kv, s1, value).await;
        let got = get_json(&format!("{base}/api/v1/namespaces/default/secrets/s1")).await;
        assert_eq!(got, served(&plaintext, rev), "{name}");
    }
    let list = get_json(&format!("{base}/api/v1/secrets")).await;
    assert_eq!(item_names(&list), ["plain", "s1"]);
}

/// A plain Secret (JSON or protobuf, as the storage format goes).
fn configmap_as_secret() -> Value {
    serde_json::json!({"kind": "Secret", "apiVersion": "v1",
        "metadata": {"name": "plain", "namespace": "default", "uid": "u-plain",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "type": "Opaque"})
}

#[tokio::test]
async fn a_value_under_a_key_watchd_was_not_given_makes_secrets_pending() {
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_object(
        &mut kv,
        "/registry/secrets/default/plain",
        &configmap_as_secret(),
    )
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_config(&dir, &config());
    let watchd = Watchd::start(&etcd.client_url(), &["--encryption-provider-config", &path]);
    let base = watchd.base_url();
    // Written by an aescbc key named "old", which the configuration no longer lists.
    let (_, value, _) = vector("rotation-aescbc-old");
    put_raw(&mut kv, "/registry/secrets/default/s1", value).await;
    let status = get_status(
        &format!("{base}/api/v1/namespaces/default/secrets/s1"),
        500,
        "InternalError",
    )
    .await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("unable to transform key \"/registry/secrets/default/s1\"")
            && message.contains("no matching key was found for the provided AES transformer"),
        "{status}"
    );
    let resp = http::get(&format!("{base}/api/v1/secrets?watch=1"), &[]).await;
    assert_status(&resp, 429, "TooManyRequests");
    // Configmaps are another rule: unaffected.
    get_json(&format!("{base}/api/v1/configmaps")).await;
    delete_key(&mut kv, "/registry/secrets/default/s1").await;
    let list = get_json(&format!("{base}/api/v1/secrets")).await;
    assert_eq!(item_names(&list), ["plain"]);
}

#[tokio::test]
async fn kms_providers_and_bad_configurations_fail_at_start() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let kms = "apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - kms:
          apiVersion: v2
          name: vault
          endpoint: unix:///var/run/kms.sock
      - identity: {}
";
    let bad_key = config().replace("secret: ", "secret: not-base64!");
    for (what, text, want) in [
        (
            "kms",
            kms.to_string(),
            "watchd cannot decrypt kms-encrypted values",
        ),
        ("bad key", bad_key, "--encryption-provider-config"),
    ] {
        let path = write_config(&dir, &text);
        let mut w = Watchd::spawn(&etcd.client_url(), &["--encryption-provider-config", &path]);
        let status = w.wait_exit(Duration::from_secs(20)).expect("exits");
        assert!(!status.success(), "{what}");
        assert!(w.log().contains(want), "{what}: {}", w.log());
    }
}
