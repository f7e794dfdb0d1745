//! Reporting a retry layer's counters through a balancer's metrics.

use std::sync::{Arc, Weak};

use super::RetryLayer;
use crate::metrics::Metrics;

impl Metrics {
    /// Also reports `layer`'s [`RetryStats`](crate::retry::RetryStats) as
    /// `lb.retries`, `lb.retry.budget.exhausted` and `lb.hedges`, under this
    /// balancer's `lb.name`. Register a layer with one balancer's metrics
    /// only, or its counts are reported twice. The metrics hold the layer
    /// weakly: once the layer and every service it made are dropped, they
    /// report nothing for it.
    pub fn retries<R, C>(self, layer: &RetryLayer<R, C>) -> Self
    where
        R: Send + Sync + 'static,
        C: Send + Sync + 'static,
    {
        let weak = Arc::downgrade(&layer.shared);
        self.push_retries(Arc::new(move || {
            Weak::upgrade(&weak).map(|s| {
                let stats = &s.stats;
                [stats.retries(), stats.budget_exhausted(), stats.hedges()]
            })
        }))
    }
}
