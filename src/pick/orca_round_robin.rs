use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

use super::{Pick, Picker, Pool};
use crate::error::{ConfigError, check_bounded};
use crate::model::EndpointState;

/// Default blackout: 10 s, A58's `blackout_period`. A new report stream is
/// used only after it has lasted this long, so that an endpoint's first
/// few (noisy) reports do not swing the weights.
pub const DEFAULT_BLACKOUT: Duration = Duration::from_secs(10);

/// Default weight update period: 1 s, A58's `weight_update_period`.
pub const DEFAULT_WEIGHT_UPDATE_PERIOD: Duration = Duration::from_secs(1);

/// Shortest weight update period: 100 ms, A58's floor (shorter settings are
/// raised to it).
pub const MIN_WEIGHT_UPDATE_PERIOD: Duration = Duration::from_millis(100);

/// Default error penalty: 1.0, A58's `error_utilization_penalty`.
pub const DEFAULT_ERROR_PENALTY: f64 = 1.0;

/// Weights are kept within this factor of their mean either way (gRPC's
/// static stride scheduler does the same), which bounds a pick to a few
/// sequence steps and keeps a slow reporter from being starved outright.
const MAX_RATIO: f64 = 10.0;

/// Scaled weights live in `1..=SCALE`.
const SCALE: u64 = u16::MAX as u64;

/// Weights from the endpoints' own load reports: gRPC's
/// `weighted_round_robin` (A58), Envoy's `client_side_weighted_round_robin`.
///
/// Each endpoint's weight is `rps / (utilization + eps / rps × penalty)`
/// from its last [load report](crate::orca) (utilization: application if
/// above 0, else CPU): requests per second it serves per unit of
/// utilization, so busy or failing endpoints lose share to idle ones,
/// whoever sent their load. The weight is used once its report stream has
/// lasted the [blackout](Self::blackout_period), and until the balancer's
/// [report expiry](crate::balance::Builder::load_report_expiry) passes
/// without a report. Endpoints without a usable weight get the mean of the
/// others; with fewer than two weights, all are equal (round robin). The
/// configured endpoint weights are not used (A58's rule), and weights stay
/// within 10× of their mean.
///
/// Weights are recomputed every [update period](Self::weight_update_period)
/// (by whichever pick finds it due: O(n), no allocation) and scheduled
/// smoothly, like [`WeightedRoundRobin`](super::WeightedRoundRobin): a
/// stride scheduler (gRPC's) picks endpoint `i` in `wᵢ` of every 65 535
/// rounds, evenly spaced, with one shared atomic counter. Endpoints that
/// are unavailable are skipped.
///
/// ```
/// use std::time::Duration;
/// use tower_lb::pick::OrcaRoundRobin;
/// let p = OrcaRoundRobin::new().blackout_period(Duration::from_secs(5)).error_penalty(2.0);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OrcaRoundRobin {
    blackout: Duration,
    update: Duration,
    penalty: f64,
}

impl Default for OrcaRoundRobin {
    fn default() -> Self {
        Self {
            blackout: DEFAULT_BLACKOUT,
            update: DEFAULT_WEIGHT_UPDATE_PERIOD,
            penalty: DEFAULT_ERROR_PENALTY,
        }
    }
}

impl OrcaRoundRobin {
    /// The defaults (A58's).
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a report stream must last before its weight is used (at
    /// most a year; 0 uses weights at once). Default 10 s.
    pub fn blackout_period(mut self, d: Duration) -> Self {
        self.blackout = d;
        self
    }

    /// How often weights are recomputed: at least 100 ms (shorter is raised
    /// to it), at most a year. Default 1 s.
    pub fn weight_update_period(mut self, d: Duration) -> Self {
        self.update = d;
        self
    }

    /// Multiplier of the error rate `eps / rps` added to utilization, a
    /// finite number `>= 0`. Default 1.
    pub fn error_penalty(mut self, penalty: f64) -> Self {
        self.penalty = penalty;
        self
    }

    /// Recomputes the scaled weights from the endpoints' reports at `now_ns`.
    fn update(&self, states: &[Arc<EndpointState>], t: &WeightTable, now_ns: u64) {
        let blackout = crate::time::nanos(self.blackout);
        let weight = |s: &EndpointState| s.report_weight(now_ns, blackout, self.penalty);
        let (mut sum, mut count) = (0.0, 0usize);
        for s in states {
            let w = weight(s);
            if w > 0.0 {
                sum += w;
                count += 1;
            }
        }
        if count < 2 {
            for w in t.weights.iter() {
                w.store(SCALE as u16, Ordering::Relaxed);
            }
            return;
        }
        let mean = sum / count as f64;
        let clamped = |w: f64| {
            if w > 0.0 {
                w.clamp(mean / MAX_RATIO, mean * MAX_RATIO)
            } else {
                mean
            }
        };
        let max = states
            .iter()
            .map(|s| clamped(weight(s)))
            .fold(0.0, f64::max);
        for (s, slot) in states.iter().zip(t.weights.iter()) {
            let scaled = (clamped(weight(s)) / max * SCALE as f64).round();
            slot.store(scaled.clamp(1.0, SCALE as f64) as u16, Ordering::Relaxed);
        }
    }
}

/// Per snapshot: each endpoint's scaled weight, when they are next
/// recomputed, and the scheduler's sequence.
#[derive(Debug)]
pub struct WeightTable {
    weights: Box<[AtomicU16]>,
    next_update_ns: AtomicU64,
    seq: AtomicU64,
}

impl WeightTable {
    /// Endpoint `i`'s current scaled weight, in `1..=65535`.
    pub fn weight(&self, i: usize) -> Option<u16> {
        self.weights.get(i).map(|w| w.load(Ordering::Relaxed))
    }
}

impl Picker for OrcaRoundRobin {
    type Table = WeightTable;

    fn name(&self) -> &'static str {
        "orca_round_robin"
    }

    fn table(&self, endpoints: &[Arc<EndpointState>]) -> WeightTable {
        WeightTable {
            weights: endpoints
                .iter()
                .map(|_| AtomicU16::new(SCALE as u16))
                .collect(),
            next_update_ns: AtomicU64::new(0),
            seq: AtomicU64::new(0),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        check_bounded("blackout_period", self.blackout)?;
        check_bounded("weight_update_period", self.update)?;
        if !(self.penalty.is_finite() && self.penalty >= 0.0) {
            return Err(ConfigError::new(
                "error_penalty",
                self.penalty,
                "a finite number >= 0",
            ));
        }
        Ok(())
    }
}

impl<Req> Pick<Req> for OrcaRoundRobin {
    fn pick(&self, _: &Req, cx: &Pool<'_, WeightTable>) -> Option<usize> {
        let t = cx.table();
        let n = cx.len().min(t.weights.len());
        if n == 0 {
            return None;
        }
        let due = t.next_update_ns.load(Ordering::Relaxed);
        if cx.now_ns >= due {
            let next = cx.now_ns.saturating_add(crate::time::nanos(
                self.update.max(MIN_WEIGHT_UPDATE_PERIOD),
            ));
            // One pick recomputes; the others go on with the old weights.
            if t.next_update_ns
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.update(cx.states, t, cx.now_ns);
            }
        }
        // Weights are within 100× of each other, so a pick takes at most
        // about 100·n/(n + 99) steps on average; past the bound, any
        // available endpoint.
        for _ in 0..4 * n + 400 {
            let seq = t.seq.fetch_add(1, Ordering::Relaxed);
            let (i, round) = ((seq % n as u64) as usize, seq / n as u64);
            let w = u64::from(t.weights[i].load(Ordering::Relaxed));
            // Endpoint i's turn in `w` of every SCALE rounds, evenly spread;
            // the offset staggers the endpoints' turns.
            let offset = SCALE / 2 * i as u64;
            let turn = (w.wrapping_mul(round).wrapping_add(offset)) % SCALE >= SCALE - w;
            if turn && cx.is_available(i) {
                return Some(i);
            }
        }
        cx.next_available(0)
    }
}

#[cfg(test)]
mod tests;
