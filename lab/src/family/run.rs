//! Runs a family's cases, once per seed: in sim on every core (each run on
//! a thread of its own, with its own paused-clock runtime, so a run's
//! numbers do not depend on which thread ran it or what ran beside it),
//! over real sockets one run at a time.

use std::io::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::lab::{LabError, Options, PickerName, Report, driver};
use super::toml::Resolved;

/// How to run the cases.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Simulated time.
    pub sim: bool,
    /// The seeds each case runs with.
    pub seeds: Vec<u64>,
    /// The rows (`None`: each case's own list).
    pub pickers: Option<Vec<PickerName>>,
    /// Threads running cases at once (sim only).
    pub jobs: usize,
    /// No progress line.
    pub quiet: bool,
}

/// Every case's reports, one per seed: `out[case][seed]`.
pub fn all(cases: &[Resolved], plan: &Plan) -> Result<Vec<Vec<Report>>, LabError> {
    // Longest first, so that the last runs to finish are short ones.
    let mut jobs: Vec<(usize, usize)> = (0..cases.len())
        .flat_map(|c| (0..plan.seeds.len()).map(move |s| (c, s)))
        .collect();
    let cost = |c: usize| cases[c].rate * cases[c].scenario.duration.0.as_secs_f64();
    jobs.sort_by(|a, b| cost(b.0).total_cmp(&cost(a.0)));
    let threads = if plan.sim {
        plan.jobs.clamp(1, jobs.len().max(1))
    } else {
        1
    };
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Report, LabError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let started = Instant::now();
    let worker = || {
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(c, s)) = jobs.get(k) else { return };
            let case = &cases[c];
            let opts = Options {
                sim: plan.sim,
                seed: Some(plan.seeds[s]),
                pickers: plan.pickers.clone(),
                // Over real time each row's own progress line shows.
                quiet: plan.quiet || plan.sim,
                ..Options::default()
            };
            let r = driver::run_scenario(&case.scenario, &opts);
            let failed = r.is_err();
            results.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(r);
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            if !plan.quiet {
                eprint!(
                    "\r[{n}/{}] {} seed {} done, {:.0} s{:<40}",
                    jobs.len(),
                    case.scenario.name,
                    plan.seeds[s],
                    started.elapsed().as_secs_f64(),
                    ""
                );
                let _ = std::io::stderr().flush();
            }
            if failed {
                // Stop handing out work: the family fails.
                next.store(jobs.len(), Ordering::Relaxed);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(worker);
        }
    });
    if !plan.quiet {
        eprint!("\r{:<130}\r", "");
    }
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut out: Vec<Vec<Option<Report>>> = cases
        .iter()
        .map(|_| (0..plan.seeds.len()).map(|_| None).collect())
        .collect();
    for (&(c, s), r) in jobs.iter().zip(results) {
        if let Some(r) = r {
            out[c][s] = Some(r?);
        }
    }
    out.into_iter()
        .map(|seeds| {
            seeds
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| LabError::runtime("a family run was not run"))
        })
        .collect()
}
