//! Replaying `http::Request`s: idempotent methods and gRPC calls, bodies
//! through [`RequestBody`], and `grpc-timeout` as the request's deadline,
//! rewritten on every later attempt to the time the call has left.

use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Method, Request, request::Parts};

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

/// The `grpc-timeout` value for `left`: the finest unit (`n`, `u`, `m`,
/// `S`, `M`, `H`) whose count fits the header's 8 digits, rounded up to
/// that unit as grpc-go rounds, so a server is never told less time than
/// the call has; 99,999,999 hours at most (about 11,400 years).
///
/// ```
/// use std::time::Duration;
/// use tower_lb::retry::{encode_grpc_timeout, grpc_timeout};
/// assert_eq!(encode_grpc_timeout(Duration::from_millis(150)), "150000u");
/// assert_eq!(encode_grpc_timeout(Duration::from_secs(3600 * 24 * 365)), "31536000S");
/// let mut h = http::HeaderMap::new();
/// h.insert("grpc-timeout", encode_grpc_timeout(Duration::from_nanos(1_234_567)));
/// assert_eq!(grpc_timeout(&h), Some(Duration::from_nanos(1_234_567)));
/// ```
pub fn encode_grpc_timeout(left: Duration) -> HeaderValue {
    const MAX: u128 = 99_999_999;
    const UNITS: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    let ns = left.as_nanos();
    let (count, unit) = UNITS
        .iter()
        .map(|&(per, unit)| (ns.div_ceil(per), unit))
        .find(|&(count, _)| count <= MAX)
        .unwrap_or((MAX, 'H'));
    HeaderValue::from_str(&format!("{count}{unit}")).expect("digits and a unit letter")
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

    /// Rewrites `grpc-timeout`, when the request carries one, to `left`.
    fn prepare(&self, req: &mut Request<B>, left: Duration) {
        if let Some(v) = req.headers_mut().get_mut("grpc-timeout") {
            *v = encode_grpc_timeout(left);
        }
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

    #[test]
    fn encoded_timeouts_at_the_edges() {
        let e = |d: Duration| encode_grpc_timeout(d).to_str().unwrap().to_string();
        assert_eq!(e(Duration::ZERO), "0n");
        assert_eq!(e(Duration::from_nanos(99_999_999)), "99999999n");
        // One ns more needs µs, rounded up.
        assert_eq!(e(Duration::from_nanos(100_000_001)), "100001u");
        assert_eq!(e(Duration::MAX), "99999999H");
    }

    proptest::proptest! {
        /// Every duration encodes to 1–8 digits and a unit that decode to
        /// at least the duration, and to less than one unit more (up to
        /// the 99,999,999-hour cap).
        #[test]
        fn encoded_timeouts_decode_to_at_least_the_time_left(
            secs in 0u64..400_000_000_000,
            nanos in 0u32..1_000_000_000,
        ) {
            let left = Duration::new(secs, nanos);
            let v = encode_grpc_timeout(left);
            let text = v.to_str().unwrap();
            proptest::prop_assert!((2..=9).contains(&text.len()), "{}", text);
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", v.clone());
            let back = grpc_timeout(&h).expect("decodes");
            let cap = Duration::from_secs(99_999_999 * 3600);
            let unit = match text.as_bytes()[text.len() - 1] {
                b'n' => Duration::from_nanos(1),
                b'u' => Duration::from_micros(1),
                b'm' => Duration::from_millis(1),
                b'S' => Duration::from_secs(1),
                b'M' => Duration::from_secs(60),
                _ => Duration::from_secs(3600),
            };
            if left <= cap {
                proptest::prop_assert!(back >= left && back - left < unit, "{:?} -> {} -> {:?}", left, text, back);
            } else {
                proptest::prop_assert_eq!(back, cap);
            }
        }
    }

    #[test]
    fn prepare_rewrites_only_a_grpc_timeout_the_request_carries() {
        let mut with = req(Method::POST);
        with.headers_mut()
            .insert("grpc-timeout", "200m".parse().unwrap());
        Replayable::idempotent().prepare(&mut with, Duration::from_millis(150));
        assert_eq!(with.headers()["grpc-timeout"], "150000u");
        let mut without = req(Method::GET);
        Replayable::idempotent().prepare(&mut without, Duration::from_millis(150));
        assert!(without.headers().get("grpc-timeout").is_none());
    }
}
