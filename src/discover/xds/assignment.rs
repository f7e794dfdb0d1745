//! From a `ClusterLoadAssignment` to targets, validating what Envoy
//! validates: a resource that fails is NACKed whole.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

use envoy_types::pb::envoy::config::core::v3::HealthStatus;
use envoy_types::pb::envoy::config::core::v3::address::Address;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, LbEndpoint};

use crate::discover::{Target, TargetState};
use crate::model::{EndpointMeta, Locality};

/// The label naming the cluster an xDS endpoint came from.
pub const CLUSTER_LABEL: &str = "xds.cluster";

/// Why an assignment cannot be applied (the NACK's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub(super) String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

fn invalid(cluster: &str, what: impl fmt::Display) -> Invalid {
    Invalid(format!("cluster {cluster:?}: {what}"))
}

/// An endpoint's state from its `health_status`: HEALTHY and UNKNOWN take
/// traffic (Envoy and gRPC agree); DRAINING drains. DEGRADED drains too:
/// Envoy sends a degraded host traffic only when the healthy ones fall
/// short, and a draining member is exactly that fallback here (picked only
/// when no member serves). UNHEALTHY and TIMEOUT take none.
pub(super) fn state(health_status: i32) -> Option<TargetState> {
    match HealthStatus::try_from(health_status).unwrap_or(HealthStatus::Unknown) {
        HealthStatus::Unknown | HealthStatus::Healthy => Some(TargetState::Serving),
        HealthStatus::Draining | HealthStatus::Degraded => Some(TargetState::Draining),
        HealthStatus::Unhealthy | HealthStatus::Timeout => None,
    }
}

/// The endpoint's socket address: an IP literal and a port in 1..=65535
/// (EDS carries resolved addresses; named ports, pipes and internal
/// addresses are not dialable here).
fn socket_addr(cluster: &str, e: &LbEndpoint) -> Result<SocketAddr, Invalid> {
    let Some(HostIdentifier::Endpoint(endpoint)) = &e.host_identifier else {
        return Err(invalid(cluster, "an lb_endpoint without an endpoint"));
    };
    let Some(Address::SocketAddress(sa)) =
        endpoint.address.as_ref().and_then(|a| a.address.as_ref())
    else {
        return Err(invalid(cluster, "an endpoint without a socket address"));
    };
    let ip: IpAddr = sa.address.parse().map_err(|_| {
        invalid(
            cluster,
            format_args!("address {:?} is not an IP", sa.address),
        )
    })?;
    let port = match sa.port_specifier {
        Some(PortSpecifier::PortValue(p)) => u16::try_from(p).ok().filter(|&p| p != 0),
        _ => None,
    };
    let port = port.ok_or_else(|| {
        invalid(
            cluster,
            format_args!("endpoint {ip} has no port in 1..=65535"),
        )
    })?;
    Ok(SocketAddr::new(ip, port))
}

/// The targets of one assignment, in its order. Errors on what Envoy
/// rejects too: a weight of 0 (endpoint or locality), priorities that skip
/// a level, and addresses that are not `ip:port`.
pub(super) fn targets(cla: &ClusterLoadAssignment) -> Result<Vec<Target<SocketAddr>>, Invalid> {
    let cluster = cla.cluster_name.as_str();
    let levels: BTreeSet<u32> = cla.endpoints.iter().map(|l| l.priority).collect();
    if let Some((i, p)) = levels
        .iter()
        .enumerate()
        .find(|&(i, &p)| u64::from(p) != i as u64)
    {
        return Err(invalid(
            cluster,
            format_args!("priority {p} skips level {i}"),
        ));
    }
    let mut out = Vec::new();
    for l in &cla.endpoints {
        let mut meta = EndpointMeta::new()
            .with_priority(l.priority)
            .with_label(CLUSTER_LABEL, cluster);
        if let Some(loc) = &l.locality {
            meta = meta.with_locality(Locality::new(&loc.region, &loc.zone, &loc.sub_zone));
        }
        if let Some(w) = &l.load_balancing_weight {
            if w.value == 0 {
                return Err(invalid(cluster, "a locality with load_balancing_weight 0"));
            }
            meta = meta.with_locality_weight(w.value);
        }
        for e in &l.lb_endpoints {
            let addr = socket_addr(cluster, e)?;
            let weight = e.load_balancing_weight.as_ref().map_or(1, |w| w.value);
            if weight == 0 {
                return Err(invalid(
                    cluster,
                    format_args!("endpoint {addr} has load_balancing_weight 0"),
                ));
            }
            if let Some(state) = state(e.health_status) {
                out.push(
                    Target::new(addr)
                        .with_weight(f64::from(weight))
                        .with_meta(meta.clone())
                        .with_state(state),
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use prost::Message;

    proptest! {
        /// Any bytes a peer sends either fail to decode or map (or are
        /// rejected) without panicking; accepted targets have real ports
        /// and positive weights.
        #[test]
        fn any_resource_maps_or_is_rejected(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(cla) = ClusterLoadAssignment::decode(bytes.as_slice())
                && let Ok(targets) = targets(&cla)
            {
                for t in targets {
                    prop_assert!(t.addr.port() != 0 && t.weight >= 1.0);
                }
            }
        }
    }

    #[test]
    fn health_status_mapping() {
        assert_eq!(
            state(HealthStatus::Healthy as i32),
            Some(TargetState::Serving)
        );
        assert_eq!(
            state(HealthStatus::Unknown as i32),
            Some(TargetState::Serving)
        );
        assert_eq!(
            state(HealthStatus::Draining as i32),
            Some(TargetState::Draining)
        );
        assert_eq!(
            state(HealthStatus::Degraded as i32),
            Some(TargetState::Draining)
        );
        assert_eq!(state(HealthStatus::Unhealthy as i32), None);
        assert_eq!(state(HealthStatus::Timeout as i32), None);
        assert_eq!(
            state(99),
            Some(TargetState::Serving),
            "an unknown value is UNKNOWN"
        );
    }
}
