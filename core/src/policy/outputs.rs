//! The output queue. Most outputs are built when they are decided; those of a plain
//! lease and release (the grant, its `granted` event, a release's `released` event,
//! and an occupy's grant) are queued as references into the state, and built only when they are
//! read (`Policy::poll_output`), or read in place by a host that writes them out
//! itself (`Policy::poll_output_ref`, the npm package's binary step): building their
//! strings and dropping them again was a third of a cycle. The queue's flows are
//! `emitting.rs`'s.
//!
//! A reference names a lease (open until it is released) or an executor by index
//! (valid until the executors move: a removal, a reload). `Policy::settle_outputs`
//! builds every queued reference before either happens, so what is read is always
//! what would have been built when it was decided.

use serde_json::Value;

use crate::protocol::{Because, Fields, Level, Output};

use super::events::{event_output, EventName};
use super::leases::{Lease, LeaseTable};
use super::roster::Executor;

/// An output in the queue.
#[derive(Debug, Clone)]
pub(super) enum Queued {
    Built(Output),
    /// `granted` for the open lease `lease`, its fields read from the lease.
    Granted {
        lease: u64,
        passed: u32,
    },
    /// The `granted` event of the same (a debug event).
    GrantedEvent {
        lease: u64,
        passed: u32,
    },
    /// A plain release's `released` event (debug): lease `lease` ended on `executor`.
    Released {
        executor: usize,
        lease: u64,
    },
}

/// An output read in place (`Policy::poll_output_ref`): built, or borrowed from the
/// policy's state. `into_output` gives the `Output` that `poll_output` would have.
#[derive(Debug)]
pub enum OutputRef<'a> {
    Output(Output),
    /// An `Output::Granted`.
    Granted(Grant<'a>),
    /// The `granted` event of that grant, at its level.
    GrantedEvent(Level, Grant<'a>),
    /// A plain release's `released` event: fields `{ executor, lease }`, message
    /// "`<executor>'s slot is released`".
    Released {
        level: Level,
        executor: &'a str,
        /// The executor's place in the roster (a host may key a table of names by it).
        at: usize,
        lease: u64,
    },
}

/// A grant's fields, borrowed from its lease.
#[derive(Debug, Clone, Copy)]
pub struct Grant<'a> {
    pub request: &'a str,
    pub lease: u64,
    pub executor: &'a str,
    /// Where the executor stood in the roster when the lease opened, if known (a host
    /// may key a table of names by it; the name is what counts).
    pub executor_at: Option<usize>,
    pub role: &'a str,
    pub hold: Option<&'a Value>,
    pub passed: u32,
    /// An `occupy`'s grant.
    pub occupied: bool,
    /// On the request's `borrow` executor without a slot.
    pub borrowed: bool,
    /// On the request's `borrow` executor (not independent), and why.
    pub because: Option<Because>,
    /// The request's label (in the event's fields and message, not in the grant).
    pub label: Option<&'a str>,
    pub owner: Option<&'a str>,
    /// Its clone number (`clones: "numbered"`): in the grant, the event and the message.
    pub clone: Option<u32>,
    /// Its request's purpose (in the event's fields and message, not in the grant).
    pub purpose: Option<&'a str>,
    /// How long its request waited, in ms (typed lease events): in the event only.
    pub waited_ms: Option<u64>,
    /// The tenant its request named (in the event's fields and message).
    pub tenant: Option<&'a str>,
    /// Its request's affinity key, when the key's memory chose the executor again:
    /// in the event's fields and message only.
    pub affinity: Option<&'a str>,
}

impl Grant<'_> {
    fn of(lease_id: u64, lease: &Lease, passed: u32) -> Grant<'_> {
        Grant {
            request: &lease.request,
            lease: lease_id,
            executor: &lease.executor,
            executor_at: lease.at.get(),
            role: lease.role.as_deref().unwrap_or_default(),
            hold: lease.hold.as_ref(),
            passed,
            occupied: lease.occupied,
            borrowed: lease.borrowed,
            because: lease.because,
            label: lease.label.as_deref(),
            owner: lease.owner.as_deref(),
            clone: lease.clone,
            purpose: lease.purpose.as_deref(),
            waited_ms: None,
            tenant: lease.tenant.as_deref(),
            affinity: lease.affinity.as_deref(),
        }
    }

    /// The same, with how long its request waited (a grant whose event is built at once).
    pub(super) fn waited(lease_id: u64, lease: &Lease, passed: u32, waited_ms: u64) -> Grant<'_> {
        Grant {
            waited_ms: Some(waited_ms),
            ..Grant::of(lease_id, lease, passed)
        }
    }

    /// Whether its event has more than the seed's fields (a host that writes the
    /// seed's event from the grant's fields cannot write this one so).
    pub fn has_extra_fields(&self) -> bool {
        self.label.is_some()
            || self.clone.is_some()
            || self.purpose.is_some()
            || self.waited_ms.is_some()
            || self.tenant.is_some()
            || self.affinity.is_some()
    }

    pub fn output(&self) -> Output {
        Output::Granted {
            request: self.request.to_string(),
            lease: self.lease,
            executor: self.executor.to_string(),
            role: self.role.to_string(),
            hold: self.hold.cloned(),
            passed: self.passed,
            occupied: self.occupied,
            borrowed: self.borrowed,
            because: self.because,
            owner: self.owner.map(str::to_string),
            clone: self.clone,
        }
    }

    /// The `granted` event's message, appended to `out` (a host that writes events
    /// out itself reuses one buffer for it).
    pub fn write_message(&self, out: &mut String) {
        out.push_str(self.executor);
        if let Some(n) = self.clone {
            out.push('#');
            crate::write::push_u64(out, u64::from(n));
        }
        out.push_str(" takes ");
        out.push_str(self.role);
        if let Some(label) = self.label {
            out.push_str(" for ");
            out.push_str(label);
        }
        if let Some(purpose) = self.purpose {
            out.push_str(" · ");
            out.push_str(purpose);
        }
        if let Some(tenant) = self.tenant {
            out.push_str(" (tenant ");
            out.push_str(tenant);
            out.push(')');
        }
        if self.hold.is_some() {
            out.push_str(" with a new machine");
        }
        if let Some(key) = self.affinity {
            out.push_str(" (affinity: key '");
            out.push_str(key);
            out.push_str("' stays on it)");
        }
        if let Some(because) = self.because {
            // The upstream roster's lines.
            out.push_str(if self.borrowed {
                " on its own coder's slot — not independent ("
            } else {
                " on its own slot — not independent ("
            });
            match because {
                Because::Nobody => out.push_str("no other executor can take "),
                Because::Held | Because::Out => out.push_str("every other executor that takes "),
            }
            out.push_str(self.role);
            out.push_str(match because {
                Because::Nobody => ")",
                Because::Held => " is held by a coder)",
                Because::Out => " is out of the round)",
            });
        }
    }

    /// The `granted` event: the message without `format!`, the fields in key order.
    pub fn event(&self, level: Level) -> Output {
        let label = self.label;
        let mut message = String::new();
        self.write_message(&mut message);
        let mut fields = Fields::with_capacity(7 + usize::from(label.is_some()));
        if let Some(key) = self.affinity {
            fields.push_sorted("affinity", Value::String(key.to_string()));
        }
        if let Some(because) = self.because {
            fields.push_sorted("because", Value::String(because.as_str().to_string()));
        }
        if self.borrowed {
            fields.push_sorted("borrowed", Value::Bool(true));
        }
        if let Some(n) = self.clone {
            fields.push_sorted("clone", Value::from(n));
        }
        fields.push_sorted("executor", Value::String(self.executor.to_string()));
        if let Some(label) = label {
            fields.push_sorted("label", Value::String(label.to_string()));
        }
        fields.push_sorted("lease", Value::from(self.lease));
        fields.push_sorted("passed", Value::from(self.passed));
        if let Some(purpose) = self.purpose {
            fields.push_sorted("purpose", Value::String(purpose.to_string()));
        }
        fields.push_sorted("request", Value::String(self.request.to_string()));
        fields.push_sorted("role", Value::String(self.role.to_string()));
        if let Some(tenant) = self.tenant {
            fields.push_sorted("tenant", Value::String(tenant.to_string()));
        }
        if let Some(ms) = self.waited_ms {
            fields.push_sorted("waitedMs", Value::from(ms));
        }
        event_output(level, EventName::Granted, message, fields)
    }
}

/// A plain release's `released` event's message, appended to `out`.
fn write_released_message(executor: &str, out: &mut String) {
    out.push_str(executor);
    out.push_str("'s slot is released");
}

/// A release's `released` event with what the lease carried: its clone (in the name
/// and the fields), and, when the lease events are typed or it has a purpose, its role,
/// label and purpose ("codex#2's slot is released (reviewer for story a · adversarial
/// lens)").
pub(super) fn released_detailed(level: Level, lease_id: u64, lease: &Lease, typed: bool) -> Output {
    let detail = (typed || lease.purpose.is_some()).then_some((
        lease.role.as_deref(),
        lease.label.as_deref(),
        lease.purpose.as_deref(),
    ));
    released_output(level, &lease.executor, lease_id, lease.clone, detail)
}

/// A plain release's `released` event.
pub(super) fn released_event(level: Level, executor: &str, lease: u64) -> Output {
    released_output(level, executor, lease, None, None)
}

/// The `released` event: the executor (and clone) and the lease, and with `detail` the
/// lease's role, label and purpose.
fn released_output(
    level: Level,
    executor: &str,
    lease: u64,
    clone: Option<u32>,
    detail: Option<(Option<&str>, Option<&str>, Option<&str>)>,
) -> Output {
    let mut message = String::from(executor);
    if let Some(n) = clone {
        message.push('#');
        crate::write::push_u64(&mut message, u64::from(n));
    }
    message.push_str("'s slot is released");
    let mut fields = Fields::with_capacity(6);
    if let Some(n) = clone {
        fields.push_sorted("clone", Value::from(n));
    }
    fields.push_sorted("executor", Value::String(executor.to_string()));
    let (role, label, purpose) = detail.unwrap_or_default();
    if let Some(label) = label {
        fields.push_sorted("label", Value::String(label.to_string()));
    }
    fields.push_sorted("lease", Value::from(lease));
    if let Some(purpose) = purpose {
        fields.push_sorted("purpose", Value::String(purpose.to_string()));
    }
    if let Some(role) = role {
        fields.push_sorted("role", Value::String(role.to_string()));
    }
    if detail.is_some() {
        message.push_str(" (");
        message.push_str(role.unwrap_or("no role"));
        for (sep, text) in [(" for ", label), (" · ", purpose)] {
            if let Some(text) = text {
                message.push_str(sep);
                message.push_str(text);
            }
        }
        message.push(')');
    }
    event_output(level, EventName::Released, message, fields)
}

impl OutputRef<'_> {
    /// An event's message, appended to `out` (a host that writes events out itself
    /// reuses one buffer for it); nothing for the other outputs.
    pub fn write_message(&self, out: &mut String) {
        match self {
            OutputRef::GrantedEvent(_, grant) => grant.write_message(out),
            OutputRef::Released { executor, .. } => write_released_message(executor, out),
            OutputRef::Output(Output::Event { message, .. }) => out.push_str(message),
            OutputRef::Output(_) | OutputRef::Granted(_) => {}
        }
    }

    /// The `Output` that `poll_output` gives for it.
    pub fn into_output(self) -> Output {
        match self {
            OutputRef::Output(output) => output,
            OutputRef::Granted(grant) => grant.output(),
            OutputRef::GrantedEvent(level, grant) => grant.event(level),
            OutputRef::Released {
                level,
                executor,
                lease,
                ..
            } => released_event(level, executor, lease),
        }
    }
}

/// A queued reference read against the state: `None` for a built output, and for a
/// reference that no longer resolves (which `settle_outputs` prevents: the invariants
/// check it).
pub(super) fn resolve<'a>(
    queued: &Queued,
    leases: &'a LeaseTable,
    executors: &'a [Executor],
) -> Option<OutputRef<'a>> {
    Some(match *queued {
        Queued::Built(_) => return None,
        Queued::Granted { lease, passed } | Queued::GrantedEvent { lease, passed } => {
            let grant = Grant::of(lease, leases.get(lease)?, passed);
            if let Queued::Granted { .. } = queued {
                OutputRef::Granted(grant)
            } else {
                OutputRef::GrantedEvent(Level::Debug, grant)
            }
        }
        Queued::Released { executor, lease } => OutputRef::Released {
            level: Level::Debug,
            executor: &executors.get(executor)?.spec.id,
            at: executor,
            lease,
        },
    })
}
