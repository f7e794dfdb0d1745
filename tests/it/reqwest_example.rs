//! `examples/reqwest_client.rs`, the full reqwest stack, run against its
//! own replicas on 127.0.0.1.

use tower_lb::breaker::State;

#[allow(dead_code)]
#[path = "../../examples/reqwest_client.rs"]
mod reqwest_client;

/// The sum of the samples of `name` in a Prometheus exposition.
fn total(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn reqwest_client_example_retries_opens_the_failing_breaker_and_serves_metrics() {
    let report = reqwest_client::run(30).await.unwrap();
    assert_eq!(report.answers.len(), 30);
    for (i, (status, body)) in report.answers.iter().enumerate() {
        // Every call answered by a healthy replica: replica-3's 503s were
        // retried elsewhere.
        assert_eq!(*status, 200, "{body}");
        assert!(body.ends_with(&format!(" /users/{i}")), "{body}");
        assert!(!body.starts_with("replica-3"), "{body}");
    }
    // replica-3's breaker opened once, after the 5 calls the demo's
    // breaker decides on (each of them retried); the others stayed closed.
    assert_eq!(report.breakers["replica-3"], (State::Open, 1));
    assert_eq!(report.breakers["replica-1"], (State::Closed, 0));
    assert_eq!(report.breakers["replica-2"], (State::Closed, 0));
    let m = &report.metrics;
    assert!(m.contains(r#"lb_name="users""#), "{m}");
    let retries = total(m, "lb_retries_total");
    assert_eq!(retries, 5.0, "{m}");
    assert_eq!(total(m, "lb_requests_total"), 30.0 + retries, "{m}");
}
