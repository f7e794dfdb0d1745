use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Entry, Shared, Snapshot};
use crate::endpoint::EndpointState;
use crate::error::{ConfigError, check_weight};
use crate::pick::Picker;

/// Changes a balancer's endpoint set at run time.
///
/// Cheap to clone; every clone and every [`Balance`](super::Balance) clone
/// sees the same set. Writers are serialised by a mutex and publish a new
/// snapshot; picks never wait for them. Each call costs O(n) plus the
/// picker's table rebuild (a ring or Maglev table), so it belongs on the
/// discovery path, not the request path.
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

impl<K, S, P, C> Handle<K, S, P, C>
where
    K: Hash + Eq,
    P: Picker,
{
    /// Adds an endpoint with weight 1, or replaces the service of an existing
    /// key (the old endpoint drains; the new one starts with fresh state).
    /// Returns true if a key was replaced.
    pub fn insert(&self, key: K, service: S) -> bool {
        self.insert_entry(key, service, 1.0)
    }

    /// Like [`insert`](Self::insert), with a weight (finite, > 0).
    pub fn insert_weighted(&self, key: K, service: S, weight: f64) -> Result<bool, ConfigError> {
        let w = check_weight("weight", weight)?;
        Ok(self.insert_entry(key, service, w))
    }

    fn insert_entry(&self, key: K, service: S, weight: f64) -> bool {
        let shared = &*self.shared;
        let _w = shared.writer.lock().unwrap_or_else(|p| p.into_inner());
        let cur = shared.set.load_full();
        let state = shared.new_endpoint(&key, weight, Instant::now(), true);
        let mut entries = cur.entries.clone();
        let mut states = cur.states.clone();
        let entry = Arc::new(Entry { key, service });
        let replaced = match entries.iter().position(|e| e.key == entry.key) {
            Some(i) => {
                entries[i] = entry;
                states[i] = state;
                true
            }
            None => {
                entries.push(entry);
                states.push(state);
                false
            }
        };
        shared
            .set
            .store(Arc::new(Snapshot::new(&shared.picker, entries, states)));
        replaced
    }

    /// Removes an endpoint. From the moment this returns, no new pick lands
    /// on it; requests already in flight finish normally. Returns false if
    /// the key was not present.
    pub fn remove<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let shared = &*self.shared;
        let _w = shared.writer.lock().unwrap_or_else(|p| p.into_inner());
        let cur = shared.set.load_full();
        let Some(i) = cur.entries.iter().position(|e| e.key.borrow() == key) else {
            return false;
        };
        let mut entries = cur.entries.clone();
        let mut states = cur.states.clone();
        entries.remove(i);
        states.remove(i);
        shared
            .set
            .store(Arc::new(Snapshot::new(&shared.picker, entries, states)));
        true
    }

    /// Changes an endpoint's weight (finite, > 0). Returns `Ok(false)` if the
    /// key was not present.
    pub fn set_weight<Q>(&self, key: &Q, weight: f64) -> Result<bool, ConfigError>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let w = check_weight("weight", weight)?;
        let shared = &*self.shared;
        let _w = shared.writer.lock().unwrap_or_else(|p| p.into_inner());
        let cur = shared.set.load_full();
        let Some(i) = cur.entries.iter().position(|e| e.key.borrow() == key) else {
            return Ok(false);
        };
        cur.states[i].set_weight(w);
        // Same members, new weights: rebuild the sampler and the picker's table.
        shared.set.store(Arc::new(Snapshot::new(
            &shared.picker,
            cur.entries.clone(),
            cur.states.clone(),
        )));
        Ok(true)
    }
}

impl<K, S, P: Picker, C> Handle<K, S, P, C> {
    /// Number of endpoints in the current set.
    pub fn len(&self) -> usize {
        self.shared.set.load().states.len()
    }

    /// True when the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current endpoints' keys and live state (for observability).
    pub fn endpoints(&self) -> Vec<(K, Arc<EndpointState>)>
    where
        K: Clone,
    {
        let cur = self.shared.set.load();
        cur.entries
            .iter()
            .zip(&cur.states)
            .map(|(e, s)| (e.key.clone(), Arc::clone(s)))
            .collect()
    }
}
