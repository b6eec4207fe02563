//! The live swap: the export of the whole state, and its JSON shape (written and
//! read; `import` checks what is read and rebuilds a policy from it).

use serde::Serialize;
use serde_json::Value;

use crate::protocol::{Exclusion, ExclusionKind, Options, Output};
use crate::read::{self, at, list_in, map_in, object, Read};
use crate::sorted::{self, StrMap, StrSet};
use crate::status::PreflightRecord;

use super::exclusions::ActiveExclusion;
use super::keys::{key_parts, shared, KeyParts};
use super::leases::{Lease, Place};
use super::provisioning::Pause;
use super::recovery::Recovery;
use super::reload::Startup;
use super::requests::Request;
use super::roster::Runtime;
use super::Policy;

impl Policy {
    /// Everything, as JSON, for a live swap to another module version. Drain the
    /// outputs first: pending outputs are carried but a host should not rely on it.
    pub fn export_state(&self) -> Value {
        crate::write::to_json_value(&self.exported())
    }

    pub(super) fn exported(&self) -> Exported {
        Exported {
            version: EXPORT_VERSION,
            options: self.options.clone(),
            document: self.document(),
            draining: self
                .roster
                .executors
                .iter()
                .filter(|x| x.draining)
                .map(|x| Value::Object(x.spec.raw.clone()))
                .collect(),
            runtime: {
                let mut runtime: Vec<(String, Runtime)> = self
                    .roster
                    .executors
                    .iter()
                    .map(|x| (x.spec.id.clone(), x.runtime.clone()))
                    .collect();
                runtime.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                runtime
            },
            now: self.now,
            requests: self
                .queue
                .requests
                .values()
                .map(|q| self.export_request(q))
                .collect(),
            leases: self.leases.open.to_pairs(),
            abandoned: self.provisioning.abandoned.clone(),
            abandoned_owners: self.provisioning.abandoned_owners.clone(),
            next_lease: self.leases.next_id,
            next_arrival: self.queue.next_arrival,
            lease_clock: self.roster.lease_clock,
            last_persisted: {
                let mut entries: Vec<Exclusion> =
                    self.persistence.last.iter().flatten().cloned().collect();
                entries.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                entries
            },
            known_ids: self.reloads.known_ids.clone(),
            pending_reload: self.reloads.pending.as_ref().map(|p| ExportedReload {
                document: p.document.as_written(),
                awaiting: p.awaiting.clone(),
                since: p.since,
            }),
            preflights: self.reloads.preflights.clone(),
            outputs: self.built_outputs(),
            starting: match &self.reloads.startup {
                Startup::Preflighting(awaiting) => Some(awaiting.clone()),
                _ => None,
            },
            start_failed: self.reloads.startup == Startup::Failed,
            cut_short: self.reloads.cut_short.clone(),
            account_grants: self.budgets.accounts.clone(),
            affinity: if self.affinity.is_empty() {
                Value::Null
            } else {
                Value::Array(
                    self.remembered()
                        .map(|x| {
                            let (key, executor) = (x.key.to_string(), x.executor.to_string());
                            Value::Array(vec![key.into(), executor.into(), x.used.into()])
                        })
                        .collect(),
                )
            },
            fairness: self.exported_fairness(),
        }
    }

    /// The fair queues' times and the waiting tenants' tags and turns, by role name:
    /// `{ role: { vtime, nextTurn, tenants: { name: [tag, turn] } } }`, the roles with
    /// a waiting tenant only (the others' are all 0); `null` when none has one.
    fn exported_fairness(&self) -> Value {
        let mut roles = serde_json::Map::new();
        for f in self.queue.fair.iter().filter(|f| f.len() > 0) {
            let mut tenants = serde_json::Map::new();
            for t in f.in_order() {
                let pair = vec![Value::from(t.tag), Value::from(t.turn)];
                tenants.insert(t.name.to_string(), Value::Array(pair));
            }
            let mut fair = serde_json::Map::new();
            fair.insert("vtime".into(), Value::from(f.vtime));
            fair.insert("nextTurn".into(), Value::from(f.next_turn));
            fair.insert("tenants".into(), Value::Object(tenants));
            roles.insert(
                self.roster.roles.name(f.role).to_string(),
                Value::Object(fair),
            );
        }
        if roles.is_empty() {
            Value::Null
        } else {
            Value::Object(roles)
        }
    }

    /// The state's hash: FNV-1a 64 over the canonical text of `export_state` with
    /// the pending outputs left out, as 16 lowercase hex digits. Two replicas that
    /// folded the same inputs (from the same document and options, or from an export
    /// of such a replica) agree on it, on every host: what a shared roster's
    /// instances compare at checkpoints.
    pub fn state_hash(&self) -> String {
        let mut exported = self.exported();
        exported.outputs.clear();
        let text = crate::write::to_json_text(&exported);
        format!("{:016x}", fnv1a64(text.as_bytes()))
    }

    /// A request in the shape `export_state` writes.
    pub(super) fn export_request(&self, q: &Request) -> ExportedRequest {
        ExportedRequest {
            id: String::from(&*q.id),
            role: self.roster.request_role_name(q).to_string(),
            avoid: q.avoid().as_given().to_vec(),
            prefer: q.prefer().map(str::to_string),
            pin: q.pin().map(str::to_string),
            rank: q.rank(),
            event_time: q.event_time(),
            label: q.label().map(str::to_string),
            purpose: q.purpose().map(str::to_string),
            deadline: q.deadline(),
            owner: q.owner().map(str::to_string),
            borrow: q.borrow().map(str::to_string),
            tenant: q.tenant().map(str::to_string),
            affinity: q.affinity().map(str::to_string),
            key: key_parts(&q.key),
            since: q.since,
            announced: q.announced,
            try_only: q.try_only,
            state: match &q.creating {
                None => RequestState::Waiting,
                Some(c) => RequestState::Creating {
                    executor: c.executor.clone(),
                    passed: c.passed,
                },
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum RequestState {
    Waiting,
    /// A slot is held on `executor` while its machine is created.
    Creating {
        executor: String,
        passed: u32,
    },
}

/// A request as `export_state` writes it (the shape other hosts and saved states
/// depend on; the internal `Request` is laid out for memory).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExportedRequest {
    pub(super) id: String,
    pub(super) role: String,
    pub(super) avoid: Vec<String>,
    pub(super) prefer: Option<String>,
    pub(super) pin: Option<String>,
    pub(super) rank: Option<i64>,
    pub(super) event_time: Option<u64>,
    pub(super) label: Option<String>,
    /// Not written when absent (an export without purposes reads as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) purpose: Option<String>,
    pub(super) deadline: Option<u64>,
    /// Not written when absent (an export without owners reads as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) owner: Option<String>,
    /// Not written when absent (an export without borrowing reads as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) borrow: Option<String>,
    /// Not written when absent (an export without tenants reads as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tenant: Option<String>,
    /// Not written when absent (an export without affinity reads as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) affinity: Option<String>,
    pub(super) key: KeyParts,
    pub(super) since: u64,
    pub(super) announced: bool,
    /// A `tryLease`: it never waits, even after a failed machine creation.
    #[serde(default)]
    pub(super) try_only: bool,
    pub(super) state: RequestState,
}

pub(super) const EXPORT_VERSION: u32 = 1;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Exported {
    pub(super) version: u32,
    pub(super) options: Options,
    pub(super) document: Value,
    pub(super) draining: Vec<Value>,
    /// By executor id, in id order (written as an object).
    #[serde(serialize_with = "as_map")]
    pub(super) runtime: Vec<(String, Runtime)>,
    pub(super) now: u64,
    pub(super) requests: Vec<ExportedRequest>,
    /// By lease id, in id order (written as an object).
    #[serde(serialize_with = "as_map")]
    pub(super) leases: Vec<(u64, Lease)>,
    #[serde(serialize_with = "as_map")]
    pub(super) abandoned: StrMap<String>,
    /// The owners of abandoned creations that have one; not written when none has.
    #[serde(serialize_with = "as_map", skip_serializing_if = "Vec::is_empty")]
    pub(super) abandoned_owners: StrMap<String>,
    pub(super) next_lease: u64,
    pub(super) next_arrival: u64,
    pub(super) lease_clock: u64,
    pub(super) last_persisted: Vec<Exclusion>,
    pub(super) known_ids: StrSet,
    pub(super) pending_reload: Option<ExportedReload>,
    #[serde(serialize_with = "as_map")]
    pub(super) preflights: StrMap<PreflightRecord>,
    pub(super) outputs: Vec<Output>,
    /// While the startup preflight runs: the executors it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) starting: Option<StrSet>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) start_failed: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) cut_short: StrSet,
    /// Per budgeted account that has granted: its grant times (`budgets.rs`).
    #[serde(serialize_with = "as_map", skip_serializing_if = "Vec::is_empty")]
    pub(super) account_grants: StrMap<std::collections::VecDeque<u64>>,
    /// Per role with a waiting tenant (`fairness: "tenants"`): its fair queue's state
    /// (`Policy::exported_fairness`), read by the import's own checks.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub(super) fairness: Value,
    /// The remembered affinity keys, least recently used first: `[key, executor,
    /// used]` (`affinity.rs`); not written when none is.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub(super) affinity: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExportedReload {
    pub(super) document: Value,
    pub(super) awaiting: StrSet,
    pub(super) since: u64,
}

// ---- Reading an export ------------------------------------------------------------
//
// By hand from the `Value` (`read.rs`): an export is read once per live swap, and a
// derived deserializer per type would cost more WebAssembly than the rest of the
// import. Errors name the place: "requests[2].state: ...".

/// A JSON array of exactly `N` items.
pub(super) fn tuple<const N: usize>(value: &Value) -> Read<&[Value; N]> {
    let items = read::array(value)?;
    items.as_slice().try_into().map_err(|_| {
        format!(
            "invalid length {}, expected a tuple of size {N}",
            items.len()
        )
    })
}

impl ActiveExclusion {
    pub(super) fn from_json(value: &Value) -> Read<ActiveExclusion> {
        let o = object(value, "struct Excl")?;
        Ok(ActiveExclusion {
            kind: o.req("kind", ExclusionKind::from_json)?,
            reason: o.req("reason", read::string)?,
            until: o.opt("until", read::u64)?,
            since: o.req("since", read::u64)?,
            then: o.opt("then", |v| {
                let [end, reason] = tuple(v)?;
                Ok((read::u64(end)?, read::string(reason)?))
            })?,
        })
    }
}

impl Pause {
    pub(super) fn from_json(value: &Value) -> Read<Pause> {
        let o = object(value, "struct Pause")?;
        Ok(Pause {
            failures: o.req("failures", read::u32)?,
            until: o.req("until", read::u64)?,
            message: o.req("message", read::string)?,
            blocked: o.req("blocked", read::bool)?,
            // Exports before the pause record carried neither.
            reason: o.or("reason", read::string, String::new())?,
            failed_at: o.or("failedAt", read::u64, 0)?,
        })
    }
}

impl Runtime {
    pub(super) fn from_json(value: &Value) -> Read<Runtime> {
        let o = object(value, "struct Runtime")?;
        Ok(Runtime {
            last_leased: o.req("lastLeased", read::u64)?,
            exclusion: at("exclusion", o.opt("exclusion", ActiveExclusion::from_json))?,
            rate_limits: o.req("rateLimits", |v| read::list(v, read::u64))?.into(),
            pause: at("pause", o.opt("pause", Pause::from_json))?,
            probe_in_flight: o.req("probeInFlight", read::bool)?,
            last_probe_at: o.opt("lastProbeAt", read::u64)?,
            recovery: at(
                "recovery",
                o.or("recovery", Recovery::from_json, Recovery::default()),
            )?,
            grants: o
                .or("budgetGrants", |v| read::list(v, read::u64), Vec::new())?
                .into(),
            weight_current: match o.0.get("weightCurrent") {
                None => Vec::new(),
                Some(_) => sorted::map_from(map_in(o, "weightCurrent", read::i64)?),
            },
            budget_room: None,
        })
    }
}

impl RequestState {
    pub(super) fn from_json(value: &Value) -> Read<RequestState> {
        const NAMES: &[&str] = &["waiting", "creating"];
        if let Some((name, fields)) = value.as_object().and_then(|o| o.iter().next()) {
            if name == "creating" && value.as_object().is_some_and(|o| o.len() == 1) {
                let o = object(fields, "struct variant ReqState::Creating")?;
                return Ok(RequestState::Creating {
                    executor: o.req("executor", read::string)?,
                    passed: o.req("passed", read::u32)?,
                });
            }
        }
        match read::variant(value, NAMES)? {
            0 => Ok(RequestState::Waiting),
            _ => Err(read::invalid_type(
                value,
                "struct variant ReqState::Creating",
            )),
        }
    }
}

impl ExportedRequest {
    pub(super) fn from_json(value: &Value) -> Read<ExportedRequest> {
        let o = object(value, "struct ExportedRequest")?;
        let key = at(
            "key",
            o.need("key")
                .and_then(tuple::<4>)
                .and_then(|[ranked, rank, time, arrival]| {
                    let ranked = read::u64(ranked)?;
                    Ok((
                        u8::try_from(ranked).map_err(|_| format!("{ranked} is not 0 or 1"))?,
                        read::i64(rank)?,
                        read::u64(time)?,
                        read::u64(arrival)?,
                    ))
                }),
        )?;
        Ok(ExportedRequest {
            id: o.req("id", read::string)?,
            role: o.req("role", read::string)?,
            avoid: o.req("avoid", read::strings)?,
            prefer: o.opt("prefer", read::string)?,
            pin: o.opt("pin", read::string)?,
            rank: o.opt("rank", read::i64)?,
            event_time: o.opt("eventTime", read::u64)?,
            label: o.opt("label", read::string)?,
            purpose: o.opt("purpose", read::string)?,
            deadline: o.opt("deadline", read::u64)?,
            owner: o.opt("owner", read::string)?,
            borrow: o.opt("borrow", read::string)?,
            tenant: o.opt("tenant", read::string)?,
            affinity: o.opt("affinity", read::string)?,
            key,
            since: o.req("since", read::u64)?,
            announced: o.req("announced", read::bool)?,
            try_only: o.or("tryOnly", read::bool, false)?,
            state: at("state", o.req("state", RequestState::from_json))?,
        })
    }
}

impl Lease {
    pub(super) fn from_json(value: &Value) -> Read<Lease> {
        let o = object(value, "struct Lease")?;
        Ok(Lease {
            request: o.req("request", read::string)?,
            executor: shared(o.req("executor", read::string)?),
            role: o.opt("role", read::string)?.map(shared),
            label: o.opt("label", read::string)?,
            purpose: o.opt("purpose", read::string)?,
            clone: o.opt("clone", read::u32)?,
            hold: o.opt("hold", read::value)?,
            since: o.req("since", read::u64)?,
            occupied: o.req("occupied", read::bool)?,
            counted: o.req("counted", read::bool)?,
            deleting: o.or("deleting", read::bool, false)?,
            borrowed: o.or("borrowed", read::bool, false)?,
            because: o.opt("because", crate::protocol::Because::from_json)?,
            owner: o.opt("owner", read::string)?,
            tenant: o.opt("tenant", read::string)?,
            affinity: o.opt("affinity", read::string)?.map(String::into_boxed_str),
            at: Place::default(),
        })
    }
}

impl ExportedReload {
    pub(super) fn from_json(value: &Value) -> Read<ExportedReload> {
        let o = object(value, "struct ExportedReload")?;
        Ok(ExportedReload {
            document: o.req("document", read::value)?,
            awaiting: sorted::set_from(o.req("awaiting", read::strings)?),
            since: o.req("since", read::u64)?,
        })
    }
}

impl Exported {
    pub(super) fn from_json(value: &Value) -> Read<Exported> {
        let o = object(value, "struct Exported")?;
        let version = o.req("version", read::u32)?;
        if version != EXPORT_VERSION {
            return Err(format!("export version {version} is not {EXPORT_VERSION}"));
        }
        let leases = map_in(o, "leases", Lease::from_json)?
            .into_iter()
            .map(|(k, lease)| match k.parse::<u64>() {
                // Written as `export_state` writes it: `01` would repeat lease 1.
                Ok(id) if id.to_string() == k => Ok((id, lease)),
                _ => Err(format!("leases: `{k}` is not a lease number")),
            })
            .collect::<Read<Vec<_>>>()?;
        Ok(Exported {
            version,
            options: at("options", o.req("options", Options::from_json))?,
            document: o.req("document", read::value)?,
            draining: at(
                "draining",
                o.req("draining", |v| read::list(v, read::value)),
            )?,
            runtime: map_in(o, "runtime", Runtime::from_json)?
                .into_iter()
                .collect(),
            now: at("now", o.req("now", read::u64))?,
            requests: list_in(o, "requests", ExportedRequest::from_json)?,
            leases,
            abandoned: sorted::map_from(map_in(o, "abandoned", read::string)?),
            abandoned_owners: match o.0.get("abandonedOwners") {
                None => StrMap::new(),
                Some(_) => sorted::map_from(map_in(o, "abandonedOwners", read::string)?),
            },
            next_lease: at("nextLease", o.req("nextLease", read::u64))?,
            next_arrival: at("nextArrival", o.req("nextArrival", read::u64))?,
            lease_clock: at("leaseClock", o.req("leaseClock", read::u64))?,
            last_persisted: list_in(o, "lastPersisted", Exclusion::from_json)?,
            known_ids: sorted::set_from(at("knownIds", o.req("knownIds", read::strings))?),
            pending_reload: at(
                "pendingReload",
                o.opt("pendingReload", ExportedReload::from_json),
            )?,
            preflights: sorted::map_from(map_in(o, "preflights", PreflightRecord::from_json)?),
            outputs: list_in(o, "outputs", Output::from_json)?,
            starting: o.opt("starting", read::strings)?.map(sorted::set_from),
            start_failed: o.or("startFailed", read::bool, false)?,
            cut_short: sorted::set_from(o.or("cutShort", read::strings, Vec::new())?),
            account_grants: match o.0.get("accountGrants") {
                None => StrMap::new(),
                Some(_) => sorted::map_from(
                    map_in(o, "accountGrants", |v| read::list(v, read::u64))?
                        .into_iter()
                        .map(|(name, times)| (name, times.into())),
                ),
            },
            fairness: o.0.get("fairness").cloned().unwrap_or(Value::Null),
            // Read by `import_state` (one pass over the list, checked as it is remembered).
            affinity: o.0.get("affinity").cloned().unwrap_or(Value::Null),
        })
    }
}

/// FNV-1a, 64 bits: a stable hash every host computes alike (no seed).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(super) use super::keys::as_map;

pub(super) fn join_violations(violations: &[crate::document::Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
