//! Field selectors (`?fieldSelector=`): parsing with kube-apiserver's grammar
//! and value escaping, matching against an object's selectable fields, and
//! checking fields against the set a resource supports.
//!
//! Grammar: terms separated by unescaped `,` are ANDed; each term is
//! `field=value`, `field==value` or `field!=value`. In values, `\,`, `\=` and
//! `\\` stand for `,`, `=` and `\`. Like kube-apiserver, whitespace is not
//! trimmed: it is part of the field name or value it appears in.

use std::fmt;

use super::SelectorError;

/// How a [`FieldRequirement`] compares a field with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOp {
    /// `field=value` or `field==value`: the field equals the value.
    Equals,
    /// `field!=value`: the field differs from the value.
    NotEquals,
}

/// One `field op value` term of a field selector, with the value unescaped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldRequirement {
    /// The selectable field, e.g. `metadata.name` or `spec.nodeName`.
    pub field: String,
    /// The comparison to make.
    pub op: FieldOp,
    /// The value to compare with, escapes already resolved.
    pub value: String,
}

impl FieldRequirement {
    /// Whether the field's value (`None` when the object lacks it, compared as `""`) satisfies this term.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        let actual = value.unwrap_or("");
        match self.op {
            FieldOp::Equals => actual == self.value,
            FieldOp::NotEquals => actual != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            FieldOp::Equals => "=",
            FieldOp::NotEquals => "!=",
        };
        write!(f, "{}{op}", self.field)?;
        for c in self.value.chars() {
            if matches!(c, '\\' | ',' | '=') {
                f.write_str("\\")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A parsed field selector: the AND of its requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `input` as kube-apiserver does; the empty string selects everything.
    pub fn parse(input: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = split_terms(input);
        // Upstream sorts the raw terms so that equal selectors parse identically.
        terms.sort_unstable();
        let mut requirements = Vec::with_capacity(terms.len());
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let Some((field, op, raw_value)) = split_term(term) else {
                return Err(SelectorError::FieldTerm {
                    selector: input.to_owned(),
                    term: term.to_owned(),
                });
            };
            if field.is_empty() {
                return Err(SelectorError::NoFieldName {
                    term: term.to_owned(),
                });
            }
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                op,
                value: unescape_value(raw_value)?,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// The selector `field=value`.
    pub fn exact(field: &str, value: &str) -> FieldSelector {
        FieldSelector {
            requirements: vec![FieldRequirement {
                field: field.to_owned(),
                op: FieldOp::Equals,
                value: value.to_owned(),
            }],
        }
    }

    /// The selector that matches every object.
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// True when the selector has no requirements and so matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, in upstream's order (sorted by their raw text).
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether an object matches; `get(field)` returns its value for `field`, a missing field counting as `""`.
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches_value(get(&r.field)))
    }

    /// Checks every field with `supported`; the first unsupported one is reported as kube-apiserver does.
    pub fn validate(&self, supported: impl Fn(&str) -> bool) -> Result<(), SelectorError> {
        match self.requirements.iter().find(|r| !supported(&r.field)) {
            Some(r) => Err(SelectorError::UnsupportedField {
                field: r.field.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Applies a resource's field label conversion to every term: a label becomes the
    /// field it stands for (an alias is renamed), and the first label refused ends it with
    /// the conversion's error (its message is kube-apiserver's answer).
    pub fn convert_labels<E>(
        &mut self,
        convert: impl Fn(&str) -> Result<String, E>,
    ) -> Result<(), E> {
        for r in &mut self.requirements {
            r.field = convert(&r.field)?;
        }
        Ok(())
    }

    /// The value `field` must equal (from its first `=`/`==` term), for index lookups.
    pub fn exact_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.op == FieldOp::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
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

/// Splits at every `,` not preceded by an escaping `\` (a `\` escapes whatever follows it).
fn split_terms(input: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(input.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(input.get(start..).unwrap_or(""));
    terms
}

/// Splits a term at its first operator (`!=`, `==` or `=`), ignoring escapes as upstream does.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    let (at, op, len) = term.char_indices().find_map(|(i, c)| {
        let rest = term.get(i..).unwrap_or("");
        if rest.starts_with("!=") {
            Some((i, FieldOp::NotEquals, 2))
        } else if rest.starts_with("==") {
            Some((i, FieldOp::Equals, 2))
        } else if c == '=' {
            Some((i, FieldOp::Equals, 1))
        } else {
            None
        }
    })?;
    Some((term.get(..at)?, op, term.get(at + len..)?))
}

/// Resolves `\\`, `\,` and `\=`; any other escape, a trailing `\` or a bare `,`/`=` is an error.
fn unescape_value(raw: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(other) => {
                    return Err(SelectorError::InvalidEscape {
                        sequence: format!("\\{other}"),
                    })
                }
                None => {
                    return Err(SelectorError::InvalidEscape {
                        sequence: "\\".to_owned(),
                    })
                }
            },
            ',' | '=' => return Err(SelectorError::UnescapedCharacter(c)),
            other => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::panic, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse_ok(input: &str) -> FieldSelector {
        FieldSelector::parse(input).unwrap_or_else(|e| panic!("{input:?} should parse: {e}"))
    }

    fn parse_err(input: &str) -> String {
        match FieldSelector::parse(input) {
            Ok(sel) => panic!("{input:?} should be rejected, parsed as {sel}"),
            Err(e) => e.to_string(),
        }
    }

    fn matches(selector: &str, fields: &[(&str, &str)]) -> bool {
        let map: HashMap<&str, &str> = fields.iter().copied().collect();
        parse_ok(selector).matches(|f| map.get(f).copied())
    }

    fn req(field: &str, op: FieldOp, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.to_owned(),
            op,
            value: value.to_owned(),
        }
    }

    #[test]
    fn empty_input_selects_everything() {
        let sel = parse_ok("");
        assert!(sel.is_empty());
        assert_eq!(sel, FieldSelector::everything());
        assert!(sel.matches(|_| None));
        assert_eq!(sel.to_string(), "");
    }

    #[test]
    fn equals_and_double_equals_match_the_value() {
        for input in ["metadata.name=foo", "metadata.name==foo"] {
            let sel = parse_ok(input);
            assert_eq!(
                sel.requirements(),
                [req("metadata.name", FieldOp::Equals, "foo")]
            );
            assert!(matches(input, &[("metadata.name", "foo")]));
            assert!(!matches(input, &[("metadata.name", "bar")]));
        }
    }

    #[test]
    fn not_equals_matches_other_values() {
        assert!(matches(
            "status.phase!=Running",
            &[("status.phase", "Pending")]
        ));
        assert!(!matches(
            "status.phase!=Running",
            &[("status.phase", "Running")]
        ));
        assert_eq!(
            parse_ok("a!=b").requirements(),
            [req("a", FieldOp::NotEquals, "b")]
        );
    }

    #[test]
    fn missing_field_compares_as_the_empty_string() {
        assert!(matches("spec.nodeName=", &[]));
        assert!(!matches("spec.nodeName!=", &[]));
        assert!(matches("spec.nodeName!=node-1", &[]));
        assert!(!matches("spec.nodeName=node-1", &[]));
    }

    #[test]
    fn comma_means_and() {
        let sel = "metadata.namespace=default,spec.nodeName!=n1";
        assert!(matches(
            sel,
            &[("metadata.namespace", "default"), ("spec.nodeName", "n2")]
        ));
        assert!(!matches(
            sel,
            &[("metadata.namespace", "default"), ("spec.nodeName", "n1")]
        ));
        assert!(!matches(sel, &[("metadata.namespace", "kube-system")]));
    }

    #[test]
    fn empty_terms_from_dangling_commas_are_ignored_as_upstream() {
        assert_eq!(
            parse_ok("a=b,").requirements(),
            [req("a", FieldOp::Equals, "b")]
        );
        assert_eq!(
            parse_ok(",a=b").requirements(),
            [req("a", FieldOp::Equals, "b")]
        );
        assert_eq!(parse_ok("a=b,,c=d").requirements().len(), 2);
        assert!(parse_ok(",,,").is_empty());
    }

    #[test]
    fn whitespace_is_kept_as_part_of_names_and_values() {
        let sel = parse_ok(" metadata.name = foo ");
        assert_eq!(
            sel.requirements(),
            [req(" metadata.name ", FieldOp::Equals, " foo ")]
        );
        assert_eq!(
            sel.validate(|f| f == "metadata.name")
                .map_err(|e| e.to_string()),
            Err("field label not supported:  metadata.name ".to_owned())
        );
    }

    #[test]
    fn field_value_escapes_round_trip() {
        let sel = parse_ok(r"a=\,\=\\x,b==c");
        assert_eq!(sel.requirements()[0].value, r",=\x");
        assert_eq!(sel.to_string(), r"a=\,\=\\x,b=c");
        assert_eq!(parse_ok(&sel.to_string()), sel);
        assert!(matches(r"k=\=value\\\,\\", &[("k", r"=value\,\")]));
        assert_eq!(parse_ok(r"x=a||y\=b").requirements()[0].value, "a||y=b");
    }

    #[test]
    fn invalid_escapes_are_errors() {
        assert_eq!(
            parse_err(r"a=\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            parse_err(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            parse_err(r"a=\\\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            parse_err(r"a=\é"),
            r"invalid field selector: invalid escape sequence: \é"
        );
    }

    #[test]
    fn unescaped_equals_in_a_value_is_an_error() {
        let expected = "invalid field selector: unescaped character in value: '='";
        assert_eq!(parse_err("a=b=c"), expected);
        assert_eq!(parse_err("x==a==b"), expected);
        assert_eq!(parse_err("a===b"), expected);
        assert_eq!(parse_err("a!==b"), expected);
    }

    #[test]
    fn terms_without_an_operator_are_rejected() {
        assert_eq!(
            parse_err("x"),
            "invalid selector: 'x'; can't understand 'x'"
        );
        assert_eq!(
            parse_err("a=b,x"),
            "invalid selector: 'a=b,x'; can't understand 'x'"
        );
        assert!(parse_err("x in (a)").contains("can't understand 'x in (a)'"));
        assert!(parse_err("x>5").contains("can't understand 'x>5'"));
    }

    #[test]
    fn a_term_with_no_field_name_is_rejected() {
        for input in ["=v", "==v", "!=v", "a=b,=c"] {
            assert!(parse_err(input).contains("no field name"), "{input}");
        }
    }

    #[test]
    fn the_first_operator_in_a_term_splits_it() {
        assert_eq!(
            parse_ok("a!b=c").requirements(),
            [req("a!b", FieldOp::Equals, "c")]
        );
        assert_eq!(
            parse_ok("a=!b").requirements(),
            [req("a", FieldOp::Equals, "!b")]
        );
        assert_eq!(
            parse_ok("a!=!").requirements(),
            [req("a", FieldOp::NotEquals, "!")]
        );
    }

    #[test]
    fn terms_are_ordered_deterministically() {
        let a = parse_ok("x=a,a=x");
        let b = parse_ok("a=x,x=a");
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "a=x,x=a");
    }

    #[test]
    fn exact_value_returns_equality_terms_only() {
        let sel = parse_ok("metadata.namespace=default,spec.nodeName!=n1,status.phase==Running");
        assert_eq!(sel.exact_value("metadata.namespace"), Some("default"));
        assert_eq!(sel.exact_value("status.phase"), Some("Running"));
        assert_eq!(sel.exact_value("spec.nodeName"), None);
        assert_eq!(sel.exact_value("metadata.name"), None);
        assert_eq!(parse_ok("k=").exact_value("k"), Some(""));
    }

    #[test]
    fn validate_reports_unsupported_fields_like_kube_apiserver() {
        let sel = parse_ok("metadata.name=a,spec.bogus=b,status.hostIP=c");
        let supported = |f: &str| matches!(f, "metadata.name" | "status.hostIP");
        assert_eq!(
            sel.validate(supported).map_err(|e| e.to_string()),
            Err("field label not supported: spec.bogus".to_owned())
        );
        assert_eq!(parse_ok("metadata.name=a").validate(supported), Ok(()));
        assert_eq!(FieldSelector::everything().validate(|_| false), Ok(()));
    }

    #[test]
    fn non_ascii_fields_and_values_are_kept_intact() {
        let sel = parse_ok("함=수,목!=록");
        assert_eq!(
            sel.requirements(),
            [
                req("목", FieldOp::NotEquals, "록"),
                req("함", FieldOp::Equals, "수")
            ]
        );
        assert!(sel.matches(|f| if f == "함" { Some("수") } else { None }));
        assert_eq!(parse_ok("f=😀\\,").requirements()[0].value, "😀,");
    }

    #[test]
    fn very_long_inputs_are_handled() {
        let many = (0..20_000)
            .map(|i| format!("f{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(parse_ok(&many).requirements().len(), 20_000);
        let long_value = format!("f={}", "\\,".repeat(100_000));
        assert_eq!(parse_ok(&long_value).requirements()[0].value.len(), 100_000);
        assert!(parse_err(&"x".repeat(100_000)).starts_with("invalid selector: 'xxx"));
    }
}
