//! [`HostStats`]: one endpoint's outcome counters, failure streaks and
//! ejection state, all atomics.

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::config::OutlierDetection;
use super::rule::Counts;
use crate::classify::{FailureKind, Outcome};
use crate::time::nanos;

/// Why a host was ejected; also the `reason` attribute of the
/// `lb.outlier.ejections` metric ([`as_str`](Self::as_str)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EjectionReason {
    /// [`consecutive_failures`](super::OutlierDetectionBuilder::consecutive_failures).
    ConsecutiveFailures,
    /// [`consecutive_gateway_failures`](super::OutlierDetectionBuilder::consecutive_gateway_failures).
    ConsecutiveGatewayFailures,
    /// [`consecutive_local_origin_failures`](super::OutlierDetectionBuilder::consecutive_local_origin_failures).
    ConsecutiveLocalOriginFailures,
    /// [`success_rate`](super::OutlierDetectionBuilder::success_rate).
    SuccessRate,
    /// [`failure_percentage`](super::OutlierDetectionBuilder::failure_percentage).
    FailurePercentage,
    /// [`latency`](super::OutlierDetectionBuilder::latency).
    Latency,
}

impl EjectionReason {
    /// Every reason, in the order of [`index`](Self::index).
    pub const ALL: [EjectionReason; 6] = [
        EjectionReason::ConsecutiveFailures,
        EjectionReason::ConsecutiveGatewayFailures,
        EjectionReason::ConsecutiveLocalOriginFailures,
        EjectionReason::SuccessRate,
        EjectionReason::FailurePercentage,
        EjectionReason::Latency,
    ];

    /// A stable snake-case name for metrics and logs (`"success_rate"`).
    pub fn as_str(self) -> &'static str {
        match self {
            EjectionReason::ConsecutiveFailures => "consecutive_failures",
            EjectionReason::ConsecutiveGatewayFailures => "consecutive_gateway_failures",
            EjectionReason::ConsecutiveLocalOriginFailures => "consecutive_local_origin_failures",
            EjectionReason::SuccessRate => "success_rate",
            EjectionReason::FailurePercentage => "failure_percentage",
            EjectionReason::Latency => "latency",
        }
    }

    /// Position in [`ALL`](Self::ALL), for per-reason counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What an outcome means for ejection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Served (including slowly): counts as a success, feeds latency.
    Success,
    /// Did not serve; `gateway` for the host-level failures Envoy maps to
    /// 502/503/504 (gateway answers, connect failures, timeouts); `local`
    /// for the failures the client saw itself, with no answer from the host
    /// (connect failures, timeouts: Envoy's local-origin errors).
    Failure { gateway: bool, local: bool },
    /// Says nothing about the host's health: `Ignore`, and load shedding
    /// (`Overloaded`, 429) — ejecting a host for shedding load would push its
    /// load onto the others; the picker's penalty already steers around it.
    Neutral,
}

pub(crate) fn class(outcome: Outcome) -> Class {
    match outcome {
        Outcome::Success => Class::Success,
        Outcome::Ignore => Class::Neutral,
        Outcome::Failure(kind) => match kind {
            FailureKind::Slow => Class::Success,
            FailureKind::Overloaded { .. } => Class::Neutral,
            FailureKind::Error | FailureKind::Body => Class::Failure {
                gateway: false,
                local: false,
            },
            FailureKind::Gateway { .. } => Class::Failure {
                gateway: true,
                local: false,
            },
            FailureKind::Connect | FailureKind::Timeout => Class::Failure {
                gateway: true,
                local: true,
            },
        },
    }
}

/// One endpoint's outlier-detection state. All atomics; `Default` is a
/// fresh, un-ejected host. Owned by the endpoint (one per endpoint, shared by
/// every clone of the balancer), written on every response, read on every
/// pick through [`is_ejected`](Self::is_ejected).
///
/// Which outcomes count: `Success` and `Failure(Slow)` are successes (and
/// latency samples); `Error`, `Timeout`, `Connect` and `Gateway` failures are
/// failures, the last three also gateway failures; `Overloaded` and `Ignore`
/// count for nothing and leave streaks as they are.
#[derive(Debug, Default)]
pub struct HostStats {
    /// Successes are exactly the latency samples, so one counter serves both.
    failures: AtomicU64,
    latency_sum_ns: AtomicU64,
    latency_samples: AtomicU64,
    consecutive_failures: AtomicU32,
    consecutive_gateway_failures: AtomicU32,
    consecutive_local_failures: AtomicU32,
    /// End of the current ejection in ns since the epoch; 0 when not ejected
    /// (or ejected and not yet swept by an evaluation).
    ejected_until_ns: AtomicU64,
    /// Times ejected, decayed by one per interval spent un-ejected.
    multiplier: AtomicU32,
    /// Intervals in a row this host was a latency outlier.
    latency_strikes: AtomicU32,
    ejections: [AtomicU64; EjectionReason::ALL.len()],
    /// `EjectionReason::index() + 1` of the last ejection; 0 before any.
    last_reason: AtomicU8,
}

impl AsRef<HostStats> for HostStats {
    fn as_ref(&self) -> &HostStats {
        self
    }
}

impl HostStats {
    /// True while the host is ejected at `now_ns` (ns since the balancer's
    /// epoch). One atomic load: the picker calls it for every candidate.
    /// An ejection ends exactly at its deadline, without waiting for the
    /// next evaluation.
    #[inline]
    pub fn is_ejected(&self, now_ns: u64) -> bool {
        self.ejected_until_ns.load(Relaxed) > now_ns
    }

    /// End of the current (or last, until swept) ejection in ns since the
    /// epoch, or `None` if there is none.
    pub fn ejected_until_ns(&self) -> Option<u64> {
        match self.ejected_until_ns.load(Relaxed) {
            0 => None,
            t => Some(t),
        }
    }

    /// The ejection-time multiplier: grows by one per ejection (up to
    /// `ceil(max / base)`), shrinks by one per interval spent un-ejected.
    pub fn multiplier(&self) -> u32 {
        self.multiplier.load(Relaxed)
    }

    /// Failures in a row, as the consecutive-failures rule sees them.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures.load(Relaxed)
    }

    /// Gateway failures in a row.
    pub fn consecutive_gateway_failures(&self) -> u32 {
        self.consecutive_gateway_failures.load(Relaxed)
    }

    /// Local-origin failures (connect failures, timeouts) in a row.
    pub fn consecutive_local_origin_failures(&self) -> u32 {
        self.consecutive_local_failures.load(Relaxed)
    }

    /// The reason of the host's last ejection, if it was ever ejected.
    pub fn last_reason(&self) -> Option<EjectionReason> {
        match self.last_reason.load(Relaxed) {
            0 => None,
            i => EjectionReason::ALL.get(usize::from(i) - 1).copied(),
        }
    }

    /// Successes and failures counted in the current interval.
    pub fn interval_counts(&self) -> (u64, u64) {
        (
            self.latency_samples.load(Relaxed),
            self.failures.load(Relaxed),
        )
    }

    /// Times this host was ejected for `reason` (monotonic; for metrics).
    pub fn ejections(&self, reason: EjectionReason) -> u64 {
        self.ejections[reason.index()].load(Relaxed)
    }

    /// Records one completed call and returns the consecutive rule it trips,
    /// if any (the gateway rule first, then the local-origin rule, then the plain one).
    ///
    /// Records only: ejecting is [`Detector::eject`](super::Detector::eject)'s
    /// job, which needs the pool. A tripped rule stays tripped (the streak is
    /// reset only by a success or an ejection), so an ejection refused by the
    /// pool limit is tried again on the next failure. Failures of calls
    /// that finish while the host is ejected (it was picked before) count
    /// for the interval rules but not for the streaks, so a host is not
    /// re-ejected by its first failure after it returns. Cost: two to four
    /// relaxed atomic read-modify-writes.
    pub fn record(
        &self,
        cfg: &OutlierDetection,
        outcome: Outcome,
        latency: Duration,
        now_ns: u64,
    ) -> Option<EjectionReason> {
        match class(outcome) {
            Class::Neutral => None,
            Class::Success => {
                self.latency_sum_ns.fetch_add(nanos(latency), Relaxed);
                self.latency_samples.fetch_add(1, Relaxed);
                reset(&self.consecutive_failures);
                reset(&self.consecutive_gateway_failures);
                reset(&self.consecutive_local_failures);
                None
            }
            Class::Failure { gateway, local } => {
                self.failures.fetch_add(1, Relaxed);
                if self.is_ejected(now_ns) {
                    return None;
                }
                let streak = self
                    .consecutive_failures
                    .fetch_add(1, Relaxed)
                    .saturating_add(1);
                let gw_streak = if gateway {
                    self.consecutive_gateway_failures
                        .fetch_add(1, Relaxed)
                        .saturating_add(1)
                } else {
                    reset(&self.consecutive_gateway_failures);
                    0
                };
                let local_streak = if local {
                    self.consecutive_local_failures
                        .fetch_add(1, Relaxed)
                        .saturating_add(1)
                } else {
                    reset(&self.consecutive_local_failures);
                    0
                };
                if cfg
                    .consecutive_gateway_failures
                    .is_some_and(|r| gw_streak >= r.threshold)
                {
                    Some(EjectionReason::ConsecutiveGatewayFailures)
                } else if cfg
                    .consecutive_local_origin_failures
                    .is_some_and(|r| local_streak >= r.threshold)
                {
                    Some(EjectionReason::ConsecutiveLocalOriginFailures)
                } else if cfg
                    .consecutive_failures
                    .is_some_and(|r| streak >= r.threshold)
                {
                    Some(EjectionReason::ConsecutiveFailures)
                } else {
                    None
                }
            }
        }
    }

    /// Takes this interval's counts and starts the next interval at zero.
    pub(crate) fn take_counts(&self) -> Counts {
        let latency_samples = self.latency_samples.swap(0, Relaxed);
        Counts {
            successes: latency_samples,
            failures: self.failures.swap(0, Relaxed),
            latency_sum_ns: self.latency_sum_ns.swap(0, Relaxed),
            latency_samples,
        }
    }

    pub(crate) fn raw_ejected_until(&self) -> u64 {
        self.ejected_until_ns.load(Relaxed)
    }

    /// Marks the host ejected until `until_ns` (> 0) and bumps its
    /// multiplier and counters. Called by the detector under its lock.
    pub(crate) fn eject(&self, until_ns: u64, max_multiplier: u32, reason: EjectionReason) {
        self.ejected_until_ns.store(until_ns.max(1), Relaxed);
        let m = self.multiplier.load(Relaxed);
        self.multiplier
            .store(m.saturating_add(1).min(max_multiplier), Relaxed);
        self.consecutive_failures.store(0, Relaxed);
        self.consecutive_gateway_failures.store(0, Relaxed);
        self.consecutive_local_failures.store(0, Relaxed);
        self.latency_strikes.store(0, Relaxed);
        self.ejections[reason.index()].fetch_add(1, Relaxed);
        self.last_reason.store(reason.index() as u8 + 1, Relaxed);
    }

    /// The multiplier this host's next ejection will use (before the bump).
    pub(crate) fn next_multiplier(&self, max_multiplier: u32) -> u32 {
        self.multiplier
            .load(Relaxed)
            .saturating_add(1)
            .min(max_multiplier)
    }

    /// A detection whose enforcement roll said no: the streaks start over,
    /// as after an ejection (Envoy fires a consecutive rule once per streak).
    pub(crate) fn record_not_enforced(&self) {
        self.consecutive_failures.store(0, Relaxed);
        self.consecutive_gateway_failures.store(0, Relaxed);
        self.consecutive_local_failures.store(0, Relaxed);
    }

    /// Ends an ejection whose time is up (called under the detector's lock).
    pub(crate) fn clear_ejection(&self) {
        self.ejected_until_ns.store(0, Relaxed);
    }

    /// Lowers the multiplier by `steps` (saturating at 0).
    pub(crate) fn decay(&self, steps: u32) {
        let m = self.multiplier.load(Relaxed);
        if m > 0 {
            self.multiplier.store(m.saturating_sub(steps), Relaxed);
        }
    }

    /// Bumps or clears the latency-outlier streak; returns the new value.
    pub(crate) fn latency_strike(&self, outlier: bool) -> u32 {
        if outlier {
            self.latency_strikes.fetch_add(1, Relaxed).saturating_add(1)
        } else {
            reset(&self.latency_strikes);
            0
        }
    }
}

/// Stores 0 only when needed, to keep the success path free of writes to
/// shared cache lines when there is no streak.
#[inline]
fn reset(a: &AtomicU32) {
    if a.load(Relaxed) != 0 {
        a.store(0, Relaxed);
    }
}
