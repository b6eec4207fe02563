//! Flows of exclusions: failure reports and their classification, exclusions set,
//! ended, resumed and taken over, and what they do to the ready sets and waiters.

use std::borrow::Cow;

use crate::classify::{classify, excerpt, Classification, Rule};
use crate::document::ResetTime;
use crate::duration::{format_seed_duration, write_seed_duration};
use crate::protocol::{ExclusionKind, Failure, FailureKind, Level};
use crate::reset_time::{read_reset, MessageReset};
use crate::sorted;
use crate::time::iso;
use serde_json::{json, Value};

use super::events::EventName;
use super::exclusions::{kind_name, merge_exclusions, ActiveExclusion, Described};
use super::queue::Ending;
use super::recovering::Recovered;
use super::Policy;

impl Policy {
    /// The kind a failure report would get, with this document's signal table, and
    /// the reset time read from its message (`resetTime: "message"`).
    pub fn classify(&self, failure: &Failure) -> Classification {
        self.classify_at(failure, self.now)
    }

    /// [`Policy::classify`], a reset time in the message read at `now` (a host's
    /// time, which may be ahead of the last input's).
    pub fn classify_at(&self, failure: &Failure, now: u64) -> Classification {
        let (read, _) = self.with_message_reset(failure, now.max(self.now));
        let mut classification = classify(&read, &self.document.signals);
        if let (Cow::Owned(read), FailureKind::UsageLimit) = (&read, classification.kind) {
            classification.reset_at = read.reset_at;
        }
        classification
    }

    /// `failure` with the reset time its message names as its `resetAt`, when the
    /// document reads messages (`resetTime: "message"`) and the report gives none;
    /// and the part of the message that names one rota does not read.
    fn with_message_reset<'f>(
        &self,
        failure: &'f Failure,
        now: u64,
    ) -> (Cow<'f, Failure>, Option<&'f str>) {
        if failure.reset_at.is_some() || self.document.reset_time() != ResetTime::Message {
            return (Cow::Borrowed(failure), None);
        }
        match read_reset(&failure.message, now) {
            MessageReset::None => (Cow::Borrowed(failure), None),
            MessageReset::At(at) => (
                Cow::Owned(Failure {
                    reset_at: Some(at),
                    ..failure.clone()
                }),
                None,
            ),
            MessageReset::NotUnderstood(part) => (Cow::Borrowed(failure), Some(part)),
        }
    }

    /// A failure on `executor`; `found` is its index as `check` found it (the time
    /// the input brings may have drained an executor since: `Roster::find` checks it),
    /// which spares a second search of the id index on every report of a storm.
    pub(super) fn report(&mut self, executor: &str, found: Option<usize>, failure: &Failure) {
        let Some(e) = self.roster.find(executor, found) else {
            debug_assert!(false, "report: the executor was checked");
            return;
        };
        let now = self.now;
        let (failure, unread) = self.with_message_reset(failure, now);
        let failure = failure.as_ref();
        let classification = classify(failure, &self.document.signals);
        // A dead engine leaves the round when its health URL can tell when it is back
        // (`classify::UNREACHABLE_CODES`); without one, the seed's rule: nothing.
        let unreachable = classification.rule == Rule::Unreachable
            && self.roster.executors[e].spec.health.is_some()
            && self.options.can_probe;
        let kind = if unreachable {
            FailureKind::Outage
        } else {
            classification.kind
        };
        if let (FailureKind::UsageLimit, Some(part)) = (kind, unread) {
            self.event(
                Level::Warn,
                EventName::ResetTimeUnread,
                format!(
                    "{executor}'s usage limit names a reset time rota does not read ('{part}'): the usage cooldown applies"
                ),
                vec![("executor", json!(executor)), ("text", json!(part))],
            );
        }
        match self.recover_on_report(e, kind, failure) {
            Recovered::No => {}
            Recovered::Counted => return,
            Recovered::Excluded(exclusion) => {
                if !self.held_by_floor(e, kind, &exclusion.reason) {
                    self.exclude(e, exclusion);
                    self.arm_probation(e, kind);
                }
                return;
            }
        }
        let spec = &self.roster.executors[e].spec;
        let exclusion = if kind == FailureKind::ModelUnavailable {
            Some(self.new_exclusion(
                ExclusionKind::Run,
                format!(
                    "its model{} is unavailable ({})",
                    spec.model
                        .as_ref()
                        .map(|m| format!(" '{m}'"))
                        .unwrap_or_default(),
                    excerpt(&failure.message, 200)
                ),
                None,
            ))
        } else {
            match kind {
                FailureKind::UsageLimit => {
                    let until = failure
                        .reset_at
                        .filter(|t| *t > now)
                        .or(failure.retry_after_ms.map(|ms| now.saturating_add(ms)))
                        .filter(|t| *t > now)
                        .unwrap_or(now.saturating_add(spec.cooldown.usage_limit_ms));
                    let mut reason = format!("usage limit ({})", excerpt(&failure.message, 160));
                    self.name_account(e, &mut reason);
                    Some(self.new_exclusion(ExclusionKind::Until, reason, Some(until)))
                }
                FailureKind::RateLimit => self.count_rate_limit(e, failure),
                FailureKind::Authentication => Some(self.new_exclusion(
                    ExclusionKind::Run,
                    format!("not signed in ({})", excerpt(&failure.message, 160)),
                    None,
                )),
                FailureKind::Outage => {
                    let reason = if unreachable {
                        unreachable_reason(failure)
                    } else {
                        format!("serving engine down ({})", excerpt(&failure.message, 160))
                    };
                    Some(self.exclusion_of_kind(e, ExclusionKind::Health, reason, None))
                }
                FailureKind::ModelUnavailable | FailureKind::Other => None,
            }
        };
        match exclusion {
            // A usage or rate limit binds the executor's whole account, with one end.
            Some(exclusion) if matches!(kind, FailureKind::UsageLimit | FailureKind::RateLimit) => {
                for m in self.account_members(e) {
                    if kind == FailureKind::RateLimit {
                        self.roster.executors[m].runtime.rate_limits.clear();
                    }
                    if !self.held_by_floor(m, kind, &exclusion.reason) {
                        self.exclude(m, exclusion.clone());
                        self.arm_probation(m, kind);
                    }
                }
            }
            Some(exclusion) => {
                if !self.held_by_floor(e, kind, &exclusion.reason) {
                    self.exclude(e, exclusion)
                }
            }
            None if kind == FailureKind::RateLimit => {}
            None => self.event(
                Level::Debug,
                EventName::FailureIgnored,
                format!(
                    "{executor} failed ({}); {}that does not take it out of the round",
                    excerpt(&failure.message, 160),
                    if classification.rule == Rule::Unreachable {
                        "it could not reach its engine, but with no health check rota probes, "
                    } else {
                        ""
                    }
                ),
                vec![("executor", json!(executor))],
            ),
        }
    }

    /// Counts a rate limit in the sliding window; the exclusion it earns, if any.
    pub(super) fn count_rate_limit(
        &mut self,
        e: usize,
        failure: &Failure,
    ) -> Option<ActiveExclusion> {
        let now = self.now;
        let window = self.options.rate_limit_window_ms;
        let threshold = self.options.rate_limits_to_exclude.max(1) as usize;
        self.roster.executors[e].runtime.rate_limits.push_back(now);
        // The window is the account's: every member's recent reports count.
        let mut count = 0;
        for m in self.account_members(e) {
            let limits = &mut self.roster.executors[m].runtime.rate_limits;
            while limits
                .front()
                .is_some_and(|&t| t.saturating_add(window) <= now)
            {
                limits.pop_front();
            }
            count += limits.len();
        }
        if let Some(ms) = failure.retry_after_ms.filter(|ms| *ms > 0) {
            // (Every report of a rate-limit storm: the reason written in one string,
            // sized for it.)
            const PREFIX: &str = "rate limited; retry after ";
            let mut reason = String::with_capacity(PREFIX.len() + 16);
            reason.push_str(PREFIX);
            write_seed_duration(&mut reason, ms);
            self.name_account(e, &mut reason);
            return Some(self.new_exclusion(
                ExclusionKind::Until,
                reason,
                Some(now.saturating_add(ms)),
            ));
        }
        if count >= threshold {
            let until = now.saturating_add(self.roster.executors[e].spec.cooldown.rate_limit_ms);
            let mut reason = format!(
                "{count} rate limits within {}",
                format_seed_duration(window)
            );
            self.name_account(e, &mut reason);
            return Some(self.new_exclusion(ExclusionKind::Until, reason, Some(until)));
        }
        let spec = &self.roster.executors[e].spec;
        let id = spec.id.clone();
        let mut message = format!(
            "{id} hit a rate limit ({count} of {threshold} within {})",
            format_seed_duration(window)
        );
        let mut fields = vec![("executor", json!(id)), ("count", json!(count))];
        if let Some(account) = &spec.account {
            fields.push(("account", json!(account)));
            self.name_account(e, &mut message);
        }
        self.event(Level::Info, EventName::RateLimited, message, fields);
        None
    }

    /// The executors sharing `e`'s account (`e` first, then the others in roster
    /// order); `e` alone when it has none.
    pub(super) fn account_members(&self, e: usize) -> Vec<usize> {
        let mut members = vec![e];
        if let Some(account) = &self.roster.executors[e].spec.account {
            members.extend(
                self.roster
                    .executors
                    .iter()
                    .enumerate()
                    .filter_map(|(m, x)| {
                        (m != e && x.spec.account.as_ref() == Some(account)).then_some(m)
                    }),
            );
        }
        members
    }

    /// Appends " (account 'name')" to `text` when `e` has an account.
    pub(super) fn name_account(&self, e: usize, text: &mut String) {
        if let Some(account) = &self.roster.executors[e].spec.account {
            text.push_str(" (account '");
            text.push_str(account);
            text.push_str("')");
        }
    }

    pub(super) fn new_exclusion(
        &self,
        kind: ExclusionKind,
        reason: String,
        until: Option<u64>,
    ) -> ActiveExclusion {
        ActiveExclusion {
            kind,
            reason,
            until,
            since: self.now,
            then: None,
        }
    }

    /// An exclusion of `kind` on `e`; a health one becomes the outage cooldown when
    /// the executor has no health URL or the host cannot probe.
    pub(super) fn exclusion_of_kind(
        &self,
        e: usize,
        kind: ExclusionKind,
        reason: String,
        until: Option<u64>,
    ) -> ActiveExclusion {
        let spec = &self.roster.executors[e].spec;
        if kind == ExclusionKind::Health && (spec.health.is_none() || !self.options.can_probe) {
            return self.new_exclusion(
                ExclusionKind::Until,
                reason,
                Some(self.now.saturating_add(spec.cooldown.outage_ms)),
            );
        }
        let until = match kind {
            ExclusionKind::Run | ExclusionKind::Health => None,
            _ => until,
        };
        self.new_exclusion(kind, reason, until)
    }

    /// Applies an exclusion under the strength rules: `run` lasts the run; a manual
    /// pause ends only by resume or its own end; between timed ends the later wins;
    /// a weaker exclusion never replaces a stronger one but may take over after it.
    pub(super) fn exclude(&mut self, e: usize, new: ActiveExclusion) {
        // Compared in place (every report of a rate-limit storm comes here): only the
        // case that names the old exclusion in its message takes a copy of it.
        let (merged, unchanged, queued_under) = {
            let old = self.roster.executors[e].runtime.exclusion.as_ref();
            let merged = match old {
                None => new,
                Some(old) => merge_exclusions(old.clone(), new),
            };
            let unchanged = old == Some(&merged);
            let queued_under = old
                .filter(|old| {
                    !unchanged
                        && old.kind == merged.kind
                        && old.reason == merged.reason
                        && old.until == merged.until
                })
                .cloned();
            (merged, unchanged, queued_under)
        };
        if unchanged {
            let id = self.roster.executors[e].spec.id.clone();
            self.event(
                Level::Debug,
                EventName::ExclusionKept,
                format!(
                    "{id} stays out of the round {} (a weaker or earlier-ending exclusion does not shorten it)",
                    Described(&merged)
                ),
                vec![("executor", json!(id))],
            );
            return;
        }
        let id = self.roster.executors[e].spec.id.clone();
        if let Some(old) = queued_under {
            // Only the timed exclusion waiting under it changed: say so, quietly.
            let then = merged.then.as_ref().map_or(0, |(t, _)| *t);
            self.event(
                Level::Info,
                EventName::ExclusionQueued,
                format!(
                    "{id} stays out of the round {}; then until {} ({})",
                    Described(&old),
                    iso(then),
                    merged.then.as_ref().map_or("", |(_, r)| r.as_str())
                ),
                vec![("executor", json!(id)), ("thenUntil", json!(then))],
            );
            self.set_exclusion(e, Some(merged));
            return;
        }
        // Sized for it (every report of a rate-limit storm: no regrowth on the way).
        let mut message = String::with_capacity(id.len() + merged.reason.len() + 64);
        message.push_str(&id);
        message.push_str(" out of the round ");
        Described(&merged).push_to(&mut message);
        // Built whole, the last dropped when there is no end (a push would regrow it).
        let mut fields = vec![
            ("executor", Value::String(id)),
            ("kind", json!(merged.kind)),
            ("reason", Value::String(merged.reason.clone())),
            (
                "until",
                merged.until.map_or(Value::Null, |until| json!(until)),
            ),
        ];
        if merged.until.is_none() {
            fields.pop();
        }
        self.event(Level::Warn, EventName::Excluded, message, fields);
        self.set_exclusion(e, Some(merged));
    }

    /// Sets or clears `e`'s exclusion and keeps every index in step with it.
    pub(super) fn set_exclusion(&mut self, e: usize, exclusion: Option<ActiveExclusion>) {
        if exclusion.is_some() {
            // Out again while on probation: back on probation when this ends.
            self.roster.executors[e].runtime.recovery.suspend(self.now);
        }
        self.roster.unready(e);
        self.roster.forget_reports();
        self.probe_unwait(e);
        let old = self.roster.executors[e].runtime.exclusion.take();
        let end = |x: &Option<ActiveExclusion>| x.as_ref().and_then(ActiveExclusion::end);
        self.exclusions.retime(e, end(&old), end(&exclusion));
        let kind = |x: &Option<ActiveExclusion>| x.as_ref().map(|x| x.kind);
        let (was, is) = (kind(&old), kind(&exclusion));
        let (was_run, is_run) = (
            was == Some(ExclusionKind::Run),
            is == Some(ExclusionKind::Run),
        );
        let is_health = is == Some(ExclusionKind::Health);
        self.set_health(e, is_health);
        if is_health && was != Some(ExclusionKind::Health) {
            let runtime = &mut self.roster.executors[e].runtime;
            runtime.last_probe_at = None;
            runtime.probe_in_flight = false;
        }
        // `run` exclusions are never written.
        let lasting = |kind: Option<ExclusionKind>| kind.is_some_and(|k| k != ExclusionKind::Run);
        if lasting(was) || lasting(is) {
            self.persistence.touch(e);
        }
        let back = exclusion.is_none();
        // In or out of the round changed: it came back, or it was in and is out now.
        let round_changed = old.is_some() == back;
        self.roster.executors[e].runtime.exclusion = exclusion;
        if round_changed {
            self.count_in_round(e, back);
        }
        self.probe_wait(e);
        self.roster.ready_up(e);
        if was_run != is_run {
            self.roster
                .roles
                .count_servable(&self.roster.executors[e], !is_run);
            let roles = self.roster.executors[e].role_indexes.clone();
            if is_run && self.ends_unservable() {
                self.recheck_exhaustion(&roles);
                let id = self.roster.executors[e].spec.id.clone();
                let pinned: Vec<String> = sorted::get(&self.queue.pinned, &id)
                    .map(|q| {
                        q.values()
                            .filter_map(|&s| self.queue.requests.at(s))
                            .map(|q| String::from(&*q.id))
                            .collect()
                    })
                    .unwrap_or_default();
                for id in pinned {
                    self.end_request(&id, Ending::Exhausted);
                }
            }
        }
        if back {
            self.roster.dirty.push(e);
        }
    }

    /// Exclusions whose time has come together (or a health check that answered):
    /// for each, the timed one it shadowed takes over if still in the future, else
    /// the executor is back. The executors back are announced in one event, as the
    /// seed does ("a, b back in the round").
    pub(super) fn end_exclusions(&mut self, ended: &[usize], at: u64, answered: bool) {
        let mut back = Vec::new();
        for &e in ended {
            let Some(exclusion) = self.roster.executors[e].runtime.exclusion.clone() else {
                debug_assert!(false, "end_exclusions: an exclusion ends only where one is");
                continue;
            };
            match exclusion.then.clone().filter(|(end, _)| *end > at) {
                Some((end, reason)) => self.take_over(e, &exclusion, end, reason, None),
                None => back.push(e),
            }
        }
        if back.is_empty() {
            return;
        }
        let ids: Vec<String> = back
            .iter()
            .map(|&e| self.roster.executors[e].spec.id.clone())
            .collect();
        let message = if answered {
            format!(
                "{} answers its health check again; back in the round",
                ids.join(", ")
            )
        } else {
            format!("{} back in the round", ids.join(", "))
        };
        let mut fields = vec![("executors", json!(ids))];
        if self.roster.typed {
            // Why they came back (the upstream's `ExecutorResumed.why`).
            fields.push(("why", json!(if answered { "health" } else { "expired" })));
        }
        self.event(Level::Info, EventName::Back, message, fields);
        for &e in &back {
            self.set_exclusion(e, None);
        }
        self.start_probation(&back, at);
    }

    /// The timed exclusion that `ended` shadowed takes over on `e`.
    fn take_over(
        &mut self,
        e: usize,
        ended: &ActiveExclusion,
        end: u64,
        reason: String,
        resumed: Option<&str>,
    ) {
        let id = self.roster.executors[e].spec.id.clone();
        let next = ActiveExclusion {
            kind: ExclusionKind::Until,
            reason,
            until: Some(end),
            since: ended.since,
            then: None,
        };
        let (name, message) = match resumed {
            Some(executor) => (
                EventName::Resumed,
                format!(
                    "{executor} resumed; it stays out of the round {}",
                    Described(&next)
                ),
            ),
            None => (
                EventName::ExclusionChanged,
                format!(
                    "{id}'s {} exclusion ended; it stays out of the round {}",
                    kind_name(ended.kind),
                    Described(&next)
                ),
            ),
        };
        self.set_exclusion(e, Some(next));
        self.event(Level::Info, name, message, vec![("executor", json!(id))]);
    }

    /// An operator's resume: it ends a manual pause, and a timed exclusion the
    /// pause shadowed takes over if it has not ended (issue 17: a 429 queued under
    /// a pause must still hold after the resume). Any other exclusion it ends, as
    /// the seed's `resume` does.
    pub(super) fn resume(&mut self, executor: &str) {
        let Some(e) = self.roster.index.get(executor) else {
            debug_assert!(false, "resume: the executor was checked");
            return;
        };
        let Some(exclusion) = self.roster.executors[e].runtime.exclusion.clone() else {
            return;
        };
        let shadowed = exclusion
            .then
            .clone()
            .filter(|(end, _)| exclusion.kind == ExclusionKind::Manual && *end > self.now);
        if let Some((end, reason)) = shadowed {
            self.take_over(e, &exclusion, end, reason, Some(executor));
            return;
        }
        let mut fields = vec![("executor", json!(executor))];
        if self.roster.typed {
            fields.push(("why", json!("resumed")));
        }
        self.event(
            Level::Info,
            EventName::Resumed,
            format!("{executor} resumed"),
            fields,
        );
        // An operator's word: every slot at once, no probation.
        self.roster.executors[e]
            .runtime
            .recovery
            .back(self.now, false);
        self.set_exclusion(e, None);
    }

    /// Executor `e` left the round (`back` false) or came back to it: the count of
    /// each of its roles changes, and a role that loses its last executor, or gets
    /// its first back, says so.
    fn count_in_round(&mut self, e: usize, back: bool) {
        let roles: Vec<usize> = self.roster.executors[e]
            .role_indexes
            .iter()
            .copied()
            .filter(|&r| self.roster.executors[e].counts_for(r))
            .collect();
        for r in roles {
            let count = &mut self.roster.roles.in_round[r];
            if back {
                *count += 1;
                if *count == 1 {
                    self.role_back(r, e);
                }
            } else {
                debug_assert!(*count > 0, "in-round count of role {r}");
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.role_out(r);
                }
            }
        }
    }

    /// Every executor of role `r` is out of the round: a warning, with when the
    /// first comes back (the earliest timed end; health checks and operators may
    /// bring one back sooner).
    fn role_out(&mut self, r: usize) {
        let members: Vec<usize> = self.roster.roles.members[r]
            .iter()
            .copied()
            .filter(|&e| self.roster.executors[e].counts_for(r))
            .collect();
        let ids: Vec<&str> = members
            .iter()
            .map(|&e| self.roster.executors[e].spec.id.as_str())
            .collect();
        let next = members
            .iter()
            .filter_map(|&e| self.roster.executors[e].runtime.exclusion.as_ref()?.end())
            .min();
        let role = self.role_name(r).to_string();
        let mut message = format!(
            "no executor takes {role} now: every one is out of the round ({})",
            ids.join(", ")
        );
        match next {
            Some(t) => message.push_str(&format!("; the first is back at {}", iso(t))),
            None => message.push_str("; none is back at a set time"),
        }
        let mut fields = vec![("executors", json!(ids)), ("role", json!(role))];
        if let Some(t) = next {
            fields.insert(0, ("nextBackAt", json!(t)));
        }
        self.event(Level::Warn, EventName::RoleOut, message, fields);
    }

    /// Role `r` had no executor in the round, and `e` is back.
    fn role_back(&mut self, r: usize, e: usize) {
        let id = self.roster.executors[e].spec.id.clone();
        let role = self.role_name(r).to_string();
        self.event(
            Level::Info,
            EventName::RoleBack,
            format!("{id} is back: {role} has an executor in the round again"),
            vec![("executor", json!(id)), ("role", json!(role))],
        );
    }
}

/// The reason of a health exclusion for a call that could not reach its engine:
/// "serving engine unreachable (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1234)".
fn unreachable_reason(failure: &Failure) -> String {
    let mut reason = String::from("serving engine unreachable (");
    reason.push_str(failure.code.as_deref().unwrap_or_default());
    if !failure.message.is_empty() {
        reason.push_str(": ");
        reason.push_str(excerpt(&failure.message, 160));
    }
    reason.push(')');
    reason
}
