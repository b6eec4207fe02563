//! Extracts the facts of a failed call (an HTTP status with its headers and body, an
//! IO error) for the core, which classifies them as the roster seed does
//! (`rota_core::classify`). No word list lives here: the signal table is the core's,
//! extended by the document's `signals`.
//!
//! | what | facts |
//! |---|---|
//! | an HTTP answer | `status`; `Retry-After` (seconds or an HTTP date) or `retry-after-ms` as `retryAfterMs`; the body as the message (`HTTP <status>` when empty) |
//! | an IO error | its kind as the POSIX-style code Node reports (`ECONNREFUSED`, `ECONNRESET`, `ETIMEDOUT`, …, else the kind's name), its text as the message |
//!
//! What the core makes of them: 401/403 → authentication, 429 → rate limit, a message
//! with a model-unavailable signal → out for the run, a message or code with an outage
//! signal → outage; plain 5xx and connection errors are not outages unless the
//! document says so (`"signals": {"outage": ["ECONNREFUSED"], "outageStatuses": [503]}`),
//! except that a call that could not reach its engine (`ECONNREFUSED`, `ECONNRESET`,
//! `EHOSTUNREACH`, `ENETUNREACH`: `rota_core::classify::UNREACHABLE_CODES`) takes an
//! executor with a health URL out until its URL answers.

use rota_core::Failure;

/// The most of a body kept as the message (the core quotes at most 200 characters).
const MESSAGE_LIMIT: usize = 2_000;

/// The facts of a failed HTTP call: its status, its headers (any case) and its body.
pub fn http_facts(status: u16, headers: &[(&str, &str)], body: &str, now_ms: u64) -> Failure {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim())
    };
    let retry_after_ms = header("retry-after-ms")
        .and_then(|ms| ms.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| ms.round() as u64)
        .or_else(|| header("retry-after").and_then(|v| parse_retry_after(v, now_ms)));
    let body = body.trim();
    Failure {
        status: (100..=599).contains(&status).then_some(status),
        retry_after_ms,
        ..Failure::new(if body.is_empty() {
            format!("HTTP {status}")
        } else {
            body.chars().take(MESSAGE_LIMIT).collect()
        })
    }
}

/// The facts of a call that failed without an HTTP answer.
pub fn io_facts(error: &std::io::Error) -> Failure {
    Failure {
        code: Some(io_code(error.kind())),
        ..Failure::new(error.to_string())
    }
}

/// An IO error kind as the code Node gives the same failure, so one signal
/// (`ECONNREFUSED`) means the same on every host; other kinds by their name.
fn io_code(kind: std::io::ErrorKind) -> String {
    use std::io::ErrorKind::*;
    let code = match kind {
        ConnectionRefused => "ECONNREFUSED",
        ConnectionReset => "ECONNRESET",
        ConnectionAborted => "ECONNABORTED",
        NotConnected => "ENOTCONN",
        TimedOut => "ETIMEDOUT",
        BrokenPipe => "EPIPE",
        AddrNotAvailable => "EADDRNOTAVAIL",
        HostUnreachable => "EHOSTUNREACH",
        NetworkUnreachable => "ENETUNREACH",
        NetworkDown => "ENETDOWN",
        PermissionDenied => "EACCES",
        other => return format!("{other:?}"),
    };
    code.to_string()
}

/// `Retry-After`: delay-seconds, or an HTTP date (IMF-fixdate), as milliseconds from
/// `now_ms`. A date in the past is 0.
pub fn parse_retry_after(value: &str, now_ms: u64) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return seconds.checked_mul(1000);
    }
    if let Ok(seconds) = value.parse::<f64>() {
        if seconds.is_finite() && seconds >= 0.0 {
            return Some((seconds * 1000.0).round() as u64);
        }
    }
    http_date_ms(value).map(|at| at.saturating_sub(now_ms))
}

/// "Sun, 06 Nov 1994 08:49:37 GMT" → epoch ms.
fn http_date_ms(text: &str) -> Option<u64> {
    let rest = text.split_once(", ").map_or(text, |(_, rest)| rest);
    let mut parts = rest.split_whitespace();
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut clock = parts.next()?.split(':');
    let hour: u64 = clock.next()?.parse().ok()?;
    let minute: u64 = clock.next()?.parse().ok()?;
    let second: u64 = clock.next()?.parse().ok()?;
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day as i64);
    let seconds = days.checked_mul(86_400)? + (hour * 3600 + minute * 60 + second) as i64;
    u64::try_from(seconds).ok()?.checked_mul(1000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_answers_give_their_status_retry_after_and_body() {
        let f = http_facts(429, &[("Retry-After", "30")], "slow down", 0);
        assert_eq!(
            (f.status, f.retry_after_ms, f.message.as_str(), f.kind),
            (Some(429), Some(30_000), "slow down", None)
        );
        let f = http_facts(
            429,
            &[("retry-after-ms", "1500"), ("Retry-After", "30")],
            "",
            0,
        );
        assert_eq!(
            (f.retry_after_ms, f.message.as_str()),
            (Some(1_500), "HTTP 429")
        );
        // No prefix on the body: the reason quotes the engine's own text.
        let f = http_facts(503, &[], "  engine is recovering\n", 0);
        assert_eq!(f.message, "engine is recovering");
        assert_eq!(
            http_facts(200, &[("retry-after", "soon")], "", 0).retry_after_ms,
            None
        );
        assert_eq!(http_facts(42, &[], "", 0).status, None);
        let long = "x".repeat(5_000);
        assert_eq!(http_facts(500, &[], &long, 0).message.len(), MESSAGE_LIMIT);
    }

    #[test]
    fn io_errors_give_nodes_codes() {
        use std::io::{Error, ErrorKind};
        for (kind, code) in [
            (ErrorKind::ConnectionRefused, "ECONNREFUSED"),
            (ErrorKind::ConnectionReset, "ECONNRESET"),
            (ErrorKind::TimedOut, "ETIMEDOUT"),
            (ErrorKind::BrokenPipe, "EPIPE"),
            (ErrorKind::NotFound, "NotFound"),
        ] {
            let f = io_facts(&Error::from(kind));
            assert_eq!(f.code.as_deref(), Some(code), "{kind:?}");
            assert!(f.kind.is_none() && !f.message.is_empty());
        }
        let f = io_facts(&Error::other("engine protocol startup was aborted"));
        assert_eq!(f.message, "engine protocol startup was aborted");
    }

    #[test]
    fn the_core_classifies_the_facts() {
        use rota_core::{classify, FailureKind, Signals};
        let kind = |f: &Failure| classify(f, &Signals::default()).kind;
        assert_eq!(
            kind(&http_facts(429, &[], "Quota exceeded per minute", 0)),
            FailureKind::RateLimit
        );
        assert_eq!(
            kind(&http_facts(401, &[], "", 0)),
            FailureKind::Authentication
        );
        assert_eq!(
            kind(&http_facts(
                404,
                &[],
                "The model `x` does not exist or you do not have access to it.",
                0
            )),
            FailureKind::ModelUnavailable
        );
        assert_eq!(
            kind(&http_facts(503, &[], "Service Unavailable", 0)),
            FailureKind::Other
        );
        assert_eq!(
            kind(&http_facts(503, &[], "backend is unhealthy", 0)),
            FailureKind::Outage
        );
        let refused = io_facts(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(kind(&refused), FailureKind::Other);
        let mut violations = Vec::new();
        let signals = Signals::from_json(
            &serde_json::json!({"outage": ["ECONNREFUSED"]}),
            &mut violations,
        );
        assert_eq!(classify(&refused, &signals).kind, FailureKind::Outage);
    }

    #[test]
    fn retry_after_dates() {
        // 1994-11-06T08:49:37Z = 784111777 s.
        assert_eq!(
            http_date_ms("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", 784_111_777_000),
            Some(10_000)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", u64::MAX),
            Some(0)
        );
        assert_eq!(parse_retry_after("120", 0), Some(120_000));
        assert_eq!(parse_retry_after("soon", 0), None);
    }
}
