//! A family's run, as the scorecard, the table and the page read it.

use std::time::Duration;

use super::card::{self, Card, RowResult};
use super::generate::Family;
use super::lab::Report;
use super::toml;

/// A family's run: its cases, every report, every row's figures and the
/// scorecard.
#[derive(Debug)]
pub struct FamilyReport {
    /// The family.
    pub family: Family,
    /// Its cases as scenarios, in order.
    pub cases: Vec<toml::Resolved>,
    /// Over real sockets (`false`: sim).
    pub http: bool,
    /// The seeds each case ran with.
    pub seeds: Vec<u64>,
    /// `runs[case][seed]`.
    pub runs: Vec<Vec<Report>>,
    /// `rows[case]`: each row's figures over the seeds.
    pub rows: Vec<Vec<RowResult>>,
    /// Whether each case is measured against the share bounds.
    pub shares: Vec<bool>,
    /// One line per row name.
    pub cards: Vec<Card>,
    /// Threads the sim ran on.
    pub threads: usize,
    /// Wall time of the runs.
    pub wall: Duration,
}

impl FamilyReport {
    /// Case `i` as the scorecard names it: `id name`.
    pub fn label(&self, i: usize) -> String {
        self.family.cases[i].label()
    }

    /// The card of `picker`.
    pub fn card(&self, picker: &str) -> Option<&Card> {
        self.cards.iter().find(|c| c.picker == picker)
    }

    /// The row with the lowest geometric-mean p99 over the oracle's.
    pub fn best(&self) -> Option<(&str, f64)> {
        card::best(&self.cards)
    }
}
