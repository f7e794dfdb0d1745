//! [`Balance`] and the state its clones share, and its `Service` impl:
//! pick at `call`, with the request in hand ([`Shared::dispatch`], the
//! balancer's core).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use tower::ServiceExt;
use tower_service::Service;

use super::future::ResponseFuture;
use super::{Label, Membership, Observe, Snapshot};
use crate::admission::{CapCell, Census, InFlight, Terms, admit, explain};
use crate::classify::{Classify, ErrIsFailure};
use crate::error::Error;
use crate::health::Health;
use crate::model::{Model, RampMemory, current_lane};
use crate::pick::{PeakEwma, Pick, Picker, Pool};
use crate::rng::RngSource;
use crate::route::Router;
use crate::scope;

/// A pick can lose a race for the last in-flight slot of a capped endpoint,
/// or for the last half-open probe of a breaker; it is repeated this many
/// times before reporting why no endpoint could take the call.
const PICK_ATTEMPTS: usize = 3;

/// A load balancer over a dynamic set of endpoints of type `S`, keyed by `K`.
///
/// `P` is the [picker](crate::pick) (default [`PeakEwma`]) and `C` the
/// [classifier](crate::classify::Classify) (default: `Err` is a failure).
/// Build one with [`Balance::builder`]; see the [module docs](super).
pub struct Balance<K, S, P: Picker = PeakEwma, C = ErrIsFailure> {
    pub(crate) shared: Arc<Shared<K, S, P, C>>,
    /// This clone's view of the endpoint set, as of [`Shared::generation`]
    /// `seen`: one relaxed compare per call while the set is unchanged,
    /// instead of an `arc_swap` load. (An idle clone keeps the set it last
    /// saw, and the services in it, alive until its next call or its drop.)
    ///
    /// `arc_swap::Cache` does the same by comparing pointers, but holds its
    /// own `Arc` of `Shared`: three reference counts per clone instead of
    /// two, and the retry layer clones its inner service on every request.
    snapshot: Arc<Snapshot<K, S, P::Table>>,
    seen: u64,
}

/// State shared by every clone of one balancer and its handles.
pub(crate) struct Shared<K, S, P: Picker, C> {
    pub(crate) picker: P,
    pub(crate) classify: C,
    pub(crate) set: ArcSwap<Snapshot<K, S, P::Table>>,
    /// Bumped after every swap of `set`, so that clones see a change with
    /// one load (see [`Balance::refresh`]).
    pub(crate) generation: AtomicU64,
    /// Serialises writers (handle calls); readers never take it.
    pub(crate) writer: Mutex<()>,
    pub(crate) model: Arc<Model>,
    /// The census admission keeps, read once per pick.
    pub(crate) census: Arc<Census>,
    pub(crate) health: Arc<Health>,
    pub(crate) rng: RngSource,
    /// The in-flight cap: fixed (settable at run time) and adaptive.
    pub(crate) cap: CapCell,
    pub(crate) timeout: Option<Duration>,
    pub(crate) next_id: AtomicU64,
    pub(crate) labels: Option<Label<K>>,
    pub(crate) observer: Option<Arc<dyn Observe>>,
    /// The route step's settings and callers' distribution.
    pub(crate) router: Arc<Router>,
    /// Ramp positions of removed endpoints (slow start's memory).
    pub(crate) ramps: Mutex<RampMemory>,
    /// The set's size, for those waiting for its first endpoints.
    pub(crate) membership: Arc<Membership>,
}

impl<K, S, P: Picker, C> Balance<K, S, P, C> {
    pub(crate) fn from_shared(shared: Arc<Shared<K, S, P, C>>) -> Self {
        // The generation first: the set loaded after it is at least as new.
        let seen = shared.generation.load(Ordering::Acquire);
        Self {
            snapshot: shared.set.load_full(),
            seen,
            shared,
        }
    }

    /// Reloads this clone's view of the endpoint set if the set changed
    /// since it last looked.
    #[inline]
    fn refresh(&mut self) {
        let now = self.shared.generation.load(Ordering::Acquire);
        if now != self.seen {
            self.snapshot = self.shared.set.load_full();
            self.seen = now;
        }
    }
}

impl<K, S, P: Picker, C> Clone for Balance<K, S, P, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            snapshot: Arc::clone(&self.snapshot),
            seen: self.seen,
        }
    }
}

impl<K, S, P: Picker, C> std::fmt::Debug for Balance<K, S, P, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balance")
            .field("name", &self.shared.health.events.balancer)
            .field("picker", &self.shared.picker.name())
            .field("endpoints", &self.shared.set.load().members.len())
            .finish()
    }
}

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
        let timer = shared.observer.as_ref().and_then(|o| o.pick_started());
        let picked = shared.dispatch(snap, &req);
        if let (Some(o), Some(start)) = (&shared.observer, timer) {
            o.pick_ended(start);
        }
        match picked {
            Ok((service, guard)) => ResponseFuture::running(
                service.oneshot(req),
                guard,
                shared.classify.clone(),
                shared.timeout.map(|t| crate::time::after(scope::now(), t)),
            ),
            Err(e) => {
                shared.census.count_refusal(&e);
                ResponseFuture::failed(e)
            }
        }
    }
}

impl<K, S: Clone, P: Picker, C> Shared<K, S, P, C> {
    /// Picks an endpoint for `req` and takes an in-flight slot on it: the
    /// census says how health restricts the pick, the picker (through the
    /// route step, if any) chooses among the candidates admission admits,
    /// and admission takes the chosen one's slot, or says why none could.
    pub(crate) fn dispatch<Req, E>(
        &self,
        snap: &Snapshot<K, S, P::Table>,
        req: &Req,
    ) -> Result<(S, InFlight), Error<E>>
    where
        P: Pick<Req>,
    {
        if snap.states.is_empty() {
            return Err(Error::NoEndpoints);
        }
        let now_ns = self.model.clock.now_ns_or(scope::raw());
        let route = match &snap.route {
            None => self
                .census
                .route(now_ns, &*self.health)
                .map_err(|()| Error::Panic)?,
            Some(routed) => routed.census(&self.census, &self.health, now_ns),
        };
        let avoid = scope::current_avoid();
        let avoid = avoid.as_ref().map_or(&[][..], |(ids, len)| &ids[..*len]);
        let lane = current_lane(self.model.lane_mask);
        // Read once: a cap changed at run time applies from the next call.
        let mut pool = Pool {
            states: &snap.states,
            sampler: &snap.sampler,
            table: &snap.table,
            now_ns,
            rates: self.model.rates,
            rng: &self.rng,
            lane,
            terms: Terms::new(
                route,
                self.cap.get(),
                avoid,
                now_ns,
                self.model.clock.epoch(),
            ),
        };
        for _ in 0..PICK_ATTEMPTS {
            let picked = match &snap.route {
                None => self.picker.pick(req, &pool),
                Some(routed) => routed
                    .pick(&self.picker, req, &pool, &self.health)
                    .map_err(|()| Error::Panic)?,
            };
            let Some(i) = picked else {
                if pool.terms.avoid.is_empty() {
                    break;
                }
                // Every available endpoint was tried already: a repeat beats
                // failing the retry.
                pool.terms = pool.terms.without_avoid();
                continue;
            };
            let (Some(state), Some(handle)) = (snap.states.get(i), snap.lanes.get(i, lane)) else {
                break;
            };
            if let Some(guard) = admit(&pool.terms, state, handle, now_ns) {
                scope::report_pick(state.id);
                return Ok((snap.entries[i].service.clone(), guard));
            }
        }
        Err(explain(&snap.states, &pool.terms))
    }
}
