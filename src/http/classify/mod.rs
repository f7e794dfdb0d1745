//! [`Classifier`]: what an HTTP exchange says about the endpoint — status
//! codes, `Retry-After`, slow calls, and client errors.

mod common;
mod errors;
mod retry_after;

use std::time::{Duration, SystemTime};

use http::header::RETRY_AFTER;
use http::{HeaderMap, Response, StatusCode};

#[cfg(feature = "reqwest-middleware")]
pub(crate) use errors::known_or_chain_kind;
pub use errors::{ClassifyError, ClientErrors, ErrorHook};
pub use retry_after::parse_retry_after;

pub(crate) use common::{Common, common_setters};

use super::body::{KeepHead, TrackBody};
use crate::admission::Completion;
use crate::classify::{Classify, FailureKind, MAX_RETRY_AFTER, Outcome};
use crate::error::{ConfigError, check_positive};
use crate::orca::LoadReport;

/// The HTTP classifier for [`Balance`](crate::Balance) and the retry layer:
/// classifies `http::Response<B>` results (and `reqwest::Response`, with
/// that feature).
///
/// | result | outcome |
/// |---|---|
/// | 502, 503, 504 | `Failure(Gateway { retry_after })` |
/// | 429 | `Failure(Overloaded { retry_after })` |
/// | other 5xx | `Failure(Error)` |
/// | 1xx–3xx, 4xx other than 429 | `Success` (a client's mistake says nothing bad about the endpoint) |
/// | a success slower than [`slow_threshold`](Self::slow_threshold) | `Failure(Slow)` |
/// | connection refused, reset, unreachable; hyper-util or reqwest connect errors | `Failure(Connect)` |
/// | timeouts (I/O, tokio's and tower's `Elapsed`, reqwest's) | `Failure(Timeout)` |
/// | any other error | `Failure(Error)` |
///
/// `Retry-After` is read as delta-seconds or an HTTP-date (see
/// [`parse_retry_after`]) and capped at [`max_retry_after`](Self::max_retry_after)
/// (default [`MAX_RETRY_AFTER`]).
///
/// Errors are told apart by the error hook `H`: by default
/// [`ClientErrors`], which asks the error's [`ClassifyError`] impl
/// (hyper-util's and reqwest's errors, `io::Error`, boxed errors, this
/// crate's own). For an error type of yours, implement [`ClassifyError`]
/// for it, or give [`on_error`](Self::on_error) a closure
/// `Fn(&E) -> FailureKind` (for instance over
/// [`error_kind`](crate::classify::error_kind), which walks a source chain).
///
/// Give the same classifier to the balancer and the retry layer above it,
/// so that what counts against an endpoint is also what gets retried.
///
/// **Server-reported load**: an [`endpoint-load-metrics`](crate::orca::HEADER)
/// header on a response (ORCA's TEXT, JSON or BIN form) is parsed and fed
/// into the endpoint's model, for [`OrcaRoundRobin`](crate::pick::OrcaRoundRobin)
/// and [`PeakEwma::utilization`](crate::pick::PeakEwma::utilization); a value
/// that is no report is counted, never an error. Turn it off with
/// [`load_reports(false)`](Self::load_reports) for endpoints you do not
/// trust to report.
///
/// Cost: a status-code match, a header lookup on 429/502/503/504 only, and
/// one lookup of the load-report header (no allocation; the parse only when
/// it is there).
///
/// ```
/// use std::time::Duration;
/// use tower_lb::classify::{Classify, FailureKind, Outcome};
/// use tower_lb::http::Classifier;
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let c = Classifier::new().slow_threshold(Duration::from_secs(1))?;
/// let res = http::Response::builder().status(503).header("retry-after", "2").body(()).unwrap();
/// let outcome = Classify::<_, std::io::Error>::classify(&c, Ok(&res), Duration::from_millis(5));
/// assert_eq!(
///     outcome,
///     Outcome::Failure(FailureKind::Gateway { retry_after: Some(Duration::from_secs(2)) })
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Classifier<H = ClientErrors> {
    slow: Option<Duration>,
    max_retry_after: Duration,
    /// Tracking, load reports and the error hook (shared with gRPC's).
    pub(super) common: Common<H>,
}

impl Classifier {
    /// Status-code classification, no slow threshold, client errors told
    /// apart by [`ClientErrors`].
    pub fn new() -> Self {
        Self {
            slow: None,
            max_retry_after: MAX_RETRY_AFTER,
            common: Common::new(),
        }
    }
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::new()
    }
}

impl<H> Classifier<H> {
    /// Calls that would be successes but take longer than `threshold` are
    /// `Failure(Slow)`.
    ///
    /// # Errors
    /// `slow_threshold` must be > 0.
    pub fn slow_threshold(mut self, threshold: Duration) -> Result<Self, ConfigError> {
        self.slow = Some(check_positive("slow_threshold", threshold)?);
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

    /// Feeds the load report in `headers`, if any, to `completion`'s
    /// endpoint (when [`load_reports`](Self::load_reports) is on).
    #[inline]
    pub fn read_load(&self, headers: &HeaderMap, completion: &Completion) {
        if self.common.load_reports {
            completion.read_load(LoadReport::from_text_header(headers), false);
        }
    }
}

common_setters!(Classifier {
    slow,
    max_retry_after
});

impl<H> Classifier<H> {
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
        H: ErrorHook<E>,
    {
        self.common.error(error)
    }
}

/// For `http::Response<B>`: the status table above, and the response body
/// wrapped in a [`TrackBody`] that holds the call's in-flight slot until the
/// body ends (see [`track`](Classifier::track)); an error inside the body is
/// a `Failure(Error)` of the endpoint.
impl<B, E, H> Classify<Response<B>, E> for Classifier<H>
where
    H: ErrorHook<E>,
    B: Send + 'static,
{
    type Response = Response<TrackBody<B>>;

    fn classify(&self, result: Result<&Response<B>, &E>, latency: Duration) -> Outcome {
        match result {
            Err(e) => self.error(e),
            Ok(res) => self.response(res.status(), res.headers(), latency),
        }
    }

    #[inline]
    fn complete(&self, response: Response<B>, completion: Completion) -> Self::Response {
        self.read_load(response.headers(), &completion);
        response.map(|body| TrackBody::new(body, completion, self.common.track, KeepHead))
    }
}

#[cfg(test)]
mod tests;
