//! Exhaustion: whether anything can ever serve a request, and the reasons why not
//! (the seed's waiting report and `RosterExhausted` reasons).

use std::fmt::Write as _;

use crate::protocol::Unservable;
use crate::time::iso;
use crate::write::push_u64;

use super::avoid::Avoid;
use super::exclusions::Described;
use super::queue::Ending;
use super::reload::Startup;
use super::requests::Request;
use super::Policy;

/// How many executors a waiting report names (then "and N more").
const SHOWN: usize = 10;

impl Policy {
    pub(super) fn can_serve_request(&self, req: &Request, r: usize) -> bool {
        self.can_serve(r, req.avoid(), req.pin())
    }

    /// Whether some executor outside `avoid` (or the pin) can ever serve role `r`:
    /// O(avoid · log executors), whatever the size of the roster.
    pub(super) fn can_serve(&self, r: usize, avoid: &Avoid, pin: Option<&str>) -> bool {
        if let Some(pin) = pin {
            if avoid.contains(pin) {
                return false;
            }
            return match self.roster.index.get(pin) {
                None => true, // undeclared: it waits until a reload declares it
                Some(e) => {
                    self.roster.executors[e].draining || self.roster.executors[e].servable(r)
                }
            };
        }
        let executors = &self.roster.executors;
        let mut avoided = 0usize;
        self.each_avoided(avoid, |e| avoided += usize::from(executors[e].servable(r)));
        self.roster.roles.servable[r] as usize > avoided
    }

    /// The executors of the roster an avoid list names, each once, by index in
    /// ascending order. A lookup per id: O(avoid) with the hashed id index.
    pub(super) fn avoided_executors(&self, avoid: &Avoid) -> Vec<usize> {
        let mut found = Vec::with_capacity(avoid.distinct_len().min(self.roster.index.0.len()));
        self.each_avoided(avoid, |e| found.push(e));
        found.sort_unstable();
        found
    }

    /// Calls `f` with each executor an avoid list names, once each, in id order
    /// (`avoided_executors` without the list, for a question that only counts).
    fn each_avoided(&self, avoid: &Avoid, mut f: impl FnMut(usize)) {
        for e in avoid.distinct().filter_map(|id| self.roster.index.get(id)) {
            f(e);
        }
    }

    /// Whether a request that nothing can ever serve ends now as exhausted (the
    /// roster seed), rather than waiting for a slot, a reload or a cancel (the
    /// scheduler seed, `unservable: "wait"`). While the startup preflight runs,
    /// every request waits.
    pub(super) fn ends_unservable(&self) -> bool {
        self.serving() && self.roster.unservable == Unservable::Exhaust
    }

    /// Ends every waiting request that nothing can ever serve now.
    pub(super) fn recheck_all_exhaustion(&mut self) {
        let all: Vec<usize> = (0..self.document.roles.len()).collect();
        self.recheck_exhaustion(&all);
    }

    /// Ends every waiting request of these roles that nothing can ever serve now.
    pub(super) fn recheck_exhaustion(&mut self, roles: &[usize]) {
        if !self.ends_unservable() {
            return;
        }
        let mut ended = Vec::new();
        for &r in roles {
            for &(_, s) in self.queue.by_role[r].iter() {
                let Some(req) = self.queue.requests.at(s) else {
                    debug_assert!(false, "a queued slot holds a request");
                    continue;
                };
                // One that borrows is served by `borrow_pass` instead.
                if !self.can_serve_request(req, r) && !self.would_borrow(s, r) {
                    ended.push(String::from(&*req.id));
                }
            }
        }
        for id in ended {
            self.end_request(&id, Ending::Exhausted);
        }
    }

    pub(super) fn exhausted_reasons(&self, req: &Request) -> Vec<String> {
        let Some(r) = self.roster.request_role(req) else {
            return vec![format!(
                "the roster no longer has the role {}",
                self.roster.request_role_name(req)
            )];
        };
        if let Some(pin) = req.pin() {
            if req.avoids(pin) {
                return vec![format!("{pin} is both the pin and avoided")];
            }
            return match self.roster.index.get(pin) {
                Some(e) => vec![self.unavailable_reason(e, r)],
                None => vec![format!("{pin} is not in the roster")],
            };
        }
        let members = &self.roster.roles.members[r];
        let reasons: Vec<String> = members
            .iter()
            .filter(|&&e| !req.avoids(&self.roster.executors[e].spec.id))
            .map(|&e| self.unavailable_reason(e, r))
            .collect();
        if !reasons.is_empty() {
            reasons
        } else if members.is_empty() {
            vec!["no executor in the roster takes this role".to_string()]
        } else {
            // Every executor with the role is avoided: name them, as `explain` does.
            members
                .iter()
                .map(|&e| {
                    format!(
                        "{}: avoided by the request",
                        self.roster.executors[e].spec.id
                    )
                })
                .collect()
        }
    }

    /// Why a request reached its deadline: the state of each executor its waiting
    /// report names, as at the deadline (a long list ends "and N more").
    pub(super) fn timed_out_reasons(&self, req: &Request) -> Vec<String> {
        let Some(r) = self.roster.request_role(req) else {
            return vec![format!(
                "the roster no longer has the role {}",
                self.roster.request_role_name(req)
            )];
        };
        if let Some(pin) = req.pin() {
            return vec![match self.roster.index.get(pin) {
                None => format!("{pin} not in the roster"),
                Some(e) => self.executor_state(e, r),
            }];
        }
        let members: Vec<usize> = self.roster.roles.members[r]
            .iter()
            .copied()
            .filter(|&e| !req.avoids(&self.roster.executors[e].spec.id))
            .collect();
        let mut reasons: Vec<String> = members
            .iter()
            .take(SHOWN)
            .map(|&e| self.executor_state(e, r))
            .collect();
        if members.len() > SHOWN {
            reasons.push(format!("and {} more", members.len() - SHOWN));
        }
        reasons
    }

    pub(super) fn unavailable_reason(&self, e: usize, r: usize) -> String {
        let x = &self.roster.executors[e];
        let id = &x.spec.id;
        if !x.has_role(r) {
            format!("{id} does not take {}", self.role_name(r))
        } else if let Some(exclusion) = &x.runtime.exclusion {
            format!("{id} {}", Described(exclusion))
        } else if x.cap(r) == 0 {
            format!("{id} takes no {} slot (its cap is 0)", self.role_name(r))
        } else if x.draining {
            format!("{id} was removed by a reload")
        } else {
            format!("{id} unavailable")
        }
    }

    /// The seed's waiting report: "a busy; b until ...: usage limit (...)", the
    /// first `SHOWN` members of the role outside `avoid` and "and N more". Built
    /// from those it shows and two counts, so a lease that waits costs
    /// O(SHOWN + avoid · log), not a pass over every member of the role.
    pub(super) fn waiting_report(&self, r: usize, avoid: &Avoid, pin: Option<&str>) -> String {
        if let Some(pin) = pin {
            return match self.roster.index.get(pin) {
                None => format!("{pin} not in the roster"),
                Some(e) => self.executor_state(e, r),
            };
        }
        let members = &self.roster.roles.members[r];
        let avoided = self.avoided_executors(avoid);
        let executors = &self.roster.executors;
        let avoided_members = avoided.iter().filter(|&&e| executors[e].has_role(r));
        let listed = members.len() - avoided_members.count();
        // Every avoided member skipped costs one step: at most SHOWN + avoid steps.
        // Written into one string (a lease that waits is a hot path: no part apart).
        // Room for a few "<id> busy; " (no regrowth on the way in the common case).
        let mut report = String::with_capacity(16 * members.len().min(SHOWN) + 16);
        for e in members
            .iter()
            .copied()
            .filter(|e| avoided.binary_search(e).is_err())
            .take(SHOWN)
        {
            if !report.is_empty() {
                report.push_str("; ");
            }
            self.write_executor_state(&mut report, e, r);
        }
        if listed > SHOWN {
            if !report.is_empty() {
                report.push_str("; ");
            }
            report.push_str("and ");
            push_u64(&mut report, (listed - SHOWN) as u64);
            report.push_str(" more");
        }
        if report.is_empty() {
            // It waits all the same (`unservable: "wait"`) until a reload or a cancel.
            return format!("no executor takes {}", self.role_name(r));
        }
        report
    }

    /// The executors the waiting report names as having spent their budget, in its
    /// order (the same members: the pin, or the first `SHOWN` outside `avoid`). None
    /// without a spent executor, at the cost of one check.
    pub(super) fn spent_in_report(
        &self,
        r: usize,
        avoid: &Avoid,
        pin: Option<&str>,
    ) -> Vec<String> {
        if self.budgets.rooms.is_empty() {
            return Vec::new();
        }
        let waits_on_budget = |e: usize| {
            let x = &self.roster.executors[e];
            !x.draining
                && x.per_role.get(r).is_none_or(|role| role.cap > 0)
                && x.runtime.exclusion.is_none()
                && !x.runtime.pause.as_ref().is_some_and(|p| p.blocked)
                && x.spent()
        };
        let named: Vec<usize> = match pin {
            Some(pin) => self.roster.index.get(pin).into_iter().collect(),
            None => {
                let avoided = self.avoided_executors(avoid);
                self.roster.roles.members[r]
                    .iter()
                    .copied()
                    .filter(|e| avoided.binary_search(e).is_err())
                    .take(SHOWN)
                    .collect()
            }
        };
        named
            .into_iter()
            .filter(|&e| waits_on_budget(e))
            .map(|e| self.roster.executors[e].spec.id.clone())
            .collect()
    }

    /// Keeps the waiting report of a request of role `r` with no avoid list and no
    /// pin (`Roster::reports`).
    pub(super) fn keep_report(&mut self, r: usize, report: &str) {
        let reports = &mut self.roster.reports;
        if reports.len() <= r {
            reports.resize(self.document.roles.len().max(r + 1), None);
        }
        reports[r] = Some(report.to_string());
    }

    pub(super) fn executor_state(&self, e: usize, r: usize) -> String {
        let mut state = String::new();
        self.write_executor_state(&mut state, e, r);
        state
    }

    /// Appends what keeps executor `e` from role `r` ("a busy", "b until ...").
    fn write_executor_state(&self, out: &mut String, e: usize, r: usize) {
        let x = &self.roster.executors[e];
        let id = &x.spec.id;
        // (Writing to a String cannot fail.)
        if x.draining {
            let _ = write!(out, "{id} removed by a reload (draining)");
            return;
        }
        if x.per_role.get(r).is_some_and(|role| role.cap == 0) {
            let role = self.role_name(r);
            let _ = write!(out, "{id} takes no {role} slot (its cap is 0)");
            return;
        }
        let _ = match &x.runtime.exclusion {
            Some(exclusion) => {
                out.push_str(id);
                out.push(' ');
                Described(exclusion).push_to(out);
                Ok(())
            }
            None => match &x.runtime.pause {
                Some(p) if p.blocked => {
                    write!(out, "{id} paused creating machines until {}", iso(p.until))
                }
                _ if x.spent() => {
                    out.push_str(id);
                    out.push_str(" spent its ");
                    out.push_str(&self.budget_line(e).unwrap_or_default());
                    Ok(())
                }
                _ if !self.serving() => match self.reloads.startup {
                    Startup::Failed => write!(out, "{id}: the roster did not start"),
                    _ => write!(out, "{id} waits for its startup preflight"),
                },
                _ => {
                    // The common case, without the formatting machinery.
                    out.push_str(id);
                    out.push_str(if x.runtime.recovery.probation {
                        " busy (on probation: one slot)"
                    } else {
                        " busy"
                    });
                    Ok(())
                }
            },
        };
    }
}
