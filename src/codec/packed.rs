//! A few short strings kept in one buffer: what each cached object holds for selectors
//! (its labels, its selectable field values). Two allocations however many strings,
//! instead of one per string plus a slice of pointers.

/// Strings back to back in `text`; `ends[i]` is where the i-th ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packed {
    text: Box<str>,
    ends: Box<[u32]>,
}

impl Packed {
    /// The `i`-th string.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1] as usize,
        };
        self.text.get(start..end)
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The strings in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.text.len() + self.ends.len() * std::mem::size_of::<u32>()
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

/// Builds a [`Packed`] one string at a time.
#[derive(Debug, Default)]
pub struct PackedBuilder {
    text: String,
    ends: Vec<u32>,
}

impl PackedBuilder {
    /// A builder for `strings` strings of `bytes` bytes in all (a hint).
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        PackedBuilder {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(strings),
        }
    }

    /// Appends `s`. Strings past 4 GiB in all are cut at that length (no label or field
    /// value comes near it: etcd refuses values over 1.5 MiB).
    pub fn push(&mut self, s: &str) {
        if u32::try_from(self.text.len() + s.len()).is_ok() {
            self.text.push_str(s);
        }
        self.ends
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }

    /// The packed strings.
    pub fn finish(self) -> Packed {
        Packed {
            text: self.text.into_boxed_str(),
            ends: self.ends.into_boxed_slice(),
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
        assert_eq!(p.heap_bytes(), 12 + 5 * 4);
        let empty = Packed::default();
        assert!(empty.is_empty());
        assert_eq!(empty.get(0), None);
        assert_eq!(empty.iter().count(), 0);
    }
}
