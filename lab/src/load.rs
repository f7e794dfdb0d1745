//! Backends that report their own load (ORCA, `reports = true`): every
//! answer carries an `endpoint-load-metrics` header in TEXT form, which the
//! balancer's classifier reads, in `--sim` and http mode alike.
//!
//! A backend with `w` workers, `b` of them busy and `q` requests waiting
//! reports `cpu_utilization = b / w` (busy workers over workers) and
//! `application_utilization = (b + q) / w` (demand over capacity, above 1
//! when requests queue, as A51 allows past a soft limit), with
//! `rps_fractional` and `eps` the requests answered and failed over the
//! last second. A backend without a worker limit reports rates only.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Width of one counting bucket.
const BUCKET: Duration = Duration::from_millis(100);
/// Buckets in the rate window (one second).
const BUCKETS: usize = 10;

/// Answers and failures per bucket over the last second.
#[derive(Debug)]
pub struct Meter {
    start: Instant,
    state: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    /// Index of the newest bucket since `start`.
    newest: u64,
    answered: [u32; BUCKETS],
    failed: [u32; BUCKETS],
}

impl Window {
    /// Moves the window to the bucket of `now`, clearing the ones skipped.
    fn advance(&mut self, bucket: u64) {
        let skipped = bucket.saturating_sub(self.newest).min(BUCKETS as u64);
        for k in 1..=skipped {
            let slot = ((self.newest + k) % BUCKETS as u64) as usize;
            self.answered[slot] = 0;
            self.failed[slot] = 0;
        }
        self.newest = self.newest.max(bucket);
    }
}

impl Meter {
    /// A meter whose buckets start at `start`.
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            state: Mutex::new(Window::default()),
        }
    }

    fn bucket(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.start).as_nanos() / BUCKET.as_nanos()) as u64
    }

    /// One answer at `now`.
    pub fn record(&self, now: Instant, failed: bool) {
        let b = self.bucket(now);
        let mut w = self.state.lock().unwrap_or_else(|p| p.into_inner());
        w.advance(b);
        let slot = (b % BUCKETS as u64) as usize;
        w.answered[slot] += 1;
        w.failed[slot] += u32::from(failed);
    }

    /// Answers and failures per second over the last second at `now`.
    pub fn rates(&self, now: Instant) -> (f64, f64) {
        let b = self.bucket(now);
        let mut w = self.state.lock().unwrap_or_else(|p| p.into_inner());
        w.advance(b);
        let secs = (BUCKET * BUCKETS as u32).as_secs_f64();
        let sum = |x: &[u32; BUCKETS]| f64::from(x.iter().sum::<u32>()) / secs;
        (sum(&w.answered), sum(&w.failed))
    }
}

/// The `endpoint-load-metrics` value of a backend with `busy` workers busy
/// and `waiting` requests queued out of `workers` (`None`: unlimited).
pub fn report_text(
    busy: usize,
    waiting: usize,
    workers: Option<usize>,
    rates: (f64, f64),
) -> String {
    let (rps, eps) = rates;
    match workers {
        Some(w) => format!(
            "TEXT cpu_utilization={:.4}, application_utilization={:.4}, rps_fractional={rps:.2}, eps={eps:.2}",
            busy as f64 / w as f64,
            (busy + waiting) as f64 / w as f64,
        ),
        None => format!("TEXT rps_fractional={rps:.2}, eps={eps:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lb::orca::LoadReport;

    #[tokio::test(start_paused = true)]
    async fn rates_cover_the_last_second() {
        let m = Meter::new(Instant::now());
        for _ in 0..50 {
            m.record(Instant::now(), false);
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        m.record(Instant::now(), true);
        assert_eq!(m.rates(Instant::now()), (51.0, 1.0));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(m.rates(Instant::now()), (0.0, 0.0));
    }

    #[test]
    fn the_text_parses_back() {
        let r = LoadReport::parse(&report_text(8, 8, Some(16), (120.0, 2.0))).unwrap();
        assert_eq!(r.cpu_utilization(), Some(0.5));
        assert_eq!(r.application_utilization(), Some(1.0));
        assert_eq!(
            (r.rps_fractional(), r.eps(), r.rejected()),
            (Some(120.0), Some(2.0), 0)
        );
    }
}
