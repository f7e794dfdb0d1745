//! Recovery: a replica that failed and answers again is picked again
//! within 5 s, whatever the failure (refused, 503, timeout, broken body),
//! in pools of 2 to 64, under light and heavy load, with the README's
//! stack (`stack.rs`: retries, breakers, panic mode); and once an outage
//! was long enough to open its breaker, within the breaker's open wait
//! (paused clock).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::Layer;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::Balance;
use tower_lb::breaker::State as BreakerState;
use tower_lb::breaker::config::DEFAULT_OPEN_WAIT_CAP;
use tower_lb::health::{HealthChange, HealthEvent};
use tower_lb::http::Classifier;

use crate::stack;

type Body = BoxBody<Bytes, io::Error>;
type Svc = BoxCloneSyncService<(), http::Response<Body>, io::Error>;

/// How the failing replica fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The connection is refused (a round trip, then an error).
    Refused,
    /// It answers 503 in its usual time.
    Unavailable,
    /// It never answers: a timeout ends the call (the README's per-try
    /// timeout, 500 ms; the balancer's own 1 s when it runs alone).
    Timeout,
    /// It answers 200 and the body breaks after its first bytes.
    BrokenBody,
}

/// The balancer's per-call timeout in these runs.
const TIMEOUT: Duration = Duration::from_secs(1);

/// The traffic of a run.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Every replica's latency.
    latency: Duration,
    /// Callers, as a function of the pool size.
    callers: fn(usize) -> usize,
    /// Each caller's pause between calls.
    pause: Duration,
}

/// The issue's setup: 8 callers with 10 ms pauses over replicas of
/// 200 µs: most endpoints idle most of the time.
pub const LIGHT: Load = Load {
    latency: Duration::from_micros(200),
    callers: |_| 8,
    pause: Duration::from_millis(10),
};

/// Three callers per replica without pauses over replicas of 10 ms:
/// every endpoint has about three calls in flight.
pub const HEAVY: Load = Load {
    latency: Duration::from_millis(10),
    callers: |pool| 3 * pool,
    pause: Duration::ZERO,
};

/// A replica's switch, its calls, and when it was first called after it
/// came back (ns after the revival; `u64::MAX` until then).
struct Switch {
    calls: AtomicU64,
    down: AtomicBool,
    revived: AtomicBool,
    revived_at: std::sync::Mutex<Option<Instant>>,
    back_after: AtomicU64,
    dead_calls: AtomicU64,
}

impl Switch {
    fn new() -> Self {
        Self {
            calls: AtomicU64::new(0),
            down: AtomicBool::new(false),
            revived: AtomicBool::new(false),
            revived_at: std::sync::Mutex::new(None),
            back_after: AtomicU64::new(u64::MAX),
            dead_calls: AtomicU64::new(0),
        }
    }

    /// Called with every call the replica takes: is it down?
    fn on_call(&self) -> bool {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.down.load(Ordering::Relaxed) {
            self.dead_calls.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if self.revived.load(Ordering::Relaxed)
            && let Some(at) = *self.revived_at.lock().unwrap()
        {
            let ns = at.elapsed().as_nanos() as u64;
            self.back_after.fetch_min(ns, Ordering::Relaxed);
        }
        false
    }

    fn revive(&self) {
        *self.revived_at.lock().unwrap() = Some(Instant::now());
        self.down.store(false, Ordering::Relaxed);
        self.revived.store(true, Ordering::Relaxed);
    }

    fn back_after(&self) -> Option<Duration> {
        let ns = self.back_after.load(Ordering::Relaxed);
        (ns != u64::MAX).then(|| Duration::from_nanos(ns))
    }
}

fn answer(status: u16, body: Body) -> http::Response<Body> {
    let mut res = http::Response::new(body);
    *res.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
    res
}

fn ok_body() -> Body {
    Full::new(Bytes::from_static(b"ok"))
        .map_err(|never| match never {})
        .boxed()
}

/// A body whose first bytes arrive and whose next read fails.
fn broken_body() -> Body {
    let frames: Vec<Result<Frame<Bytes>, io::Error>> = vec![
        Ok(Frame::data(Bytes::from_static(b"par"))),
        Err(io::Error::from(io::ErrorKind::ConnectionReset)),
    ];
    StreamBody::new(tokio_stream::iter(frames)).boxed()
}

/// A replica answering 200 in `latency`, or failing as `kind` while its
/// switch is down.
fn replica(kind: Kind, latency: Duration, switch: Arc<Switch>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        let down = switch.on_call();
        async move {
            if !down {
                tokio::time::sleep(latency).await;
                return Ok(answer(200, ok_body()));
            }
            match kind {
                Kind::Refused => {
                    tokio::time::sleep(Duration::from_micros(100)).await;
                    Err(io::Error::from(io::ErrorKind::ConnectionRefused))
                }
                Kind::Unavailable => {
                    tokio::time::sleep(latency).await;
                    Ok(answer(503, ok_body()))
                }
                Kind::Timeout => std::future::pending().await,
                Kind::BrokenBody => {
                    tokio::time::sleep(latency).await;
                    Ok(answer(200, broken_body()))
                }
            }
        }
    }))
}

/// What one run measured.
#[derive(Debug)]
pub struct Run {
    /// From the revival to the replica's first call.
    pub back_after: Option<Duration>,
    /// Calls the replica took while down.
    pub dead_calls: u64,
    /// Times a breaker opened.
    pub breaker_opens: u64,
}

/// What the replicas are balanced with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// The balancer alone, with a 1 s timeout.
    Bare,
    /// The README's stack (`stack.rs`).
    Readme,
}

/// Warm-up before the failure.
const WARM: Duration = Duration::from_secs(1);
/// How long the replica is down: the issue's 3 s.
pub const DOWN: Duration = Duration::from_secs(3);
/// A failed endpoint is probed about every 3 s: an outage of 3.1 s ends
/// just after a probe, the worst moment for failures that are quick to
/// see (the next probe is ~3 s away).
const DOWN_PAST_A_PROBE: Duration = Duration::from_millis(3_100);
/// A probe of a replica that hangs fails only at the balancer's timeout
/// (1 s): an outage of 4.2 s ends while one hangs, whose failure then
/// restarts the wait after the revival (the worst moment for timeouts).
const DOWN_DURING_A_PROBE: Duration = Duration::from_millis(4_200);
/// How long a run waits for the revived replica's first call.
const WAIT: Duration = Duration::from_secs(15);

/// Calls `svc` in a loop, reading each answer to its end (a broken body
/// fails there), pausing `pause` between calls.
async fn caller<S, B>(mut svc: S, pause: Duration)
where
    S: Service<(), Response = http::Response<B>>,
    B: http_body::Body,
{
    loop {
        let Ok(ready) = svc.ready().await else { return };
        if let Ok(res) = ready.call(()).await {
            let _ = res.into_body().collect().await;
        }
        tokio::time::sleep(pause).await;
    }
}

/// `pool` replicas under `load`; after [`WARM`] the busiest one fails as
/// `kind` for `down`, then answers again. (The busiest: under light
/// load a latency-aware picker serves 8 callers from a few replicas and
/// leaves the rest unexplored; a replica that had no traffic has none to
/// recover.)
pub async fn run(
    kind: Kind,
    pool: usize,
    load: Load,
    down: Duration,
    with: Stack,
    wait: Duration,
) -> Run {
    let switches: Vec<Arc<Switch>> = (0..pool).map(|_| Arc::new(Switch::new())).collect();
    let opens = Arc::new(AtomicU64::new(0));
    let counted = opens.clone();
    let on_change = move |e: &HealthEvent| {
        if matches!(
            e.change,
            HealthChange::Breaker {
                to: BreakerState::Open,
                ..
            }
        ) {
            counted.fetch_add(1, Ordering::Relaxed);
        }
    };
    let mut b = match with {
        Stack::Bare => Balance::builder().timeout(TIMEOUT),
        Stack::Readme => stack::balance(),
    }
    .classify(Classifier::new())
    .on_health_change(on_change)
    .seed(pool as u64);
    for (i, s) in switches.iter().enumerate() {
        b = b.endpoint(i, replica(kind, load.latency, s.clone()));
    }
    let lb = b.build().expect("a valid balancer");
    let retry = stack::retry_clone();
    let mut callers = JoinSet::new();
    for _ in 0..(load.callers)(pool) {
        match with {
            Stack::Bare => callers.spawn(caller(lb.clone(), load.pause)),
            Stack::Readme => callers.spawn(caller(retry.layer(lb.clone()), load.pause)),
        };
    }
    tokio::time::sleep(WARM).await;
    let switch = switches
        .iter()
        .max_by_key(|s| s.calls.load(Ordering::Relaxed))
        .expect("a pool of at least one");
    switch.down.store(true, Ordering::Relaxed);
    tokio::time::sleep(down).await;
    switch.revive();
    let until = Instant::now() + wait;
    while switch.back_after().is_none() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    callers.abort_all();
    while callers.join_next().await.is_some() {}
    Run {
        back_after: switch.back_after(),
        dead_calls: switch.dead_calls.load(Ordering::Relaxed),
        breaker_opens: opens.load(Ordering::Relaxed),
    }
}

/// The recovery target: the revived replica's first call within 5 s.
pub const TARGET: Duration = Duration::from_secs(5);

/// Every pool size and both loads for one failure kind, the outage
/// ending at the worst moment for that kind.
async fn every_pool_and_load(kind: Kind, with: Stack) {
    let down = match kind {
        Kind::Timeout => DOWN_DURING_A_PROBE,
        _ => DOWN_PAST_A_PROBE,
    };
    let mut report = String::new();
    let mut worst = Duration::ZERO;
    for (name, load) in [("light", LIGHT), ("heavy", HEAVY)] {
        for pool in [2, 3, 8, 64] {
            let r = run(kind, pool, load, down, with, WAIT).await;
            report.push_str(&format!(
                "\n{kind:?} {with:?} {name} pool {pool}: back after {:?}, {} calls while down, {} breaker opens",
                r.back_after, r.dead_calls, r.breaker_opens
            ));
            worst = worst.max(r.back_after.unwrap_or(Duration::MAX));
        }
    }
    eprintln!("{report}");
    assert!(worst <= TARGET, "{report}");
}

/// The issue's setup (30, item 2): three replicas of 200 µs, 8 callers
/// with 10 ms pauses, the default picker alone, one refusing connections
/// for 3 s. Before the probe its first call came 9.7 s after it answered
/// again.
#[tokio::test(start_paused = true)]
async fn the_issue_setup_is_back_within_5_s() {
    let r = run(Kind::Refused, 3, LIGHT, DOWN, Stack::Bare, WAIT).await;
    assert!(r.back_after.is_some_and(|d| d <= TARGET), "{r:?}");
}

/// Promise: a replica that refused connections is picked again within 5 s
/// of accepting them (the README's stack).
#[tokio::test(start_paused = true)]
async fn a_replica_that_refused_is_back_within_5_s() {
    every_pool_and_load(Kind::Refused, Stack::Readme).await;
}

/// Promise: a replica that answered 503 is picked again within 5 s of
/// answering 200 (the README's stack).
#[tokio::test(start_paused = true)]
async fn a_replica_that_answered_503_is_back_within_5_s() {
    every_pool_and_load(Kind::Unavailable, Stack::Readme).await;
}

/// Promise: a replica whose calls timed out (the README's 500 ms per-try
/// timeout) is picked again within 5 s of answering in time.
#[tokio::test(start_paused = true)]
async fn a_replica_that_timed_out_is_back_within_5_s() {
    every_pool_and_load(Kind::Timeout, Stack::Readme).await;
}

/// Promise: a replica whose bodies broke is picked again within 5 s of
/// sending whole bodies (the README's stack).
#[tokio::test(start_paused = true)]
async fn a_replica_whose_bodies_broke_is_back_within_5_s() {
    every_pool_and_load(Kind::BrokenBody, Stack::Readme).await;
}

/// Two callers with 50 ms pauses over replicas of 200 µs: a long run at
/// little cost.
const SPARSE: Load = Load {
    latency: Duration::from_micros(200),
    callers: |_| 2,
    pause: Duration::from_millis(50),
};

/// The promise's condition under the README's stack: an outage long
/// enough for the picker's probes to fail half of the replica's last 100
/// calls opens its breaker, which then holds it out for the breaker's
/// open wait (60–120 s the first time at the default, backing off to
/// `DEFAULT_OPEN_WAIT_CAP`, 300 s): it is picked again at the latest
/// within the longest open wait and 5 s after it answers.
#[tokio::test(start_paused = true)]
async fn once_its_breaker_opened_a_replica_is_back_within_the_open_wait() {
    let down = Duration::from_secs(300);
    let bound = DEFAULT_OPEN_WAIT_CAP + TARGET;
    let r = run(Kind::Refused, 3, SPARSE, down, Stack::Readme, bound).await;
    eprintln!("down {down:?}: {r:?}");
    assert!(r.breaker_opens >= 1, "the breaker opened: {r:?}");
    assert!(r.back_after.is_some_and(|d| d <= bound), "{r:?}");
}
