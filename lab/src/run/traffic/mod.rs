//! The traffic: closed-loop virtual users ([`users`], which also holds
//! the shared plan and the progress line), open-loop arrivals
//! ([`arrivals`]), and the connections the users' requests come over
//! when the hash pickers key on them ([`connections`]); against the
//! user's own replicas, the closed loop's ceiling ([`pace`]).

pub mod arrivals;
pub mod connections;
pub mod pace;
pub mod users;
