//! [`Balance`]: a `Clone` tower service that spreads requests over a dynamic
//! set of endpoints.
//!
//! * **Picks in `call`**, with the request in hand (hash pickers can read a
//!   header), then drives a clone of the picked endpoint's service with
//!   `oneshot`. No `Buffer`, no background task: `Balance` is cheap to clone
//!   and every clone shares one endpoint set.
//! * **Never hangs.** With no endpoint to take a request, the response future
//!   fails at once with [`Error::NoEndpoints`](crate::Error::NoEndpoints),
//!   [`Overloaded`](crate::Error::Overloaded) (every endpoint at its in-flight
//!   cap), [`AllUnavailable`](crate::Error::AllUnavailable) (breakers open,
//!   ejected, failing checks: the error says how many of each and when the
//!   next probe is due) or [`Panic`](crate::Error::Panic) (too few healthy
//!   endpoints, with [`PanicMode::FailFast`](crate::health::PanicMode)).
//!   With a [`timeout`](Builder::timeout), a call that takes longer fails
//!   with [`Error::Timeout`](crate::Error::Timeout) and counts as a timeout
//!   failure of its endpoint.
//! * **Health** is the [health owner](crate::health)'s: breakers, outlier
//!   ejection, active checks and the panic threshold, each endpoint counted
//!   once.
//! * **Lock-free picks.** The endpoint set is an immutable snapshot swapped
//!   atomically ([`arc_swap`]) on membership or weight changes; load and
//!   latency change in place through atomics.
//! * **Removal drains.** A removed endpoint takes no new picks from the moment
//!   [`Handle::remove`] returns; its in-flight requests finish normally.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::{Balance, pick};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let replica = |name: &'static str| service_fn(move |req: u32| async move {
//!     Ok::<_, Infallible>(format!("{name} got {req}"))
//! });
//! let mut lb = Balance::builder()
//!     .picker(pick::RoundRobin::new())
//!     .endpoint("a", replica("a"))
//!     .endpoint("b", replica("b"))
//!     .build()?;
//! assert_eq!(lb.ready().await?.call(1).await?, "a got 1");
//! assert_eq!(lb.ready().await?.call(2).await?, "b got 2");
//!
//! // Change membership at run time.
//! lb.handle().remove(&"a");
//! assert_eq!(lb.ready().await?.call(3).await?, "b got 3");
//! # Ok(()) }
//! ```

mod builder;
mod cap;
mod discover;
mod future;
mod handle;
mod layer;
mod load;
mod observe;
mod ready;
mod service;
mod snapshot;

pub use crate::guard::GuardConfig;
pub use crate::scope::{MAX_AVOID, call_avoiding, timed_out};
pub use builder::{Builder, DEFAULT_NAME};
pub use discover::{discover, spawn_discover};
pub use future::ResponseFuture;
pub use handle::{Edit, Handle, Upsert};
pub use layer::{BalanceLayer, FromKeys, MakeEndpoint};
pub(crate) use ready::Membership;
pub use ready::WaitTimeout;

pub use observe::Observer;
#[cfg(feature = "metrics")]
pub(crate) use observe::sealed;
pub(crate) use observe::{Built, Label, MakeObserver, Observe};
pub(crate) use snapshot::{Entry, Member, Snapshot};

pub use service::Balance;
pub(crate) use service::Shared;

use std::sync::Arc;

use crate::pick::Picker;

impl<K, S> Balance<K, S> {
    /// A builder with the default picker ([`PeakEwma`](crate::pick::PeakEwma)) and classifier.
    pub fn builder() -> Builder<K, S> {
        Builder::new()
    }
}

impl<K, S, P: Picker, C> Balance<K, S, P, C> {
    /// A handle to insert, remove and re-weight endpoints at run time.
    pub fn handle(&self) -> Handle<K, S, P, C> {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The picker in use.
    pub fn picker(&self) -> &P {
        &self.shared.picker
    }

    /// The balancer's name (from [`Builder::name`]).
    pub fn name(&self) -> &str {
        &self.shared.health.events.balancer
    }

    /// Calls refused so far for `reason` (no endpoints, all capped, all
    /// unavailable by their main reason, panic): the counts behind the
    /// `lb.refusals` metric.
    pub fn refusals(&self, reason: crate::error::Refusal) -> u64 {
        self.shared.census.refusals(reason)
    }
}

/// The balancer's classifier, for the layers above it (the retry layer's
/// default, [`Inherit`](crate::classify::Inherit)).
impl<K, S, P: Picker, C: Clone> crate::classify::Classified for Balance<K, S, P, C> {
    type Classifier = crate::classify::Above<C>;

    fn classifier(&self) -> Self::Classifier {
        crate::classify::Above(self.shared.classify.clone())
    }
}
