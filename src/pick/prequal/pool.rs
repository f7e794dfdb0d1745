//! [`ProbePool`]: a balancer's recent probe answers, and the hot-cold
//! lexicographic rule that picks among them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Settings;

/// Most answers a pool may keep.
pub const MAX_POOL: usize = 64;

/// An endpoint failing at least this share of its calls is left out of the
/// pool's choice, whatever its probes say: an endpoint that answers probes
/// but fails requests (fast) must not attract traffic.
pub const MAX_FAILURE: f64 = 0.5;

/// Usable answers a pick needs to choose from the pool; with fewer it
/// falls back. A pool of one answer picks that endpoint whatever its load:
/// in the lab's `noisy-fleet`, one probe per request kept the pool at one
/// or two answers, and the p99 rose to 26 times tower's (a random picker's
/// tail); with two answers a pick is a power of two choices on the
/// servers' own counts.
pub const MIN_CANDIDATES: usize = 2;

/// One probe's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// The endpoint's id.
    pub id: u64,
    /// Its position in the balancer's endpoint set when probed (checked
    /// against `id` before use).
    pub hint: usize,
    /// Requests in flight at the server, plus the ones this balancer sent
    /// on this answer since.
    pub rif: f64,
    /// The latency the server expected for a new request, in ns; 0 when it
    /// had none yet.
    pub latency_ns: f64,
    /// When it arrived, in ns since the balancer's epoch.
    pub at_ns: u64,
    /// This balancer's own requests in flight on the endpoint then: the
    /// ones that finish later leave the answer's RIF (the server counted
    /// them, and they are gone).
    pub own: u32,
    /// Picks made on it.
    pub uses: u32,
}

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
    let weigh = |c: &Candidate, x: f64| {
        let ok = (1.0 - c.failure).max(0.01);
        x / (ok * ok)
    };
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

/// A balancer's probe answers and the probes it owes.
///
/// A [`Prequal`](super::Prequal) picker owns one; its probe driver
/// ([`crate::probe::spawn`]) fills it. The answers sit behind a `Mutex`
/// taken once per pick and once per answer, for a scan of at most
/// [`MAX_POOL`] entries; nothing in it allocates.
#[derive(Debug)]
pub struct ProbePool {
    state: Mutex<State>,
    /// Probes owed, in 1/65536 of a probe.
    owed: AtomicU64,
    /// Wakes the driver when a whole probe is owed.
    pub(crate) wake: tokio::sync::Notify,
    pub(crate) settings: Settings,
    pub(crate) stats: super::stats::ProbeStats,
}

#[derive(Debug)]
struct State {
    answers: [Answer; MAX_POOL],
    len: usize,
    /// Whether the next removal takes the oldest (else the worst).
    oldest_next: bool,
    /// The RIFs of the last [`HISTORY`] answers, a ring.
    history: [f64; HISTORY],
    seen: usize,
    /// Their quantile: RIFs above it are hot.
    threshold: f64,
}

/// Answers whose RIFs set the hot threshold: the last 64. Prequal takes the
/// quantile of the RIF distribution, not of the answers at hand: with the
/// pool alone, a client sending one request at a time found the replica it
/// had just picked hot (its probe saw that request in flight) and
/// alternated between a 1 ms and a 40 ms replica (`tests/it/prequal.rs`).
pub const HISTORY: usize = 64;

/// How often the threshold is recomputed: every 8th answer.
const RECOMPUTE: usize = 8;

/// One probe in the owed counter.
const ONE: u64 = 1 << 16;
/// Most probes the counter holds: a driver that stopped does not let it grow.
const MAX_OWED: u64 = 1024 * ONE;

impl ProbePool {
    pub(crate) fn new(settings: Settings) -> Self {
        Self {
            state: Mutex::new(State {
                answers: [Answer {
                    id: 0,
                    hint: 0,
                    rif: 0.0,
                    latency_ns: 0.0,
                    at_ns: 0,
                    own: 0,
                    uses: 0,
                }; MAX_POOL],
                len: 0,
                oldest_next: true,
                history: [0.0; HISTORY],
                seen: 0,
                threshold: 0.0,
            }),
            owed: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
            settings,
            stats: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answers kept now (oldest first), for tests and diagnostics.
    pub fn answers(&self) -> Vec<Answer> {
        let s = self.lock();
        s.answers[..s.len].to_vec()
    }

    /// A pick owes `settings.probes_per_request` probes; wakes the driver
    /// when a whole one is owed.
    #[inline]
    pub(crate) fn owe(&self) {
        let add = self.settings.owed_per_pick;
        let before = self.owed.fetch_add(add, Ordering::Relaxed);
        if before >= MAX_OWED {
            self.owed.fetch_sub(add, Ordering::Relaxed);
        } else if before < ONE && before + add >= ONE {
            self.wake.notify_one();
        }
    }

    /// Takes the whole probes owed (the fraction stays).
    pub(crate) fn take_owed(&self) -> u64 {
        let mut cur = self.owed.load(Ordering::Relaxed);
        loop {
            let whole = cur / ONE;
            match self.owed.compare_exchange_weak(
                cur,
                cur % ONE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return whole,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Keeps an answer: it replaces an older one of the same endpoint, else
    /// the oldest when the pool is full.
    pub fn insert(&self, answer: Answer) {
        let cap = self.settings.pool_size;
        let mut s = self.lock();
        if let Some(k) = s.answers[..s.len].iter().position(|a| a.id == answer.id) {
            s.remove(k);
        } else if s.len >= cap {
            s.remove(0);
        }
        let len = s.len;
        s.answers[len] = answer;
        s.len += 1;
        let at = s.seen % HISTORY;
        s.history[at] = answer.rif;
        s.seen += 1;
        if s.seen <= RECOMPUTE || s.seen.is_multiple_of(RECOMPUTE) {
            let mut h = s.history;
            let n = s.seen.min(HISTORY);
            s.threshold = quantile(&mut h[..n], self.settings.rif_quantile);
        }
    }

    /// Forgets every answer of endpoint `id` (its probe failed).
    pub fn forget(&self, id: u64) {
        let mut s = self.lock();
        while let Some(k) = s.answers[..s.len].iter().position(|a| a.id == id) {
            s.remove(k);
        }
    }

    /// One pick's use of the pool: drops answers older than the age limit,
    /// offers the others to `resolve` (which gives, for the answers usable
    /// in this pick, the endpoint's position, its failure ratio and this
    /// balancer's requests in flight on it now), applies the hot-cold rule,
    /// counts the use on the answer chosen, and removes one more answer,
    /// alternately the oldest and the worst. Returns the chosen endpoint's
    /// position in the pick's pool.
    pub(crate) fn choose(
        &self,
        now_ns: u64,
        mut resolve: impl FnMut(&Answer) -> Option<(usize, f64, u32, f64)>,
    ) -> Option<usize> {
        let st = &self.settings;
        let mut s = self.lock();
        let max_age = st.max_age_ns;
        let mut k = 0;
        while k < s.len {
            if now_ns.saturating_sub(s.answers[k].at_ns) > max_age {
                s.remove(k);
            } else {
                k += 1;
            }
        }
        let mut cands = [Candidate {
            slot: 0,
            index: 0,
            rif: 0.0,
            latency_ns: 0.0,
            failure: 0.0,
            own_ns: f64::INFINITY,
        }; MAX_POOL];
        let mut n = 0;
        for (slot, a) in s.answers[..s.len].iter().enumerate() {
            if let Some((index, failure, own, own_ns)) = resolve(a)
                && failure < MAX_FAILURE
            {
                let finished = a.own.saturating_sub(own);
                cands[n] = Candidate {
                    slot,
                    index,
                    rif: (a.rif - f64::from(finished)).max(0.0),
                    latency_ns: a.latency_ns,
                    failure,
                    own_ns,
                };
                n += 1;
            }
        }
        // One answer is no choice: a pick from it alone is a random pick.
        if n < MIN_CANDIDATES {
            return None;
        }
        let c = cands[hot_cold(&cands[..n], s.threshold)?];
        let threshold_slot = c.slot;
        let a = &mut s.answers[threshold_slot];
        a.uses += 1;
        a.rif += 1.0;
        if a.uses >= st.max_uses {
            s.remove(threshold_slot);
        }
        s.remove_one();
        Some(c.index)
    }
}

impl State {
    fn remove(&mut self, k: usize) {
        if k < self.len {
            self.answers.copy_within(k + 1..self.len, k);
            self.len -= 1;
        }
    }

    /// Removes the oldest answer and the worst in turn: the worst is the
    /// hot one with the most requests in flight, else the slowest.
    fn remove_one(&mut self) {
        if self.len == 0 {
            return;
        }
        let oldest = self.oldest_next;
        self.oldest_next = !oldest;
        if oldest {
            self.remove(0);
            return;
        }
        let threshold = self.threshold;
        let key = |a: &Answer| {
            (
                a.rif > threshold,
                if a.rif > threshold {
                    a.rif
                } else {
                    a.latency_ns
                },
            )
        };
        let worst = (0..self.len).max_by(|&x, &y| {
            let (a, b) = (key(&self.answers[x]), key(&self.answers[y]));
            a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
        });
        if let Some(w) = worst {
            self.remove(w);
        }
    }
}
