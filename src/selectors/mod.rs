//! Kubernetes label and field selectors, as sent in the `labelSelector` and
//! `fieldSelector` query parameters of get/list/watch requests.
//!
//! Parsing follows kube-apiserver (apimachinery's `labels.Parse` and
//! `fields.ParseSelector`) so that the cache accepts, rejects and matches
//! exactly what the real API server would. Input comes straight from HTTP
//! query strings, so nothing in this module may panic on any input.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod field;
pub mod label;

pub use field::{FieldOp, FieldRequirement, FieldSelector};
pub use label::{LabelOp, LabelRequirement, LabelSelector};

use std::fmt;

/// Why a selector could not be parsed or is not supported; Display is the message for a 400 BadRequest Status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorError {
    /// Human-readable description of the problem, worded like kube-apiserver's.
    pub message: String,
}

impl SelectorError {
    /// Builds an error carrying `message`.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        SelectorError {
            message: message.into(),
        }
    }
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SelectorError {}

#[cfg(test)]
#[allow(clippy::panic, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Minimal deterministic pseudo-random generator (Knuth's MMIX LCG).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    const SEEDS: &[&str] = &[
        "app=web,tier!=db",
        "env in (prod, staging),!legacy",
        "app.kubernetes.io/name notin (a,,b), k>5, j<10",
        "x==y,in in (in),notin=notin",
        "metadata.name=foo,spec.nodeName!=node-1",
        r"a=\,\=\\,b==c",
        "",
    ];

    const ALPHABET: &[char] = &[
        '=', '!', '(', ')', ',', '<', '>', ' ', '\t', '\n', '\\', '/', '.', '-', '_', 'a', 'Z',
        '0', '9', 'é', '😀', '\0', 'i', 'n',
    ];

    fn mutate(rng: &mut Lcg, input: &str) -> String {
        let mut chars: Vec<char> = input.chars().collect();
        for _ in 0..=rng.below(4) {
            let at = rng.below(chars.len() + 1);
            match rng.below(4) {
                0 if at < chars.len() => {
                    chars.remove(at);
                }
                1 if !chars.is_empty() => {
                    let from = rng.below(chars.len());
                    let to = (from + rng.below(8)).min(chars.len());
                    let piece: Vec<char> = chars[from..to].to_vec();
                    chars.splice(at..at, piece);
                }
                _ => chars.insert(at, ALPHABET[rng.below(ALPHABET.len())]),
            }
        }
        chars.into_iter().collect()
    }

    fn sorted_field_terms(selector: &FieldSelector) -> Vec<String> {
        let mut terms: Vec<String> = selector
            .requirements()
            .iter()
            .map(ToString::to_string)
            .collect();
        terms.sort();
        terms
    }

    #[test]
    fn selector_error_displays_its_message() {
        let err = SelectorError::new("field label not supported: spec.foo");
        assert_eq!(err.to_string(), "field label not supported: spec.foo");
        let boxed: Box<dyn std::error::Error> = Box::new(err.clone());
        assert_eq!(boxed.to_string(), err.message);
    }

    #[test]
    fn mutated_selectors_never_panic_and_accepted_ones_round_trip() {
        let mut rng = Lcg(0x5eed);
        let (mut label_ok, mut field_ok) = (0, 0);
        for i in 0..4000 {
            let input = mutate(&mut rng, SEEDS[i % SEEDS.len()]);
            if let Ok(sel) = LabelSelector::parse(&input) {
                label_ok += 1;
                let again = LabelSelector::parse(&sel.to_string());
                assert_eq!(again.as_ref(), Ok(&sel), "label round trip of {input:?}");
                let _ = sel.matches(|k| if k.len() % 2 == 0 { Some("5") } else { None });
            }
            if let Ok(sel) = FieldSelector::parse(&input) {
                field_ok += 1;
                let again = FieldSelector::parse(&sel.to_string())
                    .unwrap_or_else(|e| panic!("field round trip of {input:?}: {e}"));
                assert_eq!(sorted_field_terms(&again), sorted_field_terms(&sel));
                let _ = sel.matches(|_| Some("x"));
            }
        }
        // The mutations must exercise both the accepting and rejecting paths.
        assert!(
            label_ok > 100 && label_ok < 3900,
            "label accepted {label_ok}"
        );
        assert!(
            field_ok > 100 && field_ok < 3900,
            "field accepted {field_ok}"
        );
    }
}
