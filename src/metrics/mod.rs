//! OpenTelemetry metrics for a [`Balance`](crate::Balance) (feature
//! `metrics`), with a Prometheus text exposition helper (feature
//! `prometheus`).
//!
//! Give the builder a [`Metrics`] (a meter and a name for the balancer) and
//! the balancer reports the instruments below. Without it nothing is
//! recorded and the request path pays one branch on an `Option`.
//!
//! | instrument | Prometheus name | kind | attributes |
//! |---|---|---|---|
//! | `lb.requests` | `lb_requests_total` | counter | endpoint, `outcome` (`success`/`failure`), and for failures `kind` (`error`, `timeout`, `connect`, `gateway`, `overloaded`, `slow`, `body`: [`FailureKind::NAMES`](crate::classify::FailureKind::NAMES); a kind's series appears once it happened) |
//! | `lb.request.duration` | `lb_request_duration_seconds` | histogram (s) | endpoint, `outcome` |
//! | `lb.endpoint.in_flight` | `lb_endpoint_in_flight` | gauge | endpoint |
//! | `lb.endpoint.health` | `lb_endpoint_health` | gauge 1/0 | endpoint, `state` (`healthy`, `ejected`, `open`, `half_open`, `forced_open`, `failing_check`, `draining`) |
//! | `lb.endpoint.latency.ewma` | `lb_endpoint_latency_ewma_seconds` | gauge (s) | endpoint |
//! | `lb.endpoint.load.utilization` | `lb_endpoint_load_utilization` | gauge | endpoint; while its last [load report](crate::orca) is trusted |
//! | `lb.endpoint.concurrency_limit` | `lb_endpoint_concurrency_limit` | gauge | endpoint; with [adaptive limits](crate::endpoint::AdaptiveConcurrency) |
//! | `lb.picks` | `lb_picks_total` | counter | endpoint |
//! | `lb.pick.duration` | `lb_pick_duration_seconds` | histogram (s), sampled | — |
//! | `lb.breaker.state` | `lb_breaker_state` | gauge 1/0 | endpoint, `state` |
//! | `lb.breaker.transitions` | `lb_breaker_transitions_total` | counter | endpoint, `state` (entered) |
//! | `lb.outlier.ejections` | `lb_outlier_ejections_total` | counter | endpoint, `reason` |
//! | `lb.panic` | `lb_panic_total` | counter | — |
//! | `lb.refusals` | `lb_refusals_total` | counter | `reason` (`no_endpoints`, `overloaded`, `breaker_open`, `ejected`, `failing_check`, `panic`) |
//! | `lb.retries` | `lb_retries_total` | counter | — |
//! | `lb.retry.budget.exhausted` | `lb_retry_budget_exhausted_total` | counter | — |
//! | `lb.hedges` | `lb_hedges_total` | counter | — |
//!
//! `lb.requests` and `lb.request.duration` count calls that completed,
//! classified (calls the classifier marks `Ignore` and calls dropped before
//! an answer are left out); `lb.picks` counts every dispatch, so the gap is
//! cancellations, ignored calls and calls in flight. `lb.pick.duration`
//! times the whole dispatch: health census, the picker, and taking the
//! endpoint's in-flight slot and breaker permit.
//!
//! Every instrument carries `lb.name` (the name given to [`Metrics::new`])
//! and `lb.algorithm` (the picker's [`name`](crate::pick::Picker::name));
//! per-endpoint ones carry `lb.endpoint`, and for an endpoint with a zone
//! or a priority other than 0, `lb.endpoint.zone` (its
//! [locality](crate::endpoint::Locality)'s zone, `""` when unknown) and
//! `lb.endpoint.priority` (its priority level); unplaced endpoints carry
//! neither, which keeps the per-request histogram's attribute set small
//! (Prometheus reads the absent zone label as `""`). A metadata change
//! ([`Handle::set_meta`](crate::Handle::set_meta), discovery) moves the
//! endpoint's series to the new zone and priority. The breaker instruments appear
//! when the balancer has [circuit breakers](crate::Balance), the ejection
//! counter with [outlier detection](crate::outlier), the retry counters for
//! each [`RetryLayer`](crate::retry::RetryLayer) registered with
//! [`Metrics::retries`].
//!
//! # Cost
//!
//! * **Per request, one histogram record** (`lb.request.duration`) on a
//!   histogram bound to the endpoint's attribute sets when the endpoint was
//!   created (OpenTelemetry's bound instruments, experimental in 0.33; the
//!   `metrics` feature turns them on in `opentelemetry_sdk`): no
//!   allocation, no attribute lookup, one lock of the series' buckets.
//!   Unbound, the SDK hashes and compares the five attributes on every
//!   record: metrics on cost 1.9-2.0x metrics off per request, bound
//!   1.2x (`benches/balance.rs`, `metrics/{off,on}`). A meter provider
//!   that is not `opentelemetry_sdk` 0.33 and does not implement binding
//!   records nothing for this one instrument: the API's default `bind` is
//!   a no-op.
//! * **Everything else is an observable instrument**: its callback reads the
//!   atomics the balancer keeps anyway ([`EndpointState`](crate::endpoint::EndpointState)
//!   counters, breaker and ejection counters, [`RetryStats`](crate::retry::RetryStats))
//!   over the live endpoint set, when the exporter collects.
//! * **Pick duration is sampled**: one call in [`PICK_SAMPLE_EVERY`] per
//!   thread is timed. Timing every pick would take two clock reads and a
//!   histogram record, several times the cost of the pick being measured.
//!
//! # Cardinality
//!
//! The `lb.endpoint` label comes from the endpoint's key only (its
//! `Display`, or the closure given to
//! [`metrics_with`](crate::balance::Builder::metrics_with)), never from
//! request data: series grow with the endpoint set, not with traffic. Zone
//! and priority take one value per endpoint; free-form labels
//! ([`EndpointMeta::labels`](crate::endpoint::EndpointMeta::labels)) are
//! never attributes.
//! Give each balancer its own `lb.name`.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::{Balance, metrics::Metrics};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let meter = opentelemetry::global::meter("my-app");
//! let replica = service_fn(|n: u32| async move { Ok::<_, Infallible>(n) });
//! let mut lb = Balance::builder()
//!     .endpoint("10.0.0.1:80", replica.clone())
//!     .endpoint("10.0.0.2:80", replica)
//!     .metrics(Metrics::new(&meter, "users"))   // labels from the keys' Display
//!     .build()?;
//! assert_eq!(lb.ready().await?.call(7).await?, 7);
//! # Ok(()) }
//! ```
//!
//! With feature `prometheus`, `prometheus::Exporter` builds an SDK meter
//! provider feeding a Prometheus registry and renders the `/metrics` page.

mod balancer;
mod endpoint;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus;
mod setup;

pub use opentelemetry;
pub use setup::Metrics;

/// Default bucket boundaries of `lb.request.duration`, in seconds: 0.5 ms to
/// 10 s in 1–2.5–5 steps. RPC latencies on a LAN start well under a
/// millisecond; 10 s is past any sensible per-try timeout. The SDK's own
/// defaults (0–10 000, for milliseconds) would put every RPC in one bucket.
pub const DEFAULT_DURATION_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// Bucket boundaries of `lb.pick.duration`, in seconds: 50 ns to 100 µs. A
/// pick over a few endpoints takes tens of nanoseconds; a full scan of
/// thousands, tens of microseconds.
pub const PICK_DURATION_BUCKETS: [f64; 10] = [
    5e-8, 1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 1e-4,
];

/// One pick in this many (per thread) is timed for `lb.pick.duration`: 64
/// keeps the timing cost near 1% of a pick while a balancer at 1 000
/// requests/s still yields about 15 samples a second.
pub const PICK_SAMPLE_EVERY: u32 = 64;

/// The instrumentation scope name used for meters this crate creates
/// ([`Metrics::global`], `prometheus::Exporter::meter`).
pub const SCOPE: &str = "tower-lb";
