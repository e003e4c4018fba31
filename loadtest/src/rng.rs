//! Small deterministic helpers: a seeded PRNG, stable string digests and
//! RFC 3339 timestamps (`metav1.Time`, seconds, and `metav1.MicroTime`,
//! microseconds).
//!
//! The generator is an xorshift64* whose seed is first scrambled with a
//! splitmix64 step, so neighbouring seeds (1, 2, 3, ...) give unrelated
//! streams and seed 0 is usable. It is *not* cryptographically secure; it only
//! has to make UIDs and name suffixes look random while staying reproducible.

use std::time::{SystemTime, UNIX_EPOCH};

/// Alphabet Kubernetes uses for generated name suffixes (no vowels, no
/// look-alike characters).
pub const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Seeded xorshift64* pseudo-random number generator.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// Creates a generator from `seed`; equal seeds give equal streams.
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // xorshift must never hold an all-zero state.
        let state = if z == 0 { 0x2545_F491_4F6C_DD1D } else { z };
        Self { state }
    }

    /// Returns the next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Returns a value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Returns an index into a collection of length `len` (0 when empty).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Returns `true` with probability `p` (clamped to 0..=1).
    pub fn chance(&mut self, p: f64) -> bool {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }

    /// Returns a random-looking version-4 UUID in canonical 8-4-4-4-12 form.
    pub fn uuid(&mut self) -> String {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }

    /// Returns `len` characters drawn from [`NAME_ALPHABET`].
    pub fn name_token(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(NAME_ALPHABET[self.index(NAME_ALPHABET.len())]))
            .collect()
    }

    /// Returns `len` lowercase hexadecimal characters.
    pub fn hex(&mut self, len: usize) -> String {
        const HEX: &[u8] = b"0123456789abcdef";
        (0..len)
            .map(|_| char::from(HEX[self.index(HEX.len())]))
            .collect()
    }
}

/// 64-bit FNV-1a hash of `input`, used to derive stable identifiers.
pub fn fnv1a(input: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in input.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Stable hexadecimal digest of `input` with `len` characters.
pub fn digest_hex(input: &str, len: usize) -> String {
    Rng::new(fnv1a(input)).hex(len)
}

/// Stable UUID derived from `input` (same input, same UUID).
pub fn stable_uuid(input: &str) -> String {
    Rng::new(fnv1a(input)).uuid()
}

// `u64::is_multiple_of` needs Rust 1.87; the workspace's rust-version is 1.85.
#[allow(clippy::manual_is_multiple_of)]
fn is_leap(year: u64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Formats seconds since the Unix epoch as `2026-01-02T03:04:05Z`.
pub fn rfc3339(unix_secs: u64) -> String {
    let mut days = unix_secs / 86_400;
    let secs_of_day = unix_secs % 86_400;
    let mut year = 1970;
    loop {
        let year_len = if is_leap(year) { 366 } else { 365 };
        if days < year_len {
            break;
        }
        days -= year_len;
        year += 1;
    }
    let february = if is_leap(year) { 29 } else { 28 };
    let month_lengths = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 1;
    for len in month_lengths {
        if days < len {
            break;
        }
        days -= len;
        month += 1;
    }
    format!(
        "{year:04}-{month:02}-{:02}T{:02}:{:02}:{:02}Z",
        days + 1,
        secs_of_day / 3600,
        secs_of_day % 3600 / 60,
        secs_of_day % 60
    )
}

/// Formats a Unix time as `metav1.MicroTime` does: `2026-01-02T03:04:05.000006Z`.
pub fn rfc3339_micros(unix_secs: u64, micros: u32) -> String {
    let secs = rfc3339(unix_secs);
    format!("{}.{:06}Z", &secs[..secs.len() - 1], micros % 1_000_000)
}

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Current system time as an RFC 3339 UTC timestamp with second precision
/// (`metav1.Time`).
pub fn now_rfc3339() -> String {
    rfc3339((unix_nanos() / 1_000_000_000) as u64)
}

/// Current system time with microseconds (`metav1.MicroTime`: lease renewals,
/// event times).
pub fn now_rfc3339_micros() -> String {
    let nanos = unix_nanos();
    rfc3339_micros(
        (nanos / 1_000_000_000) as u64,
        (nanos % 1_000_000_000 / 1000) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(1);
        let mut b = Rng::new(1);
        let mut c = Rng::new(2);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert!(Rng::new(0).next_u64() != 0);
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = Rng::new(7);
        for n in [1u64, 2, 3, 10, 1000] {
            for _ in 0..200 {
                assert!(rng.below(n) < n);
            }
        }
        assert_eq!(rng.below(0), 0);
    }

    #[test]
    fn uuid_shape() {
        let mut rng = Rng::new(3);
        let id = rng.uuid();
        assert_eq!(id.len(), 36);
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(id, rng.uuid());
        assert_eq!(stable_uuid("x"), stable_uuid("x"));
    }

    #[test]
    fn name_tokens_use_kubernetes_alphabet() {
        let token = Rng::new(9).name_token(32);
        assert_eq!(token.len(), 32);
        assert!(token.bytes().all(|b| NAME_ALPHABET.contains(&b)));
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_767_323_045), "2026-01-02T03:04:05Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
        let now = now_rfc3339();
        assert_eq!(now.len(), 20);
        assert!(now.ends_with('Z'));
        assert_eq!(rfc3339_micros(0, 6), "1970-01-01T00:00:00.000006Z");
        let micro = now_rfc3339_micros();
        assert_eq!(micro.len(), 27);
        assert!(micro.ends_with('Z') && micro.as_bytes()[19] == b'.');
    }
}
