//! The endpoint set one pick sees: an immutable snapshot, swapped whole on
//! every membership or weight change.

use std::sync::Arc;

use crate::endpoint::{EndpointState, Lane};
use crate::pick::Picker;
use crate::pick::sampler::Sampler;
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
    /// Each of `states` once per lane, lane by lane (`lanes[lane · n + i]`
    /// for `n` states): what a call's guard holds, so that threads in
    /// different lanes count references on different lines.
    lanes: Vec<Arc<Lane>>,
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
        let lanes = (0..lanes)
            .flat_map(|lane| states.iter().map(move |s| Lane::new(Arc::clone(s), lane)))
            .collect();
        Self {
            lanes,
            sampler: Sampler::new(&weights),
            table: picker.table(&states),
            route: router.route(picker, &states),
            members,
            subset,
            entries,
            states,
        }
    }

    /// Endpoint `i`'s handle in lane `lane`.
    #[inline(always)]
    pub(crate) fn lane(&self, i: usize, lane: usize) -> Option<&Arc<Lane>> {
        self.lanes.get(lane * self.states.len() + i)
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
