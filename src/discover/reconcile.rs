//! [`Reconciler`]: the one place a source's desired set meets the balancer.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;

use crate::balance::Handle;
use crate::model::{EndpointMeta, EndpointState};
use crate::pick::Picker;

/// Whether a discovered endpoint takes new requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetState {
    /// Takes new picks.
    Serving,
    /// Stays a member and finishes its calls in flight, but takes no new
    /// picks (unless every member drains); see
    /// [`Edit::set_draining`](crate::balance::Edit::set_draining).
    Draining,
}

/// One endpoint a source wants in the balancer: its address, weight,
/// placement and state.
#[derive(Debug, Clone, PartialEq)]
pub struct Target<A> {
    /// Where the endpoint is (a `SocketAddr` for every source here); the
    /// identity the reconciler diffs on.
    pub addr: A,
    /// Relative weight (finite, > 0).
    pub weight: f64,
    /// Locality, priority and labels.
    pub meta: EndpointMeta,
    /// Serving or draining.
    pub state: TargetState,
}

impl<A> Target<A> {
    /// A serving target with weight 1 and no metadata.
    pub fn new(addr: A) -> Self {
        Self {
            addr,
            weight: 1.0,
            meta: EndpointMeta::default(),
            state: TargetState::Serving,
        }
    }

    /// Sets the weight.
    pub fn with_weight(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// Sets the metadata.
    pub fn with_meta(mut self, meta: EndpointMeta) -> Self {
        self.meta = meta;
        self
    }

    /// Sets the state.
    pub fn with_state(mut self, state: TargetState) -> Self {
        self.state = state;
        self
    }
}

/// What one [`Reconciler::apply`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Endpoints created (new addresses).
    pub inserted: usize,
    /// Known addresses kept with their model (weight, metadata or draining
    /// updated in place where they changed).
    pub kept: usize,
    /// Endpoints removed (addresses no longer desired).
    pub removed: usize,
    /// Desired endpoints that are draining.
    pub draining: usize,
    /// Targets skipped: a repeated address or key, a weight that is not
    /// finite and > 0, or an address the maker refused.
    pub skipped: usize,
}

impl Applied {
    /// Endpoints the source now keeps in the balancer.
    pub fn endpoints(&self) -> usize {
        self.inserted + self.kept
    }
}

/// Applies a source's desired set to a balancer with one
/// [`Handle::edit`], so each change publishes one snapshot.
///
/// It remembers which key it made for each address. On every
/// [`apply`](Self::apply): a new address is turned into a key and service
/// by the maker and inserted; a known one keeps its endpoint (service, load
/// model, breaker), and only a changed weight, metadata or draining state is
/// written; an address no longer desired is removed (its calls in flight
/// finish). The first target wins when an address (or the key the maker
/// gives it) repeats. Endpoints the reconciler did not make are left alone,
/// unless the maker hands out their key: then the new endpoint replaces and
/// owns it.
///
/// Every source in [`discover`](super) uses one; use it for your own source:
///
/// ```
/// use std::convert::Infallible;
/// use std::net::SocketAddr;
/// use tower::service_fn;
/// use tower_lb::Balance;
/// use tower_lb::discover::{Reconciler, Target, TargetState};
///
/// let svc = service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
/// let lb: Balance<SocketAddr, _> = Balance::builder().build()?;
/// let mut sync = Reconciler::new(move |addr: SocketAddr| Some((addr, svc)));
/// let a: SocketAddr = "10.0.0.1:80".parse().unwrap();
/// let b: SocketAddr = "10.0.0.2:80".parse().unwrap();
/// sync.apply(&lb.handle(), &[Target::new(a), Target::new(b).with_weight(2.0)]);
/// let done = sync.apply(&lb.handle(), &[Target::new(b).with_state(TargetState::Draining)]);
/// assert_eq!((done.kept, done.removed, done.draining), (1, 1, 1));
/// # Ok::<_, tower_lb::ConfigError>(())
/// ```
pub struct Reconciler<A, K, M> {
    owned: HashMap<A, K>,
    make: M,
}

impl<A, K, M> std::fmt::Debug for Reconciler<A, K, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler")
            .field("endpoints", &self.owned.len())
            .finish_non_exhaustive()
    }
}

impl<A, K, M> Reconciler<A, K, M>
where
    A: Hash + Eq + Clone,
    K: Hash + Eq + Clone,
{
    /// A reconciler that owns no endpoint yet; `make` turns a new address
    /// into the endpoint's key and service (`None` skips the address).
    pub fn new(make: M) -> Self {
        Self {
            owned: HashMap::new(),
            make,
        }
    }

    /// Endpoints this reconciler keeps in the balancer.
    pub fn len(&self) -> usize {
        self.owned.len()
    }

    /// True when it keeps none.
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty()
    }

    /// Makes the balancer's endpoints from this source equal `targets`, in
    /// one edit; see the [type docs](Self). Cost: O(n) over the targets
    /// and the current set, one snapshot if anything changed.
    pub fn apply<S, P, C>(&mut self, handle: &Handle<K, S, P, C>, targets: &[Target<A>]) -> Applied
    where
        M: FnMut(A) -> Option<(K, S)>,
        P: Picker,
    {
        let Self { owned, make } = self;
        handle.edit(|set| {
            // Writers are serialised, so this is the set the edit starts from.
            let current: HashMap<K, Arc<EndpointState>> = handle.endpoints().into_iter().collect();
            let mut done = Applied::default();
            let mut next: HashMap<A, K> = HashMap::with_capacity(targets.len());
            let mut keys: HashSet<K> = HashSet::with_capacity(targets.len());
            for t in targets {
                if next.contains_key(&t.addr) || !(t.weight.is_finite() && t.weight > 0.0) {
                    done.skipped += 1;
                    continue;
                }
                let known = owned.get(&t.addr).and_then(|k| Some((k, current.get(k)?)));
                let key = match known {
                    Some((key, state)) if !keys.contains(key) => {
                        if state.weight() != t.weight {
                            // Checked finite and > 0 above.
                            let _ = set.set_weight(key, t.weight);
                        }
                        if *state.meta() != t.meta {
                            set.set_meta(key, t.meta.clone());
                        }
                        done.kept += 1;
                        key.clone()
                    }
                    _ => match make(t.addr.clone()) {
                        Some((key, service)) if !keys.contains(&key) => {
                            if set
                                .insert(key.clone(), service, t.weight, t.meta.clone())
                                .is_err()
                            {
                                done.skipped += 1;
                                continue;
                            }
                            done.inserted += 1;
                            key
                        }
                        _ => {
                            done.skipped += 1;
                            continue;
                        }
                    },
                };
                let draining = t.state == TargetState::Draining;
                set.set_draining(&key, draining);
                done.draining += usize::from(draining);
                keys.insert(key.clone());
                next.insert(t.addr.clone(), key);
            }
            for (_, key) in owned.drain() {
                if !keys.contains(&key) && set.remove(&key) {
                    done.removed += 1;
                }
            }
            *owned = next;
            done
        })
    }
}
