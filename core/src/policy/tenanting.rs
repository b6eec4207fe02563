//! Flows of the tenants' fair queues (`tenants.rs`): the next request of a fair role
//! for a free executor, and where a waiting request's tenant stands.

use super::keys::OrderKey;
use super::requests::Request;
use super::tenants::FairRole;
use super::Policy;

impl Policy {
    /// The next request of a fair role that executor `id` can serve, unpinned: the
    /// tenants in turn order, each one's requests in lease order.
    pub(super) fn fair_first(&self, fair: &FairRole, id: &str) -> Option<(OrderKey, u32)> {
        fair.in_order()
            .flat_map(|tenant| tenant.queue.iter())
            .find(|&&(_, s)| {
                self.queue
                    .requests
                    .at(s)
                    .is_some_and(|q| q.pin().is_none() && !q.avoids(id))
            })
            .copied()
    }

    /// A request's tenant (when it names one, or tenants are served fairly) and, while
    /// it waits in a fair queue, its tenant's turn among the role's waiting tenants.
    pub(super) fn tenant_turn(&self, q: &Request) -> (Option<String>, Option<String>) {
        let fair = self
            .roster
            .request_role(q)
            .and_then(|r| self.queue.fair.get(r));
        let name = q.tenant_name();
        let tenant = (q.tenant().is_some() || fair.is_some()).then(|| name.to_string());
        let turn = fair.and_then(|fair| {
            let at = fair.in_order().position(|t| &*t.name == name)?;
            let weight = self.document.tenant_weight(name);
            Some(format!(
                "tenant {name} (weight {weight}) has turn {} of the {} tenants waiting for {}",
                at + 1,
                fair.len(),
                self.roster.request_role_name(q)
            ))
        });
        (tenant, turn)
    }
}
