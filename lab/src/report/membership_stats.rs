//! What the table shows of scale-out: throughput per replica count, and
//! how long each picker takes to give a new replica its share (JSON
//! `runs[].membership`). The joins and leaves themselves are applied by
//! [`crate::run::joins`].
//!
//! **Time to share.** For a replica that joins at `t` (measured time), the
//! first whole second `[k, k+1)` of the timeline with `k ≥ t` in which its
//! share of the picks reaches [`SHARE_REACHED`] (80%) of its fair share
//! (its weight over the members' total weight, as its picker sees the
//! weights), counted from `t` to the end of that second: `k + 1 − t`.
//! "never" when no second before the next membership change (or the
//! row's end) reaches it.

use std::fmt::Write as _;

use super::document::{PickerReport, Report, round};
use super::sections::{Join, Membership, MembershipPhase};
use crate::scenario::Scenario;
use crate::scenario::membership::{Change, changes, initial};

/// The share of its fair share a new replica must reach.
pub const SHARE_REACHED: f64 = 0.8;

/// The row's membership numbers; `None` when nothing joins or leaves.
pub fn stats(sc: &Scenario, r: &PickerReport) -> Option<Membership> {
    let all = changes(&sc.backends);
    if all.is_empty() {
        return None;
    }
    let warm = sc.load.warmup.0.as_secs_f64();
    let len = r.timeline.len() as f64;
    let at = |c: &Change| c.at.as_secs_f64() - warm;
    let weight = |i: usize| {
        if r.weighted {
            sc.backends[i].weight
        } else {
            1.0
        }
    };
    let mut members = initial(&sc.backends);
    // Changes before the measured window shape its first members; changes
    // at the same time count as one.
    let mut cuts = vec![0.0];
    let mut sets = Vec::new();
    let mut joins = Vec::new();
    for group in all.chunk_by(|a, b| a.at == b.at) {
        let t = at(&group[0]);
        if t > 0.0 && t < len {
            sets.push(members.clone());
            cuts.push(t);
        }
        for c in group {
            members[c.idx] = c.join;
        }
        if !(0.0..len).contains(&t) {
            continue;
        }
        let total: f64 = (0..members.len()).filter(|&i| members[i]).map(weight).sum();
        let until = all
            .iter()
            .map(at)
            .find(|&n| n > t)
            .map_or(len, |n| n.min(len));
        for c in group.iter().filter(|c| c.join) {
            let fair = weight(c.idx) / total;
            let reached = (t.ceil() as usize..until.floor() as usize)
                .find(|&s| {
                    r.timeline[s].share.get(c.idx).copied().unwrap_or(0.0) >= SHARE_REACHED * fair
                })
                .map(|s| round(s as f64 + 1.0 - t, 3));
            joins.push(Join {
                backend: sc.backends[c.idx].name.clone(),
                at_s: round(t, 3),
                fair_share: round(fair, 4),
                time_to_share_s: reached,
            });
        }
    }
    sets.push(members);
    cuts.push(len);
    let phases = sets
        .iter()
        .enumerate()
        .filter_map(|(k, set)| {
            let (from, to) = (cuts[k].ceil() as u64, cuts[k + 1].floor() as u64);
            (to > from).then(|| {
                let secs = &r.timeline[from as usize..to as usize];
                let n: u64 = secs.iter().map(|s| s.requests).sum();
                let errors: u64 = secs.iter().map(|s| s.errors).sum();
                let per_s = |x: u64| round(x as f64 / (to - from) as f64, 2);
                MembershipPhase {
                    from_s: from,
                    to_s: to,
                    replicas: set.iter().filter(|m| **m).count(),
                    rps: per_s(n),
                    ok_rps: per_s(n - errors),
                }
            })
        })
        .collect();
    Some(Membership { phases, joins })
}

/// The table's scale-out block: per row, throughput per phase (replicas in
/// brackets) and each join's time to share.
pub fn table(r: &Report, out: &mut String) {
    let rows: Vec<_> = r
        .runs
        .iter()
        .filter_map(|x| x.membership.as_ref().map(|m| (r.row_name(x), x, m)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let w = rows
        .iter()
        .map(|(n, _, _)| n.chars().count())
        .fold(22, usize::max);
    let _ = writeln!(
        out,
        "\n{:<w$}  {:<44}  time to share (80% of fair, per join)",
        "scale-out", "RPS ok/all per phase (replicas)"
    );
    for (name, x, m) in rows {
        let phases: Vec<String> = m
            .phases
            .iter()
            .map(|p| format!("{:.0}/{:.0} ({})", p.ok_rps, p.rps, p.replicas))
            .collect();
        let joins: Vec<String> = m
            .joins
            .iter()
            .map(|j| match j.time_to_share_s {
                Some(s) => format!("{} {s:.1} s", j.backend),
                None => format!("{} never", j.backend),
            })
            .collect();
        let why = match &x.rival {
            Some(_) => " (joins through its Discover stream)",
            None => "",
        };
        let _ = writeln!(
            out,
            "{name:<w$}  {:<44}  {}{why}",
            phases.join(" / "),
            joins.join(", ")
        );
    }
}
