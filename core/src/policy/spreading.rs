//! Spreading grants among equal choices: `choice: "leastBusy"` and executor
//! `weight`s (a smooth weighted round-robin, nginx's).
//!
//! Both look at one group: the free executors of the best priority for the role that
//! the request does not avoid, in the ready set's order (least recently leased first,
//! or declaration order under `choice: "declared"`). With `leastBusy` the group
//! narrows to those with the fewest leases of the role in use relative to their
//! slots for the role (`inUse/slots`, compared by cross-multiplication). When an
//! executor of the group has a weight other than 1, the weighted round-robin picks
//! in it: every member's current weight for the role grows by its weight, the
//! largest takes the grant (a tie to the first in the group's order), and the one
//! granted gives back the group's total weight. Otherwise the group's first takes it,
//! as without the rules. `prefer` chooses before either; a grant it makes to a
//! member of the group is charged to the round-robin like any other, one outside
//! the group (a worse priority, `prefer: "first"`), a pin or a borrow is not. The
//! current weights are state (`Runtime::weight_current`, per role), exported and
//! imported; a reload starts them afresh.

use serde_json::Value;

use crate::protocol::Level;
use crate::sorted;
use crate::write::push_u64;

use super::events::EventName;
use super::requests::Request;
use super::roster::Executor;
use super::Policy;

/// `inUse/slots` of `x` for role `r`, as a fraction (slots at least 1).
fn load(x: &Executor, r: usize) -> (u64, u64) {
    (u64::from(x.busy_in(r)), u64::from(x.cap(r).max(1)))
}

/// The current weight of `x` for role `role` (0 when none is kept).
pub(super) fn current(x: &Executor, role: &str) -> i64 {
    sorted::get(&x.runtime.weight_current, role)
        .copied()
        .unwrap_or(0)
}

impl Policy {
    /// Whether the choice spreads grants (`leastBusy`, or a weight other than 1).
    pub(super) fn spreads(&self) -> bool {
        self.roster.least_busy || self.roster.weighted
    }

    /// The group (see the module) of `req` in role `r`, whether it is weighted, and
    /// how many it had before `leastBusy` narrowed it.
    #[inline(never)]
    fn group(&self, req: &Request, r: usize) -> (Vec<usize>, bool, usize) {
        let executors = &self.roster.executors;
        let mut prio = None;
        let mut group: Vec<usize> = Vec::new();
        for k in self.roster.ready[r].iter() {
            let e = k[2] as usize;
            if req.avoids(&executors[e].spec.id) {
                continue;
            }
            match prio {
                None => prio = Some(k[0]),
                Some(p) if p != k[0] => break,
                Some(_) => {}
            }
            group.push(e);
        }
        let contenders = group.len();
        if self.roster.least_busy {
            let least = group
                .iter()
                .map(|&e| load(&executors[e], r))
                .reduce(|a, b| {
                    // a/b < c/d as a·d < c·b (slots ≥ 1, counts within u32).
                    if b.0 * a.1 < a.0 * b.1 {
                        b
                    } else {
                        a
                    }
                });
            if let Some((n, d)) = least {
                group.retain(|&e| {
                    let (m, s) = load(&executors[e], r);
                    m * d == n * s
                });
            }
        }
        let weighted = group.iter().any(|&e| executors[e].spec.weight != 1);
        (group, weighted, contenders)
    }

    /// The executor of the group that takes the grant: the largest current weight
    /// plus weight when the group is weighted, else the first.
    pub(super) fn spread_pick(&self, req: &Request, r: usize) -> Option<usize> {
        let (group, weighted, _) = self.group(req, r);
        self.pick_in(&group, weighted, r)
    }

    /// The pick in `group` (see `spread_pick`).
    fn pick_in(&self, group: &[usize], weighted: bool, r: usize) -> Option<usize> {
        if !weighted {
            return group.first().copied();
        }
        let role = self.role_name(r);
        let mut best: Option<(i64, usize)> = None;
        for &e in group {
            let x = &self.roster.executors[e];
            let next = current(x, role) + i64::from(x.spec.weight);
            if best.is_none_or(|(b, _)| next > b) {
                best = Some((next, e));
            }
        }
        best.map(|(_, e)| e)
    }

    /// A grant of `req` to `e` in role `r` (unpinned, not borrowed), before its slot
    /// is taken: charged to the weighted round-robin when `e` is in a weighted group,
    /// and said in a `chosen` event when the rules chose among more than one.
    pub(super) fn spread_grant(&mut self, req: &Request, r: usize, e: usize) {
        let (group, weighted, contenders) = self.group(req, r);
        if contenders < 2 || !group.contains(&e) {
            return;
        }
        // A member of the group that `prefer` chose is charged, without a word.
        let said = self.pick_in(&group, weighted, r) == Some(e);
        let role = self.role_name(r).to_string();
        let x = &self.roster.executors[e];
        let (busy, slots) = (x.busy_in(r), x.cap(r));
        let mut message = [x.spec.id.as_str(), " is chosen for ", &role].concat();
        if self.roster.least_busy {
            message.push_str(": the least busy (");
            push_u64(&mut message, u64::from(busy));
            message.push_str(" of ");
            push_u64(&mut message, u64::from(slots));
            message.push_str(" in use)");
        }
        let mut fields = vec![
            ("executor", Value::from(x.spec.id.as_str())),
            ("inUse", Value::from(busy)),
            ("role", Value::from(role.as_str())),
            ("slots", Value::from(slots)),
        ];
        if weighted {
            let total: u32 = group
                .iter()
                .map(|&c| self.roster.executors[c].spec.weight)
                .sum();
            let weight = self.roster.executors[e].spec.weight;
            message.push_str(", by weight (");
            push_u64(&mut message, u64::from(weight));
            message.push_str(" of ");
            push_u64(&mut message, u64::from(total));
            message.push(')');
            fields.push(("weight", Value::from(weight)));
            for &c in &group {
                let x = &mut self.roster.executors[c];
                let mut next = current(x, &role) + i64::from(x.spec.weight);
                if c == e {
                    next -= i64::from(total);
                }
                set_current(x, &role, next);
            }
        }
        if said {
            self.event(Level::Debug, EventName::Chosen, message, fields);
        }
    }

    /// The weighted round-robin's state against its rules, naming the field of an
    /// export: current weights only while some executor is weighted, only for the
    /// document's roles, never 0 (not kept), and summing to 0 per role (each grant
    /// gives every member its weight and takes the total from one), each within
    /// what a JSON number holds exactly.
    pub(super) fn weights_fault(&self) -> Option<String> {
        let roles = &self.document.roles;
        let bound = crate::limits::MAX_SAFE_INTEGER as i64;
        let mut sums = vec![0i64; roles.len()];
        for x in &self.roster.executors {
            for (role, value) in &x.runtime.weight_current {
                let value = *value;
                let at = |problem: &str| {
                    ["runtime.", &x.spec.id, ".weightCurrent.", role, problem].concat()
                };
                let Some(r) = roles.iter().position(|x| x == role) else {
                    return Some(at(": not a role of the document"));
                };
                if !self.roster.weighted {
                    return Some(at(": no executor has a weight other than 1"));
                }
                if value == 0 || value.abs() > bound {
                    return Some(at(
                        ": 0 or beyond what JSON holds exactly (kept while not 0)",
                    ));
                }
                sums[r] += value;
            }
        }
        let r = sums.iter().position(|&s| s != 0)?;
        Some(
            [
                "weightCurrent: the current weights for ",
                &roles[r],
                " do not sum to 0",
            ]
            .concat(),
        )
    }

    /// A reload starts the weighted round-robin afresh.
    pub(super) fn forget_weights(&mut self) {
        for x in &mut self.roster.executors {
            x.runtime.weight_current.clear();
        }
    }
}

/// Sets the current weight of `x` for `role` (0 keeps no entry).
fn set_current(x: &mut Executor, role: &str, value: i64) {
    if value == 0 {
        sorted::remove(&mut x.runtime.weight_current, role);
    } else {
        *sorted::entry(&mut x.runtime.weight_current, role) = value;
    }
}
