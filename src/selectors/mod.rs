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
pub mod shard;

pub use field::{FieldOp, FieldRequirement, FieldSelector};
pub use label::{LabelOp, LabelRequirement, LabelSelector};

/// Why a selector could not be parsed or is not supported; Display is the message for
/// a 400 BadRequest Status, worded as kube-apiserver words it (clients and users search
/// for those words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A label selector token where the grammar allows another.
    #[error(transparent)]
    LabelSyntax(UnexpectedToken),
    /// A label selector requirement (`key op values`) that does not parse or validate.
    #[error("unable to parse requirement: {0}")]
    InvalidRequirement(#[source] RequirementError),
    /// A field selector term without `=`, `==` or `!=`.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole selector, as sent.
        selector: String,
        /// The term that has no operator.
        term: String,
    },
    /// A field selector term with nothing before its operator.
    #[error("invalid field selector: no field name before the operator in '{term}'")]
    NoFieldName {
        /// The term.
        term: String,
    },
    /// A `\` in a field selector value followed by something other than `\`, `,` or `=`.
    #[error("invalid field selector: invalid escape sequence: {sequence}")]
    InvalidEscape {
        /// The backslash and what follows it (nothing at the end of the value).
        sequence: String,
    },
    /// A `,` or `=` in a field selector value that is not escaped with `\`.
    #[error("invalid field selector: unescaped character in value: '{0}'")]
    UnescapedCharacter(char),
    /// A field the resource does not offer for field selectors.
    #[error("field label not supported: {field}")]
    UnsupportedField {
        /// The field as written in the selector.
        field: String,
    },
}

/// A label selector token the grammar does not allow where it stands
/// (apimachinery: "found '<token>', expected: <what>").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("found '{found}', expected: {expected}")]
pub struct UnexpectedToken {
    /// The token as written; empty at the end of the selector.
    pub found: String,
    /// What the grammar allows there.
    pub expected: &'static str,
}

/// Why one label selector requirement was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// A token the requirement's grammar does not allow where it stands.
    #[error(transparent)]
    Syntax(UnexpectedToken),
    /// `in`/`notin` not followed by `(` (apimachinery's wording has no comma here).
    #[error("found '{found}' expected: '('")]
    MissingOpenParen {
        /// The token found instead; empty at the end of the selector.
        found: String,
    },
    /// The key is not a valid label key.
    #[error(transparent)]
    InvalidKey(InvalidValue),
    /// Values that are not valid label values (or not integers for `>`/`<`); several
    /// are listed as `[a, b]`, as apimachinery aggregates them.
    #[error("{}", list_invalid(.0))]
    InvalidValues(Vec<InvalidValue>),
}

/// One invalid key or value, as apimachinery's field errors print it:
/// `<path>: Invalid value: "<value>": <problems>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: Invalid value: {value:?}: {}", .problems.join("; "))]
pub struct InvalidValue {
    /// Where the value is: `key`, `values[0]`, `values[0][<key>]`.
    pub path: String,
    /// The value as written.
    pub value: String,
    /// What is wrong with it, each with the rule it breaks.
    pub problems: Vec<String>,
}

fn list_invalid(values: &[InvalidValue]) -> String {
    match values {
        [one] => one.to_string(),
        many => {
            let all: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", all.join(", "))
        }
    }
}

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
        let err = SelectorError::UnsupportedField {
            field: "spec.foo".into(),
        };
        assert_eq!(err.to_string(), "field label not supported: spec.foo");
        let boxed: Box<dyn std::error::Error> = Box::new(err.clone());
        assert_eq!(boxed.to_string(), err.to_string());
    }

    #[test]
    fn requirement_errors_keep_their_cause() {
        use std::error::Error as _;
        let Err(err) = LabelSelector::parse("k=-v") else {
            panic!("k=-v has an invalid value");
        };
        let cause = err.source().map(ToString::to_string).unwrap_or_default();
        assert!(
            cause.starts_with("values[0][k]: Invalid value: \"-v\""),
            "{cause}"
        );
        assert_eq!(
            err.to_string(),
            format!("unable to parse requirement: {cause}")
        );
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
