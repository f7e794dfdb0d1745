//! From answers to targets: address dedupe, SRV priority ranking and
//! weights, and when to ask again.

use std::collections::{BTreeSet, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use super::SrvRecord;
use crate::discover::Target;
use crate::model::EndpointMeta;

/// The endpoint weight of an SRV record with weight 0. RFC 2782: such
/// records "SHOULD have a very small chance of being selected" when others
/// have weight > 0; 1/100 of a weight-1 record is that, and records that
/// all have weight 0 still share evenly.
pub const SRV_ZERO_WEIGHT: f64 = 0.01;

/// The label an SRV-discovered endpoint carries its target name in.
pub const SRV_TARGET_LABEL: &str = "dns.srv.target";

/// Plain answers: each address once, in the resolver's order (the
/// insertion order round robin follows), weight 1.
pub(super) fn host_targets(addrs: Vec<SocketAddr>) -> Vec<Target<SocketAddr>> {
    let mut seen = HashSet::with_capacity(addrs.len());
    addrs
        .into_iter()
        .filter(|a| seen.insert(*a))
        .map(Target::new)
        .collect()
}

/// The priority level of each SRV priority: its rank among the distinct
/// priorities present (10, 20, 20, 50 → 0, 1, 1, 2), so that levels are
/// contiguous from 0 as Envoy's priorities are.
pub(super) fn priority_rank(records: &[SrvRecord], priority: u16) -> u32 {
    let levels: BTreeSet<u16> = records.iter().map(|r| r.priority).collect();
    let below = levels.range(..priority).count();
    u32::try_from(below).unwrap_or(u32::MAX)
}

/// The targets of one SRV record whose target resolved to `addrs`.
pub(super) fn srv_targets(
    records: &[SrvRecord],
    record: &SrvRecord,
    addrs: &[SocketAddr],
) -> impl Iterator<Item = Target<SocketAddr>> {
    let weight = match record.weight {
        0 => SRV_ZERO_WEIGHT,
        w => f64::from(w),
    };
    let meta = EndpointMeta::new()
        .with_priority(priority_rank(records, record.priority))
        .with_label(SRV_TARGET_LABEL, record.target.clone());
    addrs.iter().map(move |a| {
        Target::new(SocketAddr::new(a.ip(), record.port))
            .with_weight(weight)
            .with_meta(meta.clone())
    })
}

/// Records in the order they are applied: by priority, then the
/// resolver's order; one per (target, port). A target of `.` ("no such
/// service here", RFC 2782) or port 0 is dropped.
pub(super) fn srv_order(mut records: Vec<SrvRecord>) -> Vec<SrvRecord> {
    records.retain(|r| r.port != 0 && !matches!(r.target.as_str(), "" | "."));
    records.sort_by_key(|r| r.priority);
    let mut seen = HashSet::new();
    records.retain(|r| seen.insert((r.target.to_ascii_lowercase(), r.port)));
    records
}

/// How long to wait before the next resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refresh {
    pub(super) interval: Duration,
    pub(super) respect_ttl: bool,
    pub(super) min_ttl: Duration,
    pub(super) max_ttl: Duration,
}

impl Refresh {
    /// Whether `ttl` decides the next round.
    pub(super) fn uses_ttl(&self, ttl: Option<Duration>) -> bool {
        self.respect_ttl && ttl.is_some()
    }

    /// The TTL clamped to `[min_ttl, max_ttl]` when it is known and
    /// respected, else the interval.
    pub(super) fn after(&self, ttl: Option<Duration>) -> Duration {
        match ttl {
            Some(ttl) if self.respect_ttl => ttl.clamp(self.min_ttl, self.max_ttl),
            _ => self.interval,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(priority: u16, weight: u16, port: u16, target: &str) -> SrvRecord {
        SrvRecord {
            priority,
            weight,
            port,
            target: target.into(),
        }
    }

    #[test]
    fn srv_weights_ports_and_ranked_priorities() {
        let records = srv_order(vec![
            rec(20, 0, 81, "b."),
            rec(10, 5, 80, "a."),
            rec(10, 9, 80, "A."),
        ]);
        assert_eq!(records.len(), 2, "one per target and port");
        let ip: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let a: Vec<_> = srv_targets(&records, &records[0], &[ip]).collect();
        assert_eq!(a[0].addr, "10.0.0.1:80".parse().unwrap());
        assert_eq!((a[0].weight, a[0].meta.priority()), (5.0, 0));
        let b: Vec<_> = srv_targets(&records, &records[1], &[ip]).collect();
        assert_eq!((b[0].weight, b[0].meta.priority()), (SRV_ZERO_WEIGHT, 1));
        assert_eq!(b[0].meta.labels()[SRV_TARGET_LABEL], "b.");
    }

    #[test]
    fn ttl_is_clamped_only_when_respected() {
        let r = Refresh {
            interval: Duration::from_secs(7),
            respect_ttl: true,
            min_ttl: Duration::from_secs(5),
            max_ttl: Duration::from_secs(30),
        };
        assert_eq!(r.after(None), Duration::from_secs(7));
        assert_eq!(r.after(Some(Duration::ZERO)), Duration::from_secs(5));
        assert_eq!(
            r.after(Some(Duration::from_secs(12))),
            Duration::from_secs(12)
        );
        assert_eq!(
            r.after(Some(Duration::from_secs(3600))),
            Duration::from_secs(30)
        );
        let fixed = Refresh {
            respect_ttl: false,
            ..r
        };
        assert_eq!(
            fixed.after(Some(Duration::from_secs(12))),
            Duration::from_secs(7)
        );
    }

    proptest! {
        #[test]
        fn ranks_are_contiguous_and_ordered(ps in proptest::collection::vec(any::<u16>(), 1..20)) {
            let records: Vec<_> = ps.iter().map(|&p| rec(p, 1, 1, "t.")).collect();
            let levels: BTreeSet<u16> = ps.iter().copied().collect();
            for r in &records {
                let rank = priority_rank(&records, r.priority);
                prop_assert!((rank as usize) < levels.len());
                for o in &records {
                    prop_assert_eq!(r.priority < o.priority, rank < priority_rank(&records, o.priority));
                }
            }
        }
    }
}
