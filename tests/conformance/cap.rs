//! The per-endpoint concurrency cap holds exactly: under load every
//! endpoint reaches it and never passes it, and a cap set at run time
//! holds exactly the new number (gRPC's `circuit_breaking` case: 500 in
//! flight, then 800 after the update; paused clock, the README's stack:
//! `stack.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::{Balance, Error};

use crate::stack;

type Svc = BoxCloneSyncService<(), (), std::io::Error>;

/// Calls a replica is serving now, and the most it served at once since
/// the last reset, counted by the replica itself.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Gauge {
    fn reset(&self) {
        self.max
            .store(self.now.load(Ordering::SeqCst), Ordering::SeqCst);
    }
    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

/// Leaves the gauge when the call ends or is dropped.
struct Serving(Arc<Gauge>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A replica serving each call in 10 ms.
fn replica(gauge: Arc<Gauge>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        let gauge = gauge.clone();
        async move {
            let n = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.max.fetch_max(n, Ordering::SeqCst);
            let _serving = Serving(gauge);
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(())
        }
    }))
}

/// Promise: with a cap of N, under load each endpoint serves exactly N at
/// once at its busiest and never more; a cap set at run time (lowered,
/// then raised) holds exactly the new N once the calls admitted under the
/// old one have ended; calls the cap turns away fail at once with
/// `Overloaded`.
#[tokio::test(start_paused = true)]
async fn a_cap_holds_exactly_n_in_flight_and_a_new_cap_the_new_n() {
    let gauges: Vec<Arc<Gauge>> = (0..3).map(|_| Arc::new(Gauge::default())).collect();
    let mut b = stack::balance().max_in_flight(4);
    for (i, g) in gauges.iter().enumerate() {
        b = b.endpoint(i, replica(g.clone()));
    }
    let lb = b.build().expect("a valid balancer");
    let retry = stack::retry_clone();
    let overloaded = Arc::new(AtomicUsize::new(0));
    let mut callers = JoinSet::new();
    // 40 callers against 3 × 6 slots at most: every endpoint stays full.
    for _ in 0..40 {
        let (mut svc, overloaded) = (retry.layer(lb.clone()), overloaded.clone());
        callers.spawn(async move {
            loop {
                let Ok(ready) = svc.ready().await else { return };
                if let Err(e) = ready.call(()).await
                    && let Some(Error::Overloaded) = e.into_inner()
                {
                    overloaded.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
    }
    let handle = lb.handle();
    let phase = |want: usize| {
        let gauges = gauges.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let max: Vec<usize> = gauges.iter().map(|g| g.max()).collect();
            assert_eq!(max, vec![want; 3], "cap {want}");
        }
    };
    phase(4).await;
    for cap in [2, 6, 1] {
        handle.set_max_in_flight(Some(cap)).expect("a valid cap");
        assert_eq!(handle.max_in_flight(), Some(cap));
        // The calls admitted under the old cap end within their 10 ms.
        tokio::time::sleep(Duration::from_millis(20)).await;
        for g in &gauges {
            g.reset();
        }
        phase(cap).await;
    }
    assert!(overloaded.load(Ordering::Relaxed) > 0);
    callers.abort_all();
    while callers.join_next().await.is_some() {}
    // Every slot is given back, cancelled calls included.
    for (_, s) in lb.handle().endpoints() {
        assert_eq!(s.in_flight(), 0);
    }
}

/// Promise: a cap of 0, or a cap on a balancer whose per-thread lanes
/// count calls apart, is refused with an error naming `max_in_flight`.
#[tokio::test]
async fn a_cap_that_cannot_hold_is_refused() {
    let svc = || replica(Arc::new(Gauge::default()));
    let lb = Balance::builder()
        .endpoint(0, svc())
        .build()
        .expect("valid");
    let err = lb
        .handle()
        .set_max_in_flight(Some(0))
        .map_err(|e| e.field());
    assert_eq!(err, Err("max_in_flight"));
    let laned = Balance::builder()
        .per_thread_load(true)
        .endpoint(0, svc())
        .build()
        .expect("valid");
    let lanes = std::thread::available_parallelism().map_or(1, |n| n.get());
    let got = laned
        .handle()
        .set_max_in_flight(Some(3))
        .map_err(|e| e.field());
    if lanes > 1 {
        assert_eq!(got, Err("max_in_flight"));
    }
    assert_eq!(laned.handle().set_max_in_flight(None), Ok(()));
}
