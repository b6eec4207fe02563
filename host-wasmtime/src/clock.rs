//! The host's clock: epoch milliseconds for the core's `now`, on tokio's clock so that
//! tests with paused time (`tokio::time::pause`) drive timers virtually.

use std::time::Duration;

use tokio::time::Instant;

/// Epoch milliseconds that advance with tokio's `Instant`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_ms: u64,
    base: Instant,
}

impl Clock {
    /// Now, from the system clock (read once; afterwards tokio's monotonic clock).
    #[allow(clippy::disallowed_methods)] // the host does IO and reads time
    pub fn system() -> Clock {
        let base_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Clock::starting_at(base_ms)
    }

    /// A clock that reads `base_ms` now.
    pub fn starting_at(base_ms: u64) -> Clock {
        Clock {
            base_ms,
            base: Instant::now(),
        }
    }

    /// The time now, in epoch milliseconds.
    pub fn now_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.base_ms.saturating_add(elapsed)
    }

    /// The tokio instant of epoch ms `at` (now, when `at` has passed).
    pub fn instant_at(&self, at_ms: u64) -> Instant {
        let offset = Duration::from_millis(at_ms.saturating_sub(self.base_ms));
        // Beyond what an Instant holds: "never" is a year away, re-armed on wake-up.
        self.base
            .checked_add(offset)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 86_400))
    }
}

/// The system clock in epoch ms, for one-shot commands.
#[allow(clippy::disallowed_methods)] // the host does IO and reads time
pub fn system_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
