//! Protobuf wire reading: tags, varints, length-delimited values. Every read is bounds
//! checked; malformed input is a [`TranscodeError`], never a panic.

use super::TranscodeError;

/// A wire-level error: small and `Copy`, so the hot reading paths stay cheap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The bytes end inside a field.
    Truncated,
    /// A varint longer than 10 bytes.
    Varint,
    /// Field number 0 or out of range.
    FieldNumber,
    /// Groups or wire types 6 and 7.
    WireType(u8),
}

impl From<WireError> for TranscodeError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated => TranscodeError::Truncated,
            WireError::Varint => TranscodeError::Varint,
            WireError::FieldNumber => TranscodeError::FieldNumber,
            WireError::WireType(w) => TranscodeError::WireType(w),
        }
    }
}

impl From<WireError> for Box<TranscodeError> {
    fn from(e: WireError) -> Self {
        Box::new(e.into())
    }
}

/// Wire type 0.
pub const VARINT: u8 = 0;
/// Wire type 1.
pub const FIXED64: u8 = 1;
/// Wire type 2.
pub const BYTES: u8 = 2;
/// Wire type 5.
pub const FIXED32: u8 = 5;

/// A field value as it sits on the wire.
#[derive(Debug, Clone, Copy)]
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
}

/// Reads the `runtime.Unknown` envelope of a stored value (after the `k8s\0` magic):
/// (apiVersion, kind, raw, contentEncoding, contentType). Strings are returned as bytes.
pub type EnvelopeParts<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a [u8], &'a [u8]);

/// Parses a `runtime.Unknown` message (without the magic).
pub fn parse_unknown(buf: &[u8]) -> Result<EnvelopeParts<'_>, TranscodeError> {
    let (mut api_version, mut kind, mut raw, mut enc, mut ct): EnvelopeParts<'_> =
        (&[], &[], &[], &[], &[]);
    let mut r = Reader::new(buf);
    while !r.done() {
        let (num, wt) = r.tag()?;
        match (num, r.value(wt)?) {
            (1, Val::Bytes(tm)) => {
                let mut t = Reader::new(tm);
                while !t.done() {
                    let (n, w) = t.tag()?;
                    match (n, t.value(w)?) {
                        (1, Val::Bytes(v)) => api_version = v,
                        (2, Val::Bytes(v)) => kind = v,
                        _ => {}
                    }
                }
            }
            (2, Val::Bytes(v)) => raw = v,
            (3, Val::Bytes(v)) => enc = v,
            (4, Val::Bytes(v)) => ct = v,
            _ => {}
        }
    }
    Ok((api_version, kind, raw, enc, ct))
}
