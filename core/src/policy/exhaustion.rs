//! Exhaustion: whether anything can ever serve a request, and the reasons why not
//! (the seed's waiting report and `RosterExhausted` reasons).

use crate::time::iso;

use super::exclusions::Described;
use super::queue::{Ending, Request};
use super::Policy;

impl Policy {
    pub(super) fn can_serve_request(&self, req: &Request, r: usize) -> bool {
        self.can_serve(r, req.avoid(), req.pin())
    }

    pub(super) fn can_serve(&self, r: usize, avoid: &[String], pin: Option<&str>) -> bool {
        if let Some(pin) = pin {
            if avoid.iter().any(|a| a == pin) {
                return false;
            }
            return match self.roster.index.get(pin) {
                None => true, // undeclared: it waits until a reload declares it
                Some(e) => {
                    self.roster.executors[e].draining || self.roster.executors[e].servable(r)
                }
            };
        }
        // Each id once (an avoid list may repeat one).
        let avoided = avoid
            .iter()
            .enumerate()
            .filter(|&(i, id)| {
                !avoid[..i].contains(id)
                    && self
                        .roster
                        .index
                        .get(id.as_str())
                        .is_some_and(|e| self.roster.executors[e].servable(r))
            })
            .count() as u32;
        self.roster.roles.servable[r] > avoided
    }

    /// Ends every waiting request of these roles that nothing can ever serve now.
    pub(super) fn recheck_exhaustion(&mut self, roles: &[usize]) {
        let mut ended = Vec::new();
        for &r in roles {
            for &s in self.queue.by_role[r].values() {
                let Some(req) = self.queue.requests.at(s) else {
                    debug_assert!(false, "a queued slot holds a request");
                    continue;
                };
                if !self.can_serve_request(req, r) {
                    ended.push(req.id.to_string());
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
        const SHOWN: usize = 10;
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
        } else if x.caps[r] == 0 {
            format!("{id} takes no {} slot (its cap is 0)", self.role_name(r))
        } else if x.draining {
            format!("{id} was removed by a reload")
        } else {
            format!("{id} unavailable")
        }
    }

    /// The seed's waiting report: "a busy; b until ...: usage limit (...)".
    pub(super) fn waiting_report(&self, r: usize, avoid: &[String], pin: Option<&str>) -> String {
        const SHOWN: usize = 10;
        if let Some(pin) = pin {
            return match self.roster.index.get(pin) {
                None => format!("{pin} not in the roster"),
                Some(e) => self.executor_state(e, r),
            };
        }
        let members: Vec<usize> = self.roster.roles.members[r]
            .iter()
            .copied()
            .filter(|&e| !avoid.contains(&self.roster.executors[e].spec.id))
            .collect();
        let mut parts: Vec<String> = members
            .iter()
            .take(SHOWN)
            .map(|&e| self.executor_state(e, r))
            .collect();
        if members.len() > SHOWN {
            parts.push(format!("and {} more", members.len() - SHOWN));
        }
        parts.join("; ")
    }

    pub(super) fn executor_state(&self, e: usize, r: usize) -> String {
        let x = &self.roster.executors[e];
        if x.draining {
            return format!("{} removed by a reload (draining)", x.spec.id);
        }
        if x.caps.get(r) == Some(&0) {
            return format!(
                "{} takes no {} slot (its cap is 0)",
                x.spec.id,
                self.role_name(r)
            );
        }
        match &x.runtime.exclusion {
            Some(exclusion) => format!("{} {}", x.spec.id, Described(exclusion)),
            None => match &x.runtime.pause {
                Some(p) if p.blocked => format!(
                    "{} paused creating machines until {}",
                    x.spec.id,
                    iso(p.until)
                ),
                _ => format!("{} busy", x.spec.id),
            },
        }
    }
}
