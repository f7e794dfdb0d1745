//! Balancing a `reqwest_middleware::ClientWithMiddleware` (feature
//! `reqwest-middleware`, reqwest-middleware 0.5, the major for reqwest
//! 0.13).
//!
//! [`BalanceMiddleware`] is a `reqwest_middleware::Middleware`. Put it in
//! a `ClientWithMiddleware` chain and every request the client sends goes
//! to one of the replicas, picked per request, with the crate's
//! per-endpoint tracking, breakers, outlier ejection, retries and metrics.
//! Request any host (`http://users/...`): the picked endpoint replaces the
//! URL's scheme, host and port with its replica's and keeps path, query,
//! headers and body.
//!
//! It runs a tower stack whose request is an [`Attempt`] (the
//! `reqwest::Request`, a copy of the call's extensions, and the rest of
//! the chain): [`balance`] builds the balancer over [`NextClient`]
//! endpoints, which send each attempt on through the middleware after
//! this one and the `reqwest::Client` at the end of the chain. Set the
//! balancer up as any other (picker, breakers, ejection, checks, metrics)
//! and put the retry layer around it.
//!
//! ```no_run
//! use tower::Layer;
//! use tower_lb::http::middleware::{self, BalanceMiddleware};
//! use tower_lb::metrics::{Metrics, prometheus::Exporter};
//! use tower_lb::retry::RetryLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let exporter = Exporter::new()?;                   // serve exporter.response() on /metrics
//! let retry = RetryLayer::builder().build()?;        // 3 attempts, budget 20% + 10/s
//! let lb = middleware::balance(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?
//!     .metrics(Metrics::new(&exporter.meter(), "users").retries(&retry))
//!     .build()?;
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(BalanceMiddleware::new(retry.layer(lb)))
//!     .build();
//! let res = client.get("http://users/users/7").send().await?;
//! # let _ = res; Ok(()) }
//! ```
//!
//! # Where it goes in the chain
//!
//! The middleware before it see one call; the middleware after it see
//! each attempt, already pointed at its replica.
//!
//! * **Retries: the crate's, inside it** (`BalanceMiddleware::new(retry.layer(lb))`).
//!   A retry never returns to a replica this call already tried while
//!   another is available, draws on a retry budget, honours `Retry-After`,
//!   can hedge, and every attempt counts for its replica's breaker,
//!   ejection and latency model. With `.retries(&retry)` on the metrics,
//!   retries and budget exhaustions are reported with the balancer's
//!   instruments.
//! * **`reqwest-retry`, if you use it: before the balancer**
//!   (`.with(RetryTransientMiddleware::new_with_policy(..)).with(balancer)`).
//!   Each of its retries passes through the balancer again, which counts
//!   the failure against the replica that failed and avoids the replicas
//!   this call already tried ([`BalanceMiddleware`] records them in the
//!   call's extensions). After the balancer, its retries would go back to
//!   the replica that failed (the URL is already rewritten), and the
//!   balancer would see one attempt spanning all of them. With the crate's
//!   retry layer inside, leave `reqwest-retry` out: the attempts multiply.
//! * **`reqwest-tracing`: after the balancer**
//!   (`.with(balancer).with(TracingMiddleware::default())`). One client
//!   span per attempt, naming the replica it went to (`server.address`,
//!   `server.port`), as OpenTelemetry's HTTP client conventions ask (a span
//!   per request sent; a resend is a span of its own), so a trace shows
//!   which replica failed and where the retry went. Before the balancer it
//!   records one span per call, with the URL's logical host (`users`).
//!
//! What the stack returns is converted to `reqwest_middleware::Error`: the
//! chain's own errors unchanged (a connect error stays a `reqwest::Error`,
//! which `reqwest-retry` retries), the balancer's refusals and the retry
//! layer's verdicts as `Error::Middleware`, typed inside.
//!
//! A `5xx` or `429` from a replica counts as its failure and is retried
//! (idempotent methods only, unless the retry layer's replay policy says
//! otherwise); a final one is returned as the response, as reqwest does.
//! Connect errors and timeouts are failures of the replica; `4xx` are the
//! caller's. The response body holds its endpoint's in-flight slot until
//! it is read to the end or dropped, as with `http::balance`.

mod attempt;
mod error;
mod service;

pub use attempt::{Attempt, NextClient};
pub use service::BalanceMiddleware;

use crate::balance::Builder;
use crate::error::ConfigError;
use crate::http::{Classifier, Origin, SetOrigin};
use crate::pick::PeakEwma;

/// A balancer builder for [`BalanceMiddleware`]: one endpoint per origin in
/// `authorities`, each a [`NextClient`] pointed at its origin, with the
/// HTTP [`Classifier`] and the default picker. Set a picker, breakers,
/// ejection, metrics... on the builder, then `build()`.
///
/// It is [`http::balance`](crate::http::balance) over [`NextClient`]:
/// everything said there holds (the `Host` header, an empty list, the
/// handle that changes the endpoints at run time).
///
/// # Errors
///
/// A [`ConfigError`] naming `authority` for the first entry that is not a
/// valid origin or repeats an earlier one.
///
/// ```
/// use tower_lb::http::middleware;
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let lb = middleware::balance(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?.build()?;
/// assert_eq!(lb.handle().len(), 2);
/// let bad = middleware::balance(["ftp://10.0.0.1"]);
/// assert_eq!(bad.err().map(|e| e.field()), Some("authority"));
/// # Ok(()) }
/// ```
pub fn balance<I>(
    authorities: I,
) -> Result<Builder<Origin, SetOrigin<NextClient>, PeakEwma, Classifier>, ConfigError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    super::balance(NextClient, authorities)
}
