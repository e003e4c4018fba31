//! A few short strings kept in one buffer: what each cached object holds for selectors
//! (its labels, its selectable field values). One allocation however many strings (none
//! for none), instead of one per string plus a slice of pointers.

use std::fmt;

/// The strings' count, where each ends, then the strings back to back, in one buffer:
/// `n` (u32), `ends[0..n]` (u32 each, offsets into the text), the text. No strings: an
/// empty buffer, which allocates nothing.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Packed {
    buf: Box<[u8]>,
}

const WORD: usize = std::mem::size_of::<u32>();

impl Packed {
    fn word(&self, i: usize) -> Option<usize> {
        let b = self.buf.get(i * WORD..(i + 1) * WORD)?;
        Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
    }

    fn text(&self) -> &[u8] {
        self.buf.get((1 + self.len()) * WORD..).unwrap_or_default()
    }

    /// The `i`-th string.
    pub fn get(&self, i: usize) -> Option<&str> {
        if i >= self.len() {
            return None;
        }
        let end = self.word(1 + i)?;
        let start = match i {
            0 => 0,
            _ => self.word(i)?,
        };
        std::str::from_utf8(self.text().get(start..end)?).ok()
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.word(0).unwrap_or(0)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The strings in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Heap bytes held, for the cache-size metric.
    pub fn heap_bytes(&self) -> usize {
        self.buf.len()
    }
}

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> FromIterator<&'a str> for Packed {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
        let mut b = PackedBuilder::default();
        for s in iter {
            b.push(s);
        }
        b.finish()
    }
}

/// Builds a [`Packed`].
#[derive(Debug, Default)]
pub struct PackedBuilder {
    text: Vec<u8>,
    ends: Vec<u32>,
}

impl PackedBuilder {
    /// Room for `strings` strings of `bytes` bytes in all.
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        PackedBuilder {
            text: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(strings),
        }
    }

    /// Appends a string (an empty one past 4 GiB of text, which no label reaches).
    pub fn push(&mut self, s: &str) {
        if u32::try_from(self.text.len() + s.len()).is_ok() {
            self.text.extend_from_slice(s.as_bytes());
        }
        self.ends
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }

    /// The strings in one buffer of exactly their size.
    pub fn finish(self) -> Packed {
        if self.ends.is_empty() {
            return Packed::default();
        }
        let mut buf = Vec::with_capacity((1 + self.ends.len()) * WORD + self.text.len());
        buf.extend_from_slice(&(self.ends.len() as u32).to_le_bytes());
        for e in &self.ends {
            buf.extend_from_slice(&e.to_le_bytes());
        }
        buf.extend_from_slice(&self.text);
        Packed {
            buf: buf.into_boxed_slice(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_in_order_with_empty_ones() {
        let p: Packed = ["app", "", "web", "tier", "ü"].into_iter().collect();
        assert_eq!(p.len(), 5);
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            vec!["app", "", "web", "tier", "ü"]
        );
        assert_eq!(p.get(1), Some(""));
        assert_eq!(p.get(4), Some("ü"));
        assert_eq!(p.get(5), None);
        assert_eq!(p.heap_bytes(), 4 + 5 * 4 + 12);
        assert_eq!(format!("{p:?}"), r#"["app", "", "web", "tier", "ü"]"#);
        let empty = Packed::default();
        assert!(empty.is_empty());
        assert_eq!(empty.get(0), None);
        assert_eq!(empty.iter().count(), 0);
        assert_eq!(empty.heap_bytes(), 0);
        let one_empty: Packed = [""].into_iter().collect();
        assert_eq!((one_empty.len(), one_empty.get(0)), (1, Some("")));
    }
}
