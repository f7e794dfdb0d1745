//! Client errors: which [`FailureKind`] an HTTP client's error is.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::io;

use crate::classify::{FailureKind, error_kind};

/// Turns an inner service's error into a [`FailureKind`], for
/// [`Classifier::on_error`](super::Classifier::on_error). Implemented for
/// [`ClientErrors`] and for closures `Fn(&E) -> FailureKind`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot tell what kind of failure a `{E}` is",
    note = "implement `tower_lb::http::ClassifyError` for `{E}`, or give the classifier a hook: `Classifier::new().on_error(|e: &{E}| FailureKind::Error)`"
)]
pub trait ErrorHook<E>: Clone + Send + Sync + 'static {
    /// The kind of failure `error` stands for.
    fn kind(&self, error: &E) -> FailureKind;
}

impl<E, F> ErrorHook<E> for F
where
    F: Fn(&E) -> FailureKind + Clone + Send + Sync + 'static,
{
    fn kind(&self, error: &E) -> FailureKind {
        self(error)
    }
}

/// The default error hook of [`Classifier`](super::Classifier): asks the
/// error's [`ClassifyError`] impl.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientErrors;

impl<E: ClassifyError> ErrorHook<E> for ClientErrors {
    fn kind(&self, error: &E) -> FailureKind {
        error.failure_kind()
    }
}

/// The kind of failure an HTTP client's error is, for
/// [`Classifier`](super::Classifier).
///
/// Implemented for hyper-util's and reqwest's errors, `io::Error`,
/// `Box<dyn Error + Send + Sync>`, `Infallible`, this crate's balancer and
/// replica errors; implement it for your own client's error type.
#[diagnostic::on_unimplemented(
    message = "the HTTP classifier cannot tell what kind of failure a `{Self}` is",
    note = "implement `tower_lb::http::ClassifyError` for `{Self}` (one method), or use `Classifier::new().on_error(|e: &{Self}| ...)`"
)]
pub trait ClassifyError {
    /// `Connect` for errors that never reached the endpoint's application,
    /// `Timeout` for timeouts, `Error` otherwise (the default: an error the
    /// classifier knows nothing more about).
    fn failure_kind(&self) -> FailureKind {
        FailureKind::Error
    }
}

impl ClassifyError for Infallible {
    fn failure_kind(&self) -> FailureKind {
        match *self {}
    }
}

/// A balancer's error, seen by a layer above it (the retry layer): the
/// endpoint's own error is classified as usual; the balancer's own as
/// [`refusal_kind`](crate::classify::refusal_kind) says (refusals never
/// reached an endpoint: `Connect`; `Overloaded`; the balancer's `Timeout`).
impl<E: ClassifyError> ClassifyError for crate::error::Error<E> {
    fn failure_kind(&self) -> FailureKind {
        match self {
            crate::error::Error::Inner(e) => e.failure_kind(),
            refused => crate::classify::refusal_kind(refused).unwrap_or(FailureKind::Error),
        }
    }
}

impl ClassifyError for io::Error {
    fn failure_kind(&self) -> FailureKind {
        error_kind(self)
    }
}

impl ClassifyError for Box<dyn StdError + Send + Sync> {
    fn failure_kind(&self) -> FailureKind {
        known_or_chain_kind(&**self)
    }
}

/// The kind of a type-erased error: its own type's, when it is one this
/// crate knows, else what its source chain says.
pub(crate) fn known_or_chain_kind(err: &(dyn StdError + 'static)) -> FailureKind {
    known_kind(err).unwrap_or_else(|| error_kind(err))
}

/// The kind of an error whose concrete type is one this crate knows.
fn known_kind(err: &(dyn StdError + 'static)) -> Option<FailureKind> {
    if let Some(e) = err.downcast_ref::<::hyper_util::client::legacy::Error>() {
        return Some(e.failure_kind());
    }
    if let Some(e) = err.downcast_ref::<crate::http::ReplicaError>() {
        return Some(e.failure_kind());
    }
    #[cfg(feature = "reqwest")]
    if let Some(e) = err.downcast_ref::<::reqwest::Error>() {
        return Some(e.failure_kind());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::Classifier;
    use super::*;
    use crate::classify::{Classify, Outcome};
    use ::http::StatusCode;
    use ::http::header::RETRY_AFTER;
    use std::time::Duration;

    fn status(code: u16, retry: Option<&str>) -> Outcome {
        let mut res = ::http::Response::new(());
        *res.status_mut() = StatusCode::from_u16(code).unwrap();
        if let Some(r) = retry {
            res.headers_mut().insert(RETRY_AFTER, r.parse().unwrap());
        }
        Classify::<_, io::Error>::classify(&Classifier::default(), Ok(&res), Duration::ZERO)
    }

    #[test]
    fn statuses() {
        assert_eq!(status(200, None), Outcome::Success);
        assert_eq!(status(404, None), Outcome::Success);
        assert_eq!(status(500, None), Outcome::Failure(FailureKind::Error));
        let gw = |s| Outcome::Failure(FailureKind::Gateway { retry_after: s });
        assert_eq!(status(502, None), gw(None));
        assert_eq!(status(503, Some("7")), gw(Some(Duration::from_secs(7))));
        // A date in the past means "now"; a far one is capped at 30 s.
        assert_eq!(
            status(504, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            gw(Some(Duration::ZERO))
        );
        assert_eq!(status(504, Some("soon")), gw(None));
        let later = std::time::SystemTime::now() + Duration::from_secs(120);
        let Outcome::Failure(kind) = status(503, Some(&httpdate::fmt_http_date(later))) else {
            panic!("503 is a failure");
        };
        let hint = kind.retry_after().unwrap();
        assert_eq!(hint, crate::classify::MAX_RETRY_AFTER, "{hint:?}");
        assert_eq!(
            status(429, Some(" 2 ")),
            Outcome::Failure(FailureKind::Overloaded {
                retry_after: Some(Duration::from_secs(2))
            })
        );
    }

    #[test]
    fn errors() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(refused.failure_kind(), FailureKind::Connect);
        let boxed: Box<dyn StdError + Send + Sync> = Box::new(io::Error::other(refused));
        assert_eq!(boxed.failure_kind(), FailureKind::Connect);
        let timeout = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(timeout.failure_kind(), FailureKind::Timeout);
        let elapsed: Box<dyn StdError + Send + Sync> =
            Box::new(tower::timeout::error::Elapsed::new());
        assert_eq!(elapsed.failure_kind(), FailureKind::Timeout);
        let other: Box<dyn StdError + Send + Sync> = "boom".into();
        assert_eq!(other.failure_kind(), FailureKind::Error);
    }
}
