//! Fencing, for an instance of a remote log: when it may have been expired (no
//! heartbeat succeeded for the TTL, the log expired it, the log cannot be read or
//! needs a newer module), every call of its fails `FENCED` and it grants nothing until
//! it rejoins. The memory log is never fenced.

use super::state::{Fence, FenceKind, Inner, Mine, State};
use crate::event::Event;
use rota_core::Level;

impl Inner {
    /// Fences this instance when the TTL has passed since its last good heartbeat was
    /// sent (the log may have expired it since): checked before every fold and every
    /// settle, and when a heartbeat answers. True when it is fenced (now or before).
    pub(crate) fn fence_if_lapsed(&self, st: &mut State, why: &str) -> bool {
        let (Some(link), Some(member)) = (&self.link, &st.member) else {
            return false;
        };
        let silent = member.beat_sent.elapsed();
        if member.fence.is_none() && silent >= link.ttl {
            let reason = format!(
                "no heartbeat succeeded for {} ms (the last good one was sent {} ms ago; {why}, folded through seq {})",
                link.ttl.as_millis(),
                silent.as_millis(),
                member.folded_seq
            );
            self.fence(st, FenceKind::Lapsed, reason);
        }
        st.member.as_ref().is_some_and(|m| m.fence.is_some())
    }

    /// Fences this instance: every pending call fails `FENCED`, new ones too.
    pub(crate) fn fence(&self, st: &mut State, kind: FenceKind, reason: String) {
        let Some(member) = st.member.as_mut() else {
            return;
        };
        if let Some(fence) = member.fence.as_mut() {
            // An expiry or a version refusal outranks a lapse: rejoining must know.
            if matches!(kind, FenceKind::Expired | FenceKind::Version) {
                fence.kind = kind;
            }
            return;
        }
        let fence = Fence {
            kind,
            reason,
            since_ms: self.now_ms(),
        };
        let ids = st.end_waiters(|| fence.error());
        let Some(member) = st.member.as_mut() else {
            return;
        };
        member.orphans.extend(ids);
        for mine in member.sent.values_mut() {
            if let Mine::Call(_) = mine {
                if let Mine::Call(tx) = std::mem::replace(mine, Mine::Plain) {
                    let _ = tx.send(Err(fence.error()));
                }
            }
        }
        for queued in std::mem::take(&mut member.queue) {
            match queued.mine {
                Mine::Call(tx) => {
                    let _ = tx.send(Err(fence.error()));
                }
                // Its call failed above; it never reaches the log.
                Mine::Request(id) => {
                    member.orphans.remove(&id);
                }
                Mine::Plain if queued.epoch.is_some() => {
                    if let Some(tx) = queued.on_append {
                        let _ = tx.send(Err("fenced".into()));
                    }
                }
                Mine::Plain => member.queue.push_back(queued),
            }
        }
        member.epoch = None;
        self.publish(
            Event::host(Level::Warn, "fenced", fence.error().to_string())
                .with("instance", member.instance.clone())
                .with("reason", fence.reason.clone()),
        );
        member.fence = Some(fence);
    }
}
