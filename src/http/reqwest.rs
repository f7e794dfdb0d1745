//! Glue for `reqwest` (feature `reqwest`).
//!
//! `reqwest::Client` implements `tower::Service<reqwest::Request>` and is
//! cheap to clone, so it is the base client of [`balance`](super::balance)
//! as it is. This file teaches [`SetOrigin`](super::SetOrigin) to rewrite a
//! `reqwest::Request`'s URL and [`Classifier`](super::Classifier) to read
//! `reqwest` responses and errors.
//!
//! ```no_run
//! use tower::{Service, ServiceExt};
//! use tower_lb::http;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = reqwest::Client::new();
//! let mut lb = http::balance(client.clone(), ["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?
//!     .build()?;
//! // The URL's host is replaced by the picked endpoint's; path and query stay.
//! let req = client.get("http://my-service/users?id=7").build()?;
//! let res = lb.ready().await?.call(req).await?;
//! println!("{}", res.status());
//! # Ok(()) }
//! ```

use std::time::Duration;

use ::http::HeaderValue;
use ::reqwest::ResponseBuilderExt;

use super::body::{KeepHead, Track, TrackBody};
use super::classify::{Classifier, ClassifyError, ErrorHook};
use super::set_origin::apply_host;
use super::{HostHeader, Origin, OriginRequest};
use crate::admission::Completion;
use crate::classify::{Classify, FailureKind, Outcome, error_kind};

impl OriginRequest for ::reqwest::Request {
    fn set_origin(&mut self, origin: &Origin, host: HostHeader) {
        let url = self.url();
        let original = url.host_str().map(|h| match url.port() {
            Some(p) => format!("{h}:{p}"),
            None => h.to_owned(),
        });
        apply_host(self.headers_mut(), origin, host, || {
            original.and_then(|a| HeaderValue::from_str(&a).ok())
        });
        let old = self.url();
        let mut url = origin.url().clone();
        url.set_path(old.path());
        url.set_query(old.query());
        // Credentials in the URL are the caller's; they travel with the
        // request. Both setters fail only for URLs without a host, and an
        // origin always has one.
        let _ = url.set_username(old.username());
        let _ = url.set_password(old.password());
        *self.url_mut() = url;
    }
}

/// `reqwest::Request` replays itself: the retry layer's default policy
/// retries idempotent requests whose body is not a stream, with no
/// `.replay(...)` closure.
impl crate::retry::ReplayRequest for ::reqwest::Request {
    fn try_clone(&self) -> Option<Self> {
        ::reqwest::Request::try_clone(self)
    }

    fn is_idempotent(&self) -> bool {
        crate::retry::is_idempotent(self.method())
    }
}

impl ClassifyError for ::reqwest::Error {
    fn failure_kind(&self) -> FailureKind {
        if self.is_connect() {
            FailureKind::Connect
        } else if self.is_timeout() {
            FailureKind::Timeout
        } else {
            error_kind(self)
        }
    }
}

/// A `reqwest::Response`'s body is tracked as [`Classifier::track`] says,
/// as an `http::Response`'s is: the call holds its endpoint's slot until
/// the body ends, errs or is dropped, and a body that errs midway (a
/// connection cut) is a failure of the endpoint. The response goes through
/// `http::Response` and back, its body wrapped in a [`TrackBody`]: status,
/// headers, extensions (the remote address) and URL are kept; the body is
/// boxed once more (one allocation per response, beside reqwest's own).
impl<E, H: ErrorHook<E>> Classify<::reqwest::Response, E> for Classifier<H> {
    type Response = ::reqwest::Response;

    fn complete(&self, response: ::reqwest::Response, completion: Completion) -> Self::Response {
        self.read_load(response.headers(), &completion);
        if self.common.track == Track::Headers {
            completion.finish_at_answer();
            return response;
        }
        let url = response.url().clone();
        let (mut parts, body) = ::http::Response::<::reqwest::Body>::from(response).into_parts();
        // reqwest keeps the URL beside the response, not in it: put it
        // where `reqwest::Response::from` looks for it.
        if let Ok(with_url) = ::http::Response::builder().url(url).body(()) {
            parts.extensions.extend(with_url.into_parts().0.extensions);
        }
        let body = TrackBody::new(body, completion, self.common.track, KeepHead);
        ::reqwest::Response::from(::http::Response::from_parts(
            parts,
            ::reqwest::Body::wrap(body),
        ))
    }

    fn classify(&self, result: Result<&::reqwest::Response, &E>, latency: Duration) -> Outcome {
        match result {
            Ok(res) => self.response(res.status(), res.headers(), latency),
            Err(e) => self.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_url_keeps_path_query_credentials() {
        let client = ::reqwest::Client::new();
        let mut req = client
            .get("http://svc.local/a/b?x=1#frag")
            .header("x-trace", "t1")
            .build()
            .unwrap();
        // reqwest moves URL credentials into a header at build time; put
        // some back to check that the rewrite keeps them.
        req.url_mut().set_username("u").unwrap();
        req.url_mut().set_password(Some("p")).unwrap();
        let origin = Origin::parse("http://10.0.0.1:8080").unwrap();
        req.set_origin(&origin, HostHeader::Original);
        assert_eq!(req.url().as_str(), "http://u:p@10.0.0.1:8080/a/b?x=1");
        assert_eq!(req.headers()[::http::header::HOST], "svc.local");
        assert_eq!(req.headers()["x-trace"], "t1");
    }
}
