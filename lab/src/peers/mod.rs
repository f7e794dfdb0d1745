//! Peers: the central proxies a user would run instead of client-side
//! balancing (nginx, haproxy), driven by the same users against the same
//! backends, one row per proxy and policy.
//!
//! A peer row is not a picker: it has its own list (`--peers`, or a
//! scenario's `peers`), runs only in http mode, and its report carries a
//! [`PeerInfo`](super::report::PeerInfo).

pub mod binary;
pub mod config;
pub mod process;
pub mod run;

use std::fmt;
use std::str::FromStr;

use serde::de;
use serde::{Deserialize, Deserializer};

/// A central proxy the lab can run beside tower-lb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proxy {
    /// nginx (`upstream` block, `proxy_pass`).
    Nginx,
    /// HAProxy (`mode http`, a `backend` section).
    Haproxy,
}

impl Proxy {
    /// Every proxy, in table order.
    pub const ALL: [Proxy; 2] = [Proxy::Nginx, Proxy::Haproxy];

    /// Its name on the command line and in the table; also its binary's name.
    pub fn name(self) -> &'static str {
        match self {
            Proxy::Nginx => "nginx",
            Proxy::Haproxy => "haproxy",
        }
    }

    /// The Debian/Ubuntu package that installs it.
    pub fn package(self) -> &'static str {
        match self {
            Proxy::Nginx => "nginx-light",
            Proxy::Haproxy => "haproxy",
        }
    }
}

impl fmt::Display for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A balancing policy, as each proxy writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// nginx's default; haproxy `balance roundrobin`.
    RoundRobin,
    /// nginx `least_conn`; haproxy `balance leastconn`.
    LeastConn,
    /// nginx `random two least_conn`; haproxy `balance random(2)`.
    RandomTwo,
    /// The client IP in `X-Forwarded-For` on a consistent-hash ring: nginx
    /// `hash $http_x_forwarded_for consistent`; haproxy
    /// `balance hdr(X-Forwarded-For)` with `hash-type consistent`.
    Hash,
}

impl Policy {
    /// Every policy, in table order.
    pub const ALL: [Policy; 4] = [
        Policy::RoundRobin,
        Policy::LeastConn,
        Policy::RandomTwo,
        Policy::Hash,
    ];

    /// Its name after `proxy:` on the command line.
    pub fn token(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round_robin",
            Policy::LeastConn => "least_conn",
            Policy::RandomTwo => "random_two",
            Policy::Hash => "hash",
        }
    }
}

/// One peer row: a proxy with one policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The proxy.
    pub proxy: Proxy,
    /// Its balancing policy.
    pub policy: Policy,
}

impl Peer {
    /// The row's name, in the proxy's own words (`nginx least_conn`).
    pub fn label(self) -> String {
        let policy = match (self.proxy, self.policy) {
            (Proxy::Nginx, Policy::RoundRobin) => "round robin",
            (Proxy::Nginx, Policy::LeastConn) => "least_conn",
            (Proxy::Nginx, Policy::RandomTwo) => "random two least_conn",
            (Proxy::Nginx, Policy::Hash) => "hash xff consistent",
            (Proxy::Haproxy, Policy::RoundRobin) => "roundrobin",
            (Proxy::Haproxy, Policy::LeastConn) => "leastconn",
            (Proxy::Haproxy, Policy::RandomTwo) => "random(2)",
            (Proxy::Haproxy, Policy::Hash) => "hdr(xff) consistent",
        };
        format!("{} {policy}", self.proxy)
    }
}

/// A `--peers` item: a proxy with every policy (`nginx`) or with one
/// (`nginx:least_conn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerSpec {
    /// The proxy.
    pub proxy: Proxy,
    /// One policy; `None`: all of them.
    pub policy: Option<Policy>,
}

fn known() -> String {
    let proxies: Vec<&str> = Proxy::ALL.iter().map(|p| p.name()).collect();
    let policies: Vec<&str> = Policy::ALL.iter().map(|p| p.token()).collect();
    format!(
        "{} (all policies) or PROXY:POLICY with POLICY one of {}",
        proxies.join(", "),
        policies.join(", ")
    )
}

impl FromStr for PeerSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (proxy, policy) = match s.split_once(':') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let proxy = Proxy::ALL
            .into_iter()
            .find(|p| p.name() == proxy)
            .ok_or_else(|| format!("unknown peer \"{s}\" (known: {})", known()))?;
        let policy = match policy {
            None => None,
            Some(t) => Some(
                Policy::ALL
                    .into_iter()
                    .find(|p| p.token() == t)
                    .ok_or_else(|| {
                        format!("unknown peer policy in \"{s}\" (known: {})", known())
                    })?,
            ),
        };
        Ok(PeerSpec { proxy, policy })
    }
}

impl<'de> Deserialize<'de> for PeerSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// Parses a `--peers` list: comma-separated [`PeerSpec`]s, or `none`.
pub fn parse_list(s: &str) -> Result<Vec<PeerSpec>, String> {
    if s.trim() == "none" {
        return Ok(Vec::new());
    }
    let list = s
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if list.is_empty() {
        return Err(format!("list at least one peer ({}), or none", known()));
    }
    Ok(list)
}

/// The rows of a list of specs: in order, each once.
pub fn rows(specs: &[PeerSpec]) -> Vec<Peer> {
    let mut out = Vec::new();
    for s in specs {
        let policies = match s.policy {
            Some(p) => vec![p],
            None => Policy::ALL.to_vec(),
        };
        for policy in policies {
            let peer = Peer {
                proxy: s.proxy,
                policy,
            };
            if !out.contains(&peer) {
                out.push(peer);
            }
        }
    }
    out
}
