//! [`Failing`]: the endpoints whose servers said they fail, remembered
//! through the quiet that follows.

/// Endpoints remembered at once; a ninth replaces the one held longest ago.
const SLOTS: usize = 8;

/// The shortest hold after a server last said it fails: half a second.
pub(crate) const HOLD_MIN_NS: u64 = 500_000_000;
/// Holds are spread over this much more, by endpoint and time: two
/// seconds.
pub(crate) const HOLD_SPREAD_NS: u64 = 2_000_000_000;

/// What a pool remembers of endpoints that fail.
///
/// A server counts its failures over its last second; once every client
/// avoids it, its count empties and its probes answer idle and fast (a
/// replica that fails at once looks the fastest), and every client would
/// take it again at that same moment, each paying a failed call. So an
/// endpoint whose server said it fails stays failing, for this pool,
/// through answers that say nothing (no calls in that second) until a
/// hold runs out, or until an answer says it serves again. The hold is
/// spread (by a hash of the endpoint and the time), so that the clients
/// of one fleet try it again one at a time: the first to try fails (once)
/// and its failure shows in every other client's next probe.
#[derive(Debug)]
pub(crate) struct Failing {
    /// Endpoint ids and the time (ns) their hold ends; 0: empty.
    held: [(u64, u64); SLOTS],
}

impl Failing {
    pub(crate) const EMPTY: Self = Self {
        held: [(0, 0); SLOTS],
    };

    /// Takes an answer's word on endpoint `id` at `at_ns`: its server's
    /// failure share (`None`: no word), and gives the share the pool
    /// keeps for it: the word itself, or 1 for no word within a hold.
    pub(crate) fn take(&mut self, id: u64, at_ns: u64, failure: Option<f64>, max: f64) -> f64 {
        let k = self.held.iter().position(|&(i, u)| i == id && u != 0);
        match (failure, k) {
            (Some(f), _) if f >= max => {
                let until = at_ns.saturating_add(hold_ns(id, at_ns)).max(1);
                let slot = k.unwrap_or_else(|| self.oldest());
                self.held[slot] = (id, until);
                f
            }
            (Some(f), k) => {
                if let Some(k) = k {
                    self.held[k] = (0, 0);
                }
                f
            }
            (None, Some(k)) if at_ns < self.held[k].1 => 1.0,
            (None, _) => 0.0,
        }
    }

    /// Whether endpoint `id` is held failing at `now_ns`.
    pub(crate) fn holds(&self, id: u64, now_ns: u64) -> bool {
        self.held.iter().any(|&(i, u)| i == id && now_ns < u)
    }

    fn oldest(&self) -> usize {
        (0..SLOTS).min_by_key(|&k| self.held[k].1).unwrap_or(0)
    }
}

/// The hold for endpoint `id` from `at_ns`: between [`HOLD_MIN_NS`] and
/// that plus [`HOLD_SPREAD_NS`], by a hash of both (splitmix64's finish).
pub(crate) fn hold_ns(id: u64, at_ns: u64) -> u64 {
    let mut z = id ^ at_ns.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    HOLD_MIN_NS + z % HOLD_SPREAD_NS
}
