//! `Balance`'s `Service` impl: pick at `call`, with the request in hand.

use std::task::{Context, Poll};

use tokio::time::Instant;
use tower::ServiceExt;
use tower_service::Service;

use super::future::ResponseFuture;
use super::{Balance, Shared, Snapshot};
use crate::classify::Classify;
use crate::endpoint::InFlight;
use crate::error::Error;
use crate::pick::{Pick, Picker, Pool};
use crate::scope;

/// A pick can lose a race for the last in-flight slot of a capped endpoint,
/// or for the last half-open probe of a breaker; it is repeated this many
/// times before reporting why no endpoint could take the call.
const PICK_ATTEMPTS: usize = 3;

impl<K, S, P, C, Req> Service<Req> for Balance<K, S, P, C>
where
    S: Service<Req> + Clone,
    P: Pick<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Response = C::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<tower::util::Oneshot<S, Req>, S::Error, C>;

    /// Always ready: readiness of the endpoints is handled per call (the
    /// picked endpoint's clone is driven to readiness by `oneshot`), and a
    /// call with no endpoint to take it fails at once.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.refresh();
        let shared = &*self.shared;
        let snap = &*self.snapshot;
        let now = scope::now();
        let timer = shared.observer.as_ref().and_then(|o| o.pick_started());
        let picked = shared.dispatch(snap, &req, now);
        if let (Some(o), Some(start)) = (&shared.observer, timer) {
            o.pick_ended(start);
        }
        match picked {
            Ok((service, guard)) => ResponseFuture::running(
                service.oneshot(req),
                guard,
                shared.classify.clone(),
                shared.timeout.map(|t| crate::time::after(now, t)),
            ),
            Err(e) => {
                shared.health.count_refusal(&e);
                ResponseFuture::failed(e)
            }
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
        if snap.states.is_empty() {
            return Err(Error::NoEndpoints);
        }
        let now_ns = self.model.nanos(now);
        let route = match &snap.route {
            None => self.health.census(now_ns).map_err(|()| Error::Panic)?,
            Some(routed) => routed.census(&self.health, now_ns),
        };
        let avoid = scope::current_avoid();
        let avoid = avoid.as_ref().map_or(&[][..], |(ids, len)| &ids[..*len]);
        let lane = crate::endpoint::current_lane(self.model.lane_mask);
        // Read once: a cap changed at run time applies from the next call.
        let cap = self.cap.get();
        let mut pool = Pool {
            states: &snap.states,
            sampler: &snap.sampler,
            table: &snap.table,
            now,
            now_ns,
            rates: self.model.rates,
            rng: &self.rng,
            cap,
            lane,
            avoid,
            route,
        };
        for _ in 0..PICK_ATTEMPTS {
            let picked = match &snap.route {
                None => self.picker.pick(req, &pool),
                Some(routed) => routed
                    .pick(&self.picker, req, &pool, &self.health)
                    .map_err(|()| Error::Panic)?,
            };
            let Some(i) = picked else {
                if pool.avoid.is_empty() {
                    break;
                }
                // Every available endpoint was tried already: a repeat beats
                // failing the retry.
                pool.avoid = &[];
                continue;
            };
            let (Some(state), Some(handle)) = (snap.states.get(i), snap.lane(i, lane)) else {
                break;
            };
            if let Some(guard) = self.health.admit(state, handle, cap, now, now_ns) {
                scope::report_pick(state.id());
                return Ok((snap.entries[i].service.clone(), guard));
            }
        }
        Err(self.health.explain(&snap.states, route, cap, now))
    }
}
