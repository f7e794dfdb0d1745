//! [`Balance`]: a `Clone` tower service that spreads requests over a dynamic
//! set of endpoints.
//!
//! * **Picks in `call`**, with the request in hand (hash pickers can read a
//!   header), then drives a clone of the picked endpoint's service with
//!   `oneshot`. No `Buffer`, no background task: `Balance` is cheap to clone
//!   and every clone shares one endpoint set.
//! * **Never hangs.** With no endpoint to take a request, the response future
//!   fails at once with [`Error::NoEndpoints`](crate::Error::NoEndpoints),
//!   [`Overloaded`](crate::Error::Overloaded) (every endpoint at its in-flight
//!   cap), [`AllUnavailable`](crate::Error::AllUnavailable) (breakers open,
//!   ejected, failing checks: the error says how many of each and when the
//!   next probe is due) or [`Panic`](crate::Error::Panic) (too few healthy
//!   endpoints, with [`PanicMode::FailFast`](crate::health::PanicMode)).
//!   With a [`timeout`](Builder::timeout), a call that takes longer fails
//!   with [`Error::Timeout`](crate::Error::Timeout) and counts as a timeout
//!   failure of its endpoint.
//! * **Health** is the [health owner](crate::health)'s: breakers, outlier
//!   ejection, active checks and the panic threshold, each endpoint counted
//!   once.
//! * **Lock-free picks.** The endpoint set is an immutable snapshot swapped
//!   atomically ([`arc_swap`]) on membership or weight changes; load and
//!   latency change in place through atomics.
//! * **Removal drains.** A removed endpoint takes no new picks from the moment
//!   [`Handle::remove`] returns; its in-flight requests finish normally.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::{Balance, pick};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let replica = |name: &'static str| service_fn(move |req: u32| async move {
//!     Ok::<_, Infallible>(format!("{name} got {req}"))
//! });
//! let mut lb = Balance::builder()
//!     .picker(pick::RoundRobin::new())
//!     .endpoint("a", replica("a"))
//!     .endpoint("b", replica("b"))
//!     .build()?;
//! assert_eq!(lb.ready().await?.call(1).await?, "a got 1");
//! assert_eq!(lb.ready().await?.call(2).await?, "b got 2");
//!
//! // Change membership at run time.
//! lb.handle().remove(&"a");
//! assert_eq!(lb.ready().await?.call(3).await?, "b got 3");
//! # Ok(()) }
//! ```

mod builder;
mod cap;
mod discover;
mod future;
mod handle;
mod layer;
mod load;
mod observe;
mod ready;
mod service;
mod snapshot;

use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

pub use crate::scope::{MAX_AVOID, call_avoiding, timed_out};
pub use builder::{Builder, DEFAULT_NAME};
pub use discover::{discover, spawn_discover};
pub use future::ResponseFuture;
pub use handle::{Edit, Handle, Upsert};
pub use layer::{BalanceLayer, FromKeys, MakeEndpoint};
pub(crate) use ready::Membership;
pub use ready::WaitTimeout;

pub use observe::Observer;
#[cfg(feature = "metrics")]
pub(crate) use observe::sealed;
pub(crate) use observe::{Built, Label, MakeObserver, Observe};
pub(crate) use snapshot::{Entry, Member, Snapshot};

use crate::classify::ErrIsFailure;
use crate::endpoint::{Birth, EndpointMeta, EndpointState, Model, RampMemory};
use crate::health::Health;
use crate::pick::hash::key_hash;
use crate::pick::{PeakEwma, Picker};
use crate::rng::RngSource;
use crate::route::Router;

/// A load balancer over a dynamic set of endpoints of type `S`, keyed by `K`.
///
/// `P` is the [picker](crate::pick) (default [`PeakEwma`]) and `C` the
/// [classifier](crate::classify::Classify) (default: `Err` is a failure).
/// Build one with [`Balance::builder`]; see the [module docs](self).
pub struct Balance<K, S, P: Picker = PeakEwma, C = ErrIsFailure> {
    pub(crate) shared: Arc<Shared<K, S, P, C>>,
    /// This clone's view of the endpoint set, as of [`Shared::generation`]
    /// `seen`: one relaxed compare per call while the set is unchanged,
    /// instead of an `arc_swap` load. (An idle clone keeps the set it last
    /// saw, and the services in it, alive until its next call or its drop.)
    ///
    /// `arc_swap::Cache` does the same by comparing pointers, but holds its
    /// own `Arc` of `Shared`: three reference counts per clone instead of
    /// two, and the retry layer clones its inner service on every request
    /// (`benches/balance.rs`, `stack`).
    snapshot: Arc<Snapshot<K, S, P::Table>>,
    seen: u64,
}

impl<K, S, P: Picker, C> Balance<K, S, P, C> {
    pub(crate) fn from_shared(shared: Arc<Shared<K, S, P, C>>) -> Self {
        // The generation first: the set loaded after it is at least as new.
        let seen = shared.generation.load(Ordering::Acquire);
        Self {
            snapshot: shared.set.load_full(),
            seen,
            shared,
        }
    }

    /// Reloads this clone's view of the endpoint set if the set changed
    /// since it last looked.
    #[inline]
    pub(crate) fn refresh(&mut self) {
        let now = self.shared.generation.load(Ordering::Acquire);
        if now != self.seen {
            self.snapshot = self.shared.set.load_full();
            self.seen = now;
        }
    }
}

impl<K, S, P: Picker, C> Clone for Balance<K, S, P, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            snapshot: Arc::clone(&self.snapshot),
            seen: self.seen,
        }
    }
}

impl<K, S, P: Picker, C> std::fmt::Debug for Balance<K, S, P, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balance")
            .field("name", &self.shared.health.events.balancer)
            .field("picker", &self.shared.picker.name())
            .field("endpoints", &self.shared.set.load().members.len())
            .finish()
    }
}

impl<K, S> Balance<K, S> {
    /// A builder with the default picker ([`PeakEwma`]) and classifier.
    pub fn builder() -> Builder<K, S> {
        Builder::new()
    }
}

impl<K, S, P: Picker, C> Balance<K, S, P, C> {
    /// A handle to insert, remove and re-weight endpoints at run time.
    pub fn handle(&self) -> Handle<K, S, P, C> {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The picker in use.
    pub fn picker(&self) -> &P {
        &self.shared.picker
    }

    /// The balancer's name (from [`Builder::name`]).
    pub fn name(&self) -> &str {
        &self.shared.health.events.balancer
    }

    /// Calls refused so far for `reason` (no endpoints, all capped, all
    /// unavailable by their main reason, panic): the counts behind the
    /// `lb.refusals` metric.
    pub fn refusals(&self, reason: crate::error::Refusal) -> u64 {
        self.shared.health.refusals(reason)
    }
}

/// State shared by every clone of one balancer and its handles.
pub(crate) struct Shared<K, S, P: Picker, C> {
    pub(crate) picker: P,
    pub(crate) classify: C,
    pub(crate) set: ArcSwap<Snapshot<K, S, P::Table>>,
    /// Bumped after every swap of `set`, so that clones see a change with
    /// one load (see [`Balance::snapshot`]).
    pub(crate) generation: AtomicU64,
    /// Serialises writers (handle calls); readers never take it.
    pub(crate) writer: Mutex<()>,
    pub(crate) model: Arc<Model>,
    pub(crate) health: Arc<Health>,
    pub(crate) rng: RngSource,
    /// The in-flight cap: fixed (settable at run time) and adaptive.
    pub(crate) cap: crate::endpoint::CapCell,
    pub(crate) timeout: Option<Duration>,
    pub(crate) next_id: AtomicU64,
    pub(crate) labels: Option<Label<K>>,
    pub(crate) observer: Option<Arc<dyn Observe>>,
    /// The route step's settings and callers' distribution.
    pub(crate) router: Arc<Router>,
    /// Ramp positions of removed endpoints (slow start's memory).
    pub(crate) ramps: Mutex<RampMemory>,
    /// The set's size, for those waiting for its first endpoints.
    pub(crate) membership: Arc<Membership>,
}

impl<K, S, P: Picker, C> Shared<K, S, P, C> {
    /// Creates the live state of a new endpoint: the one place every
    /// endpoint, initial or inserted later, is born.
    pub(crate) fn new_endpoint(
        &self,
        key: &K,
        weight: f64,
        meta: EndpointMeta,
        now: tokio::time::Instant,
        ramp: bool,
    ) -> Arc<EndpointState>
    where
        K: Hash,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let key_hash = key_hash(key);
        let ramp_start = match &self.model.slow_start {
            Some(ss) if ramp => {
                let now_ns = self.model.nanos(now);
                let mut ramps = self.ramps.lock().unwrap_or_else(|e| e.into_inner());
                Some(ramps.ramp_start(ss, key_hash, now_ns))
            }
            _ => None,
        };
        let label: Box<str> = match &self.labels {
            Some(label) => label(key).into(),
            None => format!("endpoint-{id}").into(),
        };
        let observer = self
            .observer
            .as_ref()
            .and_then(|o| o.endpoint(id, &label, &meta));
        Arc::new_cyclic(|me| {
            let birth = Birth {
                id,
                key_hash,
                label,
                weight,
                meta,
                ramp_start,
                guards: self.health.guards_for(me.clone()),
                observer,
            };
            EndpointState::new(birth, &self.model, now)
        })
    }

    /// Keeps a removed endpoint's ramp position for slow start's memory.
    pub(crate) fn remember_ramp(&self, state: &EndpointState, now: tokio::time::Instant) {
        if let Some(ss) = &self.model.slow_start {
            let now_ns = self.model.nanos(now);
            let elapsed = state.ramp_elapsed_ns(now_ns);
            let mut ramps = self.ramps.lock().unwrap_or_else(|e| e.into_inner());
            ramps.forget_old_and_remember(ss, state.key_hash(), elapsed, now_ns);
        }
    }

    /// Publishes a new endpoint set: the one place snapshots are swapped.
    /// Callers hold the writer lock (or own the only reference).
    pub(crate) fn publish(&self, members: Vec<Member<K, S>>) {
        let snap = Snapshot::new(
            &self.picker,
            &self.router,
            members,
            self.model.lane_mask + 1,
        );
        self.health.set_pool(&snap.states);
        if let Some(o) = &self.observer {
            o.set_pool(&snap.member_states());
        }
        let len = snap.members.len();
        self.set.store(Arc::new(snap));
        // After the store: a clone that sees the new generation loads a set
        // at least this new.
        self.generation.fetch_add(1, Ordering::Release);
        self.membership.set(len);
    }
}

/// The balancer's classifier, for the layers above it (the retry layer's
/// default, [`Inherit`](crate::classify::Inherit)).
impl<K, S, P: Picker, C: Clone> crate::classify::Classified for Balance<K, S, P, C> {
    type Classifier = crate::classify::Above<C>;

    fn classifier(&self) -> Self::Classifier {
        crate::classify::Above(self.shared.classify.clone())
    }
}
