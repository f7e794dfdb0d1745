//! The lab's random numbers: one seeded generator per stream (a backend, a
//! user, the arrivals, the slowdown schedule), so a `--sim` run repeats
//! exactly and every row of a table sees the same arrivals and slowdowns.
//! Generators and distributions are `rand`'s and `rand_distr`'s.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng as _, RngExt as _, SeedableRng as _};
use rand_distr::{Distribution as _, Exp, LogNormal, StandardNormal};

use super::units::DelaySpec;

/// A seeded generator (`rand`'s `SmallRng`).
#[derive(Debug, Clone)]
pub struct Rng(SmallRng);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(SmallRng::seed_from_u64(seed))
    }

    /// The next random `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0.random()
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.random_range(0..n.max(1))
    }

    /// Standard normal.
    pub fn normal(&mut self) -> f64 {
        StandardNormal.sample(&mut self.0)
    }

    /// Exponential with mean `mean` (a Poisson process's gap).
    pub fn exponential(&mut self, mean: Duration) -> Duration {
        let rate = 1.0 / mean.as_secs_f64().max(1e-12);
        let gap = Exp::new(rate).map_or(0.0, |e| e.sample(&mut self.0));
        Duration::from_secs_f64(gap.min(3600.0))
    }
}

/// Mixes a seed with a stream number, so that every backend and user draws
/// from its own sequence.
pub fn sub_seed(seed: u64, stream: u64) -> u64 {
    Rng::new(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// z-score of the 99th percentile of a standard normal.
const Z99: f64 = 2.326_347_874_040_841;

/// The longest service time drawn (an hour): a lognormal's tail is
/// unbounded.
const MAX_NS: f64 = 3.6e12;

/// A service time ready to sample.
#[derive(Debug, Clone, Copy)]
pub enum Delay {
    /// Always this many nanoseconds.
    Fixed(f64),
    /// Lognormal, in nanoseconds: `exp(mu + sigma·z)`.
    LogNormal {
        /// ln of the median.
        mu: f64,
        /// From `ln(p99 / median) / z99`.
        sigma: f64,
        /// The distribution itself.
        dist: LogNormal<f64>,
    },
}

impl From<DelaySpec> for Delay {
    fn from(d: DelaySpec) -> Self {
        match d {
            DelaySpec::Fixed(d) => Delay::Fixed(d.as_nanos() as f64),
            DelaySpec::LogNormal { median, p99 } => {
                let m = median.as_nanos() as f64;
                let (mu, sigma) = (m.ln(), (p99.as_nanos() as f64 / m).ln() / Z99);
                // The scenario checked 0 < median <= p99: sigma is finite
                // and >= 0, which is all `LogNormal::new` asks.
                match LogNormal::new(mu, sigma) {
                    Ok(dist) => Delay::LogNormal { mu, sigma, dist },
                    Err(_) => Delay::Fixed(m),
                }
            }
        }
    }
}

impl Delay {
    /// The mean, in nanoseconds.
    pub fn mean_ns(&self) -> f64 {
        match *self {
            Delay::Fixed(ns) => ns,
            Delay::LogNormal { mu, sigma, .. } => (mu + sigma * sigma / 2.0).exp(),
        }
    }

    /// One sample.
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        let ns = match self {
            Delay::Fixed(ns) => *ns,
            Delay::LogNormal { dist, .. } => dist.sample(&mut rng.0),
        };
        Duration::from_nanos(ns.clamp(0.0, MAX_NS) as u64)
    }
}
