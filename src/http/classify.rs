//! [`Classifier`]: what an HTTP exchange says about the endpoint.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::io;

use crate::classify::{ErrorKind, FailureKind, HttpClassify, error_kind};

/// The HTTP classifier for [`Balance`](crate::Balance) and the retry layer,
/// with client errors told apart through [`ClassifyError`]:
///
/// | result | outcome |
/// |---|---|
/// | 502, 503, 504 | `Failure(Gateway { retry_after })` |
/// | 429 | `Failure(Overloaded { retry_after })` |
/// | other 5xx | `Failure(Error)` |
/// | 1xx–4xx other than 429 | `Success` (a 4xx is the caller's mistake, not the endpoint's) |
/// | connection refused, reset, unreachable; hyper-util or reqwest connect errors | `Failure(Connect)` |
/// | timeouts (I/O, tokio's and tower's `Elapsed`, reqwest's) | `Failure(Timeout)` |
/// | any other error | `Failure(Error)` |
///
/// It is [`HttpClassify`] (which reads `Retry-After` in both forms, caps it,
/// and can mark slow calls) with the [`ClientErrors`] hook; build one with
/// `Classifier::default()`.
pub type Classifier = HttpClassify<ClientErrors>;

/// The error hook of [`Classifier`]: asks the error's [`ClassifyError`] impl.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientErrors;

impl<E: ClassifyError> ErrorKind<E> for ClientErrors {
    fn kind(&self, error: &E) -> FailureKind {
        error.failure_kind()
    }
}

/// The kind of failure an HTTP client's error is, for [`Classifier`].
///
/// Implemented for hyper-util's and reqwest's errors, `io::Error`,
/// `Box<dyn Error + Send + Sync>` and `Infallible`.
pub trait ClassifyError {
    /// `Connect` for errors that never reached the endpoint's application,
    /// `Timeout` for timeouts, `Error` otherwise.
    fn failure_kind(&self) -> FailureKind;
}

impl ClassifyError for Infallible {
    fn failure_kind(&self) -> FailureKind {
        match *self {}
    }
}

/// A balancer's error, seen by a layer above it (the retry layer): the
/// endpoint's own error is classified as usual; the balancer's refusals never
/// reached an endpoint (`Connect`), except `Overloaded`, which is one.
impl<E: ClassifyError> ClassifyError for crate::Error<E> {
    fn failure_kind(&self) -> FailureKind {
        match self {
            crate::Error::Inner(e) => e.failure_kind(),
            crate::Error::Overloaded => FailureKind::Overloaded { retry_after: None },
            _ => FailureKind::Connect,
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
        let err: &(dyn StdError + 'static) = &**self;
        known_kind(err).unwrap_or_else(|| error_kind(err))
    }
}

/// The kind of an error whose concrete type is one this crate knows.
fn known_kind(err: &(dyn StdError + 'static)) -> Option<FailureKind> {
    if let Some(e) = err.downcast_ref::<::hyper_util::client::legacy::Error>() {
        return Some(e.failure_kind());
    }
    if let Some(e) = err.downcast_ref::<super::ReplicaError>() {
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
