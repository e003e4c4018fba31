//! Which rule reads which resource: kube-apiserver's group-resource patterns and their
//! precedence.
//!
//! A pattern is `resource.group` split at the first dot: `secrets` (core group),
//! `deployments.apps`, `*.apps` (every resource of a group), `*.` (every resource of the
//! core group), `*.*` (everything, custom resources included). A resource is read with
//! the providers of its exact pattern, else of its group's wildcard, else of `*.*`, else
//! as plain values. Building the table refuses a pattern that an earlier wildcard
//! already covers, so that precedence is also "the first rule in file order that
//! matches". One exception, kept because kube-apiserver has it: the same exact pattern in
//! two rules reads with both rules' providers, the earlier rule's first.

use std::collections::HashMap;
use std::sync::Arc;

use super::errors::ConfigError;
use super::transformer::ValueTransformer;

/// The group of `*.*`.
pub const ANY_GROUP: &str = "*";
const ANY_RESOURCE: &str = "*";

/// A group and a resource, either possibly `*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupResource {
    /// `""` for the core group.
    pub group: String,
    /// The plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// Splits `resource.group` at the first dot, as kube-apiserver does.
    pub fn parse(pattern: &str) -> Self {
        let (resource, group) = pattern.split_once('.').unwrap_or((pattern, ""));
        GroupResource {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// `*.*`.
    pub fn is_any_group_any_resource(&self) -> bool {
        self.group == ANY_GROUP && self.resource == ANY_RESOURCE
    }

    fn any_in_group(group: &str) -> Self {
        GroupResource {
            group: group.to_owned(),
            resource: ANY_RESOURCE.to_owned(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    /// As the configuration file writes it (`*.` for the core group's wildcard).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() && self.resource != ANY_RESOURCE {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// Patterns and their providers while rules are added in file order.
pub struct RuleTableBuilder<P> {
    order: Vec<GroupResource>,
    providers: HashMap<GroupResource, Vec<P>>,
}

impl<P> Default for RuleTableBuilder<P> {
    fn default() -> Self {
        RuleTableBuilder {
            order: Vec::new(),
            providers: HashMap::new(),
        }
    }
}

impl<P: Clone> RuleTableBuilder<P> {
    /// Adds one rule's pattern; refuses it when an earlier wildcard masks it.
    pub fn add(&mut self, pattern: &str, providers: &[P]) -> Result<(), ConfigError> {
        let gr = GroupResource::parse(pattern);
        let any_any = GroupResource::parse("*.*");
        for earlier in [GroupResource::any_in_group(&gr.group), any_any] {
            if self.providers.contains_key(&earlier) {
                return Err(ConfigError::Masked {
                    resource: gr.to_string(),
                    earlier: earlier.to_string(),
                });
            }
        }
        match self.providers.get_mut(&gr) {
            Some(list) => list.extend_from_slice(providers),
            None => {
                self.order.push(gr.clone());
                self.providers.insert(gr, providers.to_vec());
            }
        }
        Ok(())
    }

    /// The patterns in first-seen order with their providers.
    pub fn into_entries(mut self) -> Vec<(GroupResource, Vec<P>)> {
        self.order
            .into_iter()
            .map(|gr| {
                let providers = self.providers.remove(&gr).unwrap_or_default();
                (gr, providers)
            })
            .collect()
    }
}

/// The transformers by pattern, looked up without allocating.
#[derive(Debug)]
pub struct ResourceTable {
    /// group → its exact resources and its wildcard.
    groups: HashMap<String, GroupRules>,
    any_group: Option<Arc<ValueTransformer>>,
    unconfigured: Arc<ValueTransformer>,
}

#[derive(Debug, Default)]
struct GroupRules {
    resources: HashMap<String, Arc<ValueTransformer>>,
    any_resource: Option<Arc<ValueTransformer>>,
}

impl ResourceTable {
    /// A table of `entries` (pattern, transformer).
    pub fn new(entries: impl IntoIterator<Item = (GroupResource, Arc<ValueTransformer>)>) -> Self {
        let mut table = ResourceTable {
            groups: HashMap::new(),
            any_group: None,
            unconfigured: Arc::new(ValueTransformer::identity()),
        };
        for (gr, transformer) in entries {
            if gr.is_any_group_any_resource() {
                table.any_group = Some(transformer);
                continue;
            }
            let rules = table.groups.entry(gr.group).or_default();
            if gr.resource == ANY_RESOURCE {
                rules.any_resource = Some(transformer);
            } else {
                rules.resources.insert(gr.resource, transformer);
            }
        }
        table
    }

    /// The transformer of `group`/`resource`: two hash lookups at most, no allocation.
    pub fn lookup(&self, group: &str, resource: &str) -> &Arc<ValueTransformer> {
        let in_group = self.groups.get(group);
        in_group
            .and_then(|g| g.resources.get(resource))
            .or_else(|| in_group.and_then(|g| g.any_resource.as_ref()))
            .or(self.any_group.as_ref())
            .unwrap_or(&self.unconfigured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_split_at_the_first_dot() {
        let gr = GroupResource::parse("pandas.awesome.bears.example");
        assert_eq!(
            (gr.group.as_str(), gr.resource.as_str()),
            ("awesome.bears.example", "pandas")
        );
        let gr = GroupResource::parse("*.");
        assert_eq!((gr.group.as_str(), gr.resource.as_str()), ("", "*"));
        assert_eq!(gr.to_string(), "*.");
        assert_eq!(GroupResource::parse("secrets").to_string(), "secrets");
        assert_eq!(GroupResource::parse("*.*").to_string(), "*.*");
        assert_eq!(GroupResource::parse("jobs.batch").to_string(), "jobs.batch");
    }

    fn build(rules: &[&[&str]]) -> Result<Vec<(String, Vec<usize>)>, ConfigError> {
        let mut b = RuleTableBuilder::default();
        for (i, patterns) in rules.iter().enumerate() {
            for p in *patterns {
                b.add(p, &[i])?;
            }
        }
        Ok(b.into_entries()
            .into_iter()
            .map(|(gr, p)| (gr.to_string(), p))
            .collect())
    }

    #[test]
    fn masked_by_an_earlier_wildcard() {
        let masked = |rules: &[&[&str]]| build(rules).err().map(|e| e.to_string());
        assert_eq!(
            masked(&[&["*."], &["secrets"]]).as_deref(),
            Some("resource \"secrets\" is masked by earlier rule \"*.\"")
        );
        assert_eq!(
            masked(&[&["*.*"], &["*."]]).as_deref(),
            Some("resource \"*.\" is masked by earlier rule \"*.*\"")
        );
        assert_eq!(
            masked(&[&["*.apps"], &["deployments.apps"]]).as_deref(),
            Some("resource \"deployments.apps\" is masked by earlier rule \"*.apps\"")
        );
        assert_eq!(
            masked(&[&["*.foo"], &["*.foo"]]).as_deref(),
            Some("resource \"*.foo\" is masked by earlier rule \"*.foo\"")
        );
        // Specific before general is the intended order.
        assert!(build(&[&["secrets"], &["*.", "*.apps"], &["*.*"]]).is_ok());
    }

    #[test]
    fn an_exact_pattern_in_two_rules_reads_with_both() {
        assert_eq!(
            build(&[&["secrets"], &["configmaps", "secrets"]]).ok(),
            Some(vec![
                ("secrets".into(), vec![0, 1]),
                ("configmaps".into(), vec![1])
            ])
        );
    }
}
