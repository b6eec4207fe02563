//! The tasks beside the driver: heartbeats (and fencing, rejoining), and the leader
//! lease with its duties: ticks at `wakeAt`, sweeps of expired instances, re-running
//! the probes in flight (sql/PROTOCOL.md, "Leader" and "Heartbeats").

use std::sync::Arc;
use std::time::Duration;

use rota_core::{Input, Level};
use serde_json::Value;
use tokio::time::Instant;

use super::driver::{incarnation, lock, Shared};
use super::log::{LogError, LogStore};
use super::replica::{entry_of, FenceKind, Queued};
use crate::event::Event;

/// A heartbeat every `ttl / 4`; fenced once `ttl` passed since the last good one was
/// sent (even while one hangs), or when one succeeds only after such a gap (the
/// leader may have expired this instance in it); rejoins once a heartbeat succeeded
/// and the replica has caught up with the log's head as read after it.
pub(super) async fn heartbeats<S: LogStore + 'static>(shared: Arc<Shared<S>>) {
    let ttl = shared.config.ttl;
    let every = (ttl / 4).max(Duration::from_millis(1));
    loop {
        tokio::time::sleep(every).await;
        let (instance, due) = {
            let st = lock(&shared.state);
            (st.instance.clone(), st.beat_sent + ttl)
        };
        let sent = Instant::now();
        // An attempt that hangs counts as failed once the TTL is spent.
        let beat = tokio::time::timeout(ttl, shared.store.heartbeat(&instance));
        tokio::pin!(beat);
        let answer = tokio::select! {
            answer = &mut beat => answer,
            () = tokio::time::sleep_until(due) => {
                lapse(&shared, "the heartbeat in flight did not answer in time");
                beat.await
            }
        };
        match answer {
            Ok(Ok(now)) => {
                shared.saw_db_now(now);
                beat_succeeded(&shared, &instance, sent);
                rejoin(&shared).await;
            }
            Ok(Err(error)) => lapse(&shared, &error.to_string()),
            Err(_) => lapse(&shared, "the heartbeat did not answer"),
        }
    }
}

fn lapse<S: LogStore + 'static>(shared: &Arc<Shared<S>>, error: &str) {
    let mut st = lock(&shared.state);
    shared.fence_if_lapsed(&mut st, error);
}

/// A heartbeat of `instance` sent at `sent` succeeded. After a gap of the TTL since
/// the previous good one was sent the log may have expired the instance: it fences
/// (rejoining reads the log after this heartbeat). Either way the lapse now counts
/// from `sent`.
fn beat_succeeded<S: LogStore + 'static>(shared: &Arc<Shared<S>>, instance: &str, sent: Instant) {
    let mut st = lock(&shared.state);
    if st.instance != instance {
        return; // the old incarnation's, answered after it rejoined under a new id
    }
    shared.fence_if_lapsed(&mut st, "a heartbeat succeeded after the gap");
    st.beat_sent = st.beat_sent.max(sent);
}

/// After a good heartbeat: a fenced instance that has caught up with the log rejoins,
/// with a new incarnation id if the log expired it; requests of its own that no call
/// awaits are cancelled.
async fn rejoin<S: LogStore + 'static>(shared: &Arc<Shared<S>>) {
    let kind = match lock(&shared.state).fence.as_ref() {
        Some(fence) => fence.kind,
        None => return,
    };
    if kind == FenceKind::Version {
        return;
    }
    // Read after the heartbeat: an expiry of this instance is in the log by now
    // (`expire_instance` is atomic with the heartbeat check) and cannot come later.
    let head = match shared.store.head().await {
        Ok(head) => head,
        Err(_) => return,
    };
    shared.catch_up(Some(head.last_seq)).await;
    let new_id = {
        let mut st = lock(&shared.state);
        if st.folded_seq < head.last_seq
            || st.beat_sent.elapsed() >= shared.config.ttl
            || st
                .fence
                .as_ref()
                .is_some_and(|f| f.kind == FenceKind::Version)
        {
            return;
        }
        let old = st.instance.clone();
        let new_id = if st.expired {
            // (The old id's heartbeats while fenced made its row again: `old` below.)
            st.instance = incarnation(&shared.name);
            st.next_request = 0;
            st.expired = false;
            st.orphans.clear();
            Some(st.instance.clone())
        } else {
            for id in std::mem::take(&mut st.orphans) {
                if let Ok(entry) = entry_of(&Input::Cancel { now: 0, id }) {
                    st.queue(Queued::plain(entry));
                }
            }
            shared.queued.notify_one();
            None
        };
        st.fence = None;
        shared.publish(
            Event::host(
                Level::Info,
                "rejoined",
                format!("the instance rejoined the shared roster as {}", st.instance),
            )
            .with("instance", st.instance.clone())
            .with("was", old.clone()),
        );
        new_id.map(|id| (id, old))
    };
    if let Some((id, old)) = new_id {
        let sent = Instant::now();
        if let Ok(now) = shared.store.heartbeat(&id).await {
            shared.saw_db_now(now);
            beat_succeeded(shared, &id, sent);
        }
        // Its expiry is in the log already: the row would only be expired again.
        let _ = shared.store.forget_instance(&old).await;
    }
}

/// The leader lease and its duties.
pub(super) async fn leader<S: LogStore + 'static>(shared: Arc<Shared<S>>) {
    let lease_ttl = shared.config.leader_ttl;
    let lease_ms = u64::try_from(lease_ttl.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let ttl_ms = u64::try_from(shared.config.ttl.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let period = (lease_ttl / 3).max(Duration::from_millis(1));
    let mut next_lease = Instant::now();
    let mut next_sweep = Instant::now();
    let mut renewed_at = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_lease {
            next_lease = now + period;
            lease_round(&shared, lease_ms, &mut renewed_at).await;
        }
        let epoch = lock(&shared.state).epoch;
        if let Some(epoch) = epoch {
            if renewed_at.elapsed() > lease_ttl {
                // Our lease may have lapsed by our own clock: no duty until renewed.
                lock(&shared.state).epoch = None;
                continue;
            }
            if Instant::now() >= next_sweep {
                next_sweep = Instant::now() + shared.config.sweep;
                sweep(&shared, epoch, ttl_ms).await;
            }
            tick(&shared, epoch).await;
        }
        // Sleep until the next renewal, sweep or wakeAt (or a change of wakeAt).
        let until = {
            let st = lock(&shared.state);
            let mut until = next_lease;
            if st.epoch.is_some() {
                until = until.min(next_sweep);
                if let (Some(at), None) = (st.wake_at, st.tick_sent) {
                    let ahead = at.saturating_sub(shared.db_now());
                    until = until.min(Instant::now() + Duration::from_millis(ahead));
                }
            }
            until
        };
        tokio::select! {
            () = tokio::time::sleep_until(until) => {}
            () = shared.leader_wake.notified() => {}
        }
    }
}

/// Acquires (or renews) the leader lease; a new leader re-runs the probes in flight.
async fn lease_round<S: LogStore + 'static>(
    shared: &Arc<Shared<S>>,
    lease_ms: u64,
    renewed_at: &mut Instant,
) {
    let (instance, epoch, fenced) = {
        let st = lock(&shared.state);
        (
            st.instance.clone(),
            st.epoch,
            st.fence.is_some() || st.closed,
        )
    };
    if fenced {
        return;
    }
    let asked = Instant::now();
    match epoch {
        Some(epoch) => match shared.store.renew_leader(&instance, epoch, lease_ms).await {
            Ok(_) => *renewed_at = asked,
            Err(LogError::StaleEpoch(_)) => lock(&shared.state).epoch = None,
            Err(_) => {}
        },
        None => {
            if let Ok(lease) = shared.store.acquire_leader(&instance, lease_ms).await {
                if lease.acquired {
                    *renewed_at = asked;
                    let became = {
                        let mut st = lock(&shared.state);
                        let became = st.epoch != Some(lease.epoch);
                        st.epoch = Some(lease.epoch);
                        st.tick_sent = None;
                        became
                    };
                    if became {
                        shared.publish(
                            Event::host(
                                Level::Info,
                                "leader",
                                format!("{instance} leads at epoch {}", lease.epoch),
                            )
                            .with("epoch", lease.epoch),
                        );
                        // Catch up first: what is in flight in the replica is not in the log.
                        shared.catch_up(None).await;
                        rerun_probes(shared, lease.epoch);
                    }
                }
            }
        }
    }
}

/// Every other instance silent for the TTL is expired with `expire_instance`: its
/// `expireOwner` appended with the epoch and its row forgotten in one commit, only
/// while its heartbeat is still lapsed (one that lands first refuses it).
async fn sweep<S: LogStore + 'static>(shared: &Arc<Shared<S>>, epoch: u64, ttl_ms: u64) {
    let Ok(expired) = shared.store.expired_instances(ttl_ms).await else {
        return;
    };
    for seen in expired {
        let me = {
            let st = lock(&shared.state);
            if st.epoch != Some(epoch) || st.fence.is_some() {
                return; // no leader duty once fenced or deposed
            }
            st.instance.clone()
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
        match shared
            .store
            .expire_instance(&seen.instance, ttl_ms, &me, epoch, &entry)
            .await
        {
            Ok(Some(seq)) => {
                shared.read_now.notify_one();
                shared.publish(
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
                let mut st = lock(&shared.state);
                if st.epoch == Some(epoch) {
                    st.epoch = None;
                }
                return;
            }
            Err(_) => return,
        }
    }
}

/// A `tick` once the log's clock (as estimated) passes `wakeAt`; one stamped before
/// it just arms again.
async fn tick<S: LogStore + 'static>(shared: &Arc<Shared<S>>, epoch: u64) {
    let due = {
        let mut st = lock(&shared.state);
        match (st.wake_at, st.tick_sent) {
            (Some(at), None) if shared.db_now() >= at => {
                st.tick_sent = Some(at);
                Some(at)
            }
            _ => None,
        }
    };
    let Some(at) = due else { return };
    let Ok(entry) = entry_of(&Input::Tick { now: 0 }) else {
        return;
    };
    let stamped = shared.push_leader(entry, epoch).await;
    if let Ok(Ok(now)) = stamped {
        if now < at {
            shared.reset_db_now(now);
        }
    }
    let mut st = lock(&shared.state);
    let early = !matches!(stamped, Ok(Ok(now)) if now >= at);
    if early && st.tick_sent == Some(at) {
        st.tick_sent = None;
    }
}

/// A new leader's first duty: the probes its replica has in flight (their results
/// are not in the log), run again.
fn rerun_probes<S: LogStore + 'static>(shared: &Arc<Shared<S>>, epoch: u64) {
    let mut st = lock(&shared.state);
    let Ok(state) = st.policy.export_state() else {
        return;
    };
    let in_flight: Vec<String> = match state.get("runtime") {
        Some(Value::Array(pairs)) => pairs
            .iter()
            .filter_map(|pair| {
                let id = pair.get(0)?.as_str()?;
                let flying = pair.get(1)?.get("probeInFlight")?.as_bool()?;
                flying.then(|| id.to_string())
            })
            .collect(),
        Some(Value::Object(map)) => map
            .iter()
            .filter(|(_, r)| r.get("probeInFlight").and_then(Value::as_bool) == Some(true))
            .map(|(id, _)| id.clone())
            .collect(),
        _ => Vec::new(),
    };
    for executor in in_flight {
        let url = st.spec(&executor, "").health.clone();
        if let Some(url) = url {
            if st.probing.insert(executor.clone()) {
                shared.spawn_probe(executor, url, epoch);
            }
        }
    }
}
