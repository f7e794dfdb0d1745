//! The search every hash picker runs after its lookup: skip unavailable
//! endpoints and, with bounded load on, endpoints above their share.

use crate::error::ConfigError;
use crate::pick::Pool;

/// The balance factor `c` suggested by Mirrokni, Thorup and Zadimoghaddam,
/// "Consistent Hashing with Bounded Loads" (2018): no endpoint carries more
/// than 125% of the mean load, while a key still moves only when its home is
/// full. (Vimeo's production deployment of the algorithm used the same
/// value.) Lower is more even but moves more keys off their home; 1 is
/// perfectly even.
pub const SUGGESTED_BOUNDED_LOAD: f64 = 1.25;

/// How many ring points or table entries the walk visits per endpoint before
/// it scans the endpoints directly: `4·n` consecutive entries meet a given
/// endpoint with probability about `1 − e⁻⁴ ≈ 98%`.
const WALK_PER_ENDPOINT: usize = 4;

/// Validates a bounded-load factor.
pub(crate) fn check(c: f64) -> Result<f64, ConfigError> {
    if c.is_finite() && c >= 1.0 {
        Ok(c)
    } else {
        Err(ConfigError::new("bounded_load", c, "a finite number >= 1"))
    }
}

/// Chooses the endpoint for a keyed request.
///
/// `walk` yields the lookup's candidates in order, the key's home first. It
/// is followed for at most `4·n` steps, then the endpoints are scanned in key
/// `order` (with `rank` its inverse) from the home on. Returns the first
/// candidate that is available and under the bound, else the first available
/// one met, else `None`. Never allocates; never panics on a table that does
/// not match the context.
pub(crate) fn place<T>(
    cx: &Pool<'_, T>,
    bound: Option<f64>,
    order: &[u32],
    rank: &[u32],
    walk: impl Iterator<Item = usize>,
) -> Option<usize> {
    let n = cx.len();
    if n == 0 {
        return None;
    }
    let mut search = Search {
        cx,
        bound,
        cap: None,
        first_available: None,
    };
    let mut home = None;
    for i in walk.take(WALK_PER_ENDPOINT.saturating_mul(n)) {
        home.get_or_insert(i);
        if search.accepts(i) {
            return Some(i);
        }
    }
    let m = order.len();
    let start = home.and_then(|h| rank.get(h)).map_or(0, |&r| r as usize);
    for k in 1..=m {
        if search.accepts(order[(start + k) % m] as usize) {
            return Some(order[(start + k) % m] as usize);
        }
    }
    search.first_available
}

/// One pick's state: the cap, computed at most once, and the first
/// available endpoint met, the answer when every endpoint is above the cap.
struct Search<'c, 'a, T> {
    cx: &'c Pool<'a, T>,
    bound: Option<f64>,
    cap: Option<usize>,
    first_available: Option<usize>,
}

impl<T> Search<'_, '_, T> {
    fn accepts(&mut self, i: usize) -> bool {
        if i >= self.cx.len() || !self.cx.is_available(i) {
            return false;
        }
        self.first_available.get_or_insert(i);
        let Some(c) = self.bound else {
            return true;
        };
        let load = self.cx.in_flight(i);
        // The cap is at least 1 (c >= 1, one request is being placed), so an
        // idle endpoint fits without summing the others' loads.
        if load == 0 {
            return true;
        }
        let cx = self.cx;
        let cap = *self.cap.get_or_insert_with(|| {
            let total: usize = (0..cx.len()).map(|j| cx.in_flight(j)).sum();
            cap(c, total, cx.len())
        });
        load < cap
    }
}

/// Mirrokni et al.'s capacity: `ceil(c · (total + 1) / n)`, counting the
/// request being placed.
fn cap(c: f64, total_in_flight: usize, n: usize) -> usize {
    (c * (total_in_flight as f64 + 1.0) / n as f64).ceil() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::testing::Fixture;

    #[test]
    fn cap_matches_the_paper() {
        assert_eq!(cap(1.0, 0, 4), 1);
        assert_eq!(cap(1.0, 3, 4), 1);
        assert_eq!(cap(1.0, 4, 4), 2);
        assert_eq!(cap(1.25, 7, 4), 3); // 1.25 · 8 / 4 = 2.5
        assert_eq!(cap(1.25, 15, 4), 5); // 1.25 · 16 / 4 = 5
    }

    #[test]
    fn check_rejects_below_one_and_non_finite() {
        for c in [0.0, 0.99, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(check(c).unwrap_err().field(), "bounded_load", "{c}");
        }
        assert_eq!(check(1.0), Ok(1.0));
    }

    #[test]
    fn busy_home_walks_on() {
        let mut f = Fixture::new(&[1.0, 1.0, 1.0]);
        let (order, rank) = ([0u32, 1, 2], [0u32, 1, 2]);
        let _g = [f.states[0].try_acquire(None), f.states[0].try_acquire(None)];
        // total 2, cap ceil(1·3/3) = 1: endpoint 0 (load 2) is skipped.
        let cx = f.cx(&());
        assert_eq!(
            place(&cx, Some(1.0), &order, &rank, [0, 0, 1].into_iter()),
            Some(1)
        );
        // The walk gives up after 4·n steps and scans in key order from home.
        assert_eq!(
            place(&cx, Some(1.0), &order, &rank, std::iter::repeat(0)),
            Some(1)
        );
        // Without a bound the home takes it.
        assert_eq!(place(&cx, None, &order, &rank, [0].into_iter()), Some(0));
        // Every endpoint at max_in_flight: none.
        f.cap = crate::admission::Cap::new(Some(1), false);
        let _h = [f.states[1].try_acquire(None), f.states[2].try_acquire(None)];
        let cx = f.cx(&());
        assert_eq!(place(&cx, Some(1.0), &order, &rank, [0].into_iter()), None);
    }

    #[test]
    fn over_the_bound_everywhere_takes_the_first_available() {
        let f = Fixture::new(&[1.0, 1.0, 1.0]);
        let (order, rank) = ([0u32, 1, 2], [0u32, 1, 2]);
        let _g = [f.states[0].try_acquire(None), f.states[0].try_acquire(None)];
        // A retry avoids 1 and 2; 0 is over its cap of 1 but the only one left.
        let avoid = [1u64, 2];
        let mut cx = f.cx(&());
        cx.terms = cx.terms.avoiding(&avoid);
        assert_eq!(
            place(&cx, Some(1.0), &order, &rank, [1, 2, 0].into_iter()),
            Some(0)
        );
    }

    #[test]
    fn out_of_range_indices_are_ignored() {
        let f = Fixture::new(&[1.0, 1.0]);
        let cx = f.cx(&());
        let order = [5u32, 1, 0];
        let rank = [2u32];
        assert_eq!(place(&cx, None, &order, &rank, [9, 7].into_iter()), Some(1));
        let empty = Fixture::new(&[]);
        assert_eq!(
            place(&empty.cx(&()), None, &order, &rank, [0].into_iter()),
            None
        );
    }
}
