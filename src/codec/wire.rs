//! The protobuf wire format, read and written: tags, varints, length-delimited values.
//! The one home of both directions for all of watchd (ingestion, the transcoder, the
//! protobuf frontends, the load generator).
//!
//! Reading is a cursor ([`Reader`]) with fast paths for one- and two-byte varints (tags,
//! lengths and most values); every read is bounds checked, and malformed input is a
//! [`WireError`], never a panic. Writing appends to a `Vec<u8>`; the `*_size` functions
//! tell how many bytes a field will take, so a frame's header can be written before its
//! body, which then follows as a separate shared segment.

use std::ops::Range;

/// Why protobuf bytes could not be read. Small and `Copy`, so the hot reading paths stay
/// cheap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The bytes end inside a field.
    #[error("truncated protobuf")]
    Truncated,
    /// A varint longer than 10 bytes.
    #[error("malformed varint")]
    Varint,
    /// Field number 0 or out of range.
    #[error("invalid protobuf field number")]
    FieldNumber,
    /// Groups (wire types 3 and 4) or wire types 6 and 7.
    #[error("unsupported protobuf wire type {0}")]
    WireType(u8),
    /// A string field that is not UTF-8.
    #[error("string field is not UTF-8")]
    Utf8,
    /// A stored value without the `k8s\0` magic.
    #[error("missing k8s protobuf magic")]
    NoMagic,
    /// A value of 4 GiB or more (etcd holds values of at most a few MiB).
    #[error("protobuf value of 4 GiB or more")]
    TooLarge,
}

/// Wire type 0.
pub const VARINT: u8 = 0;
/// Wire type 1.
pub const FIXED64: u8 = 1;
/// Wire type 2: bytes, strings and nested messages.
pub const BYTES: u8 = 2;
/// Wire type 5.
pub const FIXED32: u8 = 5;

/// A field value as it sits on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

impl Val<'_> {
    /// The wire type of this value.
    pub fn wire_type(&self) -> u8 {
        match self {
            Val::Varint(_) => VARINT,
            Val::Fixed64(_) => FIXED64,
            Val::Bytes(_) => BYTES,
            Val::Fixed32(_) => FIXED32,
        }
    }
}

/// A cursor over the fields of one message.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Reads `buf` from byte offset `pos`.
    #[inline]
    pub fn at(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }

    /// Current byte offset.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether all bytes were read.
    #[inline]
    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Reads one varint (at most 10 bytes).
    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64, WireError> {
        // Fast paths: one and two bytes (tags, lengths and most values).
        match self.buf.get(self.pos..self.pos + 2) {
            Some(&[b0, _]) if b0 < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b0))
            }
            Some(&[b0, b1]) if b1 < 0x80 => {
                self.pos += 2;
                Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7)
            }
            _ => self.varint_slow(),
        }
    }

    #[cold]
    #[inline(never)]
    fn varint_slow(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in 0..10 {
            let b = *self.buf.get(self.pos).ok_or(WireError::Truncated)?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << (7 * shift);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(WireError::Varint)
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        let out = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    /// Reads the next tag: (field number, wire type). Groups and wire types 6/7 are errors,
    /// as is field number 0.
    #[inline(always)]
    pub fn tag(&mut self) -> Result<(u32, u8), WireError> {
        let tag = self.varint()?;
        let wt = (tag & 7) as u8;
        let num = tag >> 3;
        if num == 0 || num > u64::from(u32::MAX >> 3) {
            return Err(WireError::FieldNumber);
        }
        if !matches!(wt, VARINT | FIXED64 | BYTES | FIXED32) {
            return Err(WireError::WireType(wt));
        }
        Ok((num as u32, wt))
    }

    /// Reads a value of wire type `wt` (as returned by [`Reader::tag`]).
    #[inline(always)]
    pub fn value(&mut self, wt: u8) -> Result<Val<'a>, WireError> {
        Ok(match wt {
            VARINT => Val::Varint(self.varint()?),
            FIXED64 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Val::Fixed64(u64::from_le_bytes(a))
            }
            BYTES => {
                let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
                Val::Bytes(self.take(len)?)
            }
            FIXED32 => {
                let b = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                Val::Fixed32(u32::from_le_bytes(a))
            }
            other => return Err(WireError::WireType(other)),
        })
    }

    /// Skips a value of wire type `wt`.
    #[inline]
    pub fn skip(&mut self, wt: u8) -> Result<(), WireError> {
        match wt {
            VARINT => self.varint().map(|_| ()),
            FIXED64 => self.take(8).map(|_| ()),
            BYTES => {
                let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
                self.take(len).map(|_| ())
            }
            FIXED32 => self.take(4).map(|_| ()),
            other => Err(WireError::WireType(other)),
        }
    }

    /// Reads the next whole field: (field number, value).
    #[inline]
    pub fn field(&mut self) -> Result<(u32, Val<'a>), WireError> {
        let (num, wt) = self.tag()?;
        Ok((num, self.value(wt)?))
    }
}

/// The fields of one message in wire order, for code that reads a few fields and skips
/// the rest. The first error ends the iteration.
pub struct Fields<'a> {
    reader: Reader<'a>,
    failed: bool,
}

/// Iterates the fields of `buf`: (field number, value).
pub fn fields(buf: &[u8]) -> Fields<'_> {
    Fields {
        reader: Reader::new(buf),
        failed: false,
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Val<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.reader.done() {
            return None;
        }
        let item = self.reader.field();
        self.failed = item.is_err();
        Some(item)
    }
}

/// The last length-delimited field `n` of `msg` (a singular field's value, as protobuf
/// decoders read it); None if absent or unreadable.
pub fn last_bytes(msg: &[u8], n: u32) -> Option<&[u8]> {
    let mut out = None;
    for f in fields(msg) {
        match f.ok()? {
            (k, Val::Bytes(b)) if k == n => out = Some(b),
            _ => {}
        }
    }
    out
}

/// A string field's text.
pub fn utf8(b: &[u8]) -> Result<&str, WireError> {
    std::str::from_utf8(b).map_err(|_| WireError::Utf8)
}

/// One top-level field of a message as byte offsets: the whole field and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Field number.
    pub number: u32,
    /// Wire type.
    pub wire: u8,
    /// Tag, length and value.
    pub field: Range<usize>,
    /// The value (for length-delimited fields, without the length).
    pub value: Range<usize>,
}

/// The top-level fields of a message as offsets, in wire order: for rewriting one field
/// and copying every other byte as it is.
pub fn spans(buf: &[u8]) -> Result<Vec<Span>, WireError> {
    span_iter(buf).collect()
}

/// [`spans`], one at a time (nothing allocated); after an error, nothing more.
pub fn span_iter(buf: &[u8]) -> impl Iterator<Item = Result<Span, WireError>> + '_ {
    let mut r = Reader::new(buf);
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || r.done() {
            return None;
        }
        let span = (|| {
            let start = r.pos();
            let (number, wire) = r.tag()?;
            let len_start = r.pos();
            let value = r.value(wire)?;
            let value_start = match value {
                Val::Bytes(b) => r.pos() - b.len(),
                _ => len_start,
            };
            Ok(Span {
                number,
                wire,
                field: start..r.pos(),
                value: value_start..r.pos(),
            })
        })();
        failed = span.is_err();
        Some(span)
    })
}

/// Writes a varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes a field tag.
#[inline]
pub fn put_tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// The bytes a varint of `v` takes.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes the tag and length of a length-delimited field whose `len` bytes of value
/// follow elsewhere (a separate segment).
pub fn put_len_header(out: &mut Vec<u8>, field: u32, len: usize) {
    put_tag(out, field, BYTES);
    put_varint(out, len as u64);
}

/// The bytes a length-delimited field with a value of `len` bytes takes.
pub fn len_field_size(field: u32, len: usize) -> usize {
    varint_len((u64::from(field) << 3) | u64::from(BYTES)) + varint_len(len as u64) + len
}

/// Writes a length-delimited field.
pub fn put_len(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    put_len_header(out, field, value.len());
    out.extend_from_slice(value);
}

/// Writes a length-delimited field whose value `body` writes.
pub fn put_nested<E>(
    out: &mut Vec<u8>,
    field: u32,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let mut buf = Vec::new();
    body(&mut buf)?;
    put_len(out, field, &buf);
    Ok(())
}

/// Writes a varint field.
pub fn put_uint(out: &mut Vec<u8>, field: u32, value: u64) {
    put_tag(out, field, VARINT);
    put_varint(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_what_is_written() {
        for len in [0usize, 1, 127, 128, 16_383, 16_384, 3_000_000] {
            let mut v = Vec::new();
            put_varint(&mut v, len as u64);
            assert_eq!(varint_len(len as u64), v.len(), "{len}");
            assert_eq!(Reader::new(&v).varint(), Ok(len as u64));
            for field in [1u32, 2, 15, 16, 300] {
                let mut f = Vec::new();
                put_len_header(&mut f, field, len);
                assert_eq!(len_field_size(field, len), f.len() + len, "{field} {len}");
            }
        }
        let mut v = Vec::new();
        put_varint(&mut v, u64::MAX);
        assert_eq!(v.len(), varint_len(u64::MAX));
        assert_eq!(Reader::new(&v).varint(), Ok(u64::MAX));
    }

    #[test]
    fn fields_and_spans_read_what_was_written() {
        let mut m = Vec::new();
        put_len(&mut m, 1, b"name");
        put_uint(&mut m, 7, 300);
        put_len(&mut m, 1, b"last");
        let got: Vec<_> = fields(&m).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            [
                (1, Val::Bytes(b"name")),
                (7, Val::Varint(300)),
                (1, Val::Bytes(b"last"))
            ]
        );
        assert_eq!(last_bytes(&m, 1), Some(&b"last"[..]));
        let s = spans(&m).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(&m[s[0].value.clone()], b"name");
        assert_eq!(&m[s[1].field.clone()], &[7 << 3, 0xac, 0x02]);
        assert_eq!(s[2].field.end, m.len());
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert_eq!(
            Reader::new(&[0x0a, 0x05, 0x01]).field(),
            Err(WireError::Truncated)
        );
        assert_eq!(Reader::new(&[0x0b]).tag(), Err(WireError::WireType(3)));
        assert_eq!(
            Reader::new(&[0x02, 0x00]).tag(),
            Err(WireError::FieldNumber)
        );
        assert_eq!(Reader::new(&[0xff; 11]).varint(), Err(WireError::Varint));
        assert_eq!(spans(&[0x0a, 0x05]), Err(WireError::Truncated));
        assert_eq!(fields(&[0x0a, 0x05, 1]).count(), 1);
        let mut seed = 0x9e37_79b9_u32;
        for n in 0..2000 {
            let mut v = Vec::new();
            for _ in 0..(n % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                v.push(seed as u8);
            }
            let _ = spans(&v);
            let _ = fields(&v).count();
        }
    }
}
