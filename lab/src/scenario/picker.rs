//! [`PickerName`]: the pickers a scenario names: the crate's, the lab's
//! oracle, and the rivals (other crates' balancers, [`Rival`]).

use std::fmt;
use std::str::FromStr;

use serde::de;
use serde::{Deserialize, Deserializer};

/// A picker the lab knows by name: one of the crate's registry
/// ([`tower_lb::pick::NAMES`]), or the lab's own oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PickerName {
    /// A picker of the crate, by its registry name.
    Crate(&'static str),
    /// The lab's oracle (sim mode only).
    Oracle,
    /// Another crate's balancer ([`crate::rivals`]).
    Rival(Rival),
}

impl PickerName {
    /// Every name, in the order `--help` lists them: the crate's registry,
    /// the oracle, then the rivals.
    pub fn all() -> impl Iterator<Item = PickerName> {
        tower_lb::pick::NAMES
            .iter()
            .map(|&n| PickerName::Crate(n))
            .chain([PickerName::Oracle])
            .chain(Rival::ALL.map(PickerName::Rival))
    }

    /// The name as written in scenarios and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PickerName::Crate(name) => name,
            PickerName::Oracle => "oracle",
            PickerName::Rival(r) => r.as_str(),
        }
    }
}

impl fmt::Display for PickerName {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The list of known picker names, for error messages.
pub fn known_pickers() -> String {
    let names: Vec<&str> = PickerName::all().map(|p| p.as_str()).collect();
    names.join(", ")
}

impl FromStr for PickerName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        PickerName::all()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("unknown picker \"{s}\" (known: {})", known_pickers()))
    }
}

impl<'de> Deserialize<'de> for PickerName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// A rival balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rival {
    /// `tower::balance::p2c::Balance` over `tower::load::PeakEwma`.
    TowerP2c,
    /// The same over `tower::load::PendingRequests`.
    TowerPending,
    /// tonic's balanced channel: tower's P2C over a constant load of 0.
    Tonic,
    /// loadpace's controller per endpoint under tower's P2C, its defaults.
    Loadpace,
    /// The same, tuned for the scenario as loadpace's tuning guide says.
    LoadpaceTuned,
}

impl Rival {
    /// Every rival, in table order.
    pub const ALL: [Rival; 5] = [
        Rival::TowerP2c,
        Rival::TowerPending,
        Rival::Tonic,
        Rival::Loadpace,
        Rival::LoadpaceTuned,
    ];

    /// The name in scenarios and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Rival::TowerP2c => "tower_p2c",
            Rival::TowerPending => "tower_p2c_pending",
            Rival::Tonic => "tonic_balance",
            Rival::Loadpace => "loadpace",
            Rival::LoadpaceTuned => "loadpace_tuned",
        }
    }

    /// The row's name in the table: `tower_p2c (rival)`, and loadpace's
    /// two rows `loadpace (defaults, rival)` and `loadpace (tuned, rival)`.
    pub fn row_name(self) -> String {
        match self {
            Rival::Loadpace => "loadpace (defaults, rival)".into(),
            Rival::LoadpaceTuned => "loadpace (tuned, rival)".into(),
            r => format!("{} (rival)", r.as_str()),
        }
    }
}

impl fmt::Display for Rival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Rival {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Rival::ALL.into_iter().find(|r| r.as_str() == s).ok_or(())
    }
}
