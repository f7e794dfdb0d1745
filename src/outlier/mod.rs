//! Outlier detection and ejection (Envoy / gRPC A50 semantics, plus a
//! latency rule neither ships).
//!
//! Each endpoint carries a [`HostStats`] (atomics only) that records every
//! completed call; one [`Detector`] per balancer applies the rules and ejects
//! hosts, which the picker then skips while [`HostStats::is_ejected`] holds.
//!
//! | rule | when | default |
//! |---|---|---|
//! | consecutive failures | at once, on the response | 5 in a row |
//! | consecutive gateway failures (`Gateway`, `Connect`, `Timeout`) | at once | 5 in a row |
//! | consecutive local-origin failures (`Connect`, `Timeout`: no answer) | at once | 5 in a row |
//! | success rate | each interval | below mean − 1.9 σ and below 99%; ≥ 5 hosts with ≥ 100 requests |
//! | failure percentage | each interval | above 85%; ≥ 5 hosts with ≥ 50 requests |
//! | latency | each interval | mean > 3 × pool median for 3 intervals; ≥ 3 hosts with ≥ 50 samples |
//!
//! **Ejection time** is `min(base · m, max)` plus a uniform jitter in
//! `0..=max_ejection_jitter`, where `m` is the host's multiplier after this
//! ejection: it grows by one per ejection (stopping at `⌈max / base⌉`) and
//! decays by one per interval the host spends un-ejected (defaults: 30 s,
//! 300 s, 3 s). An ejection ends exactly at its deadline.
//!
//! **Ejection limit:** at most [`max_ejections`]`(n, max_ejection_percent)`
//! hosts of an `n`-host pool are ejected at once — at least one (so a 3-host
//! pool can eject its one bad host) and never all.
//!
//! **No background task.** Consecutive rules act on the response that trips
//! them; the interval rules run in [`Detector::maybe_evaluate`], which the
//! balancer calls lazily from its response path (one atomic load when not
//! due). With little traffic an evaluation covers more than one interval;
//! the multiplier then decays by the number of intervals elapsed.
//!
//! **What counts:** `Success` and `Failure(Slow)` are successes and
//! latency samples (a slow call was served; the latency rule judges it);
//! `Error`, `Timeout`, `Connect` and `Gateway` are failures, the last three
//! also gateway failures, `Connect` and `Timeout` also local-origin failures (Envoy maps connect failures and timeouts to
//! 503/504); `Overloaded` (429) and `Ignore` count for nothing — ejecting a
//! host for shedding load would push its load onto the others.
//!
//! **Wiring into a balancer:** each endpoint owns a `HostStats` and is
//! `AsRef<HostStats>`; the pick skips endpoints for which
//! `is_ejected(now_ns)` holds; the response path calls
//! [`Detector::on_response`] (or [`HostStats::record`], then
//! [`Detector::eject`] with the current pool only when it returns a reason)
//! and [`Detector::maybe_evaluate`] when [`Detector::is_due`]; a panic
//! threshold reads [`Detector::ejected_count_at`].
//!
//! Why gateway failures are on by default (Envoy's default enforcement is
//! 0%): they say the *host* is not serving (refused connections, 502/503/504,
//! timeouts), whereas a generic error may be the request's fault. Users who
//! relax or turn off the consecutive-failures rule for an API with many
//! request-caused errors still get dead hosts ejected within 5 calls, and
//! the metric's reason names the more specific cause.
//!
//! ```
//! use std::time::Duration;
//! use tower_lb::classify::{FailureKind, Outcome};
//! use tower_lb::outlier::{Detector, EjectionReason, HostStats, OutlierDetection};
//!
//! let cfg = OutlierDetection::default();
//! let pool: Vec<HostStats> = (0..3).map(|_| HostStats::default()).collect();
//! let detector = Detector::new();
//! let gateway = Outcome::Failure(FailureKind::Gateway { retry_after: None });
//! let ms = Duration::from_millis(1);
//!
//! let mut ejected = None;
//! for i in 0..5u64 {
//!     ejected = detector.on_response(&cfg, &pool, 2, gateway, ms, i, 0);
//! }
//! assert_eq!(ejected, Some(EjectionReason::ConsecutiveGatewayFailures));
//! assert!(pool[2].is_ejected(5));
//! assert!(!pool[2].is_ejected(34_000_000_000)); // 30 s + at most 3 s jitter
//! assert_eq!(detector.ejected_count_at(&pool, 5), 1);
//! ```

mod config;
mod consecutive;
mod detector;
mod evaluate;
mod failure_percentage;
mod host;
mod latency;
mod rule;
mod success_rate;

pub use config::{
    Builder, DEFAULT_BASE_EJECTION_TIME, DEFAULT_INTERVAL, DEFAULT_MAX_EJECTION_JITTER,
    DEFAULT_MAX_EJECTION_PERCENT, DEFAULT_MAX_EJECTION_TIME, MAX_EJECTION_BOUND, OutlierDetection,
    max_ejections,
};

/// The old name of [`Builder`].
#[deprecated(since = "0.1.0", note = "renamed `tower_lb::outlier::Builder`")]
pub type OutlierDetectionBuilder = Builder;
pub use consecutive::{
    Consecutive, DEFAULT_CONSECUTIVE_FAILURES, DEFAULT_CONSECUTIVE_GATEWAY_FAILURES,
    DEFAULT_CONSECUTIVE_LOCAL_ORIGIN_FAILURES,
};
pub use detector::Detector;
pub use evaluate::Evaluation;
pub use failure_percentage::{
    DEFAULT_FAILURE_PERCENTAGE_MINIMUM_HOSTS, DEFAULT_FAILURE_PERCENTAGE_REQUEST_VOLUME,
    DEFAULT_FAILURE_PERCENTAGE_THRESHOLD, FailurePercentage,
};
pub use host::{EjectionReason, HostStats};
pub use latency::{
    DEFAULT_LATENCY_CONSECUTIVE_INTERVALS, DEFAULT_LATENCY_FACTOR, DEFAULT_LATENCY_MINIMUM_HOSTS,
    DEFAULT_LATENCY_REQUEST_VOLUME, LatencyOutlier,
};
pub use rule::DEFAULT_ENFORCING_PERCENT;
pub use success_rate::{
    DEFAULT_SUCCESS_RATE_EJECTION_THRESHOLD, DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS,
    DEFAULT_SUCCESS_RATE_REQUEST_VOLUME, DEFAULT_SUCCESS_RATE_STDEV_FACTOR, SuccessRate,
};
