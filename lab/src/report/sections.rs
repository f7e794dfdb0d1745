//! The sections some scenarios add to a row's report (JSON `runs[].fleet`,
//! `runs[].membership`, `runs[].affinity`): their data only. What fills
//! them is [`super::fleet_stats`], [`super::membership_stats`] and
//! [`super::affinity`].

use serde::Serialize;

/// The route step's numbers for one row (JSON `runs[].fleet`).
#[derive(Debug, Clone, Serialize)]
pub struct FleetStats {
    /// Distinct balancer→endpoint pairs that carried a pick, per endpoint:
    /// the mean over endpoints (the connections an endpoint holds).
    pub pairs_mean: f64,
    /// The most pairs of any endpoint, over the mean.
    pub pairs_max_mean: f64,
    /// Picks of the busiest endpoint over the mean picks per endpoint.
    pub load_max_mean: f64,
    /// Share of picks whose client and backend were in different zones
    /// (`null` without zones).
    pub cross_zone: Option<f64>,
    /// The least cross-zone share that leaves every zone its share of the
    /// endpoints' load: `1 − Σ min(callers(z), endpoints(z))`.
    pub cross_zone_min: Option<f64>,
    /// Share of picks per priority level, highest first.
    pub priority_share: Vec<f64>,
    /// With more than one priority level: stretches of the run with the
    /// same planned priority load (client 0's plan at the end of each
    /// second; the second in which it changed is left out).
    pub phases: Vec<FleetPhase>,
}

/// A stretch of a run over which the plan's priority loads held.
#[derive(Debug, Clone, Serialize)]
pub struct FleetPhase {
    /// First second measured (the second the plan changed is left out).
    pub from_s: u64,
    /// One past the last second.
    pub to_s: u64,
    /// Healthy endpoints of the highest level / its endpoints, as planned.
    pub healthy: String,
    /// The planned load of each level, percent.
    pub planned: Vec<u32>,
    /// The measured share of picks of each level, percent.
    pub measured: Vec<f64>,
}

/// Throughput and time to share of a row (JSON `runs[].membership`).
#[derive(Debug, Clone, Serialize)]
pub struct Membership {
    /// The stretches between membership changes.
    pub phases: Vec<MembershipPhase>,
    /// Each replica that joined within the measured window.
    pub joins: Vec<Join>,
}

/// A stretch of the measured window with the same members.
#[derive(Debug, Clone, Serialize)]
pub struct MembershipPhase {
    /// First whole second (measured time).
    pub from_s: u64,
    /// One past the last whole second.
    pub to_s: u64,
    /// Replicas in the balancers.
    pub replicas: usize,
    /// Requests completed per second over the phase's whole seconds.
    pub rps: f64,
    /// Of which successful.
    pub ok_rps: f64,
}

/// A replica that joined.
#[derive(Debug, Clone, Serialize)]
pub struct Join {
    /// Its name.
    pub backend: String,
    /// When it joined, seconds of measured time.
    pub at_s: f64,
    /// Its fair share of the picks once in.
    pub fair_share: f64,
    /// Seconds from the join to the end of the first second in which its
    /// share reached 80% of `fair_share`; `null`: never before the next
    /// change.
    pub time_to_share_s: Option<f64>,
}

/// How the users' requests spread over the backends (JSON
/// `runs[].affinity`; with `[load] connections` only).
#[derive(Debug, Clone, Serialize)]
pub struct Affinity {
    /// Users who sent a measured request.
    pub users: usize,
    /// Distinct backends a user's requests reached, mean over users.
    pub backends_per_user: f64,
    /// Share of users whose requests all reached one backend.
    pub one_backend: f64,
}
