//! The rest of the lab, as the family uses it: its one way in.

pub(super) use super::super::args::pickers as parse_pickers;
pub(super) use super::super::driver::{self, Options};
pub(super) use super::super::error::LabError;
pub(super) use super::super::output as page;
pub(super) use super::super::report::{PickerReport, Report, Second};
pub(super) use super::super::scenario::random::{Rng, sub_seed};
pub(super) use super::super::scenario::{PickerName, Scenario, capacity};
