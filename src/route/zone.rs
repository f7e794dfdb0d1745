//! The locality split within one level: Envoy's zone-aware rule, and
//! locality weights.

use super::priority::Count;

/// Envoy's default `min_cluster_size`: below 6 healthy endpoints in a
/// level, zone-aware routing is off and picks use the whole level.
pub const DEFAULT_MIN_CLUSTER_SIZE: usize = 6;

/// Where the calling balancer stands among its fleet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller {
    /// The caller's zone, as an index into the level's zones (`None` when
    /// the level has no endpoint there).
    pub(crate) zone: Option<usize>,
    /// The callers' share in that zone, in `(0, 1]`.
    pub(crate) share: f64,
    /// Zones in which there are callers at all.
    pub(crate) zones: usize,
}

/// Envoy's zone-aware rule for one level: the share of the level's traffic
/// each of its zones takes, given the caller, the callers' share in each of
/// the level's zones (`callers[z]`, from a distribution summing to 1) and
/// each zone's healthy endpoint count. `None` when the rule is off for this
/// level: fewer healthy endpoints than `min_cluster_size`, or fewer than two
/// zones with healthy endpoints or with callers.
pub(crate) fn zone_aware(
    caller: Caller,
    callers: &[f64],
    healthy: &[usize],
    min_cluster_size: usize,
) -> Option<Vec<f64>> {
    let total: usize = healthy.iter().sum();
    let with_endpoints = healthy.iter().filter(|&&h| h > 0).count();
    if total == 0 || total < min_cluster_size || with_endpoints < 2 || caller.zones < 2 {
        return None;
    }
    let upstream: Vec<f64> = healthy.iter().map(|&h| h as f64 / total as f64).collect();
    let mut share = vec![0.0; healthy.len()];
    let (local, here) = (caller.zone, caller.share);
    let mut local_share = 0.0;
    if let Some(l) = local {
        if upstream[l] > 0.0 && upstream[l] >= here {
            // The local zone can take all of its callers' traffic.
            share[l] = 1.0;
            return Some(share);
        }
        if here > 0.0 {
            local_share = upstream[l] / here;
            share[l] = local_share;
        }
    }
    // The rest goes to zones with more endpoints than callers, in
    // proportion to that surplus.
    let surplus: Vec<f64> = (0..healthy.len())
        .map(|z| {
            if Some(z) == local {
                0.0
            } else {
                (upstream[z] - callers[z]).max(0.0)
            }
        })
        .collect();
    let (total_surplus, basis) = match surplus.iter().sum::<f64>() {
        s if s > 0.0 => (s, &surplus),
        // Only rounding can leave no surplus: spread by endpoints.
        _ => (1.0, &upstream),
    };
    for (z, s) in share.iter_mut().enumerate() {
        if Some(z) != local {
            *s = (1.0 - local_share) * basis[z] / total_surplus;
        }
    }
    Some(share)
}

/// Envoy's locality-weighted split of one level: each locality's weight
/// times its availability `min(100, ⌊factor% · healthy / total⌋)`, as
/// shares. `None` when every locality's effective weight is 0.
pub(crate) fn weighted(localities: &[(f64, Count)], factor_percent: u64) -> Option<Vec<f64>> {
    let eff: Vec<f64> = localities
        .iter()
        .map(|(w, c)| w * c.score(factor_percent) as f64)
        .collect();
    let total: f64 = eff.iter().sum();
    (total > 0.0).then(|| eff.iter().map(|e| e / total).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn locality_weights_follow_envoys_table() {
        // X weight 1, Y weight 2 (100% healthy); X's healthy share varies.
        for (x_healthy, x_share) in [
            (100, 1.0 / 3.0),
            (70, 98.0 / 298.0),
            (69, 96.0 / 296.0),
            (50, 70.0 / 270.0),
            (25, 35.0 / 235.0),
            (0, 0.0),
        ] {
            let s = weighted(
                &[
                    (
                        1.0,
                        Count {
                            healthy: x_healthy,
                            total: 100,
                        },
                    ),
                    (
                        2.0,
                        Count {
                            healthy: 100,
                            total: 100,
                        },
                    ),
                ],
                140,
            )
            .unwrap();
            assert!(close(&s, &[x_share, 1.0 - x_share]), "{x_healthy}: {s:?}");
            // Envoy's published percentages: 33, 33, 32, 26, 15, 0.
            assert!((s[0] * 100.0).round() <= 33.0);
        }
        let dead = Count {
            healthy: 0,
            total: 1,
        };
        assert_eq!(weighted(&[(1.0, dead), (2.0, dead)], 140), None);
    }

    /// The caller in zone `z` of a distribution `callers`.
    fn caller(z: Option<usize>, share: f64, zones: usize) -> Caller {
        Caller {
            zone: z,
            share,
            zones,
        }
    }

    #[test]
    fn zone_aware_keeps_what_the_local_zone_can_take() {
        // Callers 50/30/20, endpoints 34/33/33 (of 100), caller in each zone.
        let callers = [0.5, 0.3, 0.2];
        let healthy = [34, 33, 33];
        let at = |z: usize| zone_aware(caller(Some(z), callers[z], 3), &callers, &healthy, 6);
        // 0.34 / 0.5 stays; the residual 0.32 goes to zones b (surplus 3)
        // and c (surplus 13) in proportion.
        let a = at(0).unwrap();
        assert!(
            close(&a, &[0.68, 0.32 * 3.0 / 16.0, 0.32 * 13.0 / 16.0]),
            "{a:?}"
        );
        assert_eq!(at(1).unwrap(), [0.0, 1.0, 0.0]);
        assert_eq!(at(2).unwrap(), [0.0, 0.0, 1.0]);
    }

    #[test]
    fn zone_aware_is_off_for_small_or_single_zone_levels() {
        let c = caller(Some(0), 0.5, 2);
        assert_eq!(zone_aware(c, &[0.5, 0.5], &[2, 3], 6), None);
        assert_eq!(zone_aware(c, &[0.5, 0.5], &[6, 0], 6), None);
        assert_eq!(
            zone_aware(caller(Some(0), 1.0, 1), &[1.0, 0.0], &[3, 3], 6),
            None
        );
        assert!(zone_aware(c, &[0.5, 0.5], &[3, 3], 6).is_some());
    }

    #[test]
    fn an_empty_local_zone_sends_everything_to_the_surplus() {
        // No healthy endpoint in the caller's zone: all of it crosses, by
        // surplus (0.75 - 0.25 = 0.5 in zone 1, none in zone 2).
        let callers = [0.5, 0.25, 0.25];
        let s = zone_aware(caller(Some(0), 0.5, 3), &callers, &[0, 6, 2], 1).unwrap();
        assert!(close(&s, &[0.0, 1.0, 0.0]), "{s:?}");
        // The level has no endpoint in the caller's zone at all: same rule.
        let s = zone_aware(caller(None, 0.5, 3), &[0.25, 0.25], &[6, 2], 1).unwrap();
        assert!(close(&s, &[1.0, 0.0]), "{s:?}");
    }
}
