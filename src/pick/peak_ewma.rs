use std::sync::Arc;
use std::time::Duration;

use super::{
    MAX_CHOICES, Pick, Picker, Pool, best_of_fraction, cost_key, key_winner, three_distinct,
};
use crate::endpoint::{EndpointState, decay};
use crate::error::{ConfigError, check_positive};

/// Default number of candidates compared per pick.
///
/// Two (classic P2C) throws information away on small or mixed pools: in the
/// lab's `steady-capacity` scenario (4 backends at 50/150/300/500 ms, 16
/// workers each) two choices keep sending work to the slow replicas, which
/// sets the mean and p99. With three weighted-random candidates — and a full
/// scan when the pool has three endpoints or fewer — the pick is still O(1) and
/// lands within a few percent of an oracle. See the lab's tables in the README.
pub const DEFAULT_CHOICES: usize = 3;

/// Default weight `k` of the spread term in `est + k·spread`: one deviation,
/// so a replica whose latency swings is charged for its worst typical case.
pub const DEFAULT_SPREAD_FACTOR: f64 = 1.0;

/// Default fade of reported utilization: 1 s. Queues change on the scale of
/// a service time; a balancer that has not heard from an endpoint for a
/// second no longer knows its queue, while its service time (the floor)
/// stays known.
pub const DEFAULT_UTILIZATION_FADE: Duration = Duration::from_secs(1);

/// Floor of the success ratio in the cost, so a dead endpoint costs a large
/// but finite multiple (10⁴×) and can still be chosen when nothing else can.
const MIN_SUCCESS: f64 = 0.01;

/// Peak-EWMA, the default picker: the lowest
/// `(est + k·spread) · (in_flight / p + 1) / (weight · (1 − f)²)` among `choices`
/// weighted-random candidates.
///
/// `est` is the endpoint's peak-EWMA latency decayed to the time of the pick
/// (so a starved endpoint looks cheaper the longer it idles and is explored
/// again), `spread` its deviation estimate, `weight` its weight after slow
/// start, `f` its recent failure ratio (a 2 s EWMA, forgiven while idle,
/// floored so that `(1 − f)² ≥ 10⁻⁴`: a dead endpoint costs 10⁴ times more,
/// and is still chosen when nothing else can be). Failures are also
/// recorded as penalty samples, so a replica failing fast loses share
/// instead of gaining it.
///
/// `p` is the endpoint's learned parallelism
/// ([`EndpointState::parallelism`](crate::endpoint::EndpointState::parallelism)).
/// Finagle's formula is the case `p = 1`: it charges a 16-worker replica for
/// in-flight requests that cost it nothing, spilling traffic onto slow
/// replicas that then set the p99. In the lab's `steady-capacity` scenario
/// (one client, four replicas of 16 workers at 50/150/300/500 ms) learning
/// `p` keeps the 500 ms replica under 1% of requests and the p99 at the
/// 300 ms replica, for a mean within a few percent of Finagle's formula with
/// the same candidates; with many independent clients, `p` settles near each
/// client's share of a replica and the two formulas converge.
/// [`learn_parallelism(false)`](Self::learn_parallelism) restores `p = 1`.
///
/// `PeakEwma::classic()` (`choices = 2`, `k = 0`, `p = 1`) is tower's and
/// Finagle's cost `est · (in_flight + 1)` over two random candidates, kept
/// for comparison, with two differences that only show when they apply: it
/// still divides by `weight · (1 − f)²` (1 for equal weights and no
/// failures; tower has neither weights nor a failure term), and a failure
/// still leaves a penalty sample in `est` (tower counts a failed call's
/// latency like any other). `tests/it/peak_ewma.rs` checks every pick of a
/// run against the classic cost.
///
/// # Server-reported utilization
///
/// With [`utilization(true)`](Self::utilization) (registry name
/// `peak_ewma_orca`), an endpoint's [load report](crate::orca) raises its
/// latency estimate to at least `floor · max(1, u · e^(−age/fade))`, where
/// `floor` is its unloaded latency and `u` the utilization it reported
/// (application, else CPU; above 1 when requests queue), `age` ago:
///
/// * load other balancers sent shows at once, before this balancer's own
///   latency samples catch up;
/// * reported load fades with [`utilization_fade`](Self::utilization_fade)
///   (default 1 s): the model trusts utilizations up to
///   [`MAX_UTILIZATION`](crate::orca::MAX_UTILIZATION) (4), so a report
///   raises an endpoint's cost for at most `fade · ln 4` (1.39 s with the
///   default) before it is back to its floor, and a stale report of a busy
///   endpoint cannot keep it out (`tests/conformance/reports.rs`);
/// * an endpoint that reported while idle keeps its floor instead of
///   decaying toward zero: its service time is known, so it is not probed
///   again until its report expires
///   ([`Builder::load_report_expiry`](crate::balance::Builder::load_report_expiry)).
///   In the lab's `orca-many-clients` this is what halves the share sent to
///   the slowest replica.
///
/// Endpoints without a report, or before their first successful call, are
/// costed as usual.
///
/// ```
/// use tower_lb::pick::PeakEwma;
/// let p = PeakEwma::default().choices(4).spread_factor(0.5);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct PeakEwma {
    choices: usize,
    spread_factor: f64,
    learn_parallelism: bool,
    utilization: bool,
    fade: Duration,
    /// `1 / fade` in ns⁻¹.
    fade_rate: f64,
}

impl Default for PeakEwma {
    fn default() -> Self {
        Self {
            choices: DEFAULT_CHOICES,
            spread_factor: DEFAULT_SPREAD_FACTOR,
            learn_parallelism: true,
            utilization: false,
            fade: DEFAULT_UTILIZATION_FADE,
            fade_rate: 1.0 / DEFAULT_UTILIZATION_FADE.as_nanos() as f64,
        }
    }
}

impl PeakEwma {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Classic two-choice peak-EWMA (tower, Finagle): `choices = 2`, no
    /// spread term, no learned parallelism. Weights and the failure term
    /// still apply; see the type's docs for exactly how it differs.
    pub fn classic() -> Self {
        Self {
            choices: 2,
            spread_factor: 0.0,
            learn_parallelism: false,
            ..Self::default()
        }
    }

    /// Whether to divide the in-flight count by the endpoint's learned
    /// parallelism (default true) or treat every endpoint as serving one
    /// request at a time (Finagle's formula).
    pub fn learn_parallelism(mut self, on: bool) -> Self {
        self.learn_parallelism = on;
        self
    }

    /// Whether endpoints' reported utilization raises their cost (default
    /// false; see [Server-reported utilization](#server-reported-utilization)).
    pub fn utilization(mut self, on: bool) -> Self {
        self.utilization = on;
        self
    }

    /// How fast reported utilization fades with the report's age: the time
    /// constant of `e^(−age/fade)`, > 0 and at most a year (checked by
    /// `Balance::build`, field `utilization_fade`). Default 1 s.
    pub fn utilization_fade(mut self, fade: Duration) -> Self {
        self.fade = fade;
        self.fade_rate = 1.0 / fade.as_nanos().max(1) as f64;
        self
    }

    /// Candidates compared per pick, `1..=16` (checked by `Balance::build`,
    /// field `choices`). Pools no larger than this are scanned in full.
    pub fn choices(mut self, n: usize) -> Self {
        self.choices = n;
        self
    }

    /// Weight of the spread term, a finite number `>= 0` (checked by
    /// `Balance::build`, field `spread_factor`).
    pub fn spread_factor(mut self, k: f64) -> Self {
        self.spread_factor = k;
        self
    }

    /// The cost of endpoint `i` at the time of the pick.
    #[inline(always)]
    pub fn cost<T>(&self, cx: &Pool<'_, T>, i: usize) -> f64 {
        let (num, den) = self.cost_fraction(cx, i);
        num / den
    }

    /// The cost as `numerator / denominator`, so picks compare candidates
    /// by cross-multiplication instead of dividing.
    #[inline(always)]
    fn cost_fraction<T>(&self, cx: &Pool<'_, T>, i: usize) -> (f64, f64) {
        let (num, den, idle) = self.cost_parts(cx, i);
        (num * idle, den)
    }

    /// The cost as `numerator / denominator · idle`, where `idle` is the
    /// latency estimate's decay to the time of the pick: the default's path
    /// divides first and multiplies by `idle` last, so that the decay and
    /// the division are computed side by side rather than one after the
    /// other (default `Balance` 140 -> 135 ns, classic 135 -> 130).
    #[inline(always)]
    fn cost_parts<T>(&self, cx: &Pool<'_, T>, i: usize) -> (f64, f64, f64) {
        let v = cx.view(i);
        let e = v.estimate_idle(cx.now_ns, cx.rates);
        let state = v.state;
        // (in_flight / p + 1) = (in_flight + p) / p.
        let p = if self.learn_parallelism {
            v.parallelism()
        } else {
            1.0
        };
        // Expected attempts to get an answer grow as 1/(1 − f); squared, so a
        // replica failing half its calls costs 4× and a dead one (f → 1)
        // is left alone until its failures are forgiven.
        let ok = (1.0 - e.failure).max(MIN_SUCCESS);
        let (mut est, mut spread, mut w) = (e.est, e.spread, e.weight);
        if self.utilization
            && let Some((u, age)) = state.utilization_at(cx.now_ns)
        {
            // +∞ before the first success: then the estimate stands.
            let floor = v.floor_ns();
            if floor.is_finite() {
                // The floor does not decay: apply the decay first.
                est = (est * w).max(floor * (u * decay(age, self.fade_rate)).max(1.0));
                spread *= w;
                w = 1.0;
            }
        }
        (
            (est + self.spread_factor * spread) * (v.in_flight() as i64 as f64 + p),
            p * v.weight_ns(cx.now_ns) * ok * ok,
            w,
        )
    }
}

impl Picker for PeakEwma {
    type Table = ();
    fn name(&self) -> &'static str {
        if self.utilization {
            "peak_ewma_orca"
        } else if self.choices == 2 && self.spread_factor == 0.0 && !self.learn_parallelism {
            "p2c_peak_ewma"
        } else {
            "peak_ewma"
        }
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}

    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CHOICES).contains(&self.choices) {
            return Err(ConfigError::new(
                "choices",
                self.choices,
                "an integer in 1..=16",
            ));
        }
        let k = self.spread_factor;
        if !(k.is_finite() && k >= 0.0) {
            return Err(ConfigError::new("spread_factor", k, "a finite number >= 0"));
        }
        check_positive("utilization_fade", self.fade)?;
        Ok(())
    }
}

impl<Req> Pick<Req> for PeakEwma {
    #[inline]
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        let n = cx.len();
        if n > self.choices && self.choices <= 3 && n < 1 << 16 && cx.is_uniform() {
            // The default's path, with the cost inlined (through a closure
            // shared with the fallbacks it would be a call per candidate).
            let candidates = three_distinct(cx, self.choices);
            let mut best = u64::MAX;
            for (slot, &i) in candidates.iter().enumerate().take(self.choices) {
                let cost = if cx.is_available(i) {
                    let (num, den, idle) = self.cost_parts(cx, i);
                    num / den * idle
                } else {
                    f64::INFINITY
                };
                best = best.min(cost_key(cost, slot));
            }
            if let Some(i) = key_winner(best, &candidates) {
                return Some(i);
            }
        }
        self.pick_otherwise(cx)
    }
}

impl PeakEwma {
    /// Every pick the default's path does not take: more candidates, a
    /// small pool, weights, or no candidate drawn available. Out of line,
    /// so the default's path keeps its registers (inlined, its loop spilled
    /// to the stack).
    #[inline(never)]
    fn pick_otherwise(&self, cx: &Pool<'_, ()>) -> Option<usize> {
        best_of_fraction(cx, self.choices, |i| self.cost_fraction(cx, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::testing::Fixture;

    #[test]
    fn bad_config_is_rejected() {
        let field = |p: PeakEwma| p.validate().unwrap_err().field();
        assert_eq!(field(PeakEwma::new().choices(0)), "choices");
        assert_eq!(field(PeakEwma::new().choices(17)), "choices");
        assert_eq!(
            field(PeakEwma::new().spread_factor(f64::NAN)),
            "spread_factor"
        );
        assert_eq!(field(PeakEwma::new().spread_factor(-1.0)), "spread_factor");
        assert!(PeakEwma::new().choices(16).validate().is_ok());
        for d in [Duration::ZERO, Duration::MAX] {
            assert_eq!(
                field(PeakEwma::new().utilization_fade(d)),
                "utilization_fade"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn reported_utilization_raises_the_cost_and_fades() {
        use crate::orca::LoadReport;
        use crate::outcome::Outcome;
        let f = Fixture::new(&[1.0, 1.0]);
        let now_ns = || f.model.nanos(tokio::time::Instant::now());
        for s in &f.states {
            s.record(&Outcome::Success, 50_000_000, now_ns(), 1, 0);
        }
        let p = PeakEwma::new().utilization(true).spread_factor(0.0);
        assert_eq!(p.name(), "peak_ewma_orca");
        let busy = LoadReport::new().with_application_utilization(4.0);
        f.states[0].record_load(&busy, now_ns());
        let cx = f.cx(&());
        // 4x the floor against the estimate of 50 ms.
        assert!((p.cost(&cx, 0) / p.cost(&cx, 1) - 4.0).abs() < 1e-6);
        assert_eq!(PeakEwma::new().cost(&cx, 0), PeakEwma::new().cost(&cx, 1));
        assert_eq!(f.counts(&p, 100), [0, 100]);
        // Faded after 10 fade times: the floor is left (50 ms), while the
        // other endpoint's estimate decays with the 10 s latency τ.
        tokio::time::advance(DEFAULT_UTILIZATION_FADE * 10).await;
        let cx = f.cx(&());
        assert!((p.cost(&cx, 0) - 50e6).abs() < 1.0, "{}", p.cost(&cx, 0));
        assert!((p.cost(&cx, 1) - 50e6 * (-1.0f64).exp()).abs() < 1e3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_reporter_keeps_its_floor_until_the_report_expires() {
        use crate::orca::{DEFAULT_REPORT_EXPIRY, LoadReport};
        use crate::outcome::Outcome;
        let f = Fixture::new(&[1.0]);
        let s = &f.states[0];
        s.record(&Outcome::Success, 300_000_000, 0, 1, 0);
        s.record_load(&LoadReport::new().with_cpu_utilization(0.1), 0);
        let p = PeakEwma::new().utilization(true).spread_factor(0.0);
        // 30 s idle: the estimate has decayed to 5% of 300 ms; the cost stays at the floor.
        tokio::time::advance(Duration::from_secs(30)).await;
        let cx = f.cx(&());
        assert!((p.cost(&cx, 0) - 300e6).abs() < 1.0, "{}", p.cost(&cx, 0));
        assert!(PeakEwma::new().spread_factor(0.0).cost(&cx, 0) < 20e6);
        tokio::time::advance(DEFAULT_REPORT_EXPIRY).await;
        let cx = f.cx(&());
        assert!(p.cost(&cx, 0) < 1e6, "expired: {}", p.cost(&cx, 0));
    }

    #[test]
    fn weights_dominate_between_identical_endpoints() {
        let f = Fixture::new(&[0.99, 0.005, 0.005]);
        let counts = f.counts(&PeakEwma::new(), 10_000);
        assert!(counts[0] >= 9_500, "{counts:?}");
    }
}
