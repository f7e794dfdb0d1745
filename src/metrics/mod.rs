//! OpenTelemetry metrics for a [`Balance`](crate::Balance) (feature
//! `metrics`: OpenTelemetry's stable metrics API, nothing experimental),
//! with a Prometheus text exposition helper (feature `prometheus`).
//!
//! Give the builder a [`Metrics`] (a meter and a name for the balancer) and
//! the balancer reports the instruments below. Without it nothing is
//! recorded and the request path pays one branch on an `Option`.
//!
//! | instrument | Prometheus name | kind | attributes |
//! |---|---|---|---|
//! | `lb.requests` | `lb_requests_total` | counter | endpoint, and for failures `error.type` (`error`, `timeout`, `connect`, `gateway`, `overloaded`, `slow`, `body`: [`FailureKind::NAMES`](crate::classify::FailureKind::NAMES); a kind's series appears once it happened) |
//! | `lb.request.duration` | `lb_request_duration_seconds` | histogram (s) | `lb.name`, `lb.endpoint` (with zone and priority), and for failures `error.type` |
//! | `lb.endpoint.in_flight` | `lb_endpoint_in_flight` | up-down counter | endpoint |
//! | `lb.endpoint.health` | `lb_endpoint_health` | gauge 1/0 | endpoint, `lb.endpoint.state` (`healthy`, `ejected`, `open`, `half_open`, `forced_open`, `failing_check`, `draining`) |
//! | `lb.endpoint.latency.ewma` | `lb_endpoint_latency_ewma_seconds` | gauge (s) | endpoint |
//! | `lb.endpoint.load.utilization` | `lb_endpoint_load_utilization_ratio` | gauge (1) | endpoint; while its last [load report](crate::orca) is trusted |
//! | `lb.endpoint.concurrency_limit` | `lb_endpoint_concurrency_limit` | gauge | endpoint; with [adaptive limits](crate::endpoint::AdaptiveConcurrency) |
//! | `lb.picks` | `lb_picks_total` | counter | endpoint |
//! | `lb.pick.duration` | `lb_pick_duration_seconds` | histogram (s), sampled | — |
//! | `lb.breaker.state` | `lb_breaker_state` | gauge 1/0 | endpoint, `lb.breaker.state` |
//! | `lb.breaker.transitions` | `lb_breaker_transitions_total` | counter | endpoint, `lb.breaker.state` (entered) |
//! | `lb.outlier.ejections` | `lb_outlier_ejections_total` | counter | endpoint, `lb.outlier.reason` |
//! | `lb.panic` | `lb_panic_total` | counter | — |
//! | `lb.refusals` | `lb_refusals_total` | counter | `lb.refusal.reason` (`no_endpoints`, `overloaded`, `breaker_open`, `ejected`, `failing_check`, `panic`) |
//! | `lb.retries` | `lb_retries_total` | counter | — |
//! | `lb.retry.budget.exhausted` | `lb_retry_budget_exhausted_total` | counter | — |
//! | `lb.hedges` | `lb_hedges_total` | counter | — |
//! | `lb.probes`, `lb.probe.picks` | `lb_probes_total`, `lb_probe_picks_total` | counters | `lb.probe.result`; `lb.probe.source` (with a probing picker) |
//!
//! `lb.requests` and `lb.request.duration` count calls that completed,
//! classified (calls the classifier marks `Ignore` and calls dropped before
//! an answer are left out); `lb.picks` counts every dispatch, so the gap is
//! cancellations, ignored calls and calls in flight. `lb.pick.duration`
//! times the whole dispatch: health census, the picker, and taking the
//! endpoint's in-flight slot and breaker permit. A success carries no
//! `error.type`: count successes with `lb_requests_total{error_type=""}`,
//! failures with `error_type!=""`.
//!
//! Every instrument carries `lb.name` (the name given to [`Metrics::new`]);
//! every one but `lb.request.duration` carries `lb.algorithm` (the picker's
//! [`name`](crate::pick::Picker::name)), which the histogram leaves out
//! because a balancer has one algorithm and each attribute is hashed on
//! every record (below). "Endpoint" above means `lb.endpoint`, and for an
//! endpoint with a zone or a priority other than 0, `lb.endpoint.zone`
//! (its [locality](crate::endpoint::Locality)'s zone, `""` when unknown)
//! and `lb.endpoint.priority` (its priority level); unplaced endpoints
//! carry neither, which keeps the histogram's attribute set small
//! (Prometheus reads the absent zone label as `""`). A metadata change
//! ([`Handle::set_meta`](crate::Handle::set_meta), discovery) moves the
//! endpoint's series to the new zone and priority. The breaker instruments
//! appear when the balancer has [circuit breakers](crate::Balance), the
//! ejection counter with [outlier detection](crate::outlier), the retry
//! counters for each [`RetryLayer`](crate::retry::RetryLayer) registered
//! with [`Metrics::retries`].
//!
//! # Semantic conventions
//!
//! OpenTelemetry's semantic conventions define no instrument for
//! client-side load balancing, so these live in the crate's `lb.`
//! namespace, named and typed by the conventions' general rules: a
//! `*.duration` histogram in seconds, pluralised counters with `{request}`
//! style units, an up-down counter for an additive count, unit `1` for a
//! utilization, attributes namespaced under the instrument they qualify.
//! Where a convention's attribute means what ours means, it is used:
//! `error.type` (stable), absent on success. The nearest conventions, and
//! why the instruments differ from them:
//!
//! | here | nearest convention | why it differs |
//! |---|---|---|
//! | `lb.request.duration` | `http.client.request.duration`, `rpc.client.call.duration` | The balancer times one call to one endpoint of any `Service`, not only HTTP or gRPC; the HTTP convention requires `http.request.method` and `http.response.status_code`, per request, which the balancer's record does not see (it sees the classified outcome). Emitting `http.*` from a gRPC or custom balancer would mislabel it, and a client that is instrumented already (the conventions are written for the HTTP client) would report two streams under one name. |
//! | `lb.endpoint` | `server.address`, `server.port`; `network.peer.address` | An endpoint's key is any `Display` (an origin, a pod name, an integer). For a balanced HTTP call `server.address` is the logical service (the request's authority: what `lb.name` names), and the replica is the connection's peer, which the balancer knows only when the key is an address. |
//! | `lb.endpoint.in_flight` | `http.client.active_requests` (development) | Per endpoint and any protocol; the same kind (an up-down counter) and unit. |
//! | [`DEFAULT_DURATION_BUCKETS`] | the HTTP and RPC durations' advised boundaries, 5 ms to 10 s | Ours hold every advised boundary and add 0.5, 1 and 2.5 ms: calls to replicas on a LAN finish under 5 ms, where the advice has one bucket. |
//!
//! # Cost
//!
//! * **Per request, one histogram record** (`lb.request.duration`),
//!   `Histogram::record` with the endpoint's attribute set for the
//!   outcome, built when the endpoint joined: no allocation, but the SDK
//!   takes a read lock, hashes the set's attributes and compares them on
//!   every record (two for a success: `lb.name`, `lb.endpoint`; a failure
//!   adds `error.type`, a placed endpoint its zone and priority). The cost
//!   of metrics on against off is measured in
//!   [docs/performance.md](https://github.com/tower-lb/tower-lb/blob/main/docs/performance.md)
//!   (`cargo bench --bench balance`, group `metrics`).
//! * **Bound histograms** (feature `metrics-bound`, then
//!   `Metrics::bound(true)`): the record goes through a
//!   histogram bound to that set, one lock of the series' buckets with no
//!   hashing. OpenTelemetry's bound instruments are experimental in 0.33:
//!   the feature turns on `experimental_metrics_bound_instruments` in
//!   `opentelemetry` and in `opentelemetry_sdk` (0.33, the SDK any exporter
//!   of these instruments links) for the whole build. A meter provider that
//!   is not that SDK records nothing through a bound histogram (the API's
//!   default `bind` is a no-op): leave binding off then.
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
//! never attributes. `lb.request.duration` holds up to eight sets per
//! endpoint (success and seven failure kinds, each once it happened), and
//! the balancers of one meter share the instrument: the SDK's default
//! limit of 2,000 sets per instrument (sets past it are merged into one
//! overflow series) is reached at 250 endpoints failing in every way,
//! 2,000 that only succeed.
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

mod attr;
mod balancer;
#[cfg(feature = "metrics-bound")]
mod bound;
mod endpoint;
mod instruments;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus;
mod setup;

pub use opentelemetry;
pub use setup::Metrics;

/// Default bucket boundaries of `lb.request.duration`, in seconds: 0.5 ms to
/// 10 s. Every boundary OpenTelemetry's HTTP and RPC conventions advise for
/// their durations (5 ms to 10 s), so dashboards written for those read
/// these, and 0.5, 1 and 2.5 ms below them: calls to replicas on a LAN
/// finish well under 5 ms. 10 s is past any sensible per-try timeout. The
/// SDK's own defaults (0–10 000, for milliseconds) would put every RPC in
/// one bucket.
pub const DEFAULT_DURATION_BUCKETS: [f64; 17] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
    7.5, 10.0,
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
