//! Running: the world a row runs in. Fresh replicas behind their server
//! stacks ([`replica`]), in process (`--sim`) or on loopback sockets
//! ([`server`]); the endpoints a balancer drives ([`endpoint`]); the users
//! and arrivals that send the traffic ([`traffic`]); the joins and leaves
//! applied while the row runs ([`joins`]); tower-lb's client balancers
//! ([`balancers`]) and the lab's oracle ([`oracle`]). A row's settings and
//! state are [`row`]'s; which rows run, and in what order, is
//! [`crate::driver`]'s.

pub mod balancers;
pub mod endpoint;
pub mod joins;
pub mod message;
pub mod oracle;
pub mod replica;
pub mod row;
pub mod server;
pub mod traffic;
