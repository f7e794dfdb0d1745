//! Randomness for pickers: a thread-local generator by default, or a seeded,
//! shared sequence so that simulations and tests repeat exactly.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where a balancer's random numbers come from.
#[derive(Debug)]
pub(crate) enum RngSource {
    /// `fastrand`'s thread-local generator: no shared state between threads.
    Thread,
    /// SplitMix64 over a shared counter: deterministic for a single thread.
    Seeded(AtomicU64),
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl RngSource {
    pub(crate) fn new(seed: Option<u64>) -> Self {
        match seed {
            None => RngSource::Thread,
            Some(s) => RngSource::Seeded(AtomicU64::new(s)),
        }
    }

    #[inline]
    pub(crate) fn next_u64(&self) -> u64 {
        match self {
            RngSource::Thread => fastrand::u64(..),
            RngSource::Seeded(state) => {
                let mut z = state
                    .fetch_add(GOLDEN, Ordering::Relaxed)
                    .wrapping_add(GOLDEN);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            }
        }
    }
}

/// Maps a random `u64` onto `0..n` without division (Lemire's multiply-shift).
#[inline]
pub(crate) fn below(r: u64, n: usize) -> usize {
    ((u128::from(r) * n as u128) >> 64) as usize
}

/// A random `f64` in `[0, 1)` from the top 53 bits of `r`.
#[inline]
pub(crate) fn unit(r: u64) -> f64 {
    (r >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}
