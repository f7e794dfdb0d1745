//! Conformance: the promises a user can hold tower-lb to, one line each,
//! each tested here. Modelled on what the most trusted balancers test:
//! gRPC's xDS interop cases (`doc/xds-test-descriptions.md`:
//! `remove_instance_group`, `backends_restart`, `round_robin`, weighted
//! splits), Envoy's per-algorithm load-balancer fuzz tests (random host
//! set churn interleaved with picks, never a pick of a host that is gone)
//! and Finagle's balancer suites (spread, weights, recovery).
//!
//! Every case builds the stack a user builds from the README (`stack.rs`:
//! retries, breakers, panic mode, defaults included), or says what it adds
//! or leaves out. It runs in-process on tokio's paused clock where the
//! promise is about the balancer, and against hyper servers on 127.0.0.1
//! where it is about the wire. `docs/conformance.md` lists the promises,
//! the test that asserts each, its tolerance and its condition.

mod budget;
mod cap;
mod churn;
mod ejection;
mod panic;
mod recovery;
mod reports;
mod spread;
mod stack;
mod wire;

#[path = "../support/backend.rs"]
mod backend;
