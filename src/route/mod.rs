//! The route step: which endpoints one pick may consider, before the
//! picker scores them.
//!
//! Client-side balancing runs in every replica of every caller: a fleet of
//! independent balancers over endpoints spread over zones. The route step
//! narrows the set a pick sees, in this order:
//!
//! 1. **Subset** (optional, per snapshot): this balancer uses only its
//!    deterministic subset of the endpoints ([`Subset`]).
//! 2. **Priority level** (always): traffic stays on the highest priority
//!    ([`EndpointMeta::priority`](crate::endpoint::EndpointMeta::priority),
//!    0 first) until its health falls, by Envoy's rule.
//! 3. **Locality** (optional, per level): Envoy's zone-aware routing
//!    ([`ZoneAware`]) or locality-weighted routing
//!    ([`Routing::locality_weighted`]).
//! 4. **The picker** then picks among the endpoints of the chosen set, with
//!    its own table for that set.
//!
//! Configure it with [`Builder::routing`](crate::balance::Builder::routing);
//! read the current decision with [`Handle::route_plan`](crate::Handle::route_plan).
//! Without subsetting, with every endpoint at one priority and no locality
//! mode (the default for endpoints without metadata), the step is skipped:
//! a pick costs what it cost before.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::Balance;
//! use tower_lb::endpoint::{EndpointMeta, Locality};
//! use tower_lb::route::{Callers, Routing, ZoneAware};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let replica = |name: &'static str| service_fn(move |_: ()| async move { Ok::<_, Infallible>(name) });
//! let in_zone = |z: &str| EndpointMeta::new().with_locality(Locality::in_zone(z));
//! let mut b = Balance::builder().routing(
//!     Routing::new().zone_aware(
//!         ZoneAware::new("a", Callers::new([("a", 1.0), ("b", 1.0)])).min_cluster_size(2),
//!     ),
//! );
//! for (key, zone) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")] {
//!     b = b.endpoint_with(key, replica(key), 1.0, in_zone(zone));
//! }
//! let mut lb = b.build()?;
//! // Half the callers and half the endpoints are in zone a: all local.
//! for _ in 0..10 {
//!     assert!(lb.ready().await?.call(()).await?.starts_with('a'));
//! }
//! # Ok(()) }
//! ```
//!
//! # Priority levels (Envoy's rule)
//!
//! Levels are the distinct priorities of the endpoints, highest (lowest
//! number) first. With `h` healthy of `n` endpoints in a level (healthy: no
//! open breaker, not ejected, passing its active check — the census's
//! rule), and the overprovisioning factor `f`
//! ([`DEFAULT_OVERPROVISIONING_FACTOR`] 1.4, in whole percent: 140):
//!
//! ```text
//! health(P)        = min(100, ⌊140 · h / n⌋)                 whole percent
//! normalized_total = min(100, Σ health(P))
//! load(P0)         = min(100, ⌊health(P0) · 100 / normalized_total⌋)
//! load(Pk)         = min(100 − Σ load(P0..Pk−1), ⌊health(Pk) · 100 / normalized_total⌋)
//! ```
//!
//! and what rounding leaves of 100 goes to the first level with any health
//! (Envoy's code; its documentation's tables round one level differently by
//! a point). So P0 takes all traffic while at least `1/1.4 ≈ 71.4%` of it is
//! healthy, 99% at 71%, 70% at 50%, and P1 the rest.
//!
//! **Panic, per level.** While `normalized_total` is 100 no level panics:
//! the lower levels can take what the higher ones cannot. Below it, a level
//! whose healthy share is under the balancer's
//! [`panic_threshold`](crate::balance::Builder::panic_threshold) is in
//! panic: picks in it ignore ejection and failing checks (breakers still
//! refuse), or fail with [`Error::Panic`](crate::Error::Panic) under
//! [`PanicMode::FailFast`](crate::health::PanicMode). When every level is
//! in panic, loads follow the levels' endpoint counts instead of their
//! health. With nothing healthy and the threshold at 0, P0 takes the
//! traffic (and finds no endpoint to take it). A balancer with a single
//! level panics when its healthy share is under the threshold, as the
//! [census](crate::health) rule says; Envoy agrees whenever the threshold
//! is at most `100/f` percent (71.4%, above both defaults of 50%).
//!
//! # Zone-aware routing (Envoy's rule)
//!
//! Given the caller's zone `L` and the callers' shares `c(z)` over zones
//! ([`Callers`]), in a level whose healthy endpoints have shares `e(z)`:
//!
//! * if `e(L) > 0` and `e(L) ≥ c(L)`, every pick stays in `L`;
//! * otherwise a pick stays in `L` with probability `e(L) / c(L)`, and the
//!   rest goes to the other zones in proportion to their surplus
//!   `max(0, e(z) − c(z))` (by `e(z)` if rounding left no surplus).
//!
//! Callers in every zone applying this send each zone exactly its share of
//! endpoints, with the least cross-zone traffic that allows:
//! `1 − Σ min(c(z), e(z))`. The rule is off for a level (its whole set is
//! used) when it has fewer than `min_cluster_size` healthy endpoints
//! ([`DEFAULT_MIN_CLUSTER_SIZE`] 6, Envoy's), fewer than two zones with
//! healthy endpoints, when the callers are in fewer than two zones, or when
//! the level is in panic. Envoy applies it to P=0 only; here every level
//! is split by the same rule, so a failover to P1 stays as local as P1's
//! spread allows. Zones are matched by name
//! ([`Locality::zone`](crate::endpoint::Locality::zone)); endpoints with no
//! zone form a zone `""` no caller is in. Update the callers' distribution
//! at run time with [`Handle::set_callers`](crate::Handle::set_callers).
//!
//! # Locality-weighted routing (Envoy's rule)
//!
//! The alternative to zone-aware routing: each locality (region, zone,
//! sub-zone) of a level takes a share proportional to
//! `weight · min(100, ⌊140 · h / n⌋)`, its weight being the
//! [`locality_weight`](crate::endpoint::EndpointMeta::locality_weight) its
//! endpoints carry (xDS `load_balancing_weight`; the largest if they
//! differ, 1 if none). With every locality's effective weight at 0 the
//! level's whole set is used. Envoy cycles through localities in a
//! weighted round-robin; here each pick draws, with the same shares.
//!
//! # Deterministic subsetting
//!
//! With [`Subset::new(index, fleet_size, k)`](Subset::new), the `m`
//! endpoints are put on a ring sorted by their
//! [key hash](crate::endpoint::EndpointState::key_hash) (the same order in
//! every process that knows the same keys: use string keys), and balancer
//! `i` of `n` uses the `min(k, m)` consecutive endpoints from position
//! `⌊i · m / n⌋`. Then:
//!
//! * every endpoint is in `⌊n·k/m⌋` or `⌈n·k/m⌉` subsets, exactly (random
//!   subsets of 20 out of 200 for 1,000 balancers put up to ~1.3 times the
//!   mean on some endpoints);
//! * adding or removing one endpoint changes each subset by at most two
//!   members (both property-tested); about 40% of the subsets change one
//!   member, against the ~10% (`n·k/m` subsets) that any exactly balanced
//!   scheme must move. The SRE book's shuffled rounds (and gRPC's
//!   deterministic-subsetting proposal built on them) balance as well but
//!   reshuffle nearly every subset on such a change.
//!
//! This is the discrete form of Finagle's deterministic aperture: subsets
//! are windows on one ring, so neighbouring balancers share most of theirs.
//! Changing `fleet_size` moves every window a little; when the subset is
//! much smaller than `m / n` that can change whole subsets.
//!
//! The subset is computed over every member, draining ones included (a
//! drain does not reshuffle anyone's subset; a removal does), then draining
//! members leave the pickable set as usual. Members outside the subset stay
//! members: their load and latency model is kept, and they take picks again
//! as soon as a membership change brings them into the subset. Health
//! (census, panic, outlier detection, active checks) covers the subset.
//!
//! # Hash pickers and affinity
//!
//! Every picker picks within the chosen set; hash pickers have a ring or
//! table per set. For a picker with an affinity key
//! ([`Pick::affinity`](crate::pick::Pick::affinity): the hash pickers'
//! request key) the set is chosen from the key too: its route number is
//! `XXH64(key.to_le_bytes(), seed` [`ROUTE_SEED`]`)`, and the set is the one
//! whose band of the cumulative shares (in set order: level by level, each
//! level's localities by name) contains it. So a key keeps its endpoint
//! while the shares hold; when health or the callers move the shares, only
//! the keys whose route number falls in the moved part of a band change
//! set; within a set, the hash picker's own consistency applies (a ring or
//! Maglev moves only the keys of endpoints that join or leave the set).
//! Other pickers choose the set with a random number.
//!
//! # When a set has no available endpoint
//!
//! If the picker finds nothing in the chosen set (every endpoint at its
//! in-flight cap, or tried by this retry), the pick tries the level's whole
//! set, then the other levels' in priority order, before the balancer
//! reports why no endpoint could take the call.
//!
//! # Cost
//!
//! With the step on, a pick adds one health-epoch check (two atomic loads),
//! one random number (or one XXH64 of the affinity key) and a scan of the
//! plan's cumulative shares (one entry per set); the plan itself is
//! recomputed, O(n), only when an endpoint's health or the callers'
//! distribution changed. Each set has its own picker table, built on
//! membership changes.

mod config;
mod layout;
mod plan;
mod priority;
mod routed;
mod router;
mod subset;
mod zone;

pub use config::{
    Callers, DEFAULT_OVERPROVISIONING_FACTOR, MAX_OVERPROVISIONING_FACTOR, Routing, ZoneAware,
};
pub use plan::{LevelPlan, LocalityShare, RoutePlan};
pub use routed::ROUTE_SEED;
pub use subset::Subset;
pub use zone::DEFAULT_MIN_CLUSTER_SIZE;

pub(crate) use plan::Panic;
pub(crate) use routed::Routed;
pub(crate) use router::Router;
