//! The values with custom Go marshalers: `metav1.Time` and `MicroTime`, `Duration`,
//! `resource.Quantity`, `intstr.IntOrString`, and the embedded JSON of
//! `runtime.RawExtension` and `metav1.FieldsV1`.

use super::render::{Ctx, R};
use super::TranscodeError;
use crate::codec::gojson::{self, Sink};
use crate::codec::wire::{Reader, Val};

impl<'a, O: Sink> Ctx<'a, O> {
    /// The seconds and microseconds of a Time/MicroTime, or None when it is Go's zero time.
    /// `Time` drops nanoseconds on decode; `MicroTime` truncates them to microseconds.
    pub(super) fn decode_time(&mut self, b: &[u8], micro: bool) -> R<Option<(i64, u32)>> {
        if b.is_empty() {
            return Ok(None);
        }
        let (mut secs, mut nanos) = (0i64, 0i32);
        let mut r = Reader::new(b);
        while !r.done() {
            let (num, wt) = r.tag()?;
            match (num, r.value(wt)?) {
                (1, Val::Varint(v)) => secs = v as i64,
                (2, Val::Varint(v)) => nanos = v as i32,
                (1 | 2, _) => {
                    return Err(
                        TranscodeError::Invalid("Timestamp field with wrong wire type").into(),
                    )
                }
                _ => self.unknown = self.unknown.saturating_add(1),
            }
        }
        let mut n = if micro {
            i64::from(nanos) - i64::from(nanos) % 1000
        } else {
            0
        };
        // time.Unix normalizes nanoseconds outside [0, 1e9).
        secs = secs.wrapping_add(n.div_euclid(1_000_000_000));
        n = n.rem_euclid(1_000_000_000);
        if secs == gojson::ZERO_TIME_UNIX && n == 0 {
            return Ok(None);
        }
        Ok(Some((secs, (n / 1000) as u32)))
    }

    /// Writes a decoded time: `null` for Go's zero time, else the RFC 3339 string.
    pub(super) fn time(&mut self, t: Option<(i64, u32)>, micro: bool) {
        match t {
            None => self.out.extend_from_slice(b"null"),
            Some((secs, us)) => gojson::timestamp(&mut self.out, secs, micro.then_some(us)),
        }
    }

    /// Reads field 1 of a small special message; other fields are counted as unknown.
    pub(super) fn field1(&mut self, b: &'a [u8]) -> R<Option<Val<'a>>> {
        let mut r = Reader::new(b);
        let mut out = None;
        while !r.done() {
            let (num, wt) = r.tag()?;
            let v = r.value(wt)?;
            if num == 1 {
                out = Some(v);
            } else {
                self.unknown = self.unknown.saturating_add(1);
            }
        }
        Ok(out)
    }

    pub(super) fn duration(&mut self, b: &'a [u8]) -> R<()> {
        let nanos = match self.field1(b)? {
            None => 0,
            Some(Val::Varint(x)) => x as i64,
            Some(_) => {
                return Err(TranscodeError::Invalid("Duration with the wrong wire type").into())
            }
        };
        gojson::duration(&mut self.out, nanos);
        Ok(())
    }

    /// A Quantity is stored as its canonical string (what `Quantity.String()` wrote), which
    /// is also its JSON form; a missing string is the zero quantity, `"0"`.
    pub(super) fn quantity(&mut self, b: &'a [u8]) -> R<()> {
        match self.field1(b)? {
            None => self.out.extend_from_slice(b"\"0\""),
            Some(Val::Bytes(s)) if !s.is_empty() => gojson::string(&mut self.out, s),
            Some(_) => {
                return Err(
                    TranscodeError::Invalid("Quantity that is not a quantity string").into(),
                )
            }
        }
        Ok(())
    }

    pub(super) fn int_or_string(&mut self, b: &'a [u8]) -> R<()> {
        let (mut ty, mut int, mut s): (u64, i32, &[u8]) = (0, 0, &[]);
        let mut r = Reader::new(b);
        while !r.done() {
            let (num, wt) = r.tag()?;
            match (num, r.value(wt)?) {
                (1, Val::Varint(x)) => ty = x,
                (2, Val::Varint(x)) => int = x as i32,
                (3, Val::Bytes(x)) => s = x,
                (1..=3, _) => {
                    return Err(
                        TranscodeError::Invalid("IntOrString with the wrong wire type").into(),
                    )
                }
                _ => self.unknown = self.unknown.saturating_add(1),
            }
        }
        match ty {
            0 => gojson::int(&mut self.out, i64::from(int)),
            1 => gojson::string(&mut self.out, s),
            // Go's MarshalJSON fails on any other type.
            _ => return Err(TranscodeError::Invalid("IntOrString of unknown type").into()),
        }
        Ok(())
    }

    /// RawExtension (field 1 `raw`) and FieldsV1 (field 1 `Raw`): nil is `null`, JSON is
    /// embedded compacted; CBOR and anything else fail, as they do in Go.
    pub(super) fn raw_json(&mut self, b: &'a [u8], fields_v1: bool) -> R<()> {
        let raw = match self.field1(b)? {
            None => {
                self.out.extend_from_slice(b"null");
                return Ok(());
            }
            Some(Val::Bytes(raw)) => raw,
            Some(_) => {
                return Err(
                    TranscodeError::Invalid("embedded JSON with the wrong wire type").into(),
                )
            }
        };
        let cbor = if fields_v1 {
            matches!(raw.first(), Some(0xf6 | 0xa0..=0xbf | 0xc6..=0xdb))
        } else {
            raw.starts_with(b"\xd9\xd9\xf7")
        };
        if cbor {
            return Err(TranscodeError::Invalid("embedded CBOR is not supported").into());
        }
        let json_start = matches!(
            raw.first(),
            Some(
                b'\t' | b'\r' | b'\n' | b' ' | b'{' | b'[' | b'n' | b't' | b'f' | b'"' | b'-' | b'0'
                    ..=b'9'
            )
        );
        if !fields_v1 && !json_start {
            return Err(TranscodeError::Invalid("embedded object is not JSON").into());
        }
        self.embed_json(raw)
    }

    /// Writes `raw`, which must be one JSON value, compacted and HTML-escaped: what Go's
    /// encoder does with the bytes a `MarshalJSON` returns (it fails on invalid JSON too).
    pub(super) fn embed_json(&mut self, raw: &[u8]) -> R<()> {
        let ok = match self.out.vec() {
            Some(out) => super::rawjson::embed(out, raw, &mut self.json_stack),
            // Validating: the compactor is the validator, so it writes to a scratch buffer
            // (reused: no allocation per field once it has grown).
            None => {
                self.scratch.clear();
                super::rawjson::embed(&mut self.scratch, raw, &mut self.json_stack)
            }
        };
        if !ok {
            return Err(TranscodeError::Invalid("embedded JSON is invalid").into());
        }
        Ok(())
    }
}
