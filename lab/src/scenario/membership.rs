//! Backends that join and leave during a run (`join`, `leave` on a
//! `[[backend]]`): the balancers learn of them through their `Handle` (a
//! rival's, through its `Discover` stream), as a discovery source would
//! tell them.

use std::time::Duration;

use super::backend::BackendSpec;

/// A membership change: backend `idx` joins (or leaves) at `at`, counted
/// from the row's start (the warm-up's, like events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// When.
    pub at: Duration,
    /// Which backend.
    pub idx: usize,
    /// Joins (`false`: leaves).
    pub join: bool,
}

/// Whether each backend is a member when the row starts.
pub fn initial(backends: &[BackendSpec]) -> Vec<bool> {
    backends
        .iter()
        .map(|b| b.join.is_none_or(|j| j.0.is_zero()))
        .collect()
}

/// Every join and leave after the start, in time order.
pub fn changes(backends: &[BackendSpec]) -> Vec<Change> {
    let mut out = Vec::new();
    for (idx, b) in backends.iter().enumerate() {
        if let Some(j) = b.join.filter(|j| !j.0.is_zero()) {
            out.push(Change {
                at: j.0,
                idx,
                join: true,
            });
        }
        if let Some(l) = b.leave {
            out.push(Change {
                at: l.0,
                idx,
                join: false,
            });
        }
    }
    out.sort_by_key(|c| (c.at, c.idx));
    out
}

/// Checks the `join` and `leave` times.
pub fn validate(backends: &[BackendSpec]) -> Result<(), (String, String)> {
    for (i, b) in backends.iter().enumerate() {
        if let (Some(l), j) = (b.leave, b.join)
            && l.0 <= j.map_or(Duration::ZERO, |j| j.0)
        {
            return Err((
                format!("backend[{i}].leave"),
                "must come after the start and after its join".into(),
            ));
        }
    }
    if !initial(backends).contains(&true) {
        return Err((
            "backend".into(),
            "every backend joins later: at least one must be there from the start (no `join`)"
                .into(),
        ));
    }
    Ok(())
}
