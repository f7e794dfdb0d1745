//! A case of a family, and what every part of the family agrees on.

use serde::Serialize;

use super::axes;

/// The hash pickers pick by key, not by load: the family leaves them out.
pub const HASH_PICKERS: &[&str] = &["key_hash", "ring_hash", "maglev"];

/// Identical replicas under this many requests per replica per second are
/// left out of the share bounds: in a 1 s window that few requests show
/// Poisson noise (round robin's own windows would breach them), not
/// herding.
pub const MIN_FAIR_PICKS: f64 = 50.0;

/// One case of a family.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Case {
    /// Short id, `f02` (issue 36's fleets), `l01` (LAN), `q03` (quick),
    /// `g07` (generated).
    pub id: String,
    /// Its scenario's name.
    pub name: String,
    /// Where it comes from.
    pub note: String,
    /// Its point on the axes.
    pub axes: axes::Axes,
}

impl Case {
    /// As the scorecard names it: `id name` (a generated case's name
    /// starts with its id already).
    pub fn label(&self) -> String {
        if self.name.starts_with(&self.id) {
            self.name.clone()
        } else {
            format!("{} {}", self.id, self.name)
        }
    }
}
