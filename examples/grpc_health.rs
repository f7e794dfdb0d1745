//! A generated gRPC client balanced over three local replicas, with active
//! `grpc.health.v1` checks: the replica that reports `NOT_SERVING` is taken
//! out of rotation, and put back when it serves again.
//!
//! * The client is generated from `helloworld.proto` (`GreeterClient`,
//!   compiled by the `helloworld` test crate with tonic-prost-build, as
//!   your build compiles your protos), and runs over the balanced stack:
//!   `GreeterClient::new(stack)`.
//! * Every replica's channel is made from one tonic `Endpoint`, the
//!   template: timeouts, keep-alive and user agent as for a single channel.
//! * `GrpcHealthCheck::check` asks each replica's health service (here
//!   tonic-health's) about `helloworld.Greeter`, over that replica's own
//!   channel; the balancer's health hook prints each flip.
//!
//! `cargo run --example grpc_health`

use std::error::Error;
use std::time::Duration;

use helloworld::greeter_client::GreeterClient;
use helloworld::{HelloRequest, Replica};
use tokio::sync::mpsc;
use tonic::transport::Endpoint;
use tower::ServiceBuilder;
use tower_lb::check::{self, HealthCheck};
use tower_lb::grpc::{self, GrpcHealthCheck, StatusLayer};
use tower_lb::health::HealthChange;
use tower_lb::pick;
use tower_lb::retry::RetryLayer;

type BoxError = Box<dyn Error + Send + Sync>;

/// How long the demo waits for a health flip before giving up (checks run
/// every 100 ms; the bound is for a loaded machine).
const FLIP_WAIT: Duration = Duration::from_secs(10);

/// Which replica answered each round of calls.
pub struct Demo {
    /// All three serving.
    pub before: Vec<String>,
    /// Replica `c` reporting `NOT_SERVING`.
    pub while_c_is_down: Vec<String>,
    /// `c` serving again.
    pub after: Vec<String>,
    /// The health flips the balancer reported: (endpoint, change).
    pub flips: Vec<(String, String)>,
}

/// Sends `calls` greetings, returning who answered each.
async fn greet<T>(client: &mut GreeterClient<T>, calls: usize) -> Result<Vec<String>, BoxError>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let mut answered = Vec::new();
    for i in 0..calls {
        let name = format!("caller-{i}");
        let reply = client.say_hello(HelloRequest { name }).await?;
        let message = reply.into_inner().message;
        answered.extend(message.split(':').next().map(str::to_owned));
    }
    Ok(answered)
}

/// Waits for the health flip `want` ("failing" or "passing") of `endpoint`.
async fn flip(
    events: &mut mpsc::UnboundedReceiver<(String, String)>,
    flips: &mut Vec<(String, String)>,
    endpoint: &str,
    want: &str,
) -> Result<(), BoxError> {
    tokio::time::timeout(FLIP_WAIT, async {
        while let Some(event) = events.recv().await {
            let done = event.0 == endpoint && event.1 == want;
            flips.push(event);
            if done {
                return Ok(());
            }
        }
        Err("the balancer is gone".into())
    })
    .await
    .map_err(|_| format!("{endpoint} did not turn {want} within {FLIP_WAIT:?}"))?
}

/// Runs the demo: `calls` greetings per round.
pub async fn run(calls: usize) -> Result<Demo, BoxError> {
    let replicas = [
        Replica::start("a").await?,
        Replica::start("b").await?,
        Replica::start("c").await?,
    ];
    let origins = replicas.iter().map(|r| r.origin.as_str());

    // The settings you would give one channel, for every replica.
    let template = Endpoint::from_static("http://greeter")
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(Duration::from_secs(30))
        .user_agent("grpc-health-example")?;
    let (tx, mut events) = mpsc::unbounded_channel();
    let lb = grpc::balance_with(template, origins)?
        .picker(pick::RoundRobin::new())
        .on_health_change(move |e| {
            let change = match e.change {
                HealthChange::CheckFailing { .. } => "failing",
                HealthChange::CheckPassing => "passing",
                _ => return,
            };
            let endpoint = e.endpoint.as_deref().unwrap_or("-").to_owned();
            let _ = tx.send((endpoint, change.to_owned()));
        })
        .build()?;

    // Quick checks for the demo; the defaults probe every 10 s and need 3
    // failures (2 passes) in a row to flip.
    let config = HealthCheck::builder()
        .interval(Duration::from_millis(100))
        .unhealthy_threshold(1)
        .healthy_threshold(1)
        .build()?;
    let checks = check::spawn(&lb, config, GrpcHealthCheck::check(helloworld::SERVICE))?;

    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(RetryLayer::builder().build()?)
        .service(lb);
    let mut client = GreeterClient::new(stack);

    let mut flips = Vec::new();
    let before = greet(&mut client, calls).await?;
    let c = &replicas[2];
    c.set_serving(false).await;
    flip(&mut events, &mut flips, &c.origin, "failing").await?;
    let while_c_is_down = greet(&mut client, calls).await?;
    c.set_serving(true).await;
    flip(&mut events, &mut flips, &c.origin, "passing").await?;
    let after = greet(&mut client, calls).await?;
    drop(checks);
    Ok(Demo {
        before,
        while_c_is_down,
        after,
        flips,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let demo = run(6).await?;
    println!("all serving:      {}", demo.before.join(" "));
    println!("c NOT_SERVING:    {}", demo.while_c_is_down.join(" "));
    println!("c serving again:  {}", demo.after.join(" "));
    for (endpoint, change) in &demo.flips {
        println!("health: {endpoint} {change}");
    }
    Ok(())
}
