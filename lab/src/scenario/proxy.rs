//! The central proxies a scenario's `peers` list (or `--peers`) names:
//! nginx and haproxy, each balancing policy as each proxy writes it, and
//! how a proxy talks to the backends. Running them is [`crate::peers`]'s.

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

/// How a proxy talks to the backends (`nginx:keepalive=off`,
/// `haproxy:conns=256`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Settings {
    /// Keeps idle connections to the backends for the next requests
    /// (default); `false`: one connection per request.
    pub keepalive: bool,
    /// nginx's `worker_connections`, haproxy's `maxconn`; `None`: the
    /// lab's default (room for every user, see [`crate::peers::config`]).
    pub conns: Option<u32>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            keepalive: true,
            conns: None,
        }
    }
}

impl Settings {
    /// What the label adds: the settings that differ from the default.
    fn suffix(self) -> String {
        let mut s = String::new();
        if !self.keepalive {
            s.push_str(" keepalive=off");
        }
        if let Some(n) = self.conns {
            s.push_str(&format!(" conns={n}"));
        }
        s
    }

    /// Applies `key=value`.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match (key, value) {
            ("keepalive", "on") => self.keepalive = true,
            ("keepalive", "off") => self.keepalive = false,
            ("keepalive", v) => return Err(format!("keepalive={v}: give on or off")),
            ("conns", v) => {
                let n: u32 = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_CONNS).contains(n))
                    .ok_or_else(|| format!("conns={v}: give a number in 1..={MAX_CONNS}"))?;
                self.conns = Some(n);
            }
            (k, _) => {
                return Err(format!(
                    "unknown peer setting \"{k}\" (known: keepalive=on|off, conns=N)"
                ));
            }
        }
        Ok(())
    }
}

/// The most connections a peer may be given (a proxy's own limits are
/// far below).
pub const MAX_CONNS: u32 = 1_000_000;

/// One peer row: a proxy with one policy and its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The proxy.
    pub proxy: Proxy,
    /// Its balancing policy.
    pub policy: Policy,
    /// Keep-alive and connection limits.
    pub settings: Settings,
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
        format!("{} {policy}{}", self.proxy, self.settings.suffix())
    }

    /// The row's name in the table: [`label`](Self::label) and `(peer)`.
    pub fn row_name(self) -> String {
        row_name(&self.label())
    }
}

/// A proxy's row name from its label (`nginx least_conn (peer)`), in the
/// table, the chart and the streamed rows alike.
pub fn row_name(label: &str) -> String {
    format!("{label} (peer)")
}

/// A `--peers` item: a proxy with every policy (`nginx`) or with one
/// (`nginx:least_conn`), and settings (`nginx:keepalive=off`,
/// `haproxy:leastconn:conns=256`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerSpec {
    /// The proxy.
    pub proxy: Proxy,
    /// One policy; `None`: all of them.
    pub policy: Option<Policy>,
    /// Its settings.
    pub settings: Settings,
}

fn known() -> String {
    let proxies: Vec<&str> = Proxy::ALL.iter().map(|p| p.name()).collect();
    let policies: Vec<&str> = Policy::ALL.iter().map(|p| p.token()).collect();
    format!(
        "{} (all policies) or PROXY:POLICY with POLICY one of {}, each optionally followed by :keepalive=off or :conns=N",
        proxies.join(", "),
        policies.join(", ")
    )
}

impl FromStr for PeerSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(':');
        let proxy = parts.next().unwrap_or_default();
        let proxy = Proxy::ALL
            .into_iter()
            .find(|p| p.name() == proxy)
            .ok_or_else(|| format!("unknown peer \"{s}\" (known: {})", known()))?;
        let (mut policy, mut settings) = (None, Settings::default());
        for t in parts {
            if let Some((k, v)) = t.split_once('=') {
                settings
                    .set(k.trim(), v.trim())
                    .map_err(|e| format!("in \"{s}\": {e}"))?;
                continue;
            }
            let p = Policy::ALL
                .into_iter()
                .find(|p| p.token() == t)
                .ok_or_else(|| format!("unknown peer policy in \"{s}\" (known: {})", known()))?;
            if policy.replace(p).is_some() {
                return Err(format!("two policies in \"{s}\" (known: {})", known()));
            }
        }
        Ok(PeerSpec {
            proxy,
            policy,
            settings,
        })
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
                settings: s.settings,
            };
            if !out.contains(&peer) {
                out.push(peer);
            }
        }
    }
    out
}
