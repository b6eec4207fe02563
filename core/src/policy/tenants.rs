//! Tenants: with the document's `fairness: "tenants"`, a role's waiting requests are
//! served across the tenants that ask in proportion to their weights, by weighted
//! fair queuing (self-clocked), and within a tenant in lease order.
//!
//! Each role keeps a virtual time `V` and, for every tenant with a request waiting
//! in it, a finish tag: the virtual time at which its next request is due.
//! - A tenant that starts to wait gets the tag `V + TURN / weight` (`TURN` is
//!   `limits::TENANT_TURN`, divisible by every weight: the arithmetic is exact).
//! - The role's next request comes from the tenant with the lowest tag; between equal
//!   tags, from the one whose tag was set first (its turn number). Within a tenant,
//!   the first in lease order (rank, event time, arrival) that the free executor can
//!   serve.
//! - A grant of the role to a tenant served at tag `f` sets `V` to `max(V, f)` and,
//!   while the tenant still waits, its tag to `f + TURN / weight`. A tenant that does
//!   not wait (a request granted at once) is served at `V + TURN / weight`.
//! - A role nobody waits for forgets it all (`V` and the turn numbers go back to 0):
//!   an idle tenant banks no credit, and one that waited long owes nothing.
//!
//! So between tenants that keep requests waiting, grants follow the weights exactly
//! (2:1 serves `a a b a a b ...`), and a tenant that asks once is served within one
//! turn of every other tenant, however many requests they queued.

use crate::limits::{MAX_TENANT_WEIGHT, TENANT_TURN};

use super::keys::{ByName, Index, OrderKey};
use super::role_queue::RoleQueue;

/// A virtual time at or above this rebases a role: every tag less `V`, and `V` 0
/// (the order stays, and every number stays far below 2^53).
pub(super) const REBASE_AT: u64 = 1 << 48;

/// How far one turn moves a tenant of `weight`.
pub(super) fn step(weight: u32) -> u64 {
    TENANT_TURN / u64::from(weight.clamp(1, MAX_TENANT_WEIGHT))
}

/// A tenant waiting in a role: its finish tag, its turn number, its requests.
#[derive(Debug, Clone)]
pub(super) struct Tenant {
    pub(super) name: Box<str>,
    pub(super) tag: u64,
    pub(super) turn: u64,
    /// Its waiting requests, in lease order.
    pub(super) queue: RoleQueue,
}

/// One role's fair queue (see the module).
#[derive(Debug, Clone, Default)]
pub(super) struct FairRole {
    /// The role, interned (`RoleTable::names`).
    pub(super) role: u32,
    pub(super) vtime: u64,
    /// The turn number the next tag set takes.
    pub(super) next_turn: u64,
    pub(super) tenants: Vec<Option<Tenant>>,
    free: Vec<u32>,
    by_name: ByName,
    /// The waiting tenants by `[tag, turn]`: the serving order.
    pub(super) order: Index,
}

impl FairRole {
    pub(super) fn new(role: u32) -> FairRole {
        FairRole {
            role,
            ..FairRole::default()
        }
    }

    fn slot(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).map(|&t| t as u32)
    }

    fn at(&self, t: u32) -> Option<&Tenant> {
        self.tenants.get(t as usize).and_then(Option::as_ref)
    }

    pub(super) fn get(&self, name: &str) -> Option<&Tenant> {
        self.at(self.slot(name)?)
    }

    /// The waiting tenants, in serving order.
    pub(super) fn in_order(&self) -> impl Iterator<Item = &Tenant> + '_ {
        self.order.values().filter_map(|&t| self.at(t))
    }

    /// How many tenants wait.
    pub(super) fn len(&self) -> usize {
        self.by_name.len()
    }

    /// A tenant with its tag and turn and no request yet (an import's, or one a
    /// rebuild keeps): its slot.
    pub(super) fn add(&mut self, name: &str, tag: u64, turn: u64) -> u32 {
        let tenant = Tenant {
            name: name.into(),
            tag,
            turn,
            queue: RoleQueue::default(),
        };
        let t = match self.free.pop() {
            Some(t) => {
                self.tenants[t as usize] = Some(tenant);
                t
            }
            None => {
                self.tenants.push(Some(tenant));
                (self.tenants.len() - 1) as u32
            }
        };
        self.by_name.insert(name.into(), u64::from(t));
        self.order.insert([tag, turn, 0, 0], t);
        self.next_turn = self.next_turn.max(turn + 1);
        t
    }

    /// Puts the waiting request `(key, s)` in tenant `name`'s queue; a tenant that
    /// starts to wait takes its tag.
    pub(super) fn join(&mut self, name: &str, weight: u32, key: OrderKey, s: u32) {
        let t = match self.slot(name) {
            Some(t) => t,
            None => self.add(name, self.vtime + step(weight), self.next_turn),
        };
        if let Some(Some(tenant)) = self.tenants.get_mut(t as usize) {
            tenant.queue.insert((key, s));
        }
    }

    /// Takes the request keyed `key` out of tenant `name`'s queue (nothing when it is
    /// not there: a request creating its machine); a tenant left with none stops
    /// waiting, and a role left with none forgets its times.
    pub(super) fn leave(&mut self, name: &str, key: &OrderKey) {
        let Some(t) = self.slot(name) else {
            return;
        };
        let Some(Some(tenant)) = self.tenants.get_mut(t as usize) else {
            return;
        };
        tenant.queue.remove(key);
        if tenant.queue.len() == 0 {
            self.drop_tenant(t);
        }
    }

    fn drop_tenant(&mut self, t: u32) {
        let Some(tenant) = self.tenants.get_mut(t as usize).and_then(Option::take) else {
            return;
        };
        self.order.remove(&[tenant.tag, tenant.turn, 0, 0]);
        self.by_name.remove(&tenant.name);
        self.free.push(t);
        if self.by_name.len() == 0 {
            *self = FairRole::new(self.role);
        }
    }

    /// A grant of the role to tenant `name` (of `weight`), before its request leaves
    /// the queue.
    pub(super) fn serve(&mut self, name: &str, weight: u32) {
        let step = step(weight);
        let finish = match self.slot(name) {
            Some(t) => {
                let Some(tenant) = self.at(t) else {
                    return;
                };
                let tag = tenant.tag;
                self.retag(t, tag + step);
                tag
            }
            // Nobody waits: there is nothing to be fair to.
            None if self.len() == 0 => return,
            None => self.vtime + step,
        };
        self.vtime = self.vtime.max(finish);
        if self.vtime >= REBASE_AT {
            self.rebase();
        }
    }

    /// Gives tenant `t` a new tag and the next turn number.
    fn retag(&mut self, t: u32, tag: u64) {
        let turn = self.next_turn;
        self.next_turn += 1;
        if let Some(Some(tenant)) = self.tenants.get_mut(t as usize) {
            self.order.remove(&[tenant.tag, tenant.turn, 0, 0]);
            tenant.tag = tag;
            tenant.turn = turn;
            self.order.insert([tag, turn, 0, 0], t);
        }
    }

    fn rebase(&mut self) {
        let v = self.vtime;
        self.vtime = 0;
        self.order.clear();
        for (t, tenant) in self.tenants.iter_mut().enumerate() {
            if let Some(tenant) = tenant {
                tenant.tag = tenant.tag.saturating_sub(v);
                self.order.insert([tenant.tag, tenant.turn, 0, 0], t as u32);
            }
        }
    }

    /// Drops the tenants with no request (what a rebuild kept of tenants that no
    /// longer wait here).
    pub(super) fn prune(&mut self) {
        let empty: Vec<u32> = self
            .order
            .values()
            .copied()
            .filter(|&t| self.at(t).is_some_and(|x| x.queue.len() == 0))
            .collect();
        for t in empty {
            self.drop_tenant(t);
        }
    }

    /// Keeps its tenants' tags and turns and empties their queues (a rebuild
    /// refills them).
    pub(super) fn empty_queues(&mut self) {
        for tenant in self.tenants.iter_mut().flatten() {
            tenant.queue = RoleQueue::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(arrival: u64) -> OrderKey {
        [1, 1 << 63, 0, arrival]
    }

    /// Serves the role `n` times, always the first tenant in order, and names them.
    fn serve_order(role: &mut FairRole, weights: &[(&str, u32)], n: usize) -> String {
        let weight = |name: &str| weights.iter().find(|w| w.0 == name).map_or(1, |w| w.1);
        let mut out = String::new();
        for _ in 0..n {
            let Some(tenant) = role.in_order().next() else {
                break;
            };
            let name = tenant.name.to_string();
            let first = tenant.queue.first().map(|e| e.0);
            role.serve(&name, weight(&name));
            if let Some(k) = first {
                role.leave(&name, &k);
            }
            out.push_str(&name);
        }
        out
    }

    #[test]
    fn weights_two_to_one_interleave_exactly() {
        let mut role = FairRole::new(0);
        for i in 0..30 {
            role.join("a", 2, key(i), i as u32);
            role.join("b", 1, key(100 + i), 100 + i as u32);
        }
        assert_eq!(serve_order(&mut role, &[("a", 2)], 12), "abaabaabaaba");
    }

    #[test]
    fn one_request_waits_one_turn_behind_a_thousand() {
        let mut role = FairRole::new(0);
        for i in 0..1000 {
            role.join("a", 1, key(i), i as u32);
        }
        serve_order(&mut role, &[], 10);
        role.join("b", 1, key(5000), 5000);
        assert_eq!(serve_order(&mut role, &[], 3), "aba");
    }

    #[test]
    fn a_role_nobody_waits_for_forgets_and_rebases_keep_the_order() {
        let mut role = FairRole::new(3);
        role.join("a", 1, key(1), 1);
        role.serve("a", 1);
        role.leave("a", &key(1));
        assert_eq!((role.vtime, role.next_turn, role.len()), (0, 0, 0));
        role.join("a", 1, key(2), 2);
        role.join("b", 4, key(3), 3);
        role.vtime = REBASE_AT;
        role.serve("b", 4);
        assert!(role.vtime < REBASE_AT, "rebased: {}", role.vtime);
        assert_eq!(role.in_order().next().map(|t| &*t.name), Some("a"));
    }
}
