//! Encryption at rest: reading the values kube-apiserver encrypted before writing them to
//! etcd, with the keys of the same `--encryption-provider-config` file.
//!
//! kube-apiserver encrypts per resource: the file's rules map resources (`secrets`,
//! `*.apps`, `*.*`) to providers (identity, aescbc, aesgcm, secretbox, kms), and every
//! value a keyed provider writes begins with `k8s:enc:<provider>:v1:<key name>:`. watchd
//! reproduces the read side exactly: the same file, checked as kube-apiserver checks it
//! at start ([`EncryptionConfig::parse`]); the same choice of rule per resource
//! ([`EncryptionConfig::transformer`]); the same prefix matching, layouts and failures
//! ([`ValueTransformer::read`]). It never encrypts. KMS is refused at load: its keys are
//! behind a plugin only kube-apiserver talks to.
//!
//! Files: `config.rs` (the file's schema), `validate.rs` (kube-apiserver's checks),
//! `resources.rs` (patterns and precedence), `providers.rs` (prefixes, named keys),
//! `transformer.rs` (reading a value), one file per layout (`aescbc.rs`, `aesgcm.rs`,
//! `secretbox.rs`), and `errors.rs`. `tests/` reads values encrypted by an independent
//! implementation (`tools/encryption-vectors/gen.py`).

mod aescbc;
mod aesgcm;
mod config;
mod errors;
mod providers;
mod resources;
mod secretbox;
mod transformer;
mod validate;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use errors::{ConfigError, DecryptError, KeyError, OpenError};
pub use providers::ProviderKind;
pub use transformer::ValueTransformer;
pub use validate::FieldError;

use providers::Provider;
use resources::{ResourceTable, RuleTableBuilder};

/// What every encrypted value begins with; kube-apiserver reserves it.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// Whether a stored value is encrypted at rest (by any provider, known or not).
pub fn is_encrypted(value: &[u8]) -> bool {
    value.starts_with(ENCRYPTED_PREFIX)
}

/// A loaded encryption configuration: one [`ValueTransformer`] per resource rule.
#[derive(Debug)]
pub struct EncryptionConfig {
    table: ResourceTable,
    summary: Vec<String>,
}

impl EncryptionConfig {
    /// Parses and checks the text of an `--encryption-provider-config` file (YAML or
    /// JSON), and builds its keys. Fails as kube-apiserver would fail to start with it,
    /// and on any `kms` provider.
    pub fn parse(text: &str) -> Result<EncryptionConfig, ConfigError> {
        let file = config::decode(text)?;
        let problems = validate::validate(&file);
        if !problems.is_empty() {
            return Err(ConfigError::Invalid(problems));
        }
        let mut rules = RuleTableBuilder::<Provider>::default();
        let mut summary = Vec::with_capacity(file.resources.len());
        for (i, rule) in file.resources.iter().enumerate() {
            // Per rule, providers first, then its patterns: kube-apiserver's order, so the
            // same file fails with the same first error.
            let providers = providers::build_rule(i, rule)?;
            for pattern in &rule.resources {
                rules.add(pattern, &providers)?;
            }
            let names: Vec<String> = providers.iter().map(ToString::to_string).collect();
            summary.push(format!(
                "{} → {}",
                rule.resources.join(", "),
                names.join(", ")
            ));
        }
        let table =
            ResourceTable::new(rules.into_entries().into_iter().map(|(gr, providers)| {
                (gr, Arc::new(ValueTransformer::with_providers(providers)))
            }));
        Ok(EncryptionConfig { table, summary })
    }

    /// The transformer of a group-resource as kube-apiserver stores it (`""` for the
    /// core group: `("", "secrets")`, `("apps", "deployments")`; events are stored as
    /// core `events`). Shared: two hash lookups and a reference count, no allocation.
    pub fn transformer(&self, group: &str, resource: &str) -> Arc<ValueTransformer> {
        self.table.lookup(group, resource).clone()
    }

    /// One line per rule, in file order, for the startup log:
    /// `secrets, configmaps → aescbc(key1, key2), identity`. Key names, never secrets.
    pub fn describe(&self) -> &[String] {
        &self.summary
    }
}
