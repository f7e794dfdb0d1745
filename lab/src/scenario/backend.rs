//! `[[backend]]`: one replica's service time, workers, weight, events,
//! slowdowns, the resources it uses and when it joins or leaves.

use serde::Deserialize;

use super::slowdown::SlowdownSpec;
use super::units::{DelaySpec, Dur};

fn unit_weight() -> f64 {
    1.0
}

/// One `[[backend]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    /// Name shown in the table (`server-1`).
    pub name: String,
    /// Service time of one request.
    pub delay: DelaySpec,
    /// Requests served at once; the rest wait in FIFO order. Absent: unlimited.
    #[serde(default)]
    pub workers: Option<u32>,
    /// Weight (for the pickers in `weights_for`). Default 1.
    #[serde(default = "unit_weight")]
    pub weight: f64,
    /// Changes over time, applied in `at` order.
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// The zone it runs in (one of `[[fleet.zone]]`).
    #[serde(default)]
    pub zone: Option<String>,
    /// Its priority level (0, the default, is the highest).
    #[serde(default)]
    pub priority: u32,
    /// This many identical backends, named `{name}-1` to `{name}-{count}`.
    #[serde(default)]
    pub count: Option<u32>,
    /// Whether answers carry an ORCA load report (see the lab's `load`).
    #[serde(default)]
    pub reports: bool,
    /// Steps at which it may run slower (see [`SlowdownSpec`]).
    #[serde(default)]
    pub slowdown: Option<SlowdownSpec>,
    /// The `[[resource]]`s each of its requests takes a slot of, in order.
    #[serde(default)]
    pub uses: Vec<String>,
    /// It joins the balancers at this time (since the row's start);
    /// absent: it is there from the start.
    #[serde(default)]
    pub join: Option<Dur>,
    /// It leaves the balancers at this time; absent: it stays.
    #[serde(default)]
    pub leave: Option<Dur>,
}

/// A change of one backend at time `at`; each field present changes that
/// aspect only.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// When it happens, since the picker's run started.
    pub at: Dur,
    /// `true`: the backend stops answering (connections are closed);
    /// `false`: it answers again.
    #[serde(default)]
    pub down: Option<bool>,
    /// A new service time.
    #[serde(default)]
    pub delay: Option<DelaySpec>,
    /// Fraction of requests answered with `status` (0 to 1).
    #[serde(default)]
    pub error_rate: Option<f64>,
    /// Status code of the errors (default 503).
    #[serde(default)]
    pub status: Option<u16>,
    /// Errors are answered after this time without taking a worker (a fast
    /// failure). Absent: errors take the normal service time.
    #[serde(default)]
    pub error_delay: Option<Dur>,
}

/// Checks every backend's own fields (names, weights, workers, slowdowns,
/// events).
pub fn validate(backends: &[BackendSpec]) -> Result<(), (String, String)> {
    let err = |f: &str, p: String| Err((f.to_string(), p));
    for (i, b) in backends.iter().enumerate() {
        let f = |x: &str| format!("backend[{i}].{x}");
        if backends[..i].iter().any(|o| o.name == b.name) {
            return err(&f("name"), format!("duplicate backend name \"{}\"", b.name));
        }
        if !(b.weight.is_finite() && b.weight > 0.0) {
            return err(
                &f("weight"),
                format!("{} is not a finite number > 0", b.weight),
            );
        }
        if b.workers == Some(0) {
            return err(&f("workers"), "must be >= 1 (omit it for unlimited)".into());
        }
        if let Some(sd) = &b.slowdown {
            sd.validate()
                .map_err(|(part, p)| (f(&format!("slowdown.{part}")), p))?;
        }
        for (j, e) in b.events.iter().enumerate() {
            let f = |x: &str| format!("backend[{i}].events[{j}].{x}");
            if let Some(r) = e.error_rate
                && !(0.0..=1.0).contains(&r)
            {
                return err(&f("error_rate"), format!("{r} is not in 0..=1"));
            }
            if let Some(s) = e.status
                && !(100..=599).contains(&s)
            {
                return err(
                    &f("status"),
                    format!("{s} is not an HTTP status (100..=599)"),
                );
            }
            if e.down.is_none()
                && e.delay.is_none()
                && e.error_rate.is_none()
                && e.status.is_none()
                && e.error_delay.is_none()
            {
                return err(
                    &f("at"),
                    "the event changes nothing: add down, delay, error_rate, status or error_delay"
                        .into(),
                );
            }
        }
    }
    Ok(())
}
