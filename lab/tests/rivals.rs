//! The rivals run as their authors document them (issue 37): loadpace's
//! seeded endpoint against loadpace-tower's own, its shed requests and 5xx
//! answers counted as failures, a sim row that repeats, endpoints wrapped
//! when discovered, and tower's `Retry` on the rivals where tower-lb's rows
//! retry.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use tokio::time::Instant;
use tower::balance::p2c::Balance;
use tower::discover::Change;
use tower::{Service, ServiceExt};
use tower_lb_lab as lab;

use common::{options, parse, row};
use lab::driver::run_scenario;
use lab::rivals::discover::{Wrapped, channel};
use lab::rivals::loadpace::Paced;
use lab::rivals::{Seeded, config};
use lab::run::message::{EndpointError, LabRequest, LabResponse};
use lab::run::replica::body::LabBody;
use lab::scenario::random::Rng;
use lab::scenario::{Rival, Scenario};

/// A replica answering 200 after `ms`.
fn replica(
    ms: u64,
) -> impl Service<
    LabRequest,
    Response = LabResponse,
    Error = EndpointError,
    Future = impl Send + 'static,
> + Send
+ 'static {
    tower::service_fn(move |_req: LabRequest| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, EndpointError>(http::Response::new(LabBody::Done))
    })
}

/// Sends 1,500 requests 2 ms apart through `lb` (three endpoints), and
/// returns when each finished (ms since the start) and how.
async fn drive<S>(mut lb: S) -> Vec<(u64, bool)>
where
    S: Service<LabRequest, Response = LabResponse> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    let out = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for k in 0..1500u64 {
        tokio::time::sleep_until(start + Duration::from_millis(2 * k)).await;
        let f = lb
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(Full::new(Bytes::new())));
        let out = out.clone();
        tasks.push(tokio::spawn(async move {
            let ok = f.await.is_ok();
            let t = start.elapsed().as_millis() as u64;
            out.lock().unwrap().push((k, t, ok));
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut v = out.lock().unwrap().clone();
    v.sort();
    v.into_iter().map(|(_, t, ok)| (t, ok)).collect()
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn the_seeded_endpoint_does_what_loadpace_towers_does() {
    // Probes off: then nothing is random, and the two adapters must pace,
    // admit and complete every request at the same instants.
    let mut cfg = loadpace::EndpointConfig::default();
    cfg.probe_schedule.positive_probability = 0.0;
    cfg.probe_schedule.negative_probability = 0.0;
    let theirs = paused().block_on(async {
        let eps =
            [2, 5, 9].map(|ms| loadpace_tower::AdaptiveEndpoint::new(replica(ms), cfg.clone()));
        let d = tower::discover::ServiceList::new(eps);
        drive(Balance::from_rng(d, Seeded(Rng::new(7)))).await
    });
    let ours = paused().block_on(async {
        let eps = [2, 5, 9].map(|ms| Paced::new(replica(ms), cfg.clone(), 1));
        let d = tower::discover::ServiceList::new(eps);
        drive(Balance::from_rng(d, Seeded(Rng::new(7)))).await
    });
    assert_eq!(theirs.len(), 1500);
    assert_eq!(ours, theirs);
    // With probes on, the seeded endpoint repeats.
    let seeded = || {
        paused().block_on(async {
            let c = loadpace::EndpointConfig::default();
            let eps = [2, 5, 9].map(|ms| Paced::new(replica(ms), c.clone(), 3));
            let d = tower::discover::ServiceList::new(eps);
            drive(Balance::from_rng(d, Seeded(Rng::new(7)))).await
        })
    };
    assert_eq!(seeded(), seeded());
}

/// Two 10 ms replicas of 4 workers under an open loop at 1.5 times their
/// capacity: loadpace's horizon fills and its `LoadShed` refuses.
const OVERLOAD: &str = r#"
name = "t"
duration = "5s"
pickers = ["loadpace"]
[load]
utilization = 1.5
clients = 2
drain = "2s"
[[backend]]
name = "a"
count = 2
delay = "10ms"
workers = 4
"#;

#[test]
fn loadpace_shed_requests_count_as_errors() {
    let sc = parse(OVERLOAD);
    let r = run_scenario(&sc, &options(&["loadpace"], 5, 1)).unwrap();
    let x = row(&r, "loadpace");
    let shed = x.errors_by.get("shed").copied().unwrap_or(0);
    assert!(shed > 0, "{}", r.table());
    assert_eq!(x.errors, x.errors_by.values().sum::<u64>(), "{}", r.table());
    assert!(x.errors >= shed);
    let rate = x.errors as f64 / x.requests as f64;
    assert!((x.error_rate - rate).abs() < 1e-5, "{}", r.table());
    // Every arrival of the window is counted, shed or answered.
    let open = x.open.as_ref().unwrap();
    let arrivals = (open.rate * r.duration_s).round() as u64;
    assert_eq!(x.requests + open.unfinished, arrivals, "{}", r.table());
    assert!(r.table().contains("loadpace (defaults, rival)"));
}

#[test]
fn a_loadpace_sim_row_repeats() {
    let sc = Scenario::load("steady-fleet").unwrap();
    let run = || {
        let r = run_scenario(&sc, &options(&["loadpace", "loadpace_tuned"], 2, 4)).unwrap();
        r.to_json()
    };
    assert_eq!(run(), run());
}

/// server-2 answers 503 at once from the start.
const FAILING: &str = r#"
name = "t"
duration = "5s"
pickers = ["loadpace"]
[load]
vus = 20
think = "10ms"
[[backend]]
name = "server-1"
delay = "10ms"
workers = 8
[[backend]]
name = "server-2"
delay = "10ms"
workers = 8
events = [{ at = "0s", error_rate = 1.0, status = 503, error_delay = "1ms" }]
"#;

#[test]
fn loadpace_counts_a_5xx_answer_as_a_failure() {
    // Counted as successes, 503s in 1 ms would look like the fastest
    // replica; counted as failures, they cut its operating point.
    let r = run_scenario(&parse(FAILING), &options(&["loadpace"], 5, 1)).unwrap();
    let x = row(&r, "loadpace");
    assert!(x.share[1] < 0.2, "{:?}\n{}", x.share, r.table());
}

#[test]
fn the_tuned_row_sets_initial_rtt_and_concurrency_for_the_scenario() {
    let sc = Scenario::load("scale-out").unwrap();
    let c = config(Rival::LoadpaceTuned, &sc);
    assert_eq!(c.latency.initial_rtt, Duration::from_millis(20));
    assert_eq!(c.gradient.initial_concurrency, 8.0);
    let d = config(Rival::Loadpace, &sc);
    assert_eq!(d.gradient.initial_concurrency, 1.0);
    let fleet = Scenario::load("noisy-fleet").unwrap();
    let c = config(Rival::LoadpaceTuned, &fleet);
    assert!((c.gradient.initial_concurrency - 0.4).abs() < 1e-12);
}

#[test]
fn an_endpoint_is_wrapped_when_its_balancer_discovers_it() {
    paused().block_on(async {
        let (tx, ch) = channel::<u32>();
        let start = Instant::now();
        let mut d = Wrapped::new(ch, move |_, v| (v, start.elapsed()));
        tokio::time::sleep(Duration::from_secs(10)).await;
        tx.send(Change::Insert(3, 7)).unwrap();
        let got = std::future::poll_fn(|cx| {
            futures_core::Stream::poll_next(std::pin::Pin::new(&mut d), cx)
        })
        .await;
        let Some(Ok(Change::Insert(3, (7, at)))) = got else {
            panic!("an insertion");
        };
        assert_eq!(at, Duration::from_secs(10));
    });
}

#[test]
fn rivals_retry_with_towers_retry_where_tower_lb_retries() {
    let sc = Scenario::load("failover").unwrap();
    let r = run_scenario(&sc, &options(&["tower_p2c", "loadpace"], 20, 1)).unwrap();
    for name in ["tower_p2c", "loadpace"] {
        let x = row(&r, name);
        assert!(x.retries.unwrap_or(0) > 0, "{name}\n{}", r.table());
        assert!(x.rival.as_deref().unwrap().contains("tower Retry"));
    }
    let mut bare = sc.clone();
    bare.resilience.retry = None;
    let b = run_scenario(&bare, &options(&["tower_p2c"], 20, 1)).unwrap();
    let (with, without) = (row(&r, "tower_p2c"), row(&b, "tower_p2c"));
    assert_eq!(without.retries, None);
    assert!(with.errors < without.errors, "{}\n{}", r.table(), b.table());
}
