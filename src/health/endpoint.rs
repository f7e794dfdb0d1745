//! What the health owner shows of each endpoint: its breaker, its outlier
//! counters and whether it is ejected, read through the endpoint's
//! [`Guards`](crate::guards::Guards).
//!
//! Methods of [`EndpointState`], written here rather than in the endpoint
//! model, which stores the guards without knowing what they hold.

use std::sync::Arc;

use tokio::time::Instant;

use crate::breaker::CircuitBreaker;
use crate::endpoint::EndpointState;
use crate::outlier::HostStats;

impl EndpointState {
    /// Outlier-detection counters and ejection state.
    pub fn outlier(&self) -> &HostStats {
        self.guards().outlier()
    }

    /// Whether outlier detection has ejected this endpoint at `now`.
    pub fn is_ejected(&self, now: Instant) -> bool {
        self.guards().outlier().is_ejected(self.nanos(now))
    }

    /// This endpoint's circuit breaker, when the balancer has breakers.
    pub fn breaker(&self) -> Option<&CircuitBreaker> {
        self.guards().breaker()
    }
}

/// A pool of endpoints is a pool of outlier hosts to the detector.
impl AsRef<HostStats> for Arc<EndpointState> {
    fn as_ref(&self) -> &HostStats {
        self.outlier()
    }
}
