use super::*;

/// 2027-01-15T08:00:00Z, a Friday (the vectors' start): standard time everywhere
/// north, summer time in Sydney and Auckland.
const JAN: u64 = 1_800_000_000_000;
/// 2027-07-15T08:00:00Z: summer time in the EU and the US.
const JUL: u64 = 1_815_638_400_000;

fn reset(message: &str, now: u64) -> Option<u64> {
    match read_reset(message, now) {
        MessageReset::At(at) => Some(at),
        _ => None,
    }
}

/// Expected instants from Python's `zoneinfo` (the IANA database), not from this code.
#[test]
fn wall_times_in_named_zones_summer_and_winter() {
    for (message, now, expected) in [
        (
            "You've hit your session limit · resets 8:20am (Europe/Rome)",
            JAN,
            1_800_084_000_000,
        ),
        (
            "You've hit your session limit · resets 8:20am (Europe/Rome)",
            JUL,
            1_815_718_800_000,
        ),
        (
            "usage limit reached · resets 2:30pm (America/New_York)",
            JAN,
            1_800_041_400_000,
        ),
        (
            "usage limit reached · resets 2:30pm (America/New_York)",
            JUL,
            1_815_676_200_000,
        ),
        ("resets 7am (europe/rome)", JAN, 1_800_079_200_000),
        ("resets 7am (Europe/Rome)", JUL, 1_815_714_000_000),
        ("resets 9am (Asia/Kolkata)", JAN, 1_800_070_200_000),
        ("resets 8:20am (America/Phoenix)", JUL, 1_815_664_800_000),
        ("resets 9am (Australia/Sydney)", JAN, 1_800_050_400_000),
        ("resets 9am (Australia/Sydney)", JUL, 1_815_692_400_000),
        ("resets 9am (Pacific/Auckland)", JAN, 1_800_043_200_000),
        ("resets 9am (Pacific/Auckland)", JUL, 1_815_685_200_000),
    ] {
        assert_eq!(reset(message, now), Some(expected), "{message} at {now}");
    }
}

#[test]
fn every_shape() {
    let hour = 3_600_000;
    // 08:00 UTC now: 2:30 PM UTC is today, 3am tomorrow.
    assert_eq!(
        reset("You've hit your usage limit. Try again at 2:30 PM.", JAN),
        Some(JAN + 6 * hour + 30 * 60_000)
    );
    assert_eq!(
        reset("5-hour limit reached ∙ resets 3am", JAN),
        Some(JAN + 19 * hour)
    );
    assert_eq!(
        reset("Claude usage limit reached, resets at 10 p.m.", JAN),
        Some(JAN + 14 * hour)
    );
    assert_eq!(
        reset("try again at 14:30 (UTC)", JAN),
        Some(JAN + 6 * hour + 30 * 60_000)
    );
    assert_eq!(
        reset("resets 9:00am UTC+2", JAN),
        Some(JAN - hour + 24 * hour)
    );
    assert_eq!(reset("resets 11am (GMT-05:00)", JAN), Some(JAN + 8 * hour));
    assert_eq!(reset("resets 2:30pm (UTC+05:30)", JAN), Some(JAN + hour));
    assert_eq!(
        reset("Quota exceeded; reset after 1h2m3s.", JAN),
        Some(JAN + hour + 123_000)
    );
    assert_eq!(reset("reset after 500ms", JAN), Some(JAN + 500));
    assert_eq!(
        reset("Claude AI usage limit reached|1800003600", JAN),
        Some(1_800_003_600_000)
    );
    // A time already past today is tomorrow's; the very minute now is tomorrow's too.
    assert_eq!(reset("resets 7:59am", JAN), Some(JAN + 24 * hour - 60_000));
    assert_eq!(reset("resets 8am", JAN), Some(JAN + 24 * hour));
    assert_eq!(reset("resets 8:01am", JAN), Some(JAN + 60_000));
    // 12am is midnight, 12pm noon.
    assert_eq!(reset("resets 12am", JAN), Some(JAN + 16 * hour));
    assert_eq!(reset("resets 12pm", JAN), Some(JAN + 4 * hour));
}

#[test]
fn what_is_not_read() {
    for message in [
        "rate limited",
        "usage limit reached",
        "Too many requests|123",
        "resetting the connection",
    ] {
        assert_eq!(read_reset(message, JAN), MessageReset::None, "{message}");
    }
    for (message, part) in [
        (
            "resets 8:20am (Mars/Olympus_Mons)",
            "8:20am (Mars/Olympus_Mons)",
        ),
        ("resets 8:20am (UTC+15)", "8:20am (UTC+15)"),
        ("try again at Oct 15th, 2026.", "Oct 15th, 2026."),
        ("resets 13pm", "13pm"),
        ("resets 8", "8"),
        ("resets 24:00", "24:00"),
        ("reset after soon", "soon"),
    ] {
        assert_eq!(
            read_reset(message, JAN),
            MessageReset::NotUnderstood(part),
            "{message}"
        );
    }
}

#[test]
fn numeric_offsets() {
    for (text, minutes) in [
        ("+2", Some(120)),
        ("-05:00", Some(-300)),
        ("+0530", Some(330)),
        ("+5:30", Some(330)),
        ("+14", Some(840)),
        ("+15", None),
        ("2", None),
        ("+5:3", None),
        ("+", None),
        ("+1:60", None),
    ] {
        assert_eq!(zone_offset_minutes(text), minutes, "{text}");
    }
}

#[test]
fn summer_time_starts_and_ends_on_the_rules_minutes() {
    let rome = Zone::named("Europe/Rome").unwrap_or(Zone::UTC);
    let new_york = Zone::named("America/New_York").unwrap_or(Zone::UTC);
    // 2027-03-28T01:00Z and 2027-10-31T01:00Z (the EU's); 2027-03-14T07:00Z and
    // 2027-11-07T06:00Z (the US's).
    for (zone, at, before, after) in [
        (rome, 1_806_195_600_000i64, 60, 120),
        (rome, 1_824_944_400_000, 120, 60),
        (new_york, 1_805_007_600_000, -300, -240),
        (new_york, 1_825_567_200_000, -240, -300),
    ] {
        assert_eq!(zone.offset_minutes_at(at - 1), before, "{at}");
        assert_eq!(zone.offset_minutes_at(at), after, "{at}");
    }
}

/// Every zone of the table against offsets from Python's `zoneinfo` at a few instants
/// (2027-01-15T08:00Z, 2027-07-15T08:00Z).
#[test]
fn the_table_agrees_with_the_zone_database() {
    for (name, january, july) in [
        ("Europe/London", 0, 60),
        ("Europe/Lisbon", 0, 60),
        ("Europe/Berlin", 60, 120),
        ("CET", 60, 120),
        ("Europe/Helsinki", 120, 180),
        ("Europe/Moscow", 180, 180),
        ("America/Chicago", -360, -300),
        ("America/Los_Angeles", -480, -420),
        ("America/Sao_Paulo", -180, -180),
        ("America/Mexico_City", -360, -360),
        ("Asia/Kathmandu", 345, 345),
        ("Asia/Tokyo", 540, 540),
        ("Australia/Adelaide", 630, 570),
        ("Australia/Brisbane", 600, 600),
    ] {
        let zone = Zone::named(name).unwrap_or(Zone::UTC);
        assert_eq!(zone.offset_minutes_at(JAN as i64), january, "{name}");
        assert_eq!(zone.offset_minutes_at(JUL as i64), july, "{name}");
    }
    assert_eq!(Zone::named("Nowhere/Else"), None);
}
