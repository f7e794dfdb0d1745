//! `http::middleware::BalanceMiddleware` in a `reqwest_middleware` chain,
//! against hyper backends on 127.0.0.1: with the crate's retries or
//! `reqwest-retry`'s, with `reqwest-tracing` before or after it, and the
//! errors the chain returns.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Extensions;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware};
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use reqwest_tracing::{DefaultSpanBackend, ReqwestOtelSpanBackend, TracingMiddleware};
use tower::Layer;
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::http::middleware::{self, Attempt, BalanceMiddleware};
use tower_lb::metrics::{Metrics, prometheus::Exporter};
use tower_lb::pick::{self, KeyHash, key::key_fn};
use tower_lb::retry::RetryLayer;
use tracing::Span;

#[allow(dead_code)]
#[path = "../support/backend.rs"]
mod backend;

use backend::{Backend, Mode};

/// A request `reqwest-tracing` traced: the URL's `host:port` and the
/// status it ended with (`None`: an error).
type Traced = (String, Option<u16>);

/// What `reqwest-tracing` saw of one call.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Traced>>>);

impl Seen {
    fn log(&self) -> Vec<Traced> {
        self.0.lock().unwrap().clone()
    }
}

/// `reqwest-tracing`'s default span, and a note of each request in the
/// call's [`Seen`] (carried in the extensions).
struct Recorded;

impl ReqwestOtelSpanBackend for Recorded {
    fn on_request_start(req: &reqwest::Request, ext: &mut Extensions) -> Span {
        if let Some(seen) = ext.get::<Seen>() {
            let url = req.url();
            let host = match url.port() {
                Some(port) => format!("{}:{port}", url.host_str().unwrap_or("")),
                None => url.host_str().unwrap_or("").to_owned(),
            };
            seen.0.lock().unwrap().push((host, None));
        }
        DefaultSpanBackend::on_request_start(req, ext)
    }

    fn on_request_end(
        span: &Span,
        outcome: &reqwest_middleware::Result<reqwest::Response>,
        ext: &mut Extensions,
    ) {
        if let (Some(seen), Ok(res)) = (ext.get::<Seen>(), outcome)
            && let Some(last) = seen.0.lock().unwrap().last_mut()
        {
            last.1 = Some(res.status().as_u16());
        }
        DefaultSpanBackend::on_request_end(span, outcome, ext);
    }
}

fn traced() -> TracingMiddleware<Recorded> {
    TracingMiddleware::new()
}

/// `reqwest-retry` with two retries and a millisecond of backoff.
fn reqwest_retry() -> RetryTransientMiddleware<ExponentialBackoff> {
    let policy = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(1), Duration::from_millis(2))
        .build_with_max_retries(2);
    RetryTransientMiddleware::new_with_policy(policy)
}

/// One GET to the logical host `users`, traced into a fresh [`Seen`]:
/// the status, the body, and what the tracing middleware saw.
async fn get(client: &ClientWithMiddleware) -> (u16, String, Vec<Traced>) {
    let seen = Seen::default();
    let res = client
        .get("http://users/users/7")
        .with_extension(seen.clone())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.text().await.unwrap(), seen.log())
}

async fn replicas(modes: [Mode; 3]) -> Vec<Arc<Backend>> {
    let mut out = Vec::new();
    for (name, mode) in ["a", "b", "c"].into_iter().zip(modes) {
        let b = Backend::start(name).await;
        b.set_mode(mode);
        out.push(b);
    }
    out
}

fn origins(backends: &[Arc<Backend>]) -> Vec<String> {
    backends.iter().map(|b| b.origin()).collect()
}

/// The sum of the samples of `name` in a Prometheus exposition.
fn total(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn crate_retries_leave_the_failing_replica_and_tracing_after_sees_each_attempt() {
    let backends = replicas([Mode::Ok, Mode::Ok, Mode::Unavailable]).await;
    let failing = backends[2].addr.to_string();
    let exporter = Exporter::new().unwrap();
    let retry = RetryLayer::builder().build().unwrap();
    let lb = middleware::balance(origins(&backends))
        .unwrap()
        .picker(pick::RoundRobin::new())
        .metrics(Metrics::new(&exporter.meter(), "users").retries(&retry))
        .build()
        .unwrap();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(BalanceMiddleware::new(retry.layer(lb)))
        .with(traced())
        .build();

    let mut failed_attempts = 0;
    for _ in 0..9 {
        let (status, body, seen) = get(&client).await;
        assert_eq!(status, 200, "{body}");
        assert!(body == "a" || body == "b", "{body}");
        // One span per attempt, each naming the replica it went to: the
        // 503s of the failing one, then the answer from another.
        let (last, earlier) = seen.split_last().unwrap();
        assert_ne!(last.0, failing, "{seen:?}");
        assert_eq!(last.1, Some(200), "{seen:?}");
        for attempt in earlier {
            assert_eq!(attempt, &(failing.clone(), Some(503)), "{seen:?}");
        }
        failed_attempts += earlier.len() as u64;
    }
    // Round robin over three replicas picks the failing one in nine calls.
    assert!(failed_attempts > 0);
    assert_eq!(retry.stats().retries(), failed_attempts);
    let text = exporter.response().into_body();
    assert_eq!(
        total(&text, "lb_requests_total"),
        9.0 + failed_attempts as f64,
        "{text}"
    );
    assert_eq!(
        total(&text, "lb_retries_total"),
        failed_attempts as f64,
        "{text}"
    );
}

#[tokio::test]
async fn tracing_before_the_balancer_sees_one_span_per_call_with_the_logical_host() {
    let backends = replicas([Mode::Ok, Mode::Ok, Mode::Unavailable]).await;
    let retry = RetryLayer::builder().build().unwrap();
    let lb = middleware::balance(origins(&backends))
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(traced())
        .with(BalanceMiddleware::new(retry.layer(lb)))
        .build();
    for _ in 0..6 {
        let (status, _, seen) = get(&client).await;
        assert_eq!(status, 200);
        assert_eq!(seen, [("users".to_owned(), Some(200))]);
    }
    // The retries happened, inside the one span.
    assert!(retry.stats().retries() > 0);
}

/// The same key for every request.
fn one_key(_: &Attempt<'_>) -> Option<u64> {
    Some(7)
}

/// A balancer that sends every request to one replica while it may (a
/// hash picker with one key for all), and which replica that is.
async fn pinned(backends: &[Arc<Backend>]) -> (Arc<dyn Middleware>, usize) {
    let lb = middleware::balance(origins(backends))
        .unwrap()
        .picker(KeyHash::new(key_fn(one_key)))
        .build()
        .unwrap();
    let mw: Arc<dyn Middleware> = Arc::new(BalanceMiddleware::new(lb));
    let probe = ClientBuilder::new(reqwest::Client::new())
        .with_arc(mw.clone())
        .build();
    let (_, body, _) = get(&probe).await;
    let pinned = backends.iter().position(|b| b.name == body).unwrap();
    (mw, pinned)
}

#[tokio::test]
async fn reqwest_retry_before_the_balancer_avoids_the_replicas_it_tried() {
    let backends = replicas([Mode::Ok; 3]).await;
    let (balancer, pinned) = pinned(&backends).await;
    backends[pinned].set_mode(Mode::Unavailable);
    let failing = backends[pinned].addr.to_string();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(reqwest_retry())
        .with_arc(balancer)
        .with(traced())
        .build();
    for _ in 0..3 {
        let (status, body, seen) = get(&client).await;
        // The key still leads to the failing replica first; the retry,
        // with the same extensions, goes elsewhere.
        assert_eq!(status, 200, "{seen:?}");
        assert_ne!(body, backends[pinned].name);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0], (failing.clone(), Some(503)));
        assert_ne!(seen[1].0, failing);
    }
}

#[tokio::test]
async fn reqwest_retry_after_the_balancer_retries_the_same_replica() {
    // The order the docs warn against: the URL is rewritten before
    // reqwest-retry sees the request, so every retry goes back.
    let backends = replicas([Mode::Ok; 3]).await;
    let (balancer, pinned) = pinned(&backends).await;
    backends[pinned].set_mode(Mode::Unavailable);
    let failing = backends[pinned].addr.to_string();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with_arc(balancer)
        .with(reqwest_retry())
        .with(traced())
        .build();
    let (status, _, seen) = get(&client).await;
    assert_eq!(status, 503);
    assert_eq!(seen, vec![(failing, Some(503)); 3]);
}

#[tokio::test]
async fn a_failing_replicas_breaker_opens_and_keeps_it_out() {
    let backends = replicas([Mode::Ok, Mode::Ok, Mode::Unavailable]).await;
    let failing = backends[2].addr.to_string();
    let breaker = CircuitBreakerConfig::builder()
        .minimum_calls(3)
        .build()
        .unwrap();
    let lb = middleware::balance(origins(&backends))
        .unwrap()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker)
        .build()
        .unwrap();
    let retry = RetryLayer::builder().build().unwrap();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(BalanceMiddleware::new(retry.layer(lb)))
        .with(traced())
        .build();
    let mut to_failing = 0;
    for _ in 0..30 {
        let (status, _, seen) = get(&client).await;
        assert_eq!(status, 200);
        to_failing += seen.iter().filter(|(host, _)| *host == failing).count();
    }
    // Three failures fill its window (100% failing, over the 50%
    // threshold) and the breaker stays open for the default minute:
    // round robin would have sent it about ten.
    assert_eq!(to_failing, 3);
}

#[tokio::test]
async fn errors_keep_their_kind() {
    let refusing = {
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", closed.local_addr().unwrap())
    };
    fn chain(mw: impl Middleware) -> ClientWithMiddleware {
        ClientBuilder::new(reqwest::Client::new()).with(mw).build()
    }

    // The chain's own error, unchanged: reqwest-retry would retry it.
    let lb = middleware::balance([&refusing]).unwrap().build().unwrap();
    let err = chain(BalanceMiddleware::new(lb))
        .get("http://users/")
        .send()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, reqwest_middleware::Error::Reqwest(e) if e.is_connect()),
        "{err:?}"
    );

    // A refusal of the balancer: a middleware error, typed inside.
    let lb = middleware::balance(Vec::<String>::new())
        .unwrap()
        .build()
        .unwrap();
    let err = chain(BalanceMiddleware::new(lb))
        .get("http://users/")
        .send()
        .await
        .unwrap_err();
    let reqwest_middleware::Error::Middleware(e) = err else {
        panic!("a refusal is a middleware error: {err:?}");
    };
    let typed = e.downcast_ref::<tower_lb::Error<reqwest_middleware::Error>>();
    assert!(matches!(typed, Some(tower_lb::Error::NoEndpoints)), "{e:?}");

    // The retry layer's verdict, with the attempts it made.
    let retry = RetryLayer::builder().build().unwrap();
    let lb = middleware::balance([&refusing]).unwrap().build().unwrap();
    let err = chain(BalanceMiddleware::new(retry.layer(lb)))
        .get("http://users/")
        .send()
        .await
        .unwrap_err();
    let reqwest_middleware::Error::Middleware(e) = err else {
        panic!("a verdict is a middleware error: {err:?}");
    };
    let typed =
        e.downcast_ref::<tower_lb::retry::Error<tower_lb::Error<reqwest_middleware::Error>>>();
    assert_eq!(typed.map(|e| e.attempts()), Some(3), "{e:?}");
}
