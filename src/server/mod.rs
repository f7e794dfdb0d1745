//! The server side of load reporting (feature `http`): a tower layer for a
//! replica's own HTTP or gRPC server that tells its clients how loaded it
//! is, so that independent client-side balancers see load they did not send.
//!
//! [`ServerLoad`] counts the requests in flight (RIF) through its layer,
//! files each request's latency under the RIF it arrived at, and estimates
//! the latency a request arriving now can expect as the median of the
//! recent latencies at the current RIF (Prequal's estimator, NSDI '24). Its
//! [`layer`](ServerLoad::layer):
//!
//! * **answers probes** at once, without calling the service: an HTTP
//!   request carrying the [`PROBE_HEADER`] (or sent to a path set with
//!   [`Builder::probe_path`]), and a gRPC call to
//!   [`GRPC_PROBE_PATH`] (answered trailers-only with `grpc-status: 0`);
//!   the answer is a 200 with a load report and an empty body;
//! * **attaches a load report** to every response
//!   ([`orca::HEADER`](crate::orca::HEADER), TEXT form, unless
//!   [`report_responses(false)`](Builder::report_responses)):
//!   the named metrics [`rif`](crate::orca::RIF_METRIC) and
//!   [`latency_ms`](crate::orca::LATENCY_METRIC), `rps_fractional` and
//!   `eps` over the last second (an error or a 5xx answer is an error),
//!   and CPU and application utilization when known: set by the server
//!   ([`set_cpu_utilization`](ServerLoad::set_cpu_utilization)), or from
//!   the RIF when the server declares its [`workers`](Builder::workers)
//!   (busy workers over workers, and RIF over workers, which passes 1 when
//!   requests queue).
//!
//! The client reads these reports with the HTTP and gRPC classifiers
//! ([`PeakEwma::utilization`](crate::pick::PeakEwma::utilization),
//! [`OrcaRoundRobin`](crate::pick::OrcaRoundRobin)) and its probes with
//! [`http::LoadProbe`](crate::http::LoadProbe) (the
//! [`Prequal`](crate::pick::Prequal) picker).
//!
//! A request counts in flight from its `call` until its response future
//! ends (answers, fails or is dropped); a response body that streams after
//! its head is not counted. Cost per request: two atomic read-modify-writes
//! on the RIF count, one slot write for the latency, two for the rates, and
//! the report (the median of 16 numbers and one formatted header, the one
//! allocation); `benches/server.rs` measures it.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Layer, ServiceExt, service_fn};
//! use tower_lb::server::{PROBE_HEADER, ServerLoad};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let load = ServerLoad::builder().workers(4).build()?;
//! let app = service_fn(|_req: http::Request<String>| async {
//!     Ok::<_, Infallible>(http::Response::new(String::from("hello")))
//! });
//! let svc = load.layer().layer(app);
//!
//! let res = svc.clone().oneshot(http::Request::new(String::new())).await?;
//! assert!(res.headers().contains_key(tower_lb::orca::HEADER));
//!
//! // A probe is answered by the layer: the app is not called.
//! let probe = http::Request::builder().header(PROBE_HEADER, "1").body(String::new())?;
//! let res = svc.oneshot(probe).await?;
//! assert_eq!(res.body(), "");
//! let report = tower_lb::orca::LoadReport::parse(
//!     res.headers()[tower_lb::orca::HEADER].to_str()?,
//! )?;
//! assert_eq!(report.named_metric("rif"), Some(0.0));
//! # Ok(()) }
//! ```

mod layer;
mod levels;
mod rate;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

pub use layer::{ReportLoad, ResponseFuture, ServerLoadLayer};
pub use levels::{LEVELS, SLOTS};

use crate::error::ConfigError;
use crate::orca::{LATENCY_METRIC, LoadReport, RIF_METRIC};
use crate::time::Epoch;

/// The request header that marks a probe (any value).
pub const PROBE_HEADER: &str = "x-lb-probe";

/// The gRPC method a probe calls: a unary call, answered trailers-only.
pub const GRPC_PROBE_PATH: &str = "/tower_lb.v1.LoadProbe/Probe";

/// Most workers a server may declare: more than any server has threads.
pub const MAX_WORKERS: u32 = 1 << 20;

/// What a server's clients are told about its load; see the [module
/// docs](self). Clones share one count.
#[derive(Clone)]
pub struct ServerLoad {
    inner: Arc<Inner>,
}

struct Inner {
    rif: AtomicUsize,
    levels: levels::Levels,
    answered: rate::Window,
    failed: rate::Window,
    epoch: Epoch,
    /// Utilizations set by the server (`f64` bits; NaN: not set).
    cpu: AtomicU64,
    app: AtomicU64,
    config: Config,
}

#[derive(Debug, Clone)]
struct Config {
    workers: Option<u32>,
    probe_path: Option<String>,
    report_responses: bool,
}

impl std::fmt::Debug for ServerLoad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerLoad")
            .field("in_flight", &self.in_flight())
            .field("config", &self.inner.config)
            .finish()
    }
}

impl Default for ServerLoad {
    fn default() -> Self {
        Self::from_config(Config {
            workers: None,
            probe_path: None,
            report_responses: true,
        })
    }
}

impl ServerLoad {
    /// A tracker with the defaults: probes by [`PROBE_HEADER`] and
    /// [`GRPC_PROBE_PATH`], a report on every response, no declared
    /// workers. Outside a tokio runtime's clock, as any tokio `Instant`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder from the defaults.
    pub fn builder() -> Builder {
        Builder {
            config: Config {
                workers: None,
                probe_path: None,
                report_responses: true,
            },
        }
    }

    fn from_config(config: Config) -> Self {
        let nan = f64::NAN.to_bits();
        Self {
            inner: Arc::new(Inner {
                rif: AtomicUsize::new(0),
                levels: levels::Levels::new(),
                answered: rate::Window::new(),
                failed: rate::Window::new(),
                epoch: Epoch::new(tokio::time::Instant::now()),
                cpu: AtomicU64::new(nan),
                app: AtomicU64::new(nan),
                config,
            }),
        }
    }

    /// The layer to put around the server's service.
    pub fn layer(&self) -> ServerLoadLayer {
        ServerLoadLayer { load: self.clone() }
    }

    /// Requests in flight through the layer now.
    pub fn in_flight(&self) -> usize {
        self.inner.rif.load(Ordering::Relaxed)
    }

    /// The latency a request arriving now can expect: the median of the
    /// recent latencies of requests that arrived with as many in flight
    /// ([`latency_at`](Self::latency_at) the current RIF plus itself).
    pub fn latency(&self) -> Option<Duration> {
        self.latency_at(self.in_flight() + 1)
    }

    /// The median of the recent latencies of requests that arrived with
    /// `in_flight` requests in flight, themselves included; when none did
    /// yet, the nearest level below with some, else above. `None` before
    /// the first answer.
    pub fn latency_at(&self, in_flight: usize) -> Option<Duration> {
        self.inner
            .levels
            .estimate(in_flight)
            .map(|us| Duration::from_micros(u64::from(us)))
    }

    /// Sets the CPU utilization the reports carry (finite, `>= 0`; above
    /// 1 past a soft limit). Anything else clears it.
    pub fn set_cpu_utilization(&self, u: f64) {
        store(&self.inner.cpu, u);
    }

    /// Sets the application utilization the reports carry (finite, `>= 0`).
    /// Anything else clears it.
    pub fn set_application_utilization(&self, u: f64) {
        store(&self.inner.app, u);
    }

    /// The report a response sent now carries.
    pub fn report(&self) -> LoadReport {
        let i = &*self.inner;
        let now_ns = i.epoch.nanos(tokio::time::Instant::now());
        let rif = self.in_flight();
        let mut r = LoadReport::new()
            .with_rps_fractional(i.answered.per_second(now_ns))
            .with_eps(i.failed.per_second(now_ns));
        let (cpu, app) = (load(&i.cpu), load(&i.app));
        let w = i.config.workers.map(f64::from);
        if let Some(cpu) = cpu.or(w.map(|w| (rif as f64).min(w) / w)) {
            r = r.with_cpu_utilization(cpu);
        }
        if let Some(app) = app.or(w.map(|w| rif as f64 / w)) {
            r = r.with_application_utilization(app);
        }
        r = r.with_named_metric(RIF_METRIC, rif as f64);
        if let Some(us) = i.levels.estimate(rif + 1) {
            r = r.with_named_metric(LATENCY_METRIC, f64::from(us) / 1000.0);
        }
        r
    }

    /// A request starts: counted in flight; returns its level.
    fn start(&self) -> usize {
        self.inner.rif.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A request that arrived at `level` ends after `elapsed`, `failed` or
    /// not.
    fn end(&self, level: usize, elapsed: Duration, failed: bool) {
        let i = &*self.inner;
        i.rif.fetch_sub(1, Ordering::Relaxed);
        let us = u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX);
        i.levels.record(level, us);
        let now_ns = i.epoch.nanos(tokio::time::Instant::now());
        i.answered.record(now_ns);
        if failed {
            i.failed.record(now_ns);
        }
    }
}

fn store(slot: &AtomicU64, u: f64) {
    let v = if u.is_finite() && u >= 0.0 {
        u
    } else {
        f64::NAN
    };
    slot.store(v.to_bits(), Ordering::Relaxed);
}

fn load(slot: &AtomicU64) -> Option<f64> {
    let v = f64::from_bits(slot.load(Ordering::Relaxed));
    (!v.is_nan()).then_some(v)
}

/// The old name of [`Builder`].
#[deprecated(since = "0.1.0", note = "renamed `tower_lb::server::Builder`")]
pub type ServerLoadBuilder = Builder;

/// Configures a [`ServerLoad`]; setters never fail, [`build`](Self::build)
/// checks every value.
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    config: Config,
}

impl Builder {
    /// The requests the server serves at once (its workers, threads or
    /// permits): the reports then carry CPU utilization `min(RIF, w) / w`
    /// and application utilization `RIF / w`, unless the server sets
    /// them. `1..=`[`MAX_WORKERS`]; default none.
    pub fn workers(mut self, workers: u32) -> Self {
        self.config.workers = Some(workers);
        self
    }

    /// A path whose requests are probes too (besides [`PROBE_HEADER`]),
    /// such as `/lb/probe`. Default none.
    pub fn probe_path(mut self, path: impl Into<String>) -> Self {
        self.config.probe_path = Some(path.into());
        self
    }

    /// Whether every response carries a report (default true), or only the
    /// answers to probes.
    pub fn report_responses(mut self, on: bool) -> Self {
        self.config.report_responses = on;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// A [`ConfigError`] on `server.workers` (0 or above [`MAX_WORKERS`])
    /// or `server.probe_path` (not a path starting with `/`).
    pub fn build(self) -> Result<ServerLoad, ConfigError> {
        if let Some(w) = self.config.workers
            && !(1..=MAX_WORKERS).contains(&w)
        {
            return Err(ConfigError::new(
                "server.workers",
                w,
                "an integer in 1..=1048576",
            ));
        }
        if let Some(p) = &self.config.probe_path
            && (!p.starts_with('/') || p.parse::<http::uri::PathAndQuery>().is_err())
        {
            return Err(ConfigError::new(
                "server.probe_path",
                p,
                "a URI path starting with `/`",
            ));
        }
        Ok(ServerLoad::from_config(self.config))
    }
}
