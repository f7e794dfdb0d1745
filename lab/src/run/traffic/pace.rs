//! A ceiling on the closed loop's rate: against the user's own replicas
//! (`[target]`), users that send as fast as the answers come could send
//! tens of thousands a second to a fast service; with a [`Pace`] they
//! share at most `rate` sends a second, each taking the next free slot.
//! A request's latency counts from its send, so waiting for a slot does
//! not change it.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Send slots shared by every user of a row.
#[derive(Debug)]
pub struct Pace {
    gap: Duration,
    next: Mutex<Option<Instant>>,
}

impl Pace {
    /// At most `rate` sends a second (a positive, finite rate).
    pub fn new(rate: f64) -> Self {
        Self {
            gap: Duration::from_secs_f64(1.0 / rate.clamp(1e-3, 1e9)),
            next: Mutex::new(None),
        }
    }

    /// Waits for the next free slot (at once when the rate is not
    /// reached).
    pub async fn wait(&self) {
        let now = Instant::now();
        let slot = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let slot = next.map_or(now, |n| n.max(now));
            *next = Some(slot + self.gap);
            slot
        };
        if slot > now {
            tokio::time::sleep_until(slot).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sends_keep_the_gap_and_an_idle_pace_waits_not() {
        let pace = Pace::new(100.0);
        let start = Instant::now();
        for _ in 0..5 {
            pace.wait().await;
        }
        // Five slots: now, then 10 ms apart.
        assert_eq!(Instant::now() - start, Duration::from_millis(40));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let later = Instant::now();
        pace.wait().await;
        assert_eq!(Instant::now(), later, "a slot in the past is taken at once");
    }
}
