//! The metrics examples, run to completion against their own local backends.
#![cfg(all(feature = "http", feature = "prometheus"))]

use std::collections::BTreeMap;

use tower_lb::breaker::State;

#[allow(dead_code)]
#[path = "../../examples/prometheus.rs"]
mod prometheus_example;

#[allow(dead_code)]
#[path = "../../examples/axum_gateway.rs"]
mod axum_gateway;

#[allow(dead_code)]
#[path = "../../examples/breaker_config.rs"]
mod breaker_config;

/// Sum of the samples of `name` in an exposition.
fn total(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn prometheus_example_prints_counts_for_every_request() {
    let text = prometheus_example::run(100).await.unwrap();
    assert_eq!(total(&text, "lb_requests_total"), 100.0, "{text}");
    assert_eq!(total(&text, "lb_request_duration_seconds_count"), 100.0);
    assert_eq!(total(&text, "lb_picks_total"), 100.0);
    assert_eq!(total(&text, "lb_endpoint_in_flight"), 0.0);
    // Three endpoints, each with a latency estimate.
    let ewma = text
        .lines()
        .filter(|l| l.starts_with("lb_endpoint_latency_ewma_seconds{"))
        .count();
    assert_eq!(ewma, 3);
}

#[tokio::test]
async fn axum_gateway_forwards_api_and_serves_metrics() {
    let demo = axum_gateway::run(9, false).await.unwrap();
    assert_eq!(demo.answers.len(), 9);
    for (i, (status, body)) in demo.answers.iter().enumerate() {
        // Every request answered by a healthy replica (the 503s of the
        // failing one are retried elsewhere), with `/api` stripped, the
        // query kept and the client's address forwarded.
        assert_eq!(*status, 200, "{body}");
        assert!(
            body.ends_with(&format!(" GET /hello?n={i} for 127.0.0.1")),
            "{body}"
        );
        assert!(!body.starts_with("replica-3"), "{body}");
    }
    assert_eq!(demo.metrics_status, 200);
    let m = &demo.metrics;
    assert!(m.contains(r#"lb_name="upstream""#), "{m}");
    // Nine answered, plus every failed attempt on replica 3 (PeakEwma may
    // never try it: the healthy replicas' first answers make them cheaper
    // than its untested default).
    let failed = total(m, "lb_retries_total");
    assert_eq!(total(m, "lb_requests_total"), 9.0 + failed, "{m}");
    assert!(m.contains("lb_breaker_state{"));
}

#[tokio::test]
async fn axum_gateway_over_dns_answers_its_first_request() {
    // The pool starts empty; the first request, sent as soon as the
    // gateway listens, waits for `localhost` to resolve.
    let demo = axum_gateway::run(3, true).await.unwrap();
    for (i, (status, body)) in demo.answers.iter().enumerate() {
        assert_eq!(*status, 200, "{body}");
        assert!(body.starts_with("replica-v"), "{body}");
        assert!(
            body.ends_with(&format!(" GET /hello?n={i} for 127.0.0.1")),
            "{body}"
        );
    }
}

#[tokio::test]
async fn axum_gateway_answers_502_for_errors_and_504_for_timeouts() {
    use axum_gateway::Upstream;
    use http_body_util::{BodyExt, Empty};
    use tower_lb::metrics::prometheus::Exporter;
    let get = |gw: std::net::SocketAddr| async move {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Empty<bytes::Bytes>>();
        let res = client
            .get(format!("http://{gw}/api/x").parse().unwrap())
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.into_body().collect().await.unwrap().to_bytes())
    };
    // A replica nobody listens on: a 502.
    let dead = {
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Upstream::Origins(vec![format!("http://{}", closed.local_addr().unwrap())])
    };
    let ms = std::time::Duration::from_millis;
    let app = axum_gateway::gateway(&dead, Exporter::new().unwrap(), ms(400)).unwrap();
    let gw = axum_gateway::serve("127.0.0.1:0", app).await.unwrap();
    assert_eq!(
        get(gw).await,
        (502, bytes::Bytes::from("upstream failed\n"))
    );
    // A replica that accepts and never answers: 504 once the deadline passes.
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = Upstream::Origins(vec![format!("http://{}", hole.local_addr().unwrap())]);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = hole.accept().await {
            held.push(tcp);
        }
    });
    let app = axum_gateway::gateway(&hole_addr, Exporter::new().unwrap(), ms(400)).unwrap();
    let gw = axum_gateway::serve("127.0.0.1:0", app).await.unwrap();
    assert_eq!(
        get(gw).await,
        (504, bytes::Bytes::from("upstream timed out\n"))
    );
}

#[tokio::test]
async fn breaker_config_example_opens_the_failing_backends_breaker() {
    let report = breaker_config::run(30).await.unwrap();
    // c fails 3 times in a row (every third request) and its breaker opens.
    assert_eq!(report.unavailable, 3);
    let served: usize = report.served.values().sum();
    assert_eq!(served, 27);
    assert!(!report.served.contains_key("c"));
    let want = BTreeMap::from([
        ("a".to_owned(), (State::Closed, 0)),
        ("b".to_owned(), (State::Closed, 0)),
        ("c".to_owned(), (State::Open, 1)),
    ]);
    assert_eq!(report.breakers, want);
    assert!(breaker_config::breaker().is_ok());
}
