//! Why a retried request failed.

use std::fmt;

/// Why [`Retry`](super::Retry) gave up on a request.
///
/// A final *response* that the classifier calls a failure (a 503 after the
/// last attempt) is returned as `Ok(response)`, as tower and Envoy do; these
/// variants are for requests that end without a response.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error<E> {
    /// The inner service failed and the request was not retried: the
    /// classifier did not call the error a failure, or the request could not
    /// be replayed (non-idempotent method, unreplayable body), or the inner
    /// service failed its readiness check.
    Inner(E),
    /// Every allowed attempt failed; this is the last attempt's error.
    AttemptsExhausted {
        /// Attempts made, hedges included.
        attempts: u32,
        /// The last attempt's error.
        last: E,
    },
    /// A retry was due but the retry budget was empty.
    BudgetExhausted {
        /// Attempts made, hedges included.
        attempts: u32,
        /// The last attempt's error, or `None` if it hit the per-try timeout.
        last: Option<E>,
    },
    /// The last attempt hit the per-try timeout and no retry followed
    /// (attempts ran out or the request cannot be replayed).
    TryTimeout {
        /// Attempts made, hedges included.
        attempts: u32,
    },
    /// The overall deadline passed: a running attempt was cancelled, or the
    /// wait before the next attempt would have ended after it.
    DeadlineElapsed {
        /// Attempts made, hedges included.
        attempts: u32,
        /// The last finished attempt's error, if the last one failed so.
        last: Option<E>,
    },
}

impl<E> Error<E> {
    /// The last inner error, if there is one.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(e) | Error::AttemptsExhausted { last: e, .. } => Some(e),
            Error::BudgetExhausted { last, .. } | Error::DeadlineElapsed { last, .. } => last,
            Error::TryTimeout { .. } => None,
        }
    }

    /// True when the request ended because time ran out with no answer:
    /// the last attempt hit its per-try timeout, or the deadline passed
    /// while an attempt was still waiting (a gateway answers these with 504;
    /// a deadline that passed while retrying errors is still those errors,
    /// a 502).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            Error::TryTimeout { .. }
                | Error::DeadlineElapsed { last: None, .. }
                | Error::BudgetExhausted { last: None, .. }
        )
    }

    /// Attempts made (1 for [`Error::Inner`]).
    pub fn attempts(&self) -> u32 {
        match self {
            Error::Inner(_) => 1,
            Error::AttemptsExhausted { attempts, .. }
            | Error::BudgetExhausted { attempts, .. }
            | Error::TryTimeout { attempts }
            | Error::DeadlineElapsed { attempts, .. } => *attempts,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Inner(e) => write!(f, "{e}"),
            Error::AttemptsExhausted { attempts, last } => {
                write!(f, "all {attempts} attempts failed; last: {e}", e = last)
            }
            Error::BudgetExhausted { attempts, last } => {
                write!(f, "retry budget exhausted after {attempts} attempts")?;
                last.as_ref().map_or(Ok(()), |e| write!(f, "; last: {e}"))
            }
            Error::TryTimeout { attempts } => {
                write!(f, "attempt {attempts} hit the per-try timeout")
            }
            Error::DeadlineElapsed { attempts, last } => {
                write!(f, "deadline elapsed after {attempts} attempts")?;
                last.as_ref().map_or(Ok(()), |e| write!(f, "; last: {e}"))
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Inner(e) | Error::AttemptsExhausted { last: e, .. } => Some(e),
            Error::BudgetExhausted { last, .. } | Error::DeadlineElapsed { last, .. } => {
                last.as_ref().map(|e| e as _)
            }
            Error::TryTimeout { .. } => None,
        }
    }
}
