//! End to end: configuration text in, stored values out, against values encrypted by an
//! independent implementation (`tools/encryption-vectors/gen.py`: Python `cryptography`
//! and PyNaCl, following kube-apiserver's layouts) and kube-apiserver's own recorded
//! AES-GCM value. `read.rs` reads values; `rules.rs` loads configurations and picks
//! rules. This file holds what both share: the vectors and configuration builders.

mod read;
mod rules;

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;

use super::{EncryptionConfig, ValueTransformer};

#[derive(Deserialize)]
struct Vectors {
    vectors: Vec<Vector>,
}

#[derive(Deserialize, Clone)]
struct Vector {
    name: String,
    provider: String,
    key_name: String,
    /// base64, as in the configuration file.
    key: String,
    etcd_key: String,
    plaintext: String,
    stored: String,
}

impl Vector {
    fn plaintext(&self) -> Vec<u8> {
        STANDARD.decode(&self.plaintext).expect("vector plaintext")
    }
    fn stored(&self) -> Vec<u8> {
        STANDARD.decode(&self.stored).expect("vector stored value")
    }
    fn provider_yaml(&self) -> String {
        provider(&self.provider, &[(&self.key_name, &self.key)])
    }
}

fn vectors() -> Vec<Vector> {
    let all: Vectors = serde_json::from_str(include_str!(
        "../../../../tests/data/encryption/vectors.json"
    ))
    .expect("vectors.json");
    all.vectors
}

fn vector(name: &str) -> Vector {
    vectors()
        .into_iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
}

/// One provider element in flow style: `{aescbc: {keys: [{name: 'k', secret: '...'}]}}`.
fn provider(kind: &str, keys: &[(&str, &str)]) -> String {
    if kind == "identity" {
        return "{identity: {}}".into();
    }
    let keys: Vec<String> = keys
        .iter()
        .map(|(name, secret)| format!("{{name: '{name}', secret: '{secret}'}}"))
        .collect();
    format!("{{{kind}: {{keys: [{}]}}}}", keys.join(", "))
}

/// A configuration of `rules`: (resources, providers).
fn config_text(rules: &[(&[&str], Vec<String>)]) -> String {
    let mut text = String::from(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n",
    );
    for (resources, providers) in rules {
        let resources: Vec<String> = resources.iter().map(|r| format!("'{r}'")).collect();
        text.push_str(&format!(
            "- resources: [{}]\n  providers: [{}]\n",
            resources.join(", "),
            providers.join(", ")
        ));
    }
    text
}

fn config(rules: &[(&[&str], Vec<String>)]) -> EncryptionConfig {
    let text = config_text(rules);
    EncryptionConfig::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn secrets(config: &EncryptionConfig) -> Arc<ValueTransformer> {
    config.transformer("", "secrets")
}

/// A key no vector uses.
const OTHER_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
