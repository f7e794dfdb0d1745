//! Replaying `http::Request`s: idempotent methods and gRPC calls, bodies
//! through [`RequestBody`], and `grpc-timeout` as the request's deadline.

use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::{HeaderMap, Method, Request, request::Parts};

use super::{Replay, Replayable, RequestBody};

/// True for the HTTP methods RFC 9110 calls idempotent: GET, HEAD, OPTIONS,
/// TRACE, PUT, DELETE. Only these are retried by default.
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// A gRPC call: content type `application/grpc` or `application/grpc+...`.
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// The deadline a `grpc-timeout` header sets (`1*8DIGIT` and a unit: `H`,
/// `M`, `S`, `m`, `u`, `n`); `None` without one or for a malformed one.
///
/// ```
/// use std::time::Duration;
/// let mut h = http::HeaderMap::new();
/// h.insert("grpc-timeout", "200m".parse().unwrap());
/// assert_eq!(tower_lb::retry::grpc_timeout(&h), Some(Duration::from_millis(200)));
/// ```
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get("grpc-timeout")?.as_bytes();
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(n * 3600),
        b"M" => Duration::from_secs(n * 60),
        b"S" => Duration::from_secs(n),
        b"m" => Duration::from_millis(n),
        b"u" => Duration::from_micros(n),
        b"n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// What later attempts of an `http::Request` are copied from.
pub struct KeptRequest<K> {
    parts: Parts,
    body: K,
}

impl<B: RequestBody> Replay<Request<B>> for Replayable {
    type Kept = KeptRequest<B::Kept>;

    /// Keeps idempotent requests, gRPC calls, and with
    /// [`any_method`](Replayable::any_method) every request, if its body
    /// can be kept.
    fn keep(&self, req: Request<B>) -> (Request<B>, Option<Self::Kept>) {
        let replayable = self.any_method || is_idempotent(req.method()) || is_grpc(req.headers());
        if !replayable {
            return (req, None);
        }
        let (parts, body) = req.into_parts();
        let (first, kept) = body.keep(self.limit);
        let kept = kept.map(|body| KeptRequest {
            parts: parts.clone(),
            body,
        });
        (Request::from_parts(parts, first), kept)
    }

    fn replay(&self, kept: &Self::Kept) -> Option<Request<B>> {
        let body = B::copy(&kept.body)?;
        Some(Request::from_parts(kept.parts.clone(), body))
    }

    /// `grpc-timeout`, when the request carries one.
    fn deadline(&self, req: &Request<B>) -> Option<Duration> {
        grpc_timeout(req.headers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method) -> Request<String> {
        Request::builder()
            .method(method)
            .uri("http://a/x")
            .header("x-k", "v")
            .body("body".to_string())
            .unwrap()
    }

    #[test]
    fn idempotent_methods_and_grpc_calls_by_default() {
        for m in [
            Method::GET,
            Method::HEAD,
            Method::OPTIONS,
            Method::TRACE,
            Method::PUT,
            Method::DELETE,
        ] {
            let (_, kept) = Replayable::idempotent().keep(req(m.clone()));
            let copy: Request<String> = Replayable::idempotent().replay(&kept.unwrap()).unwrap();
            assert_eq!(copy.method(), m);
            assert_eq!(copy.body(), "body");
            assert_eq!(copy.headers()["x-k"], "v");
        }
        for m in [Method::POST, Method::PATCH, Method::CONNECT] {
            assert!(Replayable::idempotent().keep(req(m.clone())).1.is_none());
            assert!(Replayable::any_method().keep(req(m)).1.is_some());
        }
        let mut grpc = req(Method::POST);
        grpc.headers_mut()
            .insert(CONTENT_TYPE, "application/grpc+proto".parse().unwrap());
        assert!(Replayable::idempotent().keep(grpc).1.is_some());
    }

    #[test]
    fn grpc_timeouts() {
        let t = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&h)
        };
        assert_eq!(t("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(t("2M"), Some(Duration::from_secs(120)));
        assert_eq!(t("3S"), Some(Duration::from_secs(3)));
        assert_eq!(t("200m"), Some(Duration::from_millis(200)));
        assert_eq!(t("7u"), Some(Duration::from_micros(7)));
        assert_eq!(t("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "m", "123456789m", "1x", "-1S", "1.5S", " 1S"] {
            assert_eq!(t(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }
}
