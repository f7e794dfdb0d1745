//! What a balancer tells an observer (metrics implement it): endpoints
//! joining, the endpoint set, pick timings. The balancer's core calls it
//! through `Option<Arc<dyn Observe>>`, so without an observer a call pays
//! one branch, and the core never depends on who observes.

use std::sync::Arc;

use crate::health::Health;
use crate::model::{EndpointMeta, EndpointObserver, EndpointState};

/// Turns an endpoint key into its label (events, `tracing`, metrics).
pub(crate) type Label<K> = Arc<dyn Fn(&K) -> String + Send + Sync>;

/// A balancer's observer.
pub(crate) trait Observe: Send + Sync + 'static {
    /// The observer of a new endpoint labelled `label` with metadata
    /// `meta`, if it wants one.
    fn endpoint(
        &self,
        id: u64,
        label: &str,
        meta: &EndpointMeta,
    ) -> Option<Box<dyn EndpointObserver>>;

    /// Every new endpoint set, draining members included (also after a
    /// metadata change).
    fn set_pool(&self, members: &[Arc<EndpointState>]);

    /// Whether to time this pick: `Some(start)` for a sampled one.
    fn pick_started(&self) -> Option<std::time::Instant>;

    /// A sampled pick that started at `start` has ended.
    fn pick_ended(&self, start: std::time::Instant);
}

/// What an observer is made from when the balancer is built.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct Built<'a> {
    /// The picker's name.
    pub(crate) algorithm: &'static str,
    pub(crate) health: &'a Arc<Health>,
    /// A probing picker's pool (its probe counts).
    pub(crate) probes: Option<&'a Arc<crate::pick::prequal::ProbePool>>,
}

/// Makes the observer once the balancer's parts exist.
/// Called once per balancer built (a layer builds one per `layer` call).
pub(crate) type MakeObserver = Arc<dyn Fn(&Built<'_>) -> Arc<dyn Observe> + Send + Sync>;

/// What [`Builder::metrics`](super::Builder::metrics) takes: a balancer's
/// observer, [`metrics::Metrics`](crate::metrics::Metrics) (feature
/// `metrics`). Sealed: the observer interface is the crate's own. A trait
/// here, rather than the setter naming `Metrics`, so that the balancer
/// does not depend on the metrics above it (metrics implement it).
pub trait Observer: sealed::Sealed {}

impl<T: sealed::Sealed> Observer for T {}

pub(crate) mod sealed {
    use std::sync::Arc;

    /// The observer's name for the balancer (unless the builder has one)
    /// and the maker of its per-balancer observer. Reachable only as
    /// `Observer`'s supertrait, which users can name but not implement or
    /// call: the crate-private types in its signature are the point.
    #[allow(private_interfaces)]
    pub trait Sealed {
        /// The name the balancer takes when the builder has none.
        fn name(&self) -> Arc<str>;
        /// Makes the balancer's observer when it is built.
        fn into_observer(self) -> super::MakeObserver;
    }
}
