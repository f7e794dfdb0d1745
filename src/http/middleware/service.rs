//! [`BalanceMiddleware`]: the `reqwest_middleware::Middleware` that runs a
//! balanced stack, and what it tells the middleware above it.

use std::future::poll_fn;

use ::http::Extensions;
use reqwest_middleware::{Middleware, Next};
use tower_service::Service;

use super::Attempt;
use crate::balance::{MAX_AVOID, call_avoiding};

/// A `reqwest_middleware::Middleware` that sends each request through a
/// balanced stack `S`: a [`Balance`](crate::Balance) over [`NextClient`](super::NextClient)
/// endpoints (from [`balance`](super::balance)), usually under the
/// crate's [`RetryLayer`](crate::retry::RetryLayer), or any tower stack
/// around one.
///
/// For each request it takes the stack's readiness, wraps the request, a
/// copy of the call's `Extensions` and the rest of the chain in an
/// [`Attempt`], and calls the stack; the picked endpoint points the URL at
/// its replica and sends it on through the rest of the chain. What the
/// stack returns comes back as `reqwest_middleware::Result`: a response
/// (also a final 5xx), the chain's own error as it was, and the
/// balancer's refusals (`NoEndpoints`, every breaker open...) and the
/// retry layer's verdicts (attempts or budget exhausted, timeouts) as
/// `Error::Middleware`, whose source chain leads to the last error.
///
/// **Retries above it.** Each call records, in the call's `Extensions`,
/// the endpoint the balancer picked for it; a later call with the same
/// extensions avoids those endpoints while another is available (up to
/// [`MAX_AVOID`]). `reqwest-retry`'s middleware above this one retries
/// with the same extensions, so its retries go to other replicas. (When
/// `S` is the crate's retry layer, its attempts avoid one another, but each
/// call it gets starts afresh: there only the balancer's failure penalty
/// steers `reqwest-retry`'s next call off the failed replica.)
///
/// Middleware after this one see a copy of the extensions per attempt:
/// what they add to it does not come back up.
///
/// Cost on top of the stack: a clone of the call's extensions and one
/// boxed future per attempt (the rest of the chain's, boxed as every
/// middleware's is).
#[derive(Debug, Clone)]
pub struct BalanceMiddleware<S> {
    inner: S,
}

impl<S> BalanceMiddleware<S> {
    /// Runs every request through `stack`.
    pub fn new(stack: S) -> Self {
        Self { inner: stack }
    }

    /// The stack.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// The endpoints this call's earlier passes through a `BalanceMiddleware`
/// were sent to, kept in the call's extensions.
#[derive(Debug, Clone, Copy, Default)]
struct Tried {
    ids: [u64; MAX_AVOID],
    len: usize,
}

impl Tried {
    fn ids(&self) -> &[u64] {
        &self.ids[..self.len]
    }

    /// Adds `id`; past [`MAX_AVOID`] the oldest is forgotten.
    fn push(&mut self, id: u64) {
        if self.len == MAX_AVOID {
            self.ids.copy_within(1.., 0);
            self.len -= 1;
        }
        self.ids[self.len] = id;
        self.len += 1;
    }
}

#[async_trait::async_trait]
impl<S> Middleware for BalanceMiddleware<S>
where
    S: for<'a> Service<Attempt<'a>, Response = reqwest::Response> + Clone + Send + Sync + 'static,
    for<'a> <S as Service<Attempt<'a>>>::Future: Send,
    for<'a> <S as Service<Attempt<'a>>>::Error: Into<reqwest_middleware::Error>,
{
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let mut stack = self.inner.clone();
        poll_fn(|cx| Service::<Attempt<'_>>::poll_ready(&mut stack, cx))
            .await
            .map_err(Into::into)?;
        let tried = extensions.get::<Tried>().copied().unwrap_or_default();
        let attempt = Attempt::new(req, extensions.clone(), next);
        // The balancer picks inside `call`, on this thread: the scope hands
        // it the endpoints to avoid and hands back the one it picked.
        let (future, picked) = call_avoiding(tried.ids(), || stack.call(attempt));
        if let Some(id) = picked {
            extensions.get_or_insert_default::<Tried>().push(id);
        }
        future.await.map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tried_keeps_the_latest_ids() {
        let mut tried = Tried::default();
        assert!(tried.ids().is_empty());
        for id in 1..=(MAX_AVOID as u64 + 2) {
            tried.push(id);
        }
        let want: Vec<u64> = (3..=(MAX_AVOID as u64 + 2)).collect();
        assert_eq!(tried.ids(), &want[..]);
    }
}
