//! [`Hashed`]: the one hash picker, over a [`Lookup`] (modulo, ring, Maglev).

use std::sync::Arc;

use super::bounded::{check, place};
use super::{HashTable, point};
use crate::error::ConfigError;
use crate::model::EndpointState;
use crate::pick::key::RequestKey;
use crate::pick::{PeakEwma, Pick, Picker, Pool};

/// Where a request key's point lands: the lookup structure of a hash
/// picker, built once per endpoint-set snapshot.
///
/// [`ModuloLookup`](super::ModuloLookup), [`RingLookup`](super::RingLookup)
/// and [`MaglevLookup`](super::MaglevLookup) are the crate's; a new
/// consistent-hashing scheme is one more implementation of this trait,
/// and gets keys, fallback, bounded load and availability for free.
pub trait Lookup: Clone + Send + Sync + 'static {
    /// The per-snapshot structure (a ring, a table).
    type Table: Send + Sync + 'static;

    /// The picker's stable name (`"ring_hash"`).
    fn name(&self) -> &'static str;

    /// Builds the structure for `endpoints`; `order` is their indices sorted
    /// by endpoint hash ([`key_order`](super::HashTable)), the order every
    /// process agrees on.
    fn build(&self, endpoints: &[Arc<EndpointState>], order: &[u32]) -> Self::Table;

    /// The endpoints a request whose point is `point` should go to, its home
    /// first, then the ones to try when the home is skipped. May yield
    /// indices out of range; the walk is cut at `4·n` steps.
    fn walk<'t>(
        table: &'t Self::Table,
        order: &'t [u32],
        point: u64,
    ) -> impl Iterator<Item = usize> + 't;

    /// Checks the lookup's settings (called by `Balance::build`).
    fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}

/// A hash picker: the same request key goes to the same endpoint, in every
/// process. `L` is the [`Lookup`]; use the aliases
/// [`KeyHash`](super::KeyHash), [`RingHash`](super::RingHash) and
/// [`Maglev`](super::Maglev).
///
/// The key is read through a [`RequestKey`] (`E`). Requests without a key go
/// to the fallback picker `F` (default [`PeakEwma`]). Unavailable endpoints,
/// and with [`bounded_load`](Self::bounded_load) endpoints above their
/// share, are skipped by walking on (see the [module docs](super)).
///
/// Setters never fail; [`Balance::build`](crate::balance::Builder::build)
/// checks them and names the field (`bounded_load`, `vnodes`, `table_size`).
#[derive(Debug, Clone)]
pub struct Hashed<L, E, F = PeakEwma> {
    lookup: L,
    key: E,
    fallback: F,
    bound: Option<f64>,
}

impl<L: Lookup + Default, E> Hashed<L, E> {
    /// A hash picker keyed by `key`, with the lookup's defaults, no load
    /// bound and [`PeakEwma`] for requests without a key.
    pub fn new(key: E) -> Self {
        Self {
            lookup: L::default(),
            key,
            fallback: PeakEwma::default(),
            bound: None,
        }
    }
}

impl<L, E, F> Hashed<L, E, F> {
    /// The picker for requests without a key.
    pub fn fallback<F2: Picker>(self, fallback: F2) -> Hashed<L, E, F2> {
        Hashed {
            lookup: self.lookup,
            key: self.key,
            fallback,
            bound: self.bound,
        }
    }

    /// Bounded load with factor `c` (finite, `>= 1`): an endpoint whose
    /// in-flight count would exceed `ceil(c · (total_in_flight + 1) / n)` is
    /// skipped for the next one of the walk. Off by default;
    /// [`SUGGESTED_BOUNDED_LOAD`](super::SUGGESTED_BOUNDED_LOAD) (1.25) is
    /// the paper's suggestion.
    ///
    /// Cost: a pick whose candidate already has requests in flight sums
    /// every endpoint's in-flight count once (O(n) relaxed loads) to compute
    /// the cap; idle candidates are taken without it.
    pub fn bounded_load(mut self, c: f64) -> Self {
        self.bound = Some(c);
        self
    }

    /// The lookup's settings.
    pub fn lookup(&self) -> &L {
        &self.lookup
    }

    pub(super) fn lookup_mut(&mut self) -> &mut L {
        &mut self.lookup
    }
}

impl<L, E, F> Picker for Hashed<L, E, F>
where
    L: Lookup,
    E: Send + Sync + 'static,
    F: Picker,
{
    type Table = HashTable<L::Table, F::Table>;

    fn name(&self) -> &'static str {
        self.lookup.name()
    }

    /// Sorts the endpoints by hash, then builds the lookup structure.
    fn table(&self, endpoints: &[Arc<EndpointState>]) -> Self::Table {
        HashTable::new(
            endpoints,
            |order| self.lookup.build(endpoints, order),
            self.fallback.table(endpoints),
        )
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if let Some(c) = self.bound {
            check(c)?;
        }
        self.lookup.validate()?;
        self.fallback.validate()
    }
}

impl<Req, L, E, F> Pick<Req> for Hashed<L, E, F>
where
    L: Lookup,
    E: RequestKey<Req>,
    F: Pick<Req>,
{
    fn pick(&self, req: &Req, pool: &Pool<'_, Self::Table>) -> Option<usize> {
        let t = pool.table();
        let Some(key) = self.key.key(req) else {
            return self.fallback.pick(req, &pool.with_table(&t.fallback));
        };
        let walk = L::walk(&t.lookup, &t.order, point(key));
        place(pool, self.bound, &t.order, &t.rank, walk)
    }

    /// The request key: keyed requests keep their routed set.
    #[inline]
    fn affinity(&self, req: &Req) -> Option<u64> {
        self.key.key(req)
    }
}
