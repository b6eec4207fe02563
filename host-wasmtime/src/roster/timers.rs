//! The wake-ups: a `tick` at every wake-up time the core asks for, by whoever leads.
//! The memory log's one instance folds it at once; a remote log's leader appends it as
//! a leader entry once the log's clock (as this instance estimates it) passes
//! `wakeAt`, and a tick the log stamped before `wakeAt` arms again.

use std::sync::{Arc, Weak};

use rota_core::{Input, Level};
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::state::{lock, Inner, Mine};
use crate::clock::Clock;
use crate::event::Event;

pub(crate) async fn timer(weak: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let due = match weak.upgrade() {
            Some(inner) => inner.next_tick(),
            None => return,
        };
        match due {
            Some((at, instant)) => {
                tokio::select! {
                    () = tokio::time::sleep_until(instant) => {
                        let Some(inner) = weak.upgrade() else { return };
                        inner.tick(at).await;
                    }
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

impl Inner {
    /// The next `wakeAt` and when it is due, when this instance ticks: the memory
    /// log's one instance; a remote log's leader with no tick for it in flight.
    fn next_tick(&self) -> Option<(u64, Instant)> {
        let st = lock(&self.state);
        let at = st.wake_at?;
        match (&self.link, &st.member) {
            (None, _) => Some((at, self.clock.instant_at(at))),
            (Some(link), Some(m)) if m.epoch.is_some() && m.tick_sent.is_none() => {
                Some((at, lock(&link.db_clock).instant_at(at)))
            }
            _ => None,
        }
    }

    async fn tick(self: &Arc<Inner>, at: u64) {
        let stamped = {
            let mut st = lock(&self.state);
            let Some(member) = st.member.as_mut() else {
                let now = self.clock.now_ms().max(at);
                if let Err(error) = self.feed_locked(&mut st, Input::Tick { now }) {
                    self.publish(Event::host(Level::Warn, "tickFailed", error.to_string()));
                }
                return;
            };
            let Some(epoch) = member.epoch.filter(|_| member.tick_sent.is_none()) else {
                return;
            };
            member.tick_sent = Some(at);
            let (tx, rx) = oneshot::channel();
            let tick = Input::Tick { now: 0 };
            if (self.enqueue(&mut st, &tick, Some(epoch), Mine::Plain, Some(tx))).is_err() {
                return;
            }
            rx
        };
        let stamped = stamped.await;
        if let (Ok(Ok(now)), Some(link)) = (&stamped, &self.link) {
            if *now < at {
                // Stamped before `wakeAt`: the estimate of the log's clock was ahead.
                *lock(&link.db_clock) = Clock::starting_at(*now);
            }
        }
        let early = !matches!(stamped, Ok(Ok(now)) if now >= at);
        if let Some(m) = lock(&self.state).member.as_mut() {
            if early && m.tick_sent == Some(at) {
                m.tick_sent = None;
            }
        }
    }
}
