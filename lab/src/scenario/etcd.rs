//! `[etcd]`: the scenario's settings for `--discovery etcd` (read only
//! then): the replicas' lease TTL, and the replicas that crash.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::backend::BackendSpec;
use super::units::Dur;

/// Default lease TTL: 2 s, etcd's smallest with its default timings
/// (1.5 × its 1 s election timeout, rounded up), so a crashed replica
/// leaves as soon as etcd lets it.
pub const DEFAULT_TTL: Duration = Duration::from_secs(2);

/// Longest TTL: a minute; a lease longer than the run would never expire
/// in it.
pub const MAX_TTL: Duration = Duration::from_secs(60);

/// `[etcd]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdSpec {
    /// Each replica's lease TTL (default [`DEFAULT_TTL`]; 1 s to 60 s).
    #[serde(default = "default_ttl")]
    pub ttl: Dur,
    /// Backend name → when it crashes (from the row's start): its lease
    /// stops being renewed and is never revoked, so it leaves every pool
    /// when the lease expires. Its server keeps answering: what dies is
    /// its registration, as when a replica hangs or loses etcd.
    #[serde(default)]
    pub crash: BTreeMap<String, Dur>,
}

fn default_ttl() -> Dur {
    Dur(DEFAULT_TTL)
}

impl Default for EtcdSpec {
    fn default() -> Self {
        Self {
            ttl: default_ttl(),
            crash: BTreeMap::new(),
        }
    }
}

impl EtcdSpec {
    /// Checks the TTL and that each crash names a backend, after its join
    /// and with no `leave` of its own.
    pub fn validate(&self, backends: &[BackendSpec]) -> Result<(), (String, String)> {
        let ttl = self.ttl.0;
        if ttl < Duration::from_secs(1) || ttl > MAX_TTL {
            return Err((
                "etcd.ttl".into(),
                format!("{ttl:?} is not from 1 s to 60 s"),
            ));
        }
        for (name, at) in &self.crash {
            let field = format!("etcd.crash.{name}");
            let Some(b) = backends.iter().find(|b| &b.name == name) else {
                return Err((field, "no backend has this name".into()));
            };
            if b.leave.is_some() {
                return Err((field, "this backend has a `leave` already".into()));
            }
            if at.0 <= b.join.map_or(Duration::ZERO, |j| j.0) {
                return Err((field, "must come after the start and after its join".into()));
            }
        }
        Ok(())
    }

    /// The backends' indices that crash, and `backends` with each crash as
    /// the backend's `leave` (so the membership phases and leaves count it
    /// there).
    pub fn crashes(&self, backends: &mut [BackendSpec]) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, b) in backends.iter_mut().enumerate() {
            if let Some(at) = self.crash.get(&b.name) {
                b.leave = Some(*at);
                out.push(i);
            }
        }
        out
    }
}
