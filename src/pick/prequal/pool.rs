//! [`ProbePool`]: a balancer's recent probe answers, what they say of the
//! fleet (the hot threshold, the fast latency), and one pick's use of them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Settings;
use super::failing::Failing;
use super::rule::{Candidate, FAST_QUANTILE, hot_cold, is_slow, quantile};

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
    /// The share of its answers over its last second that the server
    /// counted failed (its report's `eps` over `rps_fractional`); `None`
    /// when it said nothing (no calls in that second, or no such figures).
    /// The pool weighs the larger of this and the balancer's own failure
    /// ratio: a replica that fails every call fast answers probes idle and
    /// fast, and without the server's word every client balancer would
    /// learn it from calls of its own, again after each of its model's
    /// failure probes. An answer with no word, after one that said the
    /// server fails, keeps it failing for a while (the pool's hold, 0.5 to
    /// 2.5 s, spread per endpoint so that clients try it again one at a
    /// time).
    pub failure: Option<f64>,
}

/// What one pick's use of the pool gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The endpoint at this position in the pick's pool.
    Pick(usize),
    /// The rule's choice, dropped as slow ([`is_slow`]).
    Slow(usize),
    /// No choice: too few usable answers.
    None,
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
    /// The RIFs of the last answers; their quantile is the hot threshold.
    rifs: History,
    /// The latencies of the last answers that gave one; their
    /// [`FAST_QUANTILE`] is the fast latency.
    latencies: History,
    /// The endpoints whose servers said they fail.
    failing: Failing,
}

/// The last [`HISTORY`] values of a kind, a ring, and their quantile,
/// recomputed every [`RECOMPUTE`]th value.
#[derive(Debug)]
struct History {
    values: [f64; HISTORY],
    seen: usize,
    value: f64,
}

impl History {
    const EMPTY: Self = Self {
        values: [0.0; HISTORY],
        seen: 0,
        value: 0.0,
    };

    fn push(&mut self, x: f64, q: f64) {
        self.values[self.seen % HISTORY] = x;
        self.seen += 1;
        if self.seen <= RECOMPUTE || self.seen.is_multiple_of(RECOMPUTE) {
            let mut h = self.values;
            self.value = quantile(&mut h[..self.seen.min(HISTORY)], q);
        }
    }
}

/// Answers whose RIFs set the hot threshold: the last 64. Prequal takes the
/// quantile of the RIF distribution, not of the answers at hand: with the
/// pool alone, a client sending one request at a time found the replica it
/// had just picked hot (its probe saw that request in flight) and
/// alternated between a 1 ms and a 40 ms replica (`tests/it/prequal.rs`).
pub const HISTORY: usize = 64;

/// Latencies the pool needs before it knows the fast latency: half the
/// history (with fewer, a single fast answer sets it).
const FAST_AFTER: usize = HISTORY / 2;

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
                    failure: None,
                }; MAX_POOL],
                len: 0,
                oldest_next: true,
                rifs: History::EMPTY,
                latencies: History::EMPTY,
                failing: Failing::EMPTY,
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
    pub fn insert(&self, mut answer: Answer) {
        let cap = self.settings.pool_size;
        let mut s = self.lock();
        let (id, at) = (answer.id, answer.at_ns);
        answer.failure = Some(s.failing.take(id, at, answer.failure, MAX_FAILURE));
        if let Some(k) = s.answers[..s.len].iter().position(|a| a.id == answer.id) {
            s.remove(k);
        } else if s.len >= cap {
            s.remove(0);
        }
        let len = s.len;
        s.answers[len] = answer;
        s.len += 1;
        s.rifs.push(answer.rif, self.settings.rif_quantile);
        // No latency yet (0) says nothing of speed, and a server that fails
        // its calls fast is not fast: its answers are weighed as a pick
        // weighs them, and one failing past the bound's are left out.
        let failure = answer.failure.unwrap_or(0.0);
        if answer.latency_ns > 0.0 && failure < MAX_FAILURE {
            let ok = 1.0 - failure;
            s.latencies
                .push(answer.latency_ns / (ok * ok), FAST_QUANTILE);
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
    #[cfg(test)]
    pub(crate) fn choose(
        &self,
        now_ns: u64,
        resolve: impl FnMut(&Answer) -> Option<(usize, f64, u32, f64)>,
    ) -> Option<usize> {
        match self.choose_or_slow(now_ns, resolve) {
            Choice::Pick(i) => Some(i),
            Choice::Slow(_) | Choice::None => None,
        }
    }

    /// [`choose`](Self::choose), telling apart a choice dropped as slow
    /// ([`is_slow`]: its position, its answer not spent) from no choice.
    pub(crate) fn choose_or_slow(
        &self,
        now_ns: u64,
        mut resolve: impl FnMut(&Answer) -> Option<(usize, f64, u32, f64)>,
    ) -> Choice {
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
            if let Some((index, own_failure, own, own_ns)) = resolve(a)
                && let failure = own_failure.max(a.failure.unwrap_or(0.0))
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
            return Choice::None;
        }
        let Some(k) = hot_cold(&cands[..n], s.rifs.value) else {
            return Choice::None;
        };
        let c = cands[k];
        let fast_ns = if s.latencies.seen >= FAST_AFTER {
            s.latencies.value
        } else {
            0.0
        };
        if is_slow(&c, fast_ns) {
            return Choice::Slow(c.index);
        }
        let threshold_slot = c.slot;
        let a = &mut s.answers[threshold_slot];
        a.uses += 1;
        a.rif += 1.0;
        if a.uses >= st.max_uses {
            s.remove(threshold_slot);
        }
        s.remove_one();
        Choice::Pick(c.index)
    }

    /// Whether endpoint `id`'s server said it fails, within the hold
    /// ([`Failing`]) at `now_ns`.
    pub(crate) fn server_fails(&self, id: u64, now_ns: u64) -> bool {
        self.lock().failing.holds(id, now_ns)
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
        let threshold = self.rifs.value;
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
