//! tower-lb-etcd against a real etcd: the `etcd` binary from the system
//! package (Debian's `etcd-server`) on 127.0.0.1, one per test, with a
//! temporary data directory. Without the binary each test prints a notice
//! and passes, unless `TOWER_LB_REQUIRE_ETCD` is set (as `.ci/run` does).
//!
//! The figures they print (`cargo test -p tower-lb-etcd --test etcd --
//! --nocapture`) are measurements for the docs, never assertions.

mod discovery;
mod failures;
mod leases;
mod scale;
mod support;

// tower-lb's test support, shared rather than copied: the discovery
// events' capture, and the hyper backends.
#[path = "../../../tests/support/backend.rs"]
#[allow(dead_code)]
mod backend;
#[path = "../../../tests/support/mod.rs"]
mod events;
