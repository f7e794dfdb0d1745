//! The probe driver: one task per balancer.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::Prober;
use crate::balance::{Balance, Shared};
use crate::error::{ConfigError, current_runtime};
use crate::model::Model;
use crate::orca::{LATENCY_METRIC, LoadReport, RIF_METRIC};
use crate::pick::Picker;
use crate::pick::prequal::{Answer, ProbePool, ProbeStats};
use crate::rng::below;
use crate::task::TaskGuard;

/// How often an idle driver checks that its balancer still exists.
const LIVENESS: Duration = Duration::from_secs(1);

/// The running probes of one balancer. Dropping it stops them (and every
/// probe in flight); [`detach`](Self::detach) lets them run until the
/// balancer and its handles are gone.
#[must_use = "dropping `Probes` stops the probes at once"]
#[derive(Debug)]
pub struct Probes {
    task: TaskGuard,
    pool: Arc<ProbePool>,
}

impl Probes {
    /// Lets the probes run until the balancer and all its handles are
    /// dropped.
    pub fn detach(mut self) {
        self.task.detach();
    }

    /// True once the driver has stopped.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// What the probes did so far.
    pub fn counts(&self) -> crate::pick::prequal::ProbeCounts {
        self.pool.stats.counts()
    }
}

/// Starts the probes of `lb`'s picker: `prober` probes the endpoints its
/// picks owe probes to; see the [module docs](super).
///
/// # Errors
/// A [`ConfigError`] on `picker` when the balancer's picker takes no
/// probes (only [`Prequal`](crate::pick::Prequal) does), and on `probe`
/// when called outside a tokio runtime.
pub fn spawn<K, S, P, C, Pr>(lb: &Balance<K, S, P, C>, prober: Pr) -> Result<Probes, ConfigError>
where
    K: Clone + Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
    P: Picker,
    C: Send + Sync + 'static,
    Pr: Prober<K, S>,
{
    let runtime = current_runtime("probe", "started from within a tokio runtime")?;
    let picker = lb.picker();
    let pool = picker
        .probe_pool()
        .cloned()
        .ok_or_else(|| ConfigError::new("picker", picker.name(), "a probing picker (prequal)"))?;
    let driver = Driver {
        shared: Arc::downgrade(&lb.shared),
        model: Arc::clone(&lb.shared.model),
        pool: Arc::clone(&pool),
        prober: Arc::new(prober),
    };
    Ok(Probes {
        task: TaskGuard::new(runtime.spawn(driver.run())),
        pool,
    })
}

struct Driver<K, S, P: Picker, C, Pr> {
    shared: Weak<Shared<K, S, P, C>>,
    model: Arc<Model>,
    pool: Arc<ProbePool>,
    prober: Arc<Pr>,
}

/// Probes allowed per second, as a bucket of one second's worth.
struct Bucket {
    tokens: f64,
    rate: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.rate.max(1.0));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl<K, S, P, C, Pr> Driver<K, S, P, C, Pr>
where
    K: Clone + Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
    P: Picker,
    C: Send + Sync + 'static,
    Pr: Prober<K, S>,
{
    async fn run(self) {
        let settings = self.pool.settings;
        let stats = &self.pool.stats;
        let mut probes = JoinSet::new();
        let mut bucket = Bucket {
            tokens: settings.max_per_second.max(1.0),
            rate: settings.max_per_second,
            at: Instant::now(),
        };
        loop {
            let _ = tokio::time::timeout(LIVENESS, self.pool.wake.notified()).await;
            while probes.try_join_next().is_some() {}
            let Some(shared) = self.shared.upgrade() else {
                return;
            };
            let owed = self.pool.take_owed();
            if owed == 0 {
                continue;
            }
            let snap = shared.set.load_full();
            let n = snap.states.len();
            // Distinct targets within one wake-up: a second probe of an
            // endpoint at the same moment would say the same thing.
            let mut taken: Vec<usize> = Vec::with_capacity(owed.min(16) as usize);
            for _ in 0..owed {
                let now = Instant::now();
                let full = taken.len() >= n || probes.len() >= settings.max_in_flight;
                if full || !bucket.take(now) {
                    ProbeStats::add(&stats.dropped);
                    continue;
                }
                let mut i = below(shared.rng.next_u64(), n);
                while taken.contains(&i) {
                    i = (i + 1) % n;
                }
                taken.push(i);
                let (entry, state) = (&snap.entries[i], Arc::clone(&snap.states[i]));
                let id = state.id();
                ProbeStats::add(&stats.sent);
                let fut = self.prober.probe(&entry.key, entry.service.clone());
                let (pool, model) = (Arc::clone(&self.pool), Arc::clone(&self.model));
                probes.spawn(async move {
                    let answer = tokio::time::timeout(settings.probe_timeout, fut).await;
                    let report = match answer {
                        Ok(Ok(r)) => r,
                        _ => return pool.failed(id),
                    };
                    let at_ns = model.nanos(Instant::now());
                    let own = u32::try_from(state.in_flight()).unwrap_or(u32::MAX);
                    match reading(&report) {
                        Some((rif, latency_ns)) => pool.answered(Answer {
                            id,
                            hint: i,
                            rif,
                            latency_ns,
                            at_ns,
                            own,
                            uses: 0,
                            failure: failure_share(&report),
                        }),
                        None => pool.failed(id),
                    }
                });
            }
        }
    }
}

/// The RIF and expected latency (ns) a report gives, if it gives a RIF.
fn reading(r: &LoadReport) -> Option<(f64, f64)> {
    let rif = r
        .named_metric(RIF_METRIC)
        .filter(|v| v.is_finite() && *v >= 0.0)?;
    let latency_ns = r
        .named_metric(LATENCY_METRIC)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map_or(0.0, |ms| (ms * 1e6).min(3.6e12));
    Some((rif.min(1e9), latency_ns))
}

/// The share of the server's answers over its last second that failed;
/// `None` when its report does not say (no answers in that second, or no
/// such figures).
fn failure_share(r: &LoadReport) -> Option<f64> {
    match (r.eps(), r.rps_fractional()) {
        (Some(e), Some(n)) if e.is_finite() && n.is_finite() && n > 0.0 => {
            Some((e / n).clamp(0.0, 1.0))
        }
        _ => None,
    }
}

impl ProbePool {
    fn answered(&self, a: Answer) {
        ProbeStats::add(&self.stats.answered);
        self.insert(a);
    }

    fn failed(&self, id: u64) {
        ProbeStats::add(&self.stats.failed);
        self.forget(id);
    }
}
