//! Embedded JSON (`runtime.RawExtension`, `metav1.FieldsV1`): Go's `encoding/json` calls
//! their `MarshalJSON`, then validates and compacts the bytes it returns, escaping `<`,
//! `>`, `&`, U+2028 and U+2029. This module does the same in one pass without recursion:
//! on invalid JSON nothing is written and `false` is returned.

/// Go's `encoding/json` scanner refuses deeper nesting.
const MAX_NESTING: usize = 10_000;

/// The value of 4 hex digits at `s[i..i + 4]`.
fn hex4(s: &[u8], i: usize) -> Option<u32> {
    let h = s.get(i..i + 4)?;
    let txt = std::str::from_utf8(h).ok()?;
    if !h.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(txt, 16).ok()
}

#[inline]
fn ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

struct Compactor<'s, 'o> {
    src: &'s [u8],
    i: usize,
    out: &'o mut Vec<u8>,
}

impl Compactor<'_, '_> {
    #[inline]
    fn skip_ws(&mut self) {
        while self.i < self.src.len() && ws(self.src[self.i]) {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.src.get(self.i).copied()
    }

    fn string(&mut self) -> bool {
        // At the opening quote.
        self.out.push(b'"');
        self.i += 1;
        let mut start = self.i;
        loop {
            let Some(c) = self.peek() else { return false };
            match c {
                b'"' => {
                    self.out.extend_from_slice(&self.src[start..self.i]);
                    self.out.push(b'"');
                    self.i += 1;
                    return true;
                }
                0..=0x1f => return false,
                b'\\' => match self.src.get(self.i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 2,
                    Some(b'u') => {
                        let Some(cp) = hex4(self.src, self.i + 2) else {
                            return false;
                        };
                        let paired = (0xD800..0xDC00).contains(&cp)
                            && self.src.get(self.i + 6) == Some(&b'\\')
                            && self.src.get(self.i + 7) == Some(&b'u')
                            && hex4(self.src, self.i + 8)
                                .is_some_and(|lo| (0xDC00..0xE000).contains(&lo));
                        if paired {
                            self.i += 12;
                        } else if (0xD800..0xE000).contains(&cp) {
                            // A lone surrogate: Go clients decode it as U+FFFD; write that,
                            // so strict parsers accept the output too.
                            self.out.extend_from_slice(&self.src[start..self.i]);
                            self.out.extend_from_slice(b"\\ufffd");
                            self.i += 6;
                            start = self.i;
                        } else {
                            self.i += 6;
                        }
                    }
                    _ => return false,
                },
                b'<' | b'>' | b'&' => {
                    self.out.extend_from_slice(&self.src[start..self.i]);
                    let hex = b"0123456789abcdef";
                    self.out.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        hex[(c >> 4) as usize],
                        hex[(c & 15) as usize],
                    ]);
                    self.i += 1;
                    start = self.i;
                }
                0xE2 if self.src.get(self.i + 1) == Some(&0x80)
                    && matches!(self.src.get(self.i + 2), Some(0xA8 | 0xA9)) =>
                {
                    self.out.extend_from_slice(&self.src[start..self.i]);
                    let last = if self.src[self.i + 2] == 0xA8 {
                        b'8'
                    } else {
                        b'9'
                    };
                    self.out
                        .extend_from_slice(&[b'\\', b'u', b'2', b'0', b'2', last]);
                    self.i += 3;
                    start = self.i;
                }
                0x80..=0xff => {
                    let n = crate::codec::gojson::utf8_len(self.src, self.i);
                    if n == 0 {
                        // Go passes invalid UTF-8 through (and its decoder reads it as
                        // U+FFFD); write U+FFFD so the output is valid UTF-8.
                        self.out.extend_from_slice(&self.src[start..self.i]);
                        self.out.extend_from_slice(b"\\ufffd");
                        self.i += 1;
                        start = self.i;
                    } else {
                        self.i += n;
                    }
                }
                _ => self.i += 1,
            }
        }
    }

    fn digits(&mut self) -> bool {
        let s = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i > s
    }

    fn number(&mut self) -> bool {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return false,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.digits() {
                return false;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !self.digits() {
                return false;
            }
        }
        self.out.extend_from_slice(&self.src[start..self.i]);
        true
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.src.get(self.i..self.i + word.len()) == Some(word) {
            self.out.extend_from_slice(word);
            self.i += word.len();
            true
        } else {
            false
        }
    }

    /// An object key and its colon.
    fn key(&mut self) -> bool {
        self.skip_ws();
        if self.peek() != Some(b'"') || !self.string() {
            return false;
        }
        self.skip_ws();
        if self.peek() != Some(b':') {
            return false;
        }
        self.out.push(b':');
        self.i += 1;
        true
    }

    /// The whole document; `stack` holds the open containers (`{` or `[`).
    fn document(&mut self, stack: &mut Vec<u8>) -> bool {
        stack.clear();
        'value: loop {
            // A value is expected here.
            self.skip_ws();
            let ok = match self.peek() {
                Some(b'{') => {
                    self.out.push(b'{');
                    self.i += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.out.push(b'}');
                        self.i += 1;
                        true
                    } else {
                        stack.push(b'{');
                        if stack.len() > MAX_NESTING || !self.key() {
                            return false;
                        }
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.out.push(b'[');
                    self.i += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.out.push(b']');
                        self.i += 1;
                        true
                    } else {
                        stack.push(b'[');
                        if stack.len() > MAX_NESTING {
                            return false;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => self.string(),
                Some(b't') => self.literal(b"true"),
                Some(b'f') => self.literal(b"false"),
                Some(b'n') => self.literal(b"null"),
                Some(b'-' | b'0'..=b'9') => self.number(),
                _ => false,
            };
            if !ok {
                return false;
            }
            // After a value: close containers or go on to the next element.
            loop {
                self.skip_ws();
                match (stack.last(), self.peek()) {
                    (None, None) => return true,
                    (None, Some(_)) => return false,
                    (Some(b'['), Some(b',')) | (Some(b'{'), Some(b',')) => {
                        self.out.push(b',');
                        self.i += 1;
                        if stack.last() == Some(&b'{') && !self.key() {
                            return false;
                        }
                        continue 'value;
                    }
                    (Some(b'['), Some(b']')) | (Some(b'{'), Some(b'}')) => {
                        self.out.push(self.src[self.i]);
                        self.i += 1;
                        stack.pop();
                    }
                    _ => return false,
                }
            }
        }
    }
}

/// Appends `src` to `out` compacted and HTML-escaped as Go's `json.Compact` with
/// escaping does, if it is one valid JSON value; otherwise appends nothing and returns
/// false. `stack` is scratch space.
pub fn embed(out: &mut Vec<u8>, src: &[u8], stack: &mut Vec<u8>) -> bool {
    let mark = out.len();
    let ok = Compactor { src, i: 0, out }.document(stack);
    if !ok {
        out.truncate(mark);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &str) -> Option<String> {
        let mut out = b"x".to_vec();
        let ok = embed(&mut out, s.as_bytes(), &mut Vec::new());
        if !ok {
            assert_eq!(out, b"x");
            return None;
        }
        Some(String::from_utf8(out[1..].to_vec()).unwrap())
    }

    #[test]
    fn compacts_and_escapes() {
        assert_eq!(
            run(" { \"a\" : [1, 2.5e-3, -0, true,false, null, {}, [] ] }\n").as_deref(),
            Some(r#"{"a":[1,2.5e-3,-0,true,false,null,{},[]]}"#)
        );
        assert_eq!(
            run(r#"{"f:x":{"<a>&":"\u00e9\n"}}"#).as_deref(),
            Some(r#"{"f:x":{"\u003ca\u003e\u0026":"\u00e9\n"}}"#)
        );
        assert_eq!(run("\"\u{2028}\"").as_deref(), Some("\"\\u2028\""));
        assert_eq!(run("7").as_deref(), Some("7"));
        // Surrogate pairs are kept; lone surrogates and invalid UTF-8 become U+FFFD.
        assert_eq!(
            run(r#""\ud83d\ude00 \ud800x \udc00""#).as_deref(),
            Some(r#""\ud83d\ude00 \ufffdx \ufffd""#)
        );
        let mut out = Vec::new();
        assert!(embed(&mut out, b"[\"a\xff\xc3\xa9\"]", &mut Vec::new()));
        assert_eq!(out, b"[\"a\\ufffd\xc3\xa9\"]");
    }

    #[test]
    fn rejects_invalid() {
        for bad in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "01",
            "1.",
            "-",
            "tru",
            "\"\n\"",
            "\"\\x\"",
            "1 2",
            "{1:2}",
            "[}",
            "\"\\u12\"",
        ] {
            assert_eq!(run(bad), None, "{bad:?}");
        }
        let deep = "[".repeat(20_000) + &"]".repeat(20_000);
        assert_eq!(run(&deep), None);
        let ok = "[".repeat(100) + &"]".repeat(100);
        assert_eq!(run(&ok), Some(ok));
    }
}
