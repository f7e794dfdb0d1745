//! What a gateway answers when it cannot forward a request: its own
//! refusals ([`GatewayError`]) and the upstream stack's errors, mapped to
//! a status by [`ErrorStatus`].

use std::convert::Infallible;
use std::fmt;

use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};

use super::body::{BoxError, ResponseBody};
use crate::balance::WaitTimeout;

/// Why a gateway answered a request itself. The answer carries it in its
/// extensions (for a layer above the gateway, or a test); its body is a
/// short text without the details, which go to a `tracing` event at
/// `DEBUG` on target `tower_lb`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayError {
    /// The body of a request the gateway buffers is longer than
    /// [`max_body`](super::Builder::max_body): `413 Payload Too Large`.
    BodyTooLarge {
        /// The bound it passed, in bytes.
        limit: usize,
    },
    /// The client's body failed while the gateway read it: `400 Bad
    /// Request`.
    BodyRead(String),
    /// The pool had no endpoint, and none came within the gateway's
    /// [`wait_for_endpoints`](super::Builder::wait_for_endpoints): `503
    /// Service Unavailable`.
    NoEndpoints(WaitTimeout),
    /// The upstream stack failed: the status [`ErrorStatus`] gave its
    /// error, and the error's text.
    Upstream {
        /// `502`, `503` or `504` for this crate's errors.
        status: StatusCode,
        /// The error's text.
        message: String,
    },
}

impl GatewayError {
    /// The status the gateway answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            GatewayError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GatewayError::BodyRead(_) => StatusCode::BAD_REQUEST,
            GatewayError::NoEndpoints(_) => StatusCode::SERVICE_UNAVAILABLE,
            GatewayError::Upstream { status, .. } => *status,
        }
    }

    /// The error for an upstream stack's `error`.
    pub(crate) fn upstream<E: ErrorStatus + fmt::Display>(error: &E) -> Self {
        GatewayError::Upstream {
            status: error.status(),
            message: error.to_string(),
        }
    }

    /// The answer: the status, a short text, and `self` in its extensions.
    pub(crate) fn into_response<B>(self) -> Response<ResponseBody<B>> {
        tracing::debug!(target: "tower_lb", status = self.status().as_u16(), error = %self, "gateway answered itself");
        let text = match &self {
            GatewayError::BodyTooLarge { limit } => {
                format!("request body larger than {limit} bytes\n")
            }
            GatewayError::BodyRead(_) => "request body could not be read\n".to_owned(),
            GatewayError::NoEndpoints(_) => "no upstream endpoint yet\n".to_owned(),
            GatewayError::Upstream { status, .. } => match *status {
                StatusCode::SERVICE_UNAVAILABLE => "no healthy upstream\n".to_owned(),
                StatusCode::GATEWAY_TIMEOUT => "upstream timed out\n".to_owned(),
                _ => "upstream failed\n".to_owned(),
            },
        };
        let mut res = Response::new(ResponseBody::text(text));
        *res.status_mut() = self.status();
        res.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        res.extensions_mut().insert(self);
        res
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayError::BodyTooLarge { limit } => {
                write!(f, "request body larger than the gateway's {limit} bytes")
            }
            GatewayError::BodyRead(e) => write!(f, "reading the request body failed: {e}"),
            GatewayError::NoEndpoints(e) => write!(f, "{e}"),
            GatewayError::Upstream { status, message } => write!(f, "{status}: {message}"),
        }
    }
}

impl std::error::Error for GatewayError {}

/// The status a gateway answers for an upstream stack's error.
///
/// Implemented for this crate's errors, the errors of the clients it
/// balances, and `BoxError`; implement it for the error of a stack of
/// your own.
///
/// | error | status |
/// |---|---|
/// | [`Error`](crate::Error): `NoEndpoints`, `Overloaded`, `AllUnavailable`, `Panic` | 503 (nothing to send it to) |
/// | [`Error::Timeout`](crate::Error::Timeout), a retry that [`is_timeout`](crate::retry::Error::is_timeout), tower's `Elapsed` | 504 |
/// | `Error::Inner(e)`, the last attempt's `e` of a [`retry::Error`](crate::retry::Error) | `e`'s status |
/// | hyper-util's client errors, `io::Error`s and `BoxError`s: 504 when a timeout is among their sources, else | 502 |
pub trait ErrorStatus {
    /// The status to answer with.
    fn status(&self) -> StatusCode;
}

impl<E: ErrorStatus> ErrorStatus for crate::Error<E> {
    fn status(&self) -> StatusCode {
        match self {
            crate::Error::Inner(e) => e.status(),
            crate::Error::Timeout => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl<E: ErrorStatus> ErrorStatus for crate::retry::Error<E> {
    fn status(&self) -> StatusCode {
        use crate::retry::Error;
        if self.is_timeout() {
            return StatusCode::GATEWAY_TIMEOUT;
        }
        match self {
            Error::Inner(e) | Error::AttemptsExhausted { last: e, .. } => e.status(),
            Error::BudgetExhausted { last: Some(e), .. }
            | Error::DeadlineElapsed { last: Some(e), .. } => e.status(),
            _ => StatusCode::GATEWAY_TIMEOUT,
        }
    }
}

/// 504 when the error or one of its sources is a timeout (tower's
/// `Elapsed`, an `io::Error` of kind `TimedOut`, as a connector's connect
/// timeout gives), else 502.
fn timeout_or_bad_gateway(error: &(dyn std::error::Error + 'static)) -> StatusCode {
    let mut next = Some(error);
    while let Some(e) = next {
        let timed_out = e.is::<tower::timeout::error::Elapsed>()
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        if timed_out {
            return StatusCode::GATEWAY_TIMEOUT;
        }
        next = e.source();
    }
    StatusCode::BAD_GATEWAY
}

impl ErrorStatus for hyper_util::client::legacy::Error {
    fn status(&self) -> StatusCode {
        timeout_or_bad_gateway(self)
    }
}

impl ErrorStatus for std::io::Error {
    fn status(&self) -> StatusCode {
        timeout_or_bad_gateway(self)
    }
}

impl ErrorStatus for tower::timeout::error::Elapsed {
    fn status(&self) -> StatusCode {
        StatusCode::GATEWAY_TIMEOUT
    }
}

impl ErrorStatus for Infallible {
    fn status(&self) -> StatusCode {
        match *self {}
    }
}

/// Looks for a timeout along the error's sources.
impl ErrorStatus for BoxError {
    fn status(&self) -> StatusCode {
        timeout_or_bad_gateway(self.as_ref())
    }
}
