//! Event timestamps: RFC 3339 UTC with milliseconds.

/// Current UTC time as RFC 3339 with milliseconds (`2026-11-30T01:02:03.456Z`).
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    rfc3339(secs, now.subsec_millis())
}

/// `secs` seconds and `ms` milliseconds after the epoch as RFC 3339 in
/// UTC (`2026-11-30T01:02:03.456Z`). Written digit by digit for years
/// 0-9999 (a write takes three timestamps; with `format!` they were about
/// 0.6 % of a 1 KiB write's daemon CPU, ADR 0009); other years through
/// `format!`.
fn rfc3339(secs: i64, ms: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    // In range by construction: 0..86_400 seconds.
    let [hh, mm, ss] =
        [rem / 3600, (rem % 3600) / 60, rem % 60].map(|v| u32::try_from(v).unwrap_or(0));
    let Some(year) = u32::try_from(y).ok().filter(|y| *y <= 9999) else {
        return format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{ms:03}Z");
    };
    let mut out = String::with_capacity(24);
    let mut put = |value: u32, width: u32, then: char| {
        for place in (0..width).rev() {
            let digit = (value / 10u32.pow(place)) % 10;
            out.push(char::from_digit(digit, 10).unwrap_or('0'));
        }
        out.push(then);
    };
    put(year, 4, '-');
    put(m, 2, '-');
    put(d, 2, 'T');
    put(hh, 2, ':');
    put(mm, 2, ':');
    put(ss, 2, '.');
    put(ms.min(999), 3, 'Z');
    out
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both are small and positive by construction (1..=31, 1..=12).
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_written_by_hand_match_format() {
        let by_format = |secs: i64, ms: u32| {
            let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
            let rem = secs.rem_euclid(86_400);
            format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
                rem / 3600,
                (rem % 3600) / 60,
                rem % 60
            )
        };
        let mut secs: i64 = -62_167_219_200; // 0000-01-01
        while secs < 253_402_300_800 + 86_400 * 400 {
            for ms in [0, 7, 59, 999] {
                assert_eq!(rfc3339(secs, ms), by_format(secs, ms), "{secs} {ms}");
            }
            secs += 7_919_993; // about three months, every time of day in turn
        }
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_900_000, 456), "2026-11-28T21:06:40.456Z");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn timestamp_shape() {
        let ts = now_rfc3339();
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(ts.ends_with('Z'));
    }
}
