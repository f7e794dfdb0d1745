//! The retry layer over a real `Balance`, on tokio's paused clock.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::http::Classifier;
use tower_lb::retry::{self, Backoff, Budget, Hedge, RetryLayer};
use tower_lb::{Balance, pick};

const MS: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug)]
enum Mode {
    Ok,
    Fail,
    /// Answers `Ok` after this long.
    Slow(Duration),
}

/// Who served which request: (request id, endpoint name).
type Log = Arc<Mutex<Vec<(u32, &'static str)>>>;

/// Counts drops of endpoint futures that never finished (cancellations).
#[derive(Default)]
struct Cancelled(AtomicUsize);

struct DropGuard {
    cancelled: Arc<Cancelled>,
    done: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.done {
            self.cancelled.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn replica(
    name: &'static str,
    mode: Mode,
    log: Log,
    cancelled: Arc<Cancelled>,
) -> impl Service<u32, Response = &'static str, Error = io::Error, Future: Send> + Clone + Send {
    service_fn(move |id: u32| {
        log.lock().unwrap().push((id, name));
        let guard = DropGuard {
            cancelled: cancelled.clone(),
            done: false,
        };
        async move {
            // Move the whole guard in (closures capture fields precisely).
            let mut guard = guard;
            let out = match mode {
                Mode::Ok => Ok(name),
                Mode::Fail => Err(io::Error::other(name)),
                Mode::Slow(d) => {
                    tokio::time::sleep(d).await;
                    Ok(name)
                }
            };
            guard.done = true;
            out
        }
    })
}

struct Rig {
    log: Log,
    cancelled: Arc<Cancelled>,
}

impl Rig {
    fn new() -> Self {
        Self {
            log: Log::default(),
            cancelled: Arc::default(),
        }
    }

    fn calls(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    /// Endpoints per request id, in attempt order.
    fn attempts(&self) -> HashMap<u32, Vec<&'static str>> {
        let mut m: HashMap<u32, Vec<&'static str>> = HashMap::new();
        for &(id, name) in self.log.lock().unwrap().iter() {
            m.entry(id).or_default().push(name);
        }
        m
    }
}

macro_rules! balance {
    ($rig:expr, $picker:expr, [$(($name:expr, $mode:expr)),+ $(,)?]) => {
        Balance::builder()
            .picker($picker)
            $(.endpoint($name, replica($name, $mode, $rig.log.clone(), $rig.cancelled.clone())))+
            .seed(7)
            .build()
            .unwrap()
    };
}

fn in_flight<K, S, P: pick::Picker, C>(lb: &Balance<K, S, P, C>) -> usize
where
    K: Clone + std::hash::Hash + Eq,
{
    lb.handle()
        .endpoints()
        .iter()
        .map(|(_, s)| s.in_flight())
        .sum()
}

// ---- budget -------------------------------------------------------------

/// 100% failing endpoints and a steady 100 requests/s for 60 simulated
/// seconds: the budget holds attempts per request to 1 + ratio + the floor's
/// share, instead of the 3 attempts each request would otherwise make.
#[tokio::test(start_paused = true)]
async fn budget_prevents_a_retry_storm_against_failing_endpoints() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", Mode::Fail), ("b", Mode::Fail), ("c", Mode::Fail)]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .build()
        .unwrap();
    let svc = layer.layer(lb.clone());
    let mut set = JoinSet::new();
    let requests = 6_000u32; // 100/s for 60 s
    for id in 0..requests {
        set.spawn(svc.clone().oneshot(id));
        tokio::time::sleep(10 * MS).await;
    }
    let mut budget_errors = 0;
    while let Some(r) = set.join_next().await {
        match r.unwrap() {
            Err(retry::Error::BudgetExhausted { .. }) => budget_errors += 1,
            Err(retry::Error::AttemptsExhausted { attempts: 3, .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let requests = f64::from(requests);
    let per_request = rig.calls() as f64 / requests;
    // Floor: 10 retries/s over the 60 s run plus one ttl of reserve.
    let floor_share = 10.0 * (60.0 + 10.0) / requests;
    let bound = 1.0 + retry::DEFAULT_RATIO + floor_share;
    assert!(
        per_request <= bound,
        "{per_request} attempts per request > {bound}"
    );
    // The budget was used, not merely refused: retries did happen.
    assert!(
        per_request > 1.0 + retry::DEFAULT_RATIO * 0.9,
        "{per_request}"
    );
    assert!(budget_errors > 4_000, "{budget_errors}");
    assert_eq!(layer.stats().budget_exhausted(), budget_errors);
    assert_eq!(
        layer.stats().retries() as usize + 6_000,
        rig.calls(),
        "every attempt beyond the first is a counted retry"
    );
    assert_eq!(in_flight(&lb), 0);
}

/// tower's `TpsBudget` truncates 1/0.6 to 1 and lets 100% through (tower
/// #857). Through the layer, a 0.6 budget allows exactly 60% retries.
#[tokio::test(start_paused = true)]
async fn budget_ratio_point_six_allows_sixty_percent_not_all() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", Mode::Fail), ("b", Mode::Fail)]
    );
    let budget = Budget::new(Duration::from_secs(10), 0, 0.6).unwrap();
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .max_attempts(2)
        .budget(budget)
        .build()
        .unwrap();
    let mut svc = layer.layer(lb);
    // Every request deposits at `call`, before any attempt fails.
    let mut set = JoinSet::new();
    for id in 0..1_000 {
        set.spawn(svc.ready().await.unwrap().call(id));
    }
    while set.join_next().await.is_some() {}
    assert_eq!(layer.stats().retries(), 600);
    assert_eq!(layer.stats().budget_exhausted(), 400);
    assert_eq!(rig.calls(), 1_600);
}

// ---- avoiding tried endpoints ---------------------------------------------

/// Through a real `Balance` over three endpoints where one fails, a retried
/// request goes to a different endpoint. The random picker would send a
/// third of the retries back to the failing endpoint if it were not told to
/// avoid it.
#[tokio::test(start_paused = true)]
async fn a_retry_goes_to_a_different_endpoint() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::Random::new(),
        [("a", Mode::Ok), ("bad", Mode::Fail), ("c", Mode::Ok)]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .budget(Budget::new(Duration::from_secs(10), 1_000, 1.0).unwrap())
        .build()
        .unwrap();
    let mut svc = layer.layer(lb.clone());
    for id in 0..300 {
        let served = svc.ready().await.unwrap().call(id).await.unwrap();
        assert_ne!(served, "bad");
    }
    let attempts = rig.attempts();
    let retried: Vec<_> = attempts.values().filter(|a| a.len() > 1).collect();
    assert!(retried.len() > 50, "only {} retried", retried.len());
    for a in retried {
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(a[0], "bad");
        assert_ne!(a[1], "bad", "the retry went back to the failing endpoint");
    }
    assert_eq!(in_flight(&lb), 0);
}

/// Two of three endpoints fail: with three attempts, every request still
/// succeeds, because no attempt repeats an endpoint.
#[tokio::test(start_paused = true)]
async fn three_attempts_visit_three_distinct_endpoints() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::Random::new(),
        [
            ("bad1", Mode::Fail),
            ("bad2", Mode::Fail),
            ("good", Mode::Ok)
        ]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .budget(Budget::new(Duration::from_secs(10), 1_000, 1.0).unwrap())
        .build()
        .unwrap();
    let mut svc = layer.layer(lb);
    for id in 0..200 {
        assert_eq!(svc.ready().await.unwrap().call(id).await.unwrap(), "good");
    }
    for (id, a) in rig.attempts() {
        let mut distinct = a.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            a.len(),
            "request {id} repeated an endpoint: {a:?}"
        );
    }
}

// ---- idempotency and replay -------------------------------------------------

type HttpLog = Arc<Mutex<Vec<http::Method>>>;

/// An HTTP endpoint answering with `status` (and an optional Retry-After)
/// for the first `fail_first` calls, then 200.
fn http_replica(
    log: HttpLog,
    status: u16,
    retry_after: Option<String>,
    fail_first: usize,
) -> impl Service<
    http::Request<String>,
    Response = http::Response<String>,
    Error = io::Error,
    Future: Send,
> + Clone
+ Send {
    service_fn(move |req: http::Request<String>| {
        let n = {
            let mut log = log.lock().unwrap();
            log.push(req.method().clone());
            log.len()
        };
        let mut res = http::Response::new(req.into_body());
        if n <= fail_first {
            *res.status_mut() = http::StatusCode::from_u16(status).unwrap();
            if let Some(ra) = &retry_after {
                res.headers_mut()
                    .insert(http::header::RETRY_AFTER, ra.parse().unwrap());
            }
        }
        async move { Ok(res) }
    })
}

fn request(method: http::Method) -> http::Request<String> {
    http::Request::builder()
        .method(method)
        .uri("http://svc/x")
        .body("payload".to_string())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn non_idempotent_methods_are_not_retried_unless_opted_in() {
    for (opt_in, method, want_calls) in [
        (false, http::Method::POST, 1),
        (false, http::Method::PATCH, 1),
        (false, http::Method::GET, 3),
        (false, http::Method::PUT, 3),
        (true, http::Method::POST, 3),
    ] {
        let log = HttpLog::default();
        let lb = Balance::builder()
            .endpoint("a", http_replica(log.clone(), 503, None, usize::MAX))
            .endpoint("b", http_replica(log.clone(), 503, None, usize::MAX))
            .build()
            .unwrap();
        let builder = RetryLayer::builder().classify(Classifier::new());
        let builder = if opt_in {
            builder.retry_non_idempotent()
        } else {
            builder
        };
        let mut svc = builder.build().unwrap().layer(lb);
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(request(method.clone()))
            .await
            .unwrap();
        // The last failing response is returned as is.
        assert_eq!(res.status(), 503);
        assert_eq!(res.body(), "payload", "the body was replayed");
        assert_eq!(
            log.lock().unwrap().len(),
            want_calls,
            "{method} opt_in={opt_in}"
        );
    }
}

/// A body that cannot be copied: the request is sent once, its error
/// returned as `Error::Inner`.
#[tokio::test(start_paused = true)]
async fn non_replayable_requests_are_not_retried() {
    struct Stream; // not Clone
    let calls = Arc::new(AtomicUsize::new(0));
    let failing = {
        let calls = calls.clone();
        service_fn(move |_: http::Request<Stream>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(io::Error::other("reset")) }
        })
    };
    let lb = Balance::builder()
        .endpoint("a", failing.clone())
        .endpoint("b", failing)
        .build()
        .unwrap();
    let layer = RetryLayer::builder()
        .replay(|_: &http::Request<Stream>| None)
        .build()
        .unwrap();
    let mut svc = layer.layer(lb);
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(Stream))
        .await
        .unwrap_err();
    assert!(matches!(err, retry::Error::Inner(_)), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(layer.stats().retries(), 0);
}

/// With one attempt allowed there is nothing to retry.
#[tokio::test(start_paused = true)]
async fn max_attempts_one_disables_retries() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", Mode::Fail), ("b", Mode::Ok)]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .max_attempts(1)
        .build()
        .unwrap();
    let err = layer.layer(lb).oneshot(1).await.unwrap_err();
    assert!(
        matches!(err, retry::Error::AttemptsExhausted { attempts: 1, .. }),
        "{err:?}"
    );
    assert_eq!(rig.calls(), 1);
}

// ---- Retry-After ----------------------------------------------------------

async fn elapsed_with_retry_after(retry_after: String, max: Option<Duration>) -> Duration {
    let log = HttpLog::default();
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .endpoint(
            "a",
            http_replica(log.clone(), 503, Some(retry_after.clone()), 1),
        )
        .endpoint("b", http_replica(log.clone(), 503, Some(retry_after), 1))
        .build()
        .unwrap();
    let mut builder = RetryLayer::builder().classify(Classifier::new());
    if let Some(max) = max {
        builder = builder.max_retry_after(max);
    }
    let mut svc = builder.build().unwrap().layer(lb);
    let start = Instant::now();
    let res = svc
        .ready()
        .await
        .unwrap()
        .call(request(http::Method::GET))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(log.lock().unwrap().len(), 2);
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn retry_after_seconds_is_obeyed_and_capped() {
    // 2 s is longer than any backoff draw (≤ 25 ms): the wait is 2 s.
    assert_eq!(
        elapsed_with_retry_after("2".into(), None).await,
        Duration::from_secs(2)
    );
    // The layer's cap.
    assert_eq!(
        elapsed_with_retry_after("20".into(), Some(Duration::from_secs(1))).await,
        Duration::from_secs(1)
    );
    // The classifier's cap (30 s) on an hour-long hint.
    assert_eq!(
        elapsed_with_retry_after("3600".into(), None).await,
        tower_lb::classify::MAX_RETRY_AFTER
    );
    // Zero: only the backoff.
    assert!(elapsed_with_retry_after("0".into(), None).await <= retry::DEFAULT_BASE);
}

#[tokio::test(start_paused = true)]
async fn retry_after_http_date_is_obeyed_and_capped() {
    // HTTP dates have one-second resolution: "now + 3 s" is 2..=3 s away.
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
    let waited = elapsed_with_retry_after(date, None).await;
    assert!(
        (Duration::from_secs(2)..=Duration::from_secs(3)).contains(&waited),
        "{waited:?}"
    );
    let far = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(86_400));
    assert_eq!(
        elapsed_with_retry_after(far, Some(Duration::from_secs(5))).await,
        Duration::from_secs(5)
    );
    let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(60));
    assert!(elapsed_with_retry_after(past, None).await <= retry::DEFAULT_BASE);
}

// ---- timeouts -------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn per_try_timeout_cancels_and_retries_elsewhere() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [
            ("slow", Mode::Slow(Duration::from_secs(5))),
            ("fast", Mode::Slow(10 * MS))
        ]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .per_try_timeout(100 * MS)
        .backoff(Backoff::new(MS, MS))
        .build()
        .unwrap();
    let start = Instant::now();
    let served = layer.layer(lb.clone()).oneshot(1).await.unwrap();
    assert_eq!(served, "fast");
    let took = start.elapsed();
    assert!((110 * MS..=111 * MS).contains(&took), "{took:?}");
    assert_eq!(layer.stats().try_timeouts(), 1);
    assert_eq!(
        rig.cancelled.0.load(Ordering::SeqCst),
        1,
        "the slow call was dropped"
    );
    assert_eq!(in_flight(&lb), 0);
}

#[tokio::test(start_paused = true)]
async fn per_try_timeout_on_every_attempt_reports_try_timeout() {
    let rig = Rig::new();
    let slow = Mode::Slow(Duration::from_secs(5));
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", slow), ("b", slow), ("c", slow)]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .per_try_timeout(100 * MS)
        .build()
        .unwrap();
    let err = layer.layer(lb.clone()).oneshot(1).await.unwrap_err();
    assert!(
        matches!(err, retry::Error::TryTimeout { attempts: 3 }),
        "{err:?}"
    );
    assert_eq!(layer.stats().try_timeouts(), 3);
    assert_eq!(rig.cancelled.0.load(Ordering::SeqCst), 3);
    assert_eq!(in_flight(&lb), 0);
}

#[tokio::test(start_paused = true)]
async fn overall_deadline_cancels_the_running_attempt() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", Mode::Slow(Duration::from_secs(10)))]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .deadline(250 * MS)
        .build()
        .unwrap();
    let start = Instant::now();
    let err = layer.layer(lb.clone()).oneshot(1).await.unwrap_err();
    assert_eq!(start.elapsed(), 250 * MS);
    assert!(
        matches!(
            err,
            retry::Error::DeadlineElapsed {
                attempts: 1,
                last: None
            }
        ),
        "{err:?}"
    );
    assert_eq!(layer.stats().deadlines(), 1);
    assert_eq!(rig.cancelled.0.load(Ordering::SeqCst), 1);
    assert_eq!(in_flight(&lb), 0);
}

/// The deadline also bounds retries: a failing request whose next backoff
/// would end after the deadline returns at once instead of sleeping in vain.
#[tokio::test(start_paused = true)]
async fn overall_deadline_stops_retries_that_cannot_finish() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", Mode::Fail), ("b", Mode::Fail)]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .backoff(Backoff::new(Duration::from_secs(1), Duration::from_secs(1)))
        .max_attempts(10)
        .deadline(Duration::from_millis(1_500))
        .build()
        .unwrap();
    let start = Instant::now();
    let err = layer.layer(lb).oneshot(1).await.unwrap_err();
    let retry::Error::DeadlineElapsed {
        attempts,
        last: Some(_),
    } = err
    else {
        panic!("{err:?}");
    };
    assert!(start.elapsed() < Duration::from_millis(1_500));
    assert_eq!(attempts as usize, rig.calls());
    assert!(attempts >= 2, "{attempts}");
}

// ---- hedging --------------------------------------------------------------

/// A slow first endpoint and a fast second: the hedge answers first, the slow
/// call is cancelled, and every endpoint's in-flight count returns to 0.
#[tokio::test(start_paused = true)]
async fn hedge_wins_and_the_slow_call_is_cancelled() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [
            ("slow", Mode::Slow(Duration::from_secs(1))),
            ("fast", Mode::Slow(10 * MS))
        ]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .hedge(Hedge::fixed(50 * MS))
        .build()
        .unwrap();
    let mut svc = layer.layer(lb.clone());
    let fut = svc.ready().await.unwrap().call(1);
    let start = Instant::now();
    // Watch in-flight while the race runs.
    let handle = tokio::spawn(fut);
    tokio::time::sleep(55 * MS).await;
    assert_eq!(
        in_flight(&lb),
        2,
        "the first attempt and the hedge are in flight"
    );
    let served = handle.await.unwrap().unwrap();
    assert_eq!(served, "fast");
    assert_eq!(start.elapsed(), 60 * MS);
    assert_eq!(layer.stats().hedges(), 1);
    assert_eq!(layer.stats().retries(), 0);
    assert_eq!(
        rig.cancelled.0.load(Ordering::SeqCst),
        1,
        "the slow call was dropped"
    );
    assert_eq!(in_flight(&lb), 0);
    assert_eq!(rig.attempts()[&1], ["slow", "fast"]);
}

/// A hedge that fails does not end the request: the first attempt is still
/// running and its answer is taken.
#[tokio::test(start_paused = true)]
async fn a_failed_hedge_waits_for_the_first_attempt() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("slow", Mode::Slow(100 * MS)), ("bad", Mode::Fail)]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .hedge(Hedge::fixed(20 * MS))
        .build()
        .unwrap();
    let start = Instant::now();
    assert_eq!(layer.layer(lb.clone()).oneshot(1).await.unwrap(), "slow");
    assert_eq!(start.elapsed(), 100 * MS);
    assert_eq!(layer.stats().hedges(), 1);
    assert_eq!(layer.stats().retries(), 0);
    assert_eq!(rig.attempts()[&1], ["slow", "bad"]);
    assert_eq!(in_flight(&lb), 0);
}

/// Hedges spend from the retry budget: with it empty, no hedge is sent and
/// the request waits for the slow endpoint.
#[tokio::test(start_paused = true)]
async fn hedges_stop_when_the_budget_is_empty() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [
            ("slow", Mode::Slow(Duration::from_secs(1))),
            ("fast", Mode::Slow(10 * MS))
        ]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .hedge(Hedge::fixed(50 * MS))
        .budget(Budget::new(Duration::from_secs(10), 1, 0.0).unwrap())
        .build()
        .unwrap();
    let mut svc = layer.layer(lb.clone());
    // The floor allows ten retries over the ttl: ten requests hedge
    // (round robin starts each on "slow", its hedge goes to "fast")...
    for id in 0..10 {
        assert_eq!(svc.ready().await.unwrap().call(id).await.unwrap(), "fast");
    }
    assert_eq!(layer.stats().hedges(), 10);
    // ...and the eleventh does not.
    let start = Instant::now();
    assert_eq!(svc.ready().await.unwrap().call(100).await.unwrap(), "slow");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(layer.stats().hedges(), 10);
    assert_eq!(layer.stats().budget_exhausted(), 1);
    assert_eq!(in_flight(&lb), 0);
}

/// The percentile delay follows recent latency: after a run of 10 ms answers
/// the hedge fires at about 10 ms, not at the 1 s used before samples exist.
#[tokio::test(start_paused = true)]
async fn percentile_hedge_delay_tracks_recent_latency() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", Mode::Slow(10 * MS)), ("b", Mode::Slow(10 * MS))]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .hedge(Hedge::percentile(0.95))
        .budget(Budget::new(Duration::from_secs(10), 1_000, 1.0).unwrap())
        .build()
        .unwrap();
    let mut svc = layer.layer(lb.clone());
    for id in 0..retry::DEFAULT_HEDGE_MIN_SAMPLES as u32 {
        svc.ready().await.unwrap().call(id).await.unwrap();
    }
    assert_eq!(layer.stats().hedges(), 0);
    // Swap in a slow endpoint; the next request picked onto it is hedged
    // after ~p95 (10 ms), and the fast one answers 10 ms later.
    let handle = lb.handle();
    handle.remove(&"a");
    handle.insert(
        "a",
        replica(
            "a",
            Mode::Slow(Duration::from_secs(5)),
            rig.log.clone(),
            rig.cancelled.clone(),
        ),
    );
    let mut hedged_at = None;
    for id in 100..104 {
        let start = Instant::now();
        svc.ready().await.unwrap().call(id).await.unwrap();
        if layer.stats().hedges() == 1 && hedged_at.is_none() {
            hedged_at = Some(start.elapsed());
        }
    }
    assert_eq!(hedged_at, Some(20 * MS));
    assert_eq!(in_flight(&lb), 0);
}

// ---- configuration ----------------------------------------------------------

#[test]
fn every_config_error_names_its_field() {
    let ms = Duration::from_millis;
    let b = RetryLayer::builder;
    let field = |r: Result<RetryLayer, tower_lb::ConfigError>| r.unwrap_err().field();
    assert_eq!(field(b().max_attempts(0).build()), "max_attempts");
    assert_eq!(
        field(b().max_attempts(retry::MAX_ATTEMPTS + 1).build()),
        "max_attempts"
    );
    assert_eq!(
        field(b().per_try_timeout(Duration::ZERO).build()),
        "per_try_timeout"
    );
    assert_eq!(field(b().deadline(Duration::ZERO).build()), "deadline");
    assert_eq!(
        field(b().max_retry_after(Duration::from_secs(3601)).build()),
        "max_retry_after"
    );
    assert_eq!(
        field(b().hedge(Hedge::fixed(Duration::ZERO)).build()),
        "hedge.delay"
    );
    assert_eq!(
        field(b().hedge(Hedge::percentile(0.0)).build()),
        "hedge.percentile"
    );
    assert_eq!(
        field(b().hedge(Hedge::percentile(1.01)).build()),
        "hedge.percentile"
    );
    assert_eq!(
        field(
            b().hedge(Hedge::percentile(0.9).min_delay(Duration::ZERO))
                .build()
        ),
        "hedge.min_delay"
    );
    assert_eq!(
        field(
            b().hedge(Hedge::percentile(0.9).min_delay(ms(2)).max_delay(ms(1)))
                .build()
        ),
        "hedge.max_delay"
    );
    assert_eq!(
        field(b().hedge(Hedge::percentile(0.9).min_samples(0)).build()),
        "hedge.min_samples"
    );
    assert_eq!(
        field(
            b().hedge(Hedge::percentile(0.9).min_samples(retry::HEDGE_WINDOW + 1))
                .build()
        ),
        "hedge.min_samples"
    );
    assert_eq!(
        field(b().backoff(Backoff::new(Duration::ZERO, ms(1))).build()),
        "backoff.base"
    );
    assert_eq!(
        field(b().backoff(Backoff::new(ms(2), ms(1))).build()),
        "backoff.cap"
    );
    let ttl = Duration::from_secs(10);
    assert_eq!(
        Budget::new(ms(999), 10, 0.2).unwrap_err().field(),
        "budget.ttl"
    );
    assert_eq!(
        Budget::new(Duration::from_secs(61), 10, 0.2)
            .unwrap_err()
            .field(),
        "budget.ttl"
    );
    assert_eq!(
        Budget::new(ttl, 1_000_001, 0.2).unwrap_err().field(),
        "budget.min_per_sec"
    );
    assert_eq!(
        Budget::new(ttl, 10, -0.01).unwrap_err().field(),
        "budget.ratio"
    );
    assert_eq!(
        Budget::new(ttl, 10, f64::INFINITY).unwrap_err().field(),
        "budget.ratio"
    );
    assert_eq!(
        Classifier::new()
            .slow_threshold(Duration::ZERO)
            .unwrap_err()
            .field(),
        "slow_threshold"
    );
    assert_eq!(
        Classifier::new()
            .max_retry_after(Duration::from_secs(3601))
            .unwrap_err()
            .field(),
        "max_retry_after"
    );
    // The messages name field, value and range.
    let e = b().max_attempts(0).build().unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid `max_attempts` = 0: must be within 1 ..= 10"
    );
    // Every default builds.
    assert!(
        b().hedge(Hedge::percentile(retry::DEFAULT_HEDGE_PERCENTILE))
            .build()
            .is_ok()
    );
}

// ---- allocation -------------------------------------------------------------

// Heap allocations made by the current thread (the binary's counting
// allocator, `counting.rs`).
use crate::counting::allocations as allocs;

/// A request answered by its first attempt allocates nothing in the retry
/// layer (nor in `Balance`): no boxing, tried ids inline, no timer touched.
#[test]
fn a_single_attempt_does_not_allocate() {
    let rig = Rig::new();
    let lb = balance!(
        rig,
        pick::RoundRobin::new(),
        [("a", Mode::Ok), ("b", Mode::Ok)]
    );
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .per_try_timeout(Duration::from_secs(1))
        .hedge(Hedge::fixed(Duration::from_millis(100)))
        .build()
        .unwrap();
    let mut svc = layer.layer(lb);
    // Warm up: the log's Vec grows; give it room first.
    rig.log.lock().unwrap().reserve(100);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    // One warm-up request (thread locals initialise lazily), then none.
    let _ = std::pin::pin!(svc.call(100)).poll(&mut cx);
    let before = allocs();
    for id in 0..10 {
        let mut fut = std::pin::pin!(svc.call(id));
        assert!(matches!(
            fut.as_mut().poll(&mut cx),
            std::task::Poll::Ready(Ok(_))
        ));
    }
    assert_eq!(allocs() - before, 0);
    assert_eq!(rig.calls(), 11);
}

/// 10,000 requests whose attempts take 10–19 ms (90%) or 150–249 ms (10%),
/// drawn per request and endpoint: the percentile delay stays within 10% of
/// the true p95 of an attempt (200 ms) from the first thousand on. A hedge
/// sent at 200 ms often wins against a 240 ms first attempt; counting only
/// the winner (15 ms) hides the slow tail, lowers the delay, hedges more and
/// drifts down. Lost and cancelled attempts count as lower bounds instead.
#[tokio::test(start_paused = true)]
async fn percentile_hedge_delay_stays_at_the_true_p95() {
    fn latency(id: u32, endpoint: u32) -> Duration {
        let mut x = u64::from(id) << 8 | u64::from(endpoint);
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 31;
        let (tail, spread) = (x % 100 < 10, (x / 100) % 100);
        Duration::from_millis(if tail { 150 + spread } else { 10 + spread % 10 })
    }
    let endpoint = |e: u32| {
        service_fn(move |id: u32| async move {
            tokio::time::sleep(latency(id, e)).await;
            Ok::<_, io::Error>(id)
        })
    };
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .endpoint(0u32, endpoint(0))
        .endpoint(1u32, endpoint(1))
        .seed(7)
        .build()
        .unwrap();
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .hedge(Hedge::percentile(0.95))
        .budget(Budget::new(Duration::from_secs(10), 1_000, 1.0).unwrap())
        .build()
        .unwrap();
    let mut svc = layer.layer(lb);
    // The true p95 of one attempt: 90% below 150 ms, then 0.1% per ms.
    let p95 = 200.0;
    let mut worst: f64 = 0.0;
    for id in 0..10_000u32 {
        svc.ready().await.unwrap().call(id).await.unwrap();
        if id >= 1_000 && id % 100 == 0 {
            let d = layer.hedge_delay().unwrap().as_secs_f64() * 1e3;
            worst = worst.max((d - p95).abs() / p95);
        }
    }
    assert!(
        worst <= 0.10,
        "the delay strayed {:.1}% from p95",
        worst * 100.0
    );
    assert!(layer.stats().hedges() > 0);
}
