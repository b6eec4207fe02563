//! The time zones a usage-limit message names (Claude prints the user's own zone:
//! "resets 8:20am (Europe/Rome)"), with their standard offset and daylight-saving
//! rule, and the offsets written as numbers (`UTC+2`, `GMT-05:00`). Only what such
//! messages name: a zone not here reads as not understood, never as a guess.

use super::{sunday, DAY, MINUTE};
use crate::time::civil_from_days;

/// A daylight-saving rule (one hour ahead while it holds), as the zones below keep
/// it today.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dst {
    None,
    /// The EU's: the last Sunday of March 01:00 UTC to the last Sunday of October
    /// 01:00 UTC.
    Eu,
    /// The US's and Canada's: the second Sunday of March 02:00 local to the first
    /// Sunday of November 02:00 local.
    Us,
    /// South-east Australia's: the first Sunday of October 02:00 local to the first
    /// Sunday of April 03:00 local.
    Au,
    /// New Zealand's: the last Sunday of September 02:00 local to the first Sunday of
    /// April 03:00 local.
    Nz,
}

/// When a rule's summer time starts or ends: a month, its `nth` Sunday (0: the
/// last), a minute of that day, and whether that minute is UTC's (else the zone's
/// standard time).
struct Change {
    month: u32,
    nth: u32,
    minute: i64,
    utc: bool,
}

impl Dst {
    /// The rule's start and end of summer time, or none.
    fn changes(self) -> Option<(Change, Change)> {
        let at = |month, nth, minute, utc| Change {
            month,
            nth,
            minute,
            utc,
        };
        Some(match self {
            Dst::None => return None,
            Dst::Eu => (at(3, 0, 60, true), at(10, 0, 60, true)),
            // 02:00 summer time is 01:00 standard time.
            Dst::Us => (at(3, 2, 120, false), at(11, 1, 60, false)),
            Dst::Au => (at(10, 1, 120, false), at(4, 1, 120, false)),
            Dst::Nz => (at(9, 0, 120, false), at(4, 1, 120, false)),
        })
    }
}

/// A zone: its standard offset from UTC in minutes and its summer-time rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    pub standard_minutes: i32,
    pub dst: Dst,
}

/// The named zones, grouped by standard offset (minutes) and rule; the names of a
/// group in one string, spaces between (no slice per name in the module's data).
const ZONES: &[(i32, Dst, &str)] = &[
    (0, Dst::Eu, "Europe/London Europe/Dublin Europe/Lisbon Atlantic/Canary Atlantic/Madeira"),
    (60, Dst::Eu, "Europe/Rome Europe/Berlin Europe/Paris Europe/Madrid Europe/Amsterdam Europe/Brussels Europe/Vienna Europe/Zurich Europe/Stockholm Europe/Oslo Europe/Copenhagen Europe/Warsaw Europe/Prague Europe/Budapest Europe/Belgrade Europe/Zagreb Europe/Ljubljana Europe/Luxembourg Europe/Malta CET"),
    (120, Dst::Eu, "Europe/Athens Europe/Helsinki Europe/Kyiv Europe/Kiev Europe/Riga Europe/Tallinn Europe/Vilnius Europe/Sofia Europe/Bucharest EET"),
    (180, Dst::None, "Europe/Moscow Europe/Istanbul Europe/Minsk Asia/Riyadh"),
    (-300, Dst::Us, "America/New_York America/Detroit America/Toronto US/Eastern EST5EDT"),
    (-360, Dst::Us, "America/Chicago America/Winnipeg US/Central CST6CDT"),
    (-420, Dst::Us, "America/Denver America/Edmonton America/Boise US/Mountain MST7MDT"),
    (-480, Dst::Us, "America/Los_Angeles America/Vancouver US/Pacific PST8PDT"),
    (-540, Dst::Us, "America/Anchorage"),
    (-240, Dst::Us, "America/Halifax"),
    (-420, Dst::None, "America/Phoenix"),
    (-600, Dst::None, "Pacific/Honolulu"),
    (-360, Dst::None, "America/Mexico_City America/Monterrey America/Guatemala America/Costa_Rica"),
    (-300, Dst::None, "America/Bogota America/Lima America/Cancun"),
    (-240, Dst::None, "America/Caracas America/La_Paz"),
    (-180, Dst::None, "America/Sao_Paulo America/Argentina/Buenos_Aires America/Buenos_Aires America/Montevideo"),
    (330, Dst::None, "Asia/Kolkata Asia/Calcutta"),
    (345, Dst::None, "Asia/Kathmandu"),
    (240, Dst::None, "Asia/Dubai"),
    (300, Dst::None, "Asia/Karachi Asia/Tashkent Asia/Almaty"),
    (360, Dst::None, "Asia/Dhaka"),
    (420, Dst::None, "Asia/Bangkok Asia/Jakarta Asia/Ho_Chi_Minh"),
    (480, Dst::None, "Asia/Shanghai Asia/Hong_Kong Asia/Singapore Asia/Taipei Asia/Manila Asia/Kuala_Lumpur Australia/Perth"),
    (540, Dst::None, "Asia/Tokyo Asia/Seoul"),
    (600, Dst::Au, "Australia/Sydney Australia/Melbourne Australia/Hobart"),
    (600, Dst::None, "Australia/Brisbane"),
    (570, Dst::Au, "Australia/Adelaide"),
    (720, Dst::Nz, "Pacific/Auckland"),
];

/// The most a numeric offset may be: 14 hours.
const MAX_OFFSET: i32 = 14 * 60;

impl Zone {
    pub const UTC: Zone = Zone {
        standard_minutes: 0,
        dst: Dst::None,
    };

    /// A zone by name, ASCII case aside: one of the table's, `UTC`/`GMT`/`Z`, or an
    /// offset written after `UTC` or `GMT` (`UTC+2`, `GMT-05:00`, `UTC+0530`).
    pub fn named(name: &str) -> Option<Zone> {
        let name = name.trim();
        if ["utc", "gmt", "z", "etc/utc", "etc/gmt"]
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
        {
            return Some(Zone::UTC);
        }
        let prefix = name.get(..3).unwrap_or("");
        if prefix.eq_ignore_ascii_case("utc") || prefix.eq_ignore_ascii_case("gmt") {
            return zone_offset_minutes(&name[3..]).map(|standard_minutes| Zone {
                standard_minutes,
                dst: Dst::None,
            });
        }
        ZONES.iter().find_map(|(standard_minutes, dst, names)| {
            names
                .split(' ')
                .any(|n| n.eq_ignore_ascii_case(name))
                .then_some(Zone {
                    standard_minutes: *standard_minutes,
                    dst: *dst,
                })
        })
    }

    /// The zone's offset from UTC, in minutes, at the instant `at` (epoch ms).
    pub fn offset_minutes_at(self, at: i64) -> i32 {
        let Some((start, end)) = self.dst.changes() else {
            return self.standard_minutes;
        };
        let (year, _, _) = civil_from_days(at.div_euclid(DAY));
        let instant = |change: &Change| {
            let local = if change.utc {
                0
            } else {
                i64::from(self.standard_minutes)
            };
            (sunday(year, change.month, change.nth) * 1_440 + change.minute - local) * MINUTE
        };
        let (start, end) = (instant(&start), instant(&end));
        let summer = if start < end {
            start <= at && at < end
        } else {
            // The southern hemisphere: summer time spans the new year.
            at >= start || at < end
        };
        self.standard_minutes + if summer { 60 } else { 0 }
    }
}

/// An offset written as `+2`, `-05:00`, `+0530`, `+5:30`: minutes east of UTC, at
/// most 14 hours.
pub fn zone_offset_minutes(text: &str) -> Option<i32> {
    let (sign, digits) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let (hours, minutes) = match digits.split_once(':') {
        Some((h, m)) if m.len() == 2 => (h, m),
        Some(_) => return None,
        None if digits.len() == 4 => digits.split_at(2),
        None => (digits, "0"),
    };
    let all_digits =
        |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(hours) || !all_digits(minutes) {
        return None;
    }
    let hours = super::number(hours) as i32;
    let minutes = super::number(minutes) as i32;
    let total = hours * 60 + minutes;
    (minutes < 60 && total <= MAX_OFFSET).then_some(sign * total)
}
