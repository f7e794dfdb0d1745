//! Behaviour of `Balance` and its pickers that users rely on, on tokio's
//! paused clock where time matters.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tower::discover::{Change, ServiceList};
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::pick::{self, PeakEwma};
use tower_lb::{Balance, ConfigError, Error, SlowStart};

type Svc = BoxCloneSyncService<(), &'static str, &'static str>;

/// An endpoint that answers with its name after `delay`.
fn fixed(name: &'static str, delay: Duration) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| async move {
        tokio::time::sleep(delay).await;
        Ok(name)
    }))
}

/// Runs `n` sequential calls and counts answers per endpoint name.
async fn tally<P>(lb: &mut Balance<&'static str, Svc, P>, n: usize) -> HashMap<&'static str, usize>
where
    P: pick::Pick<()>,
{
    let mut counts = HashMap::new();
    for _ in 0..n {
        let name = lb.ready().await.unwrap().call(()).await.unwrap();
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

#[tokio::test(start_paused = true)]
async fn round_robin_rotates_exactly() {
    let mut lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .endpoint("a", fixed("a", Duration::ZERO))
        .endpoint("b", fixed("b", Duration::ZERO))
        .endpoint("c", fixed("c", Duration::ZERO))
        .build()
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..9 {
        seen.push(lb.ready().await.unwrap().call(()).await.unwrap());
    }
    assert_eq!(seen, ["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn peak_ewma_honours_extreme_weights() {
    let mut lb = Balance::builder()
        .seed(1)
        .weighted_endpoint("a", fixed("a", Duration::from_millis(5)), 0.99)
        .weighted_endpoint("b", fixed("b", Duration::from_millis(5)), 0.005)
        .weighted_endpoint("c", fixed("c", Duration::from_millis(5)), 0.005)
        .build()
        .unwrap();
    let counts = tally(&mut lb, 2_000).await;
    // tower's weighted P2C gives the first endpoint about 66% here.
    assert!(counts["a"] >= 1_900, "{counts:?}");
}

/// Drives `workers` concurrent closed loops for `dur` of (paused) time.
async fn load<P>(
    lb: &Balance<&'static str, Svc, P>,
    workers: usize,
    dur: Duration,
) -> HashMap<&'static str, usize>
where
    P: pick::Pick<()>,
{
    let deadline = tokio::time::Instant::now() + dur;
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let mut lb = lb.clone();
        tasks.push(tokio::spawn(async move {
            let mut counts: HashMap<&'static str, usize> = HashMap::new();
            while tokio::time::Instant::now() < deadline {
                let r = lb.ready().await.unwrap().call(()).await;
                let key = match r {
                    Ok(name) => name,
                    Err(Error::Inner(name)) => name,
                    Err(e) => panic!("balancer error {e}"),
                };
                *counts.entry(key).or_insert(0) += 1;
            }
            counts
        }));
    }
    let mut total = HashMap::new();
    for t in tasks {
        for (k, v) in t.await.unwrap() {
            *total.entry(k).or_insert(0) += v;
        }
    }
    total
}

#[tokio::test(start_paused = true)]
async fn peak_ewma_shares_follow_weight_order_under_load() {
    let d = Duration::from_millis(10);
    let lb = Balance::builder()
        .seed(2)
        .weighted_endpoint("w6", fixed("w6", d), 6.0)
        .weighted_endpoint("w3", fixed("w3", d), 3.0)
        .weighted_endpoint("w2", fixed("w2", d), 2.0)
        .weighted_endpoint("w1", fixed("w1", d), 1.0)
        .build()
        .unwrap();
    let c = load(&lb, 24, Duration::from_secs(20)).await;
    assert!(
        c["w6"] > c["w3"] && c["w3"] > c["w2"] && c["w2"] > c["w1"],
        "{c:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn starved_endpoint_is_tried_again_within_bounded_time() {
    let slow_phase = Arc::new(AtomicBool::new(true));
    let flag = slow_phase.clone();
    // "b" is very slow at first, then as fast as "a".
    let b = BoxCloneSyncService::new(service_fn(move |()| {
        let slow = flag.load(Ordering::Relaxed);
        async move {
            let ms = if slow { 1_000 } else { 10 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok("b")
        }
    }));
    let mut lb = Balance::builder().seed(3).endpoint("b", b).build().unwrap();
    // "b" records its slow sample, then "a" joins.
    assert_eq!(lb.ready().await.unwrap().call(()).await.unwrap(), "b");
    lb.handle()
        .insert("a", fixed("a", Duration::from_millis(10)));
    slow_phase.store(false, Ordering::Relaxed);
    // "b"'s 1 s estimate would take 10 s·ln(100) ≈ 46 s to fade under
    // "a"'s 10 ms. It is stale once it is 1000 of "a"'s latencies old
    // (10 s): then "b" is tried again, at "a"'s cost.
    let start = tokio::time::Instant::now();
    loop {
        let who = lb.ready().await.unwrap().call(()).await.unwrap();
        if who == "b" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "b starved for 60 s"
        );
    }
    let waited = start.elapsed();
    assert!(
        (Duration::from_secs(9)..=Duration::from_secs(11)).contains(&waited),
        "{waited:?}: tried again once stale"
    );
}

#[tokio::test(start_paused = true)]
async fn fast_failing_endpoint_loses_share() {
    let failing = Arc::new(AtomicBool::new(false));
    let flag = failing.clone();
    let c = BoxCloneSyncService::new(service_fn(move |()| {
        let fail = flag.load(Ordering::Relaxed);
        async move {
            if fail {
                tokio::time::sleep(Duration::from_millis(1)).await;
                Err("c")
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok("c")
            }
        }
    }));
    let lb = Balance::builder()
        .seed(4)
        .endpoint("a", fixed("a", Duration::from_millis(20)))
        .endpoint("b", fixed("b", Duration::from_millis(20)))
        .endpoint("c", c)
        .build()
        .unwrap();
    let healthy = load(&lb, 12, Duration::from_secs(10)).await;
    failing.store(true, Ordering::Relaxed);
    let broken = load(&lb, 12, Duration::from_secs(10)).await;
    let share = |m: &HashMap<&str, usize>| m["c"] as f64 / m.values().sum::<usize>() as f64;
    assert!(share(&healthy) > 0.25, "{healthy:?}");
    // Without a failure penalty a 1 ms error looks 20× faster and wins most
    // picks; with it, "c" sinks well below its fair share.
    assert!(share(&broken) < 0.1, "{broken:?}");
}

#[tokio::test(start_paused = true)]
async fn typed_errors_come_at_once() {
    let mut empty: Balance<&str, Svc> = Balance::builder().build().unwrap();
    let r = empty.ready().await.unwrap().call(()).await;
    assert!(matches!(r, Err(Error::NoEndpoints)), "{r:?}");

    let lb = Balance::builder()
        .max_in_flight(1)
        .endpoint("a", fixed("a", Duration::from_secs(1)))
        .build()
        .unwrap();
    let held = lb.clone().oneshot(());
    let mut held = Box::pin(held);
    // Poll once so the request is dispatched and holds the only slot.
    assert!(futures_poll(&mut held).is_none());
    let r = lb.clone().oneshot(()).await;
    assert!(matches!(r, Err(Error::Overloaded)), "{r:?}");
    assert_eq!(held.await.unwrap(), "a");
    assert_eq!(lb.clone().oneshot(()).await.unwrap(), "a");
}

/// Polls a future once.
fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match std::pin::Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

#[tokio::test(start_paused = true)]
async fn removed_endpoint_drains_and_takes_no_new_picks() {
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .endpoint("a", fixed("a", Duration::from_millis(100)))
        .endpoint("b", fixed("b", Duration::from_millis(100)))
        .build()
        .unwrap();
    let handle = lb.handle();
    let a_state = handle.endpoints()[0].1.clone();
    let mut first = Box::pin(lb.clone().oneshot(()));
    assert!(futures_poll(&mut first).is_none());
    assert_eq!(a_state.in_flight(), 1);
    assert!(handle.remove(&"a"));
    assert!(!handle.remove(&"a"));
    for _ in 0..5 {
        assert_eq!(lb.clone().oneshot(()).await.unwrap(), "b");
    }
    // The request already on "a" finishes normally.
    assert_eq!(first.await.unwrap(), "a");
    assert_eq!(a_state.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn handle_inserts_reweights_and_replaces() {
    let mut lb = Balance::builder()
        .picker(pick::WeightedRoundRobin::new())
        .endpoint("a", fixed("a", Duration::ZERO))
        .build()
        .unwrap();
    let h = lb.handle();
    assert!(
        !h.insert_weighted("b", fixed("b", Duration::ZERO), 3.0)
            .unwrap()
    );
    let c = tally(&mut lb, 400).await;
    assert_eq!((c["a"], c["b"]), (100, 300), "{c:?}");
    assert!(h.set_weight(&"b", 1.0).unwrap());
    assert!(!h.set_weight(&"zzz", 1.0).unwrap());
    let c = tally(&mut lb, 400).await;
    assert_eq!((c["a"], c["b"]), (200, 200), "{c:?}");
    // Replacing a key swaps its service.
    assert!(h.insert("b", fixed("b2", Duration::ZERO)));
    let c = tally(&mut lb, 10).await;
    assert_eq!(c.get("b2"), Some(&5), "{c:?}");
    assert_eq!(h.len(), 2);
}

/// A `Discover` stream fed from a channel.
struct ChannelDiscover(tokio::sync::mpsc::UnboundedReceiver<Change<&'static str, Svc>>);

impl futures_core::Stream for ChannelDiscover {
    type Item = Result<Change<&'static str, Svc>, Infallible>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|o| o.map(Ok))
    }
}

#[tokio::test(start_paused = true)]
async fn discover_stream_drives_membership() {
    let lb: Balance<&'static str, Svc> = Balance::builder().build().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tower_lb::balance::spawn_discover(lb.handle(), ChannelDiscover(rx));
    tx.send(Change::Insert("a", fixed("a", Duration::ZERO)))
        .unwrap();
    tx.send(Change::Insert("b", fixed("b", Duration::ZERO)))
        .unwrap();
    tokio::task::yield_now().await;
    assert_eq!(lb.handle().len(), 2);
    tx.send(Change::Remove("a")).unwrap();
    tokio::task::yield_now().await;
    assert_eq!(lb.clone().oneshot(()).await.unwrap(), "b");
    drop(tx);
    driver.await.unwrap().unwrap();

    // The stock `ServiceList` works too.
    let lb2: Balance<usize, Svc> = Balance::builder().build().unwrap();
    let list = ServiceList::new([fixed("x", Duration::ZERO), fixed("y", Duration::ZERO)]);
    tower_lb::balance::discover(lb2.handle(), list)
        .await
        .unwrap();
    assert_eq!(lb2.handle().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn slow_start_ramps_each_endpoint_on_its_own_clock() {
    let ss = SlowStart::new(Duration::from_secs(10));
    let lb = Balance::builder()
        .slow_start(ss)
        .endpoint("a", fixed("a", Duration::ZERO))
        .build()
        .unwrap();
    let h = lb.handle();
    let now = tokio::time::Instant::now;
    assert_eq!(
        h.endpoints()[0].1.effective_weight(now()),
        1.0,
        "initial endpoints are not ramped"
    );
    h.insert("b", fixed("b", Duration::ZERO));
    let b = h.endpoints()[1].1.clone();
    assert!((b.effective_weight(now()) - 0.1).abs() < 1e-9);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert!((b.effective_weight(now()) - 0.5).abs() < 1e-6);
    // Another endpoint joining does not restart b's ramp.
    h.insert("c", fixed("c", Duration::ZERO));
    let c = h.endpoints()[2].1.clone();
    assert!((b.effective_weight(now()) - 0.5).abs() < 1e-6);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(b.effective_weight(now()), 1.0);
    assert!((c.effective_weight(now()) - 0.5).abs() < 1e-6);
}

/// A setting to check: a result, or a picker or slow-start setting,
/// checked by building a balancer with it.
trait Checked {
    fn checked(self) -> Result<(), ConfigError>;
}

impl<T> Checked for Result<T, ConfigError> {
    fn checked(self) -> Result<(), ConfigError> {
        self.map(drop)
    }
}

impl Checked for PeakEwma {
    fn checked(self) -> Result<(), ConfigError> {
        Balance::<&str, Svc>::builder()
            .picker(self)
            .build()
            .map(drop)
    }
}

impl Checked for SlowStart {
    fn checked(self) -> Result<(), ConfigError> {
        Balance::<&str, Svc>::builder()
            .slow_start(self)
            .build()
            .map(drop)
    }
}

#[test]
fn every_bad_configuration_is_a_config_error() {
    fn field(r: impl Checked) -> &'static str {
        match r.checked() {
            Ok(_) => panic!("accepted"),
            Err(e) => {
                assert!(e.to_string().contains(e.field()), "{e}");
                e.field()
            }
        }
    }
    let svc = || fixed("x", Duration::ZERO);
    for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let b = Balance::builder().weighted_endpoint("a", svc(), w).build();
        assert_eq!(field(b), "weight");
    }
    assert_eq!(
        field(
            Balance::<&str, Svc>::builder()
                .decay(Duration::ZERO)
                .build()
        ),
        "decay"
    );
    assert_eq!(
        field(Balance::<&str, Svc>::builder().max_in_flight(0).build()),
        "max_in_flight"
    );
    let dup = Balance::builder()
        .endpoint("a", svc())
        .endpoint("a", svc())
        .build();
    assert_eq!(field(dup), "endpoint");
    assert_eq!(field(PeakEwma::new().choices(0)), "choices");
    assert_eq!(
        field(PeakEwma::new().spread_factor(f64::NAN)),
        "spread_factor"
    );
    assert_eq!(field(SlowStart::new(Duration::ZERO)), "slow_start.window");
    let lb = Balance::builder().endpoint("a", svc()).build().unwrap();
    assert_eq!(
        field(lb.handle().insert_weighted("b", svc(), f64::NAN)),
        "weight"
    );
    assert_eq!(field(lb.handle().set_weight(&"a", 0.0)), "weight");
}

#[test]
fn concurrent_membership_changes_never_misroute() {
    // Two threads pick while a third inserts and removes endpoints. A pick
    // that begins after `remove` returned must never reach the removed one.
    let permanent = BoxCloneSyncService::new(service_fn(|()| async { Ok::<u64, &str>(u64::MAX) }));
    type Num = BoxCloneSyncService<(), u64, &'static str>;
    // Round robin, so transient endpoints get picks whatever their latency.
    let lb: Balance<u64, Num, pick::RoundRobin> = Balance::builder()
        .picker(pick::RoundRobin::new())
        .endpoint(u64::MAX, permanent)
        .build()
        .unwrap();
    let watermark = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let h = lb.handle();
        let (watermark, stop) = (watermark.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let svc: Num = BoxCloneSyncService::new(service_fn(move |()| async move { Ok(k) }));
                h.insert(k, svc);
                std::thread::yield_now();
                assert!(h.remove(&k));
                watermark.store(k + 1, Ordering::SeqCst);
                k += 1;
            }
            k
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (lb, watermark) = (lb.clone(), watermark.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let mut transient = 0;
                    for _ in 0..20_000 {
                        let floor = watermark.load(Ordering::SeqCst);
                        let got = lb.clone().oneshot(()).await.unwrap();
                        if got != u64::MAX {
                            transient += 1;
                            assert!(got >= floor, "picked {got} after it was removed ({floor})");
                        }
                    }
                    transient
                })
            })
        })
        .collect();
    let transient: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds > 0);
    // The check above is only meaningful if transient endpoints were picked.
    assert!(transient > 0, "no pick landed on a transient endpoint");
    assert_eq!(lb.handle().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn in_flight_returns_to_zero_after_100k_chaotic_requests() {
    // Endpoints answer after a random delay, sometimes with an error; callers
    // time out, or abandon the call after a random time.
    let chaotic = |seed: u64| {
        let rng = Arc::new(std::sync::Mutex::new(fastrand::Rng::with_seed(seed)));
        BoxCloneSyncService::new(service_fn(move |()| {
            let (ms, fail) = {
                let mut r = rng.lock().unwrap();
                (r.u64(0..20), r.u8(0..10) == 0)
            };
            async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if fail { Err("boom") } else { Ok("ok") }
            }
        }))
    };
    let lb = Balance::builder()
        .seed(9)
        .max_in_flight(400)
        .endpoint("a", chaotic(1))
        .endpoint("b", chaotic(2))
        .endpoint("c", chaotic(3))
        .endpoint("d", chaotic(4))
        .build()
        .unwrap();
    let mut rng = fastrand::Rng::with_seed(5);
    let (mut ok, mut err, mut cut) = (0, 0, 0);
    for _batch in 0..100 {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..1_000 {
            let lb = lb.clone();
            let limit = Duration::from_millis(rng.u64(1..25));
            let abandon = rng.bool();
            set.spawn(async move {
                let call = lb.oneshot(());
                if abandon {
                    // Dropped mid-flight by the select.
                    tokio::select! {
                        r = call => Some(r.is_ok()),
                        _ = tokio::time::sleep(limit) => None,
                    }
                } else {
                    match tokio::time::timeout(limit, call).await {
                        Ok(r) => Some(r.is_ok()),
                        Err(_) => None,
                    }
                }
            });
        }
        while let Some(r) = set.join_next().await {
            match r.unwrap() {
                Some(true) => ok += 1,
                Some(false) => err += 1,
                None => cut += 1,
            }
        }
    }
    assert_eq!(ok + err + cut, 100_000);
    assert!(ok > 0 && err > 0 && cut > 0, "{ok} {err} {cut}");
    for (k, s) in lb.handle().endpoints() {
        assert_eq!(s.in_flight(), 0, "endpoint {k} leaked");
    }
}

#[tokio::test(start_paused = true)]
async fn call_avoiding_steers_away_from_tried_endpoints() {
    use tower_lb::balance::call_avoiding;
    let lb = Balance::builder()
        .seed(11)
        .endpoint("a", fixed("a", Duration::ZERO))
        .endpoint("b", fixed("b", Duration::ZERO))
        .endpoint("c", fixed("c", Duration::ZERO))
        .build()
        .unwrap();
    let ids: HashMap<&str, u64> = lb
        .handle()
        .endpoints()
        .into_iter()
        .map(|(k, s)| (k, s.id()))
        .collect();
    for _ in 0..50 {
        let mut svc = lb.clone();
        let (fut, picked) = call_avoiding(&[ids["a"], ids["b"]], || svc.call(()));
        assert_eq!(fut.await.unwrap(), "c");
        assert_eq!(picked, Some(ids["c"]));
    }
    // With every endpoint tried, a repeat beats failing.
    let mut svc = lb.clone();
    let (fut, picked) = call_avoiding(&[ids["a"], ids["b"], ids["c"]], || svc.call(()));
    let who = fut.await.unwrap();
    assert_eq!(picked, Some(ids[who]));
    // Outside a scope nothing is reported and nothing is avoided.
    let (_, none) = call_avoiding(&[], || ());
    assert_eq!(none, None);
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_that_never_answers_is_avoided_once_calls_to_it_time_out() {
    // Calls to "hole" never finish; the caller's timeout abandons them, so
    // nothing is ever classified for it. Each abandoned call still tells the
    // model the endpoint took at least that long.
    let hole = BoxCloneSyncService::new(service_fn(|()| std::future::pending()));
    let lb = Balance::builder()
        .seed(12)
        .endpoint("a", fixed("a", Duration::from_millis(50)))
        .endpoint("hole", hole)
        .build()
        .unwrap();
    let mut timeouts = 0;
    for _ in 0..200 {
        match tokio::time::timeout(Duration::from_millis(200), lb.clone().oneshot(())).await {
            Ok(r) => assert_eq!(r.unwrap(), "a"),
            Err(_) => timeouts += 1,
        }
    }
    // Without the abandoned-call sample, "hole" keeps its 30 ms prior, looks
    // faster than "a" and takes every call.
    assert!(timeouts <= 5, "{timeouts} of 200 calls went into the hole");
    let (_, hole) = lb
        .handle()
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == "hole")
        .unwrap();
    assert_eq!(hole.in_flight(), 0);
}

/// The balancer's timeout: a call that answers before it is untouched (its
/// timer was armed when it first waited), one that does not fails with
/// `Error::Timeout` exactly at it, counted as a failure of its endpoint,
/// its slot given back. Paused clock.
#[tokio::test(start_paused = true)]
async fn timeout_fails_a_slow_call_at_the_deadline_and_spares_a_fast_one() {
    let mut lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .timeout(Duration::from_millis(100))
        .endpoint("fast", fixed("fast", Duration::from_millis(99)))
        .endpoint("slow", fixed("slow", Duration::from_millis(101)))
        .build()
        .unwrap();
    let states: HashMap<_, _> = lb.handle().endpoints().into_iter().collect();
    let mut answers = Vec::new();
    for _ in 0..4 {
        let start = tokio::time::Instant::now();
        let r = lb.ready().await.unwrap().call(()).await;
        answers.push((r.map_err(|e| e.to_string()), start.elapsed()));
    }
    let timed_out = answers.iter().filter(|(r, _)| r.is_err()).count();
    assert_eq!(timed_out, 2, "{answers:?}");
    for (r, took) in &answers {
        match r {
            Ok(name) => assert_eq!((*name, *took), ("fast", Duration::from_millis(99))),
            Err(_) => assert_eq!(*took, Duration::from_millis(100)),
        }
    }
    let err = loop {
        match lb.ready().await.unwrap().call(()).await {
            Err(e) => break e,
            Ok(_) => continue,
        }
    };
    assert!(matches!(err, Error::Timeout), "{err:?}");
    assert_eq!(states["slow"].failures(), 3);
    assert_eq!(states["fast"].failures(), 0);
    assert!(states.values().all(|s| s.in_flight() == 0));
}
