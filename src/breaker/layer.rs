//! [`CircuitBreakerLayer`]: wraps a service in a [`CircuitBreakerService`].

use std::sync::Arc;

use tower_layer::Layer;

use super::{CircuitBreaker, CircuitBreakerConfig, CircuitBreakerService};
use crate::classify::ErrIsFailure;

/// Puts a circuit breaker in front of a service.
///
/// Every service this layer produces shares the layer's one breaker: wrap
/// each backend with its own layer when each needs its own breaker.
#[derive(Debug, Clone)]
pub struct CircuitBreakerLayer<C = ErrIsFailure> {
    breaker: Arc<CircuitBreaker>,
    classify: C,
}

impl CircuitBreakerLayer {
    /// A layer with a new breaker built from `config`, classifying the
    /// inner service's `Err` as failure.
    pub fn new(config: CircuitBreakerConfig) -> Self {
        Self::shared(Arc::new(CircuitBreaker::new(config)))
    }

    /// A layer over an existing breaker (to observe it, force it open, or
    /// share it with other code).
    pub fn shared(breaker: Arc<CircuitBreaker>) -> Self {
        Self {
            breaker,
            classify: ErrIsFailure,
        }
    }
}

impl<C> CircuitBreakerLayer<C> {
    /// Sets the classifier that turns results into outcomes.
    pub fn classify<C2>(self, classify: C2) -> CircuitBreakerLayer<C2> {
        CircuitBreakerLayer {
            breaker: self.breaker,
            classify,
        }
    }

    /// The breaker every produced service shares.
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.breaker
    }
}

impl<S, C: Clone> Layer<S> for CircuitBreakerLayer<C> {
    type Service = CircuitBreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService::new(inner, Arc::clone(&self.breaker)).classify(self.classify.clone())
    }
}
