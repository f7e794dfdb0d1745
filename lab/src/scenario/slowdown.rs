//! `slowdown = { every = "2s", share = 0.25, factors = [1, 2, 4] }`: replicas
//! that slow down unevenly and for a while (noisy neighbours, GC, a batch job
//! on the same host).
//!
//! The backends that carry the same `slowdown` form one group. At the start
//! of the run and every `every` after, a seeded random `share` of the group
//! (`share × n` backends, the fraction rounded up with that probability) is
//! drawn, and each of them runs for that step `factor` times slower, with
//! `factor` drawn uniformly from `factors`; the others run at their normal
//! speed. A request's factor is the one in force when its service starts,
//! for all of its service time. The schedule is drawn once per run from the
//! seed alone: every row of a table sees the same slowdowns.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::backend::BackendSpec;
use super::random::{Rng, sub_seed};
use super::units::Dur;

/// A backend's `slowdown` field.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowdownSpec {
    /// Length of one step.
    pub every: Dur,
    /// Share of the group slowed at each step, 0 to 1.
    pub share: f64,
    /// The factors a slowed backend runs at, drawn uniformly (each > 0;
    /// 1 is a step at normal speed).
    pub factors: Vec<f64>,
}

impl SlowdownSpec {
    /// Checks the field; the error names the part.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |f: &str, p: String| Err((f.to_string(), p));
        if self.every.0.is_zero() {
            return err("every", "must be > 0".into());
        }
        if !(0.0..=1.0).contains(&self.share) {
            return err("share", format!("{} is not in 0..=1", self.share));
        }
        if self.factors.is_empty() {
            return err(
                "factors",
                "list at least one factor (1 = normal speed)".into(),
            );
        }
        if let Some(f) = self
            .factors
            .iter()
            .find(|f| !(f.is_finite() && **f > 0.0 && **f <= 1e6))
        {
            return err("factors", format!("{f} is not a number in (0, 1e6]"));
        }
        Ok(())
    }

    /// The expected speed of a group member over the factors: `E[1/f]`,
    /// the share of its capacity it keeps on average.
    pub fn mean_speed(&self) -> f64 {
        let slowed: f64 =
            self.factors.iter().map(|f| 1.0 / f).sum::<f64>() / self.factors.len().max(1) as f64;
        (1.0 - self.share) + self.share * slowed
    }
}

/// One backend's schedule: its factor at each step.
#[derive(Debug, Clone)]
pub struct Slowdown {
    every: Duration,
    factors: Arc<[f64]>,
}

impl Slowdown {
    /// The factor at `t` since the run started (1 past the schedule's end).
    pub fn factor(&self, t: Duration) -> f64 {
        let step = (t.as_nanos() / self.every.as_nanos().max(1)) as usize;
        self.factors.get(step).copied().unwrap_or(1.0)
    }
}

/// Every backend's schedule (`None` without `slowdown`) over `horizon`,
/// drawn from `seed`.
pub fn schedules(backends: &[BackendSpec], seed: u64, horizon: Duration) -> Vec<Option<Slowdown>> {
    let mut out: Vec<Option<Slowdown>> = vec![None; backends.len()];
    let mut groups: Vec<(&SlowdownSpec, Vec<usize>)> = Vec::new();
    for (i, b) in backends.iter().enumerate() {
        let Some(spec) = &b.slowdown else { continue };
        match groups.iter_mut().find(|(s, _)| *s == spec) {
            Some((_, members)) => members.push(i),
            None => groups.push((spec, vec![i])),
        }
    }
    for (g, (spec, members)) in groups.into_iter().enumerate() {
        let mut rng = Rng::new(sub_seed(seed, 7000 + g as u64));
        let steps = (horizon.as_nanos() / spec.every.0.as_nanos().max(1)) as usize + 1;
        let n = members.len();
        // table[step][member]
        let mut table = vec![vec![1.0; n]; steps];
        let mut order: Vec<usize> = (0..n).collect();
        for row in &mut table {
            let exact = spec.share * n as f64;
            let slowed = exact.floor() as usize + usize::from(rng.unit() < exact.fract());
            // A partial Fisher-Yates shuffle: the first `slowed` of a
            // random order.
            for k in 0..slowed.min(n) {
                let j = k + rng.below(n - k);
                order.swap(k, j);
                row[order[k]] = spec.factors[rng.below(spec.factors.len())];
            }
        }
        for (m, &backend) in members.iter().enumerate() {
            out[backend] = Some(Slowdown {
                every: spec.every.0,
                factors: table.iter().map(|row| row[m]).collect(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(share: f64) -> SlowdownSpec {
        SlowdownSpec {
            every: Dur(Duration::from_secs(2)),
            share,
            factors: vec![1.0, 2.0, 4.0],
        }
    }

    #[test]
    fn the_mean_speed_of_the_published_model() {
        // 0.75 + 0.25 * (1 + 1/2 + 1/4) / 3
        assert!((spec(0.25).mean_speed() - 0.895_833).abs() < 1e-6);
    }
}
