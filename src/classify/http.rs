//! The HTTP classifier: status codes, `Retry-After`, slow calls.

use std::time::{Duration, SystemTime};

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use super::{Classify, FailureKind, Outcome};
use crate::error::{ConfigError, check_nonzero};

/// The longest `Retry-After` hint taken from a response: 30 s. A server may
/// ask for hours; a client-side balancer that obeyed would park requests far
/// beyond any caller's deadline, so longer hints are cut to this (Envoy caps
/// its rate-limited back-off similarly, at 300 s; RPC paths want far less).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Classifies `http::Response<B>` results.
///
/// | result | outcome |
/// |---|---|
/// | 502, 503, 504 | `Failure(Gateway { retry_after })` |
/// | 429 | `Failure(Overloaded { retry_after })` |
/// | other 5xx | `Failure(Error)` |
/// | 1xx–3xx, 4xx other than 429 | `Success` (a client's mistake says nothing bad about the endpoint) |
/// | a success slower than [`slow_threshold`](Self::slow_threshold) | `Failure(Slow)` |
/// | `Err(e)` | `Failure(kind)`, `kind` from the error hook (default: [`FailureKind::Error`]) |
///
/// `Retry-After` is read as delta-seconds or an HTTP-date (see
/// [`parse_retry_after`]) and capped at [`max_retry_after`](Self::max_retry_after)
/// (default [`MAX_RETRY_AFTER`]).
///
/// Errors carry no status, so by default every `Err` is `Failure(Error)`. To
/// tell connect errors and timeouts apart, install a hook with
/// [`on_error`](Self::on_error): a closure `Fn(&E) -> FailureKind`, or
/// [`StdErrorKind`], which walks a `std::error::Error` source chain with
/// [`error_kind`] (an `io::Error` of kind `ConnectionRefused` is `Connect`,
/// `TimedOut` or a tokio `Elapsed` is `Timeout`). hyper-util's legacy client
/// error answers `is_connect()`; a closure over it maps those to `Connect`.
///
/// Cost: a status-code match, plus a header lookup on 429/502/503/504 only.
///
/// ```
/// use std::time::Duration;
/// use tower_lb::classify::{Classify, FailureKind, HttpClassify, Outcome};
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let c = HttpClassify::new().slow_threshold(Duration::from_secs(1))?;
/// let res = http::Response::builder().status(503).header("retry-after", "2").body(()).unwrap();
/// let outcome = Classify::<_, std::io::Error>::classify(&c, Ok(&res), Duration::from_millis(5));
/// assert_eq!(
///     outcome,
///     Outcome::Failure(FailureKind::Gateway { retry_after: Some(Duration::from_secs(2)) })
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct HttpClassify<F = AnyErrorIsError> {
    slow: Option<Duration>,
    max_retry_after: Duration,
    on_error: F,
}

impl HttpClassify {
    /// Status-code classification, no slow threshold, every `Err` a plain
    /// [`FailureKind::Error`].
    pub fn new() -> Self {
        Self {
            slow: None,
            max_retry_after: MAX_RETRY_AFTER,
            on_error: AnyErrorIsError,
        }
    }
}

impl<F: Default> Default for HttpClassify<F> {
    fn default() -> Self {
        HttpClassify::new().on_error(F::default())
    }
}

impl<F> HttpClassify<F> {
    /// Calls that would be successes but take longer than `threshold` are
    /// `Failure(Slow)`.
    ///
    /// # Errors
    /// `slow_threshold` must be > 0.
    pub fn slow_threshold(mut self, threshold: Duration) -> Result<Self, ConfigError> {
        self.slow = Some(check_nonzero("slow_threshold", threshold)?);
        Ok(self)
    }

    /// The longest `Retry-After` hint taken from a response (default
    /// [`MAX_RETRY_AFTER`]); longer hints are cut to it.
    ///
    /// # Errors
    /// `max_retry_after` must be at most one hour.
    pub fn max_retry_after(mut self, max: Duration) -> Result<Self, ConfigError> {
        if max > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "max_retry_after",
                max,
                "a duration of at most one hour",
            ));
        }
        self.max_retry_after = max;
        Ok(self)
    }

    /// Replaces the hook that turns an `Err` into a [`FailureKind`].
    pub fn on_error<G>(self, on_error: G) -> HttpClassify<G> {
        HttpClassify {
            slow: self.slow,
            max_retry_after: self.max_retry_after,
            on_error,
        }
    }
}

/// Turns an inner service's error into a [`FailureKind`], for
/// [`HttpClassify::on_error`]. Implemented for closures `Fn(&E) -> FailureKind`.
pub trait ErrorKind<E>: Clone + Send + Sync + 'static {
    /// The kind of failure `error` stands for.
    fn kind(&self, error: &E) -> FailureKind;
}

/// The default error hook: every error is [`FailureKind::Error`].
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyErrorIsError;

impl<E> ErrorKind<E> for AnyErrorIsError {
    fn kind(&self, _: &E) -> FailureKind {
        FailureKind::Error
    }
}

/// An error hook for any `std::error::Error`: see [`error_kind`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StdErrorKind;

impl<E: std::error::Error + 'static> ErrorKind<E> for StdErrorKind {
    fn kind(&self, error: &E) -> FailureKind {
        error_kind(error)
    }
}

impl<E, F> ErrorKind<E> for F
where
    F: Fn(&E) -> FailureKind + Clone + Send + Sync + 'static,
{
    fn kind(&self, error: &E) -> FailureKind {
        self(error)
    }
}

/// Walks `error` and its `source()` chain: the first `std::io::Error` of a
/// connection kind (`ConnectionRefused`, `ConnectionReset`,
/// `ConnectionAborted`, `NotConnected`, `AddrNotAvailable`) gives
/// [`FailureKind::Connect`]; an `io::Error` of kind `TimedOut` or a
/// `tokio::time::error::Elapsed` gives [`FailureKind::Timeout`]; anything
/// else is [`FailureKind::Error`]. Cost: one downcast per link of the chain.
pub fn error_kind(error: &(dyn std::error::Error + 'static)) -> FailureKind {
    use std::io::ErrorKind as Io;
    let mut next = Some(error);
    while let Some(e) = next {
        if is_elapsed(e) {
            return FailureKind::Timeout;
        }
        let io = e.downcast_ref::<std::io::Error>();
        if let Some(io) = io {
            match io.kind() {
                Io::TimedOut => return FailureKind::Timeout,
                Io::ConnectionRefused
                | Io::ConnectionReset
                | Io::ConnectionAborted
                | Io::NotConnected
                | Io::AddrNotAvailable
                | Io::HostUnreachable
                | Io::NetworkUnreachable => return FailureKind::Connect,
                _ => {}
            }
        }
        // `io::Error::source` skips the error it wraps; look at that too.
        let wrapped = io
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        next = wrapped.or_else(|| e.source());
    }
    FailureKind::Error
}

/// A timer's "deadline elapsed" error: tokio's, or tower's `timeout` layer's.
fn is_elapsed(e: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "http")]
    if e.is::<tower::timeout::error::Elapsed>() {
        return true;
    }
    e.is::<tokio::time::error::Elapsed>()
}

/// Parses a `Retry-After` value, relative to `now` for the HTTP-date form.
///
/// Accepts delta-seconds (`"120"`) and an HTTP-date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`, or the obsolete RFC 850 and asctime
/// forms). A date in the past gives zero. The result is capped at `max`.
/// Anything else (negative, fractional, garbage) gives `None`.
pub fn parse_retry_after(value: &HeaderValue, now: SystemTime, max: Duration) -> Option<Duration> {
    let s = value.to_str().ok()?.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for a u64 is still "a very long time".
        let secs = s.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(max));
    }
    let at = httpdate::parse_http_date(s).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO).min(max))
}

impl<F> HttpClassify<F> {
    fn retry_after(&self, headers: &HeaderMap) -> Option<Duration> {
        let value = headers.get(RETRY_AFTER)?;
        parse_retry_after(value, SystemTime::now(), self.max_retry_after)
    }

    /// The outcome of an answer with this status and headers that took
    /// `latency`: the table above. Shared by every HTTP client's response
    /// type (`http::Response`, and `reqwest::Response` with that feature).
    pub fn response(&self, status: StatusCode, headers: &HeaderMap, latency: Duration) -> Outcome {
        match status {
            StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => Outcome::Failure(FailureKind::Gateway {
                retry_after: self.retry_after(headers),
            }),
            StatusCode::TOO_MANY_REQUESTS => Outcome::Failure(FailureKind::Overloaded {
                retry_after: self.retry_after(headers),
            }),
            s if s.is_server_error() => Outcome::Failure(FailureKind::Error),
            _ if self.slow.is_some_and(|t| latency > t) => Outcome::Failure(FailureKind::Slow),
            _ => Outcome::Success,
        }
    }

    /// The outcome of a client error, through the error hook.
    pub fn error<E>(&self, error: &E) -> Outcome
    where
        F: ErrorKind<E>,
    {
        Outcome::Failure(self.on_error.kind(error))
    }
}

impl<B, E, F> Classify<Response<B>, E> for HttpClassify<F>
where
    F: ErrorKind<E>,
{
    fn classify(&self, result: Result<&Response<B>, &E>, latency: Duration) -> Outcome {
        match result {
            Err(e) => self.error(e),
            Ok(res) => self.response(res.status(), res.headers(), latency),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(status: u16, retry_after: Option<&str>) -> Response<()> {
        let mut r = Response::new(());
        *r.status_mut() = StatusCode::from_u16(status).unwrap();
        if let Some(v) = retry_after {
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
        }
        r
    }

    fn classify<F: ErrorKind<std::io::Error>>(
        c: &HttpClassify<F>,
        r: &Response<()>,
        ms: u64,
    ) -> Outcome {
        Classify::<_, std::io::Error>::classify(c, Ok(r), Duration::from_millis(ms))
    }

    #[test]
    fn status_codes() {
        let c = HttpClassify::new();
        for s in [502, 503, 504] {
            assert_eq!(
                classify(&c, &res(s, None), 1),
                Outcome::Failure(FailureKind::Gateway { retry_after: None }),
                "{s}"
            );
        }
        assert_eq!(
            classify(&c, &res(429, None), 1),
            Outcome::Failure(FailureKind::Overloaded { retry_after: None })
        );
        for s in [500, 501, 505, 599] {
            assert_eq!(
                classify(&c, &res(s, None), 1),
                Outcome::Failure(FailureKind::Error),
                "{s}"
            );
        }
        for s in [100, 200, 204, 301, 304, 400, 401, 404, 409, 499] {
            assert_eq!(classify(&c, &res(s, None), 1), Outcome::Success, "{s}");
        }
    }

    #[test]
    fn retry_after_seconds_and_cap() {
        let c = HttpClassify::new();
        assert_eq!(
            classify(&c, &res(429, Some("7")), 1),
            Outcome::Failure(FailureKind::Overloaded {
                retry_after: Some(Duration::from_secs(7))
            })
        );
        assert_eq!(
            classify(&c, &res(503, Some("86400")), 1),
            Outcome::Failure(FailureKind::Gateway {
                retry_after: Some(MAX_RETRY_AFTER)
            })
        );
        assert_eq!(
            classify(&c, &res(503, Some("99999999999999999999999")), 1),
            Outcome::Failure(FailureKind::Gateway {
                retry_after: Some(MAX_RETRY_AFTER)
            })
        );
        let c = c.max_retry_after(Duration::from_secs(3)).unwrap();
        assert_eq!(
            classify(&c, &res(503, Some("10")), 1),
            Outcome::Failure(FailureKind::Gateway {
                retry_after: Some(Duration::from_secs(3))
            })
        );
        for bad in ["-1", "1.5", "soon", ""] {
            assert_eq!(
                classify(&c, &res(503, Some(bad)), 1),
                Outcome::Failure(FailureKind::Gateway { retry_after: None }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn retry_after_http_date() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let max = MAX_RETRY_AFTER;
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(
            parse_retry_after(&v("Wed, 21 Oct 2015 07:28:12 GMT"), now, max),
            Some(Duration::from_secs(12))
        );
        // The obsolete RFC 850 form.
        assert_eq!(
            parse_retry_after(&v("Wednesday, 21-Oct-15 07:28:05 GMT"), now, max),
            Some(Duration::from_secs(5))
        );
        // In the past: retry now.
        assert_eq!(
            parse_retry_after(&v("Wed, 21 Oct 2015 07:00:00 GMT"), now, max),
            Some(Duration::ZERO)
        );
        // Far future: capped.
        assert_eq!(
            parse_retry_after(&v("Thu, 22 Oct 2015 07:28:00 GMT"), now, max),
            Some(max)
        );
        // A real response dated a minute ahead of the wall clock.
        let ahead = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let c = HttpClassify::new();
        assert_eq!(
            classify(&c, &res(503, Some(&ahead)), 1),
            Outcome::Failure(FailureKind::Gateway {
                retry_after: Some(MAX_RETRY_AFTER)
            })
        );
    }

    #[test]
    fn slow_threshold() {
        let c = HttpClassify::new()
            .slow_threshold(Duration::from_millis(100))
            .unwrap();
        assert_eq!(classify(&c, &res(200, None), 100), Outcome::Success);
        assert_eq!(
            classify(&c, &res(200, None), 101),
            Outcome::Failure(FailureKind::Slow)
        );
        assert_eq!(
            classify(&c, &res(404, None), 101),
            Outcome::Failure(FailureKind::Slow)
        );
        // A hard failure stays what it is, however slow.
        assert_eq!(
            classify(&c, &res(500, None), 101),
            Outcome::Failure(FailureKind::Error)
        );
    }

    #[test]
    fn config_errors() {
        let e = HttpClassify::new()
            .slow_threshold(Duration::ZERO)
            .unwrap_err();
        assert_eq!(e.field(), "slow_threshold");
        let e = HttpClassify::new()
            .max_retry_after(Duration::from_secs(3601))
            .unwrap_err();
        assert_eq!(e.field(), "max_retry_after");
    }

    #[test]
    fn error_hooks() {
        use std::io;
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let timed_out = io::Error::from(io::ErrorKind::TimedOut);
        let other = io::Error::other("boom");
        let c = HttpClassify::new();
        assert_eq!(
            Classify::<Response<()>, io::Error>::classify(&c, Err(&refused), Duration::ZERO),
            Outcome::Failure(FailureKind::Error)
        );
        let std = c.on_error(StdErrorKind);
        let with_std = |e: &io::Error| {
            Classify::<Response<()>, io::Error>::classify(&std, Err(e), Duration::ZERO)
        };
        assert_eq!(with_std(&refused), Outcome::Failure(FailureKind::Connect));
        assert_eq!(with_std(&timed_out), Outcome::Failure(FailureKind::Timeout));
        assert_eq!(with_std(&other), Outcome::Failure(FailureKind::Error));
        // Through a wrapper's source chain.
        let wrapped = crate::Error::Inner(io::Error::from(io::ErrorKind::ConnectionReset));
        assert_eq!(error_kind(&wrapped), FailureKind::Connect);
        // A closure hook.
        let custom = c.on_error(|_: &io::Error| FailureKind::Timeout);
        assert_eq!(
            Classify::<Response<()>, io::Error>::classify(&custom, Err(&other), Duration::ZERO),
            Outcome::Failure(FailureKind::Timeout)
        );
    }
}
