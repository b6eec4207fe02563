//! The one-pass parser behind `Document::from_json`: every violation with its place.

use serde_json::{Map, Value};

use crate::classify::Signals;
use crate::duration::parse_duration;
use crate::limits;
use crate::protocol::{Choice, Unservable};
use crate::sorted::SortedMap;
use crate::write::to_text;

mod budget;
mod effort;
mod failures;
mod floor;
mod tenants;

use super::{
    resolve_coder_slots_default, ClonesRule, CoderSlotsDefault, Document, ExecutorSpec, Fairness,
    Form, LeaseEventsRule, PreferRule, Priority, RecoveryRule, ResetTime, Rules, Violation,
    CODER_ROLE, DEFAULT_ROLES,
};

/// Where an executor is declared: its path (`executors[2]`, `workers.a`), its number
/// in its list (for one without an id), the map key naming it, and whether it is one
/// of the scheduler's workers.
#[derive(Clone, Copy)]
struct Place<'a> {
    place: &'a str,
    ordinal: usize,
    key: Option<&'a str>,
    worker: bool,
}

#[derive(Default)]
pub(super) struct Parser {
    pub(super) violations: Vec<Violation>,
    /// The `executors` entries' objects are moved into their specs' `raw` after the
    /// parse (`Document::from_owned_json`): not copied here.
    pub(super) executors_raw_later: bool,
    /// The document's default of an executor's `coderSlots` (read before them).
    pub(super) coder_slots_default: CoderSlotsDefault,
    /// The document's `recovery` and `exclusion.consecutiveFailures`: each
    /// executor's own fields start from them (read before them).
    pub(super) recovery: RecoveryRule,
    pub(super) consecutive_failures: u32,
}

impl Parser {
    fn fail(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.violations.push(Violation {
            path: path.into(),
            message: message.into(),
        });
    }

    pub(super) fn document(&mut self, value: &Value, kinds: Option<&[String]>) -> Option<Document> {
        let Some(object) = value.as_object() else {
            self.fail(
                "$",
                "a roster document is a JSON object with an `executors` array",
            );
            return None;
        };
        let roles = self.roles(object.get("roles"));
        let signals = object
            .get("signals")
            .map(|value| {
                let mut found = Vec::new();
                let signals = Signals::from_json(value, &mut found);
                self.violations.extend(
                    found
                        .into_iter()
                        .map(|(path, message)| Violation { path, message }),
                );
                signals
            })
            .unwrap_or_default();
        let workers = object.get("workers");
        let form = if workers.is_some() && !object.contains_key("executors") {
            Form::Workers
        } else {
            Form::Roster
        };
        // (list, index in it, name from a map key, entry, worker): executors, then the
        // scheduler's workers. An entry's place is written when it is read (one
        // string at a time: 10,000 of them at once stayed in the module's memory).
        let mut entries: Vec<(&str, usize, Option<&str>, &Value, bool)> = Vec::new();
        let executors_given = object
            .get("executors")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        match object.get("executors") {
            Some(Value::Array(items)) => entries.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| ("executors", i, None, v, false)),
            ),
            None if workers.is_some() => {}
            _ => {
                self.fail(
                    "executors",
                    "a roster document needs an `executors` array (it may be empty)",
                );
                return None;
            }
        }
        match workers {
            None => {}
            Some(Value::Array(items)) => entries.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| ("workers", i, None, v, true)),
            ),
            Some(Value::Object(map)) => entries.extend(
                map.iter()
                    .map(|(name, v)| ("workers", 0, Some(name.as_str()), v, true)),
            ),
            Some(_) => {
                self.fail(
                    "workers",
                    "`workers` is a list of workers, or a map of them keyed by name",
                );
                return None;
            }
        }
        let choice = self.named(object, "choice", Choice::from_json, Choice::NAMES);
        let unservable = self.named(
            object,
            "unservable",
            Unservable::from_json,
            Unservable::NAMES,
        );
        let rules = self.named(object, "rules", Rules::from_json, Rules::NAMES);
        let prefer = self.named(object, "prefer", PreferRule::from_json, PreferRule::NAMES);
        let coder_slots_default = self.named(
            object,
            "coderSlotsDefault",
            CoderSlotsDefault::from_json,
            CoderSlotsDefault::NAMES,
        );
        let reset_time = self.named(object, "resetTime", ResetTime::from_json, ResetTime::NAMES);
        self.coder_slots_default = resolve_coder_slots_default(coder_slots_default, rules);
        let clones = self.named(object, "clones", ClonesRule::from_json, ClonesRule::NAMES);
        let lease_events = self.named(
            object,
            "leaseEvents",
            LeaseEventsRule::from_json,
            LeaseEventsRule::NAMES,
        );
        self.recovery = self.recovery(object.get("recovery"), "recovery", RecoveryRule::default());
        self.consecutive_failures = self.exclusion(object.get("exclusion"), "exclusion", 0);
        let accounts = self.accounts(object.get("accounts"));
        let max_excluded = self.max_excluded(object.get("maxExcluded"), &roles);
        let fairness = self.named(object, "fairness", Fairness::from_json, Fairness::NAMES);
        let tenants = self.tenants(object.get("tenants"));
        let affinity_ttl = object.get("affinityTtl").filter(|v| !v.is_null()).and_then(|v| {
            let ms = v.as_str().and_then(parse_duration).filter(|&ms| ms > 0);
            if ms.is_none() {
                self.fail(
                    "affinityTtl",
                    "`affinityTtl` is a duration longer than 0, such as \"10 minutes\" (how long an idle affinity key is remembered)",
                );
            }
            ms
        });
        if entries.len() > limits::MAX_EXECUTORS {
            self.fail(
                "executors",
                format!(
                    "the roster has {} executors; the most is {}",
                    entries.len(),
                    limits::MAX_EXECUTORS
                ),
            );
        }
        let mut executors = Vec::new();
        let mut seen = Vec::new();
        for (index, (list, at, key, entry, worker)) in entries.into_iter().enumerate() {
            let place = match key {
                Some(name) => format!("{list}.{name}"),
                None => format!("{list}[{at}]"),
            };
            // "executor #3" names an entry without an id in the roster's wording.
            let ordinal = if worker {
                index - executors_given
            } else {
                index
            } + 1;
            let at = Place {
                place: &place,
                ordinal,
                key,
                worker,
            };
            if let Some(spec) = self.executor(at, entry, &roles, kinds) {
                if !spec.id.trim().is_empty()
                    && !crate::sorted::set_insert(&mut seen, spec.id.clone())
                {
                    let field = if worker { "name" } else { "id" };
                    self.fail(
                        format!("{place}.{field}"),
                        format!("executor '{}' is listed twice", spec.id),
                    );
                }
                executors.push(spec);
            }
        }
        Some(Document {
            roles,
            executors,
            form,
            choice,
            unservable,
            rules,
            prefer,
            coder_slots_default,
            clones,
            lease_events,
            reset_time,
            affinity_ttl,
            accounts,
            max_excluded,
            fairness,
            tenants,
            signals,
            raw: Value::Null,
            executors_in_specs: None,
        })
    }

    /// A top-level field that names one of `names` (absent or `null`: `None`); any
    /// other value is a violation naming the field and every allowed value.
    fn named<T>(
        &mut self,
        object: &Map<String, Value>,
        field: &str,
        read: fn(&Value) -> crate::read::Read<T>,
        names: &[&str],
    ) -> Option<T> {
        let value = object.get(field).filter(|v| !v.is_null())?;
        let read = read(value).ok();
        if read.is_none() {
            let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
            let (last, rest) = quoted.split_last()?;
            let allowed = if rest.is_empty() {
                last.clone()
            } else {
                format!("{} or {last}", rest.join(", "))
            };
            self.fail(field, format!("`{field}` is {allowed}"));
        }
        read
    }

    fn roles(&mut self, value: Option<&Value>) -> Vec<String> {
        let default = || DEFAULT_ROLES.iter().map(|r| r.to_string()).collect();
        let Some(value) = value else {
            return default();
        };
        let Some(items) = value.as_array() else {
            self.fail("roles", "`roles` is a list of role names");
            return default();
        };
        if items.len() > limits::MAX_ROLES {
            self.fail(
                "roles",
                format!(
                    "the document declares {} roles; the most is {}",
                    items.len(),
                    limits::MAX_ROLES
                ),
            );
            return default();
        }
        let mut roles: Vec<String> = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(name) if name.len() > limits::MAX_ID_BYTES => self.fail(
                    format!("roles[{index}]"),
                    format!(
                        "a role name is {} bytes long; the most is {}",
                        name.len(),
                        limits::MAX_ID_BYTES
                    ),
                ),
                Some(name) if !name.trim().is_empty() => {
                    if roles.iter().any(|r| r == name) {
                        self.fail(
                            format!("roles[{index}]"),
                            format!("role '{name}' is listed twice"),
                        );
                    } else {
                        roles.push(name.to_string());
                    }
                }
                _ => self.fail(format!("roles[{index}]"), "a role is a non-empty string"),
            }
        }
        if roles.is_empty() {
            self.fail("roles", "a declared role list needs at least one role");
            return default();
        }

        roles
    }

    /// One executor at `place` (`executors[2]`, `workers[0]`, `workers.a`). A
    /// scheduler `worker` is named by `name` (or its map `key`), needs no harness and
    /// takes every role unless it lists its own.
    fn executor(
        &mut self,
        place: Place,
        value: &Value,
        roles: &[String],
        kinds: Option<&[String]>,
    ) -> Option<ExecutorSpec> {
        let Place {
            place,
            ordinal,
            key,
            worker,
        } = place;
        let at = |field: &str| format!("{place}.{field}");
        let Some(object) = value.as_object() else {
            let what = if worker { "a worker" } else { "an executor" };
            self.fail(place, format!("{what} is a JSON object"));
            return None;
        };
        let id_field = if worker { "name" } else { "id" };
        let id = match (object.get(id_field), key) {
            (Some(Value::String(id)), _) if id.len() > limits::MAX_ID_BYTES => {
                self.fail(
                    at(id_field),
                    format!(
                        "an executor's {id_field} is {} bytes long; the most is {}",
                        id.len(),
                        limits::MAX_ID_BYTES
                    ),
                );
                String::new()
            }
            (Some(Value::String(id)), Some(key)) if id != key => {
                self.fail(
                    at(id_field),
                    format!("worker '{key}' has the name '{id}'; give one"),
                );
                key.to_string()
            }
            (None, Some(key)) if key.len() > limits::MAX_ID_BYTES => {
                self.fail(
                    place,
                    format!(
                        "a worker's name is {} bytes long; the most is {}",
                        key.len(),
                        limits::MAX_ID_BYTES
                    ),
                );
                String::new()
            }
            (None, Some(key)) if !key.trim().is_empty() => key.to_string(),
            (Some(Value::String(id)), _) if !id.trim().is_empty() => id.clone(),
            (Some(Value::String(_)), _) | (None, Some(_)) => {
                self.fail(at(id_field), format!("an executor has an empty {id_field}"));
                String::new()
            }
            (Some(_), _) => {
                self.fail(
                    at(id_field),
                    format!("an executor's {id_field} is a string"),
                );
                String::new()
            }
            (None, None) => {
                self.fail(at(id_field), format!("an executor has no {id_field}"));
                String::new()
            }
        };
        let who = match (id.is_empty(), worker) {
            (true, true) => format!("worker #{ordinal}"),
            (true, false) => format!("executor #{ordinal}"),
            (false, true) => format!("worker '{id}'"),
            (false, false) => format!("executor '{id}'"),
        };
        let harness = match object.get("harness") {
            Some(Value::String(h)) if !h.trim().is_empty() => h.clone(),
            None if worker => String::new(),
            Some(Value::String(_)) | None => {
                self.fail(at("harness"), format!("{who} has no harness"));
                String::new()
            }
            Some(_) => {
                self.fail(
                    at("harness"),
                    format!("{who} has a harness that is not a string"),
                );
                String::new()
            }
        };
        let model = self.optional_string(object, "model", &at("model"), &who);
        let account = match object.get("account") {
            None => None,
            Some(Value::String(name)) if !name.trim().is_empty() => Some(name.clone()),
            Some(_) => {
                self.fail(
                    at("account"),
                    format!("{who} has an `account` that is not a non-empty string"),
                );
                None
            }
        };
        for field in ["baseUrl", "kind"] {
            self.optional_string(object, field, &at(field), &who);
        }
        for field in ["flags", "env"] {
            if let Some(value) = object.get(field) {
                let ok = value
                    .as_object()
                    .is_some_and(|m| m.values().all(Value::is_string));
                if !ok {
                    self.fail(
                        at(field),
                        format!("{who} has a `{field}` that is not a record of strings"),
                    );
                }
            }
        }
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .map(str::to_string);
        match (kinds, &kind) {
            (Some(kinds), Some(kind)) if !kinds.iter().any(|k| k == kind) => self.fail(
                at("kind"),
                format!(
                    "{who} has kind '{kind}', and this host runs only: {}",
                    kinds.join(", ")
                ),
            ),
            // The seed's `validateWorkers` refuses a worker whose kind is not the
            // executor's, and a missing kind is not it.
            (Some(kinds), None) => self.fail(
                at("kind"),
                format!(
                    "{who} has no kind, and this host runs only: {}",
                    kinds.join(", ")
                ),
            ),
            _ => {}
        }

        // Roles: unknown ones are named with the list of known ones.
        let mut own_roles: Vec<String> = Vec::new();
        match object.get("roles") {
            Some(Value::Array(items)) => {
                let mut unknown = Vec::new();
                for item in items {
                    match item.as_str() {
                        Some(role) if roles.iter().any(|r| r == role) => {
                            if !own_roles.iter().any(|r| r == role) {
                                own_roles.push(role.to_string());
                            }
                        }
                        Some(role) => unknown.push(role.to_string()),
                        None => unknown.push(to_text(item)),
                    }
                }
                if !unknown.is_empty() {
                    self.fail(
                        at("roles"),
                        format!(
                            "{who} has unknown role(s) {} (roles: {})",
                            unknown.join(", "),
                            roles.join(", ")
                        ),
                    );
                }
                if own_roles.is_empty() {
                    self.fail(at("roles"), format!("{who} takes no role"));
                }
            }
            Some(_) => self.fail(at("roles"), format!("{who} has roles that are not a list")),
            // The scheduler's workers take every run, whatever the role.
            None if worker => own_roles = roles.to_vec(),
            None => self.fail(at("roles"), format!("{who} takes no role")),
        }

        // Slots, under the roster's name or the scheduler's.
        let slots_of = |parser: &mut Parser, field: &str| -> Option<u32> {
            let value = object.get(field)?;
            match whole_number(value) {
                Some(n) if n >= 1 && n <= u32::MAX as u64 => Some(n as u32),
                _ => {
                    parser.fail(
                        at(field),
                        format!("{who} needs a whole number of slots, at least 1"),
                    );
                    None
                }
            }
        };
        let mut slots = slots_of(self, "slots");
        // The scheduler's name, and its YAML config's.
        for alias in ["maxConcurrentAttempts", "max_concurrent_attempts"] {
            let given = slots_of(self, alias);
            match (slots, given) {
                (Some(a), Some(b)) if a != b => self.fail(
                    at(alias),
                    format!("{who} has slots {a} and {alias} {b}; give one"),
                ),
                (None, Some(_)) => slots = given,
                _ => {}
            }
        }
        let slots = slots.unwrap_or(1);

        // Role caps: `roleSlots` for any role, `coderSlots` for the coder role.
        let mut role_caps = SortedMap::new();
        if let Some(value) = object.get("roleSlots") {
            match value.as_object() {
                Some(caps) => {
                    for (role, cap) in caps {
                        let path = format!("{place}.roleSlots.{role}");
                        if !roles.iter().any(|r| r == role) {
                            self.fail(
                                path,
                                format!(
                                    "{who} caps unknown role '{role}' (roles: {})",
                                    roles.join(", ")
                                ),
                            );
                            continue;
                        }
                        match whole_number(cap) {
                            Some(n) if n <= slots as u64 => {
                                role_caps.insert(role.clone(), n as u32);
                            }
                            _ => self
                                .fail(path, format!("{who} has roleSlots.{role} outside 0..slots")),
                        }
                    }
                }
                None => self.fail(
                    at("roleSlots"),
                    format!("{who} has roleSlots that are not a record of role caps"),
                ),
            }
        }
        if let Some(value) = object.get("coderSlots") {
            match whole_number(value) {
                Some(n) if n <= slots as u64 => {
                    if let Some(other) = role_caps.get(CODER_ROLE) {
                        if *other as u64 != n {
                            self.fail(
                                at("coderSlots"),
                                format!("{who} has coderSlots {n} and roleSlots.coder {other}; give one"),
                            );
                        }
                    }
                    role_caps.insert(CODER_ROLE.to_string(), n as u32);
                }
                _ => self.fail(
                    at("coderSlots"),
                    format!("{who} has coderSlots outside 0..slots"),
                ),
            }
        }
        // One slot stays free for reasoning on an executor that codes and reasons
        // (the roster seed's coderSlotsOf; `coderSlotsDefault: "slots"` keeps none); a
        // scheduler worker takes every run up to its slots, whatever the role (the
        // scheduler seed's workerFor).
        let codes = own_roles.iter().any(|r| r == CODER_ROLE);
        let reasons = own_roles.iter().any(|r| r != CODER_ROLE);
        let reserve = self.coder_slots_default == CoderSlotsDefault::SlotsMinusOne;
        if reserve
            && !worker
            && codes
            && reasons
            && slots > 1
            && !role_caps.contains_key(CODER_ROLE)
        {
            role_caps.insert(CODER_ROLE.to_string(), slots - 1);
        }

        let priority = self.priority(object.get("priority"), &at("priority"), &who, roles);
        let effort = object
            .get("effort")
            .and_then(|value| self.effort(value, &at("effort"), &who, roles));
        let health = match object.get("health") {
            None => None,
            Some(Value::String(url)) if is_http_url(url) => Some(url.clone()),
            Some(other) => {
                self.fail(
                    at("health"),
                    format!(
                        "{who} has a health URL {other} that is not an http:// or https:// URL with a host"
                    ),
                );
                None
            }
        };
        let cooldown = self.cooldown(object.get("cooldown"), place, &who);
        let recovery = self.recovery(object.get("recovery"), &at("recovery"), self.recovery);
        let consecutive_failures = self.exclusion(
            object.get("exclusion"),
            &at("exclusion"),
            self.consecutive_failures,
        );
        let budget = object
            .get("budget")
            .and_then(|value| self.budget(value, &at("budget"), &who));
        let weight = match object.get("weight").map(whole_number) {
            None => 1,
            Some(Some(n)) if (1..=u64::from(limits::MAX_WEIGHT)).contains(&n) => n as u32,
            Some(_) => {
                self.fail(
                    at("weight"),
                    format!("{who} has a weight that is not a whole number from 1 to 1000"),
                );
                1
            }
        };
        let disabled = match object.get("disabled") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.fail(
                    at("disabled"),
                    format!("{who} has `disabled` that is not true or false"),
                );
                false
            }
        };
        let provision = match object.get("provision") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(_) => true,
        };
        Some(ExecutorSpec {
            id,
            harness,
            model,
            roles: own_roles,
            slots,
            role_caps,
            priority,
            effort,
            health,
            cooldown,
            recovery,
            consecutive_failures,
            disabled,
            provision,
            kind,
            budget,
            account,
            weight,
            raw: if worker {
                super::worker_entry(object, key)
            } else if self.executors_raw_later {
                Map::new()
            } else {
                object.clone()
            },
        })
    }

    fn optional_string(
        &mut self,
        object: &Map<String, Value>,
        field: &str,
        path: &str,
        who: &str,
    ) -> Option<String> {
        match object.get(field) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.fail(path, format!("{who} has a `{field}` that is not a string"));
                None
            }
        }
    }

    fn priority(
        &mut self,
        value: Option<&Value>,
        path: &str,
        who: &str,
        roles: &[String],
    ) -> Priority {
        let number = |v: &Value| v.as_f64().filter(|n| n.is_finite());
        match value {
            None => Priority::All(1.0),
            Some(Value::Number(_)) => match value.and_then(number) {
                Some(p) => Priority::All(p),
                None => {
                    self.fail(
                        path,
                        format!("{who} has a priority that is not a finite number"),
                    );
                    Priority::All(1.0)
                }
            },
            Some(Value::Object(entries)) => {
                let mut per_role = SortedMap::new();
                let mut default = None;
                for (key, item) in entries {
                    let Some(p) = number(item) else {
                        self.fail(
                            format!("{path}.{key}"),
                            format!("{who} has priority.{key} that is not a number"),
                        );
                        continue;
                    };
                    if key == "default" {
                        default = Some(p);
                    } else if roles.iter().any(|r| r == key) {
                        per_role.insert(key.clone(), p);
                    } else {
                        self.fail(
                            format!("{path}.{key}"),
                            format!(
                                "{who} has a priority for unknown role '{key}' (roles: {}, or default)",
                                roles.join(", ")
                            ),
                        );
                    }
                }
                Priority::PerRole {
                    roles: per_role,
                    default,
                }
            }
            Some(_) => {
                self.fail(
                    path,
                    format!("{who} has a priority that is neither a number nor a per-role record"),
                );
                Priority::All(1.0)
            }
        }
    }
}

/// A JSON number that is a whole, non-negative integer (`2` or `2.0`).
fn whole_number(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    (f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_991.0).then_some(f as u64)
}

/// `http://host...` or `https://host...`, with a non-empty host and no spaces.
fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let Some(rest) = rest else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or("");
    let name = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    !name.is_empty() && !url.chars().any(char::is_whitespace)
}
