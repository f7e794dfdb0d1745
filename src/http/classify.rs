//! [`Classifier`]: what an HTTP exchange says about the endpoint.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::io;
use std::time::Duration;

use ::http::header::RETRY_AFTER;
use ::http::{HeaderMap, StatusCode};

use crate::classify::{Classify, FailureKind, Outcome};

/// Classifies HTTP responses and client errors for
/// [`Balance`](crate::Balance):
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
/// `retry_after` is read from a `Retry-After` header in either form
/// (`Retry-After: 5` or an HTTP date, measured from the system clock; a
/// date in the past is no hint). `Balance` caps the hint it applies. Errors are
/// classified through [`ClassifyError`], implemented for hyper-util's and
/// reqwest's errors, `io::Error`, `Box<dyn Error + Send + Sync>` and
/// `Infallible`. Cost: one status match and, for 429/503-class answers, one
/// header lookup.
#[derive(Debug, Clone, Copy, Default)]
pub struct Classifier;

impl Classifier {
    /// The outcome a status code and its headers say.
    pub fn status(status: StatusCode, headers: &HeaderMap) -> Outcome {
        match status.as_u16() {
            502..=504 => Outcome::Failure(FailureKind::Gateway {
                retry_after: retry_after(headers),
            }),
            429 => Outcome::Failure(FailureKind::Overloaded {
                retry_after: retry_after(headers),
            }),
            500..=599 => Outcome::Failure(FailureKind::Error),
            _ => Outcome::Success,
        }
    }
}

impl<B, E> Classify<::http::Response<B>, E> for Classifier
where
    E: ClassifyError,
{
    fn classify(&self, result: Result<&::http::Response<B>, &E>, _: Duration) -> Outcome {
        match result {
            Ok(res) => Self::status(res.status(), res.headers()),
            Err(e) => Outcome::Failure(e.failure_kind()),
        }
    }
}

/// `Retry-After` as a duration, if present and well-formed.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    at.duration_since(std::time::SystemTime::now()).ok()
}

/// The kind of failure an HTTP client's error is, for [`Classifier`].
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

impl ClassifyError for io::Error {
    fn failure_kind(&self) -> FailureKind {
        io_kind(self).unwrap_or(FailureKind::Error)
    }
}

impl ClassifyError for Box<dyn StdError + Send + Sync> {
    fn failure_kind(&self) -> FailureKind {
        let err: &(dyn StdError + 'static) = &**self;
        known_kind(err)
            .or_else(|| chain_kind(err))
            .unwrap_or(FailureKind::Error)
    }
}

/// The kind of an error whose concrete type is one this crate knows.
fn known_kind(err: &(dyn StdError + 'static)) -> Option<FailureKind> {
    if let Some(e) = err.downcast_ref::<::hyper_util::client::legacy::Error>() {
        return Some(e.failure_kind());
    }
    #[cfg(feature = "reqwest")]
    if let Some(e) = err.downcast_ref::<::reqwest::Error>() {
        return Some(e.failure_kind());
    }
    None
}

/// Walks `err` and its sources for an I/O error or a tokio timeout.
pub(crate) fn chain_kind(err: &(dyn StdError + 'static)) -> Option<FailureKind> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(kind) = e.downcast_ref::<io::Error>().and_then(io_kind) {
            return Some(kind);
        }
        if e.is::<tokio::time::error::Elapsed>() || e.is::<tower::timeout::error::Elapsed>() {
            return Some(FailureKind::Timeout);
        }
        // `io::Error::source` skips the error it wraps; look at it too.
        let wrapped = e
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn StdError + 'static));
        cur = wrapped.or_else(|| e.source());
    }
    None
}

/// The failure kind an I/O error kind says, if it says one.
fn io_kind(e: &io::Error) -> Option<FailureKind> {
    use io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused | ConnectionReset | ConnectionAborted | NotConnected
        | AddrNotAvailable | HostUnreachable | NetworkUnreachable => Some(FailureKind::Connect),
        TimedOut => Some(FailureKind::Timeout),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, retry: Option<&str>) -> Outcome {
        let mut res = ::http::Response::new(());
        *res.status_mut() = StatusCode::from_u16(code).unwrap();
        if let Some(r) = retry {
            res.headers_mut().insert(RETRY_AFTER, r.parse().unwrap());
        }
        Classify::<_, io::Error>::classify(&Classifier, Ok(&res), Duration::ZERO)
    }

    #[test]
    fn statuses() {
        assert_eq!(status(200, None), Outcome::Success);
        assert_eq!(status(404, None), Outcome::Success);
        assert_eq!(status(500, None), Outcome::Failure(FailureKind::Error));
        let gw = |s| Outcome::Failure(FailureKind::Gateway { retry_after: s });
        assert_eq!(status(502, None), gw(None));
        assert_eq!(status(503, Some("7")), gw(Some(Duration::from_secs(7))));
        assert_eq!(status(504, Some("Wed, 21 Oct 2015 07:28:00 GMT")), gw(None));
        assert_eq!(status(504, Some("soon")), gw(None));
        let later = std::time::SystemTime::now() + Duration::from_secs(120);
        let Outcome::Failure(kind) = status(503, Some(&httpdate::fmt_http_date(later))) else {
            panic!("503 is a failure");
        };
        let hint = kind.retry_after().unwrap();
        assert!(
            hint > Duration::from_secs(100) && hint <= Duration::from_secs(120),
            "{hint:?}"
        );
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
