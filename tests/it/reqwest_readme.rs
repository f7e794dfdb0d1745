//! The README's reqwest program, run against two replicas on 127.0.0.1,
//! and a check that it is the README's program, line for line (the README
//! compiles it as a doctest; here it runs).

use std::time::Duration;

use axum::{Router, routing::get};
use reqwest_middleware::ClientBuilder;
use tower::Layer;
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::health::PanicMode;
use tower_lb::http::middleware::{self, BalanceMiddleware};
use tower_lb::metrics::{Metrics, prometheus::Exporter};
use tower_lb::retry::RetryLayer;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the README's program leaves: the client (its balancer's series
/// are reported while it lives), the answer, the admin router.
type Program = (
    reqwest_middleware::ClientWithMiddleware,
    reqwest::Response,
    Router,
);

/// The README's program over `replicas`.
async fn readme(replicas: Vec<String>) -> Result<Program, BoxError> {
    let exporter = Exporter::new()?; // OpenTelemetry instruments, Prometheus text
    let retry = RetryLayer::builder() // 3 attempts, budget 20% + 10/s
        .per_try_timeout(Duration::from_millis(500))
        .build()?;
    let lb = middleware::balance(replicas)?
        .circuit_breaker(CircuitBreakerConfig::builder().minimum_calls(20).build()?)
        .panic_mode(PanicMode::RouteAll) // under 50% healthy, route over all (open breakers still refuse)
        .metrics(Metrics::new(&exporter.meter(), "users").retries(&retry))
        .build()?;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(BalanceMiddleware::new(retry.layer(lb))) // reqwest-tracing after it
        .build();
    let res = client.get("http://users/users/7").send().await?;
    let admin = Router::new().route("/metrics", get(move || async move { exporter.response() }));
    Ok((client, res, admin))
}

/// Serves `router` on an ephemeral port of 127.0.0.1.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

#[tokio::test]
async fn readme_reqwest_program_answers_and_serves_its_metrics() {
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let user =
            |axum::extract::Path(id): axum::extract::Path<u32>| async move { format!("user {id}") };
        replicas.push(serve(Router::new().route("/users/{id}", get(user))).await);
    }
    let (_client, res, admin) = readme(replicas).await.unwrap();
    assert_eq!(res.text().await.unwrap(), "user 7");
    let admin = serve(admin).await;
    let page = reqwest::get(format!("{admin}/metrics")).await.unwrap();
    assert_eq!(page.status(), 200);
    let text = page.text().await.unwrap();
    let answered: f64 = text
        .lines()
        .filter(|l| l.starts_with("lb_requests_total{") && l.contains(r#"lb_name="users""#))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert_eq!(answered, 1.0, "{text}");
}

/// A line with its runs of whitespace made one space.
fn squeeze(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn readme_reqwest_program_is_this_one() {
    let readme = include_str!("../../README.md");
    let block = readme
        .split("```")
        .find(|b| b.starts_with("rust") && b.contains("BalanceMiddleware::new(retry.layer(lb))"))
        .expect("the README's reqwest program");
    // Its visible lines, but the replica list, which the test's replicas
    // replace.
    let program: Vec<String> = block
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("let replicas"))
        .map(squeeze)
        .collect();
    assert!(program.len() > 15, "{program:?}");
    let here: Vec<String> = include_str!("reqwest_readme.rs")
        .lines()
        .map(squeeze)
        .collect();
    let mut at = 0;
    for line in &program {
        let found = here[at..].iter().position(|h| h == line);
        let Some(i) = found else {
            panic!("the README's line `{line}` is not, in order, in tests/it/reqwest_readme.rs");
        };
        at += i + 1;
    }
}
