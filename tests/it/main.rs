//! The integration tests, one binary: a module per area (each was a test
//! binary of its own, each linking the whole dependency tree). The tests
//! that count allocations with a global allocator are in `tests/allocs/`,
//! the conformance suite in `tests/conformance/`.
//!
//! Run one area with a filter: `cargo test --all-features --test it breaker::`.

#[path = "../grpc_server/mod.rs"]
mod grpc_server;
#[path = "../support/mod.rs"]
mod support;

mod adaptive;
mod balance;
mod bounds;
mod breaker;
mod checks;
mod discover_dns;
mod discover_xds;
mod dns;
mod examples;
mod exchange;
mod gateway;
mod gateway_bodies;
mod grpc;
mod grpc_health;
mod grpc_template;
mod health;
mod health_events;
mod health_owner;
mod http;
mod https;
mod layer;
mod membership;
mod metrics;
mod metrics_dashboard;
mod metrics_features;
mod orca;
mod orca_servers;
mod outlier;
mod peak_ewma;
mod per_thread;
mod prequal;
mod readme_any_service;
mod recovery;
mod reqwest_example;
mod reqwest_middleware;
mod reqwest_readme;
mod resilience;
mod retry_deadline;
mod retry_hints;
mod retry_spare;
mod route;
mod server;
mod slow_start;
mod subset;
