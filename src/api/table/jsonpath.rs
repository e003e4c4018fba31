//! The JSONPath subset CRD printer columns use, evaluated the way client-go's `jsonpath`
//! package does with missing keys allowed.
//!
//! Supported: `.field` (with `\.` escapes, e.g. `.metadata.labels.app\.kubernetes\.io/name`),
//! `['field']` / `["field"]`, `[n]` and `[-n]`, `[*]` and `.*`, and filters
//! `[?(@.path)]` / `[?(@.path <op> literal)]` with `==`, `!=`, `<`, `<=`, `>`, `>=` against a
//! quoted string, a number or `true` / `false`. Recursive descent (`..`), slices, unions
//! and ranges are not: such a path does not parse.

use std::cmp::Ordering;

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    Filter(Box<Filter>),
}

/// `[?(@.left op right)]`, or `[?(@.left)]` when `test` is None.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Vec<Step>,
    test: Option<(Op, Literal)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Path(Vec<Step>);

impl Path {
    /// Parses a printer column's `jsonPath`; None if it is malformed or unsupported.
    pub(super) fn parse(text: &str) -> Option<Path> {
        let chars: Vec<char> = text.trim().chars().collect();
        let mut p = Parser { chars, pos: 0 };
        if p.peek() == Some('$') {
            p.pos += 1;
        }
        let steps = p.steps(&[])?;
        (p.pos == p.chars.len()).then_some(Path(steps))
    }

    /// The first value the path selects, or None when it selects nothing. An evaluation
    /// error (a comparison between incompatible types) also gives None, as upstream turns
    /// it into an empty cell.
    pub(super) fn first<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        eval(&self.0, root)?.into_iter().next()
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

/// Characters that end a field name (client-go's terminators).
fn is_terminator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}')
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        if hit {
            self.pos += 1;
        }
        hit
    }

    /// Steps until the end of input or one of `stop`.
    fn steps(&mut self, stop: &[char]) -> Option<Vec<Step>> {
        let mut steps = Vec::new();
        while let Some(c) = self.peek() {
            if stop.contains(&c) {
                break;
            }
            match c {
                '.' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('.') => return None,
                        Some('*') => {
                            self.pos += 1;
                            steps.push(Step::Wildcard);
                        }
                        Some('[') => {}
                        _ => {
                            let name = self.field_name(stop);
                            // A lone trailing "." selects the current value.
                            if !name.is_empty() {
                                steps.push(Step::Field(name));
                            }
                        }
                    }
                }
                '[' => {
                    self.pos += 1;
                    steps.push(self.bracket()?);
                }
                _ => return None,
            }
        }
        Some(steps)
    }

    /// A field name up to the next unescaped terminator (or one of `stop`), backslashes
    /// removed.
    fn field_name(&mut self, stop: &[char]) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if c == '\\' {
                self.pos += 1;
                if let Some(escaped) = self.peek() {
                    name.push(escaped);
                    self.pos += 1;
                }
                continue;
            }
            if is_terminator(c) || stop.contains(&c) {
                break;
            }
            name.push(c);
            self.pos += 1;
        }
        name
    }

    /// The inside of `[...]`, after the `[`.
    fn bracket(&mut self) -> Option<Step> {
        let step = match self.peek()? {
            '*' => {
                self.pos += 1;
                Step::Wildcard
            }
            '?' => {
                self.pos += 1;
                if !self.eat('(') {
                    return None;
                }
                let filter = self.filter()?;
                if !self.eat(')') {
                    return None;
                }
                Step::Filter(Box::new(filter))
            }
            '\'' | '"' => Step::Field(self.quoted()?),
            _ => {
                let text = self.until(&[']']);
                Step::Index(text.trim().parse().ok()?)
            }
        };
        self.eat(']').then_some(step)
    }

    /// Raw text up to (not including) one of `stop`.
    fn until(&mut self, stop: &[char]) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| !stop.contains(&c)) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    /// A quoted string (single or double quotes, `\` escapes the next character).
    fn quoted(&mut self) -> Option<String> {
        let quote = self.peek()?;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek()? {
                '\\' => {
                    self.pos += 1;
                    out.push(self.peek()?);
                }
                c if c == quote => {
                    self.pos += 1;
                    return Some(out);
                }
                c => out.push(c),
            }
            self.pos += 1;
        }
    }

    /// `@.path`, optionally followed by an operator and a literal.
    fn filter(&mut self) -> Option<Filter> {
        self.skip_spaces();
        if !self.eat('@') {
            return None;
        }
        let left = self.steps(&[' ', '=', '!', '<', '>', ')'])?;
        self.skip_spaces();
        let op_text = self.until_not(|c| matches!(c, '=' | '!' | '<' | '>'));
        if op_text.is_empty() {
            return Some(Filter { left, test: None });
        }
        let op = match op_text.as_str() {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            _ => return None,
        };
        self.skip_spaces();
        let literal = match self.peek()? {
            '\'' | '"' => Literal::Str(self.quoted()?),
            _ => {
                let text = self.until(&[')', ' ']);
                match text.as_str() {
                    "true" => Literal::Bool(true),
                    "false" => Literal::Bool(false),
                    t if t.contains(['.', 'e', 'E']) => Literal::Float(t.parse().ok()?),
                    t => Literal::Int(t.parse().ok()?),
                }
            }
        };
        self.skip_spaces();
        Some(Filter {
            left,
            test: Some((op, literal)),
        })
    }

    fn until_not(&mut self, keep: impl Fn(char) -> bool) -> String {
        let start = self.pos;
        while self.peek().is_some_and(&keep) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }
}

/// Every value `steps` select from `root`, in order; None on an evaluation error.
fn eval<'a>(steps: &[Step], root: &'a Value) -> Option<Vec<&'a Value>> {
    let mut current = vec![root];
    for step in steps {
        let mut next = Vec::new();
        // A null is a nil pointer to client-go: nothing below it.
        for value in current.into_iter().filter(|v| !v.is_null()) {
            match step {
                Step::Field(name) => next.extend(value.as_object().and_then(|m| m.get(name))),
                Step::Index(i) => {
                    if let Some(list) = value.as_array() {
                        let len = i64::try_from(list.len()).unwrap_or(i64::MAX);
                        let idx = if *i < 0 { i + len } else { *i };
                        next.extend(usize::try_from(idx).ok().and_then(|i| list.get(i)));
                    }
                }
                Step::Wildcard => match value {
                    Value::Array(list) => next.extend(list.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Filter(filter) => {
                    if let Some(list) = value.as_array() {
                        for item in list {
                            if filter.matches(item)? {
                                next.push(item);
                            }
                        }
                    }
                }
            }
        }
        current = next;
    }
    Some(current)
}

impl Filter {
    /// Whether `item` passes; None on an error (more than one left value, or types that
    /// cannot be compared).
    fn matches(&self, item: &Value) -> Option<bool> {
        let lefts = eval(&self.left, item)?;
        let left = match lefts.as_slice() {
            [] => return Some(false),
            [one] => *one,
            _ => return None,
        };
        let Some((op, literal)) = &self.test else {
            return Some(true);
        };
        let ordering = match (left, literal) {
            (Value::String(s), Literal::Str(l)) => s.as_str().cmp(l.as_str()),
            (Value::Bool(b), Literal::Bool(l)) => {
                return match op {
                    Op::Eq => Some(b == l),
                    Op::Ne => Some(b != l),
                    _ => None,
                };
            }
            (Value::Number(n), Literal::Int(l)) => n.as_i64()?.cmp(l),
            (Value::Number(n), Literal::Float(l)) if !n.is_i64() => n.as_f64()?.partial_cmp(l)?,
            _ => return None,
        };
        Some(match op {
            Op::Eq => ordering == Ordering::Equal,
            Op::Ne => ordering != Ordering::Equal,
            Op::Lt => ordering == Ordering::Less,
            Op::Le => ordering != Ordering::Greater,
            Op::Gt => ordering == Ordering::Greater,
            Op::Ge => ordering != Ordering::Less,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Path;

    fn first(path: &str, v: &serde_json::Value) -> Option<serde_json::Value> {
        Path::parse(path).and_then(|p| p.first(v).cloned())
    }

    #[test]
    fn fields_indexes_and_wildcards() {
        let v = json!({"spec": {"replicas": 3, "ports": [{"port": 80}, {"port": 443}],
                                "nil": null},
                       "metadata": {"labels": {"app.kubernetes.io/name": "shop"}}});
        assert_eq!(first(".spec.replicas", &v), Some(json!(3)));
        assert_eq!(first("$.spec.replicas", &v), Some(json!(3)));
        assert_eq!(first(".spec.ports[1].port", &v), Some(json!(443)));
        assert_eq!(first(".spec.ports[-1].port", &v), Some(json!(443)));
        assert_eq!(first(".spec.ports[2].port", &v), None);
        assert_eq!(first(".spec.ports[-3].port", &v), None);
        assert_eq!(first(".spec.ports[*].port", &v), Some(json!(80)));
        assert_eq!(first(".spec.*", &v), Some(json!(null)));
        assert_eq!(first(".spec['replicas']", &v), Some(json!(3)));
        assert_eq!(
            first(r#".metadata.labels["app.kubernetes.io/name"]"#, &v),
            Some(json!("shop"))
        );
        assert_eq!(
            first(r".metadata.labels.app\.kubernetes\.io/name", &v),
            Some(json!("shop"))
        );
        assert_eq!(first(".spec.nil", &v), Some(json!(null)));
        assert_eq!(first(".spec.nil.below", &v), None);
        assert_eq!(first(".spec.missing.deeper", &v), None);
        assert_eq!(first(".spec.replicas.deeper", &v), None);
        assert_eq!(first(".spec.ports.port", &v), None);
        assert_eq!(first(".", &v), Some(v.clone()));
    }

    #[test]
    fn filters() {
        let v = json!({"status": {"conditions": [
            {"type": "Progressing", "status": "True", "gen": 1},
            {"type": "Ready", "status": "False", "reason": "Pending", "gen": 2}
        ]}});
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Ready")].status"#, &v),
            Some(json!("False"))
        );
        assert_eq!(
            first(".status.conditions[?(@.type == 'Ready')].reason", &v),
            Some(json!("Pending"))
        );
        assert_eq!(
            first(r#".status.conditions[?(@.type!="Ready")].type"#, &v),
            Some(json!("Progressing"))
        );
        assert_eq!(
            first(".status.conditions[?(@.reason)].type", &v),
            Some(json!("Ready"))
        );
        assert_eq!(
            first(".status.conditions[?(@.gen>=2)].type", &v),
            Some(json!("Ready"))
        );
        assert_eq!(
            first(".status.conditions[?(@.gen<2)].type", &v),
            Some(json!("Progressing"))
        );
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Gone")].status"#, &v),
            None
        );
        // Comparing a number with a string is an error: nothing at all.
        assert_eq!(first(r#".status.conditions[?(@.gen=="2")].type"#, &v), None);
    }

    #[test]
    fn unsupported_or_malformed() {
        for bad in [
            "..name",
            ".spec..x",
            ".a[0:2]",
            ".a[1,2]",
            ".a['x','y']",
            ".a[",
            ".a[x]",
            ".a[?(@.b=~'x')]",
            ".a[?(b=='x')]",
            "spec",
            ".a b",
            ".a['x",
        ] {
            assert_eq!(Path::parse(bad), None, "{bad}");
        }
    }
}
