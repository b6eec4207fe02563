//! The live swap's other half: an export read back, checked as a whole against its
//! document, and rebuilt into a policy.
//!
//! An export is trusted no more than an input: a hand-edited, truncated or mixed-up
//! one is refused with `INVALID_STATE` naming the field that contradicts the rest,
//! never accepted into a state that breaks an invariant inputs later (a panic here is
//! a trap in the wasm module, and a trap leaks its memory). Three passes: the export
//! alone (`check_export`: bounds, repeated ids, keys against the fields they encode),
//! the export against its roster (`check_whole`), then every invariant (`verify`).

use serde_json::{json, Value};

use crate::document::Document;
use crate::error::Error;
use crate::limits::{MAX_SAFE_INTEGER, MAX_WAITING_REQUESTS};
use crate::protocol::{ExclusionKind, Input, LeaseRequest, Output};

use super::budgets::window_fault;
use super::export::{join_violations, Exported, RequestState};
use super::keys::{order_key, ByName, Index};
use super::leases::LeaseTable;
use super::outputs::Queued;
use super::reload::{PendingReload, Startup};
use super::requests::{request_extra, Creating, Given, Request};
use super::roster::{Executor, Runtime};
use super::Policy;

impl Policy {
    /// Rebuilds a policy from `export_state` (of this or an earlier version).
    /// `INVALID_STATE` when the export contradicts itself, naming what.
    pub fn import_state(state: &Value) -> Result<Policy, Error> {
        let bad = |message: String| Error::InvalidState { message };
        let exported = Exported::from_json(state).map_err(bad)?;
        check_export(&exported).map_err(bad)?;
        let mut policy = Policy::new(&exported.document, exported.options.clone())
            .map_err(|e| bad(format!("its document: {e}")))?;
        if !exported.draining.is_empty() {
            // A draining executor was declared under an earlier role list: read it
            // with the roles it names too (it keeps only the current ones, as it
            // did before the export).
            let mut roles = policy.document.roles.clone();
            for raw in &exported.draining {
                let named = raw
                    .get("roles")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .chain(
                        ["roleSlots", "priority"]
                            .into_iter()
                            .filter_map(|field| raw.get(field).and_then(Value::as_object))
                            .flat_map(|o| o.keys().map(String::as_str))
                            .filter(|k| *k != "default"),
                    );
                for role in named {
                    if !roles.iter().any(|r| r == role) {
                        roles.push(role.to_string());
                    }
                }
            }
            let mut doc = serde_json::Map::new();
            doc.insert("roles".into(), json!(roles));
            // A scheduler worker is named by `name` (it has no `id`).
            let (executors, workers): (Vec<Value>, Vec<Value>) = exported
                .draining
                .iter()
                .cloned()
                .partition(|raw| raw.get("id").is_some());
            doc.insert("executors".into(), Value::Array(executors));
            if !workers.is_empty() {
                doc.insert("workers".into(), Value::Array(workers));
            }
            let drained = Document::from_json(&Value::Object(doc), None)
                .map_err(|v| bad(format!("draining: {}", join_violations(&v))))?;
            for spec in drained.executors {
                if policy.roster.index.contains_key(&spec.id) {
                    return Err(bad(format!(
                        "draining: '{}' is also an executor of the document",
                        spec.id
                    )));
                }
                let mut x = Executor::new(spec, Runtime::default(), &policy.document.roles);
                x.draining = true;
                policy.roster.executors.push(x);
            }
        }
        // The runtimes are in id order (a JSON object's); each names an executor.
        let mut matched = 0;
        for x in &mut policy.roster.executors {
            if let Ok(i) = exported
                .runtime
                .binary_search_by(|(id, _)| id.as_str().cmp(&x.spec.id))
            {
                x.runtime = exported.runtime[i].1.clone();
                matched += 1;
            }
        }
        if matched < exported.runtime.len() {
            let executors = &policy.roster.executors;
            let unknown = exported
                .runtime
                .iter()
                .find(|(id, _)| !executors.iter().any(|x| &x.spec.id == id));
            let id = unknown.map_or("?", |(id, _)| id.as_str());
            return Err(bad(format!(
                "runtime.{id}: '{id}' is not an executor of the roster"
            )));
        }
        policy.now = exported.now;
        // Budget windows as their budgets allow (the rebuild would trim them).
        for x in &policy.roster.executors {
            if let Some(fault) = window_fault(&x.runtime.grants, x.spec.budget, policy.now) {
                return Err(bad(format!("runtime.{}.budgetGrants: {fault}", x.spec.id)));
            }
        }
        for (name, window) in &exported.account_grants {
            let budget = policy.document.accounts.get(name).copied();
            if let Some(fault) = window_fault(window, budget, policy.now) {
                return Err(bad(format!("accountGrants.{name}: {fault}")));
            }
        }
        policy.budgets.accounts = exported.account_grants;
        for q in exported.requests {
            let req = Request {
                role: policy.roster.roles.intern(&q.role),
                id: q.id.into_boxed_str(),
                key: order_key(q.key),
                since: q.since,
                announced: q.announced,
                try_only: q.try_only,
                has_event_time: q.event_time.is_some(),
                label: q.label.map(String::into_boxed_str),
                owner: q.owner.map(String::into_boxed_str),
                extra: request_extra(Given {
                    avoid: q.avoid,
                    prefer: q.prefer,
                    pin: q.pin,
                    deadline: q.deadline,
                    purpose: q.purpose,
                    borrow: q.borrow,
                    tenant: q.tenant,
                    affinity: q.affinity,
                }),
                creating: match q.state {
                    RequestState::Waiting => None,
                    RequestState::Creating { executor, passed } => {
                        Some(Box::new(Creating { executor, passed }))
                    }
                },
            };
            policy.queue.requests.insert(req);
        }
        policy.leases.open = LeaseTable::from_pairs(exported.leases);
        policy.provisioning.abandoned = exported.abandoned;
        policy.provisioning.abandoned_owners = exported.abandoned_owners;
        policy.leases.next_id = exported.next_lease;
        policy.queue.next_arrival = exported.next_arrival;
        policy.roster.lease_clock = exported.lease_clock;
        policy.reloads.known_ids = exported.known_ids;
        policy.reloads.preflights = exported.preflights;
        policy.outputs = exported.outputs.into_iter().map(Queued::Built).collect();
        // `Policy::new` started the startup preflight again: the export says where it is.
        policy.reloads.startup = match (exported.starting, exported.start_failed) {
            (_, true) => Startup::Failed,
            (Some(awaiting), false) => Startup::Preflighting(awaiting),
            (None, false) => Startup::Serving,
        };
        policy.reloads.cut_short = exported.cut_short;
        if let Some(p) = exported.pending_reload {
            let document = Document::from_json(&p.document, policy.options.kinds.as_deref())
                .map_err(|v| bad(format!("pendingReload: {}", join_violations(&v))))?;
            if let Some(id) = p.awaiting.iter().find(|id| document.executor(id).is_none()) {
                return Err(bad(format!(
                    "pendingReload.awaiting: '{id}' is not an executor of the pending document"
                )));
            }
            policy.reloads.pending = Some(PendingReload {
                document,
                awaiting: p.awaiting,
                since: p.since,
            });
        }
        let fairness = exported.fairness;
        policy.load_fairness(&fairness).map_err(bad)?;
        policy.rebuild();
        policy.check_fairness(&fairness).map_err(bad)?;
        // The imported leases' request ids (a reload or a drained executor's rebuild
        // leaves them as they are: only an import brings leases the map has not seen).
        policy.leases.reindex(&mut policy.queue.requests);
        // By executor index: the file's entries are this roster's.
        let mut last_persisted = vec![None; policy.roster.executors.len()];
        for x in exported.last_persisted {
            let Some(e) = policy.roster.index.get(&x.id) else {
                return Err(bad(format!(
                    "lastPersisted: '{}' is not an executor of the roster",
                    x.id
                )));
            };
            if last_persisted[e].is_some() {
                return Err(bad(format!("lastPersisted: '{}' is listed twice", x.id)));
            }
            last_persisted[e] = Some(x);
        }
        policy.persistence.last = last_persisted;
        // The affinity keys, oldest first, each naming an executor of the document.
        if let Err((n, fault)) = policy.import_affinity(&exported.affinity) {
            return Err(bad(format!("affinity[{n}]: {fault}")));
        }
        policy.check_whole().map_err(bad)?;
        policy
            .verify()
            .map_err(|violation| bad(violation.to_string()))?;
        Ok(policy)
    }

    /// The imported state against its roster, field by field: what a hand-edited
    /// or mixed-up export can contradict that the invariants would report less
    /// plainly or not at all (a counter below what it counted).
    fn check_whole(&self) -> Result<(), String> {
        let mut requests = ByName::new();
        for (id, owner) in self.provisioning.abandoned_owners.iter() {
            if !crate::sorted::contains_key(&self.provisioning.abandoned, id) {
                return Err(format!(
                    "abandonedOwners: '{id}' is not an abandoned creation"
                ));
            }
            if let Some(problem) = crate::protocol::owner_violation(owner) {
                return Err(format!("abandonedOwners.{id}: {problem}"));
            }
        }
        for (id, lease) in self.leases.open.iter() {
            if let Some(problem) = lease
                .owner
                .as_deref()
                .and_then(crate::protocol::owner_violation)
            {
                return Err(format!("leases.{id}: {problem}"));
            }
            if lease.borrowed && (lease.counted || lease.because.is_none()) {
                return Err(format!(
                    "leases.{id}: a borrowed lease holds no slot and says why (`because`)"
                ));
            }
            if lease.counted && !self.roster.index.contains_key(&lease.executor) {
                return Err(format!(
                    "leases.{id}: it holds a slot on '{}', which the roster does not have",
                    lease.executor
                ));
            }
            if lease.deleting {
                // Released: its request id is free, and its machine is the pool's.
                if !lease.counted || lease.hold.is_none() {
                    return Err(format!(
                        "leases.{id}: it waits for the deletion of a machine it does not hold"
                    ));
                }
                continue;
            }
            if let Some(other) = requests.insert(lease.request.as_str().into(), id) {
                return Err(format!(
                    "leases.{id}: request '{}' holds lease {other} too",
                    lease.request
                ));
            }
            if crate::sorted::contains_key(&self.provisioning.abandoned, &lease.request) {
                return Err(format!(
                    "abandoned: '{}' is also the request of lease {id}",
                    lease.request
                ));
            }
        }
        for q in self.queue.requests.values() {
            if let Some(lease) = requests.get(&q.id) {
                return Err(format!(
                    "requests: '{}' is also the request of lease {lease}",
                    q.id
                ));
            }
            if crate::sorted::contains_key(&self.provisioning.abandoned, &q.id) {
                return Err(format!(
                    "abandoned: '{}' is also a request without a lease",
                    q.id
                ));
            }
            match &q.creating {
                Some(creating) => {
                    if !self.roster.index.contains_key(&creating.executor) {
                        return Err(format!(
                            "requests: '{}' creates a machine on '{}', which the roster does not have",
                            q.id, creating.executor
                        ));
                    }
                }
                None => {
                    if self.roster.request_role(q).is_none() {
                        return Err(format!(
                            "requests: '{}' waits for the role '{}', which the document does not have",
                            q.id,
                            self.roster.request_role_name(q)
                        ));
                    }
                }
            }
        }
        self.check_outputs()?;
        for x in &self.roster.executors {
            if x.runtime.last_leased > self.roster.lease_clock {
                return Err(format!(
                    "leaseClock {} is below runtime.{}.lastLeased {}",
                    self.roster.lease_clock, x.spec.id, x.runtime.last_leased
                ));
            }
        }
        Ok(())
    }
}

impl Policy {
    /// An export's fair queues, put in place before the rebuild (which keeps their
    /// tenants' tags and turns and fills their queues).
    fn load_fairness(&mut self, fairness: &Value) -> Result<(), String> {
        let Some(roles) = fairness.as_object() else {
            return match fairness {
                Value::Null => Ok(()),
                _ => Err("fairness: a record of fair queues by role".into()),
            };
        };
        if self.queue.fair.is_empty() && !roles.is_empty() {
            return Err(
                "fairness: the document does not serve tenants fairly (fairness: \"tenants\")"
                    .into(),
            );
        }
        for (role, f) in roles {
            let Some(r) = self.document.roles.iter().position(|x| x == role) else {
                return Err(format!(
                    "fairness.{role}: '{role}' is not a role of the document"
                ));
            };
            let number = |k: &str| {
                f.get(k)
                    .and_then(Value::as_u64)
                    .filter(|&n| n <= MAX_SAFE_INTEGER)
            };
            let tenants = f.get("tenants").and_then(Value::as_object);
            let (Some(vtime), Some(next_turn), Some(tenants)) =
                (number("vtime"), number("nextTurn"), tenants)
            else {
                return Err(format!(
                    "fairness.{role}: not {{ vtime, nextTurn, tenants }}, numbers within 2^53 - 1"
                ));
            };
            let fair = &mut self.queue.fair[r];
            fair.vtime = vtime;
            for (name, pair) in tenants {
                let pair = pair.as_array().filter(|a| a.len() == 2);
                let tag_turn = pair.and_then(|a| Some((a[0].as_u64()?, a[1].as_u64()?)));
                match tag_turn {
                    Some((tag, turn))
                        if tag <= MAX_SAFE_INTEGER
                            && turn < next_turn
                            && !fair.order.contains_key(&[tag, turn, 0, 0]) =>
                    {
                        fair.add(name, tag, turn);
                    }
                    _ => {
                        return Err(format!(
                            "fairness.{role}.tenants.{name}: not [tag, turn] within 2^53 - 1, its turn below nextTurn and its pair unlike another tenant's"
                        ))
                    }
                }
            }
            fair.next_turn = next_turn;
        }
        Ok(())
    }

    /// The rebuilt fair queues against the export: every waiting tenant has the turn
    /// the export gave it, and every tenant the export lists waits.
    fn check_fairness(&self, fairness: &Value) -> Result<(), String> {
        for (r, fair) in self.queue.fair.iter().enumerate() {
            let role = self.role_name(r);
            let given = fairness
                .get(role)
                .and_then(|f| f.get("tenants"))
                .and_then(Value::as_object);
            let listed = |name: &str| given.is_some_and(|g| g.contains_key(name));
            if let Some(t) = fair.in_order().find(|t| !listed(&t.name)) {
                return Err(format!(
                    "fairness.{role}.tenants.{0}: tenant '{0}' waits for {role}, and the export gives it no turn",
                    t.name
                ));
            }
            let stale = given.and_then(|g| g.keys().find(|name| fair.get(name).is_none()));
            if let Some(name) = stale {
                return Err(format!(
                    "fairness.{role}.tenants.{name}: no request of tenant '{name}' waits for {role}"
                ));
            }
        }
        Ok(())
    }

    /// The pending outputs against the state. They may be older than the state (a host
    /// reads them late: a grant since released, a creation since answered), so each is
    /// checked against what outlives them: a grant names a lease id this state issued,
    /// an effect an executor this roster declared (now, before a reload, or in the
    /// pending one).
    fn check_outputs(&self) -> Result<(), String> {
        let known = |id: &str| {
            self.roster.index.contains_key(id)
                || crate::sorted::set_contains(&self.reloads.known_ids, id)
                || self
                    .reloads
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.document.executor(id).is_some())
        };
        for (i, output) in self.outputs.iter().enumerate() {
            let Queued::Built(output) = output else {
                continue;
            };
            let problem = match output {
                Output::Granted { lease, .. } => (*lease == 0 || *lease >= self.leases.next_id)
                    .then(|| {
                        format!(
                            "lease {lease} was never granted (nextLease {})",
                            self.leases.next_id
                        )
                    }),
                Output::Probe { executor: id, .. }
                | Output::CreateMachine { executor: id, .. }
                | Output::DeleteMachine { executor: id, .. }
                | Output::Preflight { executor: id }
                | Output::StartFailed { executor: id, .. } => {
                    (!known(id)).then(|| format!("'{id}' is not an executor this roster declared"))
                }
                _ => None,
            };
            if let Some(problem) = problem {
                return Err(format!("outputs[{i}] ({}): {problem}", output_kind(output)));
            }
        }
        Ok(())
    }
}

fn output_kind(output: &Output) -> &'static str {
    match output {
        Output::Granted { .. } => "granted",
        Output::Probe { .. } => "probe",
        Output::CreateMachine { .. } => "createMachine",
        Output::Waiting { .. } => "waiting",
        Output::DeleteMachine { .. } => "deleteMachine",
        Output::Preflight { .. } => "preflight",
        Output::StartFailed { .. } => "startFailed",
        _ => "output",
    }
}

/// The export alone: every counter and time within a JSON number (no time or
/// counter of a state is beyond it, so `now + option` and `id + 1` never overflow),
/// counters above what they counted, no id listed twice, each request within the
/// bounds a lease input has and its order key the one its fields make, and nothing
/// stamped after `now`.
fn check_export(x: &Exported) -> Result<(), String> {
    let now = x.now;
    if x.requests.len() > MAX_WAITING_REQUESTS {
        return Err(format!(
            "requests: {} requests without a lease, more than the queue holds ({MAX_WAITING_REQUESTS})",
            x.requests.len()
        ));
    }
    for (name, value) in [
        ("now", now),
        ("nextLease", x.next_lease),
        ("nextArrival", x.next_arrival),
        ("leaseClock", x.lease_clock),
    ] {
        if value > MAX_SAFE_INTEGER {
            return Err(format!(
                "{name} {value} is beyond what a JSON number holds exactly (2^53 - 1)"
            ));
        }
    }
    if x.next_lease == 0 {
        return Err("nextLease 0: lease ids start at 1".into());
    }
    let after_now = |field: String, t: u64| -> Result<(), String> {
        if t > now {
            Err(format!("{field} {t} is after now {now}"))
        } else {
            Ok(())
        }
    };
    // The maps the policy's indexes use (no other sort code in the module).
    let mut request_ids = ByName::new();
    let mut arrivals = Index::new();
    for (i, q) in x.requests.iter().enumerate() {
        let (ranked, rank, time, arrival) = q.key;
        let field = |name: &str| format!("requests[{i}].{name} ('{}')", q.id);
        if q.id.is_empty() {
            return Err(format!(
                "requests[{i}].id: a request id is a non-empty string"
            ));
        }
        if ranked > 1 {
            return Err(format!(
                "{}: the unranked flag {ranked} is not 0 or 1",
                field("key")
            ));
        }
        let key_rank = (ranked == 0).then_some(rank);
        if q.rank != key_rank || (ranked == 1 && rank != 0) {
            return Err(format!("{}: its rank differs from its key", field("rank")));
        }
        // The key's time is the event time, else the arrival time (`since`).
        if time != q.event_time.unwrap_or(q.since) {
            return Err(format!(
                "{}: the key's time {time} is neither its eventTime nor its since",
                field("key")
            ));
        }
        if arrival >= x.next_arrival {
            return Err(format!(
                "nextArrival {} is not above the arrival {arrival} of requests[{i}] ('{}')",
                x.next_arrival, q.id
            ));
        }
        after_now(field("since"), q.since)?;
        let as_input = Input::Lease(LeaseRequest {
            now,
            id: q.id.clone(),
            role: q.role.clone(),
            avoid: q.avoid.clone(),
            prefer: q.prefer.clone(),
            pin: q.pin.clone(),
            rank: q.rank,
            event_time: q.event_time,
            label: q.label.clone(),
            purpose: q.purpose.clone(),
            deadline: q.deadline,
            timeout_ms: None,
            owner: q.owner.clone(),
            borrow: q.borrow.clone(),
            tenant: q.tenant.clone(),
            affinity: q.affinity.clone(),
        });
        if let Some(beyond) = as_input.limit_violation() {
            return Err(format!("requests[{i}] ('{}'): {beyond}", q.id));
        }
        if q.try_only && q.state == RequestState::Waiting {
            return Err(format!(
                "{}: a tryLease never waits (it is granted or unavailable)",
                field("state")
            ));
        }
        if let Some(other) = request_ids.insert(q.id.as_str().into(), i as u64) {
            return Err(format!(
                "requests[{i}]: '{}' is listed twice (also requests[{other}])",
                q.id
            ));
        }
        if let Some(other) = arrivals.insert([arrival, 0, 0, 0], i as u32) {
            return Err(format!(
                "requests[{i}].key: its arrival {arrival} is also the arrival of requests[{other}]"
            ));
        }
    }
    for (id, lease) in &x.leases {
        if *id == 0 {
            return Err("leases: lease 0 was never granted (lease ids start at 1)".into());
        }
        if *id >= x.next_lease {
            return Err(format!(
                "nextLease {} is not above lease {id}",
                x.next_lease
            ));
        }
        after_now(format!("leases.{id}.since"), lease.since)?;
    }
    for (id, runtime) in &x.runtime {
        let limits = &runtime.rate_limits;
        if let Some(t) = limits
            .iter()
            .zip(limits.iter().skip(1))
            .find(|(a, b)| a > b)
        {
            return Err(format!(
                "runtime.{id}.rateLimits: {} comes after {}, out of time order",
                t.1, t.0
            ));
        }
        if let Some(&last) = limits.back() {
            after_now(format!("runtime.{id}.rateLimits"), last)?;
        }
        if let Some(at) = runtime.last_probe_at {
            after_now(format!("runtime.{id}.lastProbeAt"), at)?;
        }

        if let Some(exclusion) = &runtime.exclusion {
            after_now(format!("runtime.{id}.exclusion.since"), exclusion.since)?;
            if exclusion.kind == ExclusionKind::Until && exclusion.until.is_none() {
                return Err(format!(
                    "runtime.{id}.exclusion: an `until` exclusion has no `until`"
                ));
            }
        }
    }
    if let Some(p) = &x.pending_reload {
        after_now("pendingReload.since".into(), p.since)?;
    }
    Ok(())
}
