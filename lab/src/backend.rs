//! A simulated replica: a service time (fixed or lognormal), an optional
//! number of workers with a FIFO queue, and a schedule of events. The same
//! model answers in-process calls (`--sim`) and HTTP requests (http mode).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::load::{Meter, report_text};
use super::scenario::{BackendSpec, DelaySpec, EventSpec};

/// SplitMix64: small, seedable, good enough for the lab's random numbers.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next random `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Mixes a seed with a stream number, so that every backend and user draws
/// from its own sequence.
pub fn sub_seed(seed: u64, stream: u64) -> u64 {
    Rng::new(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// z-score of the 99th percentile of a standard normal.
const Z99: f64 = 2.326_347_874_040_841;

/// A service time ready to sample.
#[derive(Debug, Clone, Copy)]
pub enum Delay {
    /// Always this many nanoseconds.
    Fixed(f64),
    /// `exp(mu + sigma·z)` nanoseconds.
    LogNormal {
        /// ln of the median.
        mu: f64,
        /// From `ln(p99 / median) / z99`.
        sigma: f64,
    },
}

impl From<DelaySpec> for Delay {
    fn from(d: DelaySpec) -> Self {
        match d {
            DelaySpec::Fixed(d) => Delay::Fixed(d.as_nanos() as f64),
            DelaySpec::LogNormal { median, p99 } => {
                let m = median.as_nanos() as f64;
                Delay::LogNormal {
                    mu: m.ln(),
                    sigma: (p99.as_nanos() as f64 / m).ln() / Z99,
                }
            }
        }
    }
}

impl Delay {
    /// The mean, in nanoseconds.
    pub fn mean_ns(&self) -> f64 {
        match *self {
            Delay::Fixed(ns) => ns,
            Delay::LogNormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
        }
    }

    /// One sample.
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        let ns = match *self {
            Delay::Fixed(ns) => ns,
            Delay::LogNormal { mu, sigma } => (mu + sigma * rng.normal()).exp(),
        };
        Duration::from_nanos(ns.min(3.6e12) as u64)
    }
}

/// A backend's behaviour at one moment, after the events so far.
#[derive(Debug, Clone, Copy)]
pub struct Condition {
    /// Not answering.
    pub down: bool,
    /// Service time.
    pub delay: Delay,
    /// Fraction of requests that fail.
    pub error_rate: f64,
    /// Status of those failures.
    pub status: u16,
    /// Failures answer after this, without a worker (fast failure).
    pub error_delay: Option<Duration>,
}

/// How a backend answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP status.
    Status(u16),
    /// Down: the connection is closed without an answer.
    Down,
}

/// One replica's live state.
#[derive(Debug)]
pub struct Backend {
    name: String,
    base: Condition,
    events: Vec<EventSpec>,
    workers: Option<(usize, Arc<Semaphore>)>,
    start: Instant,
    rng: Mutex<Rng>,
    /// Requests holding a worker (or being served, when unlimited).
    active: AtomicUsize,
    /// Requests waiting for a worker.
    waiting: AtomicUsize,
    /// Answers per second, for load reports.
    meter: Meter,
    /// Whether answers carry a load report.
    reports: bool,
}

/// Decrements a counter when dropped (also when the request is abandoned).
struct Count<'a>(&'a AtomicUsize);

impl<'a> Count<'a> {
    fn new(c: &'a AtomicUsize) -> Self {
        c.fetch_add(1, Ordering::Relaxed);
        Self(c)
    }
}

impl Drop for Count<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a request as active on its backend until dropped (owned, so a
/// stream's body can keep it).
#[derive(Debug)]
struct Active(Arc<Backend>);

impl Active {
    fn new(b: Arc<Backend>) -> Self {
        b.active.fetch_add(1, Ordering::Relaxed);
        Self(b)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream's claim on its backend: the worker (and the active count) it
/// holds while its body streams, until `until`.
#[derive(Debug)]
pub struct Hold {
    /// When the stream ends.
    pub until: Instant,
    _permit: Option<OwnedSemaphorePermit>,
    _active: Active,
}

impl Backend {
    /// A backend whose event clock starts at `start`.
    pub fn new(spec: &BackendSpec, seed: u64, start: Instant) -> Self {
        let workers = spec
            .workers
            .map(|w| (w as usize, Arc::new(Semaphore::new(w as usize))));
        Self {
            name: spec.name.clone(),
            base: Condition {
                down: false,
                delay: spec.delay.into(),
                error_rate: 0.0,
                status: 503,
                error_delay: None,
            },
            events: spec.events.clone(),
            workers,
            start,
            rng: Mutex::new(Rng::new(seed)),
            active: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            meter: Meter::new(start),
            reports: spec.reports,
        }
    }

    /// The backend's name (`server-1`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The condition at `now`: the base with every event so far applied.
    pub fn condition(&self, now: Instant) -> Condition {
        let t = now.saturating_duration_since(self.start);
        let mut c = self.base;
        for e in self.events.iter().take_while(|e| e.at.0 <= t) {
            if let Some(d) = e.down {
                c.down = d;
            }
            if let Some(d) = e.delay {
                c.delay = d.into();
            }
            if let Some(r) = e.error_rate {
                c.error_rate = r;
            }
            if let Some(s) = e.status {
                c.status = s;
            }
            if let Some(d) = e.error_delay {
                c.error_delay = Some(d.0);
            }
        }
        c
    }

    fn draw(&self, f: impl FnOnce(&mut Rng) -> Duration) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut rng)
    }

    /// Serves one request: waits for a worker (FIFO), then for the service
    /// time, and answers 200 or the failure status. For a stream
    /// (`Some(hold)`), a 200 answer comes with a [`Hold`]: the worker stays
    /// busy streaming the body until `hold` has passed (or the hold is
    /// dropped).
    pub async fn serve(self: &Arc<Self>, stream: Option<Duration>) -> (Answer, Option<Hold>) {
        let c = self.condition(Instant::now());
        if c.down {
            return (Answer::Down, None);
        }
        let fail = c.error_rate > 0.0 && {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            rng.unit() < c.error_rate
        };
        if fail && let Some(d) = c.error_delay {
            tokio::time::sleep(d).await;
            self.meter.record(Instant::now(), true);
            return (Answer::Status(c.status), None);
        }
        let permit = match &self.workers {
            Some((_, sem)) => {
                let _waiting = Count::new(&self.waiting);
                match sem.clone().acquire_owned().await {
                    Ok(p) => Some(p),
                    Err(_) => return (Answer::Down, None),
                }
            }
            None => None,
        };
        let active = Active::new(self.clone());
        let d = self.draw(|rng| c.delay.sample(rng));
        tokio::time::sleep(d).await;
        self.meter.record(Instant::now(), fail);
        if fail {
            return (Answer::Status(c.status), None);
        }
        let hold = stream.map(|hold| Hold {
            until: Instant::now() + hold,
            _permit: permit,
            _active: active,
        });
        (Answer::Status(200), hold)
    }

    /// The load report an answer sent at `now` carries, when the backend
    /// reports (see [`super::load`]).
    pub fn load_report(&self, now: Instant) -> Option<String> {
        if !self.reports {
            return None;
        }
        let (busy, waiting) = self.load();
        let workers = self.workers.as_ref().map(|(w, _)| *w);
        Some(report_text(busy, waiting, workers, self.meter.rates(now)))
    }

    /// Requests being served and waiting, right now.
    pub fn load(&self) -> (usize, usize) {
        (
            self.active.load(Ordering::Relaxed),
            self.waiting.load(Ordering::Relaxed),
        )
    }

    /// What the oracle knows: the expected time until a request sent now is
    /// answered successfully, in nanoseconds (infinite when it cannot be).
    ///
    /// With `w` workers, `a` requests in service and `q` waiting, a new
    /// request waits for `q + 1` of the `a` to finish when all workers are
    /// busy; with service time mean `m`, that takes about `(q + 1)·m / w`.
    /// A failure rate `r` stretches the expected time to success by
    /// `1 / (1 − r)`.
    pub fn expected_ns(&self, now: Instant) -> f64 {
        let c = self.condition(now);
        if c.down || c.error_rate >= 1.0 {
            return f64::INFINITY;
        }
        let m = c.delay.mean_ns();
        let (a, q) = self.load();
        let wait = match &self.workers {
            Some((w, _)) if a + q >= *w => (q + 1) as f64 * m / *w as f64,
            _ => 0.0,
        };
        (wait + m) / (1.0 - c.error_rate)
    }
}
