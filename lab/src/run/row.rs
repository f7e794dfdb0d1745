//! One row: what it runs with ([`Ctx`]), its fresh backends (with the
//! scenario's slowdown schedule), the recorder and the plan ([`Row`]), and
//! the users or arrivals that drive whatever sits in front of the backends
//! (tower-lb balancers, a rival balancer, a proxy: [`Traffic`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tower::Service;
use tower_lb::metrics::prometheus::Exporter;

use super::message::LabRequest;
use super::replica::model::Backend;
use super::replica::slots;
use super::traffic::arrivals::open_loop;
use super::traffic::users::{self, Plan, user};
use crate::record::Recorder;
use crate::report::{PickerReport, round};
use crate::scenario::random::sub_seed;
use crate::scenario::{OpenLoop, Scenario, Tracking, Tuning, Variant, schedules};

/// What one row runs with.
pub struct Ctx<'a> {
    /// The scenario.
    pub sc: &'a Scenario,
    /// `--sim`.
    pub sim: bool,
    /// Measured time per row.
    pub duration: Duration,
    /// Seed of every random number.
    pub seed: u64,
    /// No progress line.
    pub quiet: bool,
    /// Position in the picker list, for the progress line.
    pub nth: (usize, usize),
    /// This row runs with adaptive concurrency limits.
    pub limited: bool,
    /// This row's balancers ramp joining endpoints
    /// (`[resilience.slow_start]`).
    pub slow_start: bool,
    /// http mode: where the balancers report their metrics.
    pub exporter: Option<&'a Exporter>,
    /// How the balancers track a call.
    pub track: Tracking,
    /// The route-step variant of this row (`[fleet]`).
    pub variant: Option<Variant>,
    /// `--per-thread-load`.
    pub per_thread: bool,
    /// The open loop, resolved (`None`: the scenario's users).
    pub open: Option<OpenLoop>,
    /// The picker's settings (`[picker.NAME]`), if any.
    pub tuning: Option<Tuning>,
}

impl Ctx<'_> {
    /// The progress line of a row called `label`, unless `--quiet`.
    pub fn progress(&self, label: String) -> Option<Progress> {
        (!self.quiet).then_some(Progress {
            label,
            nth: self.nth,
            sim: self.sim,
        })
    }
}

/// One row's backends, recorder and plan, from the moment it starts.
pub struct Row {
    /// The traffic's plan (start, measured window, open loop).
    pub plan: Arc<Plan>,
    /// Fresh backends.
    pub backends: Vec<Arc<Backend>>,
    /// Records the measured window.
    pub rec: Arc<Recorder>,
}

/// A progress line's label and place in the table.
pub struct Progress {
    /// The row's name.
    pub label: String,
    /// Its position, of how many.
    pub nth: (usize, usize),
    /// Simulated time.
    pub sim: bool,
}

impl Row {
    /// A row starting now: `sc`'s warm-up, then `duration` measured, with
    /// `open` arrivals (or `sc`'s users when `None`).
    pub fn new(
        sc: &Scenario,
        seed: u64,
        duration: Duration,
        open: Option<OpenLoop>,
        sim: bool,
    ) -> Self {
        let start = Instant::now();
        let measured = start + sc.load.warmup.0;
        let end = measured + duration;
        let drain = open.map_or(Duration::ZERO, |o| o.drain);
        let slowdowns = schedules(&sc.backends, seed, end - start + drain);
        let uses = slots::for_backends(&sc.resources, &sc.backends);
        let backends = sc
            .backends
            .iter()
            .zip(slowdowns)
            .zip(uses)
            .enumerate()
            .map(|(i, ((b, slow), uses))| {
                let seed = sub_seed(seed, 1000 + i as u64);
                let b = Backend::new(b, seed, start, (measured, end), slow).with_resources(uses);
                Arc::new(if sim { b.simulated() } else { b })
            })
            .collect();
        Self {
            plan: Arc::new(Plan::new(sc, (start, measured, end), open, seed).simulated(sim)),
            backends,
            rec: Arc::new(Recorder::new(measured, duration, sc.backends.len())),
        }
    }

    /// Starts the traffic through `clients` (closed-loop user `u` uses
    /// client `u % len`; an open-loop arrival, one at random), with a
    /// progress line unless `progress` is `None`.
    pub fn start<S, B>(&self, users: u32, clients: Vec<S>, progress: Option<Progress>) -> Traffic
    where
        S: Service<LabRequest, Response = http::Response<B>> + Clone + Send + 'static,
        S::Future: Send,
        S::Error: Send + std::fmt::Display,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Send,
    {
        let plan = &self.plan;
        let tasks = match plan.open {
            Some(open) => vec![tokio::spawn(open_loop(
                clients,
                open,
                plan.clone(),
                self.rec.clone(),
            ))],
            None if clients.is_empty() => Vec::new(),
            None => (0..users as usize)
                .map(|u| {
                    let svc = clients[u % clients.len()].clone();
                    tokio::spawn(user(u, svc, plan.clone(), self.rec.clone()))
                })
                .collect(),
        };
        let progress = progress.map(|p| {
            tokio::spawn(users::progress(
                p.label,
                p.nth,
                plan.start,
                plan.end - plan.start,
                self.rec.clone(),
                p.sim,
            ))
        });
        Traffic {
            open: plan.open.is_some(),
            tasks,
            progress,
        }
    }

    /// The requests each backend holds right now (in service and waiting):
    /// the in-flight column of rows whose balancer is not tower-lb's.
    pub fn backend_load(&self) -> Vec<usize> {
        self.backends
            .iter()
            .map(|b| {
                let (active, waiting) = b.load();
                active + waiting
            })
            .collect()
    }

    /// Adds the backends' utilization to a finished row's report.
    pub fn add_utilization(&self, r: &mut PickerReport) {
        let u: Vec<f64> = self.backends.iter().map(|b| b.utilization()).collect();
        let mean = u.iter().sum::<f64>() / u.len().max(1) as f64;
        let max = u.iter().copied().fold(0.0, f64::max);
        r.util_max_mean = if mean > 0.0 {
            round(max / mean, 3)
        } else {
            0.0
        };
        r.utilization = u.iter().map(|x| round(*x, 4)).collect();
    }
}

/// A row's running traffic.
pub struct Traffic {
    open: bool,
    tasks: Vec<JoinHandle<()>>,
    progress: Option<JoinHandle<()>>,
}

impl Traffic {
    /// Ends it: closed-loop users are stopped at once (the row's end has
    /// come); open-loop arrivals have stopped by themselves and the
    /// answers are waited for up to the drain.
    pub async fn finish(self) {
        for t in &self.tasks {
            if !self.open {
                t.abort();
            }
        }
        for t in self.tasks {
            let _ = t.await;
        }
        if let Some(p) = self.progress {
            p.abort();
            let _ = p.await;
        }
    }
}
