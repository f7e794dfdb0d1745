//! `[[resource]]`: something every backend that lists it in `uses` shares,
//! such as a database's connection pool. A request takes one slot of each
//! resource its backend uses, holds it for `hold`, and fails with `status`
//! when no slot frees within `wait`. The pool then saturates at the
//! resource, `slots / hold` requests per second, however many replicas
//! there are.

use serde::Deserialize;

use super::backend::BackendSpec;
use super::units::Dur;

/// The most slots a resource may have (a pool of a million connections is
/// a typo).
pub const MAX_SLOTS: u32 = 1_000_000;

/// A status for a request that found no free slot: HikariCP's
/// `SQLTransientConnectionException` surfaces as a 500 in a Spring Boot
/// service (the published write-up saw 409, 500, 502 and 504).
pub const DEFAULT_STATUS: u16 = 500;

/// One `[[resource]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// Its name, as backends list it in `uses`.
    pub name: String,
    /// Requests it serves at once (a pool's connections).
    pub slots: u32,
    /// How long a request holds its slot.
    pub hold: Dur,
    /// How long a request waits for a free slot before it fails
    /// (HikariCP's `connectionTimeout`). Absent: it waits as long as it
    /// takes.
    #[serde(default)]
    pub wait: Option<Dur>,
    /// The status of a request that waited in vain (default 500).
    #[serde(default = "default_status")]
    pub status: u16,
}

fn default_status() -> u16 {
    DEFAULT_STATUS
}

impl ResourceSpec {
    /// Requests per second it can serve: `slots / hold`.
    pub fn capacity(&self) -> f64 {
        f64::from(self.slots) / self.hold.0.as_secs_f64()
    }
}

/// Checks the resources and the backends' `uses`.
pub fn validate(res: &[ResourceSpec], backends: &[BackendSpec]) -> Result<(), (String, String)> {
    for (i, r) in res.iter().enumerate() {
        let f = |x: &str| format!("resource[{i}].{x}");
        if res[..i].iter().any(|o| o.name == r.name) {
            return Err((f("name"), format!("duplicate resource name \"{}\"", r.name)));
        }
        if !(1..=MAX_SLOTS).contains(&r.slots) {
            return Err((f("slots"), format!("{} is not in 1..={MAX_SLOTS}", r.slots)));
        }
        if r.hold.0.is_zero() {
            return Err((f("hold"), "must be > 0".into()));
        }
        if r.wait.is_some_and(|w| w.0.is_zero()) {
            return Err((
                f("wait"),
                "must be > 0 (omit it to wait without a limit)".into(),
            ));
        }
        if !(400..=599).contains(&r.status) {
            return Err((
                f("status"),
                format!("{} is not an error status (400..=599)", r.status),
            ));
        }
    }
    for (i, b) in backends.iter().enumerate() {
        for (j, u) in b.uses.iter().enumerate() {
            if !res.iter().any(|r| &r.name == u) {
                let names: Vec<&str> = res.iter().map(|r| r.name.as_str()).collect();
                return Err((
                    format!("backend[{i}].uses[{j}]"),
                    format!(
                        "no [[resource]] named \"{u}\" (declared: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    Ok(())
}
