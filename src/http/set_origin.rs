//! [`SetOrigin`]: the endpoint service that points each request at its
//! endpoint.

use std::task::{Context, Poll};

use ::http::header::HOST;
use ::http::{HeaderMap, HeaderValue};
use tower_service::Service;

use super::Origin;

/// What [`SetOrigin`] does with the `Host` header.
///
/// The URI always changes to the endpoint's; the `Host` header is a
/// separate decision, because it names the *virtual host* the server
/// should serve, which is often not the replica's address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostHeader {
    /// Leave the headers alone (the default, like Envoy's). A `Host` header
    /// the caller set is sent as is; without one, hyper-util's and
    /// reqwest's clients derive it from the rewritten URI, i.e. the
    /// endpoint's authority (`10.0.0.1:8080`).
    #[default]
    Keep,
    /// Always send the endpoint's authority, replacing a `Host` header the
    /// caller set (for backends that check `Host` against their address).
    Endpoint,
    /// When the caller set no `Host` header, send the authority of the URI
    /// the request was made with (`http://api.internal/x` → `Host:
    /// api.internal`) before it is rewritten; a `Host` the caller set is
    /// kept. For virtual-hosted backends addressed by IP.
    Original,
}

/// A request whose target [`SetOrigin`] can rewrite: `http::Request<B>`
/// and, with the `reqwest` feature, `reqwest::Request`.
pub trait OriginRequest {
    /// Points the request at `origin` (scheme and authority), keeping its
    /// path, query, method, headers and body, and applies `host`.
    fn set_origin(&mut self, origin: &Origin, host: HostHeader);
}

/// Applies the [`HostHeader`] policy to a request's headers; `original`
/// gives the authority the request was made with (for `Original`).
pub(crate) fn apply_host(
    headers: &mut HeaderMap,
    origin: &Origin,
    host: HostHeader,
    original: impl FnOnce() -> Option<HeaderValue>,
) {
    match host {
        HostHeader::Keep => {}
        HostHeader::Endpoint => {
            headers.insert(HOST, origin.host_header().clone());
        }
        HostHeader::Original => {
            if !headers.contains_key(HOST)
                && let Some(value) = original()
            {
                headers.insert(HOST, value);
            }
        }
    }
}

impl<B> OriginRequest for ::http::Request<B> {
    fn set_origin(&mut self, origin: &Origin, host: HostHeader) {
        let original = self
            .uri()
            .authority()
            .map(|a| a.as_str().rsplit('@').next().unwrap_or_default())
            .and_then(|a| HeaderValue::from_str(a).ok());
        apply_host(self.headers_mut(), origin, host, || original);
        let uri = std::mem::take(self.uri_mut());
        *self.uri_mut() = origin.rewrite_uri(uri);
    }
}

/// The service of one endpoint of an HTTP balancer: sets each request's
/// scheme and authority to its [`Origin`], keeps path, query and headers
/// (see [`HostHeader`] for `Host`), and passes it to the shared client `S`
/// (a hyper-util `legacy::Client`, a `reqwest::Client`, any
/// `Service<http::Request<B>>`).
///
/// Cost per request: a URI rebuild from parts (reference-count bumps, no
/// parsing) plus whatever cloning `S` costs when `Balance` clones it.
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Service, ServiceExt, service_fn};
/// use tower_lb::http::{Origin, SetOrigin};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = service_fn(|req: http::Request<()>| async move {
///     Ok::<_, Infallible>(req.uri().to_string())
/// });
/// let mut svc = SetOrigin::new(client, Origin::parse("http://10.0.0.1:8080")?);
/// let req = http::Request::get("http://my-service/users?id=7").body(())?;
/// assert_eq!(svc.ready().await?.call(req).await?, "http://10.0.0.1:8080/users?id=7");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SetOrigin<S> {
    inner: S,
    origin: Origin,
    host: HostHeader,
}

impl<S> SetOrigin<S> {
    /// Sends every request through `inner` to `origin`, with
    /// [`HostHeader::Keep`].
    pub fn new(inner: S, origin: Origin) -> Self {
        Self {
            inner,
            origin,
            host: HostHeader::Keep,
        }
    }

    /// Sets what happens to the `Host` header.
    pub fn host_header(mut self, host: HostHeader) -> Self {
        self.host = host;
        self
    }

    /// The endpoint this service sends to.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The wrapped client.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the client.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, R> Service<R> for SetOrigin<S>
where
    S: Service<R>,
    R: OriginRequest,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, mut req: R) -> S::Future {
        req.set_origin(&self.origin, self.host);
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(host: HostHeader, req: ::http::Request<()>) -> ::http::Request<()> {
        let mut req = req;
        let origin = Origin::parse("http://10.0.0.1:8080").unwrap();
        req.set_origin(&origin, host);
        req
    }

    fn get(uri: &str) -> ::http::request::Builder {
        ::http::Request::get(uri).header("x-trace", "t1")
    }

    #[test]
    fn keep_leaves_host_alone() {
        let r = rewrite(HostHeader::Keep, get("http://svc/p?q=1").body(()).unwrap());
        assert_eq!(r.uri(), "http://10.0.0.1:8080/p?q=1");
        assert!(r.headers().get(HOST).is_none());
        assert_eq!(r.headers()["x-trace"], "t1");
        let r = rewrite(
            HostHeader::Keep,
            get("/p").header(HOST, "vhost").body(()).unwrap(),
        );
        assert_eq!(r.headers()[HOST], "vhost");
    }

    #[test]
    fn endpoint_overwrites_host() {
        let r = rewrite(
            HostHeader::Endpoint,
            get("/p").header(HOST, "vhost").body(()).unwrap(),
        );
        assert_eq!(r.headers()[HOST], "10.0.0.1:8080");
        assert_eq!(r.headers().get_all(HOST).iter().count(), 1);
    }

    #[test]
    fn original_uses_the_request_authority() {
        let r = rewrite(
            HostHeader::Original,
            get("http://user:pw@api.internal:81/p").body(()).unwrap(),
        );
        assert_eq!(r.headers()[HOST], "api.internal:81");
        let r = rewrite(
            HostHeader::Original,
            get("http://api.internal/p")
                .header(HOST, "vhost")
                .body(())
                .unwrap(),
        );
        assert_eq!(r.headers()[HOST], "vhost");
        let r = rewrite(HostHeader::Original, get("/p").body(()).unwrap());
        assert!(r.headers().get(HOST).is_none());
    }
}
