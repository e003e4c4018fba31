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
    /// `time.Parse(time.RFC3339, s)` does.
    pub(super) fn parse_rfc3339(s: &str) -> Option<Instant> {
        crate::codec::civil::parse_rfc3339(s).map(|(secs, nanos)| Instant { secs, nanos })
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` in UTC, whole seconds: Go's `t.UTC().Format(time.RFC3339)`.
    pub(super) fn to_rfc3339_utc(self) -> String {
        crate::codec::civil::format_rfc3339(self.secs)
    }

    /// Whole seconds from `earlier` to this instant, truncated toward zero and saturating
    /// like Go's `t.Sub(earlier)` read as seconds.
    pub(super) fn seconds_since(self, earlier: Instant) -> i64 {
        let nanos = |t: Instant| i128::from(t.secs) * NANOS_PER_SEC + i128::from(t.nanos);
        let diff = (nanos(self) - nanos(earlier)).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
        i64::try_from(diff / NANOS_PER_SEC).unwrap_or(0)
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
    fn seconds_between_instants() {
        let start = parse("2024-01-01T00:00:00.5Z").unwrap();
        let end = parse("2024-01-01T00:01:00Z").unwrap();
        assert_eq!(end.seconds_since(start), 59);
        assert_eq!(start.seconds_since(end), -59);
        assert_eq!(
            end.seconds_since(Instant::GO_ZERO),
            i64::MAX / 1_000_000_000
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
