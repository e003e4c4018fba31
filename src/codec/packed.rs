//! A few short strings kept in one buffer: what each cached object holds besides its
//! bytes (its key, its labels, its selectable field values). One allocation however many
//! strings (none for none), instead of one per string plus a slice of pointers.

use std::fmt;

/// The strings' count, where each ends, then the strings back to back, in one buffer:
/// the width `w` of a number (one byte: 1, 2 or 4, the fewest bytes that hold the count
/// and the text's length), `n` (`w` bytes), `ends[0..n]` (`w` bytes each, offsets into
/// the text), the text. A cached object's strings are usually under 256 bytes, and then
/// each number takes one byte where a `u32` would take four (two bytes up to 64 KiB). No
/// strings: an empty buffer, which allocates nothing.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Packed {
    buf: Box<[u8]>,
}

/// The width of the numbers of a buffer of `strings` strings and `text` bytes of text.
fn width(strings: usize, text: usize) -> usize {
    match strings.max(text) {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        _ => 4,
    }
}

impl Packed {
    /// The number of width `w` at `at`.
    #[inline]
    fn number(&self, at: usize, w: usize) -> Option<usize> {
        Some(match *self.buf.get(at..at + w)? {
            [a] => usize::from(a),
            [a, b] => usize::from(u16::from_le_bytes([a, b])),
            [a, b, c, d] => u32::from_le_bytes([a, b, c, d]) as usize,
            _ => return None,
        })
    }

    /// The width of its numbers and its count ((0, 0): no strings).
    #[inline]
    fn head(&self) -> (usize, usize) {
        let Some(&w) = self.buf.first() else {
            return (0, 0);
        };
        let w = usize::from(w);
        (w, self.number(1, w).unwrap_or(0))
    }

    /// The `i`-th string.
    pub fn get(&self, i: usize) -> Option<&str> {
        std::str::from_utf8(self.get_bytes(i)?).ok()
    }

    /// The `i`-th string's bytes, not checked again (they were a `str` when pushed). The
    /// head is read once: string `j` ends at the number after the count and `j` ends, and
    /// the text follows the last end.
    #[inline]
    pub fn get_bytes(&self, i: usize) -> Option<&[u8]> {
        let (w, n) = self.head();
        if i >= n {
            return None;
        }
        let end = self.number(1 + (1 + i) * w, w)?;
        let start = match i {
            0 => 0,
            _ => self.number(1 + i * w, w)?,
        };
        let text = 1 + (1 + n) * w;
        self.buf.get(text + start..text + end)
    }

    /// The first string's bytes (empty when there are none): what the snapshot's tree
    /// compares cached objects by.
    #[inline]
    pub fn first_bytes(&self) -> &[u8] {
        self.get_bytes(0).unwrap_or_default()
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.head().1
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
        let mut b = PackedBuilder::with_capacity(0, 0);
        for s in iter {
            b.push(s);
        }
        b.finish()
    }
}

/// Builds a [`Packed`]. Its two working vectors are the thread's, lent for the build and
/// given back when the builder drops (ingestion builds one per value: two allocations
/// fewer each), unless they grew past `SCRATCH_KEPT`.
#[derive(Debug)]
pub struct PackedBuilder {
    text: Vec<u8>,
    ends: Vec<u32>,
}

/// The most bytes a thread keeps in each of its two vectors for its next builder: a
/// value with larger selector strings than that gives them back to the heap.
const SCRATCH_KEPT: usize = 64 * 1024;

thread_local! {
    static SCRATCH: std::cell::Cell<(Vec<u8>, Vec<u32>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

impl Drop for PackedBuilder {
    fn drop(&mut self) {
        let ends_bytes = self.ends.capacity() * std::mem::size_of::<u32>();
        if self.text.capacity() <= SCRATCH_KEPT && ends_bytes <= SCRATCH_KEPT {
            let (mut text, mut ends) = (
                std::mem::take(&mut self.text),
                std::mem::take(&mut self.ends),
            );
            text.clear();
            ends.clear();
            // A thread being torn down has no scratch left to give it to.
            let _ = SCRATCH.try_with(|s| s.set((text, ends)));
        }
    }
}

impl PackedBuilder {
    /// Room for `strings` strings of `bytes` bytes in all.
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        let (mut text, mut ends) = SCRATCH.try_with(|s| s.take()).unwrap_or_default();
        text.reserve(bytes);
        ends.reserve(strings);
        PackedBuilder { text, ends }
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
        let n = self.ends.len();
        if n == 0 {
            return Packed::default();
        }
        let w = width(n, self.text.len());
        let mut buf = Vec::with_capacity(1 + (1 + n) * w + self.text.len());
        buf.push(w as u8);
        for x in std::iter::once(n as u32).chain(self.ends.iter().copied()) {
            buf.extend_from_slice(&x.to_le_bytes()[..w]);
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
        assert_eq!(p.first_bytes(), b"app");
        assert_eq!(p.get(5), None);
        assert_eq!(p.heap_bytes(), 1 + 1 + 5 + 12);
        assert_eq!(format!("{p:?}"), r#"["app", "", "web", "tier", "ü"]"#);
        let empty = Packed::default();
        assert!(empty.is_empty());
        assert_eq!(empty.get(0), None);
        assert_eq!(empty.iter().count(), 0);
        assert_eq!(empty.heap_bytes(), 0);
        let one_empty: Packed = [""].into_iter().collect();
        assert_eq!((one_empty.len(), one_empty.get(0)), (1, Some("")));
    }

    #[test]
    fn numbers_widen_with_the_text_and_the_count() {
        let long = "x".repeat(300);
        let two: Packed = ["a", long.as_str(), ""].into_iter().collect();
        assert_eq!(two.iter().collect::<Vec<_>>(), vec!["a", long.as_str(), ""]);
        assert_eq!(two.heap_bytes(), 1 + 2 * 4 + 301);
        let huge = "y".repeat(70_000);
        let four: Packed = [huge.as_str(), "b"].into_iter().collect();
        assert_eq!(four.get(0), Some(huge.as_str()));
        assert_eq!(four.get(1), Some("b"));
        assert_eq!(four.first_bytes(), huge.as_bytes());
        assert_eq!(two.first_bytes(), b"a");
        assert_eq!(Packed::default().first_bytes(), b"");
        assert_eq!(four.heap_bytes(), 1 + 4 * 3 + 70_001);
        let many: Vec<String> = (0..300).map(|i| (i % 10).to_string()).collect();
        let counted: Packed = many.iter().map(String::as_str).collect();
        assert_eq!(counted.len(), 300);
        assert_eq!(counted.iter().collect::<Vec<_>>(), many);
        assert_eq!(counted.heap_bytes(), 1 + 2 * 301 + 300);
        // The boundaries: 256 bytes of text, or 256 strings, take two-byte numbers.
        let text_256 = "t".repeat(256);
        let wide: Packed = [text_256.as_str()].into_iter().collect();
        assert_eq!(
            (wide.first_bytes(), wide.heap_bytes()),
            (text_256.as_bytes(), 1 + 2 * 2 + 256)
        );
        let empties: Packed = std::iter::repeat_n("", 256).collect();
        assert_eq!(
            (empties.len(), empties.get(255), empties.heap_bytes()),
            (256, Some(""), 1 + 2 * 257)
        );
        let edge = "z".repeat(255);
        let one: Packed = [edge.as_str()].into_iter().collect();
        assert_eq!(
            (one.get(0), one.heap_bytes()),
            (Some(edge.as_str()), 1 + 2 + 255)
        );
    }

    #[test]
    fn a_builder_after_another_starts_empty_with_the_thread_s_vectors() {
        let mut b = PackedBuilder::with_capacity(3, 12);
        for s in ["ns/name", "app", "web"] {
            b.push(s);
        }
        let first = b.finish();
        let b = PackedBuilder::with_capacity(1, 1);
        // The vectors come back cleared, with the room the first build gave them.
        assert!(b.text.is_empty() && b.ends.is_empty());
        assert!(b.text.capacity() >= 13 && b.ends.capacity() >= 3);
        let mut b = b;
        b.push("x");
        let second = b.finish();
        assert_eq!(second.iter().collect::<Vec<_>>(), ["x"]);
        assert_eq!(first.iter().collect::<Vec<_>>(), ["ns/name", "app", "web"]);
        // An error path that drops a builder unfinished gives its vectors back too.
        let mut b = PackedBuilder::with_capacity(1, 4);
        b.push("gone");
        drop(b);
        let b = PackedBuilder::with_capacity(0, 0);
        assert!(b.text.is_empty() && b.text.capacity() >= 4);
    }
}
