//! The JSON document of a run (schema in docs/lab.md, [`SCHEMA`]): the
//! scenario, its backends, and one entry per row.

use serde::Serialize;

use super::sections::{Affinity, FleetStats, Membership};
use crate::scenario::Scenario;

/// The JSON schema identifier; bump it when a field changes meaning (2:
/// `errors` counts 4xx answers too, and `errors_by` splits them).
pub const SCHEMA: &str = "tower-lb-lab/2";

/// The most backends the table lists one by one.
pub const MAX_LISTED: usize = 12;

/// One lab run: a scenario, every picker's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// Scenario name.
    pub scenario: String,
    /// The scenario's one-line description.
    pub description: String,
    /// `"sim"` or `"http"`.
    pub mode: &'static str,
    /// Seed of every random number.
    pub seed: u64,
    /// Length of each picker's run, in seconds.
    pub duration_s: f64,
    /// Most virtual users active at once.
    pub users: u32,
    /// Independent balancers.
    pub clients: u32,
    /// Open loop: arrivals per second as intended (`null`: closed loop).
    pub arrival_rate: Option<f64>,
    /// Open loop at a share of capacity: that share (`null` otherwise).
    pub target_utilization: Option<f64>,
    /// What the hash pickers key on: `"x-forwarded-for"`, or
    /// `"connection per_user"` / `"connection per_request"` (`[load]
    /// connections`).
    pub hash_key: &'static str,
    /// The backends, in the order of every per-backend array.
    pub backends: Vec<BackendInfo>,
    /// Pickers skipped, settings not applied, and why.
    pub notes: Vec<String>,
    /// One entry per row: the pickers in the scenario's order, then the
    /// peers.
    pub runs: Vec<PickerReport>,
    /// The summary with the ratio columns (`--ratio-to`), when the run has
    /// a row to divide by; absent otherwise (and from each seed's report
    /// of a `--seeds` run, whose document holds the summary over them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<super::summary::Summary>,
}

/// A backend as configured.
#[derive(Debug, Clone, Serialize)]
pub struct BackendInfo {
    /// Name.
    pub name: String,
    /// Service time at the start, in words.
    pub delay: String,
    /// Worker limit, `null` for unlimited.
    pub workers: Option<u32>,
    /// Weight (seen by the pickers in `weights_for`).
    pub weight: f64,
    /// Zone (`null` when the scenario gives none).
    pub zone: Option<String>,
    /// Priority level (0 is the highest).
    pub priority: u32,
}

/// One picker's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct PickerReport {
    /// Picker name.
    pub picker: String,
    /// Whether this picker saw the backends' weights.
    pub weighted: bool,
    /// Requests completed within the run (successes and errors).
    pub requests: u64,
    /// Requests that failed as the user saw them (no answer, 5xx, balancer error).
    pub errors: u64,
    /// Errors by status (`"503"`, `"409"`) and by kind when there was no
    /// answer (`"timeout"`, `"connect"`, `"body"`, `"other"`).
    pub errors_by: std::collections::BTreeMap<String, u64>,
    /// `requests / duration_s`.
    pub rps: f64,
    /// `errors / requests`.
    pub error_rate: f64,
    /// Latency of successful requests, in ms.
    pub latency_ms: Latency,
    /// Fraction of attempts dispatched to each backend.
    pub share: Vec<f64>,
    /// Attempts dispatched to each backend.
    pub picks: Vec<u64>,
    /// Requests in flight on each backend when the run ended (summed over
    /// the clients' balancers; empty when unknown: a rival's row against
    /// the user's replicas).
    pub in_flight_end: Vec<usize>,
    /// Retries sent by the retry layer (`null` without one).
    pub retries: Option<u64>,
    /// Failed requests the retry layer would have retried but could not
    /// send again (a POST without `non_idempotent`; `null` without a
    /// retry layer).
    pub not_replayable: Option<u64>,
    /// Outlier ejections of each backend, summed over the clients'
    /// balancers (`null` without `[resilience.outlier]`).
    pub ejections: Option<Vec<u64>>,
    /// Times each backend's circuit breaker opened, summed over the
    /// clients' balancers (`null` without `[resilience.breaker]`).
    pub breaker_opens: Option<Vec<u64>>,
    /// A probing picker's load probes, summed over the clients' balancers
    /// (`null` for the others).
    pub probes: Option<LoadProbeReport>,
    /// Mean wall-clock time of selection (the picker's `pick`, as the
    /// study's "algorithm duration"), in ns; `null` in `--sim` so that the
    /// JSON is exactly reproducible.
    pub select_ns: Option<f64>,
    /// Mean wall-clock time of the rest of `call` on the client stack (the
    /// health census, the in-flight slot, the service clone, the response
    /// future, the layers above), in ns; `null` in `--sim`.
    pub rest_ns: Option<f64>,
    /// `select_ns`, always measured (shown in the table).
    #[serde(skip)]
    pub select_ns_measured: f64,
    /// `rest_ns`, always measured (shown in the table).
    #[serde(skip)]
    pub rest_ns_measured: f64,
    /// p99 of every request, ms, a failed one counting as a miss (past
    /// every answer: infinite when more than 1% failed); the family's
    /// scorecard compares it ([`crate::family`]).
    #[serde(skip)]
    pub p99_misses_ms: f64,
    /// One entry per second of the run.
    pub timeline: Vec<Second>,
    /// Open loop: the arrivals as intended and as sent (`null` in closed
    /// loop).
    pub open: Option<OpenStats>,
    /// Each backend's utilization over the measured window: its workers'
    /// busy time over the time they had (without a worker limit, the mean
    /// number of requests it served at once). Empty for the user's
    /// replicas (`[target]`): it cannot be measured from outside.
    pub utilization: Vec<f64>,
    /// The busiest backend's utilization over the mean of all of them (1:
    /// evenly loaded).
    pub util_max_mean: f64,
    /// A rival row (another crate's balancer, not one of tower-lb's
    /// pickers): what ran; `null` otherwise.
    pub rival: Option<String>,
    /// A peer row (a central proxy, not a picker): what ran; `null` for a
    /// picker's row.
    pub peer: Option<PeerInfo>,
    /// The route-step variant of this row (`[fleet] variants`), `null`
    /// without `[fleet]`.
    pub route: Option<String>,
    /// Connections, load, zones and priorities (`null` without `[fleet]`).
    pub fleet: Option<FleetStats>,
    /// Throughput per replica count and time to share of each join
    /// (`null` when no backend joins or leaves).
    pub membership: Option<Membership>,
    /// With `[load] connections`: how many backends each user reached
    /// (`null` otherwise).
    pub affinity: Option<Affinity>,
    /// `--discovery etcd`: each replica's registration and leave (`null`
    /// otherwise).
    pub etcd: Option<super::registry::EtcdRow>,
}

/// What a peer row ran.
#[derive(Debug, Clone, Serialize)]
pub struct PeerInfo {
    /// `nginx` or `haproxy`.
    pub proxy: String,
    /// Its version, as it reports it.
    pub version: String,
    /// The policy, as `--peers` names it (`least_conn`).
    pub policy: String,
    /// Keep-alive to the backends (`--peers nginx:keepalive=off`).
    pub keepalive: bool,
    /// `worker_connections` (nginx) or `maxconn` (haproxy) when set
    /// (`:conns=N`); `null`: the lab's default.
    pub conns: Option<u32>,
    /// The whole config file it ran (ports included).
    pub config: String,
}

/// Latency summary in ms.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
}

/// A probing picker's load probes over a row (`tower_lb::pick::prequal::ProbeCounts`).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LoadProbeReport {
    /// Load probes sent.
    pub sent: u64,
    /// Answered with a usable report.
    pub answered: u64,
    /// Failed, timed out, or answered without a report.
    pub failed: u64,
    /// Owed but not sent (bounds, or more than there are endpoints).
    pub dropped: u64,
    /// Picks made from the answers.
    pub pooled: u64,
    /// Picks made by the fallback picker.
    pub fallback: u64,
}

/// Open-loop arrivals of one row: intended against achieved.
#[derive(Debug, Clone, Serialize)]
pub struct OpenStats {
    /// Measured arrivals per second, as intended.
    pub rate: f64,
    /// Of those, sent before the window ended, per second.
    pub sent_rate: f64,
    /// 99th percentile of how late a request was sent behind its intended
    /// time, ms (its latency counts from the intended time).
    pub lag_p99_ms: f64,
    /// The latest send, ms.
    pub lag_max_ms: f64,
    /// Measured requests still unanswered when the drain ended (counted in
    /// the latency figures at the time they had waited).
    pub unfinished: u64,
}

/// One second of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    /// Seconds since the run started (this bucket covers `[t, t+1)`).
    pub t: u64,
    /// Requests completed in this second.
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Mean latency of the successful ones, ms (`null` if none).
    pub mean_ms: Option<f64>,
    /// Fraction of the attempts dispatched in this second, per backend.
    pub share: Vec<f64>,
}

impl Report {
    /// An empty report for `sc`.
    pub fn new(sc: &Scenario, sim: bool, seed: u64, duration_s: f64) -> Self {
        Self {
            schema: SCHEMA,
            scenario: sc.name.clone(),
            description: sc.description.clone(),
            mode: if sim { "sim" } else { "http" },
            seed,
            duration_s,
            users: sc.max_vus(),
            clients: sc.load.clients,
            arrival_rate: None,
            target_utilization: None,
            hash_key: match sc.load.connections {
                None => "x-forwarded-for",
                Some(crate::scenario::Connections::PerUser) => "connection per_user",
                Some(crate::scenario::Connections::PerRequest) => "connection per_request",
            },
            backends: sc
                .backends
                .iter()
                .map(|b| BackendInfo {
                    name: b.name.clone(),
                    // A target's replicas serve outside the lab.
                    delay: if sc.target.is_some() {
                        "unknown".to_string()
                    } else {
                        b.delay.to_string()
                    },
                    workers: b.workers,
                    weight: b.weight,
                    zone: b.zone.clone(),
                    priority: b.priority,
                })
                .collect(),
            notes: Vec::new(),
            runs: Vec::new(),
            summary: None,
        }
    }

    /// The run of `picker`, if it ran (its first variant's, with `[fleet]`).
    pub fn run(&self, picker: &str) -> Option<&PickerReport> {
        self.runs.iter().find(|r| r.picker == picker)
    }

    /// The JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A row's name as the table and the chart show it: `(w)` after a
    /// picker that saw the weights, `(peer)` after a proxy.
    pub fn row_name(&self, r: &PickerReport) -> String {
        let name = if r.peer.is_some() {
            crate::scenario::proxy::row_name(&r.picker)
        } else if r.rival.is_some() {
            match r.picker.parse::<crate::scenario::Rival>() {
                Ok(rival) => rival.row_name(),
                Err(()) => format!("{} (rival)", r.picker),
            }
        } else if r.weighted && self.backends.iter().any(|b| b.weight != 1.0) {
            format!("{} (w)", r.picker)
        } else {
            r.picker.clone()
        };
        match &r.route {
            Some(route) => format!("{name} [{route}]"),
            None => name,
        }
    }
}

/// Rounds to `digits` decimals (keeps the JSON short and readable).
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}
