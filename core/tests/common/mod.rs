//! Shared helpers for the behaviour tests: a policy driven by a virtual clock, the
//! outputs of each input sorted by type, and assertions that a rejected input
//! changed nothing.
//!
//! Every input goes through `rota_core::json::parse_input` (the JSON every host
//! speaks) and `Policy::handle`; `check_invariants()` runs after each one.

#![allow(dead_code)]

use rota_core::json::{parse_input, parse_options};
use rota_core::status::{ExclusionStatus, ExecutorStatus};
use rota_core::{Error, Options, Output, PersistedState, Policy, Snapshot};
use serde_json::{json, Value};

/// The virtual clock starts here: 2027-01-15T08:00:00.000Z.
pub const T0: u64 = 1_800_000_000_000;
pub const SEC: u64 = 1_000;
pub const MIN: u64 = 60_000;
pub const HOUR: u64 = 3_600_000;

/// `new Date(t).toISOString()` for an instant on T0's day (2027-01-15), computed
/// independently of the core.
pub fn iso(t: u64) -> String {
    let day_start = T0 - 8 * HOUR;
    assert!(
        t >= day_start && t < day_start + 24 * HOUR,
        "iso() covers 2027-01-15 only"
    );
    let ms = t - day_start;
    format!(
        "2027-01-15T{:02}:{:02}:{:02}.{:03}Z",
        ms / HOUR,
        ms / MIN % 60,
        ms / SEC % 60,
        ms % SEC
    )
}

/// A minimal executor: `{"id", "harness": "pi", "roles"}`, with extra fields merged.
pub fn ex(id: &str, roles: &[&str], extra: Value) -> Value {
    let mut object = json!({ "id": id, "harness": "pi", "roles": roles });
    if let Value::Object(fields) = extra {
        for (key, value) in fields {
            object[key] = value;
        }
    }
    object
}

pub fn doc(executors: Vec<Value>) -> Value {
    json!({ "executors": executors })
}

/// One granted output.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    pub request: String,
    pub lease: u64,
    pub executor: String,
    pub role: String,
    pub hold: Option<Value>,
    pub passed: u32,
    pub occupied: bool,
}

/// One event output.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub level: rota_core::Level,
    pub name: String,
    pub message: String,
    pub fields: rota_core::Fields,
}

/// The outputs of one or more inputs, in order.
#[derive(Debug, Clone, Default)]
pub struct Outs(pub Vec<Output>);

impl Outs {
    pub fn granted(&self) -> Vec<Grant> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::Granted {
                    request,
                    lease,
                    executor,
                    role,
                    hold,
                    passed,
                    occupied,
                    ..
                } => Some(Grant {
                    request: request.clone(),
                    lease: *lease,
                    executor: executor.clone(),
                    role: role.clone(),
                    hold: hold.clone(),
                    passed: *passed,
                    occupied: *occupied,
                }),
                _ => None,
            })
            .collect()
    }

    /// The one grant of these outputs.
    pub fn grant(&self) -> Grant {
        let granted = self.granted();
        assert_eq!(granted.len(), 1, "expected exactly one grant in {self:#?}");
        granted[0].clone()
    }

    /// `(request, executor)` of every grant, in order.
    pub fn grant_pairs(&self) -> Vec<(String, String)> {
        self.granted()
            .into_iter()
            .map(|g| (g.request, g.executor))
            .collect()
    }

    pub fn no_grant(&self) {
        assert!(self.granted().is_empty(), "expected no grant in {self:#?}");
    }

    /// `(request, role, report, ahead)` of every waiting output.
    pub fn waiting(&self) -> Vec<(String, String, String, u32)> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::Waiting {
                    request,
                    role,
                    report,
                    ahead,
                    ..
                } => Some((request.clone(), role.clone(), report.clone(), *ahead)),
                _ => None,
            })
            .collect()
    }

    /// `(request, role, reasons)` of every exhausted output.
    pub fn exhausted(&self) -> Vec<(String, String, Vec<String>)> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::Exhausted {
                    request,
                    role,
                    reasons,
                    ..
                } => Some((request.clone(), role.clone(), reasons.clone())),
                _ => None,
            })
            .collect()
    }

    pub fn timed_out(&self) -> Vec<String> {
        self.requests_of(|o| match o {
            Output::TimedOut { request, .. } => Some(request.clone()),
            _ => None,
        })
    }

    pub fn unavailable(&self) -> Vec<String> {
        self.requests_of(|o| match o {
            Output::Unavailable { request, .. } => Some(request.clone()),
            _ => None,
        })
    }

    pub fn cancelled(&self) -> Vec<String> {
        self.requests_of(|o| match o {
            Output::Cancelled { request, .. } => Some(request.clone()),
            _ => None,
        })
    }

    /// `(executor, url)` of every probe output.
    pub fn probes(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::Probe { executor, url } => Some((executor.clone(), url.clone())),
                _ => None,
            })
            .collect()
    }

    /// `(request, executor)` of every createMachine output.
    pub fn creates(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::CreateMachine {
                    request, executor, ..
                } => Some((request.clone(), executor.clone())),
                _ => None,
            })
            .collect()
    }

    /// `(executor, hold)` of every deleteMachine output.
    pub fn deletes(&self) -> Vec<(String, Value)> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::DeleteMachine { executor, hold, .. } => {
                    Some((executor.clone(), hold.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// The lease of every deleteMachine output that holds a slot until `machineDeleted`.
    pub fn deleting_leases(&self) -> Vec<u64> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::DeleteMachine { lease, .. } => *lease,
                _ => None,
            })
            .collect()
    }

    pub fn start_failed(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::StartFailed { executor, error } => Some((executor.clone(), error.clone())),
                _ => None,
            })
            .collect()
    }

    pub fn preflights(&self) -> Vec<String> {
        self.requests_of(|o| match o {
            Output::Preflight { executor } => Some(executor.clone()),
            _ => None,
        })
    }

    /// `(ids, state)` of every persist output.
    pub fn persists(&self) -> Vec<(Vec<String>, PersistedState)> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::Persist { ids, state } => Some((ids.clone(), state.clone())),
                _ => None,
            })
            .collect()
    }

    /// The one persisted state of these outputs.
    pub fn persisted(&self) -> PersistedState {
        let persists = self.persists();
        assert_eq!(persists.len(), 1, "expected one persist in {self:#?}");
        persists[0].1.clone()
    }

    pub fn events(&self) -> Vec<Event> {
        self.0
            .iter()
            .filter_map(|o| match o {
                Output::Event {
                    level,
                    name,
                    message,
                    fields,
                } => Some(Event {
                    level: *level,
                    name: name.to_string(),
                    message: message.clone(),
                    fields: fields.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// Messages of the events named `name`.
    pub fn messages(&self, name: &str) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| e.name == name)
            .map(|e| e.message)
            .collect()
    }

    /// The one event named `name`.
    pub fn event(&self, name: &str) -> Event {
        let found: Vec<Event> = self
            .events()
            .into_iter()
            .filter(|e| e.name == name)
            .collect();
        assert_eq!(found.len(), 1, "expected one `{name}` event in {self:#?}");
        found[0].clone()
    }

    pub fn has_event(&self, name: &str) -> bool {
        self.events().iter().any(|e| e.name == name)
    }

    /// Every output that is not an event (the decisions and effects).
    pub fn decisions(&self) -> Vec<Output> {
        self.0
            .iter()
            .filter(|o| !matches!(o, Output::Event { .. }))
            .cloned()
            .collect()
    }

    fn requests_of(&self, f: impl Fn(&Output) -> Option<String>) -> Vec<String> {
        self.0.iter().filter_map(f).collect()
    }
}

/// A policy, its virtual clock, and every output it gave.
pub struct Sim {
    pub policy: Policy,
    /// The `now` the next input carries (unless it says otherwise).
    pub now: u64,
    /// Every output so far, in order.
    pub log: Vec<Output>,
}

impl Sim {
    /// The state file the persists so far wrote, in id order.
    pub fn file(&self) -> PersistedState {
        let mut file = PersistedState {
            version: 1,
            exclusions: Vec::new(),
        };
        for output in &self.log {
            if let Output::Persist { ids, state } = output {
                file.apply(ids, &state.exclusions);
            }
        }
        file.exclusions.sort_by(|a, b| a.id.cmp(&b.id));
        file
    }

    /// The lasting state, in id order (to compare with [`Sim::file`]).
    pub fn lasting(&self) -> PersistedState {
        let mut state = self.policy.persisted_state();
        state.exclusions.sort_by(|a, b| a.id.cmp(&b.id));
        state
    }

    pub fn new(document: Value) -> Sim {
        Sim::with_options(document, json!(null))
    }

    /// `options` in their JSON shape (`{"canProbe": false}`), defaults for the rest.
    pub fn with_options(document: Value, options: Value) -> Sim {
        let options: Options = parse_options(&options).expect("test options parse");
        let policy = Policy::new(&document, options).expect("test document is valid");
        policy.check_invariants();
        Sim {
            policy,
            now: T0,
            log: Vec::new(),
        }
    }

    /// Sets the clock (absolute epoch ms).
    pub fn at(&mut self, t: u64) -> &mut Sim {
        self.now = t;
        self
    }

    /// Moves the clock forward.
    pub fn after(&mut self, ms: u64) -> &mut Sim {
        self.now += ms;
        self
    }

    fn with_now(&self, mut input: Value) -> Value {
        if input.get("now").is_none() {
            input["now"] = json!(self.now);
        }
        input
    }

    /// Feeds one input (JSON; `now` filled in from the clock when absent); panics
    /// on an error. Returns the drained outputs.
    pub fn input(&mut self, input: Value) -> Outs {
        match self.try_input(input.clone()) {
            Ok(outs) => outs,
            Err(e) => panic!("input {input} was refused: {e} ({})", e.code()),
        }
    }

    /// Feeds one input; on an error asserts that the state is exactly as it was.
    pub fn try_input(&mut self, input: Value) -> Result<Outs, Error> {
        let input = self.with_now(input);
        let parsed = parse_input(&input)?;
        let before = self.policy.export_state();
        match self.policy.handle(parsed) {
            Ok(()) => {
                self.policy.check_invariants();
                let outs: Vec<Output> = std::iter::from_fn(|| self.policy.poll_output()).collect();
                self.log.extend(outs.iter().cloned());
                Ok(Outs(outs))
            }
            Err(e) => {
                assert_eq!(
                    self.policy.export_state(),
                    before,
                    "a refused input ({input}) changed the state"
                );
                assert!(
                    self.policy.poll_output().is_none(),
                    "a refused input gave outputs"
                );
                Err(e)
            }
        }
    }

    /// Feeds an input that must be refused; returns the error (state unchanged).
    pub fn refused(&mut self, input: Value) -> Error {
        match self.try_input(input.clone()) {
            Ok(outs) => panic!("input {input} was accepted: {outs:#?}"),
            Err(e) => e,
        }
    }

    pub fn lease(&mut self, id: &str, role: &str) -> Outs {
        self.input(json!({ "type": "lease", "id": id, "role": role }))
    }

    /// A lease request with extra fields (`{"avoid": [...], "rank": 1}`).
    pub fn lease_with(&mut self, id: &str, role: &str, extra: Value) -> Outs {
        let mut input = json!({ "type": "lease", "id": id, "role": role });
        if let Value::Object(fields) = extra {
            for (key, value) in fields {
                input[key] = value;
            }
        }
        self.input(input)
    }

    /// Leases and asserts the grant; returns `(executor, lease)`.
    pub fn granted(&mut self, id: &str, role: &str) -> (String, u64) {
        let grant = self.lease(id, role).grant();
        assert_eq!(grant.request, id);
        (grant.executor, grant.lease)
    }

    pub fn try_lease(&mut self, id: &str, role: &str) -> Outs {
        self.input(json!({ "type": "tryLease", "id": id, "role": role }))
    }

    pub fn release(&mut self, lease: u64) -> Outs {
        self.input(json!({ "type": "release", "lease": lease }))
    }

    pub fn cancel(&mut self, id: &str) -> Outs {
        self.input(json!({ "type": "cancel", "id": id }))
    }

    /// A failure report of `kind` (`usageLimit`, `rateLimit`, ...) with a message.
    pub fn report(&mut self, executor: &str, kind: &str, message: &str) -> Outs {
        self.report_with(executor, json!({ "kind": kind, "message": message }))
    }

    pub fn report_with(&mut self, executor: &str, failure: Value) -> Outs {
        self.input(json!({ "type": "report", "executor": executor, "failure": failure }))
    }

    pub fn tick(&mut self) -> Outs {
        self.input(json!({ "type": "tick" }))
    }

    /// Moves the clock to `t`, ticking at every wake-up the core asks for on the way
    /// (as a host's timer would), then once at `t`. Returns every output.
    pub fn run_to(&mut self, t: u64) -> Outs {
        let mut all = Vec::new();
        for _ in 0..10_000 {
            match self.policy.poll_timeout() {
                Some(wake) if wake <= t && wake >= self.now => {
                    self.now = wake;
                    all.extend(self.tick().0);
                    if self.policy.poll_timeout() == Some(wake) {
                        break; // a wake-up the tick did not consume: stop here
                    }
                }
                _ => break,
            }
        }
        self.now = t;
        all.extend(self.tick().0);
        Outs(all)
    }

    pub fn wake_at(&self) -> Option<u64> {
        self.policy.poll_timeout()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.policy.snapshot()
    }

    pub fn exec(&self, id: &str) -> ExecutorStatus {
        self.snapshot()
            .executors
            .into_iter()
            .find(|x| x.id == id)
            .unwrap_or_else(|| panic!("no executor {id} in the snapshot"))
    }

    pub fn has_exec(&self, id: &str) -> bool {
        self.snapshot().executors.iter().any(|x| x.id == id)
    }

    pub fn exclusion(&self, id: &str) -> Option<ExclusionStatus> {
        self.exec(id).exclusion
    }

    /// The ids of the waiting requests, in lease order.
    pub fn queue(&self) -> Vec<String> {
        self.snapshot()
            .queue
            .into_iter()
            .map(|q| q.request)
            .collect()
    }
}

/// The `code` of an error, for assertions.
pub fn code(error: &Error) -> &'static str {
    error.code()
}

/// Feeds `input` through the JSON step (the text every host speaks) and asserts the
/// core took it.
pub fn feed(policy: &mut Policy, input: Value) -> Value {
    let out = rota_core::json::step(policy, &input);
    assert!(out.get("error").is_none(), "{input}: {out}");
    out
}

/// The requests an answer of the JSON step granted, in order.
pub fn granted(out: &Value) -> Vec<String> {
    out["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .filter(|o| o["type"] == "granted")
        .map(|o| o["request"].as_str().unwrap_or_default().to_string())
        .collect()
}
