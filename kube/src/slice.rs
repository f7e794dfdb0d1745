//! From EndpointSlices to targets: port selection, conditions, zone and
//! hints, and merging the slices of one Service.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};

use tower_lb::discover::{Target, TargetState};
use tower_lb::endpoint::{EndpointMeta, Locality};

/// The label that carries an endpoint's topology hints
/// (`hints.forZones`, comma-separated) until zone-aware routing reads them.
pub const HINTS_LABEL: &str = "kubernetes.io/hints-for-zones";

/// Which of a slice's ports the balancer dials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Port {
    /// The port with this name in the slice's `ports` (the Service port's
    /// name; `""` for a Service's single unnamed port).
    Name(String),
    /// The port with this number in the slice's `ports`: the pods' port
    /// (the Service's `targetPort`), not the Service's own port.
    Number(u16),
}

impl From<&str> for Port {
    fn from(name: &str) -> Self {
        Port::Name(name.to_owned())
    }
}

impl From<String> for Port {
    fn from(name: String) -> Self {
        Port::Name(name)
    }
}

impl From<u16> for Port {
    fn from(number: u16) -> Self {
        Port::Number(number)
    }
}

/// The port of `slice` that `want` selects, if it has one.
pub(super) fn select_port(slice: &EndpointSlice, want: &Port) -> Option<u16> {
    slice.ports.iter().flatten().find_map(|p| {
        let number = u16::try_from(p.port?).ok().filter(|&n| n != 0)?;
        let hit = match want {
            Port::Name(name) => p.name.as_deref().unwrap_or("") == name,
            Port::Number(n) => number == *n,
        };
        hit.then_some(number)
    })
}

/// An endpoint's state from its conditions (the API's rules: `ready` nil
/// means ready; `serving` nil defers to `ready`; `terminating` nil means
/// not terminating). Ready → serving; serving and terminating → draining
/// (kube-proxy's rule); anything else takes no traffic.
pub(super) fn state(endpoint: &Endpoint) -> Option<TargetState> {
    let c = endpoint.conditions.as_ref();
    let ready = c.and_then(|c| c.ready).unwrap_or(true);
    let serving = c.and_then(|c| c.serving).unwrap_or(ready);
    let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
    if ready && !terminating {
        Some(TargetState::Serving)
    } else if serving && terminating {
        Some(TargetState::Draining)
    } else {
        None
    }
}

/// The targets of one slice for `port`: each endpoint's first address
/// (the API lets consumers use only the first; kube-proxy does), with its
/// zone as locality and its zone hints as a label. Slices of address type
/// FQDN, addresses that are not IPs, and slices without the port give
/// nothing.
pub(super) fn targets(slice: &EndpointSlice, port: &Port) -> Vec<Target<SocketAddr>> {
    if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
        return Vec::new();
    }
    let Some(port) = select_port(slice, port) else {
        return Vec::new();
    };
    slice
        .endpoints
        .iter()
        .filter_map(|e| {
            let state = state(e)?;
            let ip: IpAddr = e.addresses.first()?.parse().ok()?;
            Some(
                Target::new(SocketAddr::new(ip, port))
                    .with_meta(meta(e))
                    .with_state(state),
            )
        })
        .collect()
}

fn meta(endpoint: &Endpoint) -> EndpointMeta {
    let mut meta = EndpointMeta::new();
    if let Some(zone) = endpoint.zone.as_deref().filter(|z| !z.is_empty()) {
        meta = meta.with_locality(Locality::in_zone(zone));
    }
    let zones: Vec<&str> = endpoint
        .hints
        .iter()
        .flat_map(|h| h.for_zones.iter().flatten())
        .map(|z| z.name.as_str())
        .collect();
    if !zones.is_empty() {
        meta = meta.with_label(HINTS_LABEL, zones.join(","));
    }
    meta
}

/// One desired set from all slices of the Service, in slice-name order.
/// During a rollout an address can sit in two slices at once: it is kept
/// once, serving if any slice says it serves.
pub(super) fn merge(slices: &BTreeMap<String, Vec<Target<SocketAddr>>>) -> Vec<Target<SocketAddr>> {
    let mut out: Vec<Target<SocketAddr>> = Vec::new();
    let mut at: HashMap<SocketAddr, usize> = HashMap::new();
    for t in slices.values().flatten() {
        match at.get(&t.addr) {
            Some(&i) => {
                if out[i].state == TargetState::Draining && t.state == TargetState::Serving {
                    out[i] = t.clone();
                }
            }
            None => {
                at.insert(t.addr, out.len());
                out.push(t.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{EndpointConditions, EndpointPort};
    use proptest::prelude::*;

    fn slice(endpoints: Vec<Endpoint>, ports: Vec<(Option<String>, Option<i32>)>) -> EndpointSlice {
        EndpointSlice {
            address_type: "IPv4".into(),
            endpoints,
            ports: Some(
                ports
                    .into_iter()
                    .map(|(name, port)| EndpointPort {
                        name,
                        port,
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    proptest! {
        /// Whatever a slice holds, mapping never panics, and every target
        /// dials the selected port on a parsed IP.
        #[test]
        fn any_slice_maps_without_panicking(
            eps in proptest::collection::vec((
                proptest::collection::vec("[0-9.:a-f]{0,16}|10\\.0\\.0\\.[0-9]{1,3}", 0..3),
                proptest::option::of(any::<bool>()),
                proptest::option::of(any::<bool>()),
                proptest::option::of(any::<bool>()),
            ), 0..8),
            ports in proptest::collection::vec((proptest::option::of("http|grpc|"), proptest::option::of(any::<i32>())), 0..4),
        ) {
            let endpoints = eps.into_iter().map(|(addresses, ready, serving, terminating)| Endpoint {
                addresses,
                conditions: Some(EndpointConditions { ready, serving, terminating }),
                ..Default::default()
            }).collect();
            let s = slice(endpoints, ports);
            let want = select_port(&s, &Port::from("http"));
            for t in targets(&s, &Port::from("http")) {
                prop_assert_eq!(Some(t.addr.port()), want);
                prop_assert!(t.addr.port() != 0);
            }
        }
    }

    #[test]
    fn conditions_follow_the_api_rules() {
        let e = |ready, serving, terminating| Endpoint {
            conditions: Some(EndpointConditions {
                ready,
                serving,
                terminating,
            }),
            ..Default::default()
        };
        assert_eq!(
            state(&e(None, None, None)),
            Some(TargetState::Serving),
            "nil ready is ready"
        );
        assert_eq!(
            state(&e(Some(false), Some(true), Some(true))),
            Some(TargetState::Draining)
        );
        assert_eq!(
            state(&e(Some(false), None, Some(true))),
            None,
            "nil serving defers to ready"
        );
        assert_eq!(state(&e(Some(false), Some(false), None)), None);
    }
}
