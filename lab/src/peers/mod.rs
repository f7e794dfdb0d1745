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
