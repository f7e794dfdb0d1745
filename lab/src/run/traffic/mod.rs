//! The traffic: closed-loop virtual users ([`users`], which also holds
//! the shared plan and the progress line), open-loop arrivals
//! ([`arrivals`]), and the connections the users' requests come over
//! when the hash pickers key on them ([`connections`]).

pub mod arrivals;
pub mod connections;
pub mod users;
