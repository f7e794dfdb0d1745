//! gRPC as first-class traffic, against real tonic servers on 127.0.0.1:
//! statuses in headers and trailers, streams holding their slots, A6
//! retries (pushback, grpc-timeout), and balancer errors as statuses.

use std::time::Duration;

use crate::grpc_server::{Echo, Reply, Server, open_stream, say, say_with, start};
use tokio::time::Instant;
use tonic::Code;
use tower::ServiceBuilder;
use tower_lb::breaker::{CircuitBreakerConfig, State};
use tower_lb::grpc::{self, StatusLayer};
use tower_lb::http::Origin;
use tower_lb::pick;
use tower_lb::retry::RetryLayer;

type Lb = tower_lb::Balance<Origin, tonic::transport::Channel, pick::RoundRobin, grpc::Classifier>;

fn lb(servers: &[&Server]) -> Lb {
    grpc::balance(servers.iter().map(|s| s.origin.as_str()))
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap()
}

fn states(lb: &Lb) -> Vec<(String, std::sync::Arc<tower_lb::endpoint::EndpointState>)> {
    lb.handle()
        .endpoints()
        .into_iter()
        .map(|(k, s)| (k.to_string(), s))
        .collect()
}

fn failures(lb: &Lb, server: &Server) -> u64 {
    states(lb)
        .into_iter()
        .find(|(k, _)| *k == server.origin)
        .map(|(_, s)| s.failures())
        .unwrap()
}

fn in_flight(lb: &Lb) -> usize {
    states(lb).iter().map(|(_, s)| s.in_flight()).sum()
}

/// Waits on the real clock (sockets) until `done`, failing after 10 s.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn unavailable_in_headers_and_trailers_fails_the_endpoint_not_found_does_not() {
    let headers = start("h", |_| Reply::Fail(Code::Unavailable, None)).await;
    let trailers = start("t", |_| Reply::Stream {
        hold: Duration::ZERO,
        end: Code::Unavailable,
    })
    .await;
    let not_found = start("n", |_| Reply::Fail(Code::NotFound, None)).await;
    let lb = grpc::balance(
        [&headers, &trailers, &not_found]
            .iter()
            .map(|s| s.origin.as_str()),
    )
    .unwrap()
    .picker(pick::RoundRobin::new())
    .circuit_breaker(
        CircuitBreakerConfig::builder()
            .minimum_calls(3)
            .failure_rate_threshold(50.0)
            .open_wait(Duration::from_secs(60))
            .build()
            .unwrap(),
    )
    .build()
    .unwrap();
    for i in 0..9 {
        // Round robin: h, t, n, h, t, n, ... The stream is read to its end.
        match i % 3 {
            1 => {
                let mut s = open_stream(lb.clone(), "x").await.unwrap();
                assert!(s.message().await.unwrap().is_some());
                let end = s.message().await.unwrap_err();
                assert_eq!(end.code(), Code::Unavailable);
            }
            _ => {
                let _ = say(lb.clone(), "x").await.unwrap_err();
            }
        }
    }
    eventually("every call recorded", || in_flight(&lb) == 0).await;
    assert_eq!(failures(&lb, &headers), 3, "UNAVAILABLE in headers");
    assert_eq!(failures(&lb, &trailers), 3, "UNAVAILABLE in trailers");
    assert_eq!(failures(&lb, &not_found), 0, "NOT_FOUND is the caller's");
    let breaker = |s: &Server| {
        states(&lb)
            .into_iter()
            .find(|(k, _)| *k == s.origin)
            .and_then(|(_, st)| st.breaker().map(|b| b.state()))
            .unwrap()
    };
    assert_eq!(breaker(&headers), State::Open);
    assert_eq!(breaker(&trailers), State::Open);
    assert_eq!(breaker(&not_found), State::Closed);
    let est = |s: &Server| {
        states(&lb)
            .into_iter()
            .find(|(k, _)| *k == s.origin)
            .map(|(_, st)| st.estimate(Instant::now()).failure_rate)
            .unwrap()
    };
    let (h, t) = (est(&headers), est(&trailers));
    assert!(h > 0.0 && t > 0.0, "failure ratios rise: {h} {t}");
    assert_eq!(est(&not_found), 0.0);
}

#[tokio::test]
async fn open_streams_hold_their_endpoints_slots_until_they_end_or_drop() {
    let hold = Duration::from_millis(400);
    let mut servers = Vec::new();
    for name in ["a", "b", "c"] {
        servers.push(
            start(name, move |_| Reply::Stream {
                hold,
                end: Code::Ok,
            })
            .await,
        );
    }
    let lb = lb(&servers.iter().collect::<Vec<_>>());
    let mut streams = Vec::new();
    for _ in 0..9 {
        let mut s = open_stream(lb.clone(), "x").await.unwrap();
        assert!(s.message().await.unwrap().is_some());
        streams.push(s);
    }
    assert_eq!(in_flight(&lb), 9, "nine open streams");
    for (_, s) in states(&lb) {
        assert_eq!(s.in_flight(), 3, "spread over three endpoints");
    }
    // Three are dropped by their callers; the rest end with the server.
    streams.truncate(6);
    eventually("dropped streams release", || in_flight(&lb) == 6).await;
    for mut s in streams {
        assert!(s.message().await.unwrap().is_none(), "the stream ends OK");
    }
    eventually("ended streams release", || in_flight(&lb) == 0).await;
    assert!(states(&lb).iter().all(|(_, s)| s.failures() == 0));
}

#[tokio::test]
async fn unavailable_is_retried_on_another_endpoint() {
    let down = start("down", |_| Reply::Fail(Code::Unavailable, None)).await;
    let up = start("up", |_| Reply::Ok).await;
    let lb = lb(&[&down, &up]);
    let retry = RetryLayer::builder().build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(retry.clone())
        .service(lb.clone());
    for i in 0..4 {
        assert_eq!(
            say(stack.clone(), &i.to_string()).await.unwrap(),
            format!("up:{i}")
        );
    }
    // Every call that began on `down` went on to `up` (round robin's own
    // step and the retry's avoid hint alternate them).
    let began_down = down.calls.load(std::sync::atomic::Ordering::SeqCst);
    assert!(began_down >= 1);
    assert_eq!(retry.stats().retries(), began_down as u64);
    eventually("recorded", || in_flight(&lb) == 0).await;
    assert_eq!(failures(&lb, &down), began_down as u64);
}

#[tokio::test(start_paused = true)]
async fn pushback_sets_the_retry_delay_and_a_malformed_one_stops_retries() {
    let slow_down = start("a", |n| match n {
        0 => Reply::Fail(Code::Unavailable, Some("300")),
        _ => Reply::Fail(Code::Unavailable, Some("no")),
    })
    .await;
    let lb = lb(&[&slow_down]);
    let retry = RetryLayer::builder().max_attempts(5).build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(retry.clone())
        .service(lb);
    let start = Instant::now();
    let err = say(stack, "x").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    // Two attempts: the first asked for 300 ms, the second's malformed
    // pushback stopped the retries although three attempts were left.
    assert_eq!(slow_down.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(retry.stats().retries(), 1);
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(325),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn grpc_timeout_bounds_the_whole_call() {
    let hang = start("hang", |_| Reply::Hang).await;
    let lb = lb(&[&hang]);
    let retry = RetryLayer::builder().build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(retry.clone())
        .service(lb.clone());
    let mut req = tonic::Request::new(Echo { text: "x".into() });
    req.set_timeout(Duration::from_millis(200));
    let start = Instant::now();
    let err = say_with(stack, req).await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    assert_eq!(retry.stats().deadlines(), 1);
    assert_eq!(in_flight(&lb), 0);
}

/// Over the wire: the retry after a pushback tells the tonic server the
/// time the call has left, not the caller's whole timeout (real time, with
/// a second of slack for loopback and scheduling; the exact arithmetic is
/// `tests/it/retry_deadline.rs`'s, on the paused clock).
#[tokio::test]
async fn a_retry_tells_the_server_the_time_left() {
    let flaky = start("flaky", |n| match n {
        0 => Reply::Fail(Code::Unavailable, Some("100")),
        _ => Reply::Ok,
    })
    .await;
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(RetryLayer::builder().build().unwrap())
        .service(lb(&[&flaky]));
    let mut req = tonic::Request::new(Echo { text: "x".into() });
    req.set_timeout(Duration::from_secs(10));
    let began = Instant::now();
    say_with(stack, req).await.unwrap();
    let elapsed = began.elapsed();
    let sent: Vec<Duration> = flaky
        .timeouts
        .lock()
        .unwrap()
        .iter()
        .map(|t| {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-timeout", t.as_deref().unwrap().parse().unwrap());
            tower_lb::retry::grpc_timeout(&h).unwrap()
        })
        .collect();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], Duration::from_secs(10), "tonic's own header");
    // Sent at least 100 ms (the pushback) into the call, at most `elapsed`.
    let left = sent[1];
    assert!(left <= Duration::from_millis(9_900), "{left:?}");
    assert!(
        left + elapsed >= Duration::from_secs(10),
        "{left:?} {elapsed:?}"
    );
}

#[tokio::test]
async fn no_endpoints_is_unavailable_for_a_tonic_caller() {
    let lb = grpc::balance(Vec::<String>::new())
        .unwrap()
        .build()
        .unwrap();
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(RetryLayer::builder().max_attempts(1).build().unwrap())
        .service(lb);
    let err = say(stack, "x").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("no endpoints"), "{err:?}");
}

/// gRPC A6 hedging: one more attempt every delay; a non-fatal answer
/// (`UNAVAILABLE`) sends the next at once, a fatal one (`NOT_FOUND`) ends
/// the call and cancels the rest.
#[tokio::test(start_paused = true)]
async fn hedges_follow_a6_non_fatal_sends_the_next_fatal_stops() {
    use tower_lb::retry::Hedge;
    let slow = start("slow", |_| Reply::Hang).await;
    let unavailable = start("unavailable", |_| Reply::Fail(Code::Unavailable, None)).await;
    let ok = start("ok", |_| Reply::Ok).await;
    let lb = lb(&[&slow, &unavailable, &ok]);
    let retry = RetryLayer::builder()
        .hedge(Hedge::fixed(Duration::from_millis(50)).hedges(2))
        .build()
        .unwrap();
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(retry.clone())
        .service(lb.clone());
    let t = Instant::now();
    assert_eq!(say(stack, "x").await.unwrap(), "ok:x");
    assert_eq!(
        t.elapsed(),
        Duration::from_millis(50),
        "the second hedge went at once"
    );
    assert_eq!(retry.stats().hedges(), 2);
    eventually("the hanging attempt was cancelled", || in_flight(&lb) == 0).await;

    let not_found = start("nf", |_| Reply::Fail(Code::NotFound, None)).await;
    let lb = self::lb(&[&slow, &not_found, &ok]);
    let retry = RetryLayer::builder()
        .hedge(Hedge::fixed(Duration::from_millis(50)).hedges(2))
        .build()
        .unwrap();
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(retry.clone())
        .service(lb.clone());
    let t = Instant::now();
    assert_eq!(say(stack, "x").await.unwrap_err().code(), Code::NotFound);
    assert_eq!(t.elapsed(), Duration::from_millis(50));
    assert_eq!(retry.stats().hedges(), 1, "a fatal answer ends the call");
    assert_eq!(
        ok.calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "only the first run's"
    );
    eventually("cancelled", || in_flight(&lb) == 0).await;
}

#[allow(dead_code)]
#[path = "../../examples/tonic_client.rs"]
mod tonic_client;

#[tokio::test]
async fn the_tonic_example_retries_opens_the_breaker_and_tracks_the_stream() {
    let demo = tonic_client::run(6).await.unwrap();
    assert_eq!(demo.greetings.len(), 6);
    for (i, g) in demo.greetings.iter().enumerate() {
        assert!(g.ends_with(&format!("greets caller-{i}")), "{g}");
        assert!(!g.starts_with("replica-3"), "{g}");
    }
    assert!(demo.retries >= 1);
    assert_eq!(demo.bad_breaker, State::Open);
    assert_eq!(demo.counted.len(), 3);
    assert_eq!(demo.in_flight_while_streaming, 1);
    assert_eq!(demo.empty_pool, Code::Unavailable);
}

/// The documented field: every origin `grpc::balance` refuses (one that
/// does not parse, one tonic refuses, a duplicate) is reported on
/// `origins`, the name its docs give (issue 30, item 3).
#[tokio::test]
async fn a_bad_origin_is_reported_on_the_documented_field() {
    for bad in [
        vec![""],
        vec!["10.0.0.1:8080"],
        vec!["http://10.0.0.1:8080", "http://10.0.0.1:8080"],
    ] {
        let err = grpc::balance(bad.clone()).err().map(|e| e.field());
        assert_eq!(err, Some("origins"), "{bad:?}");
    }
}

/// `grpc::balance` outside a tokio runtime is a `ConfigError` on `runtime`
/// (tonic's channels spawn their worker when made), not a panic.
#[test]
fn balance_needs_a_runtime() {
    let e = grpc::balance(["http://127.0.0.1:50051"]).err().unwrap();
    assert_eq!(
        (e.field(), e.value()),
        ("runtime", "\"no tokio runtime\""),
        "{e}"
    );
}
