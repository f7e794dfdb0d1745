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
//!   cap) or [`AllUnavailable`](crate::Error::AllUnavailable).
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
mod discover;
mod future;
mod handle;
mod scope;
mod service;

use std::hash::{Hash, Hasher};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use arc_swap::cache::Cache;

pub use builder::Builder;
pub use discover::{discover, spawn_discover};
pub use future::ResponseFuture;
pub use handle::{Edit, Handle, Upsert};
pub use scope::{MAX_AVOID, call_avoiding};

use crate::classify::ErrIsFailure;
use crate::endpoint::{EndpointState, Model};
use crate::pick::sampler::Sampler;
use crate::pick::{PeakEwma, Picker};

/// A load balancer over a dynamic set of endpoints of type `S`, keyed by `K`.
///
/// `P` is the [picker](crate::pick) (default [`PeakEwma`]) and `C` the
/// [classifier](crate::classify::Classify) (default: `Err` is a failure).
/// Build one with [`Balance::builder`]; see the [module docs](self).
pub struct Balance<K, S, P: Picker = PeakEwma, C = ErrIsFailure> {
    pub(crate) shared: Arc<Shared<K, S, P, C>>,
    /// This clone's view of the endpoint set: one relaxed pointer compare
    /// per call while the set is unchanged, instead of an `arc_swap` load.
    /// (An idle clone keeps the set it last saw, and the services in it,
    /// alive until its next call or its drop.)
    snapshot: SnapshotCache<K, S, P, C>,
}

/// A clone's cached view of the shared endpoint set.
type SnapshotCache<K, S, P, C> =
    Cache<SetRef<K, S, P, C>, Arc<Snapshot<K, S, <P as Picker>::Table>>>;

/// Dereferences to a balancer's shared endpoint set (for [`Cache`]).
pub(crate) struct SetRef<K, S, P: Picker, C>(Arc<Shared<K, S, P, C>>);

impl<K, S, P: Picker, C> Clone for SetRef<K, S, P, C> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K, S, P: Picker, C> std::ops::Deref for SetRef<K, S, P, C> {
    type Target = ArcSwap<Snapshot<K, S, P::Table>>;
    fn deref(&self) -> &Self::Target {
        &self.0.set
    }
}

impl<K, S, P: Picker, C> Balance<K, S, P, C> {
    pub(crate) fn from_shared(shared: Arc<Shared<K, S, P, C>>) -> Self {
        Self {
            snapshot: Cache::new(SetRef(Arc::clone(&shared))),
            shared,
        }
    }
}

impl<K, S, P: Picker, C> Clone for Balance<K, S, P, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            snapshot: self.snapshot.clone(),
        }
    }
}

impl<K, S, P: Picker, C> std::fmt::Debug for Balance<K, S, P, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balance")
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
}

/// State shared by every clone of one balancer and its handles.
pub(crate) struct Shared<K, S, P: Picker, C> {
    pub(crate) picker: P,
    pub(crate) classify: C,
    pub(crate) set: ArcSwap<Snapshot<K, S, P::Table>>,
    /// Serialises writers (handle calls); readers never take it.
    pub(crate) writer: Mutex<()>,
    pub(crate) model: Arc<Model>,
    pub(crate) cap: Option<usize>,
    pub(crate) next_id: AtomicU64,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<crate::metrics::Attached<K>>,
}

impl<K, S, P: Picker, C> Shared<K, S, P, C> {
    /// Creates the live state of a new endpoint: the one place every
    /// endpoint, initial or inserted later, is born.
    pub(crate) fn new_endpoint(
        &self,
        key: &K,
        weight: f64,
        now: tokio::time::Instant,
        ramp: bool,
    ) -> Arc<EndpointState>
    where
        K: Hash,
    {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let state = EndpointState::new(id, key_hash(key), weight, &self.model, now, ramp);
        #[cfg(feature = "metrics")]
        let state = match &self.metrics {
            Some(m) => state.with_metrics(m.endpoint(key)),
            None => state,
        };
        Arc::new(state)
    }

    /// Publishes a new endpoint set: the one place snapshots are swapped.
    /// Callers hold the writer lock (or own the only reference).
    pub(crate) fn publish(&self, members: Vec<Member<K, S>>) {
        let snap = Snapshot::new(&self.picker, members);
        self.model.health.set_pool(&snap.states);
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.metrics.set_pool(&snap.member_states());
        }
        self.set.store(Arc::new(snap));
    }
}

/// One endpoint's identity and service.
pub(crate) struct Entry<K, S> {
    pub(crate) key: K,
    pub(crate) service: S,
}

/// One endpoint of the set: identity and service, and its live state.
pub(crate) struct Member<K, S> {
    pub(crate) entry: Arc<Entry<K, S>>,
    pub(crate) state: Arc<EndpointState>,
}

impl<K, S> Clone for Member<K, S> {
    fn clone(&self) -> Self {
        Self {
            entry: Arc::clone(&self.entry),
            state: Arc::clone(&self.state),
        }
    }
}

/// An immutable view of the endpoint set.
pub(crate) struct Snapshot<K, S, T> {
    /// Every endpoint, draining ones included, in insertion order.
    pub(crate) members: Vec<Member<K, S>>,
    /// The endpoints picks choose from: the members that are not draining
    /// (all of them when every member drains, as kube-proxy falls back to
    /// terminating endpoints when no ready one is left).
    pub(crate) entries: Vec<Arc<Entry<K, S>>>,
    /// Parallel to `entries`; kept apart so pickers see a plain slice.
    pub(crate) states: Vec<Arc<EndpointState>>,
    pub(crate) sampler: Sampler,
    pub(crate) table: T,
}

impl<K, S, T> Snapshot<K, S, T> {
    pub(crate) fn new<P: Picker<Table = T>>(picker: &P, members: Vec<Member<K, S>>) -> Self {
        let serving = members.iter().any(|m| !m.state.is_draining());
        let (entries, states): (Vec<_>, Vec<_>) = members
            .iter()
            .filter(|m| !serving || !m.state.is_draining())
            .map(|m| (Arc::clone(&m.entry), Arc::clone(&m.state)))
            .unzip();
        let weights: Vec<f64> = states.iter().map(|s| s.weight()).collect();
        Self {
            sampler: Sampler::new(&weights),
            table: picker.table(&states),
            members,
            entries,
            states,
        }
    }

    /// The live state of every member, draining ones included.
    pub(crate) fn member_states(&self) -> Vec<Arc<EndpointState>> {
        self.members.iter().map(|m| Arc::clone(&m.state)).collect()
    }
}

/// XXH64 (seed 0) over the key's `Hash` output. For `str` and `String` that
/// output is the bytes followed by `0xFF`, so string keys place endpoints on
/// a ring or Maglev table identically in every process and on every machine
/// (the golden-value tests pin it). Integer and `SocketAddr` keys hash in
/// native byte order and `usize` width: they agree only between machines of
/// the same architecture, so prefer string keys where several gateways must
/// agree on affinity.
pub(crate) fn key_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut h = xxhash_rust::xxh64::Xxh64::new(0);
    key.hash(&mut h);
    h.finish()
}
