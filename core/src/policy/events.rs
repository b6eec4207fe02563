//! Events: every decision's human message and structured fields.

use serde_json::Value;

use crate::protocol::{Fields, Level, Output};
use crate::write::push_u64;

/// The stable name of every event the policy emits (`Output::Event::name`): hosts
/// and logs key on these strings, so a name never changes once released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EventName {
    /// A request was granted a lease.
    Granted,
    /// `choice: "leastBusy"` or executor weights chose among equal free executors.
    Chosen,
    /// A request started to wait (announced once, with the waiting report).
    Waiting,
    /// A `tryLease` found no free slot.
    Unavailable,
    /// A waiting request was cancelled.
    Cancelled,
    /// A request reached its deadline without a lease.
    TimedOut,
    /// Nothing can ever serve a request.
    Exhausted,
    /// Work already running took a slot (`occupy`).
    Occupied,
    /// Work already running took a slot beyond the executor's slots.
    OccupiedBeyondCapacity,
    /// Work already runs on an executor the roster does not have.
    OccupiedUnknown,
    /// A lease ended and its slot is free (the seed's "Worker slot released").
    Released,
    /// A released lease's machine is being deleted; its slot frees after.
    DeletingMachine,
    /// A released lease's machine could not be deleted: its slot freed anyway.
    MachineDeleteFailed,
    /// A lease ended on an executor running more leases than it has slots, or on
    /// one a reload removed, before its last.
    Retired,
    /// A removed executor's last slot was freed: it leaves the roster.
    Left,
    /// An executor is out of the round.
    Excluded,
    /// The floor under a role (`maxExcluded`) kept an executor in the round.
    ExclusionHeldBack,
    /// A weaker or earlier-ending exclusion left the stronger one as it was.
    ExclusionKept,
    /// A timed exclusion now waits under a stronger one.
    ExclusionQueued,
    /// An exclusion ended and the timed one it shadowed took over.
    ExclusionChanged,
    /// An executor is back in the round.
    Back,
    /// An operator resumed an executor.
    Resumed,
    /// The last executor in the round for a role went out: nothing serves it now.
    RoleOut,
    /// A role that had no executor in the round has one again.
    RoleBack,
    /// A rate limit was counted, short of an exclusion.
    RateLimited,
    /// A failure that takes no executor out of the round.
    FailureIgnored,
    /// An `other` failure counted towards `exclusion.consecutiveFailures`.
    FailureCounted,
    /// An executor came back on probation: one slot (`recovery: "probation"`).
    ProbationStarted,
    /// A lease on an executor on probation was released without a failure: every
    /// slot is back.
    ProbationEnded,
    /// A usage limit's message names a reset time rota does not read (an unknown
    /// zone): the usage cooldown applies.
    ResetTimeUnread,
    /// A health probe found the engine still down.
    ProbeDown,
    /// A probe result nothing waited for.
    ProbeIgnored,
    /// A slot is held while its machine is created.
    CreatingMachine,
    /// A machine arrived for a cancelled request: it is deleted.
    MachineDiscarded,
    /// Machine creation failed: the executor pauses creating machines.
    ProvisionPaused,
    /// A machine-creation pause ended.
    ProvisionResumed,
    /// A reload waits for the preflights of the executors it adds or grows.
    Preflighting,
    /// A newer reload replaced one waiting for preflights.
    ReloadSuperseded,
    /// A preflight failed: the reload is refused.
    ReloadRefused,
    /// A reload added an executor (or declared a draining one again).
    Added,
    /// A reload changed an executor's slots.
    Resized,
    /// A reload removed an executor.
    Removed,
    /// A reload applied.
    Reloaded,
    /// A preflight answer that no start or reload waits for any more.
    PreflightIgnored,
    /// The startup preflight of every executor passed: the roster serves.
    Started,
    /// A startup preflight failed: the roster does not start.
    StartFailed,
    /// A machine creation failed after its request stopped waiting: no pause.
    MachineFailedIgnored,
    /// A machine creation nobody will answer was dropped (`dropCreation`, or its
    /// owner expired): no pause.
    CreationDropped,
    /// An owner is gone (`expireOwner`): what became of its requests and leases.
    OwnerExpired,
}

impl EventName {
    /// The name as it appears in the event output.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            EventName::Granted => "granted",
            EventName::Chosen => "chosen",
            EventName::Waiting => "waiting",
            EventName::Unavailable => "unavailable",
            EventName::Cancelled => "cancelled",
            EventName::TimedOut => "timedOut",
            EventName::Exhausted => "exhausted",
            EventName::Occupied => "occupied",
            EventName::OccupiedBeyondCapacity => "occupiedBeyondCapacity",
            EventName::OccupiedUnknown => "occupiedUnknown",
            EventName::Released => "released",
            EventName::DeletingMachine => "deletingMachine",
            EventName::MachineDeleteFailed => "machineDeleteFailed",
            EventName::Retired => "retired",
            EventName::Left => "left",
            EventName::Excluded => "excluded",
            EventName::ExclusionHeldBack => "exclusionHeldBack",
            EventName::ExclusionKept => "exclusionKept",
            EventName::ExclusionQueued => "exclusionQueued",
            EventName::ExclusionChanged => "exclusionChanged",
            EventName::Back => "back",
            EventName::Resumed => "resumed",
            EventName::RoleOut => "roleOut",
            EventName::RoleBack => "roleBack",
            EventName::RateLimited => "rateLimited",
            EventName::FailureIgnored => "failureIgnored",
            EventName::FailureCounted => "failureCounted",
            EventName::ProbationStarted => "probationStarted",
            EventName::ProbationEnded => "probationEnded",
            EventName::ResetTimeUnread => "resetTimeUnread",
            EventName::ProbeDown => "probeDown",
            EventName::ProbeIgnored => "probeIgnored",
            EventName::CreatingMachine => "creatingMachine",
            EventName::MachineDiscarded => "machineDiscarded",
            EventName::ProvisionPaused => "provisionPaused",
            EventName::ProvisionResumed => "provisionResumed",
            EventName::Preflighting => "preflighting",
            EventName::ReloadSuperseded => "reloadSuperseded",
            EventName::ReloadRefused => "reloadRefused",
            EventName::Added => "added",
            EventName::Resized => "resized",
            EventName::Removed => "removed",
            EventName::Reloaded => "reloaded",
            EventName::PreflightIgnored => "preflightIgnored",
            EventName::Started => "started",
            EventName::StartFailed => "startFailed",
            EventName::MachineFailedIgnored => "machineFailedIgnored",
            EventName::CreationDropped => "creationDropped",
            EventName::OwnerExpired => "ownerExpired",
        }
    }
}

/// An event as an output (an emitted one, and one built when a queued reference is read).
pub(super) fn event_output(
    level: Level,
    name: EventName,
    message: String,
    fields: Fields,
) -> Output {
    Output::Event {
        level,
        name: name.as_str().into(),
        message,
        fields,
    }
}

pub(super) fn for_label(label: Option<&str>) -> String {
    label.map(|l| [" for ", l].concat()).unwrap_or_default()
}

/// Adds a request's label to its event's fields, when it has one.
pub(super) fn with_label(fields: &mut Vec<(&'static str, Value)>, label: Option<&str>) {
    if let Some(label) = label {
        fields.push(("label", Value::String(label.to_string())));
    }
}

/// "1 running lease", "2 running leases".
pub(super) fn plural(n: u32, one: &str, many: &str) -> String {
    let mut text = String::new();
    push_u64(&mut text, u64::from(n));
    text.push(' ');
    text.push_str(if n == 1 { one } else { many });
    text
}
