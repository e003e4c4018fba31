//! RFC 3339 timestamps as Kubernetes stores them (metav1.Time, metav1.MicroTime): parsing,
//! UTC formatting, and the elapsed time that ages are made of.

/// An instant: whole seconds since the Unix epoch plus nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Instant {
    secs: i64,
    nanos: u32,
}

const NANOS_PER_SEC: i128 = 1_000_000_000;

impl Instant {
    /// Go's zero `time.Time`, 0001-01-01T00:00:00Z: what an unset metav1.Time holds.
    pub(super) const GO_ZERO: Instant = Instant {
        secs: -62_135_596_800,
        nanos: 0,
    };

    /// The instant `secs` seconds after the epoch.
    #[cfg(test)]
    pub(super) fn from_unix(secs: i64) -> Instant {
        Instant { secs, nanos: 0 }
    }

    /// Whether this is Go's zero time (kube-apiserver prints it as `<unknown>`).
    pub(super) fn is_zero(self) -> bool {
        self == Self::GO_ZERO
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` as Go's
    /// `time.Parse(time.RFC3339, s)` does (the fraction is optional, up to 9 digits kept).
    pub(super) fn parse_rfc3339(s: &str) -> Option<Instant> {
        let b = s.as_bytes();
        let num = |from: usize, len: usize| -> Option<i64> {
            let digits = b.get(from..from + len)?;
            digits.iter().try_fold(0i64, |acc, d| {
                d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
            })
        };
        let sep = |at: usize, want: u8| b.get(at) == Some(&want);
        if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
            return None;
        }
        let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
        let (hour, min, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || min > 59
            || sec > 59
        {
            return None;
        }
        let mut i = 19;
        let mut nanos: u32 = 0;
        if matches!(b.get(i), Some(b'.' | b',')) {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                if i - start < 9 {
                    nanos = nanos * 10 + u32::from(b[i] - b'0');
                }
                i += 1;
            }
            let digits = i - start;
            if digits == 0 {
                return None;
            }
            for _ in digits..9 {
                nanos *= 10;
            }
        }
        let offset = match b.get(i) {
            Some(b'Z') if b.len() == i + 1 => 0,
            Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && sep(i + 3, b':') => {
                let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                let off = oh * 3600 + om * 60;
                if *sign == b'-' {
                    -off
                } else {
                    off
                }
            }
            _ => return None,
        };
        let days = crate::codec::civil::days_from_civil(year, month, day);
        let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset;
        Some(Instant { secs, nanos })
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` in UTC, whole seconds: Go's `t.UTC().Format(time.RFC3339)`.
    pub(super) fn to_rfc3339_utc(self) -> String {
        let days = self.secs.div_euclid(86_400);
        let rem = self.secs.rem_euclid(86_400);
        let (y, m, d) = crate::codec::civil::civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }

    /// Whole seconds from this instant to `now_unix`, truncated toward zero like
    /// `int(time.Since(t).Seconds())`, saturating where Go's `time.Duration` does (±292y).
    pub(super) fn seconds_until(self, now_unix: i64) -> i64 {
        let then = i128::from(self.secs) * NANOS_PER_SEC + i128::from(self.nanos);
        let now = i128::from(now_unix) * NANOS_PER_SEC;
        let nanos = (now - then).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
        // Within i64 after the clamp, and so is the quotient.
        i64::try_from(nanos / NANOS_PER_SEC).unwrap_or(0)
    }
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Option<Instant> {
        Instant::parse_rfc3339(s)
    }

    #[test]
    fn parses_utc_offsets_and_fractions() {
        let t = parse("2024-01-01T00:00:00Z").unwrap();
        assert_eq!(t, Instant::from_unix(1_704_067_200));
        assert_eq!(parse("2024-01-01T02:30:00+02:30"), Some(t));
        assert_eq!(parse("2023-12-31T23:00:00-01:00"), Some(t));
        let micro = parse("2024-01-01T00:00:00.123456Z").unwrap();
        assert_eq!(micro.nanos, 123_456_000);
        let long = parse("2024-01-01T00:00:00.1234567891Z").unwrap();
        assert_eq!(long.nanos, 123_456_789);
        assert_eq!(parse("1970-01-01T00:00:00Z"), Some(Instant::from_unix(0)));
        assert_eq!(
            parse("2024-02-29T12:00:00Z").map(|t| t.secs % 86_400),
            Some(43_200)
        );
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "null",
            "2024-01-01",
            "2024-01-01 00:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00z",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:60Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+0100",
            "2024-01-01T00:00:00Zjunk",
            "2024-01-0aT00:00:00Z",
            "२०२४-01-01T00:00:00Z",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn zero_time_round_trips() {
        let zero = parse("0001-01-01T00:00:00Z").unwrap();
        assert!(zero.is_zero());
        assert_eq!(zero.to_rfc3339_utc(), "0001-01-01T00:00:00Z");
        assert_eq!(
            Instant::from_unix(1_709_208_000).to_rfc3339_utc(),
            "2024-02-29T12:00:00Z"
        );
        assert_eq!(
            Instant::from_unix(-1).to_rfc3339_utc(),
            "1969-12-31T23:59:59Z"
        );
    }

    #[test]
    fn elapsed_seconds_truncate_and_saturate() {
        let t = parse("2024-01-01T00:00:00.5Z").unwrap();
        assert_eq!(t.seconds_until(1_704_067_200 + 10), 9);
        assert_eq!(t.seconds_until(1_704_067_200), 0);
        assert_eq!(t.seconds_until(1_704_067_199), -1);
        assert_eq!(t.seconds_until(1_704_067_198), -2);
        assert_eq!(
            Instant::GO_ZERO.seconds_until(1_704_067_200),
            i64::MAX / 1_000_000_000
        );
    }
}
