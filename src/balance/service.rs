use std::task::{Context as TaskContext, Poll};

use tokio::time::Instant;
use tower::ServiceExt;
use tower_service::Service;

use super::{Balance, Shared, Snapshot, scope};
use std::sync::atomic::Ordering;

use crate::classify::Classify;
use crate::endpoint::InFlight;
use crate::endpoint::PanicMode;
use crate::error::Error;
use crate::pick::{Context, Pick, Picker};

use super::future::ResponseFuture;

/// A pick can lose a race for the last in-flight slot of a capped endpoint,
/// or for the last half-open probe of a breaker; it is repeated this many
/// times before reporting `Overloaded` or `AllUnavailable`.
const PICK_ATTEMPTS: usize = 3;

impl<K, S, P, C, Req> Service<Req> for Balance<K, S, P, C>
where
    S: Service<Req> + Clone,
    P: Pick<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<tower::util::Oneshot<S, Req>, S::Error, C>;

    /// Always ready: readiness of the endpoints is handled per call (the
    /// picked endpoint's clone is driven to readiness by `oneshot`), and a
    /// call with no endpoint to take it fails at once.
    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let shared = &*self.shared;
        let snap = &**self.snapshot.load();
        let now = Instant::now();
        #[cfg(feature = "metrics")]
        let picked = match &shared.metrics {
            Some(m) => m.metrics.time_pick(|| shared.dispatch(snap, &req, now)),
            None => shared.dispatch(snap, &req, now),
        };
        #[cfg(not(feature = "metrics"))]
        let picked = shared.dispatch(snap, &req, now);
        match picked {
            Ok((service, guard)) => {
                ResponseFuture::running(service.oneshot(req), guard, shared.classify.clone())
            }
            Err(e) => ResponseFuture::failed(e),
        }
    }
}

impl<K, S: Clone, P: Picker, C> Shared<K, S, P, C> {
    /// Picks an endpoint for `req` and takes an in-flight slot on it.
    pub(crate) fn dispatch<Req, E>(
        &self,
        snap: &Snapshot<K, S, P::Table>,
        req: &Req,
        now: Instant,
    ) -> Result<(S, InFlight), Error<E>>
    where
        P: Pick<Req>,
    {
        let n = snap.states.len();
        if n == 0 {
            return Err(Error::NoEndpoints);
        }
        let now_ns = self.model.nanos(now);
        let health = &self.model.health;
        let mut ejection = health.outlier.is_some();
        if health.enabled() && health.panic_threshold > 0.0 {
            let unhealthy = health.unhealthy(&snap.states, now_ns);
            if unhealthy > 0 && ((n - unhealthy) as f64) < health.panic_threshold * n as f64 {
                health.panics.fetch_add(1, Ordering::Relaxed);
                match health.panic_mode {
                    PanicMode::FailFast => return Err(Error::Panic),
                    PanicMode::RouteAll => ejection = false,
                }
            }
        }
        let avoid = scope::current_avoid();
        let avoid = avoid.as_ref().map_or(&[][..], |(ids, len)| &ids[..*len]);
        let mut cx = Context {
            states: &snap.states,
            sampler: &snap.sampler,
            table: &snap.table,
            now,
            now_ns,
            rates: self.model.rates,
            rng: &self.model.rng,
            cap: self.cap,
            avoid,
            health: health.enabled(),
            ejection,
        };
        for _ in 0..PICK_ATTEMPTS {
            let Some(i) = self.picker.pick(req, &cx) else {
                if cx.avoid.is_empty() {
                    break;
                }
                // Every available endpoint was tried already: a repeat beats
                // failing the retry.
                cx.avoid = &[];
                continue;
            };
            let Some(state) = snap.states.get(i) else {
                break;
            };
            if let Some(guard) = state.try_dispatch(self.cap, now) {
                scope::report_pick(state.id());
                return Ok((snap.entries[i].service.clone(), guard.started_at(now_ns)));
            }
        }
        let all_capped = self
            .cap
            .is_some_and(|cap| snap.states.iter().all(|s| s.in_flight() >= cap));
        if all_capped {
            Err(Error::Overloaded)
        } else {
            Err(Error::AllUnavailable)
        }
    }
}
