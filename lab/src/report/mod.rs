//! Reporting: what a run found, as the reader sees it. [`Report`] is the
//! JSON document (schema in docs/lab.md, `tower-lb-lab/2`); the rest
//! renders it: the terminal table ([`table`]), the charts ([`svg`]), a
//! sweep's summary ([`sweep`]), and the sections some scenarios add
//! (fleet, membership, affinity, a capacity search's curves). The files a
//! run writes (the report page, the JSON) are [`crate::output`]'s.

pub mod affinity;
pub mod capacity_curves;
pub mod document;
pub mod fleet_stats;
pub mod membership_stats;
pub mod sections;
pub mod seeds;
pub mod summary;
pub mod svg;
pub mod sweep;
pub mod table;

pub use document::{
    BackendInfo, Latency, LoadProbeReport, MAX_LISTED, OpenStats, PeerInfo, PickerReport, Report,
    SCHEMA, Second, round,
};
pub use sections::{Affinity, FleetPhase, FleetStats, Join, Membership, MembershipPhase};
