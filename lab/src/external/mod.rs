//! The lab against the user's own replicas: `cargo lab --target
//! http://10.0.0.5:8080,http://10.0.0.6:8080`, or a scenario with a
//! `[target]` section ([`crate::scenario::target`]).
//!
//! The rows are the usual ones (tower-lb's pickers and the rivals, in http
//! mode), their endpoints the replicas' URLs instead of local backends;
//! the table, summary and report page are the same, the backends named
//! `host:port`. The traffic is always bounded: closed-loop users (default
//! [`DEFAULT_USERS`], at most [`MAX_USERS`], sharing at most [`MAX_RATE`]
//! sends a second) or open-loop arrivals (at most [`MAX_RATE`] a second),
//! for a duration (default [`DEFAULT_DURATION`], at most [`MAX_DURATION`]
//! a row). Before any traffic every replica gets one request ([`check()`],
//! [`check::reach`]): one that cannot be reached, or answers 400 or more,
//! refuses the run with a [`TargetError`] naming it. What models the lab's
//! own backends (`--sim`, `--peers`, `--find-capacity`, `--utilization`,
//! slowdowns, `[fleet]`, `[[resource]]`, `[streams]`) is refused, and so is
//! a picker that sends requests of its own (`prequal`'s load probes).
//!
//! ```text
//! cargo lab --target http://10.0.0.5:8080,http://10.0.0.6:8080 --pickers peak_ewma,round_robin
//! cargo lab --target http://10.0.0.5:8080 --rate 200 --duration 30s --path /health
//! cargo lab --scenario my-replicas.toml        # [target] urls, method, path, headers, body
//! ```

pub mod args;
pub mod check;
pub mod error;

use std::time::Duration;

use self::args::TargetArgs;
pub use self::error::{TargetError, Unreached, Why};
use crate::driver::Options;
use crate::error::LabError;
pub use crate::scenario::target::{MAX_DURATION, MAX_RATE, MAX_USERS};
use crate::scenario::target::{TargetSpec, probes};
use crate::scenario::{Dur, Scenario};

/// Closed-loop users when neither `--users`, `--rate` nor the scenario
/// says: a few callers' worth, enough for every picker to see load.
pub const DEFAULT_USERS: u32 = 8;

/// A row's length when neither `--duration` nor the scenario says: a p99
/// from thousands of requests on a fast service, in seconds.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// The scenario `--target` runs without `--scenario`: tower-lb's baseline,
/// its load-aware pickers and tower's own balancer ([`DEFAULT_USERS`] and
/// [`DEFAULT_DURATION`] written out).
pub const DEFAULTS: &str = r#"
name = "target"
duration = "10s"
pickers = ["round_robin", "least_in_flight", "peak_ewma", "tower_p2c"]

[load]
vus = 8

[target]
"#;

/// The scenario to run: `--scenario`'s (or, for `--target` without it,
/// [`DEFAULTS`]), with `--target` and its flags (`f`) and `--duration`
/// applied.
///
/// # Errors
///
/// An input error for a scenario that does not load, `--target` given
/// with a scenario of the lab's own backends, a request or load flag
/// without a target, `--users` with `--rate`, or a target scenario the
/// flags make invalid (past a cap, a bad path or header).
pub fn load(
    scenario: &str,
    f: &TargetArgs,
    duration: Option<Duration>,
) -> Result<Scenario, LabError> {
    let mut sc = if f.urls.is_some() && !f.scenario {
        Scenario::parse(DEFAULTS, "the target defaults")?
    } else {
        Scenario::load(scenario)?
    };
    if sc.target.is_none() {
        if f.urls.is_some() {
            return Err(LabError::input(format!(
                "--target: scenario {} runs the lab's own backends ([[backend]]): leave out --scenario, or give a scenario file with a [target] section",
                sc.name
            )));
        }
        if let Some(flag) = f.given().first() {
            return Err(LabError::input(format!(
                "{flag}: only against your own replicas (--target, or a scenario's [target])"
            )));
        }
        return Ok(sc);
    }
    apply(&mut sc, f, duration)?;
    if sc.description.is_empty() {
        sc.description = format!(
            "{} on your replicas, at most {MAX_RATE} a second (their utilization cannot be measured from here: util -)",
            check::request_line(sc.target.as_ref().unwrap_or(&TargetSpec::default()))
        );
    }
    Ok(sc)
}

/// `--target` and the request and load flags, on a target scenario.
fn apply(sc: &mut Scenario, f: &TargetArgs, duration: Option<Duration>) -> Result<(), LabError> {
    let mut t = sc.target.clone().unwrap_or_default();
    if let Some(u) = &f.urls {
        t.urls.clone_from(u);
    }
    if let Some(m) = f.method {
        t.method = m;
    }
    if let Some(p) = &f.path {
        t.path.clone_from(p);
    }
    for (k, v) in &f.headers {
        t.headers.insert(k.clone(), v.clone());
    }
    if let Some(b) = &f.body {
        t.body.clone_from(b);
    }
    let load = &mut sc.load;
    match (f.users, f.rate) {
        (Some(_), Some(_)) => {
            return Err(LabError::input(
                "--users and --rate: give one (users wait for their answers; a rate sends whatever they do)",
            ));
        }
        (Some(n), None) => {
            load.vus = n;
            load.rate = None;
            load.stages.clear();
        }
        (None, Some(r)) => {
            load.rate = Some(r);
            load.vus = 0;
            load.stages.clear();
            load.think = Dur::default();
        }
        (None, None) => {}
    }
    if let Some(d) = duration {
        sc.duration = Dur(d);
    }
    let name = sc.name.clone();
    sc.aim(t)
        .map_err(|(field, problem)| LabError::input(format!("{name}: `{field}`: {problem}")))
}

/// With a target: refuses what cannot run against it (`opts`,
/// `--find-capacity`, `--utilization`'s `levels`), then checks every
/// replica ([`check::reach`]) and says so on stderr (unless `--quiet`).
/// Without one, nothing.
///
/// # Errors
///
/// An input error for `--sim`, `--peers`, `--find-capacity`,
/// `--utilization` or a picker that probes; a [`TargetError`] (as an input
/// error) for a replica that failed the check. Nothing has been sent then
/// but the checks.
pub fn check(
    sc: &Scenario,
    opts: &Options,
    find_capacity: bool,
    levels: &[f64],
) -> Result<(), LabError> {
    let Some(t) = &sc.target else {
        return Ok(());
    };
    let refuse = |why: &str| Err(LabError::input(format!("{why} (against --target)")));
    if opts.sim {
        return refuse(
            "--sim: simulated time runs the lab's in-process backends, not your replicas",
        );
    }
    if opts.peers.as_ref().is_some_and(|p| !p.is_empty()) {
        return refuse("--peers: the proxies run in front of the lab's own backends");
    }
    if find_capacity {
        return refuse("--find-capacity: it raises the load until the replicas fail");
    }
    if !levels.is_empty() {
        return refuse(
            "--utilization: your replicas' capacity is unknown here: give --rate (arrivals per second)",
        );
    }
    let pickers = opts.pickers.as_ref().unwrap_or(&sc.pickers);
    if let Some(p) = pickers.iter().find(|&&p| probes(p)) {
        return Err(LabError::input(format!(
            "--pickers: {p} sends load probes beside the traffic, past the caps: not against --target"
        )));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LabError::runtime(format!("cannot start the runtime: {e}")))?;
    let reached = rt.block_on(check::reach(t, check::CHECK_TIMEOUT))?;
    if !opts.quiet {
        let answers: Vec<String> = reached
            .iter()
            .map(|r| {
                format!(
                    "{} {} in {:.1} ms",
                    r.name,
                    r.status,
                    r.took.as_secs_f64() * 1e3
                )
            })
            .collect();
        eprintln!(
            "target: {} answered the check: {}",
            check::request_line(t),
            answers.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_say_what_their_constants_say() {
        let sc = Scenario::parse(DEFAULTS, "defaults").expect("the defaults parse");
        assert_eq!(sc.load.vus, DEFAULT_USERS);
        assert_eq!(sc.duration.0, DEFAULT_DURATION);
        assert!(sc.target.is_some() && sc.backends.is_empty());
        assert!(!sc.pickers.iter().any(|&p| probes(p)));
    }
}
