//! [`Retry`]: the service a [`RetryLayer`](super::RetryLayer) wraps around
//! another.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tower_service::Service;

use super::future::ResponseFuture;
use super::layer::Shared;
use super::replay::Replay;
use super::stats::RetryStats;
use super::{Budget, Error};
use crate::classify::Classify;
use crate::model::{current_lane, mask_for_cores};

/// Retries, backs off and hedges calls to `S` (usually a
/// [`Balance`](crate::Balance)); see the [module docs](super).
///
/// The first attempt of each call goes to the service that was polled
/// ready; later attempts and hedges go to a clone of the wrapped service,
/// made only when a call needs one. Cloning is cheap when `S` is (one
/// `Arc` for the shared state).
pub struct Retry<S, R, C> {
    pub(crate) inner: S,
    /// One handle per lane (see [`Own`]); a call takes its thread's.
    pub(crate) owns: Arc<[Arc<Own<S, R>>]>,
    pub(crate) classify: C,
}

/// What one wrapped service and its clones share: the layer's state, and
/// the service later attempts are cloned from.
///
/// Cloning the inner service on every call (to keep one for retries, as
/// `tower::retry` does) cost a `Balance` two reference counts up and two
/// down per request, on lines every thread calling it writes (two threads
/// cloning one `Balance` pay for it most; measured: see
/// docs/performance.md); most calls never retry, so the clone is made when
/// one does.
pub(crate) struct Common<S, R> {
    pub(crate) shared: Arc<Shared<R>>,
    spare: Mutex<S>,
    /// A lost hint was warned about (once per wrapped service: see
    /// [`Tried::record`](super::attempt::Tried::record)).
    hint_lost_warned: AtomicBool,
}

/// One thread's handle on a wrapped service's [`Common`]: what a call's
/// future holds. A future must own what it keeps (it is `'static`), so
/// each call takes a reference count. With one `Arc` for every thread,
/// that count was a line every thread wrote twice per request, and two
/// threads sharing a retry layer moved barely more requests than one
/// (docs/performance.md, "The retry layer on two threads"). So each lane
/// (threads numbered as the balancer's lanes number them, one lane per
/// core up to eight) has a handle of its own, alone on its line: a
/// wrapped service keeps one `Arc` of 256 bytes per lane.
#[repr(align(128))]
pub(crate) struct Own<S, R>(Arc<Common<S, R>>);

impl<S, R> Deref for Own<S, R> {
    type Target = Common<S, R>;

    fn deref(&self) -> &Common<S, R> {
        &self.0
    }
}

impl<S: Clone, R> Own<S, R> {
    /// A handle per lane on a new [`Common`] over `inner`.
    pub(crate) fn lanes(shared: Arc<Shared<R>>, inner: &S) -> Arc<[Arc<Self>]> {
        let common = Arc::new(Common {
            shared,
            spare: Mutex::new(inner.clone()),
            hint_lost_warned: AtomicBool::new(false),
        });
        (0..=mask_for_cores())
            .map(|_| Arc::new(Own(Arc::clone(&common))))
            .collect()
    }
}

impl<S: Clone, R> Common<S, R> {
    /// A clone of the wrapped service, for a later attempt.
    pub(crate) fn spare(&self) -> S {
        // Cloning holds no invariant a panic could break halfway.
        self.spare.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl<S, R> Common<S, R> {
    /// True the first time it is asked, false ever after.
    pub(crate) fn first_lost_hint(&self) -> bool {
        !self.hint_lost_warned.swap(true, Ordering::Relaxed)
    }
}

impl<S: Clone, R, C: Clone> Clone for Retry<S, R, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            owns: Arc::clone(&self.owns),
            classify: self.classify.clone(),
        }
    }
}

impl<S: std::fmt::Debug, R, C> std::fmt::Debug for Retry<S, R, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retry")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, R, C> Retry<S, R, C> {
    /// Counters shared with the layer and every service it made.
    pub fn stats(&self) -> &RetryStats {
        &self.owns[0].shared.stats
    }

    /// The retry budget shared with the layer.
    pub fn budget(&self) -> &Budget {
        &self.owns[0].shared.budget
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, Req, R, C> Service<Req> for Retry<S, R, C>
where
    S: Service<Req> + Clone,
    R: Replay<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S, Req, R, C>;

    /// Ready when the inner service is.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    /// Deposits into the budget, keeps what later attempts are copied from
    /// if the request may be replayed, and sends the first attempt to the
    /// ready service. Cost on top of the inner call: one budget lock (the
    /// calling thread's shard), one copy of the request when retries are
    /// enabled (for a streaming body, a shared record instead), one `Arc`
    /// clone (the calling thread's handle), one count on the calling
    /// thread's line and one clone of the classifier.
    #[inline]
    fn call(&mut self, req: Req) -> Self::Future {
        let own = &self.owns[current_lane(self.owns.len() - 1)];
        let shared = &own.shared;
        shared.stats.requests.add();
        let now = shared.clock.read();
        shared.budget.deposit_at(now.at);
        let own_deadline = shared.replay.deadline(&req);
        let (req, kept) = if shared.max_attempts > 1 {
            shared.replay.keep(req)
        } else {
            (req, None)
        };
        let deadline = match (shared.deadline, own_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        ResponseFuture::send(
            &mut self.inner,
            req,
            Arc::clone(own),
            self.classify.clone(),
            kept,
            now,
            deadline,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::{Layer, service_fn};

    use super::*;
    use crate::classify::ErrIsFailure;
    use crate::retry::{CloneRequest, RetryLayer};

    /// Every lane's handle is its own `Arc` (its own reference count) on
    /// the one state the wrapped service's clones share: one spare, one
    /// warning about lost hints.
    #[test]
    fn each_lane_has_its_own_handle_on_one_shared_state() {
        let layer = RetryLayer::builder()
            .replay(CloneRequest)
            .classify(ErrIsFailure)
            .build()
            .expect("valid config");
        let svc = layer.layer(service_fn(|r: u32| async move { Ok::<_, Infallible>(r) }));
        let owns = &Retry::clone(&svc).owns;
        assert!(Arc::ptr_eq(owns, &svc.owns), "clones share the handles");
        assert_eq!(owns.len(), mask_for_cores() + 1);
        for (i, own) in owns.iter().enumerate() {
            assert!(Arc::ptr_eq(&own.0, &owns[0].0), "one shared state");
            for other in &owns[..i] {
                assert!(!Arc::ptr_eq(own, other), "a count per lane");
            }
        }
        let first: Vec<bool> = owns.iter().map(|o| o.first_lost_hint()).collect();
        assert_eq!(first.iter().filter(|&&f| f).count(), 1, "{first:?}");
    }
}
