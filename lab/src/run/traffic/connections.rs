//! `[load] connections`: each user's requests arrive on connections of
//! their own, and the hash pickers key on the connection (its addresses
//! and ports, `tower_lb::http::Connection`) instead of `X-Forwarded-For`:
//! a layer-4 balancer's 5-tuple hash, as Azure's Load Balancer does it.
//!
//! * `per_user`: one connection per user, kept alive: every request of a
//!   user has the same source port, so the same key (affinity).
//! * `per_request`: a new connection, and so a new source port, for each
//!   request: the same user's requests scatter ("looks like round robin").
//!
//! The lab's balancers sit where the gateway would be: the users' requests
//! carry the connection's two ends as a gateway's server would record them
//! ([`ConnectionAddrs`]), with the user's IP, a source port, and the
//! gateway's own address. Each request also carries its user ([`User`]),
//! so the endpoints can count the backends each user reached.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use tower_lb::http::{Connection, ConnectionAddrs, ForwardedFor};
use tower_lb::pick::RequestKey;

use crate::run::message::LabRequest;
use crate::scenario::Connections;
use crate::scenario::random::Rng;

/// The gateway's end of every connection.
pub const GATEWAY: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 8080);

/// The first ephemeral port (Linux's `ip_local_port_range` starts at
/// 32768 and ends at 60999).
const EPHEMERAL: (u16, u16) = (32768, 60999);

/// The user a request comes from (a request extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct User(pub u32);

/// The hash pickers' key: the client IP in `X-Forwarded-For` (the
/// published study's), or the connection.
#[derive(Clone, Copy)]
pub enum LabKey {
    /// `X-Forwarded-For`.
    Xff(ForwardedFor),
    /// The connection's addresses and ports.
    Conn(Connection),
}

impl LabKey {
    /// The key a scenario's hash pickers use.
    pub fn for_load(connections: Option<Connections>) -> Self {
        match connections {
            Some(_) => LabKey::Conn(Connection::new()),
            None => LabKey::Xff(ForwardedFor),
        }
    }
}

impl RequestKey<LabRequest> for LabKey {
    fn key(&self, req: &LabRequest) -> Option<u64> {
        match self {
            LabKey::Xff(k) => k.key(req),
            LabKey::Conn(k) => k.key(req),
        }
    }
}

/// The source port of user `u`'s kept-alive connection: spread over the
/// ephemeral range by the user's number.
fn user_port(u: u32) -> u16 {
    let span = u32::from(EPHEMERAL.1 - EPHEMERAL.0) + 1;
    EPHEMERAL.0 + (u.wrapping_mul(2_654_435_761) % span) as u16
}

/// Puts user `u`'s connection on `req` (from `ip`): the same port for
/// every request (`per_user`), or a fresh one drawn from `rng`
/// (`per_request`).
pub fn stamp(req: &mut LabRequest, how: Connections, u: u32, ip: &str, rng: &mut Rng) {
    let ip: IpAddr = ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let port = match how {
        Connections::PerUser => user_port(u),
        Connections::PerRequest => {
            let span = usize::from(EPHEMERAL.1 - EPHEMERAL.0) + 1;
            EPHEMERAL.0 + rng.below(span) as u16
        }
    };
    req.extensions_mut().insert(ConnectionAddrs {
        peer: SocketAddr::new(ip, port),
        local: GATEWAY,
    });
    req.extensions_mut().insert(User(u));
}
