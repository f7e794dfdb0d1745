//! The active-check driver: one task per balancer.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

use super::{Check, HealthCheck};
use crate::balance::{Balance, Shared};
use crate::error::{ConfigError, current_runtime};
use crate::pick::Picker;
use crate::task::TaskGuard;

/// The running health checks of one balancer. Dropping it stops them (and
/// every probe in flight); [`detach`](Self::detach) lets them run until the
/// balancer and its handles are gone.
#[must_use = "dropping `Checks` stops the health checks at once"]
#[derive(Debug)]
pub struct Checks {
    task: TaskGuard,
}

impl Checks {
    /// Lets the checks run until the balancer and all its handles are
    /// dropped.
    pub fn detach(mut self) {
        self.task.detach();
    }

    /// True once the driver has stopped.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// Starts active health checks for `lb`: `probe` runs against every
/// endpoint as `config` says; see the [module docs](super).
///
/// # Errors
/// A [`ConfigError`] on `health_check` when called outside a tokio runtime,
/// or when the balancer already has a running check driver.
pub fn spawn<K, S, P, C, Pr>(
    lb: &Balance<K, S, P, C>,
    config: HealthCheck,
    probe: Pr,
) -> Result<Checks, ConfigError>
where
    K: Clone + Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
    P: Picker,
    C: Send + Sync + 'static,
    Pr: Check<K, S>,
{
    let runtime = current_runtime("health_check", "started from within a tokio runtime")?;
    if !lb.shared.health.attach_checks() {
        return Err(ConfigError::new(
            "health_check",
            "a second driver",
            "one running check driver per balancer",
        ));
    }
    let driver = Driver {
        shared: Arc::downgrade(&lb.shared),
        config,
        probe: Arc::new(probe),
        tracks: HashMap::new(),
        running: HashMap::new(),
    };
    Ok(Checks {
        task: TaskGuard::new(runtime.spawn(driver.run())),
    })
}

/// One endpoint's check state.
struct Track {
    next_at: Instant,
    fails: u32,
    passes: u32,
    failing: bool,
    /// The endpoint's pick count at its last probe (traffic since?).
    picks: u64,
    running: bool,
}

struct Driver<K, S, P: Picker, C, Pr> {
    shared: Weak<Shared<K, S, P, C>>,
    config: HealthCheck,
    probe: Arc<Pr>,
    /// By endpoint id.
    tracks: HashMap<u64, Track>,
    /// Probe tasks in flight: task id → endpoint id.
    running: HashMap<Id, u64>,
}

impl<K, S, P, C, Pr> Driver<K, S, P, C, Pr>
where
    K: Clone + Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
    P: Picker,
    C: Send + Sync + 'static,
    Pr: Check<K, S>,
{
    async fn run(mut self) {
        let mut probes = JoinSet::new();
        loop {
            let Some(next) = self.start_due(&mut probes) else {
                return; // the balancer is gone
            };
            let done = tokio::time::timeout_at(next, async {
                match probes.join_next_with_id().await {
                    Some(Ok((task, result))) => Some((task, result)),
                    Some(Err(e)) => Some((e.id(), Err("the probe panicked".to_string()))),
                    None => std::future::pending().await,
                }
            })
            .await;
            if let Ok(Some((task, result))) = done {
                self.finish(task, result);
            }
        }
    }

    /// Starts the probes that are due; returns when the next one is, or
    /// `None` once the balancer is gone.
    fn start_due(&mut self, probes: &mut JoinSet<Result<(), String>>) -> Option<Instant> {
        let shared = self.shared.upgrade()?;
        let now = Instant::now();
        // With subsetting, only this balancer's subset is probed.
        let members: Vec<_> = shared.set.load().subset_members().cloned().collect();
        self.tracks
            .retain(|id, _| members.iter().any(|m| m.state.id() == *id));
        let mut next = crate::time::after(now, self.config.interval);
        for m in &members {
            let id = m.state.id();
            let track = self.tracks.entry(id).or_insert_with(|| Track {
                // A new endpoint is probed at once, give or take the jitter.
                next_at: crate::time::after(now, jitter(self.config.jitter)),
                fails: 0,
                passes: 0,
                failing: false,
                picks: m.state.picks(),
                running: false,
            });
            if track.running {
                continue;
            }
            if now >= track.next_at {
                track.running = true;
                let fut = self.probe.run(&m.entry.key, m.entry.service.clone());
                let timeout = self.config.timeout;
                let handle = probes.spawn(async move {
                    match tokio::time::timeout(timeout, fut).await {
                        Ok(result) => result,
                        Err(_) => Err(format!("no answer within {timeout:?}")),
                    }
                });
                self.running.insert(handle.id(), id);
            } else {
                next = next.min(track.next_at);
            }
        }
        Some(next)
    }

    /// Applies one probe's result to its endpoint.
    fn finish(&mut self, task: Id, result: Result<(), String>) {
        let Some(id) = self.running.remove(&task) else {
            return;
        };
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let Some(track) = self.tracks.get_mut(&id) else {
            return; // the endpoint left meanwhile
        };
        let members = shared.set.load();
        let Some(state) = members
            .members
            .iter()
            .map(|m| &m.state)
            .find(|s| s.id() == id)
        else {
            return;
        };
        let cfg = &self.config;
        track.running = false;
        let picks = state.picks();
        let idle = picks == track.picks;
        track.picks = picks;
        match result {
            Ok(()) => {
                track.fails = 0;
                track.passes = track.passes.saturating_add(1);
                if track.failing && track.passes >= cfg.healthy_threshold {
                    track.failing = false;
                    shared.health.set_check(state, false, String::new());
                }
            }
            Err(detail) => {
                track.passes = 0;
                track.fails = track.fails.saturating_add(1);
                if !track.failing && track.fails >= cfg.unhealthy_threshold {
                    track.failing = true;
                    shared.health.set_check(state, true, detail);
                }
            }
        }
        // After the flip: an endpoint this probe just failed takes no
        // traffic, so it must not wait the no-traffic interval (60 s) for
        // the probe that can bring it back.
        let base = if idle && !track.failing {
            cfg.no_traffic_interval
        } else {
            cfg.interval
        };
        track.next_at = crate::time::after(Instant::now(), base + jitter(cfg.jitter));
    }
}

impl<K, S, P: Picker, C, Pr> Drop for Driver<K, S, P, C, Pr> {
    /// The checks stop (aborted, or the balancer is gone): no endpoint stays
    /// out of rotation for a check that no longer runs.
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.health.detach_checks(&shared.set.load().states);
        }
    }
}

/// A uniform random duration in `0..=max`.
fn jitter(max: Duration) -> Duration {
    let ns = crate::time::nanos(max);
    Duration::from_nanos(if ns == 0 { 0 } else { fastrand::u64(0..=ns) })
}
