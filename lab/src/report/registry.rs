//! What the table shows of a `--discovery etcd` run (JSON
//! `runs[].etcd`): per replica, when it registered, when the balancers had
//! it and first sent it a request, and, for one that left, when its key
//! went (revoked, or its lease expired) and when the balancers dropped it.
//! Times are seconds of the measured window, as the timeline's.

use std::fmt::Write as _;

use serde::Serialize;

use super::document::Report;

/// One row's etcd events.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EtcdRow {
    /// The key prefix the row's replicas registered under.
    pub target: String,
    /// Their lease TTL, s.
    pub ttl_s: f64,
    /// One entry per backend that registered.
    pub replicas: Vec<Registered>,
    /// Registrations that failed, and watches that ended early.
    pub errors: Vec<String>,
}

/// A replica's registration, and its leave if it left.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Registered {
    /// The backend's name.
    pub backend: String,
    /// Its registration was sent (the lease grant and the key's put; kept
    /// once both succeeded).
    pub registered_s: Option<f64>,
    /// Every client balancer had it (through its etcd watch); for a
    /// rival, when its `Discover` stream was sent the insertion.
    pub in_pool_s: Option<f64>,
    /// A balancer first sent it a request (tower-lb's rows: polled every
    /// 5 ms; `null` for a rival).
    pub first_pick_s: Option<f64>,
    /// `crash` (its lease left to expire) or `revoke` (a `leave`: the
    /// lease revoked); `null` for a replica that stayed.
    pub leave: Option<String>,
    /// The crash, or the revoke, happened.
    pub left_s: Option<f64>,
    /// etcd deleted its key (the lease expired or was revoked), as a watch
    /// of the prefix saw it.
    pub key_deleted_s: Option<f64>,
    /// No client balancer had it any more.
    pub out_of_pool_s: Option<f64>,
}

/// The table's etcd block: per row, each replica's events.
pub fn table(r: &Report, out: &mut String) {
    let rows: Vec<_> = r
        .runs
        .iter()
        .filter_map(|x| x.etcd.as_ref().map(|e| (r.row_name(x), e)))
        .collect();
    let Some((_, first)) = rows.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "\netcd (leases of {:.0} s; s of the measured window): registered → in pool → first request; left → key deleted → out of pool",
        first.ttl_s
    );
    let w = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .fold(10, usize::max);
    for (name, e) in rows {
        let events: Vec<String> = e.replicas.iter().filter_map(line).collect();
        let _ = writeln!(out, "{name:<w$}  {}", events.join("; "));
        for err in &e.errors {
            let _ = writeln!(out, "{:<w$}  error: {err}", "");
        }
    }
}

/// A replica's events, when it joined after the start or left.
fn line(x: &Registered) -> Option<String> {
    let t = |s: Option<f64>| s.map_or_else(|| "-".to_string(), |s| format!("{s:.2}"));
    let joined = x.registered_s.is_some_and(|s| s > 0.5);
    let mut parts = Vec::new();
    if joined {
        parts.push(format!(
            "joined {} → {} → {}",
            t(x.registered_s),
            t(x.in_pool_s),
            t(x.first_pick_s)
        ));
    }
    if let Some(how) = &x.leave {
        parts.push(format!(
            "{how} {} → {} → {}",
            t(x.left_s),
            t(x.key_deleted_s),
            t(x.out_of_pool_s)
        ));
    }
    (!parts.is_empty()).then(|| format!("{} {}", x.backend, parts.join(", ")))
}
