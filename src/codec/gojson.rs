//! JSON text the way Go's `encoding/json` (as used by kube-apiserver) writes it: string
//! escaping (HTML-safe, invalid UTF-8 as U+FFFD), integers, floats, base64, and the
//! custom marshalers of `metav1.Time`, `metav1.MicroTime` and `metav1.Duration`.

use base64::Engine as _;

/// Bytes that need no escaping inside a JSON string (Go's `htmlSafeSet` for ASCII).
static SAFE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0x20;
    while i < 0x80 {
        t[i] = !matches!(i as u8, b'"' | b'\\' | b'<' | b'>' | b'&');
        i += 1;
    }
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Where rendered JSON goes: a `Vec<u8>`, or [`Discard`] for a validate-only pass that
/// makes every decision a render makes (and fails exactly where it fails) but writes
/// nothing. Decisions never depend on what was written, only on the wire bytes.
pub trait Sink {
    /// Whether everything written is dropped: a validating pass may then skip what
    /// cannot fail (fields absent from the wire, which render as zero values).
    const DISCARDS: bool = false;
    /// The buffer to write into; None discards.
    fn vec(&mut self) -> Option<&mut Vec<u8>>;
    /// Bytes written so far (0 when discarding).
    fn len(&self) -> usize;
    /// Whether nothing was written (always, when discarding).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Appends one byte.
    #[inline(always)]
    fn push(&mut self, b: u8) {
        if let Some(v) = self.vec() {
            v.push(b);
        }
    }
    /// Appends bytes.
    #[inline(always)]
    fn extend_from_slice(&mut self, s: &[u8]) {
        if let Some(v) = self.vec() {
            v.extend_from_slice(s);
        }
    }
    /// Drops what was written after `len`.
    #[inline(always)]
    fn truncate(&mut self, len: usize) {
        if let Some(v) = self.vec() {
            v.truncate(len);
        }
    }
}

impl Sink for Vec<u8> {
    #[inline(always)]
    fn vec(&mut self) -> Option<&mut Vec<u8>> {
        Some(self)
    }

    #[inline(always)]
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// A sink that keeps nothing: for validating without rendering.
#[derive(Debug, Default, Clone, Copy)]
pub struct Discard;

impl Sink for Discard {
    const DISCARDS: bool = true;

    #[inline(always)]
    fn vec(&mut self) -> Option<&mut Vec<u8>> {
        None
    }

    #[inline(always)]
    fn len(&self) -> usize {
        0
    }
}

/// Length of the well-formed UTF-8 sequence starting at `s[i]` (a byte >= 0x80), or 0.
#[inline]
pub fn utf8_len(s: &[u8], i: usize) -> usize {
    let b0 = s[i];
    let cont = |j: usize, lo: u8, hi: u8| s.get(i + j).is_some_and(|&b| (lo..=hi).contains(&b));
    match b0 {
        0xC2..=0xDF if cont(1, 0x80, 0xBF) => 2,
        0xE0 if cont(1, 0xA0, 0xBF) && cont(2, 0x80, 0xBF) => 3,
        0xE1..=0xEC | 0xEE..=0xEF if cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) => 3,
        0xED if cont(1, 0x80, 0x9F) && cont(2, 0x80, 0xBF) => 3,
        0xF0 if cont(1, 0x90, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) => 4,
        0xF1..=0xF3 if cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) => 4,
        0xF4 if cont(1, 0x80, 0x8F) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) => 4,
        _ => 0,
    }
}

/// A mask with the high bit set in (at least) the lowest byte of `w` that is not safe
/// to copy into a JSON string as is: control characters, `"`, `\\`, `<`, `>`, `&` and
/// non-ASCII bytes. Bytes above the first flagged one may be flagged spuriously (the
/// subtraction borrows), so only the lowest flag is exact.
#[inline(always)]
fn unsafe_bytes(w: u64) -> u64 {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let control = w.wrapping_sub(LO * 0x20) & !w & HI;
    // `b | 4 == '&'` exactly for `"` and `&`; `b | 2 == '>'` exactly for `<` and `>`.
    let quote_amp = zero((w | (LO * 4)) ^ (LO * u64::from(b'&')));
    let angle = zero((w | (LO * 2)) ^ (LO * u64::from(b'>')));
    let backslash = zero(w ^ (LO * u64::from(b'\\')));
    control | quote_amp | angle | backslash | (w & HI)
}

/// Writes `s` as a quoted JSON string.
#[inline]
pub fn string<O: Sink + ?Sized>(out: &mut O, s: &[u8]) {
    let Some(out) = out.vec() else {
        return;
    };
    out.push(b'"');
    string_body(out, s);
    out.push(b'"');
}

/// Writes the escaped contents of a JSON string (no quotes), as Go does: `\"`, `\\`,
/// `\n`, `\r`, `\t`, `\b`, `\f`, other control characters and `<`, `>`, `&` as `\u00XX`,
/// U+2028/U+2029 as `\u2028`/`\u2029`, and every byte of invalid UTF-8 as `\ufffd`.
pub fn string_body<O: Sink + ?Sized>(out: &mut O, s: &[u8]) {
    let Some(out) = out.vec() else {
        return;
    };
    // Most strings need no escaping: find the first byte that does, copy what precedes it
    // in one go, and return if that is all.
    let mut i = 0;
    while let Some(chunk) = s.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let mask = unsafe_bytes(u64::from_le_bytes(w));
        if mask != 0 {
            i += (mask.trailing_zeros() / 8) as usize;
            break;
        }
        i += 8;
    }
    while s.get(i).is_some_and(|&b| SAFE[b as usize]) {
        i += 1;
    }
    out.extend_from_slice(&s[..i]);
    if i == s.len() {
        return;
    }
    out.reserve(s.len() - i);
    while i < s.len() {
        // Eight bytes at a time, appended as one fixed-size write (no memcpy call): all of
        // a safe word, or the safe bytes before the first unsafe one.
        if let Some(chunk) = s.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            let mask = unsafe_bytes(u64::from_le_bytes(w));
            out.extend_from_slice(&w);
            if mask == 0 {
                i += 8;
                continue;
            }
            let safe = (mask.trailing_zeros() / 8) as usize;
            out.truncate(out.len() - (8 - safe));
            i += safe;
        }
        let Some(&b) = s.get(i) else { break };
        if SAFE[b as usize] {
            out.push(b);
            i += 1;
            continue;
        }
        if b >= 0x80 {
            let n = utf8_len(s, i);
            if n == 3 && b == 0xE2 && s[i + 1] == 0x80 && (s[i + 2] == 0xA8 || s[i + 2] == 0xA9) {
                out.extend_from_slice(if s[i + 2] == 0xA8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += 3;
            } else if n == 0 {
                out.extend_from_slice(b"\\ufffd");
                i += 1;
            } else {
                out.extend_from_slice(&s[i..i + n]);
                i += n;
            }
            continue;
        }
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
        }
        i += 1;
    }
}

/// Writes an unsigned integer.
#[inline]
pub fn uint<O: Sink + ?Sized>(out: &mut O, mut v: u64) {
    let Some(out) = out.vec() else {
        return;
    };
    if v < 10 {
        out.push(b'0' + v as u8);
        return;
    }
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    while v > 0 {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&buf[i..]);
}

/// Writes a signed integer.
#[inline]
pub fn int<O: Sink + ?Sized>(out: &mut O, v: i64) {
    let Some(out) = out.vec() else {
        return;
    };
    if v < 0 {
        out.push(b'-');
    }
    uint(out, v.unsigned_abs());
}

/// Writes a float as Go's `encoding/json` does (shortest representation; exponent form
/// below 1e-6 and from 1e21). NaN and infinities cannot be written: returns false.
pub fn float<O: Sink + ?Sized>(out: &mut O, v: f64, bits32: bool) -> bool {
    if !v.is_finite() {
        return false;
    }
    let Some(out) = out.vec() else {
        return true;
    };
    use std::io::Write as _;
    let abs = v.abs();
    let exp_form = abs != 0.0
        && if bits32 {
            let a = abs as f32;
            !(1e-6..1e21).contains(&a)
        } else {
            !(1e-6..1e21).contains(&abs)
        };
    let mark = out.len();
    let res = match (exp_form, bits32) {
        (false, false) => write!(out, "{v}"),
        (false, true) => write!(out, "{}", v as f32),
        (true, false) => write!(out, "{v:e}"),
        (true, true) => write!(out, "{:e}", v as f32),
    };
    if res.is_err() {
        out.truncate(mark);
        return false;
    }
    if exp_form {
        // Rust writes `1e21` / `1.5e-7`; Go writes `1e+21` / `1.5e-07` cleaned to `1.5e-7`.
        if let Some(e) = out[mark..].iter().position(|&c| c == b'e') {
            let at = mark + e + 1;
            if out.get(at) != Some(&b'-') {
                out.insert(at, b'+');
            }
        }
    }
    true
}

/// Writes `bytes` as a quoted standard base64 string.
pub fn base64<O: Sink + ?Sized>(out: &mut O, bytes: &[u8]) {
    let Some(out) = out.vec() else {
        return;
    };
    out.push(b'"');
    let start = out.len();
    let n = base64::encoded_len(bytes.len(), true).unwrap_or(0);
    out.resize(start + n, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(bytes, &mut out[start..])
        .unwrap_or(0);
    out.truncate(start + written);
    out.push(b'"');
}

/// Seconds from 0001-01-01T00:00:00Z to the Unix epoch: a Go zero `time.Time`.
pub const ZERO_TIME_UNIX: i64 = -62_135_596_800;

fn pad<O: Sink + ?Sized>(out: &mut O, v: i64, width: usize) {
    let Some(out) = out.vec() else {
        return;
    };
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    let mut u = v.unsigned_abs();
    while u > 0 {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
    }
    let start = (buf.len() - width).min(i);
    out.extend_from_slice(&buf[start..]);
}

/// Writes a quoted RFC 3339 UTC timestamp: `"2006-01-02T15:04:05Z"`, with `.ffffff`
/// microseconds when `micros` is Some (MicroTime).
pub fn timestamp<O: Sink + ?Sized>(out: &mut O, seconds: i64, micros: Option<u32>) {
    let Some(out) = out.vec() else {
        return;
    };
    let secs = seconds.rem_euclid(86_400);
    let (year, month, day) = crate::codec::civil::civil_from_days(seconds.div_euclid(86_400));
    out.push(b'"');
    if year < 0 {
        out.push(b'-');
    }
    pad(out, year, 4);
    out.push(b'-');
    pad(out, month, 2);
    out.push(b'-');
    pad(out, day, 2);
    out.push(b'T');
    pad(out, secs / 3600, 2);
    out.push(b':');
    pad(out, (secs / 60) % 60, 2);
    out.push(b':');
    pad(out, secs % 60, 2);
    if let Some(us) = micros {
        out.push(b'.');
        pad(out, i64::from(us), 6);
    }
    out.extend_from_slice(b"Z\"");
}

/// Writes a quoted Go `time.Duration.String()` of `nanos` (`"1h2m3.5s"`, `"1.5ms"`, `"0s"`).
pub fn duration<O: Sink + ?Sized>(out: &mut O, nanos: i64) {
    let Some(out) = out.vec() else {
        return;
    };
    let mut buf = [0u8; 32];
    let mut w = buf.len();
    let mut u = nanos.unsigned_abs();
    let neg = nanos < 0;
    // Writes the fraction v / 10^prec (trailing zeros and a bare point omitted).
    let frac = |buf: &mut [u8; 32], w: &mut usize, v: &mut u64, prec: u32| {
        let mut print = false;
        for _ in 0..prec {
            let digit = (*v % 10) as u8;
            print = print || digit != 0;
            if print {
                *w -= 1;
                buf[*w] = b'0' + digit;
            }
            *v /= 10;
        }
        if print {
            *w -= 1;
            buf[*w] = b'.';
        }
    };
    let int = |buf: &mut [u8; 32], w: &mut usize, mut v: u64| {
        if v == 0 {
            *w -= 1;
            buf[*w] = b'0';
        }
        while v > 0 {
            *w -= 1;
            buf[*w] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    w -= 1;
    buf[w] = b's';
    if u == 0 {
        out.extend_from_slice(b"\"0s\"");
        return;
    }
    if u < 1_000_000_000 {
        let prec = if u < 1_000 {
            w -= 1;
            buf[w] = b'n';
            0
        } else if u < 1_000_000 {
            w -= 2;
            buf[w..w + 2].copy_from_slice("µ".as_bytes());
            3
        } else {
            w -= 1;
            buf[w] = b'm';
            6
        };
        frac(&mut buf, &mut w, &mut u, prec);
        int(&mut buf, &mut w, u);
    } else {
        frac(&mut buf, &mut w, &mut u, 9);
        int(&mut buf, &mut w, u % 60);
        u /= 60;
        if u > 0 {
            w -= 1;
            buf[w] = b'm';
            int(&mut buf, &mut w, u % 60);
            u /= 60;
            if u > 0 {
                w -= 1;
                buf[w] = b'h';
                int(&mut buf, &mut w, u);
            }
        }
    }
    if neg {
        w -= 1;
        buf[w] = b'-';
    }
    out.push(b'"');
    out.extend_from_slice(&buf[w..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn strings_escape_like_go() {
        assert_eq!(
            s(|o| string(o, b"a\"b\\c\n\t\r\x08\x0c\x01<>&\x7f")),
            "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u003c\\u003e\\u0026\x7f\""
        );
        assert_eq!(
            s(|o| string(o, "é€😀\u{2028}\u{2029}".as_bytes())),
            "\"é€😀\\u2028\\u2029\""
        );
        // Invalid UTF-8: one \ufffd per bad byte, as Go's DecodeRune reports size 1.
        assert_eq!(
            s(|o| string(o, b"a\xe2\x82b\xff\xed\xa0\x80")),
            "\"a\\ufffd\\ufffdb\\ufffd\\ufffd\\ufffd\\ufffd\""
        );
    }

    #[test]
    fn numbers_like_go() {
        assert_eq!(s(|o| int(o, i64::MIN)), "-9223372036854775808");
        assert_eq!(s(|o| uint(o, u64::MAX)), "18446744073709551615");
        assert_eq!(s(|o| int(o, 0)), "0");
        for (v, want) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.5, "1.5"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (0.000001, "0.000001"),
            (0.0000001, "1e-7"),
            (1.5e-10, "1.5e-10"),
            (123456789.125, "123456789.125"),
        ] {
            assert_eq!(s(|o| assert!(float(o, v, false))), want, "{v}");
        }
        assert_eq!(s(|o| assert!(float(o, 0.1, true))), "0.1");
        assert!(!float(&mut Vec::new(), f64::NAN, false));
    }

    #[test]
    fn times_and_durations_like_go() {
        assert_eq!(
            s(|o| timestamp(o, 1_199_149_261, None)),
            "\"2008-01-01T01:01:01Z\""
        );
        assert_eq!(
            s(|o| timestamp(o, 0, Some(5))),
            "\"1970-01-01T00:00:00.000005Z\""
        );
        assert_eq!(s(|o| timestamp(o, -1, None)), "\"1969-12-31T23:59:59Z\"");
        assert_eq!(
            s(|o| timestamp(o, ZERO_TIME_UNIX, None)),
            "\"0001-01-01T00:00:00Z\""
        );
        assert_eq!(
            s(|o| timestamp(o, 253_402_300_800, None)),
            "\"10000-01-01T00:00:00Z\""
        );
        for (n, want) in [
            (0i64, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (1_500_000, "1.5ms"),
            (1_000_000_000, "1s"),
            (61_500_000_000, "1m1.5s"),
            (3_600_000_000_000, "1h0m0s"),
            (-90_000_000_000, "-1m30s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(s(|o| duration(o, n)), format!("\"{want}\""));
        }
        assert_eq!(s(|o| base64(o, b"hello")), "\"aGVsbG8=\"");
    }
}
