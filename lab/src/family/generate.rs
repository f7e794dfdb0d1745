//! The families by name, and the seeded generator of their random cases.
//!
//! A family's case list is a pure function of its name and the family
//! seed (`--family-seed`, default 1); the seeds its rows run with are
//! another matter (`--seeds`). Keep the two apart: tune on one family seed,
//! judge on another, whose generated cases nobody has tuned on.

use std::time::Duration;

use super::axes::{self, Axes, Loop, Mix, Pattern};
use super::case::Case;
use super::lab::{LabError, PickerName, Rng, sub_seed};
use super::named;
use super::toml::{self, Budget};

/// Generated cases in `all` and `generated`.
pub const GENERATED: usize = 24;

/// The fastest a generated case may send, requests per second: the sim's
/// cost is its requests (about 200,000 a second on one core in a release
/// build), and a case past this is drawn again.
pub const MAX_RATE: f64 = 20_000.0;
/// The slowest: below it a row's p99 rests on a few dozen requests.
pub const MIN_RATE: f64 = 50.0;
/// Share of generated cases in closed loop (the rest open loop).
const CLOSED_SHARE: f64 = 0.3;
/// Closed loop: users per worker of the pool, drawn in this range.
const USERS_PER_WORKER: (f64, f64) = (0.5, 1.0);
/// Draws per case before giving up (a case is redrawn when its rate is
/// out of bounds: about one in three is).
const ATTEMPTS: usize = 1000;

/// The sim's budget for the whole family: about 40,000 requests a row,
/// 5 to 60 s measured.
pub const FULL: Budget = Budget {
    requests: 40_000.0,
    min_s: 5,
    max_s: 60,
};
/// The quick subset's: about 6,000 requests a row, 5 to 10 s.
pub const QUICK: Budget = Budget {
    requests: 6_000.0,
    min_s: 5,
    max_s: 10,
};
/// Over real sockets every row runs 10 s (real time).
pub const HTTP: Budget = Budget {
    requests: 0.0,
    min_s: 10,
    max_s: 10,
};

/// The families: name, and what it holds.
pub const FAMILIES: &[(&str, &str)] = &[
    (
        "all",
        "issue 36's fleets, the LAN fleets and 24 generated cases, in sim (seeds 1-3)",
    ),
    ("named", "issue 36's fleets and the LAN fleets, in sim"),
    ("generated", "the 24 generated cases alone, in sim"),
    (
        "quick",
        "9 small cases: issue 36's fleets and LAN replicas, in sim (the tests' subset)",
    ),
    ("http", "the 6 LAN fleets over real sockets, 10 s per row"),
];

/// A family: its cases and how they run.
#[derive(Debug, Clone)]
pub struct Family {
    /// Its name.
    pub name: String,
    /// The seed its generated cases were drawn with.
    pub family_seed: u64,
    /// The cases, in order.
    pub cases: Vec<Case>,
    /// Runs over real sockets unless `--sim`.
    pub http: bool,
    /// How long rows run.
    pub budget: Budget,
    /// The run seeds unless `--seeds`.
    pub seeds: Vec<u64>,
}

/// The family `name` with generated cases from `family_seed` (their
/// scenarios list `pickers`).
pub fn family(name: &str, family_seed: u64, pickers: &[PickerName]) -> Result<Family, LabError> {
    let sim = |cases, budget, seeds: &[u64]| Family {
        name: name.to_string(),
        family_seed,
        cases,
        http: false,
        budget,
        seeds: seeds.to_vec(),
    };
    let drawn = || generated(family_seed, pickers);
    Ok(match name {
        "all" => sim(
            [named::fleets(), named::lan(), drawn()?].concat(),
            FULL,
            &[1, 2, 3],
        ),
        "named" => sim([named::fleets(), named::lan()].concat(), FULL, &[1, 2, 3]),
        "generated" => sim(drawn()?, FULL, &[1, 2, 3]),
        "quick" => sim(named::quick(), QUICK, &[1]),
        "http" => Family {
            http: true,
            ..sim(named::lan(), HTTP, &[1])
        },
        other => {
            let names: Vec<&str> = FAMILIES.iter().map(|(n, _)| *n).collect();
            return Err(LabError::input(format!(
                "--family: unknown family \"{other}\": give one of {}",
                names.join(", ")
            )));
        }
    })
}

/// The generated cases of `family_seed`: case `k` draws from its own
/// stream, so it does not change when another case is redrawn.
pub fn generated(family_seed: u64, pickers: &[PickerName]) -> Result<Vec<Case>, LabError> {
    (0..GENERATED)
        .map(|k| draw(family_seed, k, pickers))
        .collect()
}

fn draw(family_seed: u64, k: usize, pickers: &[PickerName]) -> Result<Case, LabError> {
    let mut rng = Rng::new(sub_seed(family_seed, 9000 + k as u64));
    for _ in 0..ATTEMPTS {
        let axes = draw_axes(&mut rng);
        let case = Case {
            id: format!("g{:02}", k + 1),
            name: format!("g{:02}-{}", k + 1, slug(&axes)),
            note: format!("generated, family seed {family_seed}"),
            axes,
        };
        let r = toml::resolve(&case, "generated", pickers, FULL, None)?;
        if (MIN_RATE..=MAX_RATE).contains(&r.rate) {
            return Ok(case);
        }
    }
    Err(LabError::runtime(format!(
        "family seed {family_seed}: case {} found no fleet within {MIN_RATE}..={MAX_RATE} requests/s",
        k + 1
    )))
}

/// A whole number drawn log-uniformly in `lo..=hi`.
fn log_uniform(rng: &mut Rng, (lo, hi): (f64, f64)) -> f64 {
    (lo.ln() + rng.unit() * (hi.ln() - lo.ln())).exp()
}

/// `x` drawn uniformly in `lo..hi`, rounded to `step`.
fn uniform(rng: &mut Rng, (lo, hi): (f64, f64), step: f64) -> f64 {
    ((lo + rng.unit() * (hi - lo)) / step).round() * step
}

/// Two significant digits, in whole microseconds.
fn round_scale(d: f64) -> Duration {
    let us = d * 1e6;
    let mag = 10f64.powi(us.log10().floor() as i32 - 1).max(1.0);
    Duration::from_micros(((us / mag).round() * mag) as u64)
}

fn draw_axes(rng: &mut Rng) -> Axes {
    let int = |rng: &mut Rng, (lo, hi): (u32, u32)| {
        (log_uniform(rng, (f64::from(lo), f64::from(hi))).round() as u32).clamp(lo, hi)
    };
    let replicas = int(rng, axes::REPLICAS);
    let clients = int(rng, axes::CLIENTS);
    let workers = axes::WORKERS[rng.below(axes::WORKERS.len())];
    let (lo, hi) = axes::SCALE;
    let scale = round_scale(log_uniform(rng, (lo.as_secs_f64(), hi.as_secs_f64())));
    let mix = match rng.below(3) {
        0 => Mix::Identical,
        1 => Mix::Lognormal {
            spread: uniform(rng, axes::SPREAD, 0.1),
        },
        _ => Mix::TwoClasses {
            ratio: uniform(rng, axes::CLASS_RATIO, 0.1),
            slow_share: uniform(rng, (0.1, 0.5), 0.1),
        },
    };
    let pattern = [
        Pattern::None,
        Pattern::Rotating,
        Pattern::Antagonists,
        Pattern::SlowReplica,
        Pattern::FailFast,
    ][rng.below(5)];
    let load = if rng.unit() < CLOSED_SHARE {
        let per = uniform(rng, USERS_PER_WORKER, 0.01);
        let users = (per * f64::from(replicas * workers)).round() as u32;
        Loop::Closed {
            users: users.max(clients),
        }
    } else {
        Loop::Open {
            utilization: uniform(rng, axes::UTILIZATION, 0.01),
        }
    };
    Axes {
        replicas,
        clients,
        workers,
        scale,
        mix,
        pattern,
        load,
    }
}

/// A generated case's name after its id: `r20-c5-w4-lognormal-fail-fast-open0.85-12ms`.
fn slug(a: &Axes) -> String {
    let mix = match a.mix {
        Mix::Identical => "identical",
        Mix::Lognormal { .. } => "lognormal",
        Mix::TwoClasses { .. } => "two-class",
    };
    let pattern = match a.pattern {
        Pattern::None => "steady",
        Pattern::Rotating => "rotating",
        Pattern::Antagonists => "antagonists",
        Pattern::SlowReplica => "slow-replica",
        Pattern::FailFast => "fail-fast",
    };
    let load = match a.load {
        Loop::Closed { users } => format!("closed{users}"),
        Loop::Open { utilization } => format!("open{utilization}"),
        Loop::Rate { per_s } => format!("rate{per_s}"),
    };
    format!(
        "r{}-c{}-w{}-{mix}-{pattern}-{load}-{}",
        a.replicas,
        a.clients,
        a.workers,
        toml::duration(a.scale)
    )
}
