//! loadpace's endpoints, seeded, with 5xx answers counted as failures.
//!
//! `loadpace-tower` 0.1.0-rc.4's `AdaptiveEndpoint` builds each endpoint's
//! `loadpace::EndpointController` with `EndpointController::new`, which
//! draws its probe decisions from the thread's generator: its rows could
//! not repeat, even in `--sim`. It also counts every answer as a success,
//! 5xx included. loadpace's guides name the way out of both: drive
//! `EndpointController` directly "for protocol-specific response
//! classification", and build it with `EndpointController::new_with_seed`
//! for simulations and tests. [`Paced`] does that and nothing else: it
//! calls the controller in the order `AdaptiveEndpoint` does (admission in
//! `poll_ready`, a reservation in `call`, dispatch when the pacer says,
//! the answer's outcome and its latency from dispatch), which
//! `lab/tests/rivals.rs` checks against `AdaptiveEndpoint` itself.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use loadpace::{
    DispatchReservation, DispatchState, EndpointConfig, EndpointController, InFlightRequest,
    Outcome,
};
use tokio::sync::Notify;
use tower::Service;
use tower::load::Load;

use crate::run::message::{EndpointError, LabRequest, LabResponse};

/// One endpoint under loadpace's controller.
pub struct Paced<S>(Arc<Shared<S>>);

struct Shared<S> {
    service: tokio::sync::Mutex<S>,
    ctl: Mutex<Ctl>,
    /// Wakes requests waiting for their turn to dispatch.
    turn: Notify,
}

struct Ctl {
    c: EndpointController,
    /// The balancer waiting for a free slot in the horizon.
    admission: Option<Waker>,
}

/// The controller's clock: tokio's, so that the sim's paused clock and the
/// controller's deadlines agree (as in `loadpace-tower`).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl<S> Shared<S> {
    fn ctl(&self) -> MutexGuard<'_, Ctl> {
        self.ctl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the controller; a probe that started or ended in it
    /// wakes the requests waiting to dispatch.
    fn with<T>(&self, f: impl FnOnce(&mut EndpointController) -> T) -> T {
        let (out, changed) = {
            let mut g = self.ctl();
            let before = g.c.active_probe();
            let out = f(&mut g.c);
            (out, before != g.c.active_probe())
        };
        if changed {
            self.turn.notify_waiters();
        }
        out
    }
}

impl<S> Paced<S> {
    /// `service` under a controller built with `config`, its probe
    /// decisions drawn from `seed`.
    pub fn new(service: S, config: EndpointConfig, seed: u64) -> Self {
        Self(Arc::new(Shared {
            service: tokio::sync::Mutex::new(service),
            ctl: Mutex::new(Ctl {
                c: EndpointController::new_with_seed(config, now(), seed),
                admission: None,
            }),
            turn: Notify::new(),
        }))
    }
}

/// The predicted completion of one more request, in seconds (lower is
/// better): what tower's P2C compares.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Cost(pub f64);

impl<S> Load for Paced<S> {
    type Metric = Cost;

    fn load(&self) -> Cost {
        Cost(self.0.with(|c| c.load(now())))
    }
}

impl<S> Service<LabRequest> for Paced<S>
where
    S: Service<LabRequest, Response = LabResponse, Error = EndpointError> + Send + 'static,
    S::Future: Send,
{
    type Response = LabResponse;
    type Error = EndpointError;
    type Future = Pin<Box<dyn Future<Output = Result<LabResponse, EndpointError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), EndpointError>> {
        let mut g = self.0.ctl();
        if g.c.may_schedule() {
            g.admission = None;
            return Poll::Ready(Ok(()));
        }
        if !g
            .admission
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            g.admission = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    fn call(&mut self, req: LabRequest) -> Self::Future {
        let shared = Arc::clone(&self.0);
        // Made here, not in the future: a future dropped before its first
        // poll still frees its slot.
        let reserved = shared.ctl().c.reserve(now());
        let request = reserved.map(|r| Request {
            shared,
            state: State::Queued(r),
        });
        Box::pin(async move {
            match request {
                Ok(mut r) => r.run(req).await,
                Err(_) => Err(EndpointError("loadpace: called without a free slot".into())),
            }
        })
    }
}

/// Where a request is in its life; dropping it ends that life (a queued
/// request's slot is freed, a dispatched one counts as failed).
enum State {
    Queued(DispatchReservation),
    InFlight(InFlightRequest),
    Done,
}

struct Request<S> {
    shared: Arc<Shared<S>>,
    state: State,
}

impl<S> Request<S>
where
    S: Service<LabRequest, Response = LabResponse, Error = EndpointError>,
{
    async fn run(&mut self, req: LabRequest) -> Result<LabResponse, EndpointError> {
        let State::Queued(r) = self.state else {
            return Err(EndpointError("loadpace: request not queued".into()));
        };
        if !self.turn(r).await {
            return Err(cancelled());
        }
        let shared = Arc::clone(&self.shared);
        let mut svc = shared.service.lock().await;
        if let Err(e) = std::future::poll_fn(|cx| svc.poll_ready(cx)).await {
            self.shared.ctl().c.on_admission_failure(now());
            self.finish(Outcome::Failure);
            return Err(e);
        }
        // The pacer may have moved while the service got ready.
        loop {
            let (dispatched, waker) = {
                let mut g = self.shared.ctl();
                let d = g.c.on_dispatched(r, now());
                let w = if d.is_ok() { g.admission.take() } else { None };
                (d, w)
            };
            if let Some(w) = waker {
                w.wake();
            }
            match dispatched {
                Ok(active) => {
                    self.state = State::InFlight(active);
                    break;
                }
                Err(DispatchState::Cancelled) => return Err(cancelled()),
                Err(_) => {
                    self.turn(r).await;
                }
            }
        }
        self.shared.turn.notify_waiters();
        let answer = svc.call(req);
        drop(svc);
        let res = answer.await;
        // The guides' protocol-specific classification: a 5xx answer is a
        // failure of the endpoint, as an error is.
        let outcome = match &res {
            Ok(r) if !r.status().is_server_error() => Outcome::Success,
            _ => Outcome::Failure,
        };
        self.finish(outcome);
        res
    }

    /// Waits until reservation `r` may dispatch; false if it no longer
    /// can (cancelled).
    async fn turn(&self, r: DispatchReservation) -> bool {
        loop {
            let mut woken = pin!(self.shared.turn.notified());
            // Registered before the check, so no change in between is lost.
            woken.as_mut().enable();
            let state = self.shared.with(|c| c.dispatch_state(r, now()));
            match state {
                DispatchState::Ready => return true,
                DispatchState::Cancelled => return false,
                DispatchState::WaitUntil(at) => {
                    let wait = at.saturating_duration_since(now());
                    let _ = tokio::time::timeout(wait, woken).await;
                }
                DispatchState::WaitForPrevious | DispatchState::InflightLimit => woken.await,
            }
        }
    }
}

impl<S> Request<S> {
    /// Ends the request with `outcome`.
    fn finish(&mut self, outcome: Outcome) {
        let at = now();
        match std::mem::replace(&mut self.state, State::Done) {
            State::InFlight(active) => {
                let latency = at.saturating_duration_since(active.dispatched_at());
                self.shared
                    .ctl()
                    .c
                    .on_complete(active, outcome, latency, at);
            }
            State::Queued(r) => {
                let waker = {
                    let mut g = self.shared.ctl();
                    g.c.cancel(r, at);
                    g.admission.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            }
            State::Done => return,
        }
        self.shared.turn.notify_waiters();
    }
}

impl<S> Drop for Request<S> {
    fn drop(&mut self) {
        self.finish(Outcome::Failure);
    }
}

fn cancelled() -> EndpointError {
    EndpointError("loadpace: the reservation was cancelled".into())
}
