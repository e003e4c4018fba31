//! The streaming renderer: walks the protobuf bytes of one object once per message level
//! and writes JSON straight into the output buffer.
//!
//! For each message it first records where each known field sits (a slot per schema
//! field, kept on a reusable stack), then writes every schema field in Go struct order,
//! decoding values in place. So fields missing on the wire still get Go's zero-value
//! rendering, and wire order does not matter. Repeated fields and maps are written by
//! `collections.rs`, map entries collected on a second reusable stack.

use super::schema::MSGS;
use super::types::*;
use super::{TranscodeError, MAX_DEPTH};

/// The deepest a field absent from the wire nests when rendered as its zero value: a
/// non-pointer struct renders its own fields' zero values, and so on (tested against the
/// schema: `zero_values_nest_shallowly`).
pub(super) const ZERO_NESTING_MAX: u32 = 16;
use crate::codec::gojson::{self, Sink};
use crate::codec::json::RvSpan;
use crate::codec::wire::{Reader, Val, BYTES, FIXED32, FIXED64, VARINT};

/// Internal results: errors are boxed so the hot paths pass one word around.
pub(super) type R<T> = Result<T, Box<TranscodeError>>;

/// Where a field occurs in its message: the first tag's offset, the count, and the last
/// value (the one a singular field takes).
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot<'a> {
    pub(super) first: usize,
    pub(super) count: u32,
    pub(super) last: Val<'a>,
}

const NO_SLOT: Slot<'static> = Slot {
    first: 0,
    count: 0,
    last: Val::Varint(0),
};

/// One map entry: key, value (if on the wire) and position, for last-wins.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry<'a> {
    pub(super) key: &'a [u8],
    pub(super) val: Option<Val<'a>>,
    pub(super) seq: u32,
}

/// Whether a message is the root object or its metadata (for the resourceVersion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Meta {
    /// Any other message.
    None,
    /// The root object: its `metadata` field gets [`Meta::Object`].
    Root,
    /// The root's `metadata`: its `resourceVersion` is overridden and located.
    Object,
}

/// Rendering state for one object; `O` is where the JSON goes ([`Discard`] validates).
pub(super) struct Ctx<'a, O: Sink = Vec<u8>> {
    /// The JSON written so far.
    pub out: O,
    slots: Vec<Slot<'a>>,
    pub(super) entries: Vec<Entry<'a>>,
    pub(super) json_stack: Vec<u8>,
    /// Where embedded JSON is compacted when validating (output discarded).
    pub(super) scratch: Vec<u8>,
    /// Fields skipped because the schema does not know their number.
    pub unknown: u32,
    rv: Option<&'a str>,
    /// Where the resourceVersion value was written.
    pub rv_span: RvSpan,
}

pub(super) fn wire_of(kind: Kind) -> u8 {
    match kind {
        Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 => VARINT,
        Kind::Double => FIXED64,
        Kind::Float => FIXED32,
        _ => BYTES,
    }
}

/// Go's `omitempty` test for a present scalar value.
fn scalar_is_empty(kind: Kind, v: &Val<'_>) -> bool {
    match (kind, v) {
        (Kind::String | Kind::Bytes, Val::Bytes(b)) => b.is_empty(),
        (Kind::Int32 | Kind::Uint32, Val::Varint(x)) => *x as u32 == 0,
        (Kind::Bool | Kind::Int64 | Kind::Uint64, Val::Varint(x)) => *x == 0,
        (Kind::Double, Val::Fixed64(x)) => f64::from_bits(*x) == 0.0,
        (Kind::Float, Val::Fixed32(x)) => f32::from_bits(*x) == 0.0,
        _ => false,
    }
}

impl<'a, O: Sink> Ctx<'a, O> {
    /// A fresh context writing to `out`; `rv` overrides `metadata.resourceVersion` when set.
    pub fn new(out: O, rv: Option<&'a str>) -> Self {
        Self::with_slots(out, rv, 64)
    }

    /// [`Ctx::new`] with room for `slots` fields of the messages being written (a
    /// message's fields take a slot each while it is written; the room grows as needed).
    pub fn with_slots(out: O, rv: Option<&'a str>, slots: usize) -> Self {
        Ctx {
            out,
            slots: Vec::with_capacity(slots),
            entries: Vec::new(),
            json_stack: Vec::new(),
            scratch: Vec::new(),
            unknown: 0,
            rv,
            rv_span: RvSpan::default(),
        }
    }

    /// Starts a member: `key` is `,"name":`, written without the comma when first.
    #[inline]
    fn member(&mut self, first: &mut bool, key: &'static str) {
        let key = key.as_bytes();
        self.out
            .extend_from_slice(if *first { &key[1..] } else { key });
        *first = false;
    }

    /// Writes `"kind"` and `"apiVersion"` (omitted when empty, as TypeMeta's omitempty).
    pub fn type_meta(&mut self, first: &mut bool, api_version: &str, kind: &str) {
        if !kind.is_empty() {
            self.member(first, ",\"kind\":");
            gojson::string(&mut self.out, kind.as_bytes());
        }
        if !api_version.is_empty() {
            self.member(first, ",\"apiVersion\":");
            gojson::string(&mut self.out, api_version.as_bytes());
        }
    }

    /// Writes the members of `msg` (no braces) from its wire bytes `buf`.
    pub fn members(
        &mut self,
        msg: &'static Msg,
        buf: &'a [u8],
        depth: u32,
        first: &mut bool,
        meta: Meta,
    ) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(TranscodeError::TooDeep.into());
        }
        let n = msg.fields.len();
        let base = self.slots.len();
        self.slots.resize(base + n, NO_SLOT);
        let mut r = Reader::new(buf);
        while !r.done() {
            let pos = r.pos();
            let (num, wt) = r.tag()?;
            match msg.index_of(num) {
                Some(i) => {
                    let v = r.value(wt)?;
                    let s = &mut self.slots[base + i];
                    if s.count == 0 {
                        s.first = pos;
                    }
                    s.last = v;
                    s.count += 1;
                }
                None => {
                    r.skip(wt)?;
                    self.unknown = self.unknown.saturating_add(1);
                }
            }
        }
        // A field absent from the wire renders as its zero value, which cannot fail but
        // for nesting too deep (zero structs nest at most ZERO_NESTING_MAX levels): a
        // validating pass far enough from the limit skips those.
        let skip_absent = O::DISCARDS && depth + ZERO_NESTING_MAX <= MAX_DEPTH;
        for (i, f) in msg.fields.iter().enumerate() {
            let slot = self.slots[base + i];
            if skip_absent && slot.count == 0 {
                continue;
            }
            self.field(msg, f, slot, buf, depth, first, meta)?;
        }
        self.slots.truncate(base);
        Ok(())
    }

    /// Writes one field of `msg` as a member (`"name":value`, or nothing where Go omits
    /// it), read from the message bytes `buf`: what [`Ctx::members`] writes for it when
    /// `msg` is rendered as `meta` (the root's `metadata` gets its resourceVersion).
    pub fn one_field(
        &mut self,
        msg: &'static Msg,
        f: &'static Field,
        buf: &'a [u8],
        meta: Meta,
    ) -> R<()> {
        let mut slot = NO_SLOT;
        let mut r = Reader::new(buf);
        while !r.done() {
            let pos = r.pos();
            let (num, wt) = r.tag()?;
            if num != u32::from(f.num) {
                r.skip(wt)?;
                continue;
            }
            let v = r.value(wt)?;
            if slot.count == 0 {
                slot.first = pos;
            }
            slot.last = v;
            slot.count += 1;
        }
        let mut first = true;
        self.field(msg, f, slot, buf, 0, &mut first, meta)
    }

    #[cold]
    pub(super) fn wrong_wire(msg: &'static Msg, f: &'static Field, wt: u8) -> Box<TranscodeError> {
        Box::new(TranscodeError::WrongWireType {
            msg: msg.name,
            field: f.name(),
            wire: wt,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn field(
        &mut self,
        msg: &'static Msg,
        f: &'static Field,
        slot: Slot<'a>,
        buf: &'a [u8],
        depth: u32,
        first: &mut bool,
        meta: Meta,
    ) -> R<()> {
        let flags = f.flags;
        if flags & HIDDEN != 0 {
            return Ok(());
        }
        if meta == Meta::Object && f.name() == "resourceVersion" && f.kind == Kind::String {
            return self.resource_version(msg, f, slot, first);
        }
        // The last occurrence of a singular field wins, as in Go's generated decoders.
        let last = if slot.count > 0 {
            Some(slot.last)
        } else {
            None
        };
        if flags & INLINE != 0 {
            let inner = match last {
                Some(Val::Bytes(b)) => b,
                None => &[],
                Some(v) => return Err(Self::wrong_wire(msg, f, v.wire_type())),
            };
            return self.members(&MSGS[f.msg as usize], inner, depth + 1, first, Meta::None);
        }
        let (mark, was_first) = (self.out.len(), *first);
        if flags & (REPEATED | MAP) != 0 {
            if slot.count > 0 {
                self.member(first, f.key);
                let written = if flags & MAP != 0 {
                    self.map(msg, f, slot, buf, depth)?
                } else {
                    self.repeated(msg, f, slot, buf, depth)?
                };
                if written > 0 {
                    return Ok(());
                }
                // Nothing decoded (e.g. an empty packed field): a nil slice, as in Go.
                self.out.truncate(mark);
                *first = was_first;
            }
            if flags & OMITEMPTY == 0 {
                self.member(first, f.key);
                self.out.extend_from_slice(b"null");
            }
            return Ok(());
        }
        let child = if meta == Meta::Root && f.name() == "metadata" {
            // Several ObjectMetas would be merged by Go's decoder but not by the wire-level
            // resourceVersion rewrite: kube-apiserver never writes this, so refuse it.
            if slot.count > 1 {
                return Err(TranscodeError::Invalid("object metadata repeated").into());
            }
            Meta::Object
        } else {
            Meta::None
        };
        let Some(v) = last else {
            return self.absent(f, depth, first, child);
        };
        if v.wire_type() != wire_of(f.kind) {
            return Err(Self::wrong_wire(msg, f, v.wire_type()));
        }
        if flags & POINTER == 0 && flags & OMITEMPTY != 0 && scalar_is_empty(f.kind, &v) {
            return Ok(());
        }
        if matches!(f.kind, Kind::Time | Kind::MicroTime) {
            let Val::Bytes(b) = v else {
                return Err(Self::wrong_wire(msg, f, v.wire_type()));
            };
            let t = self.decode_time(b, f.kind == Kind::MicroTime)?;
            if t.is_none() && flags & OMITZERO != 0 {
                return Ok(());
            }
            self.member(first, f.key);
            self.time(t, f.kind == Kind::MicroTime);
            return Ok(());
        }
        self.member(first, f.key);
        let nonempty = self.value(f.kind, f.msg, v, depth, child)?;
        if !nonempty && flags & OMITEMPTY != 0 && flags & POINTER == 0 {
            // An empty list wrapper (a non-nil, empty named slice) under omitempty.
            self.out.truncate(mark);
            *first = was_first;
        }
        Ok(())
    }

    /// Renders a singular field that is not on the wire: Go's zero value, or nothing.
    fn absent(&mut self, f: &'static Field, depth: u32, first: &mut bool, meta: Meta) -> R<()> {
        let flags = f.flags;
        let omit = flags & OMITEMPTY != 0;
        if flags & POINTER != 0 {
            if !omit && flags & OMITZERO == 0 {
                self.member(first, f.key);
                self.out.extend_from_slice(b"null");
            }
            return Ok(());
        }
        let zero: &[u8] = match f.kind {
            Kind::String if !omit => b"\"\"",
            Kind::Bool if !omit => b"false",
            Kind::Int32
            | Kind::Int64
            | Kind::Uint32
            | Kind::Uint64
            | Kind::Double
            | Kind::Float
                if !omit =>
            {
                b"0"
            }
            Kind::String
            | Kind::Bool
            | Kind::Int32
            | Kind::Int64
            | Kind::Uint32
            | Kind::Uint64
            | Kind::Double
            | Kind::Float => return Ok(()),
            Kind::Bytes if omit => return Ok(()),
            Kind::Bytes => b"null",
            Kind::Time | Kind::MicroTime if flags & OMITZERO != 0 => return Ok(()),
            // Zero values whose marshalers write null: zero time, nil Raw, no schema.
            Kind::Time
            | Kind::MicroTime
            | Kind::RawExtension
            | Kind::FieldsV1
            | Kind::Json
            | Kind::JsonSchemaPropsOrArray
            | Kind::JsonSchemaPropsOrStringArray => b"null",
            Kind::JsonSchemaPropsOrBool => b"false",
            Kind::Duration => b"\"0s\"",
            Kind::Quantity => b"\"0\"",
            Kind::IntOrString => b"0",
            Kind::Message => {
                let m = &MSGS[f.msg as usize];
                if m.flags & LIST_WRAPPER != 0 {
                    // A nil named slice.
                    if !omit {
                        self.member(first, f.key);
                        self.out.extend_from_slice(b"null");
                    }
                    return Ok(());
                }
                // A struct is never omitted: render its zero value.
                self.member(first, f.key);
                self.object(m, &[], depth + 1, meta)?;
                return Ok(());
            }
        };
        self.member(first, f.key);
        self.out.extend_from_slice(zero);
        Ok(())
    }

    fn resource_version(
        &mut self,
        msg: &'static Msg,
        f: &'static Field,
        slot: Slot<'a>,
        first: &mut bool,
    ) -> R<()> {
        let wire: &[u8] = match (slot.count, slot.last) {
            (0, _) => &[],
            (_, Val::Bytes(b)) => b,
            (_, v) => return Err(Self::wrong_wire(msg, f, v.wire_type())),
        };
        let value = match self.rv {
            Some(rv) => rv.as_bytes(),
            None if wire.is_empty() && f.flags & OMITEMPTY != 0 => return Ok(()),
            None => wire,
        };
        self.member(first, f.key);
        self.out.push(b'"');
        let at = self.out.len();
        gojson::string_body(&mut self.out, value);
        self.rv_span = RvSpan {
            at: u32::try_from(at).unwrap_or(u32::MAX),
            len: u32::try_from(self.out.len() - at).unwrap_or(u32::MAX),
        };
        self.out.push(b'"');
        Ok(())
    }

    /// Writes `{...}` for a struct, `[...]` for a list wrapper. Returns whether a list
    /// wrapper had items (always true for structs).
    pub fn object(&mut self, msg: &'static Msg, buf: &'a [u8], depth: u32, meta: Meta) -> R<bool> {
        if depth > MAX_DEPTH {
            return Err(TranscodeError::TooDeep.into());
        }
        if msg.flags & LIST_WRAPPER != 0 {
            let item = &msg.fields[0];
            let mut r = Reader::new(buf);
            let mut n = 0u32;
            self.out.push(b'[');
            while !r.done() {
                let (num, wt) = r.tag()?;
                let v = r.value(wt)?;
                if num != u32::from(item.num) {
                    self.unknown = self.unknown.saturating_add(1);
                    continue;
                }
                n += self.element(msg, item, v, depth, n)?;
            }
            self.out.push(b']');
            return Ok(n > 0);
        }
        self.out.push(b'{');
        let mut first = true;
        self.members(msg, buf, depth, &mut first, meta)?;
        self.out.push(b'}');
        Ok(true)
    }

    /// Writes one present value (a singular Time field's `omitzero` is decided by the
    /// caller). Returns false only for an empty list wrapper.
    pub(super) fn value(
        &mut self,
        kind: Kind,
        msg: u16,
        v: Val<'a>,
        depth: u32,
        meta: Meta,
    ) -> R<bool> {
        match (kind, v) {
            (Kind::String, Val::Bytes(b)) => gojson::string(&mut self.out, b),
            (Kind::Bytes, Val::Bytes(b)) => gojson::base64(&mut self.out, b),
            (Kind::Bool, Val::Varint(x)) => {
                self.out
                    .extend_from_slice(if x != 0 { b"true" } else { b"false" })
            }
            (Kind::Int32, Val::Varint(x)) => gojson::int(&mut self.out, i64::from(x as i32)),
            (Kind::Int64, Val::Varint(x)) => gojson::int(&mut self.out, x as i64),
            (Kind::Uint32, Val::Varint(x)) => gojson::uint(&mut self.out, u64::from(x as u32)),
            (Kind::Uint64, Val::Varint(x)) => gojson::uint(&mut self.out, x),
            (Kind::Double, Val::Fixed64(x)) => {
                if !gojson::float(&mut self.out, f64::from_bits(x), false) {
                    return Err(TranscodeError::Invalid("NaN or infinite float").into());
                }
            }
            (Kind::Float, Val::Fixed32(x)) => {
                if !gojson::float(&mut self.out, f64::from(f32::from_bits(x)), true) {
                    return Err(TranscodeError::Invalid("NaN or infinite float").into());
                }
            }
            (Kind::Message, Val::Bytes(b)) => {
                return self.object(&MSGS[msg as usize], b, depth + 1, meta)
            }
            (Kind::Time | Kind::MicroTime, Val::Bytes(b)) => {
                let t = self.decode_time(b, kind == Kind::MicroTime)?;
                self.time(t, kind == Kind::MicroTime);
            }
            (Kind::Duration, Val::Bytes(b)) => self.duration(b)?,
            (Kind::Quantity, Val::Bytes(b)) => self.quantity(b)?,
            (Kind::IntOrString, Val::Bytes(b)) => self.int_or_string(b)?,
            (Kind::RawExtension, Val::Bytes(b)) => self.raw_json(b, false)?,
            (Kind::FieldsV1, Val::Bytes(b)) => self.raw_json(b, true)?,
            (Kind::Json, Val::Bytes(b)) => self.json(b)?,
            (Kind::JsonSchemaPropsOrArray, Val::Bytes(b)) => {
                self.schema_or_array(&MSGS[msg as usize], b, depth)?
            }
            (Kind::JsonSchemaPropsOrBool, Val::Bytes(b)) => {
                self.schema_or_bool(&MSGS[msg as usize], b, depth)?
            }
            (Kind::JsonSchemaPropsOrStringArray, Val::Bytes(b)) => {
                self.schema_or_strings(&MSGS[msg as usize], b, depth)?
            }
            _ => return Err(TranscodeError::Invalid("value with the wrong wire type").into()),
        }
        Ok(true)
    }
}
