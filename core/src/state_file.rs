//! The state file's rule, once for every host: parse, merge, render, restore.
//!
//! The roster seed saves its exclusions with @llm4ts/flow's `saveVersioned`: the text
//! `JSON.stringify({ schemaVersion: 1, value: { exclusions } }, undefined, 2) + "\n"`,
//! each exclusion `{ id, reason, kind, until? }`. [`render`] writes exactly those bytes;
//! [`parse`] reads them, and the `{ "version": 1, "exclusions" }` files rota's earlier
//! releases wrote. Hosts do the IO (lock, read, write, set a bad file aside) and call
//! these functions for every decision about the contents.
//!
//! **One rule for what is live** ([`live`], the seed's `makeRosterStateStore.read`): a
//! `run` exclusion never is; an `until` one is while its `until` is later than `now`
//! (without `until` it has ended); a `manual` one is until its `until`, if it has one;
//! a `health` one always is. It applies to every entry read from a file, on load
//! ([`restore_state`]: what a `restore` input gets) and on merge (the entries a write
//! keeps), as in the seed, whose save is "read (with that filter), replace my ids".
//!
//! **Merge** ([`merge`]): the file's live entries, in file order, minus those whose id
//! a `persist` names (its `ids`, or one of its entries), then that persist's entries
//! (never a `run` one); persists apply in order. Entries of executors this roster does
//! not have are kept as they were read. What the seed's schema does not hold is not
//! kept either: unknown fields of an entry, and top-level fields beside the envelope.
//!
//! **Numbers**: `until` is epoch milliseconds, read as the seed's `Schema.Number`
//! allows: a fraction is rounded up to the next millisecond, and values are clamped to
//! `0..=2^53-1` (JS's safe integers), so a written `until` is always digits only, as
//! `JSON.stringify` writes such a number.

use serde_json::Value;

use crate::error::Error;
use crate::protocol::{Exclusion, ExclusionKind, PersistedState, STATE_VERSION};
use crate::read::{self, object, Read};
use crate::write::{write_serialized, write_str, write_u64};

/// The largest integer JS holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE: u64 = (1 << 53) - 1;

/// Which envelope a file was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The seed's `{ "schemaVersion": 1, "value": { "exclusions": [...] } }`.
    Seed,
    /// rota's earlier `{ "version": 1, "exclusions": [...] }`.
    Rota,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Seed => "seed",
            Format::Rota => "rota",
        }
    }
}

/// A parsed state file: its entries in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    pub format: Format,
    pub exclusions: Vec<Exclusion>,
}

impl Default for StateFile {
    fn default() -> Self {
        StateFile {
            format: Format::Seed,
            exclusions: Vec::new(),
        }
    }
}

/// Why a text is not a state file. Every variant has the code `STATE_FILE_CORRUPT`:
/// the host sets such a file aside and never writes over it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateFileError {
    #[error("the state file is not JSON: {0}")]
    NotJson(String),
    /// What was found instead of an envelope rota reads; the message names both.
    #[error(
        "the state file's envelope is wrong: {0}; rota reads {{\"schemaVersion\": 1, \"value\": \
         {{\"exclusions\": [...]}}}} (or its earlier {{\"version\": 1, \"exclusions\": [...]}})"
    )]
    Envelope(String),
    #[error("the state file's {place}: {message}")]
    Entry { place: String, message: String },
}

impl StateFileError {
    pub const CODE: &'static str = "STATE_FILE_CORRUPT";

    pub fn code(&self) -> &'static str {
        Self::CODE
    }
}

/// One `persist` output's content: the ids it replaces and their entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persist {
    pub ids: Vec<String>,
    pub exclusions: Vec<Exclusion>,
}

/// Reads a state file's text in either envelope.
pub fn parse(text: &str) -> Result<StateFile, StateFileError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| StateFileError::NotJson(e.to_string()))?;
    let envelope = |m: &str| StateFileError::Envelope(m.to_string());
    let top = value.as_object().ok_or_else(|| {
        envelope(&format!(
            "the top level is {}, not an object",
            json_kind(&value)
        ))
    })?;
    let (format, list, place) = if let Some(version) = top.get("schemaVersion") {
        // The seed's loadVersioned: `schemaVersion` an integer, equal to 1.
        match version.as_f64() {
            Some(v) if v == f64::from(STATE_VERSION) => {}
            Some(v) if v.fract() == 0.0 => {
                return Err(envelope(&format!("`schemaVersion` is {version}")))
            }
            _ => {
                return Err(envelope(&format!(
                    "`schemaVersion` is {version}, not an integer"
                )))
            }
        }
        let inner = match top.get("value") {
            Some(Value::Object(inner)) => inner,
            Some(other) => {
                return Err(envelope(&format!(
                    "`value` is {}, not an object",
                    json_kind(other)
                )))
            }
            None => return Err(envelope("`value` is missing")),
        };
        let list = inner
            .get("exclusions")
            .ok_or_else(|| envelope("`value.exclusions` is missing"))?;
        (Format::Seed, list, "value.exclusions")
    } else if let Some(version) = top.get("version") {
        if version.as_u64() != Some(u64::from(STATE_VERSION)) {
            return Err(envelope(&format!("`version` is {version}")));
        }
        // Its `exclusions` as required as the seed's `value.exclusions`: a `version: 1`
        // object without it is another program's file, set aside, not read as empty
        // (and then written over).
        let list = top
            .get("exclusions")
            .ok_or_else(|| envelope("`version` is 1, but `exclusions` is missing"))?;
        (Format::Rota, list, "exclusions")
    } else {
        const SHOWN: usize = 5;
        let mut keys: Vec<String> = top.keys().take(SHOWN).map(|k| format!("`{k}`")).collect();
        if top.len() > SHOWN {
            keys.push(format!("and {} more", top.len() - SHOWN));
        }
        return Err(envelope(&if keys.is_empty() {
            "an empty object, without `schemaVersion` or `version`".to_string()
        } else {
            format!(
                "neither `schemaVersion` nor `version`, only {}",
                keys.join(", ")
            )
        }));
    };
    let items = match list {
        Value::Array(items) => &items[..],
        other => {
            return Err(envelope(&format!(
                "`{place}` is {}, not an array",
                json_kind(other)
            )))
        }
    };
    let exclusions = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            entry(item).map_err(|message| StateFileError::Entry {
                place: format!("{place}[{i}]"),
                message,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(StateFile { format, exclusions })
}

/// What a JSON value is, for a message: "an array", "a string" ...
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One entry as the seed's `Exclusion` schema reads it (unknown fields ignored).
fn entry(value: &Value) -> Read<Exclusion> {
    let o = object(value, "an exclusion object")?;
    Ok(Exclusion {
        id: read::at("id", o.req("id", read::string))?,
        reason: read::at("reason", o.req("reason", read::string))?,
        kind: read::at("kind", o.req("kind", ExclusionKind::from_json))?,
        until: read::at("until", o.opt("until", millis))?,
    })
}

/// Epoch ms as JS holds them: fractions round up, clamped to `0..=2^53-1`.
fn millis(value: &Value) -> Read<u64> {
    match value {
        Value::Number(n) => Ok(match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => u.min(MAX_SAFE),
            (None, Some(f)) if f <= 0.0 => 0,
            // `as` saturates; the ceiling keeps "until" from ending early.
            (None, Some(f)) => (f.ceil() as u64).min(MAX_SAFE),
            (None, None) => 0,
        }),
        _ => Err(read::invalid_type(value, "a number")),
    }
}

/// Whether an entry read from a file still holds at `now` (see the module docs).
pub fn live(exclusion: &Exclusion, now: u64) -> bool {
    match exclusion.kind {
        ExclusionKind::Run => false,
        ExclusionKind::Until => exclusion.until.is_some_and(|t| t > now),
        ExclusionKind::Manual => exclusion.until.is_none_or(|t| t > now),
        ExclusionKind::Health => true,
    }
}

/// What a `restore` input gets from a file: its live entries (the core skips those of
/// executors it does not have).
pub fn restore_state(file: &StateFile, now: u64) -> PersistedState {
    PersistedState {
        version: STATE_VERSION,
        exclusions: file
            .exclusions
            .iter()
            .filter(|x| live(x, now))
            .cloned()
            .collect(),
    }
}

/// The file after `persists` (in order), from `file` (`None`: there is none yet).
pub fn merge(file: Option<&StateFile>, persists: &[Persist], now: u64) -> StateFile {
    let mut exclusions: Vec<Exclusion> = file.map_or_else(Vec::new, |f| {
        f.exclusions
            .iter()
            .filter(|x| live(x, now))
            .cloned()
            .collect()
    });
    for persist in persists {
        exclusions.retain(|x| {
            !persist.ids.contains(&x.id) && !persist.exclusions.iter().any(|p| p.id == x.id)
        });
        exclusions.extend(
            persist
                .exclusions
                .iter()
                .filter(|x| x.kind != ExclusionKind::Run)
                .cloned(),
        );
    }
    StateFile {
        format: Format::Seed,
        exclusions,
    }
}

/// The seed's bytes: `JSON.stringify({ schemaVersion: 1, value: { exclusions } },
/// undefined, 2) + "\n"`. serde_json escapes strings as `JSON.stringify` does (`"`,
/// `\`, `\b\f\n\r\t`, other controls as lowercase `\u00xx`, everything else as is,
/// U+2028 included); numbers are integers (see [`millis`]).
pub fn render(file: &StateFile) -> String {
    let mut out = Vec::with_capacity(64 + 96 * file.exclusions.len());
    out.extend_from_slice(b"{\n  \"schemaVersion\": 1,\n  \"value\": {\n    \"exclusions\": [");
    for (i, x) in file.exclusions.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"\n" } else { b",\n" });
        out.extend_from_slice(b"      {\n        \"id\": ");
        write_str(&mut out, &x.id);
        out.extend_from_slice(b",\n        \"reason\": ");
        write_str(&mut out, &x.reason);
        out.extend_from_slice(b",\n        \"kind\": ");
        write_str(&mut out, x.kind.name());
        if let Some(until) = x.until {
            out.extend_from_slice(b",\n        \"until\": ");
            write_u64(&mut out, until.min(MAX_SAFE));
        }
        out.extend_from_slice(b"\n      }");
    }
    if !file.exclusions.is_empty() {
        out.extend_from_slice(b"\n    ");
    }
    out.extend_from_slice(b"]\n  }\n}\n");
    // Only whole strings and ASCII were written.
    String::from_utf8(out).unwrap_or_default()
}

/// Where a file that cannot be parsed is set aside (beside it, never over another):
/// `<name>.corrupt-<ISO time without colons>`, then `-1`, `-2` ... while taken.
/// `2027-01-15T08:00:00.000Z` gives `state.json.corrupt-2027-01-15T080000.000Z`.
pub fn aside_name(name: &str, now: u64, attempt: u32) -> String {
    let time: String = crate::time::iso(now)
        .chars()
        .filter(|&c| c != ':')
        .collect();
    match attempt {
        0 => format!("{name}.corrupt-{time}"),
        n => format!("{name}.corrupt-{time}-{n}"),
    }
}

// ---- the hosts' one entry: a request in JSON, an answer in JSON --------------------

/// Answers one request (the plain ABI's `rota_state_file`, the JS build's
/// `stateFileJson`, the conformance vectors' `state-file/*.json`):
///
/// | `op` | fields | `ok` |
/// |---|---|---|
/// | `parse` | `text` | `{"format": "seed"\|"rota", "exclusions": [...]}` |
/// | `restore` | `text`, `now` | the `state` of a `restore` input |
/// | `merge` | `existing` (text or `null`), `persists` (`persist` outputs), `now` | the text to write |
/// | `render` | `exclusions` | the text |
/// | `asideName` | `name`, `now`, `attempt`? | where a corrupt file goes ([`aside_name`]) |
///
/// A bad file is `{"error": {"code": "STATE_FILE_CORRUPT", "message"}}`; a bad request
/// `INVALID_INPUT`.
pub fn answer(request: &str) -> String {
    let mut out = Vec::new();
    match answer_value(request, &mut out) {
        Ok(()) => {}
        Err((code, message)) => {
            out.clear();
            out.extend_from_slice(b"{\"error\":{\"code\":");
            write_str(&mut out, code);
            out.extend_from_slice(b",\"message\":");
            write_str(&mut out, &message);
            out.extend_from_slice(b"}}");
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

type Answer = Result<(), (&'static str, String)>;

fn corrupt(e: StateFileError) -> (&'static str, String) {
    (e.code(), e.to_string())
}

fn bad_request(message: String) -> (&'static str, String) {
    let e = Error::input(format!("state file request: {message}"));
    (e.code(), e.to_string())
}

fn answer_value(request: &str, out: &mut Vec<u8>) -> Answer {
    let value: Value =
        serde_json::from_str(request).map_err(|e| bad_request(format!("not JSON: {e}")))?;
    let o = object(&value, "a request object").map_err(bad_request)?;
    let text = || read::at("text", o.req("text", read::string)).map_err(bad_request);
    let now = || read::at("now", o.req("now", read::u64)).map_err(bad_request);
    out.extend_from_slice(b"{\"ok\":");
    match o.req("op", read::string).map_err(bad_request)?.as_str() {
        "parse" => {
            let file = parse(&text()?).map_err(corrupt)?;
            out.extend_from_slice(b"{\"format\":");
            write_str(out, file.format.name());
            out.extend_from_slice(b",\"exclusions\":");
            write_serialized(out, &file.exclusions);
            out.push(b'}');
        }
        "restore" => {
            let file = parse(&text()?).map_err(corrupt)?;
            write_serialized(out, &restore_state(&file, now()?));
        }
        "merge" => {
            let existing =
                read::at("existing", o.opt("existing", read::string)).map_err(bad_request)?;
            let persists = read::at("persists", o.req("persists", |v| read::list(v, persist_of)))
                .map_err(bad_request)?;
            let now = now()?;
            let file = existing.map(|t| parse(&t)).transpose().map_err(corrupt)?;
            write_str(out, &render(&merge(file.as_ref(), &persists, now)));
        }
        "render" => {
            let exclusions = read::at(
                "exclusions",
                o.req("exclusions", |v| read::list(v, Exclusion::from_json)),
            )
            .map_err(bad_request)?;
            let file = StateFile {
                format: Format::Seed,
                exclusions,
            };
            write_str(out, &render(&file));
        }
        "asideName" => {
            let name = read::at("name", o.req("name", read::string)).map_err(bad_request)?;
            let attempt =
                read::at("attempt", o.or("attempt", read::u32, 0)).map_err(bad_request)?;
            write_str(out, &aside_name(&name, now()?, attempt));
        }
        other => {
            return Err(bad_request(format!(
                "unknown op '{other}' (parse, restore, merge, render, asideName)"
            )))
        }
    }
    out.push(b'}');
    Ok(())
}

/// A `persist` output (or `{ids, state}`) as a [`Persist`].
fn persist_of(value: &Value) -> Read<Persist> {
    let o = object(value, "a persist output")?;
    let state = o.req("state", PersistedState::from_json)?;
    Ok(Persist {
        ids: o.req("ids", read::strings)?,
        exclusions: state.exclusions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(id: &str, kind: ExclusionKind, until: Option<u64>) -> Exclusion {
        Exclusion {
            id: id.into(),
            reason: format!("{id} reason"),
            kind,
            until,
        }
    }

    #[test]
    fn renders_the_seeds_envelope() {
        let empty = render(&StateFile::default());
        assert_eq!(
            empty,
            "{\n  \"schemaVersion\": 1,\n  \"value\": {\n    \"exclusions\": []\n  }\n}\n"
        );
        let file = StateFile {
            format: Format::Seed,
            exclusions: vec![
                x("a", ExclusionKind::Until, Some(5)),
                x("b", ExclusionKind::Health, None),
            ],
        };
        let text = render(&file);
        assert!(text.contains("\"kind\": \"until\",\n        \"until\": 5\n      },\n      {"));
        assert_eq!(parse(&text).unwrap(), file);
    }

    #[test]
    fn reads_both_envelopes_and_names_what_is_wrong() {
        let old = parse(r#"{"version":1,"exclusions":[{"id":"a","reason":"r","kind":"manual"}]}"#)
            .unwrap();
        assert_eq!(old.format, Format::Rota);
        // As required as the seed's `value.exclusions`: never read as empty.
        let missing = parse(r#"{"version":1}"#).unwrap_err().to_string();
        assert!(missing.contains("`exclusions` is missing"), "{missing}");
        let bad = parse(
            r#"{"schemaVersion":1,"value":{"exclusions":[{"id":"a","reason":"r","kind":"x"}]}}"#,
        )
        .unwrap_err();
        assert!(
            bad.to_string()
                .contains("value.exclusions[0]: kind: unknown variant `x`"),
            "{bad}"
        );
        assert!(matches!(parse("{"), Err(StateFileError::NotJson(_))));
        assert!(matches!(parse("{}"), Err(StateFileError::Envelope(_))));
        // What was found and what rota reads, never "not a state file" alone.
        for (text, found) in [
            ("[]", "the top level is an array, not an object"),
            (
                r#"{"executors":[]}"#,
                "neither `schemaVersion` nor `version`, only `executors`",
            ),
            (r#"{"schemaVersion":1,"value":[]}"#, "`value` is an array"),
            (r#"{"version":2}"#, "`version` is 2"),
        ] {
            let message = parse(text).unwrap_err().to_string();
            assert!(
                message.contains(found) && message.contains(r#"rota reads {"schemaVersion": 1"#),
                "{text}: {message}"
            );
            assert!(!message.contains("not a state file"), "{message}");
        }
        assert!(matches!(
            parse(r#"{"schemaVersion":2,"value":{"exclusions":[]}}"#),
            Err(StateFileError::Envelope(_))
        ));
    }

    #[test]
    fn merge_replaces_ids_keeps_others_drops_run_and_what_ended() {
        let file = StateFile {
            format: Format::Rota,
            exclusions: vec![
                x("mine", ExclusionKind::Health, None),
                x("other", ExclusionKind::Manual, None),
                x("ended", ExclusionKind::Until, Some(10)),
                x("no-end", ExclusionKind::Until, None),
                x("run", ExclusionKind::Run, None),
            ],
        };
        let persist = Persist {
            ids: vec!["mine".into(), "new".into()],
            exclusions: vec![
                x("new", ExclusionKind::Until, Some(100)),
                x("r", ExclusionKind::Run, None),
            ],
        };
        let merged = merge(Some(&file), &[persist], 10);
        let ids: Vec<&str> = merged.exclusions.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(ids, ["other", "new"]);
    }

    #[test]
    fn until_is_a_js_number() {
        let t = |n: &str| {
            let text = format!(
                r#"{{"schemaVersion":1,"value":{{"exclusions":[{{"id":"a","reason":"r","kind":"until","until":{n}}}]}}}}"#
            );
            parse(&text).unwrap().exclusions[0].until
        };
        assert_eq!(t("1.2"), Some(2));
        assert_eq!(t("-3"), Some(0));
        assert_eq!(t("1e300"), Some(MAX_SAFE));
        assert_eq!(t("1800000000000"), Some(1_800_000_000_000));
    }
}
