//! Secrets in a roster document: an executor's `env` holds secrets only as `${VAR}`
//! references (DESIGN.md). A literal value that looks like a secret is a warning
//! (the document stays valid), and every literal `env` value is redacted wherever a
//! document leaves the process (traces, the visualizer): env values decide nothing,
//! so a redacted document replays to the same outputs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::{validate, Violation};

/// What a redacted `env` value reads as.
pub const REDACTED: &str = "[redacted]";

/// Words in an `env` key that name a secret (matched case-insensitively, anywhere
/// in the key: `ANTHROPIC_API_KEY`, `githubToken`, `DB_PASSWORD`).
const SECRET_KEY_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
];

/// Prefixes of well-known credential formats (OpenAI/Anthropic `sk-`, GitHub,
/// Slack, AWS access keys, GitLab, Google API keys, JWTs).
const CREDENTIAL_PREFIXES: &[&str] = &[
    "sk-",
    "sk_live_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "glpat-",
    "AIza",
    "eyJ",
];

/// `${NAME}` somewhere in the value: the value is (or is built from) a reference.
pub fn is_reference(value: &str) -> bool {
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        if let Some(end) = after.find('}') {
            let name = &after[..end];
            let mut chars = name.chars();
            let first_ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return true;
            }
        }
        rest = after;
    }
    false
}

/// The key names a secret.
fn names_a_secret(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    SECRET_KEY_WORDS.iter().any(|word| key.contains(word))
}

/// The value looks like a credential: a known prefix, an AWS access key id, or a
/// long high-entropy token.
pub fn looks_like_credential(value: &str) -> bool {
    let value = value.trim();
    if CREDENTIAL_PREFIXES
        .iter()
        .any(|p| value.starts_with(p) && value.len() >= p.len() + 8)
    {
        return true;
    }
    let aws = (value.starts_with("AKIA") || value.starts_with("ASIA"))
        && value.len() == 20
        && value
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    aws || high_entropy(value)
}

/// 32 characters or more of one token (base64, hex, `-`/`_`), letters and digits
/// mixed, at least 3.5 bits of Shannon entropy per character: a generated key, not
/// a word, a path or a URL.
fn high_entropy(value: &str) -> bool {
    if value.len() < 32 || value.contains("://") || value.starts_with('/') {
        return false;
    }
    let token = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "+/=_-".contains(c));
    let letters = value.chars().any(|c| c.is_ascii_alphabetic());
    let digits = value.chars().any(|c| c.is_ascii_digit());
    if !(token && letters && digits) {
        return false;
    }
    let mut counts = [0u32; 128];
    for b in value.bytes() {
        counts[usize::from(b & 0x7f)] += 1;
    }
    let n = value.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum();
    entropy >= 3.5
}

/// A document's violations and, beside them, its warnings: things a valid
/// document should not do (a literal secret in `env`, a misspelt field).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Check {
    pub violations: Vec<Violation>,
    pub warnings: Vec<Warning>,
}

/// One warning of `check`: where, what, and the event hosts announce it under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub path: String,
    pub message: String,
    /// `literalSecret` (a literal secret in `env`), `unknownField` (an unknown
    /// field close to a known one: "did you mean") or `unusedAccount` (an account
    /// listed under `accounts` that no executor names). A module before 1.4 wrote none:
    /// its warnings were all literal secrets.
    #[serde(default = "literal_secret")]
    pub event: String,
}

fn literal_secret() -> String {
    "literalSecret".into()
}

/// `validate`, and the warnings of a document that may well be valid.
pub fn check(value: &Value, kinds: Option<&[String]>) -> Check {
    let named = |event: &str, found: Vec<Violation>| {
        let event = event.to_string();
        found.into_iter().map(move |v| Warning {
            path: v.path,
            message: v.message,
            event: event.clone(),
        })
    };
    Check {
        violations: validate(value, kinds),
        warnings: named("literalSecret", warnings(value))
            .chain(named("unknownField", crate::document::misspelt(value)))
            .chain(named(
                "unusedAccount",
                crate::document::unused_accounts(value),
            ))
            .collect(),
    }
}

/// The executors of a document, with their index (for paths).
fn executors(document: &Value) -> impl Iterator<Item = (usize, &serde_json::Map<String, Value>)> {
    document
        .get("executors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, x)| Some((i, x.as_object()?)))
}

/// A warning for every literal `env` value that names or looks like a secret (the
/// value itself is never quoted).
pub fn warnings(document: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    for (index, executor) in executors(document) {
        let Some(env) = executor.get("env").and_then(Value::as_object) else {
            continue;
        };
        let who = match executor.get("id").and_then(Value::as_str) {
            Some(id) => format!("executor '{id}'"),
            None => format!("executor #{}", index + 1),
        };
        for (key, value) in env {
            let Some(text) = value.as_str() else { continue };
            if text.is_empty() || is_reference(text) {
                continue;
            }
            let why = if looks_like_credential(text) {
                "looks like a credential"
            } else if names_a_secret(key) {
                "is under a key that names a secret"
            } else {
                continue;
            };
            out.push(Violation {
                path: format!("executors[{index}].env.{key}"),
                message: format!(
                    "{who} has a literal env.{key} that {why}; write it as a ${{VAR}} reference (secrets only as references)"
                ),
            });
        }
    }
    out
}

/// The document with every `env` value that is not a `${VAR}` reference replaced by
/// `[redacted]` (of every executor, and of a scheduler-style `workers` list).
pub fn redact(document: &Value) -> Value {
    let mut out = document.clone();
    for list in ["executors", "workers"] {
        let Some(entries) = out.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for entry in entries {
            let Some(env) = entry.get_mut("env").and_then(Value::as_object_mut) else {
                continue;
            };
            for value in env.values_mut() {
                let literal = value.as_str().is_none_or(|text| !is_reference(text));
                if literal {
                    *value = Value::String(REDACTED.to_string());
                }
            }
        }
    }
    out
}

/// Whether `redact` would change the document.
pub fn has_literal_env(document: &Value) -> bool {
    redact(document) != *document
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(env: Value) -> Value {
        json!({"executors": [{"id": "a", "harness": "pi", "roles": ["coder"], "env": env}]})
    }

    #[test]
    fn references_are_not_literals() {
        assert!(is_reference("${ANTHROPIC_API_KEY}"));
        assert!(is_reference("Bearer ${TOKEN}"));
        assert!(!is_reference("${}"));
        assert!(!is_reference("${1X}"));
        assert!(!is_reference("$TOKEN"));
        assert!(!is_reference("sk-ant-api03-abc"));
    }

    #[test]
    fn literal_secrets_are_warned_about() {
        let warned = |env: Value| {
            warnings(&doc(env))
                .into_iter()
                .map(|w| w.path)
                .collect::<Vec<_>>()
        };
        // Under a key naming a secret, whatever the value.
        assert_eq!(
            warned(json!({"ANTHROPIC_API_KEY": "hunter2"})),
            ["executors[0].env.ANTHROPIC_API_KEY"]
        );
        for key in [
            "GITHUB_TOKEN",
            "dbPassword",
            "CLIENT_SECRET",
            "AWS_CREDENTIALS",
            "AUTH_HEADER",
        ] {
            assert_eq!(warned(json!({ key: "x" })).len(), 1, "{key}");
        }
        // A value that looks like a credential, whatever the key.
        for value in [
            "sk-ant-api03-AbCdEf0123456789",
            "ghp_0123456789abcdefABCDEF",
            "xoxb-1234-5678-abcdefgh",
            "AKIAIOSFODNN7EXAMPLE",
            "q8Zr3vN0xYp5LmT2wKb7HsJ4cFd9GeA1",
        ] {
            assert_eq!(warned(json!({ "OPTS": value })).len(), 1, "{value}");
        }
        // References, plain settings, paths and URLs are fine.
        assert!(warned(json!({
            "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}",
            "LOG_LEVEL": "debug",
            "HOME_DIR": "/home/user/projects/some-long-directory-name-2024",
            "BASE": "https://api.example.com/v1/models/abcdefghij0123456789",
            "EMPTY_TOKEN": ""
        }))
        .is_empty());
    }

    #[test]
    fn a_warning_never_quotes_the_value() {
        let w = warnings(&doc(json!({"API_KEY": "sk-ant-api03-secretsecret"})));
        assert_eq!(w.len(), 1);
        assert!(!w[0].message.contains("secretsecret"), "{}", w[0].message);
    }

    #[test]
    fn redaction_keeps_references_only() {
        let redacted = redact(&doc(json!({
            "API_KEY": "sk-ant-api03-secretsecret",
            "LOG_LEVEL": "debug",
            "TOKEN": "${TOKEN}"
        })));
        assert_eq!(
            redacted["executors"][0]["env"],
            json!({"API_KEY": "[redacted]", "LOG_LEVEL": "[redacted]", "TOKEN": "${TOKEN}"})
        );
        // Everything else as it was; a document without env unchanged.
        assert_eq!(redacted["executors"][0]["harness"], json!("pi"));
        let plain = json!({"executors": [{"id": "a", "harness": "pi", "roles": ["coder"]}]});
        assert_eq!(redact(&plain), plain);
        assert!(!has_literal_env(&plain));
    }
}
