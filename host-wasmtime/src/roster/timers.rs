//! The memory log's wake-ups: a `tick` at every wake-up time the core asks for. (A
//! remote log's ticks are its leader's duty: `shared`.)

use std::sync::{Arc, Weak};

use rota_core::{Input, Level};
use tokio::sync::Notify;

use super::state::{lock, Inner};
use crate::clock::Clock;
use crate::event::Event;

pub(crate) async fn timer(weak: Weak<Inner>, wake: Arc<Notify>, clock: Clock) {
    loop {
        let wake_at = match weak.upgrade() {
            Some(inner) => lock(&inner.state).wake_at,
            None => return,
        };
        match wake_at {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(clock.instant_at(at)) => {
                        let Some(inner) = weak.upgrade() else { return };
                        let now = clock.now_ms().max(at);
                        if let Err(error) = inner.feed(Input::Tick { now }) {
                            inner.publish(Event::host(Level::Warn, "tickFailed", error.to_string()));
                        }
                    }
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}
