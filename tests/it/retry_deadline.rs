//! The time a call has left, sent on every attempt: the retry layer
//! rewrites `grpc-timeout` on each retry and hedge (gRPC A6), on tokio's
//! paused clock, over a real `Balance`.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::Balance;
use tower_lb::http::Classifier;
use tower_lb::retry::{Backoff, Hedge, RetryLayer, grpc_timeout};

const MS: Duration = Duration::from_millis(1);

/// What an endpoint saw of each attempt: when it came, and the time left
/// its `grpc-timeout` header gave (`None` without one).
type Seen = Arc<Mutex<Vec<(Duration, Option<Duration>)>>>;

/// An endpoint that answers each attempt after `delay` with 503 for the
/// first `fail_first` attempts, then 200.
fn replica(
    seen: Seen,
    start: Instant,
    delay: Duration,
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
            let mut seen = seen.lock().unwrap();
            seen.push((start.elapsed(), grpc_timeout(req.headers())));
            seen.len()
        };
        async move {
            tokio::time::sleep(delay).await;
            let mut res = http::Response::new(String::new());
            if n <= fail_first {
                *res.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
            }
            Ok(res)
        }
    })
}

fn grpc_call(timeout: Option<&str>) -> http::Request<String> {
    let mut req = http::Request::builder()
        .method(http::Method::POST)
        .uri("http://svc/pkg.Svc/Call")
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .body("payload".to_string())
        .unwrap();
    if let Some(t) = timeout {
        req.headers_mut().insert("grpc-timeout", t.parse().unwrap());
    }
    req
}

/// Whether `sent` is what an attempt arriving at `at` into a call with
/// `deadline` should be told: the time left, rounded up to the header's
/// unit (µs at this size).
fn tells_the_time_left(sent: Option<Duration>, at: Duration, deadline: Duration) -> bool {
    let left = deadline - at;
    sent.is_some_and(|s| s >= left && s - left < Duration::from_micros(1))
}

/// The whole-call deadline is 200 ms (the caller's `grpc-timeout`); each
/// attempt answers 503 after 30 ms, and the retries wait a backoff of up to
/// 10 ms: the second and third attempts tell the server the time the call
/// has left when they leave. The first keeps the caller's header.
#[tokio::test(start_paused = true)]
async fn each_retry_sends_the_time_the_call_has_left() {
    let seen = Seen::default();
    let start = Instant::now();
    let lb = Balance::builder()
        .endpoint("a", replica(seen.clone(), start, 30 * MS, 2))
        .endpoint("b", replica(seen.clone(), start, 30 * MS, 2))
        .build()
        .unwrap();
    let layer = RetryLayer::builder()
        .classify(Classifier::new())
        .backoff(Backoff::new(10 * MS, 10 * MS))
        .build()
        .unwrap();
    let mut svc = layer.layer(lb);
    let req = grpc_call(Some("200m"));
    let res = svc.ready().await.unwrap().call(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0], (Duration::ZERO, Some(200 * MS)));
    for &(at, sent) in &seen[1..] {
        assert!(at >= 30 * MS, "{seen:?}");
        assert!(tells_the_time_left(sent, at, 200 * MS), "{seen:?}");
    }
}

/// The layer's own deadline bounds the call when it is shorter than the
/// header's, and then it is what later attempts are told; a request with
/// no `grpc-timeout` gets none added.
#[tokio::test(start_paused = true)]
async fn the_shorter_deadline_is_sent_and_no_header_is_added() {
    for header in [Some("5S"), None] {
        let seen = Seen::default();
        let start = Instant::now();
        let lb = Balance::builder()
            .endpoint("a", replica(seen.clone(), start, 30 * MS, 1))
            .build()
            .unwrap();
        let layer = RetryLayer::builder()
            .classify(Classifier::new())
            .backoff(Backoff::new(10 * MS, 10 * MS))
            .deadline(100 * MS)
            .build()
            .unwrap();
        let res = layer.layer(lb).oneshot(grpc_call(header)).await.unwrap();
        assert_eq!(res.status(), 200);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{header:?}");
        assert_eq!(seen[0].1, header.map(|_| Duration::from_secs(5)));
        let (at, sent) = seen[1];
        match header {
            Some(_) => assert!(tells_the_time_left(sent, at, 100 * MS), "{seen:?}"),
            None => assert_eq!(sent, None),
        }
    }
}

/// A hedge sent 50 ms into a 300 ms call is told 250 ms.
#[tokio::test(start_paused = true)]
async fn a_hedge_sends_the_time_the_call_has_left() {
    let seen = Seen::default();
    let start = Instant::now();
    let lb = Balance::builder()
        .endpoint("a", replica(seen.clone(), start, 80 * MS, 0))
        .endpoint("b", replica(seen.clone(), start, 80 * MS, 0))
        .build()
        .unwrap();
    let layer = RetryLayer::builder()
        .classify(Classifier::new())
        .hedge(Hedge::fixed(50 * MS))
        .build()
        .unwrap();
    let res = layer
        .layer(lb)
        .oneshot(grpc_call(Some("300m")))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        *seen.lock().unwrap(),
        [(Duration::ZERO, Some(300 * MS)), (50 * MS, Some(250 * MS))]
    );
    assert_eq!(layer.stats().hedges(), 1);
}
