//! Flows of affinity (`affinity.rs`): a lease's key prefers the executor that got the
//! key's last grant, every grant with a key moves the key there, expired keys are
//! forgotten after every input, and a reload forgets the keys of executors it removes.

use super::affinity::Remembered;
use super::requests::Request;
use super::Policy;

impl Policy {
    /// The executor `req`'s affinity key is remembered on, while the key is live and
    /// that executor can take the request now: it has the role, is free, in the round
    /// (not excluded, paused or spent) and not avoided. The caller compares priorities.
    pub(super) fn affine(&self, req: &Request, r: usize) -> Option<usize> {
        let key = req.affinity()?;
        let (id, _) = self
            .affinity
            .live(key, self.now, self.document.affinity_ttl())?;
        let e = self.roster.index.get(id)?;
        let x = &self.roster.executors[e];
        (x.has_role(r) && x.ready_for(r) && !req.avoids(id)).then_some(e)
    }

    /// A grant of `key` on `e`: the key moves to `e` (refreshed). The key when it
    /// stuck (its live memory named `e` already), for the grant's event.
    pub(super) fn remember_grant(&mut self, key: &str, e: Option<usize>) -> Option<Box<str>> {
        let x = &self.roster.executors[e?];
        if x.draining {
            return None; // only executors of the running document are remembered
        }
        let executor = x.shared_name();
        let ttl = self.document.affinity_ttl();
        self.affinity
            .remember(key, executor, self.now, ttl)
            .then(|| Box::from(key))
    }

    /// After every input: keys idle for `affinityTtl` or longer are forgotten.
    pub(super) fn forget_expired_keys(&mut self) {
        if !self.affinity.is_empty() {
            let ttl = self.document.affinity_ttl();
            self.affinity.expire(self.now, ttl);
        }
    }

    /// After a reload: the keys of executors it removed (now draining) are forgotten.
    pub(super) fn forget_removed_keys(&mut self) {
        if self.affinity.is_empty() {
            return;
        }
        let roster = &self.roster;
        self.affinity.retain(|id| {
            roster
                .index
                .get(id)
                .is_some_and(|e| !roster.executors[e].draining)
        });
    }

    /// Whether `id` is an executor the memory may name: in the roster, not draining.
    pub(super) fn rememberable(&self, id: &str) -> bool {
        self.roster
            .index
            .get(id)
            .is_some_and(|e| !self.roster.executors[e].draining)
    }

    /// What affinity does for `req` now, in words (`explain`), if it has a key.
    pub(super) fn affinity_line(
        &self,
        req: &Request,
        r: usize,
        pick: Option<usize>,
    ) -> Option<String> {
        let key = req.affinity()?;
        let Some((id, until)) = self
            .affinity
            .live(key, self.now, self.document.affinity_ttl())
        else {
            return Some(format!(
                "key '{key}' is remembered on no executor: the usual choice applies, and the key then sticks to the executor it gets"
            ));
        };
        let affine = self.affine(req, r);
        let why = if affine.is_some() && affine == pick {
            "it takes the request"
        } else if affine.is_some() {
            "a better priority (or the request's `prefer`) goes first: the usual choice applies"
        } else {
            "it cannot take the request now: the usual choice applies"
        };
        Some(format!(
            "key '{key}' sticks to {id} until {}: {why}",
            crate::time::iso(until)
        ))
    }

    /// An export's `affinity` (`[key, executor, lastUsed]`, least recently used first)
    /// into the memory; the first entry at fault and how.
    pub(super) fn import_affinity(
        &mut self,
        list: &serde_json::Value,
    ) -> Result<(), (usize, &'static str)> {
        use serde_json::Value;
        let entries = match list {
            Value::Null => return Ok(()),
            Value::Array(entries) => entries,
            _ => return Err((0, "not a list of [key, executor, lastUsed]")),
        };
        if entries.len() > crate::limits::MAX_AFFINITY_KEYS {
            return Err((entries.len(), "more keys than limits::MAX_AFFINITY_KEYS"));
        }
        for (n, entry) in entries.iter().enumerate() {
            let Some([Value::String(key), Value::String(executor), used]) =
                entry.as_array().map(Vec::as_slice)
            else {
                return Err((n, "not [key, executor, lastUsed]"));
            };
            let Some(used) = used.as_u64() else {
                return Err((n, "lastUsed is not a time (epoch ms)"));
            };
            if self.affinity.knows(key) {
                return Err((n, "its key is listed twice"));
            }
            let executor = super::keys::shared(executor.clone());
            self.affinity.remember(key, executor, used, 0);
        }
        let ttl = self.document.affinity_ttl();
        match self
            .affinity
            .fault(self.now, ttl, &|id| self.rememberable(id))
        {
            Some(fault) => Err(fault),
            None => Ok(()),
        }
    }

    /// The remembered keys, least recently used first (the export).
    pub(super) fn remembered(&self) -> impl Iterator<Item = &Remembered> {
        self.affinity.in_order()
    }
}
