//! Metrics through a real Prometheus exposition, over real hyper servers on
//! 127.0.0.1.
#![cfg(all(feature = "http", feature = "prometheus"))]

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{Layer, Service, ServiceExt};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::http::Classifier;
use tower_lb::metrics::Metrics;
use tower_lb::metrics::prometheus::Exporter;
use tower_lb::outlier::{Consecutive, OutlierDetection};
use tower_lb::pick;
use tower_lb::retry::RetryLayer;

/// A backend answering 200 with its name, or 503 while `fail` is set.
async fn backend(name: &'static str, fail: Arc<AtomicBool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let fail = fail.clone();
            let svc = service_fn(move |_: hyper::Request<Incoming>| {
                let status = if fail.load(Ordering::Relaxed) {
                    503
                } else {
                    200
                };
                async move {
                    let mut res = hyper::Response::new(Full::new(Bytes::from(name)));
                    *res.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                    Ok::<_, Infallible>(res)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    format!("http://{addr}")
}

/// Three backends; the third fails while the returned flag is set.
async fn three_backends() -> (Vec<String>, Arc<AtomicBool>) {
    let bad = Arc::new(AtomicBool::new(false));
    let mut origins = Vec::new();
    for (name, fail) in [
        ("a", Arc::new(AtomicBool::new(false))),
        ("b", Arc::new(AtomicBool::new(false))),
        ("c", bad.clone()),
    ] {
        origins.push(backend(name, fail).await);
    }
    (origins, bad)
}

fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn get() -> http::Request<Empty<Bytes>> {
    http::Request::get("/x").body(Empty::new()).unwrap()
}

/// One sample line of the text exposition.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) value: f64,
}

/// Parses the Prometheus text format (enough of it for these tests).
pub(crate) fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split("\",")
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect();
        out.push(Sample {
            name: name.to_owned(),
            labels,
            value: value.parse().unwrap(),
        });
    }
    out
}

/// The samples named `name` whose labels include all of `with`; as in
/// PromQL, `(label, "")` matches a sample without that label.
fn select<'a>(samples: &'a [Sample], name: &str, with: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            with.iter()
                .all(|(k, v)| s.labels.get(*k).map_or("", String::as_str) == *v)
        })
        .collect()
}

/// Successes: no `error_type` (OpenTelemetry's `error.type`, set on
/// failures only).
const SUCCESS: (&str, &str) = ("error_type", "");

/// The failed calls among `name`'s samples with `with`, by `error_type`.
fn failures(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for s in select(samples, name, with) {
        if let Some(kind) = s.labels.get("error_type") {
            *m.entry(kind.clone()).or_insert(0.0) += s.value;
        }
    }
    m
}

fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    select(samples, name, with).iter().map(|s| s.value).sum()
}

/// Values of `name` by `lb_endpoint`.
fn by_endpoint(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for s in select(samples, name, with) {
        *m.entry(s.labels["lb_endpoint"].clone()).or_insert(0.0) += s.value;
    }
    m
}

#[tokio::test]
async fn requests_latency_in_flight_and_picks_add_up_per_endpoint() {
    const N: usize = 90;
    let (origins, _) = three_backends().await;
    let exporter = Exporter::new().unwrap();
    let lb = tower_lb::http::balance(client(), &origins)
        .unwrap()
        .picker(pick::RoundRobin::new())
        .metrics(Metrics::new(&exporter.meter(), "users"))
        .build()
        .unwrap();
    for _ in 0..N {
        let res = lb.clone().oneshot(get()).await.unwrap();
        assert_eq!(res.status(), 200);
        res.into_body().collect().await.unwrap();
    }

    let text = exporter.render().unwrap();
    let s = parse(&text);
    let each = N as f64 / 3.0;
    let name = [("lb_name", "users"), ("lb_algorithm", "round_robin")];
    let want: BTreeMap<String, f64> = origins.iter().map(|o| (o.clone(), each)).collect();

    assert_eq!(by_endpoint(&s, "lb_requests_total", &name), want, "{text}");
    assert_eq!(failures(&s, "lb_requests_total", &[]), BTreeMap::new());
    let histogram = [("lb_name", "users"), SUCCESS];
    assert_eq!(
        by_endpoint(&s, "lb_request_duration_seconds_count", &histogram),
        want
    );
    // The histogram leaves `lb.algorithm` out (one attribute less to hash
    // per record); every other instrument carries it.
    assert!(
        select(&s, "lb_request_duration_seconds_count", &[])
            .iter()
            .all(|x| !x.labels.contains_key("lb_algorithm")),
        "{text}"
    );
    let inf = by_endpoint(&s, "lb_request_duration_seconds_bucket", &[("le", "+Inf")]);
    assert_eq!(inf, want);
    assert!(sum(&s, "lb_request_duration_seconds_sum", &[]) > 0.0);
    assert_eq!(by_endpoint(&s, "lb_picks_total", &name), want);
    let idle: BTreeMap<String, f64> = origins.iter().map(|o| (o.clone(), 0.0)).collect();
    assert_eq!(by_endpoint(&s, "lb_endpoint_in_flight", &name), idle);
    let healthy: BTreeMap<String, f64> = origins.iter().map(|o| (o.clone(), 1.0)).collect();
    assert_eq!(
        by_endpoint(
            &s,
            "lb_endpoint_health",
            &[("lb_endpoint_state", "healthy")]
        ),
        healthy
    );
    for (ep, ewma) in by_endpoint(&s, "lb_endpoint_latency_ewma_seconds", &name) {
        assert!(ewma > 0.0 && ewma < 1.0, "{ep}: {ewma}");
    }
    // 90 picks on this thread: at least one was timed.
    assert!(sum(&s, "lb_pick_duration_seconds_count", &name) >= 1.0);
    assert_eq!(sum(&s, "lb_panic_total", &name), 0.0);
    // No breaker or ejection configured: those instruments are absent.
    assert!(!text.contains("lb_breaker_state"));
    assert!(!text.contains("lb_outlier_ejections_total"));
}

/// Every endpoint breaker: opens after 3 hard failures in a row, for a
/// minute. Ejection after 3 gateway failures in a row.
fn resilient_parts() -> (CircuitBreakerConfig, OutlierDetection) {
    let breaker = CircuitBreakerConfig::builder()
        .consecutive_failures(3)
        .count_window(100)
        .minimum_calls(100)
        .open_wait(Duration::from_secs(60))
        .open_wait_cap(Duration::from_secs(60))
        .build()
        .unwrap();
    let outlier = OutlierDetection::builder()
        .consecutive_failures(None)
        .consecutive_gateway_failures(Some(Consecutive::new(3)))
        .success_rate(None)
        .failure_percentage(None)
        .build()
        .unwrap();
    (breaker, outlier)
}

/// Builds the whole stack (retry over a balancer with breakers and
/// ejection, metrics on), sends `n` requests while backend `c` fails, and
/// returns the exposition before and after, and `c`'s origin.
pub(crate) async fn failing_backend_run(n: usize) -> (String, String, String) {
    let (origins, bad) = three_backends().await;
    let exporter = Exporter::new().unwrap();
    let (breaker, outlier) = resilient_parts();
    let retry = RetryLayer::builder()
        .classify(Classifier::new())
        .build()
        .unwrap();
    let metrics = Metrics::new(&exporter.meter(), "users").retries(&retry);
    let lb = tower_lb::http::balance(client(), &origins)
        .unwrap()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker)
        .outlier_detection(outlier)
        .metrics(metrics)
        .build()
        .unwrap();
    let mut svc = retry.layer(lb);
    let before = exporter.render().unwrap();
    bad.store(true, Ordering::Relaxed);
    for _ in 0..n {
        let res = svc.ready().await.unwrap().call(get()).await.unwrap();
        // Every 503 from c is retried on a or b.
        assert_eq!(res.status(), 200);
    }
    let after = exporter.render().unwrap();
    (before, after, origins[2].clone())
}

#[tokio::test]
async fn breaker_state_and_ejections_change_when_a_server_fails() {
    let (before, after, c) = failing_backend_run(30).await;
    let (b, a) = (parse(&before), parse(&after));
    let at_c = |state: &'static str| [("lb_endpoint", c.as_str()), ("lb_breaker_state", state)];
    let closed = [("lb_breaker_state", "closed")];

    // Before: every breaker closed, nothing ejected.
    assert_eq!(sum(&b, "lb_breaker_state", &closed), 3.0);
    assert_eq!(
        sum(&b, "lb_breaker_state", &[("lb_breaker_state", "open")]),
        0.0
    );
    assert_eq!(sum(&b, "lb_outlier_ejections_total", &[]), 0.0);
    assert_eq!(sum(&b, "lb_retries_total", &[]), 0.0);

    // After: c's breaker opened (once) and c was ejected by the gateway rule.
    assert_eq!(sum(&a, "lb_breaker_state", &at_c("open")), 1.0, "{after}");
    assert_eq!(sum(&a, "lb_breaker_state", &at_c("closed")), 0.0);
    assert_eq!(sum(&a, "lb_breaker_state", &closed), 2.0);
    assert_eq!(sum(&a, "lb_breaker_transitions_total", &at_c("open")), 1.0);
    let ejected = [
        ("lb_endpoint", c.as_str()),
        ("lb_outlier_reason", "consecutive_gateway_failures"),
    ];
    assert_eq!(sum(&a, "lb_outlier_ejections_total", &ejected), 1.0);
    assert_eq!(sum(&a, "lb_outlier_ejections_total", &[]), 1.0);
    assert_eq!(
        sum(&a, "lb_endpoint_health", &[("lb_endpoint", c.as_str())]),
        0.0
    );
    assert_eq!(
        select(&a, "lb_endpoint_health", &[("lb_endpoint", c.as_str())])[0].labels["lb_endpoint_state"],
        "open"
    );
    // c failed exactly three times (503: a gateway failure), each failure
    // was retried elsewhere; the histogram counts the same failures.
    let at = [("lb_endpoint", c.as_str())];
    let gateway = BTreeMap::from([("gateway".to_owned(), 3.0)]);
    assert_eq!(failures(&a, "lb_requests_total", &at), gateway);
    assert_eq!(
        failures(&a, "lb_request_duration_seconds_count", &at),
        gateway
    );
    assert_eq!(sum(&a, "lb_retries_total", &[("lb_name", "users")]), 3.0);
    assert_eq!(sum(&a, "lb_retry_budget_exhausted_total", &[]), 0.0);
    assert_eq!(sum(&a, "lb_hedges_total", &[]), 0.0);
    // 30 answered requests + 3 failed attempts.
    assert_eq!(sum(&a, "lb_requests_total", &[]), 33.0);
    assert_eq!(sum(&a, "lb_request_duration_seconds_count", &[]), 33.0);
    assert_eq!(sum(&a, "lb_picks_total", &[]), 33.0);
}

/// Bound (feature `metrics-bound`) and unbound records give the same
/// series, endpoint by endpoint and outcome by outcome: two round-robin
/// balancers over the same three backends, the third failing (503) for 9
/// of the 30 rounds, so 3 of its 10 calls.
#[cfg(feature = "metrics-bound")]
#[tokio::test]
async fn bound_and_unbound_duration_histograms_agree() {
    const N: usize = 30;
    let (origins, bad) = three_backends().await;
    let exporter = Exporter::new().unwrap();
    let build = |name: &str, bound: bool| {
        tower_lb::http::balance(client(), &origins)
            .unwrap()
            .picker(pick::RoundRobin::new())
            .metrics(Metrics::new(&exporter.meter(), name).bound(bound))
            .build()
            .unwrap()
    };
    let (bound, unbound) = (build("bound", true), build("unbound", false));
    for round in 0..N {
        bad.store((9..18).contains(&round), Ordering::Relaxed);
        for lb in [&bound, &unbound] {
            let res = lb.clone().oneshot(get()).await.unwrap();
            res.into_body().collect().await.unwrap();
        }
    }
    let s = parse(&exporter.render().unwrap());
    // (endpoint, error_type) -> count, for one balancer.
    let series = |name: &str| -> BTreeMap<(String, String), f64> {
        select(
            &s,
            "lb_request_duration_seconds_count",
            &[("lb_name", name)],
        )
        .iter()
        .map(|x| {
            let kind = x.labels.get("error_type").cloned().unwrap_or_default();
            ((x.labels["lb_endpoint"].clone(), kind), x.value)
        })
        .collect()
    };
    let mut want: BTreeMap<(String, String), f64> = origins
        .iter()
        .map(|o| ((o.clone(), String::new()), N as f64 / 3.0))
        .collect();
    want.insert((origins[2].clone(), String::new()), 7.0);
    want.insert((origins[2].clone(), "gateway".to_owned()), 3.0);
    assert_eq!(series("bound"), want);
    assert_eq!(series("unbound"), want);
    let inf = |name: &str| {
        sum(
            &s,
            "lb_request_duration_seconds_bucket",
            &[("lb_name", name), ("le", "+Inf")],
        )
    };
    assert_eq!(inf("bound"), N as f64);
    assert_eq!(inf("unbound"), N as f64);
}

#[tokio::test]
async fn without_metrics_nothing_is_recorded() {
    let (origins, _) = three_backends().await;
    let exporter = Exporter::new().unwrap();
    let _unused = exporter.meter();
    let lb = tower_lb::http::balance(client(), &origins)
        .unwrap()
        .build()
        .unwrap();
    for _ in 0..10 {
        lb.clone().oneshot(get()).await.unwrap();
    }
    let text = exporter.render().unwrap();
    assert!(!text.contains("lb_"), "{text}");
    // The endpoint model counts requests and picks for itself, metrics or
    // not (picks are derived from the completion counters: free).
    let eps = lb.handle().endpoints();
    assert_eq!(eps.iter().map(|(_, s)| s.requests()).sum::<u64>(), 10);
    assert_eq!(eps.iter().map(|(_, s)| s.picks()).sum::<u64>(), 10);
}

#[tokio::test]
async fn endpoints_inserted_and_removed_appear_and_leave() {
    let (origins, _) = three_backends().await;
    let exporter = Exporter::new().unwrap();
    let lb = tower_lb::http::balance(client(), &origins[..2])
        .unwrap()
        .metrics(Metrics::new(&exporter.meter(), "dyn"))
        .build()
        .unwrap();
    let handle = lb.handle();
    let third = tower_lb::http::Origin::parse(&origins[2]).unwrap();
    let svc = tower_lb::http::SetOrigin::new(client(), third.clone());
    assert!(!handle.insert(third.clone(), svc), "a new key");
    let endpoints = |text: &str| -> BTreeSet<String> {
        by_endpoint(&parse(text), "lb_endpoint_in_flight", &[])
            .into_keys()
            .collect()
    };
    let all: BTreeSet<String> = origins.iter().cloned().collect();
    assert_eq!(endpoints(&exporter.render().unwrap()), all);
    assert!(handle.remove(&third));
    let two: BTreeSet<String> = origins[..2].iter().cloned().collect();
    assert_eq!(endpoints(&exporter.render().unwrap()), two);
}

#[tokio::test]
async fn labels_come_from_the_key_through_a_closure() {
    let exporter = Exporter::new().unwrap();
    let svc = tower::service_fn(|n: u32| async move { Ok::<_, Infallible>(n) });
    let mut lb = tower_lb::Balance::builder()
        .endpoint(7u16, svc)
        .metrics_with(Metrics::new(&exporter.meter(), "ints"), |k: &u16| {
            format!("replica-{k}")
        })
        .build()
        .unwrap();
    lb.ready().await.unwrap().call(1).await.unwrap();
    let s = parse(&exporter.render().unwrap());
    assert_eq!(
        sum(&s, "lb_requests_total", &[("lb_endpoint", "replica-7")]),
        1.0
    );
}

#[tokio::test]
async fn zone_and_priority_are_attributes_and_follow_metadata_changes() {
    use tower_lb::endpoint::{EndpointMeta, Locality};
    let exporter = Exporter::new().unwrap();
    let svc = tower::service_fn(|n: u32| async move { Ok::<_, Infallible>(n) });
    let meta = EndpointMeta::new()
        .with_locality(Locality::in_zone("eu-1a"))
        .with_label("version", "v7");
    let mut lb = tower_lb::Balance::builder()
        .endpoint_with("a", svc, 1.0, meta)
        .metrics(Metrics::new(&exporter.meter(), "zones"))
        .build()
        .unwrap();
    lb.ready().await.unwrap().call(1).await.unwrap();
    let s = parse(&exporter.render().unwrap());
    let at = [("lb_endpoint_zone", "eu-1a"), ("lb_endpoint_priority", "0")];
    assert_eq!(sum(&s, "lb_requests_total", &at), 1.0);
    assert_eq!(sum(&s, "lb_request_duration_seconds_count", &at), 1.0);
    assert!(
        s.iter().all(|x| !x.labels.contains_key("version")),
        "labels stay out"
    );
    // Moved to another zone and priority: the same endpoint, new series.
    let moved = EndpointMeta::new()
        .with_locality(Locality::in_zone("eu-1b"))
        .with_priority(1);
    assert!(lb.handle().set_meta(&"a", moved));
    lb.ready().await.unwrap().call(2).await.unwrap();
    let s = parse(&exporter.render().unwrap());
    let at = [("lb_endpoint_zone", "eu-1b"), ("lb_endpoint_priority", "1")];
    assert_eq!(
        sum(&s, "lb_requests_total", &at),
        2.0,
        "the counter carries on"
    );
    assert_eq!(sum(&s, "lb_request_duration_seconds_count", &at), 1.0);
    // The call made after the move is not recorded in the old series.
    let before = [("lb_endpoint_zone", "eu-1a"), ("lb_endpoint_priority", "0")];
    assert_eq!(sum(&s, "lb_request_duration_seconds_count", &before), 1.0);
}

#[test]
fn bad_duration_buckets_are_refused() {
    let meter = opentelemetry::global::meter("t");
    for bad in [&[][..], &[0.1, 0.1], &[-1.0], &[f64::NAN]] {
        let e = Metrics::new(&meter, "x").duration_buckets(bad).unwrap_err();
        assert_eq!(e.field(), "duration_buckets");
    }
    assert!(
        Metrics::new(&meter, "x")
            .duration_buckets(&[0.1, 1.0])
            .is_ok()
    );
}

#[tokio::test]
async fn custom_buckets_show_in_the_exposition() {
    let exporter = Exporter::new().unwrap();
    let svc = tower::service_fn(|n: u32| async move { Ok::<_, Infallible>(n) });
    let metrics = Metrics::new(&exporter.meter(), "b")
        .duration_buckets(&[0.25, 4.0])
        .unwrap();
    let mut lb = tower_lb::Balance::builder()
        .endpoint("a", svc)
        .metrics(metrics)
        .build()
        .unwrap();
    lb.ready().await.unwrap().call(1).await.unwrap();
    let s = parse(&exporter.render().unwrap());
    let les: BTreeSet<&str> = select(&s, "lb_request_duration_seconds_bucket", &[])
        .iter()
        .map(|s| s.labels["le"].as_str())
        .collect();
    assert_eq!(les, BTreeSet::from(["0.25", "4", "+Inf"]));
}

#[tokio::test]
async fn metrics_response_has_the_prometheus_content_type() {
    let exporter = Exporter::new().unwrap();
    let res = exporter.response();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"],
        tower_lb::metrics::prometheus::TEXT_FORMAT
    );
}

/// A backend written on the socket, so each path fails its own way: `/ok`,
/// `/500`, `/503`, `/429` answer at once, `/late` answers 200 after 40 ms,
/// `/slow` after 2 s, `/broken` promises 100 bytes, sends 5 and closes.
async fn kinds_backend() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match tcp.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end + 4);
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    let answer =
                        |status: &str| format!("HTTP/1.1 {status}\r\ncontent-length: 2\r\n\r\nok");
                    let text = match path.as_str() {
                        "/500" => answer("500 Internal Server Error"),
                        "/503" => answer("503 Service Unavailable"),
                        "/429" => answer("429 Too Many Requests"),
                        "/late" | "/slow" => {
                            let ms = if path == "/late" { 40 } else { 2000 };
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            answer("200 OK")
                        }
                        "/broken" => {
                            let _ = tcp
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")
                                .await;
                            return;
                        }
                        _ => answer("200 OK"),
                    };
                    if tcp.write_all(text.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

/// Each failure kind gets its own `lb_requests_total` and histogram
/// series, labelled `error_type`, once it happens: connect (a dead port),
/// timeout (the balancer's 200 ms), gateway (503), overloaded (429), error
/// (500), slow (over the classifier's 20 ms) and body (a body cut short).
/// A kind that has not happened has no series.
#[tokio::test]
async fn every_failure_kind_appears_in_the_exposition() {
    let live = kinds_backend().await;
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let exporter = Exporter::new().unwrap();
    let classifier = Classifier::new()
        .slow_threshold(Duration::from_millis(20))
        .unwrap();
    let lb = tower_lb::http::balance(client(), [&live])
        .unwrap()
        .classify(classifier)
        .timeout(Duration::from_millis(200))
        .metrics(Metrics::new(&exporter.meter(), "kinds"))
        .build()
        .unwrap();
    let on = |path: &str| http::Request::get(path).body(Empty::new()).unwrap();
    let kinds = |text: &str| failures(&parse(text), "lb_requests_total", &[]);
    for _ in 0..3 {
        let res = lb.clone().oneshot(on("/ok")).await.unwrap();
        res.into_body().collect().await.unwrap();
    }
    assert_eq!(kinds(&exporter.render().unwrap()), BTreeMap::new());

    for (path, times) in [
        ("/500", 1),
        ("/503", 2),
        ("/429", 3),
        ("/late", 1),
        ("/slow", 2),
    ] {
        for _ in 0..times {
            if let Ok(res) = lb.clone().oneshot(on(path)).await {
                let _ = res.into_body().collect().await;
            }
        }
    }
    let res = lb.clone().oneshot(on("/broken")).await.unwrap();
    assert!(res.into_body().collect().await.is_err(), "the body is cut");
    let to_dead = tower_lb::http::balance(client(), [&dead])
        .unwrap()
        .metrics(Metrics::new(&exporter.meter(), "dead"))
        .build()
        .unwrap();
    // A clone: a dropped balancer stops reporting.
    assert!(to_dead.clone().oneshot(on("/ok")).await.is_err());

    let text = exporter.render().unwrap();
    let mut want: BTreeMap<String, f64> = [
        ("error", 1.0),
        ("gateway", 2.0),
        ("overloaded", 3.0),
        ("slow", 1.0),
        ("timeout", 2.0),
        ("body", 1.0),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    let s = parse(&text);
    let mine = |name: &str| failures(&s, "lb_requests_total", &[("lb_name", name)]);
    let timed = |name: &str| {
        failures(
            &s,
            "lb_request_duration_seconds_count",
            &[("lb_name", name)],
        )
    };
    assert_eq!(mine("kinds"), want, "{text}");
    assert_eq!(timed("kinds"), want, "{text}");
    want = [("connect".to_owned(), 1.0)].into_iter().collect();
    assert_eq!(mine("dead"), want, "{text}");
    assert_eq!(timed("dead"), want, "{text}");
    // Failures by kind and successes add up to the histogram's count.
    let total = sum(&parse(&text), "lb_requests_total", &[("lb_name", "kinds")]);
    let count = sum(
        &parse(&text),
        "lb_request_duration_seconds_count",
        &[("lb_name", "kinds")],
    );
    assert_eq!(total, 3.0 + 9.0 + 1.0);
    assert_eq!(count, total);
    // Every kind the classifiers can produce has a name the dashboard's
    // breakdown can show.
    assert_eq!(
        tower_lb::classify::FailureKind::NAMES.len(),
        7,
        "a new kind needs a series name"
    );
}

/// The in-flight gauge reads the requests held at the moment of the
/// scrape: four calls parked on a backend that answers only when told.
#[tokio::test]
async fn the_in_flight_gauge_counts_held_requests() {
    let release = Arc::new(tokio::sync::Notify::new());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let gate = release.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let gate = gate.clone();
            let svc = service_fn(move |_: hyper::Request<Incoming>| {
                let gate = gate.clone();
                async move {
                    gate.notified().await;
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("ok"))))
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    let exporter = Exporter::new().unwrap();
    let lb = tower_lb::http::balance(client(), [&origin])
        .unwrap()
        .metrics(Metrics::new(&exporter.meter(), "held"))
        .build()
        .unwrap();
    let calls: Vec<_> = (0..4)
        .map(|_| tokio::spawn(lb.clone().oneshot(get())))
        .collect();
    let gauge = || {
        let text = exporter.render().unwrap();
        sum(
            &parse(&text),
            "lb_endpoint_in_flight",
            &[("lb_name", "held")],
        )
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while gauge() < 4.0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("four requests in flight");
    assert_eq!(gauge(), 4.0);
    // Answer them one at a time until none is held.
    for call in calls {
        release.notify_one();
        let res = call.await.unwrap().unwrap();
        res.into_body().collect().await.unwrap();
    }
    assert_eq!(gauge(), 0.0);
}
