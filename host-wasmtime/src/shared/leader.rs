//! Membership of a remote log beside the driver: heartbeats (and fencing,
//! rejoining), and the leader lease with its duties: sweeps of expired instances,
//! redoing the probes in flight (sql/PROTOCOL.md, "Leader" and "Heartbeats"). Its
//! ticks at `wakeAt` are the roster's timer's.

use std::sync::Arc;
use std::time::Duration;

use rota_core::log::entry_of;
use rota_core::{Input, Level};
use tokio::time::Instant;

use super::driver::{incarnation, Remote};
use super::log::{LogError, LogStore};
use crate::event::Event;
use crate::roster::state::{lock, FenceKind, Mine};

/// A heartbeat every `ttl / 4`; fenced once `ttl` passed since the last good one was
/// sent (even while one hangs), or when one succeeds only after such a gap (the
/// leader may have expired this instance in it); rejoins once a heartbeat succeeded
/// and the replica has caught up with the log's head as read after it.
pub(super) async fn heartbeats<S: LogStore + 'static>(remote: Arc<Remote<S>>) {
    let ttl = remote.config.ttl;
    let every = (ttl / 4).max(Duration::from_millis(1));
    loop {
        tokio::time::sleep(every).await;
        let Some((instance, due)) = lock(&remote.inner.state)
            .member
            .as_mut()
            .map(|m| (m.instance.clone(), m.beat_sent + ttl))
        else {
            return;
        };
        let sent = Instant::now();
        // An attempt that hangs counts as failed once the TTL is spent.
        let beat = tokio::time::timeout(ttl, remote.store.heartbeat(&instance));
        tokio::pin!(beat);
        let answer = tokio::select! {
            answer = &mut beat => answer,
            () = tokio::time::sleep_until(due) => {
                lapse(&remote, "the heartbeat in flight did not answer in time");
                beat.await
            }
        };
        match answer {
            Ok(Ok(now)) => {
                remote.saw_db_now(now);
                beat_succeeded(&remote, &instance, sent);
                rejoin(&remote).await;
            }
            Ok(Err(error)) => lapse(&remote, &error.to_string()),
            Err(_) => lapse(&remote, "the heartbeat did not answer"),
        }
    }
}

fn lapse<S: LogStore + 'static>(remote: &Arc<Remote<S>>, error: &str) {
    let mut st = lock(&remote.inner.state);
    remote.inner.fence_if_lapsed(&mut st, error);
}

/// A heartbeat of `instance` sent at `sent` succeeded. After a gap of the TTL since
/// the previous good one was sent the log may have expired the instance: it fences
/// (rejoining reads the log after this heartbeat). Either way the lapse now counts
/// from `sent`.
fn beat_succeeded<S: LogStore + 'static>(remote: &Arc<Remote<S>>, instance: &str, sent: Instant) {
    let mut st = lock(&remote.inner.state);
    if st.member.as_mut().is_none_or(|m| m.instance != instance) {
        return; // the old incarnation's, answered after it rejoined under a new id
    }
    remote
        .inner
        .fence_if_lapsed(&mut st, "a heartbeat succeeded after the gap");
    if let Some(m) = st.member.as_mut() {
        m.beat_sent = m.beat_sent.max(sent);
    }
}

/// After a good heartbeat: a fenced instance that has caught up with the log rejoins,
/// with a new incarnation id if the log expired it; requests of its own that no call
/// awaits are cancelled.
async fn rejoin<S: LogStore + 'static>(remote: &Arc<Remote<S>>) {
    let kind = match lock(&remote.inner.state)
        .member
        .as_mut()
        .and_then(|m| m.fence.as_ref())
    {
        Some(fence) => fence.kind,
        None => return,
    };
    if kind == FenceKind::Version {
        return;
    }
    // Read after the heartbeat: an expiry of this instance is in the log by now
    // (`expire_instance` is atomic with the heartbeat check) and cannot come later.
    let Ok(head) = remote.store.head().await else {
        return;
    };
    remote.catch_up(Some(head.last_seq)).await;
    let new_id = {
        let mut st = lock(&remote.inner.state);
        let Some(m) = st.member.as_mut() else { return };
        if m.folded_seq < head.last_seq
            || m.beat_sent.elapsed() >= remote.config.ttl
            || m.fence
                .as_ref()
                .is_some_and(|f| f.kind == FenceKind::Version)
        {
            return;
        }
        let old = m.instance.clone();
        let orphans = std::mem::take(&mut m.orphans);
        let new_id = m.expired.then(|| {
            // (The old id's heartbeats while fenced made its row again: `old` below.)
            m.instance = incarnation(&remote.name);
            m.instance.clone()
        });
        m.expired = false;
        m.fence = None;
        let instance = m.instance.clone();
        if new_id.is_some() {
            st.next_request = 0;
        } else {
            for id in orphans {
                let cancel = Input::Cancel { now: 0, id };
                let _ = remote
                    .inner
                    .enqueue(&mut st, &cancel, None, Mine::Plain, None);
            }
        }
        remote.inner.publish(
            Event::host(
                Level::Info,
                "rejoined",
                format!("the instance rejoined the shared roster as {instance}"),
            )
            .with("instance", instance)
            .with("was", old.clone()),
        );
        new_id.map(|id| (id, old))
    };
    if let Some((id, old)) = new_id {
        let sent = Instant::now();
        if let Ok(now) = remote.store.heartbeat(&id).await {
            remote.saw_db_now(now);
            beat_succeeded(remote, &id, sent);
        }
        // Its expiry is in the log already: the row would only be expired again.
        let _ = remote.store.forget_instance(&old).await;
    }
}

/// The epoch this instance leads at.
fn leading<S: LogStore + 'static>(remote: &Remote<S>) -> Option<u64> {
    lock(&remote.inner.state)
        .member
        .as_mut()
        .and_then(|m| m.epoch)
}

fn set_epoch<S: LogStore + 'static>(remote: &Remote<S>, epoch: Option<u64>) {
    if let Some(m) = lock(&remote.inner.state).member.as_mut() {
        m.epoch = epoch;
    }
}

/// The leader lease and its duties.
pub(super) async fn leader<S: LogStore + 'static>(remote: Arc<Remote<S>>) {
    let lease_ttl = remote.config.leader_ttl;
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
    let (lease_ms, ttl_ms) = (millis(lease_ttl), millis(remote.config.ttl));
    let period = (lease_ttl / 3).max(Duration::from_millis(1));
    let mut next_lease = Instant::now();
    let mut next_sweep = Instant::now();
    let mut renewed_at = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_lease {
            next_lease = now + period;
            lease_round(&remote, lease_ms, &mut renewed_at).await;
        }
        if let Some(epoch) = leading(&remote) {
            if renewed_at.elapsed() > lease_ttl {
                // Our lease may have lapsed by our own clock: no duty until renewed.
                set_epoch(&remote, None);
                continue;
            }
            if Instant::now() >= next_sweep {
                next_sweep = Instant::now() + remote.config.sweep;
                sweep(&remote, epoch, ttl_ms).await;
            }
        }
        // Sleep until the next renewal or sweep (the ticks are the timer's: `timers`).
        let until = match leading(&remote) {
            Some(_) => next_lease.min(next_sweep),
            None => next_lease,
        };
        tokio::time::sleep_until(until).await;
    }
}

/// Acquires (or renews) the leader lease; a new leader redoes the probes in flight.
async fn lease_round<S: LogStore + 'static>(
    remote: &Arc<Remote<S>>,
    lease_ms: u64,
    renewed_at: &mut Instant,
) {
    let Some((instance, epoch)) = lock(&remote.inner.state)
        .member
        .as_mut()
        .filter(|m| m.fence.is_none() && !m.closed)
        .map(|m| (m.instance.clone(), m.epoch))
    else {
        return;
    };
    let asked = Instant::now();
    if let Some(epoch) = epoch {
        match remote.store.renew_leader(&instance, epoch, lease_ms).await {
            Ok(_) => *renewed_at = asked,
            Err(LogError::StaleEpoch(_)) => set_epoch(remote, None),
            Err(_) => {}
        }
        return;
    }
    let Ok(lease) = remote.store.acquire_leader(&instance, lease_ms).await else {
        return;
    };
    if !lease.acquired {
        return;
    }
    *renewed_at = asked;
    let became = match lock(&remote.inner.state).member.as_mut() {
        Some(m) => {
            let became = m.epoch != Some(lease.epoch);
            m.epoch = Some(lease.epoch);
            m.tick_sent = None;
            remote.inner.wake.notify_one();
            became
        }
        None => false,
    };
    if became {
        remote.inner.publish(
            Event::host(
                Level::Info,
                "leader",
                format!("{instance} leads at epoch {}", lease.epoch),
            )
            .with("epoch", lease.epoch),
        );
        // Catch up first: what is in flight in the replica is not in the log.
        remote.catch_up(None).await;
        let mut st = lock(&remote.inner.state);
        remote.inner.redo_probes(&mut st, lease.epoch);
    }
}

/// Every other instance silent for the TTL is expired with `expire_instance`: its
/// `expireOwner` appended with the epoch and its row forgotten in one commit, only
/// while its heartbeat is still lapsed (one that lands first refuses it).
async fn sweep<S: LogStore + 'static>(remote: &Arc<Remote<S>>, epoch: u64, ttl_ms: u64) {
    let Ok(expired) = remote.store.expired_instances(ttl_ms).await else {
        return;
    };
    for seen in expired {
        let me = match lock(&remote.inner.state).member.as_mut() {
            // No leader duty once fenced or deposed.
            Some(m) if m.epoch == Some(epoch) && m.fence.is_none() => m.instance.clone(),
            _ => return,
        };
        if seen.instance == me {
            continue;
        }
        let Ok(entry) = entry_of(&Input::ExpireOwner {
            now: 0,
            owner: seen.instance.clone(),
        }) else {
            continue;
        };
        let expired = remote
            .store
            .expire_instance(&seen.instance, ttl_ms, &me, epoch, &entry)
            .await;
        match expired {
            Ok(Some(seq)) => {
                if let Some(link) = &remote.inner.link {
                    link.read_now.notify_one();
                }
                remote.inner.publish(
                    Event::host(
                        Level::Info,
                        "instanceExpired",
                        format!(
                            "{} expired at seq {seq} (silent since {})",
                            seen.instance, seen.last_seen
                        ),
                    )
                    .with("instance", seen.instance.clone())
                    .with("seq", seq),
                );
            }
            Ok(None) => {} // its heartbeat landed meanwhile
            Err(LogError::StaleEpoch(_)) => {
                if leading(remote) == Some(epoch) {
                    set_epoch(remote, None);
                }
                return;
            }
            Err(_) => return,
        }
    }
}
