//! The types of apiextensions.k8s.io (v1 and v1beta1) that marshal themselves
//! (`marshal.go` beside their types in apiextensions-apiserver), written as Go's
//! `encoding/json` writes what their `MarshalJSON` returns:
//!
//! - `JSON` `{1: raw}`: the raw JSON, compacted and HTML-escaped; empty or absent raw is
//!   `null`; invalid JSON fails, as it does in Go;
//! - `JSONSchemaPropsOrArray` `{1: schema, 2: repeated schemas}`: the array when it has
//!   elements, else the schema when set, else `null`;
//! - `JSONSchemaPropsOrBool` `{1: allows, 2: schema}`: the schema when set, else the bool;
//! - `JSONSchemaPropsOrStringArray` `{1: schema, 2: repeated strings}`: the strings when
//!   there are any, else the schema when set, else `null`.
//!
//! The schema they hold is the field's nested message (the `JSONSchemaProps` of the same
//! version); schema-gen checks these field numbers against `generated.proto`. A schema
//! is one nesting level, like any message, so `MAX_DEPTH` bounds recursive schemas. As
//! elsewhere, a singular field repeated on the wire takes its last occurrence, and the
//! part a marshaler ignores (a schema beside a non-empty array) is skipped like an unknown
//! field, without looking inside: kube-apiserver never writes both.

use super::render::{Ctx, Meta, R};
use super::types::Msg;
use super::TranscodeError;
use crate::codec::gojson::{self, Sink};
use crate::codec::wire::{Reader, Val, BYTES, VARINT};

/// What one pass over a `JSONSchemaPropsOr*` message found.
struct OrParts<'a> {
    /// The last schema occurrence.
    schema: Option<&'a [u8]>,
    /// How many occurrences the other field has (the list, or the bool).
    others: u32,
    /// The other field's last value.
    last: Option<Val<'a>>,
}

impl<'a, O: Sink> Ctx<'a, O> {
    /// `JSON`: its raw bytes embedded, or `null` when there are none.
    pub(super) fn json(&mut self, b: &'a [u8]) -> R<()> {
        match self.field1(b)? {
            None | Some(Val::Bytes([])) => {
                self.out.extend_from_slice(b"null");
                Ok(())
            }
            Some(Val::Bytes(raw)) => self.embed_json(raw),
            Some(_) => Err(TranscodeError::Invalid("JSON with the wrong wire type").into()),
        }
    }

    /// Reads an `Or` message: field `schema` (a message) and field `other` of wire type
    /// `other_wire`; anything else is counted as unknown.
    fn or_parts(
        &mut self,
        b: &'a [u8],
        schema: u32,
        other: u32,
        other_wire: u8,
        what: &'static str,
    ) -> R<OrParts<'a>> {
        let mut parts = OrParts {
            schema: None,
            others: 0,
            last: None,
        };
        let mut r = Reader::new(b);
        while !r.done() {
            let (num, wt) = r.tag()?;
            let v = r.value(wt)?;
            match (num, v) {
                (n, Val::Bytes(s)) if n == schema => parts.schema = Some(s),
                (n, v) if n == other && wt == other_wire => {
                    parts.others += 1;
                    parts.last = Some(v);
                }
                (n, _) if n == schema || n == other => {
                    return Err(TranscodeError::Invalid(what).into())
                }
                _ => self.unknown = self.unknown.saturating_add(1),
            }
        }
        Ok(parts)
    }

    /// Writes the schema message `bytes` of type `schema` one level below `depth`.
    fn schema(&mut self, schema: &'static Msg, bytes: &'a [u8], depth: u32) -> R<()> {
        self.object(schema, bytes, depth + 1, Meta::None)
            .map(|_| ())
    }

    /// Writes `[...]` of every field-2 occurrence in `b`, each with `element`.
    fn list(
        &mut self,
        b: &'a [u8],
        mut element: impl FnMut(&mut Self, &'a [u8]) -> R<()>,
    ) -> R<()> {
        self.out.push(b'[');
        let mut r = Reader::new(b);
        let mut n = 0u32;
        while !r.done() {
            let (num, wt) = r.tag()?;
            // Other fields were checked and counted by `or_parts`.
            if let (2, Val::Bytes(e)) = (num, r.value(wt)?) {
                if n > 0 {
                    self.out.push(b',');
                }
                n += 1;
                element(self, e)?;
            }
        }
        self.out.push(b']');
        Ok(())
    }

    /// `JSONSchemaPropsOrArray`: `json.Marshal(JSONSchemas)` when there are any, else
    /// `json.Marshal(Schema)` (`null` for a nil pointer).
    pub(super) fn schema_or_array(
        &mut self,
        schema: &'static Msg,
        b: &'a [u8],
        depth: u32,
    ) -> R<()> {
        let what = "JSONSchemaPropsOrArray with the wrong wire type";
        let parts = self.or_parts(b, 1, 2, BYTES, what)?;
        if parts.others > 0 {
            return self.list(b, |ctx, e| ctx.schema(schema, e, depth));
        }
        match parts.schema {
            Some(s) => self.schema(schema, s, depth),
            None => {
                self.out.extend_from_slice(b"null");
                Ok(())
            }
        }
    }

    /// `JSONSchemaPropsOrBool`: the schema when set, else `Allows`.
    pub(super) fn schema_or_bool(
        &mut self,
        schema: &'static Msg,
        b: &'a [u8],
        depth: u32,
    ) -> R<()> {
        let what = "JSONSchemaPropsOrBool with the wrong wire type";
        let parts = self.or_parts(b, 2, 1, VARINT, what)?;
        if let Some(s) = parts.schema {
            return self.schema(schema, s, depth);
        }
        let allows = matches!(parts.last, Some(Val::Varint(x)) if x != 0);
        self.out
            .extend_from_slice(if allows { b"true" } else { b"false" });
        Ok(())
    }

    /// `JSONSchemaPropsOrStringArray`: `json.Marshal(Property)` when there are any, else
    /// the schema when set, else `null`.
    pub(super) fn schema_or_strings(
        &mut self,
        schema: &'static Msg,
        b: &'a [u8],
        depth: u32,
    ) -> R<()> {
        let what = "JSONSchemaPropsOrStringArray with the wrong wire type";
        let parts = self.or_parts(b, 1, 2, BYTES, what)?;
        if parts.others > 0 {
            return self.list(b, |ctx, s| {
                gojson::string(&mut ctx.out, s);
                Ok(())
            });
        }
        match parts.schema {
            Some(s) => self.schema(schema, s, depth),
            None => {
                self.out.extend_from_slice(b"null");
                Ok(())
            }
        }
    }
}
