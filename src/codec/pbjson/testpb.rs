//! A protobuf writer for tests: messages built field by field, in any order, with any
//! wire type, so tests can write what gogo writes and what it never would.

/// A protobuf message under construction.
#[derive(Default, Clone)]
pub struct Pb(pub Vec<u8>);

impl Pb {
    /// An empty message.
    pub fn new() -> Self {
        Pb::default()
    }
    /// A bare varint (a tag, a length or a packed element).
    pub fn varint(mut self, v: u64) -> Self {
        let mut v = v;
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    /// A field tag.
    pub fn tag(self, num: u32, wt: u8) -> Self {
        self.varint(u64::from(num) << 3 | u64::from(wt))
    }
    /// A varint field.
    pub fn int(self, num: u32, v: i64) -> Self {
        self.tag(num, 0).varint(v as u64)
    }
    /// A length-delimited field.
    pub fn bytes(self, num: u32, b: &[u8]) -> Self {
        let mut s = self.tag(num, 2).varint(b.len() as u64);
        s.0.extend_from_slice(b);
        s
    }
    /// Bytes as they are.
    pub fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A string field.
    pub fn str(self, num: u32, s: &str) -> Self {
        self.bytes(num, s.as_bytes())
    }
    /// A message field.
    pub fn msg(self, num: u32, m: Pb) -> Self {
        self.bytes(num, &m.0)
    }
    /// A double field (fixed64).
    pub fn double(self, num: u32, v: f64) -> Self {
        self.tag(num, 1).raw(&v.to_bits().to_le_bytes())
    }
    /// A map entry {1: key, 2: value}.
    pub fn entry(self, num: u32, k: &str, v: &str) -> Self {
        self.msg(num, Pb::new().str(1, k).str(2, v))
    }
    /// A map entry {1: key, 2: message value}.
    pub fn kv(self, num: u32, k: &str, v: Pb) -> Self {
        self.msg(num, Pb::new().str(1, k).msg(2, v))
    }
}
