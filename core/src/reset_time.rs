//! A usage limit's reset time read from its message (the upstream's
//! `UsageLimits.ts`): the instant a message such as "You've hit your session limit ·
//! resets 8:20am (Europe/Rome)" or "try again at 2:30 PM" names, computed from `now`
//! with integer date arithmetic, the same on every host.
//!
//! The shapes read (ASCII case aside):
//! - a wall time after `resets`, `resets at`, `reset at` or `try again at`: `8:20am`,
//!   `3 pm`, `2:30 PM`, `14:30` (a 24-hour time needs its minutes), then an optional
//!   zone: `(Europe/Rome)`, `(UTC)`, `UTC+2`, `GMT-05:00`. The instant is that wall
//!   time's next occurrence after `now` in that zone (today's, or tomorrow's once it
//!   has passed). A time without a zone is read in UTC: the core has no host clock
//!   and no host zone, and a host that knows the caller's zone better gives `resetAt`
//!   itself.
//! - `reset after 1h2m3s` (Gemini's): `now` plus that duration.
//! - `…limit reached|1719964800` (Claude's stream result): epoch seconds.
//!
//! Zone names come from a small table (`zones.rs`) of the zones such messages name,
//! each with its standard offset and daylight-saving rule, rather than from a fact the
//! host supplies: every host then gives the same instant for the same message (Node's
//! `Intl` and a Rust host's zone database would disagree in their versions), and the
//! table costs a few hundred bytes. A zone it does not hold is not guessed at: the
//! reading says so ([`MessageReset::NotUnderstood`]) and the usual cooldown applies.

use crate::time::days_from_civil;

mod zones;

pub use zones::{zone_offset_minutes, Dst, Zone};

const MINUTE: i64 = 60_000;
const DAY: i64 = 86_400_000;

/// What a message says of its reset time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageReset<'a> {
    /// It names none.
    None,
    /// It names this instant (epoch ms).
    At(u64),
    /// It names one in words rota does not read (an unknown zone, a date): this part
    /// of the message.
    NotUnderstood(&'a str),
}

/// The words that put a wall time after them, longest first where one starts another.
const WALL_TIME_WORDS: [&str; 4] = ["resets at ", "resets ", "reset at ", "try again at "];

/// The reset time `message` names, read at `now` (epoch ms).
pub fn read_reset(message: &str, now: u64) -> MessageReset<'_> {
    // ASCII lowercasing keeps every byte offset, so a place found in `lower` is the
    // same place in `message`.
    let lower = message.to_ascii_lowercase();
    if let Some(at) = epoch_seconds(&lower) {
        return MessageReset::At(at);
    }
    if let Some(start) = lower.find("reset after ") {
        let from = start + "reset after ".len();
        return match duration_ms(&lower[from..]) {
            Some(ms) => MessageReset::At(now.saturating_add(ms)),
            None => MessageReset::NotUnderstood(phrase(message, from)),
        };
    }
    let Some(from) = WALL_TIME_WORDS
        .iter()
        .find_map(|word| lower.find(word).map(|i| i + word.len()))
    else {
        return MessageReset::None;
    };
    let rest = &lower[from..];
    let Some((minute_of_day, used)) = wall_time(rest) else {
        return MessageReset::NotUnderstood(phrase(message, from));
    };
    let (zone, zone_len) = zone_after(&rest[used..]);
    let zone = match zone {
        None => Some(Zone::UTC),
        Some(name) => Zone::named(name),
    };
    match zone.and_then(|zone| next_occurrence(now, minute_of_day, zone)) {
        Some(at) => MessageReset::At(at),
        None => MessageReset::NotUnderstood(&message[from..from + used + zone_len]),
    }
}

/// At most this much of a message is quoted as the part not understood.
const PHRASE: usize = 40;

/// The message from `from` to the end of its line, at most [`PHRASE`] characters.
fn phrase(message: &str, from: usize) -> &str {
    let rest = &message[from..];
    let rest = rest.split('\n').next().unwrap_or(rest);
    crate::classify::excerpt(rest, PHRASE).trim_end()
}

/// The value of ASCII digits (at most 11 here: no overflow); `str::parse` would bring
/// its own code for each integer type into the web build.
fn number(digits: &str) -> u64 {
    digits
        .bytes()
        .fold(0, |n, d| n * 10 + u64::from(d.wrapping_sub(b'0')))
}

/// `…|1719964800`: a `|` then 9 to 11 digits and nothing but space after them.
fn epoch_seconds(lower: &str) -> Option<u64> {
    let (_, after) = lower.rsplit_once('|')?;
    let digits = after.trim();
    if !(9..=11).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number(digits).checked_mul(1_000)
}

/// `1h2m3s`, `30s`, `500ms`, `2d`: at least one number and unit, summed, up to the
/// first character that continues neither.
fn duration_ms(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    let (mut i, mut total, mut parts) = (0, 0u64, 0);
    loop {
        let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 9 {
            break;
        }
        let amount = number(&text[i..i + digits]);
        let j = i + digits;
        let (scale, unit) = match &bytes[j..] {
            [b'm', b's', ..] => (1, 2),
            [b'd', ..] => (86_400_000, 1),
            [b'h', ..] => (3_600_000, 1),
            [b'm', ..] => (60_000, 1),
            [b's', ..] => (1_000, 1),
            _ => break,
        };
        total = total.saturating_add(amount.saturating_mul(scale));
        parts += 1;
        i = j + unit;
    }
    (parts > 0).then_some(total)
}

/// A wall time at the start of `text` (lowercase): `8:20am`, `3 pm`, `2:30 p.m.`,
/// `14:30`. Its minute of the day and the bytes it took.
fn wall_time(text: &str) -> Option<(u32, usize)> {
    let bytes = text.as_bytes();
    let hour_digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=2).contains(&hour_digits) {
        return None;
    }
    let hour = number(&text[..hour_digits]) as u32;
    let mut i = hour_digits;
    let mut minute = None;
    if let [b':', a, b, rest @ ..] = &bytes[i..] {
        if a.is_ascii_digit() && b.is_ascii_digit() && !rest.first().is_some_and(u8::is_ascii_digit)
        {
            minute = Some(u32::from(a - b'0') * 10 + u32::from(b - b'0'));
            i += 3;
        }
    }
    let spaces = bytes[i..].iter().take_while(|b| **b == b' ').count();
    let meridiem = ["am", "a.m.", "pm", "p.m."]
        .iter()
        .find(|m| text[i + spaces..].starts_with(**m))
        .filter(|m| {
            // Not the start of a word: "3 amazing".
            let end = i + spaces + m.len();
            m.ends_with('.') || !bytes.get(end).is_some_and(u8::is_ascii_alphabetic)
        });
    let (hour, used) = match meridiem {
        Some(m) if (1..=12).contains(&hour) => {
            let pm = m.starts_with('p');
            (hour % 12 + if pm { 12 } else { 0 }, i + spaces + m.len())
        }
        Some(_) => return None,
        None if minute.is_some() && hour <= 23 => (hour, i),
        None => return None,
    };
    let minute = minute.unwrap_or(0);
    (minute <= 59).then_some((hour * 60 + minute, used))
}

/// The zone after a wall time: `(Europe/Rome)` (the name inside), or a `UTC`/`GMT`
/// word with its offset (`UTC+2`). The name, and the bytes taken with the spaces
/// before it (0 when there is none).
fn zone_after(text: &str) -> (Option<&str>, usize) {
    let spaces = text.bytes().take_while(|b| *b == b' ').count();
    let rest = &text[spaces..];
    if let Some(inside) = rest.strip_prefix('(') {
        return match inside.find(')') {
            Some(end) if end <= 64 => (Some(inside[..end].trim()), spaces + end + 2),
            _ => (None, 0),
        };
    }
    if rest.starts_with("utc") || rest.starts_with("gmt") {
        let len = 3 + rest[3..]
            .bytes()
            .take_while(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b':'))
            .count();
        return (Some(&rest[..len]), spaces + len);
    }
    (None, 0)
}

/// The first instant after `now` whose wall time in `zone` is `minute_of_day`.
fn next_occurrence(now: u64, minute_of_day: u32, zone: Zone) -> Option<u64> {
    let now = i64::try_from(now).ok()?;
    let local_now = now + i64::from(zone.offset_minutes_at(now)) * MINUTE;
    let today = local_now.div_euclid(DAY);
    for day in [today, today + 1, today + 2] {
        let local = day * DAY + i64::from(minute_of_day) * MINUTE;
        // The offset at that wall time: asked once at a first guess, then at the
        // instant that guess gives (right on both sides of a change).
        let guess = local - i64::from(zone.offset_minutes_at(local)) * MINUTE;
        let at = local - i64::from(zone.offset_minutes_at(guess)) * MINUTE;
        if at > now {
            return u64::try_from(at).ok();
        }
    }
    None
}

/// The `nth` Sunday (1 to 4; 0: the last) of a month, as days since 1970-01-01.
fn sunday(year: i64, month: u32, nth: u32) -> i64 {
    // 1970-01-01 was a Thursday: weekday 4 counting from Sunday.
    let weekday = |days: i64| (days + 4).rem_euclid(7);
    if nth == 0 {
        let next = if month == 12 {
            days_from_civil(year + 1, 1, 1)
        } else {
            days_from_civil(year, month + 1, 1)
        };
        let last = next - 1;
        return last - weekday(last);
    }
    let first = days_from_civil(year, month, 1);
    first + (7 - weekday(first)) % 7 + 7 * (i64::from(nth) - 1)
}

#[cfg(test)]
mod tests;
