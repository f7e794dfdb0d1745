//! A row's figures in a case (its scored p99, its share balance) and their
//! ratios to the reference rows (the oracle, `tower_p2c`).

use serde::Serialize;

use super::lab::{PickerReport, Second};

/// A failed or unanswered request counts as a miss at this latency, ms
/// (the lab's default drain: no answer comes later than that).
pub const MISS_MS: f64 = 10_000.0;

/// The smallest p99 a ratio divides by, ms: the sim's timer can make a
/// sub-millisecond p99 zero.
pub const FLOOR_MS: f64 = 0.001;

/// A tenth of the fair share: under it, a replica is starved.
pub const STARVED: f64 = 0.1;

/// One row's figures in one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figures {
    /// p99 of the successful requests, ms (the lab's table).
    pub p99_ms: f64,
    /// p99 of every request, a failure counting as a miss at [`MISS_MS`]:
    /// what the scorecard compares. With no failures, `p99_ms`.
    pub scored_ms: f64,
    /// Mean of the successful requests, ms.
    pub mean_ms: f64,
    /// Failed requests over all.
    pub error_rate: f64,
    /// Share balance over 1 s windows (cases of identical replicas only).
    pub share: Option<Balance>,
}

/// Share balance of a row over its 1 s windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Balance {
    /// The largest share any replica took in any window, over the fair
    /// share (1: even; 2: twice its share).
    pub max_mean: f64,
    /// The longest run of windows, in seconds, in which one replica got
    /// under [`STARVED`] of its fair share.
    pub starved_s: u64,
}

impl Figures {
    /// The figures of `r`; with `identical`, its share balance.
    pub fn of(r: &PickerReport, identical: bool) -> Self {
        Self {
            p99_ms: r.latency_ms.p99,
            scored_ms: r.p99_misses_ms.min(MISS_MS),
            mean_ms: r.latency_ms.mean,
            error_rate: r.error_rate,
            share: identical.then(|| balance(&r.timeline)).flatten(),
        }
    }
}

/// Share balance over `timeline`'s windows (those with picks); `None`
/// when no window has any.
pub fn balance(timeline: &[Second]) -> Option<Balance> {
    let windows: Vec<&[f64]> = timeline
        .iter()
        .map(|s| s.share.as_slice())
        .filter(|s| s.iter().sum::<f64>() > 0.0)
        .collect();
    let n = windows.first()?.len();
    if n == 0 {
        return None;
    }
    let fair = 1.0 / n as f64;
    let max = windows
        .iter()
        .flat_map(|w| w.iter().copied())
        .fold(0.0, f64::max);
    let mut longest = 0;
    for i in 0..n {
        let mut run = 0;
        for w in &windows {
            run = if w[i] < STARVED * fair { run + 1 } else { 0 };
            longest = longest.max(run);
        }
    }
    Some(Balance {
        max_mean: max / fair,
        starved_s: longest,
    })
}

/// `x / reference`, both floored at [`FLOOR_MS`].
pub fn ratio(x: f64, reference: f64) -> f64 {
    x.max(FLOOR_MS) / reference.max(FLOOR_MS)
}

/// Geometric mean (`None` for none).
pub fn geomean(xs: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = xs
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    (n > 0).then(|| (sum / n as f64).exp())
}

/// A ratio over a case's seeds: their geometric mean and range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Geometric mean over the seeds.
    pub mean: f64,
    /// Lowest seed.
    pub min: f64,
    /// Highest seed.
    pub max: f64,
}

impl Spread {
    /// Of these ratios (`None` for none).
    pub fn of(xs: &[f64]) -> Option<Self> {
        Some(Self {
            mean: geomean(xs.iter().copied())?,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(0.0, f64::max),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(share: &[f64]) -> Second {
        Second {
            t: 0,
            requests: 1,
            errors: 0,
            mean_ms: None,
            share: share.to_vec(),
        }
    }

    #[test]
    fn balance_finds_herding_and_the_longest_starvation_of_one_replica() {
        // (windows, max/mean, longest starved run)
        let cases: &[(&[&[f64]], f64, u64)] = &[
            (&[&[0.5, 0.5], &[0.5, 0.5]], 1.0, 0),
            // 0.04 < a tenth of 0.5: starved for two windows, then fed.
            (&[&[0.96, 0.04], &[0.97, 0.03], &[0.5, 0.5]], 1.94, 2),
            // Two replicas starved one window each, not in a row: 1 s.
            (&[&[0.0, 0.5, 0.5], &[0.5, 0.0, 0.5]], 1.5, 1),
            // Exactly a tenth of the fair share is not under it.
            (&[&[0.05, 0.95]], 1.9, 0),
            // Windows without picks are left out (no starvation there).
            (&[&[0.0, 1.0], &[0.0, 0.0], &[0.0, 1.0]], 2.0, 2),
        ];
        for (windows, max_mean, starved) in cases {
            let t: Vec<Second> = windows.iter().map(|w| second(w)).collect();
            let b = balance(&t).expect("windows with picks");
            assert!((b.max_mean - max_mean).abs() < 1e-9, "{windows:?}: {b:?}");
            assert_eq!(b.starved_s, *starved, "{windows:?}: {b:?}");
        }
        assert_eq!(balance(&[second(&[0.0, 0.0])]), None);
        assert_eq!(balance(&[]), None);
    }

    #[test]
    fn ratios_and_means() {
        assert_eq!(ratio(2.0, 4.0), 0.5);
        assert_eq!(ratio(0.0, 0.0), 1.0);
        assert!((geomean([2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(geomean([]), None);
        let s = Spread::of(&[0.5, 2.0]).unwrap();
        assert!((s.mean - 1.0).abs() < 1e-12);
        assert_eq!((s.min, s.max), (0.5, 2.0));
    }
}
