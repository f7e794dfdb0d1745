//! [`Detector`]: the pool-level half — applies the rules, enforces the
//! ejection limit, runs the interval evaluation lazily.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use super::config::{OutlierDetection, max_ejections};
use super::host::{EjectionReason, HostStats};
use crate::outcome::Outcome;

/// Outlier detection for one pool of hosts: shared (behind the balancer's
/// `Arc`) by every clone of a balancer. Atomics only, no background task:
/// the balancer calls [`on_response`](Self::on_response) for each completed
/// call and [`maybe_evaluate`](Self::maybe_evaluate) lazily.
///
/// Every method takes the pool as a slice of anything that is
/// `AsRef<HostStats>`, the time as nanoseconds since the balancer's epoch
/// (the detector has no clock) and randomness as a `u64` (for jitter and
/// enforcement). The pool may differ between calls (membership changes):
/// nothing is remembered by index, and a stale index is ignored.
///
/// Ejections and evaluations are serialized by a try-lock (one
/// compare-exchange); a caller that finds it taken gives up rather than
/// wait: a tripped consecutive rule stays tripped and is tried again on the
/// host's next failure, a due evaluation is run by the next response. Under
/// that lock the number of ejected hosts is counted exactly, so the limit of
/// [`max_ejections`] holds and the detector never ejects the last
/// un-ejected host of the pool it is given. (Removing healthy hosts can
/// still leave a pool of ejected ones; [`ejected_count_at`](Self::ejected_count_at)
/// then returns one of them.)
#[derive(Debug)]
pub struct Detector {
    lock: AtomicBool,
    pub(super) next_eval_ns: AtomicU64,
    pub(super) last_eval_ns: AtomicU64,
    /// Cached count of ejected hosts, valid for a pool of `cached_len`
    /// hosts until `next_expiry_ns` (the earliest end of a counted ejection).
    ejected: AtomicUsize,
    cached_len: AtomicUsize,
    next_expiry_ns: AtomicU64,
    ejections: [AtomicU64; EjectionReason::ALL.len()],
    refused: AtomicU64,
    pub(super) returned: AtomicU64,
    pub(super) evaluations: AtomicU64,
}

impl Default for Detector {
    fn default() -> Self {
        Self {
            lock: AtomicBool::new(false),
            next_eval_ns: AtomicU64::new(0),
            last_eval_ns: AtomicU64::new(0),
            ejected: AtomicUsize::new(0),
            cached_len: AtomicUsize::new(0),
            next_expiry_ns: AtomicU64::new(u64::MAX),
            ejections: Default::default(),
            refused: AtomicU64::new(0),
            returned: AtomicU64::new(0),
            evaluations: AtomicU64::new(0),
        }
    }
}

/// Releases the detector's try-lock when dropped.
pub(super) struct Guard<'a>(&'a AtomicBool);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Outcome of one ejection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attempt {
    Ejected,
    AlreadyEjected,
    NotEnforced,
    AtLimit,
}

impl Detector {
    /// A detector whose first evaluation runs at the first
    /// [`maybe_evaluate`](Self::maybe_evaluate) call.
    pub fn new() -> Self {
        Self::default()
    }

    pub(super) fn try_lock(&self) -> Option<Guard<'_>> {
        self.lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Guard(&self.lock))
    }

    /// Records one completed call of `pool[index]` and applies the
    /// consecutive rules at once. Returns the reason if this call ejected
    /// the host. An `index` outside the pool is ignored.
    ///
    /// Cost: [`HostStats::record`] (a few relaxed atomics); an ejection
    /// attempt (a compare-exchange and an O(n) count) only when a
    /// consecutive rule trips.
    #[allow(clippy::too_many_arguments)]
    pub fn on_response<H: AsRef<HostStats>>(
        &self,
        cfg: &OutlierDetection,
        pool: &[H],
        index: usize,
        outcome: Outcome,
        latency: Duration,
        now_ns: u64,
        rand: u64,
    ) -> Option<EjectionReason> {
        let host = pool.get(index)?.as_ref();
        let reason = host.record(cfg, outcome, latency, now_ns)?;
        self.eject_at(cfg, pool, index, reason, now_ns, rand)
            .then_some(reason)
    }

    /// Ejects `host` for `reason` if it is in `pool` (found by identity, so
    /// indexes may have moved since the host was picked), not already
    /// ejected, the rule's enforcing percentage allows it and the pool is
    /// under its limit. Returns whether it did.
    ///
    /// For a caller that records with [`HostStats::record`] on the response
    /// path and loads the pool only when a rule trips. Cost: O(n).
    pub fn eject<H: AsRef<HostStats>>(
        &self,
        cfg: &OutlierDetection,
        pool: &[H],
        host: &HostStats,
        reason: EjectionReason,
        now_ns: u64,
        rand: u64,
    ) -> bool {
        match pool.iter().position(|h| std::ptr::eq(h.as_ref(), host)) {
            Some(index) => self.eject_at(cfg, pool, index, reason, now_ns, rand),
            None => false,
        }
    }

    fn eject_at<H: AsRef<HostStats>>(
        &self,
        cfg: &OutlierDetection,
        pool: &[H],
        index: usize,
        reason: EjectionReason,
        now_ns: u64,
        rand: u64,
    ) -> bool {
        let Some(host) = pool.get(index).map(AsRef::as_ref) else {
            return false;
        };
        if host.is_ejected(now_ns) {
            return false;
        }
        let Some(_guard) = self.try_lock() else {
            return false;
        };
        let mut ejected = count_ejected(pool, now_ns);
        let mut rng = Mix(rand);
        let attempt = self.attempt(cfg, pool, index, reason, now_ns, &mut rng, &mut ejected);
        if attempt == Attempt::NotEnforced {
            // The detection is spent: the streak starts over.
            host.record_not_enforced();
        }
        attempt == Attempt::Ejected
    }

    /// One ejection attempt, under the lock. `ejected` is the pool's current
    /// count of ejected hosts, kept up to date.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attempt<H: AsRef<HostStats>>(
        &self,
        cfg: &OutlierDetection,
        pool: &[H],
        index: usize,
        reason: EjectionReason,
        now_ns: u64,
        rng: &mut Mix,
        ejected: &mut usize,
    ) -> Attempt {
        let Some(host) = pool.get(index).map(AsRef::as_ref) else {
            return Attempt::AlreadyEjected;
        };
        if host.is_ejected(now_ns) {
            return Attempt::AlreadyEjected;
        }
        if !enforced(rule_enforcing(cfg, reason), rng.next()) {
            return Attempt::NotEnforced;
        }
        if *ejected >= max_ejections(pool.len(), cfg.max_ejection_percent) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Attempt::AtLimit;
        }
        let max_multiplier = cfg.max_multiplier();
        let base = cfg.ejection_ns(host.next_multiplier(max_multiplier));
        let jitter = below(rng.next(), cfg.jitter_ns.saturating_add(1));
        let until = now_ns.saturating_add(base).saturating_add(jitter);
        host.eject(until, max_multiplier, reason);
        *ejected += 1;
        self.ejections[reason.index()].fetch_add(1, Ordering::Relaxed);
        self.store_cache(pool, now_ns);
        Attempt::Ejected
    }

    /// Hosts ejected as of the last ejection or evaluation: one atomic load.
    /// May count an ejection that has ended since, or a host since removed
    /// from the pool; [`ejected_count_at`](Self::ejected_count_at) does not.
    #[inline]
    pub fn ejected_count(&self) -> usize {
        self.ejected.load(Ordering::Relaxed)
    }

    /// Hosts of `pool` ejected at `now_ns`. Three atomic loads while no
    /// counted ejection has ended and the pool's size is unchanged; an O(n)
    /// recount (cached for the next callers) otherwise.
    ///
    /// If membership changes left every host of `pool` ejected, the recount
    /// returns the one whose ejection ends first, so calling this on the
    /// pick path (as the panic threshold does) keeps at least one host
    /// un-ejected for every pool.
    pub fn ejected_count_at<H: AsRef<HostStats>>(&self, pool: &[H], now_ns: u64) -> usize {
        if now_ns < self.next_expiry_ns.load(Ordering::Acquire)
            && self.cached_len.load(Ordering::Relaxed) == pool.len()
        {
            return self.ejected.load(Ordering::Relaxed);
        }
        match self.try_lock() {
            Some(_guard) => self.store_cache(pool, now_ns),
            None => count_ejected(pool, now_ns),
        }
    }

    /// Ejections so far for `reason` (monotonic; for metrics).
    pub fn ejections(&self, reason: EjectionReason) -> u64 {
        self.ejections[reason.index()].load(Ordering::Relaxed)
    }

    /// Ejections so far, all reasons.
    pub fn total_ejections(&self) -> u64 {
        EjectionReason::ALL.iter().map(|&r| self.ejections(r)).sum()
    }

    /// Ejection attempts refused because the pool was at its limit
    /// (a tripped consecutive rule retries on each further failure, and
    /// each retry counts).
    pub fn refused_ejections(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Hosts returned to the pool by evaluations so far.
    pub fn returned(&self) -> u64 {
        self.returned.load(Ordering::Relaxed)
    }

    /// Evaluations run so far.
    pub fn evaluations(&self) -> u64 {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// Recounts the pool's ejected hosts into the cache (under the lock).
    ///
    /// The detector never ejects a pool's last host, but removing healthy
    /// hosts can leave a pool with every host ejected; then the host whose
    /// ejection ends first is returned at once.
    pub(super) fn store_cache<H: AsRef<HostStats>>(&self, pool: &[H], now_ns: u64) -> usize {
        let mut count = 0;
        let mut expiry = u64::MAX;
        let mut first: Option<&HostStats> = None;
        for h in pool {
            let h = h.as_ref();
            let until = h.raw_ejected_until();
            if until > now_ns {
                count += 1;
                if until < expiry {
                    expiry = until;
                    first = Some(h);
                }
            }
        }
        if count > 0 && count == pool.len() {
            if let Some(h) = first {
                h.clear_ejection();
                self.returned.fetch_add(1, Ordering::Relaxed);
            }
            count -= 1;
            expiry = pool
                .iter()
                .map(|h| h.as_ref().raw_ejected_until())
                .filter(|&u| u > now_ns)
                .min()
                .unwrap_or(u64::MAX);
        }
        self.ejected.store(count, Ordering::Relaxed);
        self.cached_len.store(pool.len(), Ordering::Relaxed);
        self.next_expiry_ns.store(expiry, Ordering::Release);
        count
    }
}

pub(super) fn count_ejected<H: AsRef<HostStats>>(pool: &[H], now_ns: u64) -> usize {
    pool.iter()
        .filter(|h| h.as_ref().is_ejected(now_ns))
        .count()
}

fn rule_enforcing(cfg: &OutlierDetection, reason: EjectionReason) -> u32 {
    let p = match reason {
        EjectionReason::ConsecutiveFailures => {
            cfg.consecutive_failures.map(|r| r.enforcing_percent)
        }
        EjectionReason::ConsecutiveGatewayFailures => cfg
            .consecutive_gateway_failures
            .map(|r| r.enforcing_percent),
        EjectionReason::ConsecutiveLocalOriginFailures => cfg
            .consecutive_local_origin_failures
            .map(|r| r.enforcing_percent),
        EjectionReason::SuccessRate => cfg.success_rate.map(|r| r.gate.enforcing_percent),
        EjectionReason::FailurePercentage => {
            cfg.failure_percentage.map(|r| r.gate.enforcing_percent)
        }
        EjectionReason::Latency => cfg.latency.map(|r| r.gate.enforcing_percent),
    };
    p.unwrap_or(0)
}

fn enforced(percent: u32, r: u64) -> bool {
    percent >= 100 || below(r, 100) < u64::from(percent)
}

/// Maps a random `u64` onto `0..n` (Lemire's multiply-shift); 0 when `n` is 0.
fn below(r: u64, n: u64) -> u64 {
    ((u128::from(r) * u128::from(n)) >> 64) as u64
}

/// SplitMix64: several independent draws from the one `u64` a caller gives.
pub(super) struct Mix(pub(super) u64);

impl Mix {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
