//! Classifying what a balancer returns, for the layers above it: the retry
//! layer's default ([`Inherit`]) takes the balancer's own classifier.

use std::time::Duration;

use super::{Advice, Classify, FailureKind, Outcome};
use crate::admission::Completion;

/// A service that says how its results are classified, so a layer above it
/// needs no classifier of its own: [`Balance`](crate::Balance) hands out
/// its classifier, wrapped in [`Above`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no classifier a retry layer above it could use",
    note = "the retry layer's default classifier is the `Balance`'s below it; over `{Self}`, give the layer one: `.classify(tower_lb::classify::ErrIsFailure)` or `.classify(tower_lb::http::Classifier::new())`"
)]
pub trait Classified {
    /// The classifier of this service's results.
    type Classifier;

    /// The classifier of this service's results.
    fn classifier(&self) -> Self::Classifier;
}

/// The retry layer's default classifier source: the classifier of the
/// balancer it wraps ([`Classified`]), so the classifier is set once for
/// the whole stack.
#[derive(Debug, Default)]
pub struct Inherit;

/// A balancer's classifier `C`, classifying the balancer's results: its
/// responses and its endpoints' errors as `C` does, its own errors by
/// [`refusal_kind`] (a refusal never reached an endpoint: `Connect`; the
/// balancer's timeout: `Timeout`; every endpoint at its cap: `Overloaded`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Above<C>(pub C);

/// The failure kind of a balancer's own error (`None` for an endpoint's).
pub fn refusal_kind<E>(error: &crate::error::Error<E>) -> Option<FailureKind> {
    match error {
        crate::error::Error::Inner(_) => None,
        crate::error::Error::Timeout => Some(FailureKind::Timeout),
        crate::error::Error::Overloaded => Some(FailureKind::Overloaded { retry_after: None }),
        _ => Some(FailureKind::Connect),
    }
}

impl<C, R, E> Classify<R, crate::error::Error<E>> for Above<C>
where
    C: Classify<R, E>,
{
    type Response = R;

    #[inline]
    fn classify(&self, result: Result<&R, &crate::error::Error<E>>, latency: Duration) -> Outcome {
        match result {
            Ok(r) => self.0.classify(Ok(r), latency),
            Err(crate::error::Error::Inner(e)) => self.0.classify(Err(e), latency),
            Err(e) => refusal_kind(e).map_or(Outcome::Ignore, Outcome::Failure),
        }
    }

    fn complete(&self, response: R, completion: Completion) -> R {
        completion.finish_at_answer();
        response
    }

    #[inline]
    fn advise(&self, result: Result<&R, &crate::error::Error<E>>, outcome: Outcome) -> Advice {
        match result {
            Ok(r) => self.0.advise(Ok(r), outcome),
            Err(crate::error::Error::Inner(e)) => self.0.advise(Err(e), outcome),
            Err(crate::error::Error::AllUnavailable(u)) => Advice::Backoff {
                at_least: u.retry_in,
            },
            Err(_) => Advice::from_outcome(outcome),
        }
    }
}
