//! How a failure becomes a kind, as the roster seed classifies it, and which probe
//! answers mean up: the rules every host calls instead of keeping its own.
//!
//! A host only extracts *facts* from what its callers throw ([`Failure`]: a tag, an
//! HTTP status, an error code, a message, a reset instant, a `Retry-After`); the core
//! decides the kind here, with one signal table ([`Signals`]). Only infrastructure
//! signals exclude an executor: the quality of its work fails the work, never the
//! executor.
//!
//! The rules, first match wins ([`classify`]):
//!
//! 1. the message says the model is unavailable (a model-unavailable signal) →
//!    `modelUnavailable` (the seed checks this before the tag, for every error);
//! 2. an explicit `kind` (an already-classified failure) → that kind;
//! 3. the tag of an @llm4ts/core error: `UsageLimitError` → `usageLimit`,
//!    `RateLimitError` → `rateLimit`, `AuthenticationError` → `authentication`,
//!    `ProviderError` → rule 5, any other tag (`TimeoutError`, `InvalidRequestError`
//!    …) → `other`;
//! 4. without a tag, the HTTP facts: a `resetAt` → `usageLimit`; status 401 or 403 →
//!    `authentication`; 429 → `rateLimit` (a quota "per minute" is a rate limit);
//! 5. the seed's `isOutage`: not a context overflow, and the message (or the error
//!    code) contains an outage signal, or the status is one of the document's
//!    `outageStatuses` → `outage`; else `other`. Plain 5xx text, "connection reset",
//!    "service unavailable", "overloaded" are *not* outages (the seed retries them;
//!    the executor stays in the round). A call that could not reach its engine (no
//!    status, and an error code of [`UNREACHABLE_CODES`]) is `other` by the rule
//!    `unreachable`: a report of it on an executor with a health URL, on a host that
//!    probes, takes the executor out as `health` (the policy's report path), since
//!    its probe brings it back as soon as the engine answers; without one, the seed's
//!    rule stands and nothing is excluded.
//!
//! Signals match case-insensitively as substrings of the message (ASCII case, as the
//! seed's `toLowerCase` for its ASCII signals), and of the error code.

use std::borrow::Cow;

use serde_json::Value;

use crate::protocol::{Failure, FailureKind};

/// Messages that mean the executor names a model its harness cannot serve (a typo,
/// a model the account has no access to): every call will fail the same way, so it
/// sits the run out. claude says "There's an issue with the selected model".
pub const MODEL_UNAVAILABLE_SIGNALS: [&str; 7] = [
    "issue with the selected model",
    "may not exist or you may not have access",
    "model not found",
    "model_not_found",
    "unknown model",
    "invalid model",
    "does not exist or you do not have access",
];

/// The seed's outage signals (`isOutage`, @llm4ts/flow `TransientRetry.ts`): the
/// serving engine itself is down or restarting, so the executor waits for its health
/// check (or the outage cooldown).
pub const OUTAGE_SIGNALS: [&str; 8] = [
    "engine is recovering",
    "engine_recovering",
    "backend is unhealthy",
    "runtime_unavailable",
    "server is shutting down",
    "server_shutdown",
    "failed to load model",
    "engine protocol startup was aborted",
];

/// Error codes of a call that could not reach its engine, matched whole (ASCII case
/// aside) and only when no HTTP status came back (no answer at all):
/// `ECONNREFUSED` (nothing listens: the engine is not running), `ECONNRESET` (the
/// connection was reset before any answer: it crashed or is restarting),
/// `EHOSTUNREACH`, `EHOSTDOWN`, `ENETUNREACH` (no route to its machine). Left out on
/// purpose: timeouts (`ETIMEDOUT`, `UND_ERR_CONNECT_TIMEOUT`: a busy engine or a slow
/// network may be up), name resolution (`ENOTFOUND`, `EAI_AGAIN`: a resolver's or a
/// configuration's fault, not the engine's), and a socket closed or a pipe broken
/// (`UND_ERR_SOCKET`, `EPIPE`: they also follow an answer). A document's
/// `signals.outage` can name any of them (then every executor's failure is an outage).
pub const UNREACHABLE_CODES: [&str; 5] = [
    "ECONNREFUSED",
    "ECONNRESET",
    "EHOSTUNREACH",
    "EHOSTDOWN",
    "ENETUNREACH",
];

/// A prompt larger than the model's window (@llm4ts/flow `contextOverflowSignals`):
/// never an outage, whatever else the message says.
pub const CONTEXT_OVERFLOW_SIGNALS: [&str; 6] = [
    "exceeds the maximum number of tokens",
    "input token count exceeds",
    "context length exceeded",
    "maximum context length",
    "prompt is too long",
    "request too large",
];

/// The signal table: the seed's lists, extended by a document's top-level
/// `signals: { outage: [...], modelUnavailable: [...], outageStatuses: [...] }`.
/// Only the additions are held (lowercased); the seed's lists always apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signals {
    /// More outage signals (matched in the message and the error code).
    pub outage: Vec<String>,
    /// More model-unavailable signals.
    pub model_unavailable: Vec<String>,
    /// HTTP statuses that mean an outage (an API whose 503 should exclude); none by
    /// default, as in the seed.
    pub outage_statuses: Vec<u16>,
}

const SIGNAL_FIELDS: [&str; 3] = ["outage", "modelUnavailable", "outageStatuses"];

impl Signals {
    /// A document's `signals` object; every violation is named with its place, as
    /// `(path, message)` (the document makes them its violations: this module sits below
    /// `document` and does not know its types).
    pub fn from_json(value: &Value, violations: &mut Vec<(String, String)>) -> Signals {
        let mut fail = |path: String, message: &str| violations.push((path, message.into()));
        let mut signals = Signals::default();
        let Some(object) = value.as_object() else {
            fail("signals".into(), LISTS);
            return signals;
        };
        for (key, value) in object {
            let place = format!("signals.{key}");
            let (Some(items), true) = (value.as_array(), SIGNAL_FIELDS.contains(&key.as_str()))
            else {
                fail(place, LISTS);
                continue;
            };
            for (i, item) in items.iter().enumerate() {
                let at = || format!("{place}[{i}]");
                if key == "outageStatuses" {
                    match item.as_u64().filter(|s| (100..=599).contains(s)) {
                        Some(status) => signals.outage_statuses.push(status as u16),
                        None => fail(at(), "an HTTP status is a whole number from 100 to 599"),
                    }
                    continue;
                }
                match item.as_str().filter(|text| !text.trim().is_empty()) {
                    Some(text) if key == "outage" => {
                        signals.outage.push(lowercase(text).into_owned())
                    }
                    Some(text) => signals.model_unavailable.push(lowercase(text).into_owned()),
                    None => fail(at(), "a signal is a non-empty string"),
                }
            }
        }
        signals
    }
}

/// What a document's `signals` holds (the message of a wrong one).
const LISTS: &str = "`signals` holds lists: outage, modelUnavailable, outageStatuses";

/// Which rule decided (the order in the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    ModelUnavailableSignal,
    Kind,
    Tag,
    ResetAt,
    Status,
    ContextOverflow,
    OutageSignal,
    OutageStatus,
    /// A call that could not reach its engine ([`UNREACHABLE_CODES`]): `other`, which
    /// a report on an executor with a health URL turns into a health exclusion.
    Unreachable,
    /// Nothing matched: `other`.
    None,
}

impl Rule {
    /// The JSON name: `modelUnavailableSignal`, `kind`, `tag`, …
    pub fn name(self) -> &'static str {
        match self {
            Rule::ModelUnavailableSignal => "modelUnavailableSignal",
            Rule::Kind => "kind",
            Rule::Tag => "tag",
            Rule::ResetAt => "resetAt",
            Rule::Status => "status",
            Rule::ContextOverflow => "contextOverflow",
            Rule::OutageSignal => "outageSignal",
            Rule::OutageStatus => "outageStatus",
            Rule::Unreachable => "unreachable",
            Rule::None => "none",
        }
    }
}

/// A failure's kind and the rule that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    pub kind: FailureKind,
    pub rule: Rule,
    /// A usage limit's reset instant read from its message (a policy's
    /// `classify` under `resetTime: "message"`, `crate::reset_time`); never the
    /// report's own `resetAt`.
    pub reset_at: Option<u64>,
}

impl Classification {
    /// `{"kind": "outage", "rule": "outageSignal"}`, with `resetAt` when the
    /// message gave it.
    pub fn to_json(&self) -> Value {
        let mut answer = serde_json::json!({ "kind": self.kind.name(), "rule": self.rule.name() });
        if let Some(at) = self.reset_at {
            answer["resetAt"] = Value::from(at);
        }
        answer
    }
}

/// The kind of a failure (the rules in the module docs).
pub fn classify(failure: &Failure, signals: &Signals) -> Classification {
    let decided = |kind, rule| Classification {
        kind,
        rule,
        reset_at: None,
    };
    // A failure that names its kind (every report of a rate-limit storm) and neither
    // a model nor an access: no seed signal can match (`MODEL_UNAVAILABLE_KEYS`).
    if let Some(kind) = failure.kind {
        if signals.model_unavailable.is_empty() && !names_a_model_key(&failure.message) {
            return decided(kind, Rule::Kind);
        }
    }
    let message = lowercase(&failure.message);
    let says = |seed: &[&str], extra: &[String]| {
        seed.iter().any(|s| contains(&message, s)) || extra.iter().any(|s| contains(&message, s))
    };
    if says(&MODEL_UNAVAILABLE_SIGNALS, &signals.model_unavailable) {
        return decided(FailureKind::ModelUnavailable, Rule::ModelUnavailableSignal);
    }
    if let Some(kind) = failure.kind {
        return decided(kind, Rule::Kind);
    }
    match failure.tag.as_deref() {
        Some("UsageLimitError") => return decided(FailureKind::UsageLimit, Rule::Tag),
        Some("RateLimitError") => return decided(FailureKind::RateLimit, Rule::Tag),
        Some("AuthenticationError") => return decided(FailureKind::Authentication, Rule::Tag),
        Some("ProviderError") => {}
        Some(_) => return decided(FailureKind::Other, Rule::Tag),
        None => {
            if failure.reset_at.is_some() {
                return decided(FailureKind::UsageLimit, Rule::ResetAt);
            }
            match failure.status {
                Some(401 | 403) => return decided(FailureKind::Authentication, Rule::Status),
                Some(429) => return decided(FailureKind::RateLimit, Rule::Status),
                _ => {}
            }
        }
    }
    // The seed's isOutage.
    if says(&CONTEXT_OVERFLOW_SIGNALS, &[]) {
        return decided(FailureKind::Other, Rule::ContextOverflow);
    }
    let code = failure.code.as_deref().map(str::to_ascii_lowercase);
    let code_says = |s: &str| code.as_deref().is_some_and(|c| contains(c, s));
    if says(&OUTAGE_SIGNALS, &signals.outage)
        || OUTAGE_SIGNALS.iter().any(|s| code_says(s))
        || signals.outage.iter().any(|s| code_says(s))
    {
        return decided(FailureKind::Outage, Rule::OutageSignal);
    }
    if failure
        .status
        .is_some_and(|s| signals.outage_statuses.contains(&s))
    {
        return decided(FailureKind::Outage, Rule::OutageStatus);
    }
    if failure.status.is_none() && code.as_deref().is_some_and(is_unreachable_code) {
        return decided(FailureKind::Other, Rule::Unreachable);
    }
    decided(FailureKind::Other, Rule::None)
}

/// Whether an error code says the call could not reach its engine (any ASCII case).
fn is_unreachable_code(code: &str) -> bool {
    UNREACHABLE_CODES
        .iter()
        .any(|c| c.eq_ignore_ascii_case(code))
}

/// Whether a failure message says the model is unavailable (the seed's signals).
pub fn is_model_unavailable_message(message: &str) -> bool {
    let lower = lowercase(message);
    MODEL_UNAVAILABLE_SIGNALS
        .iter()
        .any(|s| contains(&lower, s))
}

/// One of these is in every seed model-unavailable signal (a test holds the list to
/// it): a message that names neither, ASCII case aside, matches none. (No non-ASCII
/// character lowercases to one of their letters: lowercasing first finds no more.)
const MODEL_UNAVAILABLE_KEYS: [&[u8]; 2] = [b"model", b"access"];

fn names_a_model_key(message: &str) -> bool {
    MODEL_UNAVAILABLE_KEYS.iter().any(|key| {
        message
            .as_bytes()
            .windows(key.len())
            .any(|w| w.eq_ignore_ascii_case(key))
    })
}

/// Signals this long or shorter are searched for directly (below).
const SHORT_SIGNAL: usize = 64;

/// Whether `signal` occurs in `text`. Every report checks each signal against one
/// short message: `str::contains` prepares a two-way search for each (issue 15: that
/// preparation was a fifth of a report), where a scan for the signal's first byte
/// that compares the rest in place costs nothing up front. Its worst case is
/// `text.len() × SHORT_SIGNAL` byte comparisons; longer signals take `str::contains`.
fn contains(text: &str, signal: &str) -> bool {
    if signal.len() > SHORT_SIGNAL {
        return text.contains(signal);
    }
    let (text, signal) = (text.as_bytes(), signal.as_bytes());
    let Some((&first, rest)) = signal.split_first() else {
        return true;
    };
    let Some(last_start) = text.len().checked_sub(signal.len()) else {
        return false;
    };
    (0..=last_start).any(|i| text[i] == first && text[i + 1..i + signal.len()] == *rest)
}

/// Whether a health probe's answer means up: a 2xx status. Redirects are not
/// followed: a 3xx is down (a health URL answers for itself; a redirect is usually a
/// login page in front of it). Every host asks this of the first answer it gets.
pub fn probe_is_up(status: u16) -> bool {
    (200..300).contains(&status)
}

/// Whether a probe follows redirects (it does not: see [`probe_is_up`]).
pub const PROBE_FOLLOWS_REDIRECTS: bool = false;

/// A text lowercased as the seed's `toLowerCase` lowercases it for ASCII signals.
///
/// Unicode lowercasing can turn a non-ASCII character into an ASCII one, as the
/// seed's `toLowerCase` does: the Kelvin sign into `k`, and `İ` into `i` and a
/// combining dot. Every other non-ASCII character lowercases to non-ASCII ones,
/// which no ASCII signal can match, so they are kept as they are: the same matches
/// as `to_lowercase`, without the Unicode case tables in the module. (A signal with
/// non-ASCII letters is lowercased the same way, so it matches those letters as
/// written.)
fn lowercase(text: &str) -> Cow<'_, str> {
    if !text
        .bytes()
        .any(|b| b.is_ascii_uppercase() || !b.is_ascii())
    {
        return Cow::Borrowed(text);
    }
    if text.is_ascii() {
        return Cow::Owned(text.to_ascii_lowercase());
    }
    let mut normalized = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{212A}' => normalized.push('k'),
            '\u{130}' => normalized.push_str("i\u{307}"),
            c => normalized.push(c.to_ascii_lowercase()),
        }
    }
    Cow::Owned(normalized)
}

/// The first `max` characters of a message, for reasons (never splits a character).
pub fn excerpt(message: &str, max: usize) -> &str {
    match message.char_indices().nth(max) {
        Some((end, _)) => &message[..end],
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The scan finds a signal exactly where `str::contains` does: texts and
        /// signals of a few letters (so that they often match, partly or whole),
        /// multibyte characters among them, signals past `SHORT_SIGNAL` too.
        #[test]
        fn contains_is_str_contains(
            text in "[abé]{0,80}",
            signal in prop_oneof!["[abé]{0,6}", "[ab]{60,70}"],
        ) {
            prop_assert_eq!(contains(&text, &signal), text.contains(signal.as_str()));
        }
    }

    proptest! {
        /// The shortcut (a message that names neither a model nor an access) decides
        /// as searching the lowercased message for every signal does: messages of the
        /// signals' own words, in any case, with the characters whose lowercase is
        /// ASCII (the Kelvin sign, `İ`) among them.
        #[test]
        fn the_model_shortcut_is_the_full_search(
            words in prop::collection::vec(prop_oneof![
                Just("MODEL"), Just("Model"), Just("not"), Just("Found"), Just("model_not_found"),
                Just("ACCESS"), Just("unknown"), Just("invalid"), Just("may not exist or you"),
                Just("may not have"), Just("\u{212A}"), Just("\u{130}"), Just("é"), Just(" "),
            ], 0..12),
        ) {
            let message = words.concat();
            let lower = message.to_lowercase();
            let failure = Failure { kind: Some(FailureKind::RateLimit), ..Failure::new(&message) };
            let unavailable = MODEL_UNAVAILABLE_SIGNALS.iter().any(|s| lower.contains(s));
            prop_assert_eq!(
                classify(&failure, &Signals::default()).kind,
                if unavailable { FailureKind::ModelUnavailable } else { FailureKind::RateLimit },
                "{:?}", message
            );
        }
    }

    #[test]
    fn every_model_signal_names_a_key() {
        for signal in MODEL_UNAVAILABLE_SIGNALS {
            assert!(
                names_a_model_key(signal),
                "{signal:?} names neither `model` nor `access`: classify's shortcut would miss it"
            );
        }
        assert!(names_a_model_key("Unknown MoDeL x"));
        assert!(names_a_model_key("no ACCESS"));
        assert!(!names_a_model_key("mode acces"));
    }

    #[test]
    fn a_kind_yields_to_the_model_signals_seed_and_extra() {
        let signals = Signals {
            model_unavailable: vec!["no such engine".into()],
            ..Signals::default()
        };
        for (message, extra, kind) in [
            ("429 Too Many Requests", false, FailureKind::RateLimit),
            (
                "The MODEL was NOT FOUND: Model Not Found",
                false,
                FailureKind::ModelUnavailable,
            ),
            ("No Such Engine here", false, FailureKind::RateLimit),
            ("No Such Engine here", true, FailureKind::ModelUnavailable),
        ] {
            let failure = Failure {
                kind: Some(FailureKind::RateLimit),
                ..Failure::new(message)
            };
            let signals = if extra {
                signals.clone()
            } else {
                Signals::default()
            };
            assert_eq!(classify(&failure, &signals).kind, kind, "{message}");
        }
    }

    #[test]
    fn contains_at_the_edges() {
        for (text, signal, found) in [
            ("", "", true),
            ("abc", "", true),
            ("", "a", false),
            ("abc", "abc", true),
            ("abc", "abcd", false),
            ("xabc", "abc", true),
            ("abcx", "abc", true),
            ("ababac", "abac", true),
            ("ababab", "abac", false),
            ("é", "\u{a9}", false),
        ] {
            assert_eq!(contains(text, signal), found, "{text:?} {signal:?}");
        }
        let long = "m".repeat(SHORT_SIGNAL + 1);
        assert!(contains(&format!("x{long}y"), &long));
        assert!(!contains(&long[1..], &long));
    }

    fn facts(tag: Option<&str>, status: Option<u16>, message: &str) -> Failure {
        Failure {
            tag: tag.map(str::to_string),
            status,
            ..Failure::new(message)
        }
    }

    fn kind_of(failure: &Failure) -> FailureKind {
        classify(failure, &Signals::default()).kind
    }

    #[test]
    fn the_narrow_lowercasing_agrees_with_unicode_lowercasing() {
        // Every character whose lowercase has an ASCII character is ASCII, the Kelvin
        // sign or `İ` (what the hand-written lowercasing relies on).
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            if !c.is_ascii() && c.to_lowercase().any(|l| l.is_ascii()) {
                assert!(c == '\u{212A}' || c == '\u{130}', "{c:?}");
            }
        }
        for message in [
            "MODEL NOT FOUND \u{212A}",
            "\u{130}nvalid model é",
            "Unknown \u{212A}model",
            "ENGINE IS RECOVERING",
        ] {
            let lower = message.to_lowercase();
            assert_eq!(
                is_model_unavailable_message(message),
                MODEL_UNAVAILABLE_SIGNALS.iter().any(|s| lower.contains(s)),
                "{message}"
            );
            assert_eq!(
                OUTAGE_SIGNALS
                    .iter()
                    .any(|s| lowercase(message).contains(s)),
                OUTAGE_SIGNALS.iter().any(|s| lower.contains(s)),
                "{message}"
            );
        }
    }

    #[test]
    fn every_signal_of_the_seed_in_any_case() {
        for signal in MODEL_UNAVAILABLE_SIGNALS {
            let message = format!("Error: {} (code 404)", signal.to_uppercase());
            assert!(is_model_unavailable_message(&message), "{message}");
        }
        assert!(!is_model_unavailable_message("rate limit exceeded"));
        assert!(!is_model_unavailable_message("model overloaded"));
        assert!(is_model_unavailable_message("UN\u{212A}NOWN MODEL"));
        assert!(!is_model_unavailable_message("modèle indisponible"));
        let long = format!("{} Model Not Found", "x".repeat(600));
        assert!(is_model_unavailable_message(&long));
        for signal in OUTAGE_SIGNALS {
            let failure = facts(Some("ProviderError"), None, &signal.to_uppercase());
            assert_eq!(kind_of(&failure), FailureKind::Outage, "{signal}");
        }
    }

    #[test]
    fn the_seed_rules_in_order() {
        use FailureKind::*;
        let cases: &[(Option<&str>, Option<u16>, &str, FailureKind)] = &[
            (
                Some("UsageLimitError"),
                None,
                "Too many requests",
                UsageLimit,
            ),
            (Some("RateLimitError"), None, "rate limited", RateLimit),
            (
                Some("AuthenticationError"),
                None,
                "OAuth token has expired",
                Authentication,
            ),
            (
                Some("ProviderError"),
                None,
                "503: engine is recovering; retry shortly",
                Outage,
            ),
            (
                Some("ProviderError"),
                None,
                "Metal backend is unhealthy",
                Outage,
            ),
            (Some("ProviderError"), None, "502 Bad Gateway", Other),
            (
                Some("ProviderError"),
                None,
                "connection reset by peer",
                Other,
            ),
            (Some("ProviderError"), None, "service unavailable", Other),
            (Some("ProviderError"), None, "model overloaded", Other),
            (Some("ProviderError"), None, "HTTP 503", Other),
            (Some("TimeoutError"), None, "timed out after 30s", Other),
            (Some("InvalidRequestError"), Some(429), "bad", Other),
            // The model signal first, whatever the tag.
            (
                Some("RateLimitError"),
                None,
                "unknown model 'x'",
                ModelUnavailable,
            ),
            (
                None,
                Some(404),
                "The model `gpt-9` does not exist or you do not have access to it.",
                ModelUnavailable,
            ),
            (
                None,
                Some(429),
                "Quota exceeded for requests per minute",
                RateLimit,
            ),
            (None, Some(401), "", Authentication),
            (None, Some(403), "", Authentication),
            (None, Some(503), "Service Unavailable", Other),
            (None, None, "server is shutting down", Outage),
            // A context overflow is never an outage.
            (
                Some("ProviderError"),
                None,
                "failed to load model: prompt is too long",
                Other,
            ),
        ];
        for (tag, status, message, kind) in cases {
            assert_eq!(
                kind_of(&facts(*tag, *status, message)),
                *kind,
                "{tag:?} {status:?} {message}"
            );
        }
        // An explicit kind wins over the other facts, not over the model signal.
        let failure = Failure {
            kind: Some(Outage),
            ..facts(Some("RateLimitError"), Some(429), "x")
        };
        assert_eq!(classify(&failure, &Signals::default()).rule, Rule::Kind);
        let failure = Failure {
            kind: Some(Outage),
            ..Failure::new("model not found")
        };
        assert_eq!(kind_of(&failure), ModelUnavailable);
        // A reset instant without a tag is a usage limit.
        let failure = Failure {
            reset_at: Some(5),
            ..facts(None, Some(429), "slow down")
        };
        assert_eq!(kind_of(&failure), UsageLimit);
    }

    #[test]
    fn a_document_extends_the_signals() {
        let mut violations = Vec::new();
        let signals = Signals::from_json(
            &serde_json::json!({"outage": ["Service Unavailable", "ECONNREFUSED"], "modelUnavailable": ["No Such Model"], "outageStatuses": [503]}),
            &mut violations,
        );
        assert!(violations.is_empty(), "{violations:?}");
        let kind = |f: &Failure| classify(f, &signals).kind;
        assert_eq!(
            kind(&facts(None, None, "503 service unavailable")),
            FailureKind::Outage
        );
        assert_eq!(
            kind(&facts(None, None, "no such model: x")),
            FailureKind::ModelUnavailable
        );
        let refused = Failure {
            code: Some("ECONNREFUSED".into()),
            ..Failure::new("fetch failed")
        };
        assert_eq!(classify(&refused, &signals).rule, Rule::OutageSignal);
        assert_eq!(kind_of(&refused), FailureKind::Other);
        assert_eq!(
            classify(&facts(None, Some(503), ""), &signals).rule,
            Rule::OutageStatus
        );
        // The seed's own lists still apply.
        assert_eq!(
            kind(&facts(None, None, "engine_recovering")),
            FailureKind::Outage
        );

        let mut violations = Vec::new();
        Signals::from_json(
            &serde_json::json!({"outage": [""], "outageStatuses": [99, "503"], "bogus": [], "other": ["x"], "modelUnavailable": "x"}),
            &mut violations,
        );
        let paths: Vec<&str> = violations.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            // In key order (a JSON object's keys are sorted).
            [
                "signals.bogus",
                "signals.modelUnavailable",
                "signals.other",
                "signals.outage[0]",
                "signals.outageStatuses[0]",
                "signals.outageStatuses[1]"
            ]
        );
        let mut violations = Vec::new();
        Signals::from_json(&serde_json::json!(["x"]), &mut violations);
        assert_eq!(violations.len(), 1);
    }

    #[test]
    fn a_call_that_could_not_connect_is_unreachable() {
        let with_code = |tag: Option<&str>, status: Option<u16>, code: &str| Failure {
            code: Some(code.into()),
            ..facts(tag, status, "fetch failed")
        };
        let rule = |f: &Failure| classify(f, &Signals::default());
        for code in UNREACHABLE_CODES.iter().copied().chain(["econnrefused"]) {
            let answer = rule(&with_code(None, None, code));
            assert_eq!(
                (answer.kind, answer.rule),
                (FailureKind::Other, Rule::Unreachable),
                "{code}"
            );
            let answer = rule(&with_code(Some("ProviderError"), None, code));
            assert_eq!(answer.rule, Rule::Unreachable, "{code}");
        }
        // An answer came (a status), another tag decided, or a code that is no
        // connection failure: the seed's rule.
        for failure in [
            with_code(None, Some(502), "ECONNRESET"),
            with_code(Some("TimeoutError"), None, "ECONNREFUSED"),
            with_code(None, None, "ETIMEDOUT"),
            with_code(None, None, "ENOTFOUND"),
            with_code(None, None, "UND_ERR_SOCKET"),
            with_code(None, None, "XECONNREFUSED"),
            facts(None, None, "connect ECONNREFUSED 127.0.0.1:1234"),
        ] {
            assert_ne!(rule(&failure).rule, Rule::Unreachable, "{failure:?}");
        }
        // A document that lists the code as an outage signal: an outage, on every executor.
        let signals = Signals {
            outage: vec!["econnrefused".into()],
            ..Signals::default()
        };
        assert_eq!(
            classify(&with_code(None, None, "ECONNREFUSED"), &signals).rule,
            Rule::OutageSignal
        );
    }

    #[test]
    fn probes_are_up_on_2xx_only() {
        assert!(probe_is_up(200) && probe_is_up(204) && probe_is_up(299));
        assert!(!probe_is_up(199) && !probe_is_up(302) && !probe_is_up(503) && !probe_is_up(0));
    }

    #[test]
    fn excerpt_respects_characters() {
        assert_eq!(excerpt("héllo", 2), "hé");
        assert_eq!(excerpt("hi", 10), "hi");
    }
}
