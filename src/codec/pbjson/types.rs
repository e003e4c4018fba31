//! The shape of the generated schema table (`schema.rs`): message types and their fields,
//! in Go struct order, with what protobuf decoding and Go's `encoding/json` need to know.

/// How a field's value is encoded on the wire and rendered as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // Some kinds (unsigned, floats, Duration) have no field in 1.34's table.
pub enum Kind {
    /// `string` (and named string types, enums): a JSON string.
    String,
    /// `[]byte`: base64 (standard, padded).
    Bytes,
    /// `bool`.
    Bool,
    /// `int32` (varint, sign-extended).
    Int32,
    /// `int64`.
    Int64,
    /// `uint32`.
    Uint32,
    /// `uint64`.
    Uint64,
    /// `float64` (fixed64), printed as Go prints floats.
    Double,
    /// `float32` (fixed32).
    Float,
    /// A nested message: a struct, a map entry or a list wrapper (see [`Msg::flags`]).
    Message,
    /// `metav1.Time`: RFC 3339 in seconds, zero is `null`.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with 6 fractional digits, zero is `null`.
    MicroTime,
    /// `metav1.Duration`: Go's duration string.
    Duration,
    /// `resource.Quantity`: its canonical string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`: embedded JSON.
    RawExtension,
    /// `metav1.FieldsV1`: embedded JSON.
    FieldsV1,
    /// apiextensions `JSON` (`{1: raw}`): the raw JSON embedded, `null` when empty.
    Json,
    /// apiextensions `JSONSchemaPropsOrArray` (`{1: schema, 2: repeated schemas}`): the
    /// array when it has elements, else the schema, else `null`. `msg` is the schema.
    JsonSchemaPropsOrArray,
    /// apiextensions `JSONSchemaPropsOrBool` (`{1: allows, 2: schema}`): the schema when
    /// set, else the bool. `msg` is the schema.
    JsonSchemaPropsOrBool,
    /// apiextensions `JSONSchemaPropsOrStringArray` (`{1: schema, 2: repeated strings}`):
    /// the strings when there are any, else the schema, else `null`. `msg` is the schema.
    JsonSchemaPropsOrStringArray,
}

/// Field flag: a Go pointer (present on the wire only when set).
pub const POINTER: u8 = 1;
/// Field flag: `omitempty`.
pub const OMITEMPTY: u8 = 2;
/// Field flag: a slice (a repeated field).
pub const REPEATED: u8 = 4;
/// Field flag: a map (repeated entries of the map-entry message `msg`).
pub const MAP: u8 = 8;
/// Field flag: an embedded struct whose fields are inlined into the parent's JSON.
pub const INLINE: u8 = 16;
/// Field flag: `omitzero` (only on Time/MicroTime: omitted when zero).
pub const OMITZERO: u8 = 32;
/// Field flag: not rendered in JSON (`json:"-"` or unexported).
pub const HIDDEN: u8 = 64;

/// Message flag: the Go struct embeds `metav1.TypeMeta` (has `kind` and `apiVersion`).
pub const TYPE_META: u8 = 1;
/// Message flag: a nullable named slice (`{repeated items = 1}`), rendered as an array.
pub const LIST_WRAPPER: u8 = 2;
/// Message flag: a map entry (`{1: key, 2: value}`).
#[allow(dead_code)] // Map entries are reached through the MAP field flag.
pub const MAP_ENTRY: u8 = 4;

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Protobuf field number (0: JSON-only, never on the wire).
    pub num: u16,
    /// Value kind (the element kind for repeated fields).
    pub kind: Kind,
    /// Flags ([`POINTER`], [`OMITEMPTY`], ...).
    pub flags: u8,
    /// Index into `MSGS` of the nested message, when `kind` is `Message`; of the schema
    /// held, when `kind` is one of the `JsonSchemaPropsOr*`.
    pub msg: u16,
    /// The JSON member prefix `,"name":` (name empty for inlined structs).
    pub key: &'static str,
}

impl Field {
    /// The JSON name.
    pub fn name(&self) -> &'static str {
        let key: &'static str = self.key;
        key.get(2..key.len().saturating_sub(2)).unwrap_or("")
    }
}

/// Builds a [`Field`]; used by the generated table.
pub const fn f(num: u16, key: &'static str, kind: Kind, msg: u16, flags: u8) -> Field {
    Field {
        num,
        kind,
        flags,
        msg,
        key,
    }
}

/// One message type.
#[derive(Debug)]
pub struct Msg {
    /// A readable name (`core/v1.Pod`), for errors.
    pub name: &'static str,
    /// Message flags ([`TYPE_META`], [`LIST_WRAPPER`], [`MAP_ENTRY`]).
    pub flags: u8,
    /// The fields in Go struct order.
    pub fields: &'static [Field],
    /// Field number → index into `fields` (255: unknown).
    pub by_num: &'static [u8],
}

impl Msg {
    /// The index of the field with wire number `num`, if the schema knows it.
    #[inline]
    pub fn index_of(&self, num: u32) -> Option<usize> {
        match self.by_num.get(num as usize) {
            Some(&i) if i != 255 => Some(i as usize),
            _ => None,
        }
    }
}
