//! Active health checks: probe every endpoint on an interval and take the
//! ones that fail out of rotation (Envoy's and pingora's active checking).
//!
//! [`spawn`] starts one driver task per balancer. For each endpoint (of
//! its [subset](crate::route::Subset), with subsetting) it runs
//! the [`Check`] every [`interval`](Builder::interval) plus a
//! random jitter, or every
//! [`no_traffic_interval`](Builder::no_traffic_interval) while the
//! endpoint carries no traffic (Envoy's rule: idle endpoints cost fewer
//! probes), each probe bounded by a [`timeout`](Builder::timeout).
//!
//! * After [`unhealthy_threshold`](Builder::unhealthy_threshold)
//!   failed probes in a row an endpoint **fails** its check: it takes no
//!   picks and counts once as unhealthy in the [health census](crate::health)
//!   (panic routing, with `RouteAll`, routes over it again when too few pass).
//! * After [`healthy_threshold`](Builder::healthy_threshold)
//!   passed probes in a row it **passes** again.
//! * A new endpoint starts passing: discovery sources already admit only
//!   ready endpoints, and breakers and outlier detection guard the first
//!   calls; a pessimistic start would leave a fresh pool empty until its
//!   first round of probes.
//!
//! Each flip is a health event ([`HealthChange::CheckFailing`],
//! [`HealthChange::CheckPassing`]). The driver stops when the returned
//! [`Checks`] guard is dropped, or when the balancer and all its handles
//! are gone (checked at every round); it leaves no task behind.
//!
//! Probes: an HTTP request through the endpoint's own service
//! ([`http::HttpCheck`](crate::http::HttpCheck), feature `http`), the
//! standard gRPC health service
//! ([`grpc::GrpcHealthCheck`](crate::grpc::GrpcHealthCheck), feature
//! `grpc`: `grpc.health.v1` `Check` or `Watch`, per service name), or any
//! closure `Fn(&K, S) -> impl Future<Output = Result<(), E>>` given the
//! endpoint's key and a clone of its service (a TCP connect, ...).
//!
//! ```
//! use std::time::Duration;
//! use tower::util::BoxCloneSyncService;
//! use tower::{ServiceExt, service_fn};
//! use tower_lb::{Balance, check::{self, HealthCheck}};
//!
//! type Svc = BoxCloneSyncService<u32, u32, std::io::Error>;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let replica = || Svc::new(service_fn(|req: u32| async move { Ok(req) }));
//! let lb = Balance::builder()
//!     .endpoint("a", replica())
//!     .endpoint("b", replica())
//!     .build()?;
//! let config = HealthCheck::builder()
//!     .interval(Duration::from_secs(5))
//!     .unhealthy_threshold(3)
//!     .build()?;
//! // Probe each endpoint by calling it with request 0.
//! let checks = check::spawn(&lb, config, |_key: &&str, svc: Svc| async move {
//!     svc.oneshot(0).await.map(drop)
//! })?;
//! // ... `checks` stops the probes when dropped.
//! # drop(checks); Ok(()) }
//! ```
//!
//! [`HealthChange::CheckFailing`]: crate::health::HealthChange::CheckFailing
//! [`HealthChange::CheckPassing`]: crate::health::HealthChange::CheckPassing

mod driver;
mod endpoint;

use std::time::Duration;

pub use driver::{Checks, spawn};
#[allow(deprecated)]
pub use endpoint::{Check, CheckFn, CheckFuture, Probe, ProbeFn, ProbeFuture, check_fn, probe_fn};

use crate::error::{ConfigError, check_bounded, check_positive};

/// Default time between probes of an endpoint with traffic: 10 s (pingora's
/// example interval; Envoy has no default and most configurations use 5–10 s).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// Default upper bound of the random delay added to each interval: 1 s, a
/// tenth of the interval, so a fleet of balancers does not probe in step.
pub const DEFAULT_JITTER: Duration = Duration::from_secs(1);
/// Default time a probe may take before it counts as failed: 1 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default failed probes in a row that fail an endpoint: 3 (Kubernetes'
/// `failureThreshold` default).
pub const DEFAULT_UNHEALTHY_THRESHOLD: u32 = 3;
/// Default passed probes in a row that bring it back: 2 (Envoy's common
/// `healthy_threshold`; one lucky probe should not return a flapping host).
pub const DEFAULT_HEALTHY_THRESHOLD: u32 = 2;
/// Default interval for endpoints without traffic since their last probe:
/// 60 s (Envoy's `no_traffic_interval` default).
pub const DEFAULT_NO_TRAFFIC_INTERVAL: Duration = Duration::from_secs(60);

/// Validated settings of active health checks; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    pub(crate) interval: Duration,
    pub(crate) jitter: Duration,
    pub(crate) timeout: Duration,
    pub(crate) unhealthy_threshold: u32,
    pub(crate) healthy_threshold: u32,
    pub(crate) no_traffic_interval: Duration,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            interval: DEFAULT_INTERVAL,
            jitter: DEFAULT_JITTER,
            timeout: DEFAULT_TIMEOUT,
            unhealthy_threshold: DEFAULT_UNHEALTHY_THRESHOLD,
            healthy_threshold: DEFAULT_HEALTHY_THRESHOLD,
            no_traffic_interval: DEFAULT_NO_TRAFFIC_INTERVAL,
        }
    }
}

impl HealthCheck {
    /// A builder starting from the defaults.
    pub fn builder() -> Builder {
        Builder {
            cfg: Self::default(),
        }
    }

    /// Time between probes of an endpoint with traffic.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Time between probes of an endpoint without traffic.
    pub fn no_traffic_interval(&self) -> Duration {
        self.no_traffic_interval
    }
}

/// The old name of [`Builder`].
#[deprecated(since = "0.1.0", note = "renamed `tower_lb::check::Builder`")]
pub type HealthCheckBuilder = Builder;

/// Configures a [`HealthCheck`]; setters never fail, [`build`](Self::build)
/// checks every value.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct Builder {
    cfg: HealthCheck,
}

impl Builder {
    /// Time between probes of an endpoint with traffic (> 0, ≤ one year;
    /// default [`DEFAULT_INTERVAL`]).
    pub fn interval(mut self, d: Duration) -> Self {
        self.cfg.interval = d;
        self
    }

    /// Upper bound of the uniform random delay added to each interval
    /// (≤ one year; zero turns it off; default [`DEFAULT_JITTER`]).
    pub fn jitter(mut self, d: Duration) -> Self {
        self.cfg.jitter = d;
        self
    }

    /// Time a probe may take before it counts as failed (> 0, ≤ one year;
    /// default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.cfg.timeout = d;
        self
    }

    /// Failed probes in a row that fail an endpoint (≥ 1; default
    /// [`DEFAULT_UNHEALTHY_THRESHOLD`]).
    pub fn unhealthy_threshold(mut self, n: u32) -> Self {
        self.cfg.unhealthy_threshold = n;
        self
    }

    /// Passed probes in a row that bring a failing endpoint back (≥ 1;
    /// default [`DEFAULT_HEALTHY_THRESHOLD`]).
    pub fn healthy_threshold(mut self, n: u32) -> Self {
        self.cfg.healthy_threshold = n;
        self
    }

    /// Time between probes of an endpoint that had no traffic since its
    /// last probe (≥ `interval`, ≤ one year; default
    /// [`DEFAULT_NO_TRAFFIC_INTERVAL`]).
    pub fn no_traffic_interval(mut self, d: Duration) -> Self {
        self.cfg.no_traffic_interval = d;
        self
    }

    /// Checks every value.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `health_check.interval`, `.jitter`,
    /// `.timeout`, `.unhealthy_threshold`, `.healthy_threshold` or
    /// `.no_traffic_interval`.
    pub fn build(self) -> Result<HealthCheck, ConfigError> {
        let c = self.cfg;
        check_positive("health_check.interval", c.interval)?;
        check_bounded("health_check.jitter", c.jitter)?;
        check_positive("health_check.timeout", c.timeout)?;
        check_positive("health_check.no_traffic_interval", c.no_traffic_interval)?;
        if c.no_traffic_interval < c.interval {
            return Err(ConfigError::new(
                "health_check.no_traffic_interval",
                c.no_traffic_interval,
                "a duration >= interval",
            ));
        }
        if c.unhealthy_threshold == 0 {
            return Err(ConfigError::new(
                "health_check.unhealthy_threshold",
                0,
                "an integer >= 1",
            ));
        }
        if c.healthy_threshold == 0 {
            return Err(ConfigError::new(
                "health_check.healthy_threshold",
                0,
                "an integer >= 1",
            ));
        }
        Ok(c)
    }
}
