//! A simulated replica: a service time (fixed or lognormal), an optional
//! number of workers with a FIFO queue, a schedule of events and of
//! slowdowns. The same model answers in-process calls (`--sim`) and HTTP
//! requests (http mode).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::slots::Resource;
use super::timer::Timer;
use crate::scenario::random::{Delay, Rng};
use crate::scenario::{BackendSpec, EventSpec, Slowdown};

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
    /// Whether answers carry a load report.
    reports: bool,
    /// Its slowdown factor per step, if the scenario slows it down.
    slowdown: Option<Slowdown>,
    /// The measured window, for the busy time.
    window: (Instant, Instant),
    /// Worker-nanoseconds spent serving within the window.
    busy_ns: AtomicU64,
    /// When services end ([`Timer`]).
    timer: Timer,
    /// The shared resources each request takes a slot of, in order.
    uses: Vec<Arc<Resource>>,
    /// When it joins the balancers, if later than the start.
    join: Option<Duration>,
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
/// stream's body can keep it), and adds the time it held a worker within
/// the measured window to the backend's busy time.
#[derive(Debug)]
struct Active(Arc<Backend>, Instant);

impl Active {
    fn new(b: Arc<Backend>) -> Self {
        b.active.fetch_add(1, Ordering::Relaxed);
        Self(b, Instant::now())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        let b = &self.0;
        b.active.fetch_sub(1, Ordering::Relaxed);
        let (from, to) = b.window;
        let (began, ended) = (self.1.max(from), Instant::now().min(to));
        if ended > began {
            let ns = (ended - began).as_nanos() as u64;
            b.busy_ns.fetch_add(ns, Ordering::Relaxed);
        }
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
    /// A backend whose event clock starts at `start`, measured over
    /// `window`, slowed down as `slowdown` says.
    pub fn new(
        spec: &BackendSpec,
        seed: u64,
        start: Instant,
        window: (Instant, Instant),
        slowdown: Option<Slowdown>,
    ) -> Self {
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
            reports: spec.reports,
            slowdown,
            window,
            busy_ns: AtomicU64::new(0),
            timer: Timer::new(false),
            uses: Vec::new(),
            join: spec.join.map(|j| j.0),
        }
    }

    /// When it joins the balancers, if it joins after the start.
    pub fn joins_at(&self) -> Option<Instant> {
        self.join.map(|j| self.start + j)
    }

    /// Each request also takes a slot of each of `uses`, in order, before
    /// its own service time.
    pub fn with_resources(mut self, uses: Vec<Arc<Resource>>) -> Self {
        self.uses = uses;
        self
    }

    /// In `--sim`: service ends fall on tokio's timer ticks ([`Timer`]).
    pub fn simulated(mut self) -> Self {
        self.timer = Timer::new(true);
        self
    }

    /// How many times slower than its service time it runs at `now` (1
    /// without a slowdown).
    pub fn slowdown(&self, now: Instant) -> f64 {
        self.slowdown
            .as_ref()
            .map_or(1.0, |s| s.factor(now.saturating_duration_since(self.start)))
    }

    /// Its utilization over the measured window: the time its workers
    /// spent serving over the time they had (with unlimited workers, the
    /// mean number of requests served at once).
    pub fn utilization(&self) -> f64 {
        let (from, to) = self.window;
        let span = (to - from).as_nanos() as f64 * self.workers.as_ref().map_or(1, |w| w.0) as f64;
        if span > 0.0 {
            self.busy_ns.load(Ordering::Relaxed) as f64 / span
        } else {
            0.0
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

    fn draw<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
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
        let fail = c.error_rate > 0.0 && self.draw(|rng| rng.unit() < c.error_rate);
        if fail && let Some(d) = c.error_delay {
            tokio::time::sleep(d).await;
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
        // The shared resources first (a query before the rest of the
        // handler): a request that finds no slot fails with its status.
        for r in &self.uses {
            if let Err(status) = r.use_once().await {
                return (Answer::Status(status), None);
            }
        }
        // The factor in force when service starts holds for all of it.
        let factor = self.slowdown(Instant::now());
        let d = self.draw(|rng| c.delay.sample(rng)).mul_f64(factor);
        self.timer
            .wait(d, |p| self.draw(|rng| rng.unit() < p))
            .await;
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

    /// Whether its answers carry a load report (`reports = true`).
    pub fn reports(&self) -> bool {
        self.reports
    }

    /// Its worker limit, if any.
    pub fn workers(&self) -> Option<usize> {
        self.workers.as_ref().map(|(w, _)| *w)
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
        let m = c.delay.mean_ns() * self.slowdown(now);
        let (a, q) = self.load();
        let wait = match &self.workers {
            Some((w, _)) if a + q >= *w => (q + 1) as f64 * m / *w as f64,
            _ => 0.0,
        };
        (wait + m) / (1.0 - c.error_rate)
    }
}
