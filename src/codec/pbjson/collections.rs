//! Repeated fields and maps for the renderer: elements in wire order (packed scalars
//! unpacked), map entries sorted by key as Go sorts map keys, the last entry of a repeated
//! key winning. Entries are collected on the context's reusable stack.

use super::render::{wire_of, Ctx, Entry, Meta, Slot, R};
use super::schema::MSGS;
use super::types::*;
use super::TranscodeError;
use crate::codec::gojson::{self, Sink};
use crate::codec::wire::{Reader, Val, BYTES, FIXED32, FIXED64, VARINT};

/// A default value for `kind` as a map value missing from its entry (Go decodes into a
/// fresh zero value, so e.g. `[]byte{}` and an empty struct, not nil).
fn empty_val(kind: Kind) -> Val<'static> {
    match wire_of(kind) {
        VARINT => Val::Varint(0),
        FIXED64 => Val::Fixed64(0),
        FIXED32 => Val::Fixed32(0),
        _ => Val::Bytes(&[]),
    }
}

impl<'a, O: Sink> Ctx<'a, O> {
    /// Writes one or more elements of a repeated field from one wire occurrence (packed
    /// scalars hold several); `before` elements were already written. Returns how many.
    pub(super) fn element(
        &mut self,
        msg: &'static Msg,
        f: &'static Field,
        v: Val<'a>,
        depth: u32,
        before: u32,
    ) -> R<u32> {
        let want = wire_of(f.kind);
        if let (Val::Bytes(packed), true) = (v, want != BYTES) {
            let mut r = Reader::new(packed);
            let mut n = 0;
            while !r.done() {
                let e = r.value(want)?;
                if before + n > 0 {
                    self.out.push(b',');
                }
                self.value(f.kind, f.msg, e, depth, Meta::None)?;
                n += 1;
            }
            return Ok(n);
        }
        if v.wire_type() != want {
            return Err(Self::wrong_wire(msg, f, v.wire_type()));
        }
        if before > 0 {
            self.out.push(b',');
        }
        self.value(f.kind, f.msg, v, depth, Meta::None)?;
        Ok(1)
    }

    pub(super) fn repeated(
        &mut self,
        msg: &'static Msg,
        f: &'static Field,
        slot: Slot<'a>,
        buf: &'a [u8],
        depth: u32,
    ) -> R<u32> {
        self.out.push(b'[');
        if slot.count == 1 {
            let n = self.element(msg, f, slot.last, depth, 0)?;
            self.out.push(b']');
            return Ok(n);
        }
        let mut r = Reader::at(buf, slot.first);
        let (mut seen, mut n) = (0u32, 0u32);
        while seen < slot.count {
            let (num, wt) = r.tag()?;
            if num != u32::from(f.num) {
                r.skip(wt)?;
                continue;
            }
            seen += 1;
            let v = r.value(wt)?;
            n += self.element(msg, f, v, depth, n)?;
        }
        self.out.push(b']');
        Ok(n)
    }

    /// Writes a map as a JSON object with keys sorted (Go sorts map keys) and the last
    /// entry winning for a repeated key. Returns the number of keys.
    pub(super) fn map(
        &mut self,
        msg: &'static Msg,
        f: &'static Field,
        slot: Slot<'a>,
        buf: &'a [u8],
        depth: u32,
    ) -> R<u32> {
        let entry_msg = &MSGS[f.msg as usize];
        let [key_f, val_f] = entry_msg.fields else {
            return Err(TranscodeError::Invalid("map entry schema").into());
        };
        let base = self.entries.len();
        let mut r = Reader::at(buf, slot.first);
        let mut seen = 0u32;
        while seen < slot.count {
            let (num, wt) = r.tag()?;
            if num != u32::from(f.num) {
                r.skip(wt)?;
                continue;
            }
            let Val::Bytes(entry) = r.value(wt)? else {
                return Err(Self::wrong_wire(msg, f, wt));
            };
            let mut e = Entry {
                key: &[],
                val: None,
                seq: seen,
            };
            seen += 1;
            let mut er = Reader::new(entry);
            while !er.done() {
                let (n, w) = er.tag()?;
                let v = er.value(w)?;
                match n {
                    1 => match v {
                        Val::Bytes(k) => e.key = k,
                        _ => return Err(Self::wrong_wire(entry_msg, key_f, w)),
                    },
                    2 => e.val = Some(v),
                    _ => self.unknown = self.unknown.saturating_add(1),
                }
            }
            self.entries.push(e);
        }
        let list = &mut self.entries[base..];
        if !list.windows(2).all(|w| w[0].key < w[1].key) {
            list.sort_unstable_by(|a, b| a.key.cmp(b.key).then(a.seq.cmp(&b.seq)));
        }
        self.out.push(b'{');
        let end = self.entries.len();
        let mut written = 0u32;
        for i in base..end {
            let e = self.entries[i];
            if i + 1 < end && self.entries[i + 1].key == e.key {
                continue; // a later entry with the same key wins
            }
            if written > 0 {
                self.out.push(b',');
            }
            written += 1;
            gojson::string(&mut self.out, e.key);
            self.out.push(b':');
            let v = e.val.unwrap_or_else(|| empty_val(val_f.kind));
            if v.wire_type() != wire_of(val_f.kind) {
                return Err(Self::wrong_wire(entry_msg, val_f, v.wire_type()));
            }
            self.value(val_f.kind, val_f.msg, v, depth, Meta::None)?;
        }
        self.out.push(b'}');
        self.entries.truncate(base);
        Ok(written)
    }
}
