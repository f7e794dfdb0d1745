//! A case as a scenario file: its TOML text, parsed with
//! [`Scenario::parse`] like any file, so that every case can be printed
//! (`--print`) and rerun with `cargo lab --scenario FILE`.
//!
//! The measured duration comes from the case's request rate and the
//! family's [`Budget`]: the sim's cost is the number of requests it
//! simulates.

use std::fmt::Write as _;
use std::time::Duration;

use super::axes::{CLASS_SPREAD, Loop, Mix, Pattern, SLOW_FACTOR};
use super::case::Case;
use super::lab::{LabError, PickerName, Scenario, capacity};

/// Every case's warm-up: the measured window starts after the first
/// second, where the share bounds start.
pub const WARMUP: Duration = Duration::from_secs(1);

/// `noisy-fleet`'s slowdown: every 2 s a quarter of the pool, 1, 2 or 4×.
const ROTATING: &str = r#"{ every = "2s", share = 0.25, factors = [1, 2, 4] }"#;
/// Antagonists: every member of the group, redrawn every 500 ms, 1 to 3×.
const ANTAGONISTS: &str = r#"{ every = "500ms", share = 1.0, factors = [1, 1.25, 1.5, 2, 3] }"#;

/// How long a family's rows run: about `requests` requests each, within
/// `min_s..=max_s` seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Requests a row aims at.
    pub requests: f64,
    /// Shortest measured window, seconds.
    pub min_s: u64,
    /// Longest, seconds.
    pub max_s: u64,
}

impl Budget {
    /// The measured seconds for a case sending `rate` requests per second.
    pub fn seconds(&self, rate: f64) -> u64 {
        let s = if rate > 0.0 {
            (self.requests / rate).ceil()
        } else {
            self.max_s as f64
        };
        (s as u64).clamp(self.min_s, self.max_s)
    }
}

/// A case, resolved: its scenario file and the scenario it parses to.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The file's text.
    pub text: String,
    /// The scenario.
    pub scenario: Scenario,
    /// Requests per second it sends (open loop), or is expected to
    /// complete (closed loop, from its users and the replicas' capacity).
    pub rate: f64,
}

/// One `[[backend]]` table: `count` identical replicas.
struct Group {
    name: &'static str,
    count: u32,
    median: Duration,
    /// p99 / median of a lognormal; `None`: fixed.
    spread: Option<f64>,
    slowdown: Option<&'static str>,
    /// Fails fast from this time on.
    fails_at: Option<Duration>,
}

/// `d` as a scenario writes it: `"2s"`, `"12ms"`, `"200us"`.
pub fn duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns >= 1_000_000 && ns.is_multiple_of(1_000) {
        // "4.6ms", not "4600us": exact, since whole microseconds are.
        format!("{}ms", ns as f64 / 1e6)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// `d × f`, in whole microseconds.
fn scaled(d: Duration, f: f64) -> Duration {
    Duration::from_micros((d.as_secs_f64() * f * 1e6).round().max(1.0) as u64)
}

/// The replica groups of a case.
fn groups(c: &Case, fails_at: Duration) -> Vec<Group> {
    let a = &c.axes;
    let class = |name, count, median, spread| Group {
        name,
        count,
        median,
        spread,
        slowdown: None,
        fails_at: None,
    };
    let mut gs = match a.mix {
        Mix::Identical => vec![class("r", a.replicas, a.scale, None)],
        Mix::Lognormal { spread } => vec![class("r", a.replicas, a.scale, Some(spread))],
        Mix::TwoClasses { ratio, slow_share } => {
            let slow =
                ((f64::from(a.replicas) * slow_share).round() as u32).clamp(1, a.replicas - 1);
            vec![
                class("fast", a.replicas - slow, a.scale, Some(CLASS_SPREAD)),
                class("slow", slow, scaled(a.scale, ratio), Some(CLASS_SPREAD)),
            ]
        }
    };
    match a.pattern {
        Pattern::None => {}
        Pattern::Rotating => gs.iter_mut().for_each(|g| g.slowdown = Some(ROTATING)),
        Pattern::Antagonists => {
            let mut split = Vec::new();
            for g in &mut gs {
                let half = g.count / 2 + u32::from(split.is_empty() && g.count % 2 == 1);
                g.count -= half;
                split.push(Group {
                    name: if g.name == "slow" {
                        "slow-antagonised"
                    } else {
                        "antagonised"
                    },
                    count: half,
                    slowdown: Some(ANTAGONISTS),
                    ..class(g.name, 0, g.median, g.spread)
                });
            }
            gs.extend(split);
        }
        Pattern::SlowReplica | Pattern::FailFast => {
            let first = &mut gs[0];
            first.count -= 1;
            let mut one = class("grey", 1, first.median, first.spread);
            if a.pattern == Pattern::SlowReplica {
                one.median = first.median * SLOW_FACTOR;
            } else {
                one.name = "failing";
                one.fails_at = Some(fails_at);
            }
            gs.push(one);
        }
    }
    gs.retain(|g| g.count > 0);
    gs
}

/// The scenario text of `c` with `duration_s` measured seconds and `load`
/// (the case's own, or a fail-fast case's rate on its live replicas).
fn text(c: &Case, family: &str, pickers: &[PickerName], duration_s: u64, load: Loop) -> String {
    let a = &c.axes;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# tower-lb lab, family \"{family}\", case {}: {}",
        c.id, c.note
    );
    let _ = writeln!(
        t,
        "# Rerun one seed: cargo lab --sim --scenario THIS_FILE --seed N"
    );
    let _ = writeln!(t, "name = \"{}\"", c.name);
    let _ = writeln!(t, "description = \"{a}\"");
    let _ = writeln!(t, "duration = \"{duration_s}s\"");
    let names: Vec<String> = pickers.iter().map(|p| format!("\"{p}\"")).collect();
    let _ = writeln!(t, "pickers = [{}]", names.join(", "));
    let _ = writeln!(t, "\n[load]");
    match load {
        Loop::Closed { users } => {
            let _ = writeln!(t, "vus = {users}");
        }
        Loop::Open { utilization } => {
            let _ = writeln!(t, "utilization = {utilization}");
        }
        Loop::Rate { per_s } => {
            let _ = writeln!(t, "rate = {per_s:.1}");
        }
    }
    let _ = writeln!(t, "clients = {}", a.clients);
    let _ = writeln!(t, "warmup = \"{}\"", duration(WARMUP));
    let fails_at = WARMUP + Duration::from_millis(duration_s * 1000 / 3);
    for g in groups(c, fails_at) {
        let _ = writeln!(t, "\n[[backend]]\nname = \"{}\"", g.name);
        if g.count > 1 {
            let _ = writeln!(t, "count = {}", g.count);
        }
        let delay = match g.spread {
            None => format!("\"{}\"", duration(g.median)),
            Some(s) => format!(
                "{{ dist = \"lognormal\", median = \"{}\", p99 = \"{}\" }}",
                duration(g.median),
                duration(scaled(g.median, s))
            ),
        };
        let _ = writeln!(
            t,
            "delay = {delay}\nworkers = {}\nreports = true",
            a.workers
        );
        if let Some(sd) = g.slowdown {
            let _ = writeln!(t, "slowdown = {sd}");
        }
        if let Some(at) = g.fails_at {
            let _ = writeln!(
                t,
                "events = [{{ at = \"{}\", error_rate = 1.0, status = 503, error_delay = \"1ms\" }}]",
                duration(at)
            );
        }
    }
    t
}

/// Requests per second `sc` sends (open loop) or completes at most
/// (closed loop: its users, each served at once, within the capacity).
fn rate(sc: &Scenario) -> Result<f64, LabError> {
    let bad = |e: String| LabError::input(format!("family case {}: {e}", sc.name));
    if let Some(open) = sc.load.open(&sc.backends, None).map_err(bad)? {
        return Ok(open.rate);
    }
    let cap = capacity(&sc.backends).map_err(bad)?;
    let workers: u32 = sc.backends.iter().map(|b| b.workers.unwrap_or(1)).sum();
    Ok(cap * f64::from(sc.max_vus().min(workers)) / f64::from(workers.max(1)))
}

/// `c` as a scenario of `family` for `pickers`, its duration from
/// `budget` (or `duration_s` when given).
pub fn resolve(
    c: &Case,
    family: &str,
    pickers: &[PickerName],
    budget: Budget,
    duration_s: Option<u64>,
) -> Result<Resolved, LabError> {
    let file = format!("family case {}", c.id);
    let parse = |s: u64, load: Loop| {
        let text = text(c, family, pickers, s, load);
        Scenario::parse(&text, &file).map(|sc| (text, sc))
    };
    let (_, first) = parse(budget.min_s, c.axes.load)?;
    let mut load = c.axes.load;
    // A failing replica serves nothing: the utilization is of the others.
    if let (Pattern::FailFast, Loop::Open { utilization }) = (c.axes.pattern, load) {
        let live: Vec<_> = first
            .backends
            .iter()
            .filter(|b| b.events.is_empty())
            .cloned()
            .collect();
        let cap = capacity(&live).map_err(|e| LabError::input(format!("{file}: {e}")))?;
        load = Loop::Rate {
            per_s: (utilization * cap * 10.0).round() / 10.0,
        };
    }
    let (_, sized) = parse(budget.min_s, load)?;
    let rate = rate(&sized)?;
    let (text, scenario) = parse(duration_s.unwrap_or_else(|| budget.seconds(rate)), load)?;
    Ok(Resolved {
        text,
        scenario,
        rate,
    })
}
