//! [`Prequal`]: the probing picker, its pool of probe answers, and the
//! counts of what its probes did. The probes themselves are sent by
//! [`probe::spawn`](crate::probe::spawn)'s driver.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Pick, Picker, Pool};
use crate::error::{ConfigError, check_positive};
use crate::model::EndpointState;
use crate::pick::PeakEwma;
use pool::Choice;

mod failing;
mod pool;
mod rule;
mod stats;
#[cfg(test)]
mod tests;

pub use pool::{Answer, HISTORY, MAX_FAILURE, MAX_POOL, MIN_CANDIDATES, ProbePool};
pub use rule::{
    COLD_SLOWDOWN, Candidate, FAST_QUANTILE, OWN_VETO, SLOW_ANSWER, hot_cold, is_slow, quantile,
};
pub use stats::{ProbeCounts, ProbeStats};

/// Default probes sent per request: 3, the paper's setting. In the lab's
/// `noisy-fleet` (sim, 0.9 load, seeds 1–3), p99 over tower's p2c: 1 probe
/// 0.46 (the pool is too thin to choose from and falls back), 2 probes
/// 0.42, 3 probes 0.36, 4 probes 0.35 for a third more probes
/// (`docs/tails.md` has the command).
pub const DEFAULT_PROBES_PER_REQUEST: f64 = 3.0;
/// Default quantile of the answers' RIFs above which an endpoint is hot:
/// 0.6. Measured in the lab (sim, 0.9 load, seeds 1–3), p99 over tower's
/// p2c on `noisy-fleet` / `steady-fleet`: 0.5 → 0.37 / 0.79, 0.6 → 0.36 /
/// 0.77, 0.7 → 0.37 / 0.77, 0.84 → 0.37 / 0.78.
pub const DEFAULT_RIF_QUANTILE: f64 = 0.6;
/// Default number of answers kept: 16, the paper's pool (8 and 32 measured
/// the same).
pub const DEFAULT_POOL_SIZE: usize = 16;
/// Default age past which an answer is dropped: 1 s.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(1);
/// Default picks per answer: 1, the paper's. Each use is counted into the
/// answer's RIF; before the own-model veto ([`OWN_VETO`]) three uses per
/// answer took the lab's `noisy-fleet` p99 from 0.41 to 0.58 of tower's,
/// and with it they keep the p99 (0.36) but raise the mean (0.57 against
/// 0.52 of tower's; sim, seeds 1–3).
pub const DEFAULT_MAX_USES: u32 = 1;
/// Endpoints the default fallback ([`PeakEwma`]) draws per pick: 8, where
/// `PeakEwma` alone draws 3. The fallback also takes the picks whose pool
/// offers only slow answers ([`is_slow`]); in a fleet of two speeds three
/// draws miss every fast replica often enough to set the tail, and eight
/// seldom do. It costs a little more only on the picks that fall back.
pub const FALLBACK_CHOICES: usize = 8;
/// Default time a probe may take before it counts as failed: 500 ms.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Default probes in flight at once, per balancer: 64.
pub const DEFAULT_MAX_PROBES_IN_FLIGHT: usize = 64;
/// Default probes per second, per balancer: 20,000.
pub const DEFAULT_MAX_PROBES_PER_SECOND: f64 = 20_000.0;

/// Probing to reduce queueing and latency (Prequal, NSDI '24): each request
/// has a few random endpoints probed for their requests in flight (RIF) and
/// the latency they expect, and picks among the fresh answers by the
/// hot-cold lexicographic rule: among the endpoints whose RIF is at most
/// the [`rif_quantile`](Self::rif_quantile) of the RIFs of the last
/// [`HISTORY`] answers, the one expecting the lowest latency; when all are
/// hot, the lowest RIF. A pick needs at least [`MIN_CANDIDATES`] usable
/// answers.
///
/// Independent client balancers each see only their own calls; the probes
/// ask the replicas, which count everyone's ([`crate::server::ServerLoad`]
/// answers them). The probes go through each endpoint's own service,
/// asynchronously, from a driver task started with
/// [`probe::spawn`](crate::probe::spawn): a request never waits for one.
/// Without answers (no driver, a cold start, every answer used or too old),
/// or when the rule's choice is slow beside what the recent answers show
/// the fleet can do ([`is_slow`]), the pick falls back to `P` (default
/// [`PeakEwma`] drawing [`FALLBACK_CHOICES`]).
///
/// * A pick owes [`probes_per_request`](Self::probes_per_request) probes
///   (fractions accumulate), sent to distinct random endpoints; the driver
///   bounds them in flight and per second
///   ([`max_probes_in_flight`](Self::max_probes_in_flight),
///   [`max_probes_per_second`](Self::max_probes_per_second)) and counts
///   what it drops ([`ProbeCounts`]).
/// * The pool keeps [`pool_size`](Self::pool_size) answers, none older than
///   [`max_age`](Self::max_age); a new answer replaces an older one of the
///   same endpoint, else the oldest. Each pick uses one answer (counting
///   its request into that answer's RIF, and removing it after
///   [`max_uses`](Self::max_uses)) and removes one more, alternately the
///   oldest and the worst (the hottest, else the slowest).
/// * A probe that fails or times out forgets the endpoint's answers: it is
///   not picked from the pool until it answers again. The [health
///   owner](crate::health) still decides who may take traffic (breakers,
///   ejection, checks), and an endpoint failing at least [`MAX_FAILURE`] of
///   this balancer's calls is not picked from the pool whatever its probes
///   say (a replica that answers probes but fails requests must not
///   attract traffic); below that, its latency and RIF are weighed by
///   `1 / (1 − f)²`, as [`PeakEwma`] weighs its cost.
///
/// A clone has a pool of its own (the pool belongs to one balancer).
///
/// ```
/// use tower_lb::pick::Prequal;
/// let p = Prequal::new().probes_per_request(2.0).rif_quantile(0.6);
/// ```
pub struct Prequal<P = PeakEwma> {
    fallback: P,
    settings: Settings,
    pool: Arc<ProbePool>,
}

/// The settings the pool and the driver read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) probes_per_request: f64,
    /// `probes_per_request` in 1/65536 of a probe.
    pub(crate) owed_per_pick: u64,
    pub(crate) rif_quantile: f64,
    pub(crate) pool_size: usize,
    pub(crate) max_age: Duration,
    pub(crate) max_age_ns: u64,
    pub(crate) max_uses: u32,
    pub(crate) probe_timeout: Duration,
    pub(crate) max_in_flight: usize,
    pub(crate) max_per_second: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            probes_per_request: DEFAULT_PROBES_PER_REQUEST,
            owed_per_pick: owed(DEFAULT_PROBES_PER_REQUEST),
            rif_quantile: DEFAULT_RIF_QUANTILE,
            pool_size: DEFAULT_POOL_SIZE,
            max_age: DEFAULT_MAX_AGE,
            max_age_ns: crate::time::nanos(DEFAULT_MAX_AGE),
            max_uses: DEFAULT_MAX_USES,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            max_in_flight: DEFAULT_MAX_PROBES_IN_FLIGHT,
            max_per_second: DEFAULT_MAX_PROBES_PER_SECOND,
        }
    }
}

fn owed(per_request: f64) -> u64 {
    if per_request.is_finite() && per_request > 0.0 {
        (per_request.min(16.0) * 65536.0) as u64
    } else {
        0
    }
}

impl<P: std::fmt::Debug> std::fmt::Debug for Prequal<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prequal")
            .field("fallback", &self.fallback)
            .field("settings", &self.settings)
            .finish()
    }
}

impl<P: Clone> Clone for Prequal<P> {
    fn clone(&self) -> Self {
        Self {
            fallback: self.fallback.clone(),
            settings: self.settings,
            pool: Arc::new(ProbePool::new(self.settings)),
        }
    }
}

impl Default for Prequal {
    fn default() -> Self {
        Self::with_fallback(PeakEwma::default().choices(FALLBACK_CHOICES))
    }
}

impl Prequal {
    /// The default configuration, falling back to [`PeakEwma`].
    pub fn new() -> Self {
        Self::default()
    }
}

impl<P> Prequal<P> {
    /// Falls back to `fallback` when the pool has no usable answer, or only
    /// slow ones ([`is_slow`]).
    pub fn with_fallback(fallback: P) -> Self {
        let settings = Settings::default();
        Self {
            fallback,
            settings,
            pool: Arc::new(ProbePool::new(settings)),
        }
    }

    fn set(mut self, f: impl FnOnce(&mut Settings)) -> Self {
        f(&mut self.settings);
        self.settings.owed_per_pick = owed(self.settings.probes_per_request);
        self.settings.max_age_ns = crate::time::nanos(self.settings.max_age);
        self.pool = Arc::new(ProbePool::new(self.settings));
        self
    }

    /// Probes owed per request, in `(0, 16]`; fractions accumulate (0.5:
    /// one probe every other request). Default
    /// [`DEFAULT_PROBES_PER_REQUEST`].
    pub fn probes_per_request(self, n: f64) -> Self {
        self.set(|s| s.probes_per_request = n)
    }

    /// The quantile of the answers' RIFs above which an endpoint is hot,
    /// in `[0, 1]`. Default [`DEFAULT_RIF_QUANTILE`].
    pub fn rif_quantile(self, q: f64) -> Self {
        self.set(|s| s.rif_quantile = q)
    }

    /// Answers kept, `1..=`[`MAX_POOL`]. Default [`DEFAULT_POOL_SIZE`].
    pub fn pool_size(self, n: usize) -> Self {
        self.set(|s| s.pool_size = n)
    }

    /// Age past which an answer is dropped (> 0, at most a year). Default
    /// [`DEFAULT_MAX_AGE`].
    pub fn max_age(self, age: Duration) -> Self {
        self.set(|s| s.max_age = age)
    }

    /// Picks per answer, `>= 1`. Default [`DEFAULT_MAX_USES`].
    pub fn max_uses(self, n: u32) -> Self {
        self.set(|s| s.max_uses = n)
    }

    /// Time a probe may take before it counts as failed (> 0, at most a
    /// year). Default [`DEFAULT_PROBE_TIMEOUT`].
    pub fn probe_timeout(self, d: Duration) -> Self {
        self.set(|s| s.probe_timeout = d)
    }

    /// Probes in flight at once, `>= 1`. Default
    /// [`DEFAULT_MAX_PROBES_IN_FLIGHT`].
    pub fn max_probes_in_flight(self, n: usize) -> Self {
        self.set(|s| s.max_in_flight = n)
    }

    /// Probes sent per second, finite and `> 0`. Default
    /// [`DEFAULT_MAX_PROBES_PER_SECOND`].
    pub fn max_probes_per_second(self, n: f64) -> Self {
        self.set(|s| s.max_per_second = n)
    }

    /// The pool of answers, which the probe driver fills.
    pub fn pool(&self) -> &Arc<ProbePool> {
        &self.pool
    }

    /// What the probes and the picks from the pool did so far.
    pub fn counts(&self) -> ProbeCounts {
        self.pool.stats.counts()
    }
}

/// [`Prequal`]'s table: the fallback's, and the endpoints' positions by id.
#[derive(Debug)]
pub struct PrequalTable<T> {
    inner: T,
    positions: HashMap<u64, usize>,
}

impl<P: Picker> Picker for Prequal<P> {
    type Table = PrequalTable<P::Table>;

    fn name(&self) -> &'static str {
        "prequal"
    }

    fn table(&self, endpoints: &[Arc<EndpointState>]) -> Self::Table {
        PrequalTable {
            inner: self.fallback.table(endpoints),
            positions: endpoints
                .iter()
                .enumerate()
                .map(|(i, s)| (s.id(), i))
                .collect(),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.fallback.validate()?;
        let s = &self.settings;
        if !(s.probes_per_request > 0.0 && s.probes_per_request <= 16.0) {
            return Err(ConfigError::new(
                "probes_per_request",
                s.probes_per_request,
                "a number in (0, 16]",
            ));
        }
        if !(0.0..=1.0).contains(&s.rif_quantile) {
            return Err(ConfigError::new(
                "rif_quantile",
                s.rif_quantile,
                "a number in [0, 1]",
            ));
        }
        if !(1..=MAX_POOL).contains(&s.pool_size) {
            return Err(ConfigError::new(
                "pool_size",
                s.pool_size,
                "an integer in 1..=64",
            ));
        }
        check_positive("max_age", s.max_age)?;
        check_positive("probe_timeout", s.probe_timeout)?;
        if s.max_uses == 0 {
            return Err(ConfigError::new("max_uses", 0, "an integer >= 1"));
        }
        if s.max_in_flight == 0 {
            return Err(ConfigError::new(
                "max_probes_in_flight",
                0,
                "an integer >= 1",
            ));
        }
        if !(s.max_per_second.is_finite() && s.max_per_second > 0.0) {
            return Err(ConfigError::new(
                "max_probes_per_second",
                s.max_per_second,
                "a finite number > 0",
            ));
        }
        Ok(())
    }

    fn probe_pool(&self) -> Option<&Arc<ProbePool>> {
        Some(&self.pool)
    }
}

impl<Req, P: Pick<Req>> Pick<Req> for Prequal<P> {
    fn pick(&self, req: &Req, cx: &Pool<'_, Self::Table>) -> Option<usize> {
        self.pool.owe();
        let table = cx.table();
        let chosen = self.pool.choose_or_slow(cx.now_ns, |a| {
            let i = if a.hint < cx.len() && cx.endpoint(a.hint).id() == a.id {
                a.hint
            } else {
                *table.positions.get(&a.id)?
            };
            // Every thread's calls, as the driver counted them.
            let state = cx.endpoint(i);
            let own = u32::try_from(state.in_flight()).unwrap_or(u32::MAX);
            let e = cx.estimate(i);
            // Nothing known before its first answer here (the estimate is
            // the default RTT, a prior): no veto.
            let own_ns = if state.floor_latency().is_some() {
                (e.mean_ns + e.spread_ns) * (f64::from(own) / state.parallelism() + 1.0)
            } else {
                f64::INFINITY
            };
            cx.is_available(i)
                .then_some((i, e.failure_rate, own, own_ns))
        });
        let stats = &self.pool.stats;
        let slow = match chosen {
            Choice::Pick(i) => {
                ProbeStats::add(&stats.pooled);
                return Some(i);
            }
            Choice::Slow(i) => Some(i),
            Choice::None => None,
        };
        ProbeStats::add(&stats.fallback);
        let picked = self.fallback.pick(req, &cx.with_table(&table.inner));
        // The fallback's own model tries a failed endpoint again after a
        // while, by design; over a slow choice, not one whose server still
        // says it fails.
        match (picked, slow) {
            (Some(j), Some(i)) if self.pool.server_fails(cx.endpoint(j).id(), cx.now_ns) => Some(i),
            _ => picked,
        }
    }

    fn affinity(&self, req: &Req) -> Option<u64> {
        self.fallback.affinity(req)
    }
}
