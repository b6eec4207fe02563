//! The options a host gives with the document (defaults are the seeds'), their
//! reader, their ranges ([`crate::limits`]) and their writer.

use serde::Serialize;
use serde_json::Value;

use super::{id_too_long, Level};
use crate::error::Error;
use crate::limits;
use crate::read::{self, object, unit_names, Read};

/// Options a host gives with the document. Defaults are the seeds'.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Options {
    /// Whether the host can probe health URLs. When it cannot, an outage on an
    /// executor with a health URL waits out the outage cooldown (the seed's fallback).
    pub can_probe: bool,
    /// How often a health exclusion is probed while a request waits that it could serve.
    pub health_probe_interval_ms: u64,
    /// How often it is probed while nobody waits for it.
    pub idle_probe_interval_ms: u64,
    /// Rate limits inside this window count towards an exclusion.
    pub rate_limit_window_ms: u64,
    /// Rate limits within the window that exclude an executor.
    pub rate_limits_to_exclude: u32,
    /// The first pause after a failed machine creation; it doubles per failure.
    pub provision_first_pause_ms: u64,
    /// The longest pause after failed machine creations.
    pub provision_max_pause_ms: u64,
    /// The host can preflight executors (it answers `preflight` outputs): every
    /// executor is preflighted before the roster serves, and a failure stops the start
    /// (the scheduler seed's startup preflight). Not written while false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub preflight: bool,
    /// Executors that a reload adds or grows must pass a host preflight first. When a
    /// host's options leave it out, it follows `preflight` (the seed preflights every
    /// reload whenever it can).
    pub preflight_reloads: bool,
    /// Which of the equal free executors takes a request; `None`: the document's, else
    /// its form's (`roundRobin` for a roster, `declared` for a scheduler's `workers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<Choice>,
    /// What becomes of a request nothing can ever serve; `None`: the document's, else
    /// its form's (`exhaust` for a roster, `wait` for a scheduler's `workers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unservable: Option<Unservable>,
    /// The executor kinds the host can run; `None` accepts any.
    pub kinds: Option<Vec<String>>,
    /// The least severe `event` output emitted: `debug` (every event, the default),
    /// `info` or `warn`. Only events are left out: every decision and effect is an
    /// output whatever the level. Not written while it is the default (so an exported
    /// state reads as before).
    #[serde(skip_serializing_if = "Level::is_debug")]
    pub min_event_level: Level,
    /// What `expireOwner` does with the gone owner's leases: `release` (the default),
    /// `keepMachines` (keep those holding a machine, whose work runs on) or `keep`.
    /// Not written while it is the default.
    #[serde(skip_serializing_if = "ExpiredOwnerLeases::is_release")]
    pub expired_owner_leases: ExpiredOwnerLeases,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            can_probe: true,
            health_probe_interval_ms: 15_000,
            idle_probe_interval_ms: 60_000,
            rate_limit_window_ms: 10 * 60_000,
            rate_limits_to_exclude: 3,
            provision_first_pause_ms: 30_000,
            provision_max_pause_ms: 10 * 60_000,
            preflight: false,
            preflight_reloads: false,
            choice: None,
            unservable: None,
            kinds: None,
            min_event_level: Level::Debug,
            expired_owner_leases: ExpiredOwnerLeases::Release,
        }
    }
}

const OPTIONS_FIELDS: &[&str] = &[
    "canProbe",
    "healthProbeIntervalMs",
    "idleProbeIntervalMs",
    "rateLimitWindowMs",
    "rateLimitsToExclude",
    "provisionFirstPauseMs",
    "provisionMaxPauseMs",
    "preflightReloads",
    "kinds",
    "minEventLevel",
    "preflight",
    "choice",
    "unservable",
    "expiredOwnerLeases",
];

impl Options {
    /// Options from JSON: absent fields take the defaults, unknown ones are refused,
    /// and each must be in its range ([`Options::check`]).
    pub fn from_json(value: &Value) -> Read<Options> {
        let options = Options::read_json(value)?;
        match options.range_violation() {
            Some(message) => Err(message),
            None => Ok(options),
        }
    }

    /// The options' shape only. Fields are read in the object's key order, so the
    /// first problem named is the one serde's derive named.
    pub(crate) fn read_json(value: &Value) -> Read<Options> {
        let o = object(value, "struct Options")?;
        let mut options = Options::default();
        let mut preflight_reloads = None;
        for (key, v) in o.0 {
            match key.as_str() {
                "canProbe" => options.can_probe = read::bool(v)?,
                "healthProbeIntervalMs" => options.health_probe_interval_ms = read::u64(v)?,
                "idleProbeIntervalMs" => options.idle_probe_interval_ms = read::u64(v)?,
                "rateLimitWindowMs" => options.rate_limit_window_ms = read::u64(v)?,
                "rateLimitsToExclude" => options.rate_limits_to_exclude = read::u32(v)?,
                "provisionFirstPauseMs" => options.provision_first_pause_ms = read::u64(v)?,
                "provisionMaxPauseMs" => options.provision_max_pause_ms = read::u64(v)?,
                "preflightReloads" => preflight_reloads = Some(read::bool(v)?),
                "preflight" => options.preflight = read::bool(v)?,
                "choice" if v.is_null() => options.choice = None,
                "choice" => options.choice = Some(Choice::from_json(v)?),
                "unservable" if v.is_null() => options.unservable = None,
                "unservable" => options.unservable = Some(Unservable::from_json(v)?),
                "kinds" if v.is_null() => options.kinds = None,
                "kinds" => options.kinds = Some(read::strings(v)?),
                "minEventLevel" => options.min_event_level = Level::from_json(v)?,
                "expiredOwnerLeases" => {
                    options.expired_owner_leases = ExpiredOwnerLeases::from_json(v)?
                }
                _ => return Err(read::unknown_field(key, OPTIONS_FIELDS)),
            }
        }
        // Explicit wins; else reloads are preflighted whenever the host can preflight.
        options.preflight_reloads = preflight_reloads.unwrap_or(options.preflight);
        Ok(options)
    }
}

impl Options {
    /// Every option within its range of [`crate::limits`], or `INVALID_OPTIONS` naming
    /// the first that is not and its range.
    pub fn check(&self) -> Result<(), Error> {
        match self.range_violation() {
            Some(message) => Err(Error::InvalidOptions { message }),
            None => Ok(()),
        }
    }

    fn range_violation(&self) -> Option<String> {
        let ranges = [
            (
                "healthProbeIntervalMs",
                self.health_probe_interval_ms,
                limits::HEALTH_PROBE_INTERVAL_MS,
            ),
            (
                "idleProbeIntervalMs",
                self.idle_probe_interval_ms,
                limits::IDLE_PROBE_INTERVAL_MS,
            ),
            (
                "rateLimitWindowMs",
                self.rate_limit_window_ms,
                limits::RATE_LIMIT_WINDOW_MS,
            ),
            (
                "rateLimitsToExclude",
                u64::from(self.rate_limits_to_exclude),
                limits::RATE_LIMITS_TO_EXCLUDE,
            ),
            (
                "provisionFirstPauseMs",
                self.provision_first_pause_ms,
                limits::PROVISION_FIRST_PAUSE_MS,
            ),
            (
                "provisionMaxPauseMs",
                self.provision_max_pause_ms,
                limits::PROVISION_MAX_PAUSE_MS,
            ),
        ];
        for (name, value, range) in ranges {
            if !range.contains(&value) {
                return Some(format!(
                    "`{name}` is {value}; it must be from {} to {}",
                    range.start(),
                    range.end()
                ));
            }
        }
        if self.provision_max_pause_ms < self.provision_first_pause_ms {
            // The pause doubles from the first up to the most: a most below the first
            // is no range.
            return Some(format!(
                "`provisionMaxPauseMs` is {}, below `provisionFirstPauseMs` ({}): the pause doubles from the first up to the most",
                self.provision_max_pause_ms, self.provision_first_pause_ms
            ));
        }
        let kinds = self.kinds.as_deref().unwrap_or_default();
        if kinds.len() > limits::MAX_KINDS {
            return Some(format!(
                "`kinds` names {} kinds; the most is {}",
                kinds.len(),
                limits::MAX_KINDS
            ));
        }
        kinds.iter().find_map(|kind| id_too_long("kinds", kind))
    }
}

/// Which of the equal free executors (same priority for the role) takes a request.
/// The two seeds differ here, and rota offers both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Choice {
    /// The one leased least recently (the roster seed): a, b, a, b.
    #[default]
    RoundRobin,
    /// The first declared (the scheduler seed's `workerFor`): a, a, b, b.
    Declared,
    /// The one with the fewest leases of the role in use relative to its slots for
    /// the role; ties to the one leased least recently.
    LeastBusy,
}

/// What becomes of a request that no executor can ever serve (none has its role, or
/// all that do are out for the run or removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Unservable {
    /// It ends at once as exhausted, with a reason per executor (the roster seed).
    #[default]
    Exhaust,
    /// It keeps waiting until a slot, a reload or a cancel (the scheduler seed).
    Wait,
}

/// What becomes of an expired owner's leases (`expireOwner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ExpiredOwnerLeases {
    /// Every lease is released, as its owner would have: the slot frees (a lease
    /// with a machine frees once the machine is deleted, as any release).
    #[default]
    Release,
    /// Leases that hold a machine (a `hold`: a worker machine whose work runs on
    /// without its owner) are kept; the others are released.
    KeepMachines,
    /// Every lease is kept, until someone releases it by its id.
    Keep,
}

unit_names!(Choice {
    RoundRobin = "roundRobin",
    Declared = "declared",
    LeastBusy = "leastBusy",
});

unit_names!(ExpiredOwnerLeases {
    Release = "release",
    KeepMachines = "keepMachines",
    Keep = "keep",
});

impl ExpiredOwnerLeases {
    pub fn is_release(&self) -> bool {
        *self == ExpiredOwnerLeases::Release
    }
}

unit_names!(Unservable { Exhaust = "exhaust", Wait = "wait" });
