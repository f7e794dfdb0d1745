//! A tiny harness to run pickers without a `Balance`.

use std::sync::Arc;

use tokio::time::Instant;

use super::{Pick, Pool, Sampler};
use crate::admission::{Cap, Route, Terms};
use crate::model::{Birth, EndpointMeta, EndpointState, Model, Rates};
use crate::rng::RngSource;

pub(crate) struct Fixture {
    pub(crate) states: Vec<Arc<EndpointState>>,
    pub(crate) sampler: Sampler,
    pub(crate) model: Arc<Model>,
    pub(crate) rng: RngSource,
    pub(crate) cap: Cap,
}

impl Fixture {
    pub(crate) fn new(weights: &[f64]) -> Self {
        Self::with_lanes(weights, 0)
    }

    /// Endpoints with `lane_mask + 1` lanes (see `model::lanes`).
    pub(crate) fn with_lanes(weights: &[f64], lane_mask: usize) -> Self {
        let model = Arc::new(Model {
            clock: crate::time::Clock::runtime(crate::time::Epoch::new(Instant::now())),
            rates: Rates {
                latency: 1.0 / 10e9,
                failure: 1.0 / 2e9,
                sample: 1.0 / 1e9,
                penalty: 1e9,
            },
            default_rtt_ns: 30e6,
            penalty_ns: 1e9,
            slow_start: None,
            report_expiry_ns: crate::time::nanos(crate::orca::DEFAULT_REPORT_EXPIRY),
            adaptive: None,
            lane_mask,
        });
        let states = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let birth = Birth {
                    id: i as u64,
                    key_hash: i as u64,
                    label: format!("e{i}").into(),
                    weight: w,
                    meta: EndpointMeta::default(),
                    ramp_start: None,
                    gate: Default::default(),
                    observer: None,
                };
                Arc::new(EndpointState::new(
                    birth,
                    &model,
                    model.clock.epoch().instant(),
                ))
            })
            .collect();
        Self {
            states,
            sampler: Sampler::new(weights),
            model,
            rng: RngSource::new(Some(42)),
            cap: Cap::default(),
        }
    }

    pub(crate) fn cx<'a, T>(&'a self, table: &'a T) -> Pool<'a, T> {
        self.cx_in(table, 0)
    }

    /// A pool as lane `lane`'s threads see it.
    pub(crate) fn cx_in<'a, T>(&'a self, table: &'a T, lane: usize) -> Pool<'a, T> {
        let now_ns = self.model.clock.now_ns();
        Pool {
            states: &self.states,
            sampler: &self.sampler,
            table,
            now_ns,
            rates: self.model.rates,
            rng: &self.rng,
            lane,
            terms: Terms::new(
                Route::Healthy,
                self.cap,
                &[],
                now_ns,
                self.model.clock.epoch(),
            ),
        }
    }

    /// Runs `n` picks, returning the count per endpoint.
    pub(crate) fn counts<P: Pick<()>>(&self, p: &P, n: usize) -> Vec<usize> {
        let table = p.table(&self.states);
        let mut counts = vec![0; self.states.len()];
        for _ in 0..n {
            let i = p.pick(&(), &self.cx(&table)).expect("an endpoint");
            counts[i] += 1;
        }
        counts
    }
}
