//! The JSON of a run over several seeds (`--seeds`): each level's
//! summary and every seed's report.

use serde::Serialize;

use super::document::Report;
use super::summary::{Seeded, Summary};

/// The JSON of a run over several seeds.
#[derive(Serialize)]
pub struct SeedsDoc<'a> {
    /// Always [`SEEDS_SCHEMA`].
    pub schema: &'static str,
    /// The scenario.
    pub scenario: &'a str,
    /// The seeds, in run order.
    pub seeds: Vec<u64>,
    /// A sweep's utilization levels (empty without one).
    pub levels: Vec<f64>,
    /// One summary per level.
    pub summaries: Vec<&'a Summary>,
    /// Per level, one report per seed (each as a plain run's JSON).
    pub reports: Vec<&'a [Report]>,
}

/// The JSON schema of a run over several seeds.
pub const SEEDS_SCHEMA: &str = "tower-lb-lab-seeds/1";

impl<'a> SeedsDoc<'a> {
    /// The document of `runs` at `levels`.
    pub fn new(runs: &'a [Seeded], levels: &[f64]) -> Self {
        Self {
            schema: SEEDS_SCHEMA,
            scenario: runs.first().map_or("", |r| r.summary.scenario.as_str()),
            seeds: runs
                .first()
                .map(|r| r.summary.seeds.clone())
                .unwrap_or_default(),
            levels: levels.to_vec(),
            summaries: runs.iter().map(|r| &r.summary).collect(),
            reports: runs.iter().map(|r| r.reports.as_slice()).collect(),
        }
    }
}
