//! [`Attempt`]: one try of a request inside the balanced stack, carrying
//! the rest of the middleware chain; and [`NextClient`], the endpoints'
//! base client, which runs that rest.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use ::http::Extensions;
use reqwest_middleware::Next;
use tower_service::Service;

use crate::classify::FailureKind;
use crate::http::classify::known_or_chain_kind;
use crate::http::{ClassifyError, HostHeader, Origin, OriginRequest};
use crate::retry::ReplayRequest;

/// One try of a request through a balanced `ClientWithMiddleware`: the
/// `reqwest::Request`, a copy of the call's `Extensions`, and the rest of
/// the middleware chain after the [`BalanceMiddleware`](super::BalanceMiddleware).
///
/// This is the request type of the stack the middleware runs (the
/// balancer and whatever tower layers you put around it, such as the
/// retry layer). Each endpoint points its URL at its replica
/// ([`OriginRequest`]) and [`NextClient`] sends it through the rest of the
/// chain. The retry layer replays it with [`ReplayRequest`]: a copy is
/// `reqwest::Request::try_clone` (`None` for a streaming body), a clone of
/// the extensions and of the chain.
///
/// A key for the hash pickers reads the request through
/// [`request`](Self::request). Write it as a `fn`, not a closure: the key
/// must take an `Attempt` of any lifetime, which a closure's inferred
/// signature does not.
///
/// ```
/// use tower_lb::http::middleware::{self, Attempt};
/// use tower_lb::pick::{KeyHash, key::{hash_bytes, key_fn}};
///
/// fn tenant(a: &Attempt<'_>) -> Option<u64> {
///     a.request().headers().get("x-tenant").map(|v| hash_bytes(v.as_bytes()))
/// }
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let lb = middleware::balance(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?
///     .picker(KeyHash::new(key_fn(tenant)))
///     .build()?;
/// let mw = middleware::BalanceMiddleware::new(lb);
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new()).with(mw).build();
/// # let _ = client; Ok(()) }
/// ```
pub struct Attempt<'a> {
    request: reqwest::Request,
    extensions: Extensions,
    next: Next<'a>,
}

impl<'a> Attempt<'a> {
    /// An attempt at `request`, with `extensions`, to be sent through `next`.
    pub(crate) fn new(request: reqwest::Request, extensions: Extensions, next: Next<'a>) -> Self {
        Self {
            request,
            extensions,
            next,
        }
    }

    /// The request.
    pub fn request(&self) -> &reqwest::Request {
        &self.request
    }

    /// The request, to change before it is sent.
    pub fn request_mut(&mut self) -> &mut reqwest::Request {
        &mut self.request
    }

    /// This attempt's copy of the call's extensions, which the middleware
    /// after the balancer receive.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// This attempt's extensions, to change before it is sent.
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }
}

impl fmt::Debug for Attempt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

impl OriginRequest for Attempt<'_> {
    fn set_origin(&mut self, origin: &Origin, host: HostHeader) {
        self.request.set_origin(origin, host);
    }
}

/// Replayed as its `reqwest::Request` is: idempotent methods, bodies that
/// are not streams.
impl ReplayRequest for Attempt<'_> {
    fn try_clone(&self) -> Option<Self> {
        Some(Self {
            request: self.request.try_clone()?,
            extensions: self.extensions.clone(),
            next: self.next.clone(),
        })
    }

    fn is_idempotent(&self) -> bool {
        crate::retry::is_idempotent(self.request.method())
    }
}

/// The base client of a balanced `ClientWithMiddleware`'s endpoints: sends
/// an [`Attempt`] (already pointed at its replica) through the rest of
/// the middleware chain, and so through the `reqwest::Client` at its end.
///
/// Stateless and free to clone; the connection pool is the
/// `ClientWithMiddleware`'s client's. Always ready. Give it wherever a
/// balancer takes a base client: [`balance`](super::balance) does, and so
/// does discovery (`discover::http_endpoints(NextClient, "http")`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NextClient;

impl<'a> Service<Attempt<'a>> for NextClient {
    type Response = reqwest::Response;
    type Error = reqwest_middleware::Error;
    type Future =
        Pin<Box<dyn Future<Output = reqwest_middleware::Result<reqwest::Response>> + Send + 'a>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, attempt: Attempt<'a>) -> Self::Future {
        let Attempt {
            request,
            mut extensions,
            next,
        } = attempt;
        // The chain borrows the extensions for as long as it runs; they
        // live in this future, so the future is boxed (as each middleware's
        // own is).
        Box::pin(async move { next.run(request, &mut extensions).await })
    }
}

/// A `reqwest` error is classified as `reqwest::Error` is (`Connect`,
/// `Timeout`, `Error`); a middleware's error by its source chain (a
/// `reqwest::Error` or an I/O error inside it), else `Error`.
impl ClassifyError for reqwest_middleware::Error {
    fn failure_kind(&self) -> FailureKind {
        match self {
            Self::Reqwest(e) => e.failure_kind(),
            Self::Middleware(e) => {
                let e: &(dyn StdError + 'static) = e.as_ref();
                known_or_chain_kind(e)
            }
        }
    }
}
