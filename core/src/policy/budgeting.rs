//! Flows of budgets (`budgets.rs`): a grant spends its executor's budget and its
//! account's; a full window keeps the executor (or the account's executors) from
//! taking a lease until it makes room, when they are offered to the queue again.

use crate::time::iso;

use super::budgets::{room_at, spend, trim};
use super::Policy;

impl Policy {
    /// When `e` may take a lease again as its budgets go: the later room of its own
    /// full window and its account's; none when neither is full.
    pub(super) fn budget_room(&self, e: usize) -> Option<u64> {
        let x = &self.roster.executors[e];
        let own = x
            .spec
            .budget
            .and_then(|b| room_at(&x.runtime.grants, b, self.now));
        let account = x.spec.account.as_deref().and_then(|name| {
            let budget = *self.document.accounts.get(name)?;
            room_at(
                crate::sorted::get(&self.budgets.accounts, name)?,
                budget,
                self.now,
            )
        });
        own.max(account)
    }

    /// A grant on `e` now: it spends `e`'s budget and its account's.
    pub(super) fn spend_budget(&mut self, e: usize) {
        let now = self.now;
        let x = &mut self.roster.executors[e];
        if let Some(budget) = x.spec.budget {
            spend(&mut x.runtime.grants, budget, now);
        }
        let account = x
            .spec
            .account
            .as_deref()
            .and_then(|name| Some((name.to_string(), *self.document.accounts.get(name)?)));
        match account {
            Some((name, budget)) => {
                spend(
                    crate::sorted::entry(&mut self.budgets.accounts, &name),
                    budget,
                    now,
                );
                for m in self.account_members(e) {
                    self.retime_budget(m);
                }
            }
            None if self.roster.executors[e].spec.budget.is_some() => self.retime_budget(e),
            None => {}
        }
    }

    /// `e`'s budgets may have filled or made room: its room time and readiness follow.
    pub(super) fn retime_budget(&mut self, e: usize) {
        let room = self.budget_room(e);
        let old = self.roster.executors[e].runtime.budget_room;
        if old == room {
            return;
        }
        self.budgets.retime(e, old, room);
        self.roster.executors[e].runtime.budget_room = room;
        self.roster.forget_reports();
        self.roster.ready_up(e);
        if room.is_none() {
            self.roster.dirty.push(e);
        }
    }

    /// Budgets whose window made room by `at` (the time advance).
    pub(super) fn end_budget_rooms(&mut self, at: u64) {
        while let Some(e) = self.budgets.pop_due(at) {
            self.retime_budget(e);
        }
    }

    /// After a reload or an import: windows kept as the budgets now in force allow
    /// (an account no executor is budgeted under any more drops its window), and
    /// every executor's room time and timer computed afresh.
    pub(super) fn rebuild_budgets(&mut self) {
        let accounts = &self.document.accounts;
        self.budgets.accounts.retain_mut(|(name, window)| {
            trim(window, accounts.get(name).copied());
            !window.is_empty()
        });
        self.budgets.rooms.clear();
        for e in 0..self.roster.executors.len() {
            let budget = self.roster.executors[e].spec.budget;
            trim(&mut self.roster.executors[e].runtime.grants, budget);
            let room = self.budget_room(e);
            self.roster.executors[e].runtime.budget_room = room;
            self.budgets.retime(e, None, room);
        }
    }

    /// "budget: room at T" for a spent executor (explain, the waiting report).
    pub(super) fn budget_line(&self, e: usize) -> Option<String> {
        let room = self.roster.executors[e].runtime.budget_room?;
        Some(format!("budget: room at {}", iso(room)))
    }
}
