use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Entry, Member, Shared};
use crate::error::{ConfigError, check_weight};
use crate::model::{EndpointMeta, EndpointState};
use crate::pick::Picker;
use crate::route::{Callers, RoutePlan};

/// Changes a balancer's endpoint set at run time.
///
/// Cheap to clone; every clone and every [`Balance`](super::Balance) clone
/// sees the same set. Writers are serialised by a mutex and publish a new
/// snapshot; picks never wait for them. Each change costs O(n) plus the
/// picker's table rebuild (a ring or Maglev table), so it belongs on the
/// discovery path, not the request path; [`edit`](Self::edit) applies many
/// changes with one rebuild.
///
/// ```
/// use std::convert::Infallible;
/// use tower::service_fn;
/// use tower_lb::Balance;
/// use tower_lb::endpoint::{EndpointMeta, Locality};
///
/// let svc = service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
/// let lb = Balance::builder().endpoint("a", svc).build()?;
/// let handle = lb.handle();
/// handle.edit(|set| {
///     set.upsert("b", 2.0, EndpointMeta::new().with_locality(Locality::in_zone("z1")), || svc)?;
///     set.set_draining(&"a", true);
///     Ok::<_, tower_lb::ConfigError>(())
/// })?;
/// assert_eq!(handle.len(), 2);
/// # Ok::<_, tower_lb::ConfigError>(())
/// ```
pub struct Handle<K, S, P: Picker, C> {
    pub(crate) shared: Arc<Shared<K, S, P, C>>,
}

impl<K, S, P: Picker, C> Clone for Handle<K, S, P, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// What [`Edit::upsert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsert {
    /// The key was new: an endpoint was created.
    Inserted,
    /// The key was present: its weight and metadata were updated, its
    /// service and load model kept.
    Updated,
}

/// A batch of changes to the endpoint set, published at once when the
/// closure given to [`Handle::edit`] returns.
pub struct Edit<'a, K, S, P: Picker, C> {
    shared: &'a Shared<K, S, P, C>,
    members: Vec<Member<K, S>>,
    now: Instant,
    changed: bool,
}

impl<K: Hash + Eq, S, P: Picker, C> Edit<'_, K, S, P, C> {
    fn position<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.members
            .iter()
            .position(|m| m.entry.key.borrow() == key)
    }

    fn state<Q>(&self, key: &Q) -> Option<&Arc<EndpointState>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.position(key).map(|i| &self.members[i].state)
    }

    /// Adds an endpoint, or replaces the service of an existing key (the old
    /// endpoint drains its calls in flight; the new one starts with a fresh
    /// model and, if configured, slow start). Returns true if a key was
    /// replaced.
    ///
    /// # Errors
    /// A [`ConfigError`] on `weight` unless it is finite and > 0.
    pub fn insert(
        &mut self,
        key: K,
        service: S,
        weight: f64,
        meta: EndpointMeta,
    ) -> Result<bool, ConfigError> {
        let weight = check_weight("weight", weight)?;
        let state = self.shared.new_endpoint(&key, weight, meta, self.now, true);
        let member = Member {
            entry: Arc::new(Entry { key, service }),
            state,
        };
        self.changed = true;
        match self.position(&member.entry.key) {
            Some(i) => {
                self.members[i] = member;
                Ok(true)
            }
            None => {
                self.members.push(member);
                Ok(false)
            }
        }
    }

    /// Adds the endpoint if its key is new (calling `service` to make it),
    /// otherwise sets its weight and metadata and keeps its service, load
    /// model and breaker: what a discovery source does with an address it
    /// has seen before.
    ///
    /// # Errors
    /// A [`ConfigError`] on `weight` unless it is finite and > 0.
    pub fn upsert(
        &mut self,
        key: K,
        weight: f64,
        meta: EndpointMeta,
        service: impl FnOnce() -> S,
    ) -> Result<Upsert, ConfigError> {
        let weight = check_weight("weight", weight)?;
        if let Some(state) = self.state(&key) {
            if state.weight() != weight || *state.meta() != meta {
                state.set_weight(weight);
                state.set_meta(meta);
                self.changed = true;
            }
            return Ok(Upsert::Updated);
        }
        self.insert(key, service(), weight, meta)?;
        Ok(Upsert::Inserted)
    }

    /// Removes an endpoint. Once the edit is published no new pick lands on
    /// it; requests already in flight finish normally. Returns false if the
    /// key was not present.
    pub fn remove<Q>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let Some(i) = self.position(key) else {
            return false;
        };
        let gone = self.members.remove(i);
        self.shared.remember_ramp(&gone.state, self.now);
        self.changed = true;
        true
    }

    /// Changes an endpoint's weight. Returns `Ok(false)` if the key was not
    /// present.
    ///
    /// # Errors
    /// A [`ConfigError`] on `weight` unless it is finite and > 0.
    pub fn set_weight<Q>(&mut self, key: &Q, weight: f64) -> Result<bool, ConfigError>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let w = check_weight("weight", weight)?;
        let Some(state) = self.state(key) else {
            return Ok(false);
        };
        state.set_weight(w);
        self.changed = true;
        Ok(true)
    }

    /// Replaces an endpoint's locality, priority and labels, keeping its
    /// model. Returns false if the key was not present.
    pub fn set_meta<Q>(&mut self, key: &Q, meta: EndpointMeta) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let Some(state) = self.state(key) else {
            return false;
        };
        state.set_meta(meta);
        self.changed = true;
        true
    }

    /// Starts (`true`) or ends (`false`) draining an endpoint: while it
    /// drains it takes no new picks and its calls in flight finish, unless
    /// every endpoint drains (then picks use the draining ones rather than
    /// fail: Kubernetes' rule for terminating endpoints). Returns false if
    /// the key was not present.
    pub fn set_draining<Q>(&mut self, key: &Q, draining: bool) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let Some(state) = self.state(key) else {
            return false;
        };
        if state.is_draining() != draining {
            state.set_draining(draining);
            self.changed = true;
        }
        true
    }

    /// Whether `key` is in the set (draining or not).
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.position(key).is_some()
    }

    /// The keys in the set, in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.members.iter().map(|m| &m.entry.key)
    }
}

impl<K, S, P, C> Handle<K, S, P, C>
where
    K: Hash + Eq,
    P: Picker,
{
    /// Applies the changes `f` makes to the endpoint set and publishes them
    /// as one new snapshot (one table rebuild), also when `f` returns an
    /// error after some changes: what was changed stays changed. Writers
    /// are serialised; picks go on meanwhile over the previous snapshot.
    pub fn edit<R>(&self, f: impl FnOnce(&mut Edit<'_, K, S, P, C>) -> R) -> R {
        let shared = &*self.shared;
        let _w = shared.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut edit = Edit {
            shared,
            members: shared.set.load().members.clone(),
            now: Instant::now(),
            changed: false,
        };
        let r = f(&mut edit);
        if edit.changed {
            shared.publish(edit.members);
        }
        r
    }

    /// Adds an endpoint with weight 1, or replaces the service of an existing
    /// key (the old endpoint drains; the new one starts with fresh state).
    /// Returns true if a key was replaced.
    pub fn insert(&self, key: K, service: S) -> bool {
        self.edit(|e| e.insert(key, service, 1.0, EndpointMeta::default()))
            .unwrap_or(false)
    }

    /// Like [`insert`](Self::insert), with a weight (finite, > 0).
    pub fn insert_weighted(&self, key: K, service: S, weight: f64) -> Result<bool, ConfigError> {
        check_weight("weight", weight)?;
        self.edit(|e| e.insert(key, service, weight, EndpointMeta::default()))
    }

    /// Removes an endpoint. From the moment this returns, no new pick lands
    /// on it; requests already in flight finish normally. Returns false if
    /// the key was not present.
    pub fn remove<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.edit(|e| e.remove(key))
    }

    /// Changes an endpoint's weight (finite, > 0). Returns `Ok(false)` if the
    /// key was not present.
    pub fn set_weight<Q>(&self, key: &Q, weight: f64) -> Result<bool, ConfigError>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        check_weight("weight", weight)?;
        self.edit(|e| e.set_weight(key, weight))
    }

    /// Replaces an endpoint's locality, priority and labels, keeping its
    /// model (see [`Edit::set_meta`]). Returns false if the key was not
    /// present.
    pub fn set_meta<Q>(&self, key: &Q, meta: EndpointMeta) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.edit(|e| e.set_meta(key, meta))
    }

    /// Adds the endpoint if its key is new, else updates its weight and
    /// metadata keeping its service and model; see [`Edit::upsert`].
    pub fn upsert(
        &self,
        key: K,
        weight: f64,
        meta: EndpointMeta,
        service: impl FnOnce() -> S,
    ) -> Result<Upsert, ConfigError> {
        self.edit(|e| e.upsert(key, weight, meta, service))
    }

    /// Starts or ends draining an endpoint; see [`Edit::set_draining`].
    pub fn set_draining<Q>(&self, key: &Q, draining: bool) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.edit(|e| e.set_draining(key, draining))
    }
}

impl<K, S, P: Picker, C> Handle<K, S, P, C> {
    /// Reports that a discovery source feeding this balancer failed (the
    /// last good set stays): a health event
    /// ([`HealthChange::DiscoveryError`](crate::health::HealthChange::DiscoveryError))
    /// for the balancer's hook, and a `tracing` event at `WARN` on target
    /// `tower_lb` with the source's name and the error's text. Sources call
    /// it; so can your own.
    pub fn report_discovery_error(&self, source: &str, error: &dyn std::fmt::Display) {
        self.shared.health.events.emit(
            None,
            crate::health::HealthChange::DiscoveryError {
                source: source.to_string(),
                error: error.to_string(),
            },
        );
    }

    /// Replaces the callers' distribution over zones that zone-aware
    /// routing uses (as when an autoscaler moves callers between zones);
    /// picks use it from their next plan on. See [`crate::route`].
    ///
    /// # Errors
    /// A [`ConfigError`] on `routing.zone_aware` when the balancer was built
    /// without zone-aware routing, and the distribution's checks
    /// (`routing.zone_aware.callers`, `routing.zone_aware.local_zone`).
    pub fn set_callers(&self, callers: Callers) -> Result<(), ConfigError> {
        self.shared.router.set_callers(callers)
    }

    /// The route step's decision now: each priority level's health, load
    /// and panic state, and its split between localities. Computed afresh
    /// (O(n)); for observability and tests, not the request path.
    pub fn route_plan(&self) -> RoutePlan {
        let snap = self.shared.set.load();
        match &snap.route {
            Some(routed) => routed.view(),
            None => self.shared.router.view(&snap.states),
        }
    }

    /// Number of endpoints in the current set, draining ones included.
    pub fn len(&self) -> usize {
        self.shared.set.load().members.len()
    }

    /// True when the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The set's size and its first-endpoint wake-up, for a waiter that
    /// does not name the balancer's types (the HTTP gateway).
    #[cfg(feature = "http")]
    pub(crate) fn membership(&self) -> Arc<super::Membership> {
        Arc::clone(&self.shared.membership)
    }

    /// The current endpoints' keys and live state (for observability),
    /// draining ones included, in insertion order.
    pub fn endpoints(&self) -> Vec<(K, Arc<EndpointState>)>
    where
        K: Clone,
    {
        self.shared
            .set
            .load()
            .members
            .iter()
            .map(|m| (m.entry.key.clone(), Arc::clone(&m.state)))
            .collect()
    }
}
