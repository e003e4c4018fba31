//! Label selectors (`?labelSelector=`): the full grammar accepted by
//! kube-apiserver, key and value validation, matching against an object's
//! labels, and a canonical string form.
//!
//! Grammar (requirements are ANDed; whitespace may surround any token):
//! `key=v`, `key==v`, `key!=v`, `key in (a,b)`, `key notin (a,b)`, `key`,
//! `!key`, `key>n`, `key<n`. Values may be empty (`key=`, `key in ()`).

use std::fmt;

use super::SelectorError;

mod parser;

/// How a [`LabelRequirement`] relates a label key to its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelOp {
    /// `key=value`: the label exists and equals the value.
    Equals,
    /// `key==value`: identical to [`LabelOp::Equals`], written with `==`.
    DoubleEquals,
    /// `key!=value`: the label is absent or differs from the value.
    NotEquals,
    /// `key in (a,b)`: the label exists and equals one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or equals none of the values.
    NotIn,
    /// `key`: the label exists.
    Exists,
    /// `!key`: the label does not exist.
    DoesNotExist,
    /// `key>n`: the label exists and is an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label exists and is an integer less than `n`.
    LessThan,
}

/// One validated condition on a single label key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelRequirement {
    key: String,
    op: LabelOp,
    /// Sorted and de-duplicated; one value for `=`/`==`/`!=`/`>`/`<`, none for exists tests.
    values: Vec<String>,
}

impl LabelRequirement {
    /// The label key this requirement tests.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator relating the key to the values.
    pub fn op(&self) -> LabelOp {
        self.op
    }

    /// The values, sorted and without duplicates (empty for `key` and `!key`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether an object whose label `key` has `value` (`None` when absent) satisfies this requirement.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match (self.op, value) {
            (LabelOp::Exists, v) => v.is_some(),
            (LabelOp::DoesNotExist, v) => v.is_none(),
            (LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In, Some(v)) => self.has_value(v),
            (LabelOp::NotEquals | LabelOp::NotIn, Some(v)) => !self.has_value(v),
            (LabelOp::NotEquals | LabelOp::NotIn, None) => true,
            (LabelOp::GreaterThan | LabelOp::LessThan, Some(v)) => self.compare_integer(v),
            (_, None) => false,
        }
    }

    fn has_value(&self, value: &str) -> bool {
        self.values
            .binary_search_by(|v| v.as_str().cmp(value))
            .is_ok()
    }

    /// Gt/Lt: both sides must be 64-bit integers; anything else never matches.
    fn compare_integer(&self, actual: &str) -> bool {
        let (Ok(actual), [bound]) = (actual.parse::<i64>(), self.values.as_slice()) else {
            return false;
        };
        let Ok(bound) = bound.parse::<i64>() else {
            return false;
        };
        match self.op {
            LabelOp::GreaterThan => actual > bound,
            LabelOp::LessThan => actual < bound,
            _ => false,
        }
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = self.values.join(",");
        let key = &self.key;
        match self.op {
            LabelOp::Exists => write!(f, "{key}"),
            LabelOp::DoesNotExist => write!(f, "!{key}"),
            LabelOp::Equals => write!(f, "{key}={joined}"),
            LabelOp::DoubleEquals => write!(f, "{key}=={joined}"),
            LabelOp::NotEquals => write!(f, "{key}!={joined}"),
            LabelOp::In => write!(f, "{key} in ({joined})"),
            LabelOp::NotIn => write!(f, "{key} notin ({joined})"),
            LabelOp::GreaterThan => write!(f, "{key}>{joined}"),
            LabelOp::LessThan => write!(f, "{key}<{joined}"),
        }
    }
}

/// A parsed label selector: the AND of its requirements, sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parses `input` with kube-apiserver's label selector grammar; the empty string selects everything.
    pub fn parse(input: &str) -> Result<LabelSelector, SelectorError> {
        let mut requirements = parser::parse_requirements(input)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// The selector that matches every object.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// True when the selector has no requirements and so matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// Whether an object matches; `get(key)` returns the object's value for label `key`, if any.
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches_value(get(&r.key)))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, req) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{req}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::panic, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse_ok(input: &str) -> LabelSelector {
        LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input:?} should parse: {e}"))
    }

    fn parse_err(input: &str) -> String {
        match LabelSelector::parse(input) {
            Ok(sel) => panic!("{input:?} should be rejected, parsed as {sel}"),
            Err(e) => e.to_string(),
        }
    }

    fn matches(selector: &str, labels: &[(&str, &str)]) -> bool {
        let map: HashMap<&str, &str> = labels.iter().copied().collect();
        parse_ok(selector).matches(|k| map.get(k).copied())
    }

    #[test]
    fn empty_or_blank_input_selects_everything() {
        for input in ["", "   ", "\t\r\n "] {
            let sel = parse_ok(input);
            assert!(sel.is_empty());
            assert_eq!(sel, LabelSelector::everything());
            assert!(sel.matches(|_| None));
            assert_eq!(sel.to_string(), "");
        }
    }

    #[test]
    fn equals_and_double_equals_match_the_exact_value() {
        for input in ["app=web", "app==web"] {
            assert!(matches(input, &[("app", "web")]));
            assert!(!matches(input, &[("app", "db")]));
            assert!(!matches(input, &[]));
        }
        assert_eq!(
            parse_ok("app==web").requirements()[0].op(),
            LabelOp::DoubleEquals
        );
        assert_eq!(parse_ok("app==web").to_string(), "app==web");
    }

    #[test]
    fn not_equals_matches_objects_without_the_key() {
        assert!(matches("app!=web", &[]));
        assert!(matches("app!=web", &[("app", "db")]));
        assert!(!matches("app!=web", &[("app", "web")]));
    }

    #[test]
    fn in_matches_any_listed_value_and_requires_the_key() {
        let sel = "env in (prod,staging)";
        assert!(matches(sel, &[("env", "prod")]));
        assert!(matches(sel, &[("env", "staging")]));
        assert!(!matches(sel, &[("env", "dev")]));
        assert!(!matches(sel, &[]));
    }

    #[test]
    fn notin_matches_objects_without_the_key() {
        let sel = "env notin (prod,staging)";
        assert!(matches(sel, &[]));
        assert!(matches(sel, &[("env", "dev")]));
        assert!(!matches(sel, &[("env", "prod")]));
    }

    #[test]
    fn exists_and_does_not_exist_test_key_presence() {
        assert!(matches("app", &[("app", "")]));
        assert!(!matches("app", &[("other", "x")]));
        assert!(matches("!app", &[("other", "x")]));
        assert!(!matches("!app", &[("app", "x")]));
        let sel = parse_ok("!app");
        assert_eq!(sel.requirements()[0].op(), LabelOp::DoesNotExist);
        assert!(sel.requirements()[0].values().is_empty());
    }

    #[test]
    fn greater_and_less_than_compare_integers() {
        assert!(matches("k>5", &[("k", "6")]));
        assert!(!matches("k>5", &[("k", "5")]));
        assert!(matches("k<5", &[("k", "-3")]));
        assert!(!matches("k<5", &[("k", "5")]));
        assert!(matches("k>007", &[("k", "8")]));
        assert!(!matches("k>5", &[]), "missing key never satisfies gt");
        assert!(
            !matches("k>5", &[("k", "six")]),
            "non-integer label never matches"
        );
        assert!(
            !matches("k<5", &[("k", "99999999999999999999")]),
            "overflow never matches"
        );
    }

    #[test]
    fn comma_means_and() {
        let sel = "app=web,tier!=db,!legacy";
        assert!(matches(sel, &[("app", "web"), ("tier", "fe")]));
        assert!(!matches(sel, &[("app", "web"), ("tier", "db")]));
        assert!(!matches(sel, &[("app", "web"), ("legacy", "")]));
        assert_eq!(parse_ok(sel).requirements().len(), 3);
    }

    #[test]
    fn whitespace_around_tokens_is_ignored() {
        let spaced = parse_ok(" app = web ,\ttier\nin ( a , b ) , ! legacy , n > 3 ");
        let tight = parse_ok("app=web,tier in (a,b),!legacy,n>3");
        assert_eq!(spaced, tight);
    }

    #[test]
    fn empty_exact_value_is_allowed() {
        assert!(matches("k=", &[("k", "")]));
        assert!(!matches("k=", &[("k", "x")]));
        assert!(matches("k==,j", &[("k", ""), ("j", "")]));
        assert!(matches("k!=", &[("k", "x")]));
        assert_eq!(parse_ok("k=").to_string(), "k=");
    }

    #[test]
    fn empty_parentheses_mean_the_empty_value() {
        let sel = parse_ok("k in ()");
        assert_eq!(sel.requirements()[0].values(), [String::new()]);
        assert!(sel.matches(|_| Some("")));
        assert!(!sel.matches(|_| Some("x")));
        assert!(matches("k notin ()", &[("k", "x")]));
        assert_eq!(sel.to_string(), "k in ()");
    }

    #[test]
    fn empty_slots_in_a_value_set_are_empty_values() {
        for (input, expected) in [
            ("k in (a,,b)", vec!["", "a", "b"]),
            ("k in (,a)", vec!["", "a"]),
            ("k in (a,)", vec!["", "a"]),
            ("k in (,)", vec![""]),
            ("k in (,,)", vec![""]),
        ] {
            assert_eq!(
                parse_ok(input).requirements()[0].values(),
                expected,
                "{input}"
            );
        }
    }

    #[test]
    fn values_are_sorted_and_deduplicated() {
        let sel = parse_ok("k in (c,a,b,a)");
        assert_eq!(sel.requirements()[0].values(), ["a", "b", "c"]);
        assert_eq!(sel.to_string(), "k in (a,b,c)");
    }

    #[test]
    fn requirements_are_sorted_by_key_for_a_canonical_form() {
        let a = parse_ok("z=1,a notin (x),m");
        let b = parse_ok("m,a notin (x),z=1");
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "a notin (x),m,z=1");
        let keys: Vec<&str> = a.requirements().iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["a", "m", "z"]);
    }

    #[test]
    fn display_round_trips_every_operator() {
        let input = "a=1,b==2,c!=3,d in (x,y),e notin (),f,!g,h>4,i<5";
        let sel = parse_ok(input);
        assert_eq!(sel.to_string(), input);
        assert_eq!(parse_ok(&sel.to_string()), sel);
    }

    #[test]
    fn keywords_are_ordinary_keys_and_values() {
        assert!(matches("in in (in,notin)", &[("in", "notin")]));
        assert!(matches("notin=in", &[("notin", "in")]));
        assert!(matches("!in", &[]));
        assert!(matches("in", &[("in", "x")]));
    }

    #[test]
    fn dns_prefixed_keys_are_accepted() {
        let sel = parse_ok("app.kubernetes.io/name=web,example.com/Tier notin (a)");
        assert!(sel.matches(|k| (k == "app.kubernetes.io/name").then_some("web")));
        assert_eq!(sel.requirements()[0].key(), "app.kubernetes.io/name");
        let longest_prefix = format!("{}.com/x", "a".repeat(249));
        assert_eq!(longest_prefix.len(), 255);
        parse_ok(&longest_prefix);
        parse_ok(&format!("{}=v", "k".repeat(63)));
    }

    #[test]
    fn requirement_matches_value_directly() {
        let sel = parse_ok("k notin (a)");
        let req = &sel.requirements()[0];
        assert_eq!(req.key(), "k");
        assert_eq!(req.op(), LabelOp::NotIn);
        assert!(req.matches_value(None));
        assert!(req.matches_value(Some("b")));
        assert!(!req.matches_value(Some("a")));
        assert_eq!(req.to_string(), "k notin (a)");
    }

    #[test]
    fn very_long_inputs_parse_in_linear_time() {
        let many = vec!["a"; 50_000].join(",");
        assert_eq!(parse_ok(&many).requirements().len(), 50_000);
        let set = format!(
            "k in ({})",
            (0..20_000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(parse_ok(&set).requirements()[0].values().len(), 20_000);
        assert!(parse_err(&"x".repeat(100_000)).contains("no more than 63 bytes"));
        assert!(parse_err(&"(".repeat(100_000)).starts_with("found '('"));
    }
}
