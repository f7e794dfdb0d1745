//! `--seeds 1-3`: the same run once per seed. In `--sim` the seeds run on
//! threads of their own, up to two per core at once (each run is the same
//! as `--seed N` alone would give); over HTTP one after the other, since
//! the backends share the machine.

use std::thread;

use crate::driver::{Options, run_scenario};
use crate::error::LabError;
use crate::report::Report;
use crate::scenario::Scenario;

/// The most seeds one run takes.
pub const MAX_SEEDS: usize = 1000;

/// `--seeds`'s list: `1-3`, `1,4,7`, or both (`1-3,7`), in order, each once.
pub fn parse(v: &str) -> Result<Vec<u64>, String> {
    let mut seeds: Vec<u64> = Vec::new();
    let num = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("\"{x}\" is not an integer in 0..2^64"))
    };
    for part in v.split(',').filter(|p| !p.trim().is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(part)?;
                (n, n)
            }
        };
        if hi < lo {
            return Err(format!("\"{part}\": the range runs backwards"));
        }
        if (hi - lo) as usize >= MAX_SEEDS || seeds.len() + ((hi - lo) as usize) >= MAX_SEEDS {
            return Err(format!("at most {MAX_SEEDS} seeds"));
        }
        for s in lo..=hi {
            if !seeds.contains(&s) {
                seeds.push(s);
            }
        }
    }
    if seeds.is_empty() {
        return Err("list at least one seed (1-3, or 1,4,7)".into());
    }
    Ok(seeds)
}

/// Runs `sc` once per seed, with `opts` otherwise; the reports in seed
/// order. `done(report)` is called as each finishes, in seed order.
pub fn run(
    sc: &Scenario,
    opts: &Options,
    seeds: &[u64],
    mut done: impl FnMut(&Report),
) -> Result<Vec<Report>, LabError> {
    let at = |s: u64| Options {
        seed: Some(s),
        ..opts.clone()
    };
    if !opts.sim || seeds.len() < 2 {
        let mut out = Vec::with_capacity(seeds.len());
        for &s in seeds {
            let r = run_scenario(sc, &at(s))?;
            done(&r);
            out.push(r);
        }
        return Ok(out);
    }
    // Parallel: no progress lines or streamed rows, which would
    // interleave; each seed's table when it is done. Up to two runs per
    // core at once, so that three seeds on two cores take one and a half
    // runs' time, not two.
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = Vec::with_capacity(seeds.len());
    for chunk in seeds.chunks(2 * cores.max(1)) {
        let results: Vec<Result<Report, LabError>> = thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&s| {
                    let o = Options {
                        quiet: true,
                        stream: false,
                        metrics_addr: None,
                        ..at(s)
                    };
                    scope.spawn(move || run_scenario(sc, &o))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(LabError::runtime("a seed's run panicked")))
                })
                .collect()
        });
        for r in results {
            let r = r?;
            done(&r);
            out.push(r);
        }
    }
    Ok(out)
}
