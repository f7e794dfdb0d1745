//! The interval evaluation: returns hosts whose ejection has ended, decays
//! multipliers, runs the interval rules. Lazy: run by whichever caller
//! finds it due.

use std::sync::atomic::Ordering;

use super::config::OutlierDetection;
use super::detector::{Attempt, Detector, Mix, count_ejected};
use super::host::{EjectionReason, HostStats};
use super::rule::Sample;

/// What one interval evaluation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evaluation {
    /// Hosts ejected by the interval rules.
    pub ejected: usize,
    /// Hosts whose ejection had ended and were returned to the pool.
    pub returned: usize,
    /// Detections not enforced because the pool was at its ejection limit.
    pub refused: usize,
}

impl Detector {
    /// True when an evaluation is due at `now_ns`: one atomic load, so a
    /// caller can check it before loading the pool.
    #[inline]
    pub fn is_due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_eval_ns.load(Ordering::Relaxed)
    }

    /// Runs the interval evaluation if it is due and no other caller is
    /// running it (claimed with a compare-exchange; others return `None` at
    /// once). In order:
    ///
    /// 1. hosts whose ejection has ended are returned; every other
    ///    un-ejected host's multiplier decays by one per interval elapsed
    ///    since the last evaluation (Envoy, gRPC A50);
    /// 2. the interval's counts are taken and reset;
    /// 3. success rate, failure percentage and latency rules eject their
    ///    outliers, worst first, while the pool is under its limit.
    ///
    /// Cost when not due: one atomic load. When due: O(n log n) and a few
    /// small allocations, once per interval.
    pub fn maybe_evaluate<H: AsRef<HostStats>>(
        &self,
        cfg: &OutlierDetection,
        pool: &[H],
        now_ns: u64,
        rand: u64,
    ) -> Option<Evaluation> {
        if !self.is_due(now_ns) {
            return None;
        }
        let _guard = self.try_lock()?;
        if !self.is_due(now_ns) {
            return None;
        }
        let interval = cfg.interval_ns.max(1);
        let last = self.last_eval_ns.swap(now_ns, Ordering::Relaxed);
        self.next_eval_ns
            .store(now_ns.saturating_add(interval), Ordering::Relaxed);
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        let steps = u32::try_from(now_ns.saturating_sub(last) / interval)
            .unwrap_or(u32::MAX)
            .max(1);

        let mut report = Evaluation {
            returned: return_expired(pool, steps, now_ns),
            ..Evaluation::default()
        };
        self.returned
            .fetch_add(report.returned as u64, Ordering::Relaxed);
        let samples: Vec<Sample> = pool
            .iter()
            .enumerate()
            .map(|(index, h)| Sample {
                index,
                counts: h.as_ref().take_counts(),
            })
            .collect();
        let candidates = candidates(cfg, pool, &samples, now_ns);

        let mut ejected = count_ejected(pool, now_ns);
        let mut rng = Mix(rand);
        for (index, reason) in candidates {
            match self.attempt(cfg, pool, index, reason, now_ns, &mut rng, &mut ejected) {
                Attempt::Ejected => report.ejected += 1,
                Attempt::AtLimit => report.refused += 1,
                Attempt::AlreadyEjected | Attempt::NotEnforced => {}
            }
        }
        self.store_cache(pool, now_ns);
        Some(report)
    }
}

/// Ends the ejections that expired (their endpoints return) and fades the
/// others' multipliers by `steps` intervals; the number returned.
fn return_expired<H: AsRef<HostStats>>(pool: &[H], steps: u32, now_ns: u64) -> usize {
    let mut returned = 0;
    for h in pool {
        let h = h.as_ref();
        match h.raw_ejected_until() {
            0 => h.decay(steps),
            until if until <= now_ns => {
                h.clear_ejection();
                returned += 1;
            }
            _ => {}
        }
    }
    returned
}

/// The endpoints each enabled rule finds outlying this interval, in the
/// rules' order (success rate, failure percentage, then sustained latency,
/// slowest first), with the rule that found them.
fn candidates<H: AsRef<HostStats>>(
    cfg: &OutlierDetection,
    pool: &[H],
    samples: &[Sample],
    now_ns: u64,
) -> Vec<(usize, EjectionReason)> {
    let mut candidates: Vec<(usize, EjectionReason)> = Vec::new();
    if let Some(rule) = &cfg.success_rate {
        let found = rule.outliers(samples);
        candidates.extend(found.into_iter().map(|i| (i, EjectionReason::SuccessRate)));
    }
    if let Some(rule) = &cfg.failure_percentage {
        let found = rule.outliers(samples);
        candidates.extend(
            found
                .into_iter()
                .map(|i| (i, EjectionReason::FailurePercentage)),
        );
    }
    if let Some(rule) = &cfg.latency {
        let outliers = rule.outliers(samples).unwrap_or_default();
        let mut sustained = Vec::new();
        for (i, h) in pool.iter().enumerate() {
            let h = h.as_ref();
            let outlier = !h.is_ejected(now_ns) && outliers.contains(&i);
            if h.latency_strike(outlier) >= rule.consecutive_intervals {
                sustained.push(i);
            }
        }
        // Keep the rule's slowest-first order.
        candidates.extend(
            outliers
                .into_iter()
                .filter(|i| sustained.contains(i))
                .map(|i| (i, EjectionReason::Latency)),
        );
    } else {
        for h in pool {
            h.as_ref().latency_strike(false);
        }
    }
    candidates
}
