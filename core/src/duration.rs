//! Duration strings of a roster file: "30 minutes", "90s", "2h", "1.5 hours".
//!
//! The vocabulary is the roster seed's: a number (whole or decimal) and one unit,
//! case-insensitive, spaces allowed around and between.

use crate::write::push_u64;

/// Milliseconds per unit, for every unit spelling the roster seed reads.
const UNITS: &[(&[&str], f64)] = &[
    (
        &["ms", "milli", "millis", "millisecond", "milliseconds"],
        1.0,
    ),
    (&["s", "sec", "secs", "second", "seconds"], 1_000.0),
    (&["m", "min", "mins", "minute", "minutes"], 60_000.0),
    (&["h", "hour", "hours"], 3_600_000.0),
];

/// Parses a duration string into whole milliseconds (rounded to the nearest), or
/// `None` when the text is not a number followed by a known unit.
///
/// ```
/// assert_eq!(rota_core::parse_duration("30 minutes"), Some(1_800_000));
/// assert_eq!(rota_core::parse_duration(" 90S "), Some(90_000));
/// assert_eq!(rota_core::parse_duration("1.5h"), Some(5_400_000));
/// assert_eq!(rota_core::parse_duration("soon"), None);
/// ```
pub fn parse_duration(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits_end = text
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map_or(text.len(), |(i, _)| i);
    let (number, rest) = text.split_at(digits_end);
    if !is_decimal(number) {
        return None;
    }
    let unit = rest.trim_start();
    if unit.is_empty() || !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let unit = unit.to_ascii_lowercase();
    let scale = UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit.as_str()))
        .map(|(_, scale)| *scale)?;
    let amount = crate::decimal::parse_decimal(number);
    let millis = (amount * scale).round();
    // Beyond 2^53 a JSON number no longer holds the value exactly.
    if !millis.is_finite() || millis > crate::limits::MAX_DURATION_MS as f64 {
        return None;
    }
    Some(millis as u64)
}

/// `\d+(\.\d+)?`, as the seed's pattern.
fn is_decimal(text: &str) -> bool {
    let mut parts = text.splitn(2, '.');
    let whole = parts.next().unwrap_or("");
    let fraction = parts.next();
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    digits(whole) && fraction.is_none_or(digits)
}

/// Formats milliseconds the way events say them: "10 minutes", "90 seconds", "1500 ms".
pub fn format_duration(ms: u64) -> String {
    let plural = |n: u64, unit: &str| {
        let mut text = String::new();
        push_u64(&mut text, n);
        text.push(' ');
        text.push_str(unit);
        if n != 1 {
            text.push('s');
        }
        text
    };
    if ms % 3_600_000 == 0 && ms > 0 {
        plural(ms / 3_600_000, "hour")
    } else if ms % 60_000 == 0 && ms > 0 {
        plural(ms / 60_000, "minute")
    } else if ms % 1_000 == 0 && ms > 0 {
        plural(ms / 1_000, "second")
    } else {
        format!("{ms} ms")
    }
}

/// Formats milliseconds as effect's `Duration.format` does, the way the roster seed's
/// reasons say them: "10m", "1m 30s", "1s 500ms", "1d 2h"; zero is "0".
pub fn format_seed_duration(ms: u64) -> String {
    let mut out = String::new();
    write_seed_duration(&mut out, ms);
    out
}

/// [`format_seed_duration`], appended to `out` (a reason being built: no string apart).
pub fn write_seed_duration(out: &mut String, ms: u64) {
    if ms == 0 {
        out.push('0');
        return;
    }
    let parts = [
        (ms / 86_400_000, "d"),
        (ms / 3_600_000 % 24, "h"),
        (ms / 60_000 % 60, "m"),
        (ms / 1_000 % 60, "s"),
        (ms % 1_000, "ms"),
    ];
    let start = out.len();
    for (n, unit) in parts.into_iter().filter(|(n, _)| *n != 0) {
        if out.len() > start {
            out.push(' ');
        }
        push_u64(out, n);
        out.push_str(unit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_spelling_of_the_seed() {
        for (text, ms) in [
            ("5ms", 5),
            ("5 millis", 5),
            ("5 millisecond", 5),
            ("5 milliseconds", 5),
            ("2s", 2_000),
            ("2 sec", 2_000),
            ("2 secs", 2_000),
            ("2 second", 2_000),
            ("2 seconds", 2_000),
            ("3m", 180_000),
            ("3 min", 180_000),
            ("3 mins", 180_000),
            ("3 minute", 180_000),
            ("3 minutes", 180_000),
            ("1h", 3_600_000),
            ("1 hour", 3_600_000),
            ("2 hours", 7_200_000),
            ("30 Minutes", 1_800_000),
            ("  90S  ", 90_000),
            ("0.5s", 500),
            ("0 minutes", 0),
        ] {
            assert_eq!(parse_duration(text), Some(ms), "{text:?}");
        }
    }

    #[test]
    fn rejects() {
        for text in [
            "", "soon", "5", "m", "-5s", "5 days", "5.s", ".5s", "5 m s", "1e3s", "5s!", "5 µs",
        ] {
            assert_eq!(parse_duration(text), None, "{text:?}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_duration(600_000), "10 minutes");
        assert_eq!(format_duration(60_000), "1 minute");
        assert_eq!(format_duration(90_000), "90 seconds");
        assert_eq!(format_duration(7_200_000), "2 hours");
        assert_eq!(format_duration(1_500), "1500 ms");
    }

    #[test]
    fn formats_as_effect_does() {
        // effect's `Duration.format` (effect/Duration.ts): days, hours, minutes,
        // seconds, millis, each when not zero, joined by spaces.
        for (ms, text) in [
            (600_000, "10m"),
            (1_800_000, "30m"),
            (300_000, "5m"),
            (90_000, "1m 30s"),
            (15_000, "15s"),
            (1_500, "1s 500ms"),
            (7, "7ms"),
            (3_600_000, "1h"),
            (93_784_005, "1d 2h 3m 4s 5ms"),
            (0, "0"),
        ] {
            assert_eq!(format_seed_duration(ms), text, "{ms}");
        }
    }
}
