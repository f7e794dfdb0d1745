//! The endpoint set one pick sees: an immutable snapshot, swapped whole on
//! every membership or weight change; how a new set is published, and how
//! its endpoints are born.

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::Shared;
use crate::admission::{Judge, Lanes};
use crate::model::{Birth, EndpointMeta, EndpointState};
use crate::pick::hash::key_hash;
use crate::pick::{Picker, Sampler};
use crate::route::{Routed, Router};

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
    /// The endpoints picks choose from: the members of this balancer's
    /// subset (all of them without subsetting) that are not draining (all
    /// of the subset when every one drains, as kube-proxy falls back to
    /// terminating endpoints when no ready one is left).
    pub(crate) entries: Vec<Arc<Entry<K, S>>>,
    /// Parallel to `entries`; kept apart so pickers see a plain slice.
    pub(crate) states: Vec<Arc<EndpointState>>,
    /// Each of `states` once per lane: what a call's guard holds.
    pub(crate) lanes: Lanes,
    pub(crate) sampler: Sampler,
    pub(crate) table: T,
    /// The route step's sets over `states`; `None` when there is nothing
    /// to route (one priority level, no locality mode).
    pub(crate) route: Option<Routed<T>>,
    /// Parallel to `members`: in this balancer's subset (all true without
    /// subsetting).
    subset: Vec<bool>,
}

impl<K, S, T> Snapshot<K, S, T> {
    pub(crate) fn new<P: Picker<Table = T>>(
        picker: &P,
        router: &Arc<Router>,
        members: Vec<Member<K, S>>,
        lanes: usize,
        judge: &Option<Arc<dyn Judge>>,
    ) -> Self {
        let hashes: Vec<u64> = members.iter().map(|m| m.state.key_hash()).collect();
        let subset = router.subset(&hashes);
        let chosen = || {
            members
                .iter()
                .zip(&subset)
                .filter(|(_, c)| **c)
                .map(|(m, _)| m)
        };
        let serving = chosen().any(|m| !m.state.is_draining());
        let (entries, states): (Vec<_>, Vec<_>) = chosen()
            .filter(|m| !serving || !m.state.is_draining())
            .map(|m| (Arc::clone(&m.entry), Arc::clone(&m.state)))
            .unzip();
        let weights: Vec<f64> = states.iter().map(|s| s.weight()).collect();
        Self {
            lanes: Lanes::new(&states, lanes, judge),
            sampler: Sampler::new(&weights),
            table: picker.table(&states),
            route: router.route(picker, &states),
            members,
            subset,
            entries,
            states,
        }
    }

    /// The members of this balancer's subset, draining ones included: the
    /// ones active health checks probe.
    pub(crate) fn subset_members(&self) -> impl Iterator<Item = &Member<K, S>> {
        self.members
            .iter()
            .zip(&self.subset)
            .filter(|(_, c)| **c)
            .map(|(m, _)| m)
    }

    /// The live state of every member, draining ones included.
    pub(crate) fn member_states(&self) -> Vec<Arc<EndpointState>> {
        self.members.iter().map(|m| Arc::clone(&m.state)).collect()
    }
}

impl<K, S, P: Picker, C> Shared<K, S, P, C> {
    /// Creates the live state of a new endpoint: the one place every
    /// endpoint, initial or inserted later, is born.
    pub(crate) fn new_endpoint(
        &self,
        key: &K,
        weight: f64,
        meta: EndpointMeta,
        now: Instant,
        ramp: bool,
    ) -> Arc<EndpointState>
    where
        K: Hash,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let key_hash = key_hash(key);
        let ramp_start = match &self.model.slow_start {
            Some(ss) if ramp => {
                let now_ns = self.model.clock.nanos(now);
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
                gate: self.health.gate_for(me.clone()),
                observer,
            };
            EndpointState::new(birth, &self.model, now)
        })
    }

    /// Keeps a removed endpoint's ramp position for slow start's memory.
    pub(crate) fn remember_ramp(&self, state: &EndpointState, now: Instant) {
        if let Some(ss) = &self.model.slow_start {
            let now_ns = self.model.clock.nanos(now);
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
            &self.health.judge(),
        );
        self.census.set_pool(&snap.states);
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
