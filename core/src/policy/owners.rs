//! Owners: the instances of a shared roster that issue requests (`owner` on a lease
//! or an `occupy`). Each request and lease keeps its owner, and every output about it
//! names it, so that the instance that issued it acts on it. When an owner is gone
//! (`expireOwner`, appended by whoever noticed: a shared roster's leader), nothing of
//! it is left waiting: its waiting requests are cancelled, its machine creations
//! (which nobody will answer) dropped, and its leases released or kept
//! (`Options::expired_owner_leases`).
//!
//! The outputs of an `expireOwner` name the gone owner; they are for the instance that
//! appended it to act on (the `deleteMachine` of a released lease with a machine,
//! above all: its slot frees when that one answers `machineDeleted`). The cost is a
//! pass over the requests and the leases: an owner expires rarely.

use serde_json::json;

use crate::protocol::{ExpiredOwnerLeases, Level, Output};

use super::events::EventName;
use super::keys::OrderKey;
use super::queue::Ending;
use super::Policy;

impl Policy {
    pub(super) fn expire_owner(&mut self, owner: &str) {
        let mine = |o: Option<&str>| o == Some(owner);
        // Its requests without a lease (waiting or creating), in lease order.
        let mut requests: Vec<(OrderKey, String)> = self
            .queue
            .requests
            .values()
            .filter(|q| mine(q.owner()))
            .map(|q| (q.key, String::from(&*q.id)))
            .collect();
        requests.sort_unstable();
        for (_, id) in &requests {
            self.end_request(id, Ending::Cancelled);
        }
        // Its creations, abandoned before or just now: nobody will answer them.
        let creations: Vec<String> = self
            .provisioning
            .abandoned_owners
            .iter()
            .filter(|(_, o)| o.as_str() == owner)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &creations {
            self.forget_abandoned(id);
        }
        // Its leases, in id order.
        let keep = self.options.expired_owner_leases;
        let mut released = Vec::new();
        let mut kept = Vec::new();
        let mut deleting = Vec::new();
        for (id, lease) in self.leases.open.iter() {
            if !mine(lease.owner.as_deref()) {
                continue;
            }
            if lease.deleting {
                deleting.push(id);
                continue;
            }
            let kept_here = match keep {
                ExpiredOwnerLeases::Release => false,
                ExpiredOwnerLeases::KeepMachines => lease.hold.is_some(),
                ExpiredOwnerLeases::Keep => true,
            };
            if kept_here {
                kept.push(id);
            } else {
                released.push(id);
            }
        }
        for &id in &released {
            self.release(id);
        }
        // A machine its owner was deleting: asked again, for the appender to delete
        // (the slot frees on `machineDeleted`).
        for &id in &deleting {
            if let Some(lease) = self.leases.open.get(id) {
                if let Some(hold) = lease.hold.clone() {
                    self.push_output(Output::DeleteMachine {
                        executor: lease.executor.to_string(),
                        hold,
                        lease: Some(id),
                        owner: lease.owner.clone(),
                    });
                }
            }
        }
        let mut message = format!(
            "owner {owner} is gone: requests cancelled: {}; machine creations dropped: {}; leases released: {}",
            requests.len(),
            creations.len(),
            released.len()
        );
        if !kept.is_empty() {
            message.push_str(&format!(
                "; leases kept: {} ({}: their work runs on)",
                kept.len(),
                keep.name()
            ));
        }
        self.event(
            Level::Info,
            EventName::OwnerExpired,
            message,
            vec![
                ("cancelled", json!(requests.len())),
                ("dropped", json!(creations.len())),
                ("kept", json!(kept)),
                ("owner", json!(owner)),
                ("released", json!(released)),
            ],
        );
    }
}
