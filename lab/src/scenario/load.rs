//! `[load]`: who sends the requests. Closed loop (`vus` users, each waiting
//! for its answer and thinking before the next) or open loop (arrivals at a
//! `rate`, or at a `utilization` of the backends' capacity, whatever the
//! answers do).
//!
//! Closed loop is how the published study drove its backends; open loop is
//! how real traffic arrives. Under closed loop a slow replica slows the
//! arrivals too, so the queueing tail never forms (coordinated omission);
//! under open loop every request's latency counts from its *intended* send
//! time, so a stalled sender cannot hide it either.

use std::time::Duration;

use serde::Deserialize;

use super::backend::BackendSpec;
use super::units::Dur;

/// `[load]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Closed loop: virtual users from the start (stages may change it).
    #[serde(default)]
    pub vus: u32,
    /// Closed loop: pause between an answer and the user's next request.
    #[serde(default)]
    pub think: Dur,
    /// Open loop: arrivals per second, over every client balancer.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Open loop: arrivals as a share of the backends' capacity
    /// ([`capacity`]); `--utilization` overrides it.
    #[serde(default)]
    pub utilization: Option<f64>,
    /// Open loop: how arrivals are spaced (default Poisson).
    #[serde(default)]
    pub arrivals: Arrivals,
    /// Open loop: how long to wait, after the last arrival, for the
    /// measured requests still unanswered; those left then are counted as
    /// unfinished (default 10 s).
    #[serde(default)]
    pub drain: Option<Dur>,
    /// Independent balancers sharing the backends: closed loop, user `u`
    /// uses balancer `u % clients`; open loop, each arrival goes to one
    /// drawn at random.
    #[serde(default = "one")]
    pub clients: u32,
    /// Closed loop: changes of the number of active users over time.
    #[serde(default)]
    pub stages: Vec<Stage>,
    /// Added to every request's latency on the client side: the proxy hop of
    /// the published study (about 3 ms). Default 0.
    #[serde(default)]
    pub overhead: Dur,
    /// Run this long before measuring (every picker, unrecorded): the
    /// table then shows the steady state, not the cold start or a
    /// picker's blackout. Event and stage times count from the start of
    /// the warm-up. Default 0.
    #[serde(default)]
    pub warmup: Dur,
    /// Where the `X-Forwarded-For` client IP of each request comes from.
    #[serde(default)]
    pub client_ips: ClientIps,
    /// The requests' method (default `GET`); a retry layer replays a
    /// `POST` or `PATCH` only with `[resilience.retry] non_idempotent`.
    #[serde(default)]
    pub method: Method,
    /// Bytes of body each request carries (default 0, at most 1 MiB).
    #[serde(default)]
    pub body: u32,
    /// The users' connections, and the hash pickers keyed on them
    /// (`per_user` or `per_request`; absent: the hash pickers key on
    /// `X-Forwarded-For`).
    #[serde(default)]
    pub connections: Option<Connections>,
}

/// How the users connect (see the lab's `connections` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Connections {
    /// One kept-alive connection per user.
    PerUser,
    /// A new connection (a new source port) per request.
    PerRequest,
}

/// The largest request body (a scenario's load is many of them).
pub const MAX_BODY: u32 = 1 << 20;

/// A request method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// `GET` (idempotent).
    #[default]
    Get,
    /// `PUT` (idempotent).
    Put,
    /// `DELETE` (idempotent).
    Delete,
    /// `POST` (not idempotent).
    Post,
    /// `PATCH` (not idempotent).
    Patch,
}

impl Method {
    /// As `http` spells it.
    pub fn http(self) -> http::Method {
        match self {
            Method::Get => http::Method::GET,
            Method::Put => http::Method::PUT,
            Method::Delete => http::Method::DELETE,
            Method::Post => http::Method::POST,
            Method::Patch => http::Method::PATCH,
        }
    }
}

fn one() -> u32 {
    1
}

/// Default wait for unanswered requests after the last arrival.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);

/// From `at` on (since the picker's run started), `vus` users are active.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// When the stage starts.
    pub at: Dur,
    /// Active users during the stage.
    pub vus: u32,
}

/// Client IPs put in `X-Forwarded-For` (read by the hash pickers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientIps {
    /// A fresh random IP per request, as the published study did.
    #[default]
    PerRequest,
    /// One random IP per virtual user (sticky sessions; in open loop, per
    /// client balancer).
    PerUser,
}

/// How open-loop arrivals are spaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Exponential gaps: a Poisson process, as independent callers make.
    #[default]
    Poisson,
    /// A fixed gap of `1 / rate`.
    Uniform,
}

/// An open loop, resolved: arrivals per second and their spacing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenLoop {
    /// Arrivals per second.
    pub rate: f64,
    /// Their spacing.
    pub arrivals: Arrivals,
    /// How long to wait for the last answers.
    pub drain: Duration,
}

impl Load {
    /// Whether this is an open loop (`rate` or `utilization` set).
    pub fn is_open(&self) -> bool {
        self.rate.is_some() || self.utilization.is_some()
    }

    /// Checks the section against the backends.
    pub fn validate(&self, backends: &[BackendSpec]) -> Result<(), (String, String)> {
        let err = |f: &str, p: String| Err((format!("load.{f}"), p));
        if self.body > MAX_BODY {
            return err(
                "body",
                format!("{} is more than {MAX_BODY} bytes", self.body),
            );
        }
        if !self.is_open() {
            if self.vus == 0 && self.stages.iter().all(|s| s.vus == 0) {
                return err(
                    "vus",
                    "set vus (closed loop: users who wait for their answers) or rate / utilization (open loop)"
                        .into(),
                );
            }
            return Ok(());
        }
        if self.vus != 0 || !self.stages.is_empty() || !self.think.0.is_zero() {
            return err(
                "vus",
                "an open loop (rate or utilization) has no users: remove vus, think and stages"
                    .into(),
            );
        }
        match (self.rate, self.utilization) {
            (Some(_), Some(_)) => {
                return err("rate", "give rate or utilization, not both".into());
            }
            (Some(r), None) if !(r.is_finite() && r > 0.0 && r <= 1e7) => {
                return err("rate", format!("{r} is not a rate in (0, 1e7] per second"));
            }
            (None, Some(u)) => {
                check_utilization(u).map_err(|p| ("load.utilization".to_string(), p))?;
                capacity(backends).map_err(|p| ("load.utilization".to_string(), p))?;
            }
            _ => {}
        }
        if self.drain.is_some_and(|d| d.0 > Duration::from_secs(3600)) {
            return err("drain", "at most 1h".into());
        }
        Ok(())
    }

    /// The open loop at `utilization` (or the scenario's own rate or
    /// utilization when `None`); `None` for a closed loop.
    pub fn open(
        &self,
        backends: &[BackendSpec],
        utilization: Option<f64>,
    ) -> Result<Option<OpenLoop>, String> {
        let rate = match (utilization.or(self.utilization), self.rate) {
            (Some(u), _) => {
                check_utilization(u)?;
                u * capacity(backends)?
            }
            (None, Some(r)) => r,
            (None, None) => return Ok(None),
        };
        Ok(Some(OpenLoop {
            rate,
            arrivals: self.arrivals,
            drain: self.drain.map_or(DEFAULT_DRAIN, |d| d.0),
        }))
    }
}

/// A utilization is a share of capacity above 0; past 1 the backends
/// cannot keep up (allowed up to 2, to show it).
pub fn check_utilization(u: f64) -> Result<(), String> {
    if u.is_finite() && u > 0.0 && u <= 2.0 {
        Ok(())
    } else {
        Err(format!("{u} is not a utilization in (0, 2]"))
    }
}

/// What the backends can serve per second, on average: the sum over
/// backends of `workers / mean service time`, each times the share of its
/// speed its slowdown leaves it on average (`E[1/factor]`). Events (a
/// backend going down, a new delay) are not counted. Every backend needs
/// `workers`: without a limit a backend's capacity is unbounded.
pub fn capacity(backends: &[BackendSpec]) -> Result<f64, String> {
    let mut sum = 0.0;
    for (i, b) in backends.iter().enumerate() {
        let Some(w) = b.workers else {
            return Err(format!(
                "a utilization needs every backend's capacity: backend[{i}] (\"{}\") has no `workers`",
                b.name
            ));
        };
        let mean = super::random::Delay::from(b.delay).mean_ns() / 1e9;
        let speed = b.slowdown.as_ref().map_or(1.0, |s| s.mean_speed());
        sum += f64::from(w) / mean * speed;
    }
    Ok(sum)
}
