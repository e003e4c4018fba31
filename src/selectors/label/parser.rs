//! Lexer, parser and key/value validation for label selectors. Accepts
//! exactly what apimachinery's `labels.Parse` accepts and words its errors
//! the same way, so clients see the messages kube-apiserver would give.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{LabelOp, LabelRequirement};
use crate::selectors::{InvalidValue, RequirementError, SelectorError, UnexpectedToken};

/// Parses a whole selector into unsorted requirements, or says what is wrong.
pub(super) fn parse_requirements(input: &str) -> Result<Vec<LabelRequirement>, SelectorError> {
    let mut parser = Parser {
        tokens: tokenize(input),
        pos: 0,
    };
    parser.parse_all()
}

// ---------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    End,
    Comma,
    OpenParen,
    CloseParen,
    Bang,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    In,
    NotIn,
    Ident(&'a str),
}

impl<'a> Token<'a> {
    /// The token as written, for error messages (empty at end of input).
    fn text(self) -> &'a str {
        match self {
            Token::End => "",
            Token::Comma => ",",
            Token::OpenParen => "(",
            Token::CloseParen => ")",
            Token::Bang => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Greater => ">",
            Token::Less => "<",
            Token::In => "in",
            Token::NotIn => "notin",
            Token::Ident(s) => s,
        }
    }

    /// The token read as a key or value: `in` and `notin` are ordinary words there.
    fn as_word(self) -> Option<&'a str> {
        match self {
            Token::Ident(s) => Some(s),
            Token::In => Some("in"),
            Token::NotIn => Some("notin"),
            _ => None,
        }
    }
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the input into tokens, always ending with [`Token::End`].
/// Splitting happens only at ASCII bytes, so every word is valid UTF-8.
fn tokenize(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0;
    while let Some(&b) = bytes.get(pos) {
        let next = bytes.get(pos + 1).copied();
        let (token, len) = match (b, next) {
            _ if is_whitespace(b) => {
                pos += 1;
                continue;
            }
            (b'!', Some(b'=')) => (Token::NotEquals, 2),
            (b'=', Some(b'=')) => (Token::DoubleEquals, 2),
            (b'!', _) => (Token::Bang, 1),
            (b'=', _) => (Token::Equals, 1),
            (b',', _) => (Token::Comma, 1),
            (b'(', _) => (Token::OpenParen, 1),
            (b')', _) => (Token::CloseParen, 1),
            (b'>', _) => (Token::Greater, 1),
            (b'<', _) => (Token::Less, 1),
            _ => {
                let rest = input.get(pos..).unwrap_or("");
                let len = rest
                    .bytes()
                    .position(|c| is_special(c) || is_whitespace(c))
                    .unwrap_or(rest.len());
                let word = rest.get(..len).unwrap_or("");
                let token = match word {
                    "in" => Token::In,
                    "notin" => Token::NotIn,
                    w => Token::Ident(w),
                };
                (token, len.max(1))
            }
        };
        tokens.push(token);
        pos += len;
    }
    tokens.push(Token::End);
    tokens
}

// ---------------------------------------------------------------------------
// Parser

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
}

fn found(token: Token<'_>, expected: &'static str) -> UnexpectedToken {
    UnexpectedToken {
        found: token.text().to_owned(),
        expected,
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        self.tokens.get(self.pos).copied().unwrap_or(Token::End)
    }

    fn advance(&mut self) -> Token<'a> {
        let token = self.peek();
        self.pos = (self.pos + 1).min(self.tokens.len());
        token
    }

    fn starts_requirement(token: Token<'_>) -> bool {
        token == Token::Bang || token.as_word().is_some()
    }

    /// `selector := requirement ("," requirement)*` or nothing at all.
    fn parse_all(&mut self) -> Result<Vec<LabelRequirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let token = self.peek();
            if token == Token::End {
                return Ok(requirements);
            }
            if !Self::starts_requirement(token) {
                let unexpected = found(token, "!, identifier, or 'end of string'");
                return Err(SelectorError::LabelSyntax(unexpected));
            }
            let req = self
                .parse_requirement()
                .map_err(SelectorError::InvalidRequirement)?;
            requirements.push(req);
            match self.advance() {
                Token::End => return Ok(requirements),
                Token::Comma if Self::starts_requirement(self.peek()) => {}
                Token::Comma => {
                    let unexpected = found(self.peek(), "identifier after ','");
                    return Err(SelectorError::LabelSyntax(unexpected));
                }
                other => {
                    let unexpected = found(other, "',' or 'end of string'");
                    return Err(SelectorError::LabelSyntax(unexpected));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, RequirementError> {
        let mut token = self.advance();
        let negated = token == Token::Bang;
        if negated {
            token = self.advance();
        }
        let key = token
            .as_word()
            .ok_or_else(|| RequirementError::Syntax(found(token, "identifier")))?;
        let problems = label_key_problems(key);
        if !problems.is_empty() {
            return Err(RequirementError::InvalidKey(invalid("key", key, problems)));
        }
        let (op, values) = if negated {
            (LabelOp::DoesNotExist, Vec::new())
        } else if matches!(self.peek(), Token::End | Token::Comma) {
            (LabelOp::Exists, Vec::new())
        } else {
            let op = self.parse_operator()?;
            let values = match op {
                LabelOp::In | LabelOp::NotIn => self.parse_value_set()?,
                _ => vec![self.parse_exact_value()?.to_owned()],
            };
            (op, values)
        };
        check_values(key, op, &values)?;
        Ok(LabelRequirement {
            key: key.to_owned(),
            op,
            values,
        })
    }

    fn parse_operator(&mut self) -> Result<LabelOp, RequirementError> {
        match self.advance() {
            Token::In => Ok(LabelOp::In),
            Token::NotIn => Ok(LabelOp::NotIn),
            Token::Equals => Ok(LabelOp::Equals),
            Token::DoubleEquals => Ok(LabelOp::DoubleEquals),
            Token::NotEquals => Ok(LabelOp::NotEquals),
            Token::Greater => Ok(LabelOp::GreaterThan),
            Token::Less => Ok(LabelOp::LessThan),
            other => Err(RequirementError::Syntax(found(
                other,
                "in, notin, =, ==, !=, gt, lt",
            ))),
        }
    }

    /// The single value after `=`, `==`, `!=`, `>` or `<`; may be empty.
    fn parse_exact_value(&mut self) -> Result<&'a str, RequirementError> {
        match self.peek() {
            Token::End | Token::Comma => Ok(""),
            _ => {
                let token = self.advance();
                token
                    .as_word()
                    .ok_or_else(|| RequirementError::Syntax(found(token, "identifier")))
            }
        }
    }

    /// `"(" value? ("," value?)* ")"`: every comma-separated slot, even an empty one, is a value.
    fn parse_value_set(&mut self) -> Result<Vec<String>, RequirementError> {
        let open = self.advance();
        if open != Token::OpenParen {
            return Err(RequirementError::MissingOpenParen {
                found: open.text().to_owned(),
            });
        }
        let first = self.peek();
        if first != Token::Comma && first != Token::CloseParen && first.as_word().is_none() {
            return Err(RequirementError::Syntax(found(
                first,
                "',', ')' or identifier",
            )));
        }
        let mut values = BTreeSet::new();
        loop {
            let token = self.advance();
            if let Some(word) = token.as_word() {
                values.insert(word);
                match self.advance() {
                    Token::Comma => continue,
                    Token::CloseParen => break,
                    other => return Err(RequirementError::Syntax(found(other, "',' or ')'"))),
                }
            }
            match token {
                Token::Comma => {
                    values.insert("");
                }
                Token::CloseParen => {
                    values.insert("");
                    break;
                }
                other => return Err(RequirementError::Syntax(found(other, "',', or identifier"))),
            }
        }
        Ok(values.into_iter().map(str::to_owned).collect())
    }
}

// ---------------------------------------------------------------------------
// Validation (wording follows apimachinery's validation messages)

const NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
                        and must start and end with an alphanumeric character";
const VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric \
                         characters, '-', '_' or '.', and must start and end with an \
                         alphanumeric character";
const DNS_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                       characters, '-' or '.', and must start and end with an alphanumeric \
                       character";
const MAX_NAME_LEN: usize = 63;
const MAX_VALUE_LEN: usize = 63;
const MAX_PREFIX_LEN: usize = 253;

/// Formats a pattern failure the way apimachinery does (including its spacing).
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        let _ = write!(out, "'{example}', ");
    }
    let _ = write!(out, "regex used for validation is '{re}')");
    out
}

/// A field error: `<path>: Invalid value: "<value>": <problems>` when displayed.
fn invalid(path: &str, value: &str, problems: Vec<String>) -> InvalidValue {
    InvalidValue {
        path: path.to_owned(),
        value: value.to_owned(),
        problems,
    }
}

fn bounded_by(s: &str, edge: impl Fn(u8) -> bool, inner: impl Fn(u8) -> bool) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            edge(first) && edge(last) && bytes.iter().all(|&b| edge(b) || inner(b))
        }
        _ => false,
    }
}

fn is_label_name(s: &str) -> bool {
    bounded_by(
        s,
        |b| b.is_ascii_alphanumeric(),
        |b| matches!(b, b'-' | b'_' | b'.'),
    )
}

fn is_dns_subdomain(s: &str) -> bool {
    let lower_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    s.split('.')
        .all(|label| bounded_by(label, lower_alnum, |b| b == b'-'))
}

/// Problems with a label key (optional DNS-subdomain prefix, `/`, name); empty when valid.
fn label_key_problems(key: &str) -> Vec<String> {
    let name_regex_error = || regex_error(NAME_MSG, NAME_FMT, &["MyName", "my.name", "123-abc"]);
    let mut parts = key.split('/');
    let first = parts.next().unwrap_or("");
    let second = parts.next();
    if parts.next().is_some() {
        return vec![format!(
            "a valid label key {} with an optional DNS subdomain prefix and '/' \
             (e.g. 'example.com/MyName')",
            name_regex_error()
        )];
    }
    let mut problems = Vec::new();
    let name = match second {
        None => first,
        Some(name) => {
            if first.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                if first.len() > MAX_PREFIX_LEN {
                    problems.push(format!(
                        "prefix part must be no more than {MAX_PREFIX_LEN} bytes"
                    ));
                }
                if !is_dns_subdomain(first) {
                    let detail = regex_error(DNS_MSG, DNS_FMT, &["example.com"]);
                    problems.push(format!("prefix part {detail}"));
                }
            }
            name
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > MAX_NAME_LEN {
        problems.push(format!(
            "name part must be no more than {MAX_NAME_LEN} bytes"
        ));
    }
    if !is_label_name(name) {
        problems.push(format!("name part {}", name_regex_error()));
    }
    problems
}

/// Problems with a label value (empty is allowed); empty when valid.
fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_VALUE_LEN {
        problems.push(format!("must be no more than {MAX_VALUE_LEN} bytes"));
    }
    if !value.is_empty() && !is_label_name(value) {
        problems.push(regex_error(
            VALUE_MSG,
            VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    problems
}

/// Validates a requirement's values; several problems are reported as `[a, b]`.
fn check_values(key: &str, op: LabelOp, values: &[String]) -> Result<(), RequirementError> {
    let mut errors: Vec<InvalidValue> = Vec::new();
    if matches!(op, LabelOp::GreaterThan | LabelOp::LessThan) {
        for (i, value) in values.iter().enumerate() {
            if value.parse::<i64>().is_err() {
                let problem = "for 'Gt', 'Lt' operators, the value must be an integer".to_owned();
                errors.push(invalid(&format!("values[{i}]"), value, vec![problem]));
            }
        }
    }
    for (i, value) in values.iter().enumerate() {
        let problems = label_value_problems(value);
        if !problems.is_empty() {
            errors.push(invalid(&format!("values[{i}][{key}]"), value, problems));
        }
    }
    errors.dedup();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(RequirementError::InvalidValues(errors))
    }
}
#[cfg(test)]
#[allow(clippy::panic, clippy::indexing_slicing)]
mod tests {
    use super::super::LabelSelector;

    fn parse_err(input: &str) -> String {
        match LabelSelector::parse(input) {
            Ok(sel) => panic!("{input:?} should be rejected, parsed as {sel}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn gt_lt_require_an_integer_value() {
        let msg = parse_err("k>abc");
        assert_eq!(
            msg,
            "unable to parse requirement: values[0]: Invalid value: \"abc\": \
             for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert!(parse_err("k<").contains("the value must be an integer"));
        assert!(parse_err("k>99999999999999999999").contains("must be an integer"));
    }

    #[test]
    fn gt_rejects_negative_values_because_they_are_not_label_values() {
        let msg = parse_err("k>-1");
        assert!(msg.starts_with(
            "unable to parse requirement: values[0][k]: Invalid value: \"-1\": a valid label"
        ));
        let both = parse_err("k>-x");
        assert!(both.starts_with(
            "unable to parse requirement: [values[0]: Invalid value: \"-x\": for 'Gt'"
        ));
        assert!(both.contains(", values[0][k]: Invalid value: \"-x\": a valid label"));
        assert!(both.ends_with(']'));
    }

    #[test]
    fn label_in_requires_parenthesised_values() {
        assert_eq!(
            parse_err("k in a"),
            "unable to parse requirement: found 'a' expected: '('"
        );
        assert_eq!(
            parse_err("k in"),
            "unable to parse requirement: found '' expected: '('"
        );
        assert_eq!(
            parse_err("k notin (a"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("k in (a b)"),
            "unable to parse requirement: found 'b', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("k in (=)"),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier"
        );
        assert_eq!(
            parse_err("k in (a,"),
            "unable to parse requirement: found '', expected: ',', or identifier"
        );
        assert_eq!(
            parse_err("k in ((a)"),
            "unable to parse requirement: found '(', expected: ',', ')' or identifier"
        );
        assert_eq!(
            parse_err("k in (a))"),
            "found ')', expected: ',' or 'end of string'"
        );
    }

    #[test]
    fn invalid_keys_are_rejected_with_the_reason() {
        let name = parse_err("-bad=x");
        assert!(name.starts_with("unable to parse requirement: key: Invalid value: \"-bad\": name part must consist of alphanumeric characters"));
        assert!(name.contains("(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"));
        assert!(parse_err("/x").contains("prefix part must be non-empty"));
        assert!(parse_err("x/").contains("name part must be non-empty"));
        assert!(parse_err("Example.com/x").contains("prefix part a lowercase RFC 1123 subdomain"));
        assert!(parse_err("a..b/x").contains("prefix part a lowercase RFC 1123 subdomain"));
        assert!(parse_err("a/b/c").contains("a valid label key must consist of"));
        let long_name = parse_err(&format!("{}=v", "k".repeat(64)));
        assert!(long_name.contains("name part must be no more than 63 bytes"));
        let long_prefix = parse_err(&format!("{}.com/x", "a".repeat(250)));
        assert!(long_prefix.contains("prefix part must be no more than 253 bytes"));
        assert!(parse_err("k_=v").contains("\"k_\""));
    }

    #[test]
    fn invalid_values_are_rejected_with_key_and_position() {
        let msg = parse_err("k=-v");
        assert!(msg.starts_with("unable to parse requirement: values[0][k]: Invalid value: \"-v\": a valid label must be an empty string"));
        assert!(msg.ends_with(
            "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        ));
        assert!(parse_err("k in (bad_,a)").contains("values[1][k]: Invalid value: \"bad_\""));
        assert!(parse_err("k=a*b").contains("\"a*b\""));
        let long = parse_err(&format!("k={}", "v".repeat(64)));
        assert!(long.contains("must be no more than 63 bytes"));
        assert!(
            !long.contains("a valid label must"),
            "only the length is wrong"
        );
    }

    #[test]
    fn non_ascii_keys_and_values_are_rejected() {
        assert!(parse_err("ключ=v").contains("key: Invalid value: \"ключ\""));
        assert!(parse_err("k=värde").contains("values[0][k]: Invalid value: \"värde\""));
        assert!(parse_err("k in (😀)").contains("Invalid value: \"😀\""));
        assert!(parse_err("k=\u{0}").contains("\\0"));
    }

    #[test]
    fn structural_errors_name_the_unexpected_token() {
        let cases = [
            ("a,", "found '', expected: identifier after ','"),
            ("a,,b", "found ',', expected: identifier after ','"),
            (
                ",a",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            (
                "=v",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            (
                "(a)",
                "found '(', expected: !, identifier, or 'end of string'",
            ),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            ("a=b=c", "found '=', expected: ',' or 'end of string'"),
            ("!a=b", "found '=', expected: ',' or 'end of string'"),
            (
                "!",
                "unable to parse requirement: found '', expected: identifier",
            ),
            (
                "!!a",
                "unable to parse requirement: found '!', expected: identifier",
            ),
            (
                "k v",
                "unable to parse requirement: found 'v', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "k=(a)",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "k>=5",
                "unable to parse requirement: found '=', expected: identifier",
            ),
            (
                "k===v",
                "unable to parse requirement: found '=', expected: identifier",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_err(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn operators_are_lexed_greedily_as_upstream() {
        use super::{tokenize, Token as T};
        let tokens = tokenize("a!==b<=c>!d notin(in)");
        let expected = [
            T::Ident("a"),
            T::NotEquals,
            T::Equals,
            T::Ident("b"),
            T::Less,
            T::Equals,
            T::Ident("c"),
            T::Greater,
            T::Bang,
            T::Ident("d"),
            T::NotIn,
            T::OpenParen,
            T::In,
            T::CloseParen,
            T::End,
        ];
        assert_eq!(tokens, expected);
        assert_eq!(tokenize(" \t\r\n"), [T::End]);
    }
}
