//! Turns what callers really get back from an executor (an HTTP status with its
//! headers and body, an IO error) into the core's [`Failure`], which the core then
//! classifies into an exclusion as the roster seed does.
//!
//! | what | failure |
//! |---|---|
//! | 429, or a body saying "usage limit"/"quota" | `usageLimit` when the body says so, else `rateLimit`; `Retry-After` sets the end |
//! | 401, 403 | `authentication` |
//! | 404 or 400 whose body says the model does not exist / is unavailable | `modelUnavailable` |
//! | 500, 502, 503, 504, 529 (and other 5xx) | `outage` (`Retry-After` kept) |
//! | connection refused / reset / aborted, timed out, broken pipe, unreachable | `outage` |
//! | anything else | `other` (no exclusion) |

use rota_core::{Failure, FailureKind};

/// A failed HTTP call: its status, its `Retry-After` header (if any) and its body.
pub fn classify_http(status: u16, retry_after: Option<&str>, body: &str, now_ms: u64) -> Failure {
    let lower = body.to_ascii_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let retry_after_ms = retry_after.and_then(|v| parse_retry_after(v, now_ms));
    let usage = says(&[
        "usage limit",
        "usage_limit",
        "quota",
        "insufficient_quota",
        "billing",
    ]);
    let model_gone = says(&[
        "model_not_found",
        "model not found",
        "does not exist",
        "model is not available",
        "model unavailable",
        "no such model",
    ]);
    let (kind, what) = match status {
        429 if usage => (FailureKind::UsageLimit, "usage limit"),
        429 => (FailureKind::RateLimit, "rate limit"),
        401 | 403 => (FailureKind::Authentication, "authentication"),
        400 | 404 if model_gone => (FailureKind::ModelUnavailable, "model unavailable"),
        402 if usage => (FailureKind::UsageLimit, "usage limit"),
        500..=599 => (FailureKind::Outage, "outage"),
        _ => (FailureKind::Other, "error"),
    };
    let snippet: String = body.chars().take(200).collect();
    Failure {
        kind,
        message: if snippet.is_empty() {
            format!("HTTP {status} ({what})")
        } else {
            format!("HTTP {status} ({what}): {snippet}")
        },
        reset_at: None,
        retry_after_ms: match kind {
            FailureKind::RateLimit | FailureKind::UsageLimit | FailureKind::Outage => {
                retry_after_ms
            }
            _ => None,
        },
    }
}

/// A failed call that never got an HTTP answer.
pub fn classify_io(error: &std::io::Error) -> Failure {
    use std::io::ErrorKind::*;
    let kind = match error.kind() {
        ConnectionRefused | ConnectionReset | ConnectionAborted | NotConnected | TimedOut
        | BrokenPipe | UnexpectedEof | AddrNotAvailable | HostUnreachable | NetworkUnreachable
        | NetworkDown => FailureKind::Outage,
        _ => FailureKind::Other,
    };
    Failure {
        kind,
        message: format!("{error}"),
        reset_at: None,
        retry_after_ms: None,
    }
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
    fn http_statuses() {
        let f = classify_http(429, Some("30"), "slow down", 0);
        assert_eq!(
            (f.kind, f.retry_after_ms),
            (FailureKind::RateLimit, Some(30_000))
        );
        assert_eq!(
            classify_http(429, None, "You exceeded your usage limit", 0).kind,
            FailureKind::UsageLimit
        );
        assert_eq!(
            classify_http(401, None, "", 0).kind,
            FailureKind::Authentication
        );
        assert_eq!(
            classify_http(403, None, "", 0).kind,
            FailureKind::Authentication
        );
        assert_eq!(classify_http(503, None, "", 0).kind, FailureKind::Outage);
        assert_eq!(
            classify_http(404, None, "model_not_found", 0).kind,
            FailureKind::ModelUnavailable
        );
        assert_eq!(classify_http(418, None, "", 0).kind, FailureKind::Other);
        assert_eq!(classify_http(401, Some("5"), "", 0).retry_after_ms, None);
    }

    #[test]
    fn io_errors() {
        use std::io::{Error, ErrorKind};
        for kind in [
            ErrorKind::ConnectionRefused,
            ErrorKind::ConnectionReset,
            ErrorKind::TimedOut,
        ] {
            assert_eq!(classify_io(&Error::from(kind)).kind, FailureKind::Outage);
        }
        assert_eq!(
            classify_io(&Error::from(ErrorKind::PermissionDenied)).kind,
            FailureKind::Other
        );
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
