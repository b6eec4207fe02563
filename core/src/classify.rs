//! How a failure report becomes an exclusion, as the roster seed classifies it.
//! Only infrastructure signals exclude an executor: the quality of its work fails
//! the work, never the executor.

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

/// Whether a failure message says the model is unavailable (case-insensitive).
pub fn is_model_unavailable_message(message: &str) -> bool {
    if message.is_ascii() && message.len() <= 512 {
        // The common case, lowercased on the stack (the signals are lowercase ASCII).
        let mut buffer = [0u8; 512];
        let lower = &mut buffer[..message.len()];
        lower.copy_from_slice(message.as_bytes());
        lower.make_ascii_lowercase();
        let Ok(lower) = std::str::from_utf8(lower) else {
            return false;
        };
        // Every signal says "model" or "access": most messages are out after two scans.
        return (lower.contains("model") || lower.contains("access"))
            && MODEL_UNAVAILABLE_SIGNALS.iter().any(|s| lower.contains(s));
    }
    // Unicode lowercasing can turn a non-ASCII character into an ASCII one, as the
    // seed's `toLowerCase` does: the Kelvin sign into `k`, and `İ` into `i` and a
    // combining dot. Every other non-ASCII character lowercases to non-ASCII ones,
    // which no (ASCII) signal can match, so they are kept as they are: the same
    // matches as `to_lowercase`, without the Unicode case tables in the module.
    let mut normalized = String::with_capacity(message.len());
    for c in message.chars() {
        match c {
            '\u{212A}' => normalized.push('k'),
            '\u{130}' => normalized.push_str("i\u{307}"),
            c => normalized.push(c.to_ascii_lowercase()),
        }
    }
    MODEL_UNAVAILABLE_SIGNALS
        .iter()
        .any(|signal| normalized.contains(signal))
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
        ] {
            let lower = message.to_lowercase();
            assert_eq!(
                is_model_unavailable_message(message),
                MODEL_UNAVAILABLE_SIGNALS.iter().any(|s| lower.contains(s)),
                "{message}"
            );
        }
    }

    #[test]
    fn every_signal_says_model_or_access() {
        // The ASCII fast path relies on it.
        for signal in MODEL_UNAVAILABLE_SIGNALS {
            assert!(
                signal.contains("model") || signal.contains("access"),
                "{signal}"
            );
        }
    }

    #[test]
    fn every_signal_of_the_seed_in_any_case() {
        for signal in MODEL_UNAVAILABLE_SIGNALS {
            let message = format!("Error: {} (code 404)", signal.to_uppercase());
            assert!(is_model_unavailable_message(&message), "{message}");
        }
        assert!(is_model_unavailable_message(
            "There's an issue with the selected model (claude-9). It may not exist or you may not have access to it."
        ));
        assert!(!is_model_unavailable_message("rate limit exceeded"));
        assert!(!is_model_unavailable_message("model overloaded"));
        // Non-ASCII messages lowercase like JS `toLowerCase` (the Kelvin sign is `k`).
        assert!(is_model_unavailable_message("Modèle: MODEL NOT FOUND"));
        assert!(is_model_unavailable_message("UN\u{212A}NOWN MODEL"));
        assert!(!is_model_unavailable_message("modèle indisponible"));
        // Beyond the stack buffer: the general path.
        let long = format!("{} Model Not Found", "x".repeat(600));
        assert!(is_model_unavailable_message(&long));
        assert!(!is_model_unavailable_message(&"x".repeat(600)));
    }

    #[test]
    fn excerpt_respects_characters() {
        assert_eq!(excerpt("héllo", 2), "hé");
        assert_eq!(excerpt("hi", 10), "hi");
    }
}
