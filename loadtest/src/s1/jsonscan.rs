//! The lean receive path of the JSON watchers: one pass over a watch line
//! (`{"type":..,"object":{..}}`) or a stored ConfigMap value that picks out
//! the event type, `metadata.resourceVersion` and the send stamp
//! (`data.sentUnixNanos`, else the `loadtest.watchd.dev/sent-unix-nanos`
//! annotation) without decoding the object: nothing is allocated unless one
//! of those strings holds an escape, and the bodies of every other string
//! (the payload, most of the bytes) are skipped with `memchr`.
//!
//! The scan knows where it is (the line, the object, its metadata, data or
//! annotations, or anywhere else), so a key of the same name elsewhere (a
//! ConfigMap data key called `resourceVersion`, a label, a string that
//! holds `"resourceVersion":"5"` as text) is not taken for the field. It
//! checks the JSON grammar of everything it passes over (nesting, strings
//! and their escapes, numbers, literals, nothing after the top-level
//! object) and answers as the serde decoding it replaces does
//! (`event_tests.rs` compares both on many generated lines): the same
//! fields, unescaped; `null` as absent; a field twice, a field of the wrong
//! type, a missing `type` or `object` are errors. What it does not check:
//! raw control characters and invalid UTF-8 inside strings it skips (serde
//! rejects them; watchd never writes them), and it refuses a struct given as
//! an array (which serde's derive would take).

use std::borrow::Cow;

/// Deepest nesting accepted (serde_json's recursion limit).
const MAX_DEPTH: usize = 128;

/// What the accounting reads of a JSON watch line or object.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scanned<'a> {
    /// The line's `type` (`None` when scanning an object alone).
    pub kind: Option<Cow<'a, str>>,
    /// `object.metadata.resourceVersion`.
    pub resource_version: Option<Cow<'a, str>>,
    /// `object.data.sentUnixNanos`.
    pub data_stamp: Option<Cow<'a, str>>,
    /// `object.metadata.annotations["loadtest.watchd.dev/sent-unix-nanos"]`.
    pub annotation_stamp: Option<Cow<'a, str>>,
}

impl Scanned<'_> {
    /// The revision, when `resourceVersion` is a number.
    pub fn revision(&self) -> Option<i64> {
        self.resource_version
            .as_deref()
            .and_then(|s| s.parse().ok())
    }

    /// The send stamp: `data.sentUnixNanos` when it is a number, else the
    /// annotation's.
    pub fn sent_ns(&self) -> Option<u64> {
        let number = |s: &Option<Cow<'_, str>>| s.as_deref().and_then(|s| s.parse().ok());
        number(&self.data_stamp).or_else(|| number(&self.annotation_stamp))
    }
}

/// Where a value sits, as far as the accounting cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The watch line itself.
    Line,
    /// The event's object (or a stored value).
    Object,
    /// The object's `metadata`.
    Metadata,
    /// The object's `data`.
    Data,
    /// `metadata.annotations`.
    Annotations,
    /// Anywhere else: checked and skipped.
    Other,
}

/// The fields read, each a bit of [`Scanner::seen`] (a field twice is an
/// error, as serde's derive makes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Type = 1,
    Object = 2,
    Metadata = 4,
    Data = 8,
    ResourceVersion = 16,
    Annotations = 32,
    DataStamp = 64,
    AnnotationStamp = 128,
}

impl Field {
    /// The field `key` names in `place`, if the scan reads it.
    fn of(place: Place, key: &[u8]) -> Option<Field> {
        match (place, key) {
            (Place::Line, b"type") => Some(Field::Type),
            (Place::Line, b"object") => Some(Field::Object),
            (Place::Object, b"metadata") => Some(Field::Metadata),
            (Place::Object, b"data") => Some(Field::Data),
            (Place::Metadata, b"resourceVersion") => Some(Field::ResourceVersion),
            (Place::Metadata, b"annotations") => Some(Field::Annotations),
            (Place::Data, b"sentUnixNanos") => Some(Field::DataStamp),
            (Place::Annotations, b"loadtest.watchd.dev/sent-unix-nanos") => {
                Some(Field::AnnotationStamp)
            }
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Field::Type => "type",
            Field::Object => "object",
            Field::Metadata => "metadata",
            Field::Data => "data",
            Field::ResourceVersion => "resourceVersion",
            Field::Annotations => "annotations",
            Field::DataStamp => "sentUnixNanos",
            Field::AnnotationStamp => "the sent-unix-nanos annotation",
        }
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    seen: u16,
    out: Scanned<'a>,
}

/// Scans one watch line.
pub fn scan_line(line: &[u8]) -> Result<Scanned<'_>, String> {
    let mut s = Scanner::new(line);
    s.top(Place::Line)?;
    if s.seen & Field::Type as u16 == 0 {
        return Err("missing field `type`".into());
    }
    if s.seen & Field::Object as u16 == 0 {
        return Err("missing field `object`".into());
    }
    Ok(s.out)
}

/// Scans one object as etcd stores it in JSON (no `type`).
pub fn scan_object(value: &[u8]) -> Result<Scanned<'_>, String> {
    let mut s = Scanner::new(value);
    s.top(Place::Object)?;
    Ok(s.out)
}

impl<'a> Scanner<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self {
            b,
            i: 0,
            seen: 0,
            out: Scanned::default(),
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// The whole input: one object, then only whitespace.
    fn top(&mut self, place: Place) -> Result<(), String> {
        self.ws();
        if self.peek() != Some(b'{') {
            return self.err("expected an object");
        }
        self.object(place, 1)?;
        self.ws();
        if self.i != self.b.len() {
            return self.err("trailing characters");
        }
        Ok(())
    }

    /// A string starting at the `"` under the cursor: the range of its
    /// content and whether it holds an escape; the cursor ends after it.
    fn string(&mut self) -> Result<(usize, usize, bool), String> {
        let start = self.i + 1;
        let mut at = start;
        let mut escaped = false;
        loop {
            let Some(off) = memchr::memchr2(b'"', b'\\', &self.b[at..]) else {
                self.i = self.b.len();
                return self.err("unterminated string");
            };
            at += off;
            if self.b[at] == b'"' {
                self.i = at + 1;
                return Ok((start, at, escaped));
            }
            escaped = true;
            match self.b.get(at + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => at += 2,
                Some(b'u') => {
                    let hex = self.b.get(at + 2..at + 6);
                    if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                        self.i = at;
                        return self.err("bad \\u escape");
                    }
                    at += 6;
                }
                _ => {
                    self.i = at;
                    return self.err("bad escape");
                }
            }
        }
    }

    /// The text of a string's content (unescaped only when it holds an
    /// escape).
    fn text(&self, (start, end, escaped): (usize, usize, bool)) -> Result<Cow<'a, str>, String> {
        let b: &'a [u8] = self.b;
        if !escaped {
            return std::str::from_utf8(&b[start..end])
                .map(Cow::Borrowed)
                .map_err(|e| format!("string at byte {start}: {e}"));
        }
        // Rare: let serde_json undo the escapes (surrogate pairs included).
        serde_json::from_slice::<String>(&b[start - 1..end + 1])
            .map(Cow::Owned)
            .map_err(|e| format!("string at byte {start}: {e}"))
    }

    /// An object starting at the `{` under the cursor.
    fn object(&mut self, place: Place, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return self.err("nested too deep");
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return self.err("expected a key");
            }
            let key = self.string()?;
            let field = if place == Place::Other {
                None
            } else if key.2 {
                Field::of(place, self.text(key)?.as_bytes())
            } else {
                Field::of(place, &self.b[key.0..key.1])
            };
            self.ws();
            if self.peek() != Some(b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            self.ws();
            match field {
                None => self.value(depth)?,
                Some(f) => self.field(f, depth)?,
            }
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    /// The value of a field the scan reads.
    fn field(&mut self, f: Field, depth: usize) -> Result<(), String> {
        if self.seen & f as u16 != 0 {
            return self.err(&format!("duplicate field `{}`", f.name()));
        }
        self.seen |= f as u16;
        let c = self.peek();
        if c == Some(b'n') && !matches!(f, Field::Type | Field::Object) {
            // Optional: null is absent.
            return self.literal(b"null");
        }
        let nested = match f {
            Field::Object => Some(Place::Object),
            Field::Metadata => Some(Place::Metadata),
            Field::Data => Some(Place::Data),
            Field::Annotations => Some(Place::Annotations),
            Field::Type | Field::ResourceVersion | Field::DataStamp | Field::AnnotationStamp => {
                None
            }
        };
        if let Some(place) = nested {
            if c != Some(b'{') {
                return self.err(&format!("`{}` is not an object", f.name()));
            }
            return self.object(place, depth + 1);
        }
        if c != Some(b'"') {
            return self.err(&format!("`{}` is not a string", f.name()));
        }
        let s = self.string()?;
        let text = Some(self.text(s)?);
        match f {
            Field::Type => self.out.kind = text,
            Field::ResourceVersion => self.out.resource_version = text,
            Field::DataStamp => self.out.data_stamp = text,
            _ => self.out.annotation_stamp = text,
        }
        Ok(())
    }

    /// Any value, checked and skipped.
    fn value(&mut self, depth: usize) -> Result<(), String> {
        match self.peek() {
            Some(b'{') => self.object(Place::Other, depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.err("expected a value"),
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return self.err("nested too deep");
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value(depth)?;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), String> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            self.err("bad literal")
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<(), String> {
        let digits = |s: &mut Self| {
            let from = s.i;
            while s.peek().is_some_and(|c| c.is_ascii_digit()) {
                s.i += 1;
            }
            s.i > from
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return self.err("bad number"),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !digits(self) {
                return self.err("bad number");
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !digits(self) {
                return self.err("bad number");
            }
        }
        Ok(())
    }
}
