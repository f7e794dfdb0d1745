//! Which requests may be sent again, and how to copy them.

#[cfg(feature = "http")]
use http::Method;

/// True for the HTTP methods RFC 9110 calls idempotent: GET, HEAD, OPTIONS,
/// TRACE, PUT, DELETE. Only these are retried by default.
#[cfg(feature = "http")]
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// A request that may be able to copy itself for a retry.
///
/// Implemented for `http::Request<B>` with a `Clone` body (`Full<Bytes>`,
/// `String`, `()`...). A streaming body cannot be replayed: buffer it first,
/// or give the layer a closure [`Replay`] policy that returns `None`.
///
/// reqwest's `Request::try_clone(&self) -> Option<Request>` has exactly this
/// shape (it answers `None` for a streaming body); since neither the trait nor
/// the type is yours, plug it in with a closure:
/// `.replay(|r: &reqwest::Request| r.try_clone().filter(|r| is_idempotent(r.method())))`.
pub trait ReplayRequest: Sized {
    /// A copy of this request to send again, or `None` if it cannot be
    /// replayed (e.g. its body was a stream and is consumed).
    fn try_clone(&self) -> Option<Self>;

    /// Whether sending the request twice has the effect of sending it once.
    /// Non-idempotent requests are retried only when the policy opts in.
    fn is_idempotent(&self) -> bool {
        true
    }
}

#[cfg(feature = "http")]
impl<B: Clone> ReplayRequest for http::Request<B> {
    /// Clones method, URI, version, headers, extensions and body.
    fn try_clone(&self) -> Option<Self> {
        Some(self.clone())
    }

    fn is_idempotent(&self) -> bool {
        is_idempotent(self.method())
    }
}

/// Decides whether a request may be retried (or hedged), and copies it.
///
/// The layer asks once per request, before the first attempt, and keeps the
/// copy for later attempts. Implemented for closures
/// `Fn(&Req) -> Option<Req>`.
pub trait Replay<Req>: Send + Sync + 'static {
    /// A copy of `req` to send again, or `None` if it must not be retried.
    fn replay(&self, req: &Req) -> Option<Req>;
}

/// The default [`Replay`] policy for [`ReplayRequest`]s: replays what can
/// be copied, and only idempotent requests unless
/// [`any_method`](Self::any_method) opts in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replayable {
    any_method: bool,
}

impl Replayable {
    /// Replays idempotent requests only (the default).
    pub fn idempotent() -> Self {
        Self { any_method: false }
    }

    /// Replays every request that can be copied, POST and PATCH included.
    /// Only for backends that deduplicate (idempotency keys) or requests
    /// that are safe to repeat.
    pub fn any_method() -> Self {
        Self { any_method: true }
    }
}

impl<Req: ReplayRequest> Replay<Req> for Replayable {
    fn replay(&self, req: &Req) -> Option<Req> {
        if self.any_method || req.is_idempotent() {
            req.try_clone()
        } else {
            None
        }
    }
}

/// A [`Replay`] policy for any `Req: Clone` (non-HTTP requests): every
/// request is retried with a clone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CloneRequest;

impl<Req: Clone> Replay<Req> for CloneRequest {
    fn replay(&self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

impl<Req, F> Replay<Req> for F
where
    F: Fn(&Req) -> Option<Req> + Send + Sync + 'static,
{
    fn replay(&self, req: &Req) -> Option<Req> {
        self(req)
    }
}

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;

    fn req(method: Method) -> http::Request<String> {
        http::Request::builder()
            .method(method)
            .uri("http://a/x")
            .header("x-k", "v")
            .body("body".to_string())
            .unwrap()
    }

    #[test]
    fn idempotent_methods_only_by_default() {
        for m in [
            Method::GET,
            Method::HEAD,
            Method::OPTIONS,
            Method::TRACE,
            Method::PUT,
            Method::DELETE,
        ] {
            let copy = Replayable::idempotent().replay(&req(m.clone()));
            let copy = copy.unwrap_or_else(|| panic!("{m} must replay"));
            assert_eq!(copy.method(), m);
            assert_eq!(copy.body(), "body");
            assert_eq!(copy.headers()["x-k"], "v");
        }
        for m in [Method::POST, Method::PATCH, Method::CONNECT] {
            assert!(Replayable::idempotent().replay(&req(m.clone())).is_none());
            assert!(Replayable::any_method().replay(&req(m)).is_some());
        }
    }

    #[test]
    fn closures_and_clone_policy() {
        let never = |_: &http::Request<String>| None;
        assert!(never.replay(&req(Method::GET)).is_none());
        assert_eq!(CloneRequest.replay(&7u32), Some(7));
    }
}
