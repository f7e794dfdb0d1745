//! [`Classifier`]: what a gRPC exchange says about the endpoint, read from
//! `grpc-status` in the headers (trailers-only answers) or the trailers.

use std::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use tonic::Code;

use crate::admission::Completion;
use crate::classify::{Advice, Classify, FailureKind, MAX_RETRY_AFTER, Outcome};
use crate::http::{ClientErrors, Common, EndOfStream, ErrorHook, TrackBody, common_setters};
use crate::orca::LoadReport;

/// The header a server sets to tell a client when to retry, in
/// milliseconds (gRPC A6).
pub const PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

/// The gRPC classifier for [`Balance`](crate::Balance) over tonic channels
/// and the retry layer above it.
///
/// A call's status comes from `grpc-status`: in the response headers for a
/// trailers-only answer (a status and no message), else in the trailers,
/// which the tracked body reads when the stream ends (so a stream that
/// fails midway counts). An HTTP status other than 200 is mapped to a code
/// as gRPC's HTTP mapping says (502, 503, 504 and 429 are `UNAVAILABLE`).
/// Each code's outcome, by default:
///
/// | code | outcome | why |
/// |---|---|---|
/// | `OK` | success | |
/// | `UNAVAILABLE` | `Failure(Gateway)` | the server is not serving (Envoy maps it to 503 for outlier detection) |
/// | `RESOURCE_EXHAUSTED` | `Failure(Overloaded)` | the server sheds load |
/// | `DEADLINE_EXCEEDED` | `Failure(Timeout)` | the server ran out of time |
/// | `INTERNAL`, `UNKNOWN`, `DATA_LOSS` | `Failure(Error)` | a server fault |
/// | `CANCELLED` | `Ignore` | the caller cancelled: says nothing about the server |
/// | every other code | success | the caller's mistake (`NOT_FOUND`, `INVALID_ARGUMENT`, ...) or an application answer |
///
/// A stream that ends without a status, or whose body errs, is a
/// `Failure(Error)`. Transport errors (the channel's) are told apart by the
/// error hook, as in [`http::Classifier`](crate::http::Classifier): connect
/// failures are `Connect`.
///
/// **Server-reported load** (gRPC A51): the `endpoint-load-metrics-bin`
/// trailer (an `OrcaLoadReport`, base64 on the wire), or the same in the
/// headers of a trailers-only answer, and the text
/// [`endpoint-load-metrics`](crate::orca::HEADER) header, are fed into the
/// endpoint's model (see [`orca`](crate::orca));
/// [`load_reports(false)`](Self::load_reports) turns it off.
///
/// **Retries** (gRPC A6): only codes in [`retry_on`](Self::retry_on)
/// (default `UNAVAILABLE`) are retried, and only when their status comes
/// with the headers (a trailers-only answer: the call is not committed). A
/// `grpc-retry-pushback-ms` header sets the delay before the retry exactly
/// (capped at [`MAX_RETRY_AFTER`]); a negative or malformed one stops
/// retrying. For hedging, the codes in `retry_on` are A6's non-fatal codes.
///
/// ```
/// use tonic::Code;
/// use tower_lb::classify::{FailureKind, Outcome};
/// use tower_lb::grpc::Classifier;
///
/// let c = Classifier::new()
///     .code(Code::NotFound, Outcome::Failure(FailureKind::Error))
///     .retry_on([Code::Unavailable, Code::ResourceExhausted]);
/// assert_eq!(c.outcome(Code::NotFound), Outcome::Failure(FailureKind::Error));
/// assert!(c.retries(Code::ResourceExhausted));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Classifier<H = ClientErrors> {
    codes: Codes,
    retry_on: u32,
    /// Tracking, load reports and the error hook (shared with HTTP's).
    common: Common<H>,
}

/// Every code's outcome, indexed by code number.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Codes([Outcome; 17]);

impl Default for Codes {
    fn default() -> Self {
        let mut c = [Outcome::Success; 17];
        c[Code::Cancelled as usize] = Outcome::Ignore;
        c[Code::Unknown as usize] = Outcome::Failure(FailureKind::Error);
        c[Code::DeadlineExceeded as usize] = Outcome::Failure(FailureKind::Timeout);
        c[Code::ResourceExhausted as usize] =
            Outcome::Failure(FailureKind::Overloaded { retry_after: None });
        c[Code::Internal as usize] = Outcome::Failure(FailureKind::Error);
        c[Code::Unavailable as usize] =
            Outcome::Failure(FailureKind::Gateway { retry_after: None });
        c[Code::DataLoss as usize] = Outcome::Failure(FailureKind::Error);
        Codes(c)
    }
}

fn bit(code: Code) -> u32 {
    1 << (code as u32)
}

impl Classifier {
    /// The default mapping (the table above), retries on `UNAVAILABLE`,
    /// body tracking, transport errors told apart by [`ClientErrors`].
    pub fn new() -> Self {
        Self {
            codes: Codes::default(),
            retry_on: bit(Code::Unavailable),
            common: Common::new(),
        }
    }
}

impl Default for Classifier {
    fn default() -> Self {
        Self::new()
    }
}

common_setters!(Classifier { codes, retry_on });

impl<H> Classifier<H> {
    /// Sets what `code` says about the endpoint.
    pub fn code(mut self, code: Code, outcome: Outcome) -> Self {
        self.codes.0[code as usize] = outcome;
        self
    }

    /// The codes the retry layer retries (A6's `retryableStatusCodes`, and
    /// the non-fatal codes of hedging); default `UNAVAILABLE` only. An
    /// empty set retries nothing but transport errors.
    pub fn retry_on(mut self, codes: impl IntoIterator<Item = Code>) -> Self {
        self.retry_on = codes.into_iter().fold(0, |set, c| set | bit(c));
        self
    }

    /// What `code` says about the endpoint.
    pub fn outcome(&self, code: Code) -> Outcome {
        self.codes.0[code as usize]
    }

    /// Whether the retry layer retries `code`.
    pub fn retries(&self, code: Code) -> bool {
        self.retry_on & bit(code) != 0
    }

    /// The status a response head carries: the HTTP status mapped to a
    /// code, else `grpc-status` (a trailers-only answer), else `None` (the
    /// status is in the trailers).
    pub fn head_code(status: StatusCode, headers: &HeaderMap) -> Option<Code> {
        if status != StatusCode::OK {
            return Some(http_code(status));
        }
        headers
            .get(tonic::Status::GRPC_STATUS)
            .map(|v| Code::from_bytes(v.as_bytes()))
    }
}

/// gRPC's mapping of HTTP statuses to codes, for answers that are not 200.
fn http_code(status: StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// The retry delay a trailers-only answer asks for: `Ok(None)` without the
/// header, `Err(())` for a negative or malformed one (A6: stop retrying).
fn pushback(headers: &HeaderMap) -> Result<Option<Duration>, ()> {
    let Some(v) = headers.get(PUSHBACK_HEADER) else {
        return Ok(None);
    };
    let ms: i64 = v.to_str().map_err(|_| ())?.trim().parse().map_err(|_| ())?;
    let ms = u64::try_from(ms).map_err(|_| ())?;
    Ok(Some(Duration::from_millis(ms).min(MAX_RETRY_AFTER)))
}

/// Reads the status from the trailers when the stream ends.
#[derive(Debug, Clone, Copy)]
pub struct Trailers {
    codes: Codes,
    load_reports: bool,
}

impl EndOfStream for Trailers {
    fn end(&self, head: Outcome, trailers: Option<&HeaderMap>) -> Outcome {
        if head != Outcome::Success {
            return head;
        }
        match trailers.and_then(|t| t.get(tonic::Status::GRPC_STATUS)) {
            Some(v) => self.codes.0[Code::from_bytes(v.as_bytes()) as usize],
            // A stream must end with a status; one without is broken.
            None => Outcome::Failure(FailureKind::Error),
        }
    }

    #[inline]
    fn trailers(&self, trailers: &HeaderMap, completion: &Completion) {
        if self.load_reports {
            completion.read_load(LoadReport::from_headers(trailers), true);
        }
    }
}

/// For `http::Response<B>` from a tonic channel: the table above, and the
/// body wrapped in a [`TrackBody`] that reads the trailers.
impl<B, E, H> Classify<Response<B>, E> for Classifier<H>
where
    H: ErrorHook<E>,
    B: Send + 'static,
{
    type Response = Response<TrackBody<B, Trailers>>;

    fn classify(&self, result: Result<&Response<B>, &E>, _latency: Duration) -> Outcome {
        match result {
            Err(e) => self.common.error(e),
            Ok(res) => match Self::head_code(res.status(), res.headers()) {
                Some(code) => self.outcome(code),
                // Provisional: the trailers decide.
                None => Outcome::Success,
            },
        }
    }

    fn complete(&self, response: Response<B>, completion: Completion) -> Self::Response {
        // A status in the head is final: nothing the body says changes it.
        if self.common.load_reports {
            // A trailers-only answer carries its report in the headers.
            completion.read_load(LoadReport::from_headers(response.headers()), false);
        }
        let trailers = Trailers {
            codes: self.codes,
            load_reports: self.common.load_reports,
        };
        response.map(|body| TrackBody::new(body, completion, self.common.track, trailers))
    }

    fn advise(&self, result: Result<&Response<B>, &E>, outcome: Outcome) -> Advice {
        let res = match result {
            Err(_) => return Advice::from_outcome(outcome),
            Ok(res) => res,
        };
        match Self::head_code(res.status(), res.headers()) {
            Some(code) if self.retries(code) => match pushback(res.headers()) {
                Ok(Some(delay)) => Advice::After(delay),
                Ok(None) => Advice::Backoff { at_least: None },
                Err(()) => Advice::Refused,
            },
            // Not retryable, or committed (the status comes in trailers).
            _ => Advice::Stop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, headers: &[(&str, &str)]) -> Response<()> {
        let mut b = Response::builder().status(status);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    fn judge(c: &Classifier, r: &Response<()>) -> (Outcome, Advice) {
        let o = Classify::<_, std::io::Error>::classify(c, Ok(r), Duration::ZERO);
        (o, Classify::<_, std::io::Error>::advise(c, Ok(r), o))
    }

    #[test]
    fn codes_in_headers_http_statuses_and_trailers() {
        let c = Classifier::new();
        let unavailable = Outcome::Failure(FailureKind::Gateway { retry_after: None });
        assert_eq!(
            judge(&c, &head(200, &[("grpc-status", "14")])),
            (unavailable, Advice::Backoff { at_least: None })
        );
        assert_eq!(
            judge(&c, &head(200, &[("grpc-status", "5")])),
            (Outcome::Success, Advice::Stop)
        );
        assert_eq!(judge(&c, &head(503, &[])).0, unavailable);
        assert_eq!(judge(&c, &head(404, &[])).0, Outcome::Success); // UNIMPLEMENTED
        assert_eq!(
            judge(&c, &head(500, &[])).0,
            Outcome::Failure(FailureKind::Error)
        );
        // No status in the head: provisional success, committed.
        assert_eq!(judge(&c, &head(200, &[])), (Outcome::Success, Advice::Stop));
        let t = Trailers {
            codes: c.codes,
            load_reports: true,
        };
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", "14".parse().unwrap());
        assert_eq!(t.end(Outcome::Success, Some(&trailers)), unavailable);
        trailers.insert("grpc-status", "0".parse().unwrap());
        assert_eq!(t.end(Outcome::Success, Some(&trailers)), Outcome::Success);
        assert_eq!(
            t.end(Outcome::Success, None),
            Outcome::Failure(FailureKind::Error)
        );
        // Garbage is UNKNOWN: a failure.
        trailers.insert("grpc-status", "99".parse().unwrap());
        assert_eq!(
            t.end(Outcome::Success, Some(&trailers)),
            Outcome::Failure(FailureKind::Error)
        );
    }

    #[test]
    fn pushback_sets_or_stops_the_retry() {
        let c = Classifier::new();
        let with = |v: &str| {
            judge(
                &c,
                &head(200, &[("grpc-status", "14"), (PUSHBACK_HEADER, v)]),
            )
            .1
        };
        assert_eq!(with("300"), Advice::After(Duration::from_millis(300)));
        assert_eq!(with("0"), Advice::After(Duration::ZERO));
        assert_eq!(with("-1"), Advice::Refused);
        assert_eq!(with("soon"), Advice::Refused);
        assert_eq!(with("99999999999"), Advice::After(MAX_RETRY_AFTER));
    }

    #[test]
    fn codes_and_retry_sets_are_configurable() {
        let c = Classifier::new()
            .retry_on([Code::ResourceExhausted])
            .code(Code::Unavailable, Outcome::Ignore);
        assert!(!c.retries(Code::Unavailable));
        let (o, a) = judge(&c, &head(200, &[("grpc-status", "8")]));
        assert_eq!(
            o,
            Outcome::Failure(FailureKind::Overloaded { retry_after: None })
        );
        assert_eq!(a, Advice::Backoff { at_least: None });
        assert_eq!(
            judge(&c, &head(200, &[("grpc-status", "14")])),
            (Outcome::Ignore, Advice::Stop)
        );
    }
}
