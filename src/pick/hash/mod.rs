//! Hash pickers: the same request key goes to the same endpoint, in every
//! process.
//!
//! | picker | lookup | on a membership change |
//! |---|---|---|
//! | [`KeyHash`] | `hash mod n` over the endpoints in key order | almost every key moves (`n/(n+1)` of them when one joins) |
//! | [`RingHash`] | ketama-style ring, [`DEFAULT_VNODES`] points per weight unit, binary search | only the keys of the joining / leaving endpoint move |
//! | [`Maglev`] | prime-sized lookup table ([`DEFAULT_TABLE_SIZE`]), one index | close to minimal; O(1) lookup, better balance than a ring |
//!
//! All three are one picker, [`Hashed`], over a [`Lookup`] (pingora's
//! `Weighted<Algorithm>` shape): the key, the fallback, bounded load and the
//! walk past skipped endpoints are written once. Each reads the request's
//! key through a [`RequestKey`](super::key::RequestKey) (a header, the
//! client IP, the path, a closure). Requests without a key go to the
//! fallback picker (default [`PeakEwma`](super::PeakEwma)).
//!
//! # Skipping: availability and bounded load
//!
//! An endpoint that is not [available](super::Pool::is_available) (at its
//! in-flight cap, or already tried by a retry) is skipped, and so, with
//! [`bounded_load(c)`](Hashed::bounded_load), is an endpoint whose in-flight
//! count would exceed `ceil(c · (total_in_flight + 1) / n)` — consistent
//! hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, 2018), which
//! keeps one hot key from sinking one replica. The paper suggests
//! `c = 1.25` ([`SUGGESTED_BOUNDED_LOAD`]): no endpoint above 125% of the mean.
//!
//! When the first candidate is skipped the search walks on: the next ring
//! point, the next table entry, the next endpoint in key order. The walk
//! visits at most `4·n` ring points or table entries (enough to meet about
//! 98% of the endpoints), then scans the endpoints in key order from the
//! first candidate on; if none is under the bound it returns the first
//! available endpoint it met (the bound spreads load, it is not admission
//! control: `max_in_flight` is), and `None` only when none is available. A
//! pick whose first candidate is idle costs O(1) (KeyHash, Maglev) or
//! O(log points) (ring); the bound reads every endpoint's in-flight count
//! (O(n), once per pick) only when a candidate is busy. Picks never allocate.
//!
//! The bound is checked at pick time: concurrent picks on other threads can
//! each see the same count, so under contention an endpoint can pass its cap
//! by the number of racing picks.
//!
//! # The hash, exactly
//!
//! Everything is XXH64 with seed 0, fixed across processes and releases
//! (golden tests pin it):
//!
//! * **Request point:** `p = XXH64(key.to_le_bytes())`, `key` being the
//!   [`RequestKey`](super::key::RequestKey)'s `u64`.
//! * **Endpoint hash:** [`EndpointState::key_hash`], XXH64 over the endpoint
//!   key's `Hash` output (for a `&str`/`String` key: its UTF-8 bytes, then a
//!   `0xFF` byte). Prefer string keys (`"10.0.0.1:8080"`) when processes on
//!   different architectures must agree: integers and `SocketAddr` feed
//!   `Hash` native-endian, `usize`-sized bytes.
//! * **Key order:** endpoints sorted by endpoint hash. It, not the order of
//!   insertion, is what every lookup depends on, so processes that learned
//!   the endpoints in a different order agree.
//! * **[`KeyHash`]:** the endpoint at position `p mod n` of the key order.
//! * **[`RingHash`]:** endpoint `e` with weight `w` owns
//!   `max(1, round(vnodes · w))` points (scaled down together if the ring
//!   would exceed [`MAX_RING_POINTS`]); point `r` sits at
//!   `XXH64(key_hash(e).to_le_bytes() ‖ (r as u64).to_le_bytes())`. A
//!   request goes to the first point at or after `p`, wrapping around; ties
//!   between points go to the lower endpoint hash.
//! * **[`Maglev`]:** table size `M`; endpoint `e`'s preference list starts at
//!   `offset = (key_hash(e) >> 32) mod M` and steps by
//!   `skip = (key_hash(e) & 0xFFFF_FFFF) mod (M − 1) + 1`. Endpoints take
//!   turns in key order, each claiming its next free preferred slot; an
//!   endpoint of weight `w` takes a turn in iteration `t` (from 1) when
//!   `t · w / w_max >= turns taken` (Envoy's weighted fill). A request goes
//!   to entry `p mod M`.
//!
//! Weights are the configured ones: slow start does not reshape the ring or
//! the table, which would move keys as the ramp progresses.
//!
//! [`EndpointState::key_hash`]: crate::endpoint::EndpointState::key_hash

mod bounded;
mod hashed;
mod maglev;
mod modulo;
mod ring;

use std::sync::Arc;

pub use bounded::SUGGESTED_BOUNDED_LOAD;
pub use hashed::{Hashed, Lookup};
pub use maglev::{
    DEFAULT_TABLE_SIZE, MAX_TABLE_SIZE, MIN_TABLE_SIZE, Maglev, MaglevLookup, MaglevTable,
};
pub use modulo::{KeyHash, ModuloLookup};
pub use ring::{DEFAULT_VNODES, MAX_RING_POINTS, MAX_VNODES, Ring, RingHash, RingLookup};

use crate::model::EndpointState;

/// The per-snapshot table of a hash picker: its lookup structure `L`, the
/// endpoints in key order, and the fallback picker's table `F`.
#[derive(Debug)]
pub struct HashTable<L, F> {
    lookup: L,
    /// Endpoint indices sorted by endpoint hash.
    order: Box<[u32]>,
    /// `rank[i]`: the position of endpoint `i` in `order`.
    rank: Box<[u32]>,
    fallback: F,
}

impl<L, F> HashTable<L, F> {
    pub(crate) fn new(
        endpoints: &[Arc<EndpointState>],
        lookup: impl FnOnce(&[u32]) -> L,
        fallback: F,
    ) -> Self {
        let order = key_order(endpoints);
        let lookup = lookup(&order);
        let mut rank = vec![0u32; order.len()].into_boxed_slice();
        for (pos, &i) in order.iter().enumerate() {
            if let Some(r) = rank.get_mut(i as usize) {
                *r = pos as u32;
            }
        }
        Self {
            lookup,
            order,
            rank,
            fallback,
        }
    }

    /// The picker-specific lookup structure (ring or Maglev table).
    pub fn lookup(&self) -> &L {
        &self.lookup
    }

    /// The fallback picker's table.
    pub fn fallback(&self) -> &F {
        &self.fallback
    }
}

/// Endpoint indices sorted by endpoint hash (then index, for the 2⁻⁶⁴ case of
/// equal hashes).
pub(crate) fn key_order(endpoints: &[Arc<EndpointState>]) -> Box<[u32]> {
    let mut order: Vec<u32> = (0..endpoints.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (endpoints[i as usize].key_hash(), i));
    order.into()
}

/// XXH64 (seed 0) over the key's `Hash` output: an endpoint's position
/// input ([`EndpointState::key_hash`]). For `str` and `String` that output
/// is the bytes followed by `0xFF`, so string keys place endpoints on a
/// ring or Maglev table identically in every process and on every machine
/// (the golden-value tests pin it). Integer and `SocketAddr` keys hash in
/// native byte order and `usize` width: they agree only between machines of
/// the same architecture, so prefer string keys where several gateways must
/// agree on affinity.
pub(crate) fn key_hash<K: std::hash::Hash + ?Sized>(key: &K) -> u64 {
    use std::hash::Hasher;
    let mut h = xxhash_rust::xxh64::Xxh64::new(0);
    key.hash(&mut h);
    h.finish()
}

/// The request point: the key mixed once more, so that small or sequential
/// keys from a closure spread over the whole `u64` range.
#[inline]
pub(crate) fn point(key: u64) -> u64 {
    xxhash_rust::xxh64::xxh64(&key.to_le_bytes(), 0)
}
