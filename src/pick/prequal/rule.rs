//! The rules that choose among a pool's answers: the hot-cold rule and
//! its guards, and the check of its choice against the fast latency.

/// What the pool knows of a candidate when it chooses.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    /// The answer's position in the pool.
    pub slot: usize,
    /// Its endpoint's position in the pick's pool.
    pub index: usize,
    /// Requests in flight, as answered (and counted on since).
    pub rif: f64,
    /// The expected latency, ns.
    pub latency_ns: f64,
    /// The endpoint's recent failure ratio on this balancer.
    pub failure: f64,
    /// What this balancer's own model expects of it, ns (`+∞` for
    /// nothing known): its latency estimate times its requests in flight
    /// over its parallelism, plus one.
    pub own_ns: f64,
}

/// The `q` quantile of `values` (the lower of two neighbours), `0.0` for
/// none. Sorts `values`.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_unstable_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q.clamp(0.0, 1.0)) as usize]
}

/// A cold candidate expected to take more than this many times the
/// latency of the hot one the rule would take instead is passed over: it
/// is not spare capacity but a slow replica (a grey failure that no
/// health check sees, or the slow class of a mixed fleet), cold only
/// because everyone avoids it.
pub const COLD_SLOWDOWN: f64 = 4.0;

/// A candidate this balancer's own model expects to take more than this
/// many times the best candidate's is passed over, whatever its answer
/// says: see [`hot_cold`].
pub const OWN_VETO: f64 = 2.0;

/// The hot-cold lexicographic rule (Prequal): among candidates whose RIF is
/// at most `threshold` ("cold"), the lowest expected latency; when none is
/// cold, the lowest RIF. Both are weighed by `1 / (1 − f)²` for an endpoint
/// failing a share `f` of its calls (as `PeakEwma` weighs its cost). Ties
/// go to the earlier candidate (the older answer). `None` for no candidate.
///
/// Two guards are ours, not the paper's. First, a candidate this
/// balancer's own model (its latency estimate, in-flight calls and
/// parallelism, [`Candidate::own_ns`]) expects to take more than
/// [`OWN_VETO`] times the best candidate's is passed over: a probe's
/// answer tells the replica's queue, but the replica's speed lags in it
/// (the median of its recent latencies at that queue), while this
/// balancer's own estimate takes a slowdown at its first slow answer. With
/// one client over 8 replicas that slow down every 2 s (the lab's family)
/// the probes alone made the p99 1.09 times tower's p2c; with the veto it
/// is no worse, and it fell on every other fleet measured. Second, the
/// fastest cold candidate is
/// passed over for the least loaded hot one when it is expected to take
/// more than `COLD_SLOWDOWN` times as long. With one replica ten times
/// slower than the rest (10 replicas, 5 clients, 0.8 load; the lab's
/// family) the rule as published chose the slow replica whenever every
/// fast answer in the pool was hot, and its p99 was 1.36 times tower's
/// p2c.
pub fn hot_cold(candidates: &[Candidate], threshold: f64) -> Option<usize> {
    // What this balancer saw itself vetoes: a candidate its own model
    // expects to take more than `OWN_VETO` times the best one's.
    let best_own = candidates
        .iter()
        .map(|c| c.own_ns)
        .fold(f64::INFINITY, f64::min);
    let allowed = |c: &Candidate| !(c.own_ns.is_finite() && c.own_ns > OWN_VETO * best_own);
    let by = |key: fn(&Candidate) -> f64| {
        move |a: &(usize, &Candidate), b: &(usize, &Candidate)| {
            weigh(a.1, key(a.1)).total_cmp(&weigh(b.1, key(b.1)))
        }
    };
    let all = || candidates.iter().enumerate().filter(|(_, c)| allowed(c));
    let cold = all()
        .filter(|(_, c)| c.rif <= threshold)
        .min_by(by(|c| c.latency_ns));
    let hot = all()
        .filter(|(_, c)| c.rif > threshold)
        .min_by(by(|c| c.rif));
    let chosen = match (cold, hot) {
        (Some(c), Some(h))
            if weigh(c.1, c.1.latency_ns) > COLD_SLOWDOWN * weigh(h.1, h.1.latency_ns) =>
        {
            Some(h)
        }
        (Some(c), _) => Some(c),
        (None, h) => h,
    };
    chosen.map(|(k, _)| k)
}

/// An answer's figure `x` (its latency or RIF) weighed by `1 / (1 − f)²`
/// for an endpoint failing a share `f` of its calls, as `PeakEwma` weighs
/// its cost.
pub(crate) fn weigh(c: &Candidate, x: f64) -> f64 {
    let ok = (1.0 - c.failure).max(0.01);
    x / (ok * ok)
}

/// Quantile of the recent answers' latencies taken as the fast latency,
/// what a fast endpoint answers now: 0.25, below the share of the fast
/// class in any mixed fleet the lab draws (at least half its replicas),
/// and above the share of a replica that fails fast (whose 1 ms answers
/// are not speed).
pub const FAST_QUANTILE: f64 = 0.25;

/// The hot-cold rule's choice is dropped, and the pick falls back, when
/// its expected latency (weighed by its failures) is more than this many
/// times the fast latency ([`FAST_QUANTILE`]): see [`is_slow`].
pub const SLOW_ANSWER: f64 = 2.5;

/// Whether the hot-cold rule's choice `c` is slow beside the fast latency
/// `fast_ns` (0 for none known yet): its latency, weighed by its
/// failures, more than [`SLOW_ANSWER`] times `fast_ns`.
///
/// The rule chooses among the answers at hand, and each pick spends the
/// best of them: in a fleet of two speeds, the fast replicas' answers are
/// used up as they come, the slow replicas' stay, and a pool left with
/// only slow answers sends the pick to a slow replica although fast ones
/// have room. Against the latencies the last answers gave (what the fleet
/// can do now), such a choice is no choice; the fallback then costs every
/// endpoint it draws on this balancer's own model, which knows the slow
/// class from its own calls. The bound leaves the queueing of a loaded
/// fast replica (its answers rise with its queue) to the hot-cold rule.
pub fn is_slow(c: &Candidate, fast_ns: f64) -> bool {
    fast_ns > 0.0 && weigh(c, c.latency_ns) > SLOW_ANSWER * fast_ns
}
