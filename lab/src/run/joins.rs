//! Scale-out while a row runs: the scenario's joins and leaves applied to
//! the balancers at their times. What the table shows of them is
//! [`crate::report::membership_stats`]'s.

use std::time::Duration;

use tokio::time::Instant;

use super::server::AbortOnDrop;
use crate::scenario::Scenario;
use crate::scenario::membership::changes;

/// Something done to the balancers at a change.
pub type Action = Box<dyn FnOnce() + Send>;

/// Runs each action at `start + at`, in time order, until dropped.
pub fn drive(start: Instant, mut actions: Vec<(Duration, Action)>) -> AbortOnDrop {
    actions.sort_by_key(|(at, _)| *at);
    AbortOnDrop::new(tokio::spawn(async move {
        for (at, act) in actions {
            tokio::time::sleep_until(start + at).await;
            act();
        }
    }))
}

/// The actions of every change for `clients` balancers: `join(c, idx)`
/// and `leave(c, idx)` make client `c`'s.
pub fn actions(
    sc: &Scenario,
    clients: u32,
    mut join: impl FnMut(u32, usize) -> Action,
    mut leave: impl FnMut(u32, usize) -> Action,
) -> Vec<(Duration, Action)> {
    let mut out = Vec::new();
    for ch in changes(&sc.backends) {
        for c in 0..clients {
            let act = if ch.join {
                join(c, ch.idx)
            } else {
                leave(c, ch.idx)
            };
            out.push((ch.at, act));
        }
    }
    out
}
