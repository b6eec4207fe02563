//! Instants in messages: epoch milliseconds as ISO 8601 UTC, as the seed's
//! `new Date(until).toISOString()`. Pure arithmetic; the core never reads a clock.

/// `2026-11-29T10:33:58.000Z` for an epoch-ms instant.
pub fn iso(ms: u64) -> String {
    let mut out = String::with_capacity(24);
    push_iso(&mut out, ms);
    out
}

/// [`iso`], appended to `out` (a message being built: the hot exclusion messages
/// skip the formatting machinery).
pub fn push_iso(out: &mut String, ms: u64) {
    let days = (ms / 86_400_000) as i64;
    let in_day = ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        use std::fmt::Write as _;
        let _ = write!(
            out,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            in_day / 3_600_000,
            in_day / 60_000 % 60,
            in_day / 1_000 % 60,
            in_day % 1_000
        );
        return;
    }
    // YYYY-MM-DDTHH:MM:SS.mmmZ, digit by digit.
    let mut text = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut value: u64| {
        for i in (at..at + width).rev() {
            text[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year as u64);
    put(5, 2, u64::from(month));
    put(8, 2, u64::from(day));
    put(11, 2, in_day / 3_600_000);
    put(14, 2, in_day / 60_000 % 60);
    put(17, 2, in_day / 1_000 % 60);
    put(20, 3, in_day % 1_000);
    // Only ASCII digits and separators were written.
    out.push_str(std::str::from_utf8(&text).unwrap_or_default());
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Howard Hinnant's civil-to-days algorithm: days since 1970-01-01 of a proleptic
/// Gregorian date (`month` 1–12), the inverse of [`civil_from_days`].
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{civil_from_days, days_from_civil, iso, push_iso};

    #[test]
    fn days_and_dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2027, 1, 15), 1_800_000_000_000 / 86_400_000);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn formats_like_to_iso_string() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_795_000_000_123), "2026-11-18T11:06:40.123Z");
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(iso(253_402_300_800_000), "10000-01-01T00:00:00.000Z");
        let mut out = String::from("until ");
        push_iso(&mut out, 1_795_000_000_123);
        assert_eq!(out, "until 2026-11-18T11:06:40.123Z");
    }
}
