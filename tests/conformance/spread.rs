//! Spread and weights, after gRPC's `round_robin` and `traffic_splitting`
//! interop cases: the round-robin family spreads evenly over 100
//! endpoints, and a 20/80 weighted split holds over 1,000 requests
//! (paused clock, in-process endpoints that answer at once, the README's
//! stack: `stack.rs`).

use std::convert::Infallible;

use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::pick::{AnyPicker, Pick, Picker, key_fn};

use crate::stack;

type Svc = BoxCloneSyncService<(), usize, Infallible>;

fn replica(i: usize) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| async move { Ok(i) }))
}

/// Calls per endpoint after `n` calls, one at a time.
async fn counts<P>(picker: P, weights: &[f64], n: usize) -> Vec<usize>
where
    P: Picker + Pick<()>,
{
    let mut b = stack::balance().picker(picker).seed(7);
    for (i, &w) in weights.iter().enumerate() {
        b = b.weighted_endpoint(i, replica(i), w);
    }
    let mut lb = stack::retry_clone().layer(b.build().expect("a valid balancer"));
    let mut counts = vec![0; weights.len()];
    for _ in 0..n {
        let i = lb
            .ready()
            .await
            .expect("ready")
            .call(())
            .await
            .expect("an answer");
        counts[i] += 1;
    }
    counts
}

fn picker(name: &str) -> AnyPicker<impl tower_lb::pick::RequestKey<()>> {
    AnyPicker::by_name(name, key_fn(|_: &()| None)).expect("a known picker")
}

/// The round-robin family: every picker whose rule is an even rotation
/// when weights are equal and nothing is reported.
const ROUND_ROBIN_FAMILY: [&str; 3] = ["round_robin", "weighted_round_robin", "orca_round_robin"];

/// Promise: over 100 endpoints, 10,000 calls give every endpoint 100 ± 1
/// (gRPC's `round_robin` case: each backend within one RPC of its share).
#[tokio::test(start_paused = true)]
async fn the_round_robin_family_spreads_evenly_over_100_endpoints() {
    for name in ROUND_ROBIN_FAMILY {
        let got = counts(picker(name), &[1.0; 100], 10_000).await;
        let (lo, hi) = (got.iter().min(), got.iter().max());
        assert!(
            got.iter().all(|&c| c.abs_diff(100) <= 1),
            "{name}: min {lo:?} max {hi:?}"
        );
    }
}

/// gRPC's `traffic_splitting` tolerance: each share within 5% of its
/// expected value (relative: 20% ± 1, 80% ± 4 percentage points).
fn within_grpc_tolerance(got: &[usize], want: &[f64]) -> bool {
    let total: usize = got.iter().sum();
    got.iter().zip(want).all(|(&c, &w)| {
        let share = c as f64 / total as f64;
        (share - w).abs() <= 0.05 * w
    })
}

/// Promise: weights 20 and 80 split 1,000 calls 20/80 within gRPC's
/// tolerance with the smooth weighted round robin (exactly 200/800), and
/// weighted random draws within it over 100,000 calls (1,000 draws have a
/// standard deviation of 1.3 points on the 20% share, more than the
/// tolerance: gRPC's own case retries its sample up to ten times).
#[tokio::test(start_paused = true)]
async fn a_20_80_split_holds_within_grpcs_tolerance() {
    let want = [0.2, 0.8];
    let wrr = counts(picker("weighted_round_robin"), &[20.0, 80.0], 1_000).await;
    assert_eq!(wrr, [200, 800]);
    assert!(within_grpc_tolerance(&wrr, &want));
    let random = counts(picker("random"), &[20.0, 80.0], 100_000).await;
    assert!(within_grpc_tolerance(&random, &want), "{random:?}");
}
