//! Sharded list and watch (KEP-5866, alpha in Kubernetes 1.36): the `shardSelector`
//! parameter, `shardRange(object.metadata.uid, '0x…', '0x…')` terms joined with `||`. An
//! object is in a range when the FNV-1a 64 hash of the field's value (the uid or the
//! namespace string as it is, "" for a cluster-scoped object's namespace) lies in
//! [start, end); in the selector when it is in any of its ranges.
//!
//! kube-apiserver parses the value as a CEL expression and accepts only that form: the
//! function `shardRange` with three arguments, a field path of the two above (the same in
//! every term), and bounds that are string literals of `0x` and exactly 16 lowercase hex
//! digits (the end may also be `0x10000000000000000`, 2^64), start below end. This
//! parser accepts the same, whitespace anywhere between tokens, single or double quotes.
//! Lists echo the selector normalized (`metadata.shardInfo.selector`): each term as
//! `shardRange(FIELD, 'START', 'END')`, joined with ` || `.
//!
//! Also FNV-1a 64 itself, which the consistency check's digests use.

/// FNV-1a 64's offset basis: the hash of no bytes.
pub const FNV1A64_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64's prime.
const FNV1A64_PRIME: u64 = 0x0000_0100_0000_01b3;

/// `hash` (the hash of some bytes) extended with `bytes`.
pub fn fnv1a64_extend(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV1A64_PRIME))
}

/// FNV-1a 64 of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_extend(FNV1A64_OFFSET, bytes)
}

/// The field an object is sharded by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace`.
    Namespace,
}

impl ShardField {
    /// Its path, as written in a selector.
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }
}

/// One `shardRange`: hashes in [start, end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRange {
    /// The first hash in the range.
    pub start: u64,
    /// The first hash after it (up to 2^64).
    pub end: u128,
}

/// A parsed `shardSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSelector {
    /// The field every range hashes.
    pub field: ShardField,
    /// The ranges; an object in any is selected.
    pub ranges: Vec<ShardRange>,
}

/// Why a `shardSelector` is refused; Display is the message after "invalid shard
/// selector: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Only whitespace.
    #[error("empty shard selector is not allowed; omit the parameter for unfiltered lists")]
    Empty,
    /// Not the grammar's shape at `at` (a byte offset).
    #[error("syntax error at position {at}: {expected}")]
    Syntax {
        /// Where.
        at: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// A function other than `shardRange`.
    #[error("unsupported function {0:?}; only shardRange() and || are allowed")]
    Function(String),
    /// `shardRange` with other than three arguments.
    #[error("shardRange() requires exactly 3 arguments, got {0}")]
    Arity(usize),
    /// A field path other than the two supported.
    #[error(
        "unsupported field path {0:?}; supported: object.metadata.uid, object.metadata.namespace"
    )]
    Field(String),
    /// Terms on different fields.
    #[error("all shard ranges must use the same field, got {0:?} and {1:?}")]
    MixedFields(String, String),
    /// A bound without the `0x` prefix.
    #[error("shard range bound {0:?} must have '0x' prefix")]
    Prefix(String),
    /// A bound with a character other than a lowercase hex digit.
    #[error("shard range bound {0:?}: invalid hex character {1:?}")]
    HexCharacter(String, char),
    /// A bound of another length than 16 digits.
    #[error(
        "must be a 0x-prefixed 16-digit hex value, got {got:?}{}",
        did_you_mean(suggestion)
    )]
    HexLength {
        /// The bound as given.
        got: String,
        /// It padded to 16 digits, when shorter.
        suggestion: Option<String>,
    },
    /// A range whose start is not below its end.
    #[error("shard range start {0} must be less than end {1}")]
    Order(String, String),
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean {s:?}?)"),
        None => String::new(),
    }
}

impl ShardSelector {
    /// Parses a `shardSelector` value (a non-empty one: an empty parameter is no selector).
    pub fn parse(text: &str) -> Result<ShardSelector, ShardError> {
        if text.trim().is_empty() {
            return Err(ShardError::Empty);
        }
        let mut p = Parser { text, at: 0 };
        let mut field: Option<ShardField> = None;
        let mut ranges = Vec::new();
        loop {
            let (f, range) = p.term()?;
            match field {
                Some(seen) if seen != f => {
                    return Err(ShardError::MixedFields(seen.path().into(), f.path().into()))
                }
                _ => field = Some(f),
            }
            ranges.push(range);
            p.skip_space();
            if p.at == text.len() {
                break;
            }
            p.expect("||", "'||' between shardRange() terms, or the end")?;
        }
        let field = field.ok_or(ShardError::Empty)?;
        Ok(ShardSelector { field, ranges })
    }

    /// Whether an object whose field (uid or namespace) is `value` is selected.
    pub fn matches(&self, value: &str) -> bool {
        let h = u128::from(fnv1a64(value.as_bytes()));
        self.ranges
            .iter()
            .any(|r| u128::from(r.start) <= h && h < r.end)
    }
}

/// The normalized form lists echo in `metadata.shardInfo.selector`.
impl std::fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.field.path(),
                hex(u128::from(r.start)),
                hex(r.end)
            )?;
        }
        Ok(())
    }
}

/// A bound as written: `0x` and 16 digits (17 for 2^64).
fn hex(v: u128) -> String {
    format!("0x{v:016x}")
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        self.text.get(self.at..).unwrap_or("")
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn error(&self, expected: &'static str) -> ShardError {
        ShardError::Syntax {
            at: self.at,
            expected,
        }
    }

    fn expect(&mut self, token: &str, expected: &'static str) -> Result<(), ShardError> {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.at += token.len();
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.rest().chars().next()
    }

    fn ident(&mut self) -> Option<String> {
        self.skip_space();
        let rest = self.rest();
        let len = rest
            .char_indices()
            .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            return None;
        }
        let start = self.at;
        self.at += len;
        self.text.get(start..self.at).map(str::to_string)
    }

    /// `shardRange ( FIELD , STRING , STRING )`.
    fn term(&mut self) -> Result<(ShardField, ShardRange), ShardError> {
        let Some(name) = self.ident() else {
            return Err(self.error("shardRange("));
        };
        self.expect("(", "'(' after the function name")?;
        if name != "shardRange" {
            return Err(ShardError::Function(name));
        }
        let mut args: Vec<Arg> = Vec::new();
        if self.peek() != Some(')') {
            loop {
                args.push(self.arg()?);
                match self.peek() {
                    Some(',') => self.at += 1,
                    Some(')') => break,
                    _ => return Err(self.error("',' or ')' in shardRange()")),
                }
            }
        }
        self.expect(")", "')'")?;
        let [field, start, end] =
            <[Arg; 3]>::try_from(args).map_err(|a| ShardError::Arity(a.len()))?;
        let field = match field {
            Arg::Path(p) if p == ShardField::Uid.path() => ShardField::Uid,
            Arg::Path(p) if p == ShardField::Namespace.path() => ShardField::Namespace,
            Arg::Path(p) => return Err(ShardError::Field(p)),
            Arg::Text(_) => return Err(self.error("a field path as shardRange()'s first argument")),
        };
        let (Arg::Text(start), Arg::Text(end)) = (start, end) else {
            return Err(self.error("string literals as shardRange()'s bounds"));
        };
        let (s, e) = (bound(&start)?, bound(&end)?);
        let start = u64::try_from(s).map_err(|_| ShardError::Order(start.clone(), end.clone()))?;
        if u128::from(start) >= e {
            return Err(ShardError::Order(hex(u128::from(start)), hex(e)));
        }
        Ok((field, ShardRange { start, end: e }))
    }

    /// A field path (`a.b.c`) or a string literal.
    fn arg(&mut self) -> Result<Arg, ShardError> {
        match self.peek() {
            Some(q @ ('\'' | '"')) => {
                self.at += 1;
                let rest = self.rest();
                let Some(len) = rest.find(q) else {
                    return Err(self.error("the end of the string literal"));
                };
                let text = rest.get(..len).unwrap_or("").to_string();
                if text.contains('\\') {
                    return Err(self.error("a string literal without escapes"));
                }
                self.at += len + 1;
                Ok(Arg::Text(text))
            }
            _ => {
                let Some(mut path) = self.ident() else {
                    return Err(self.error("a field path or a string literal"));
                };
                while self.peek() == Some('.') {
                    self.at += 1;
                    let Some(next) = self.ident() else {
                        return Err(self.error("a name after '.'"));
                    };
                    path.push('.');
                    path.push_str(&next);
                }
                Ok(Arg::Path(path))
            }
        }
    }
}

enum Arg {
    Path(String),
    Text(String),
}

/// A bound's value: `0x` and 16 lowercase hex digits, or `0x10000000000000000`.
fn bound(text: &str) -> Result<u128, ShardError> {
    let Some(digits) = text.strip_prefix("0x") else {
        return Err(ShardError::Prefix(text.into()));
    };
    if let Some(c) = digits.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(ShardError::HexCharacter(text.into(), c));
    }
    if digits == "10000000000000000" {
        return Ok(1 << 64);
    }
    if digits.len() != 16 {
        let suggestion =
            (!digits.is_empty() && digits.len() < 16).then(|| format!("0x{digits:0>16}"));
        return Err(ShardError::HexLength {
            got: text.into(),
            suggestion,
        });
    }
    u128::from_str_radix(digits, 16).map_err(|_| ShardError::HexCharacter(text.into(), ' '))
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        // From the FNV reference test suite (Fowler, Noll, Vo: fnv-test vectors).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    const HALF: &str =
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

    #[test]
    fn a_term_and_terms_joined_with_or_parse_and_print_normalized() {
        let s = ShardSelector::parse(HALF).expect("parses");
        assert_eq!(s.field, ShardField::Uid);
        assert_eq!(
            s.ranges,
            [ShardRange {
                start: 0,
                end: 1 << 63
            }]
        );
        assert_eq!(s.to_string(), HALF);
        let spaced = "  shardRange( object.metadata.namespace ,\"0x8000000000000000\",  '0x10000000000000000' )||shardRange(object . metadata . namespace,'0x0000000000000000','0x0000000000000010')  ";
        let s = ShardSelector::parse(spaced).expect("parses");
        assert_eq!(s.field, ShardField::Namespace);
        assert_eq!(
            s.to_string(),
            "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000010')"
        );
    }

    #[test]
    fn what_kube_apiserver_refuses_is_refused_with_its_words() {
        let err = |t: &str| ShardSelector::parse(t).expect_err(t).to_string();
        assert_eq!(
            err("   "),
            "empty shard selector is not allowed; omit the parameter for unfiltered lists"
        );
        assert_eq!(
            err("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"),
            "must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)"
        );
        assert!(
            err("shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')")
                .contains("must have '0x' prefix")
        );
        assert!(
            err("shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')")
                .contains("invalid hex character")
        );
        assert_eq!(
            err("shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')"),
            "shard range start 0x8000000000000000 must be less than end 0x8000000000000000"
        );
        assert_eq!(
            err("shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')"),
            "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace"
        );
        assert_eq!(
            err("shardRange(object.metadata.uid, '0x0000000000000000')"),
            "shardRange() requires exactly 3 arguments, got 2"
        );
        assert_eq!(
            err("hash(object.metadata.uid)"),
            "unsupported function \"hash\"; only shardRange() and || are allowed"
        );
        assert_eq!(
            err(&format!("{HALF} || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')")),
            "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\""
        );
        for bad in [
            &format!("{HALF} && {HALF}") as &str,
            &format!("{HALF} ||"),
            "shardRange(object.metadata.uid, 0, 8)",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'",
            "shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')",
        ] {
            assert!(ShardSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_object_is_in_the_range_its_fnv1a64_falls_in() {
        // fnv1a64("") = 0xcbf29ce484222325: upper half, below 0xd000000000000000.
        let upper = ShardSelector::parse(
            "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
        )
        .expect("parses");
        assert!(upper.matches(""));
        let lower = ShardSelector::parse(
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
        )
        .expect("parses");
        assert!(!lower.matches(""));
        // The bounds: start included, end excluded.
        let exact = ShardSelector::parse(
            "shardRange(object.metadata.namespace, '0xcbf29ce484222325', '0xcbf29ce484222326')",
        )
        .expect("parses");
        assert!(exact.matches(""));
        let before = ShardSelector::parse(
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0xcbf29ce484222325')",
        )
        .expect("parses");
        assert!(!before.matches(""));
    }
}
