//! A tonic client balanced over three local gRPC replicas, one of which
//! answers `UNAVAILABLE`: retries take those calls elsewhere, the bad
//! replica's breaker opens, and a server stream holds its replica's
//! in-flight slot until it ends. No `protoc`: the messages are written by
//! hand with prost's derive, and the service is tonic's generic `Grpc`.
//!
//! `cargo run --example tonic_client`

use std::error::Error;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;
use tower::{Layer, Service, ServiceBuilder};
use tower_lb::breaker::{CircuitBreakerConfig, State};
use tower_lb::grpc::{self, StatusLayer};
use tower_lb::retry::RetryLayer;

type BoxError = Box<dyn Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// `greet.Greeter` messages, as `protoc` would have generated them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Hello {
    #[prost(string, tag = "1")]
    pub name: String,
}

/// The answer: who answered whom.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Greeting {
    #[prost(string, tag = "1")]
    pub text: String,
}

/// One replica: `Greet` (unary) and `Count` (server streaming, one number
/// every 100 ms); with `down`, every call is `UNAVAILABLE`.
#[derive(Clone)]
struct Replica {
    name: String,
    down: bool,
}

impl tonic::server::NamedService for Replica {
    const NAME: &'static str = "greet.Greeter";
}

impl Service<http::Request<tonic::body::Body>> for Replica {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let replica = self.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Greeting, Hello>::default());
            Ok(match req.uri().path() {
                "/greet.Greeter/Count" => grpc.server_streaming(Counter(replica.name), req).await,
                _ => grpc.unary(replica, req).await,
            })
        })
    }
}

/// `Greet`.
impl Service<Request<Hello>> for Replica {
    type Response = Response<Greeting>;
    type Error = Status;
    type Future = BoxFuture<Result<Response<Greeting>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Hello>) -> Self::Future {
        let (name, down) = (self.name.clone(), self.down);
        Box::pin(async move {
            if down {
                return Err(Status::unavailable(format!("{name} is down")));
            }
            let text = format!("{name} greets {}", req.into_inner().name);
            Ok(Response::new(Greeting { text }))
        })
    }
}

/// `Count`: three greetings, 100 ms apart.
struct Counter(String);

impl Service<Request<Hello>> for Counter {
    type Response = Response<ReceiverStream<Result<Greeting, Status>>>;
    type Error = Status;
    type Future = BoxFuture<Result<Self::Response, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Hello>) -> Self::Future {
        let name = self.0.clone();
        Box::pin(async move {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let whom = req.into_inner().name;
            tokio::spawn(async move {
                for i in 1..=3 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let text = format!("{name} counts {i} for {whom}");
                    if tx.send(Ok(Greeting { text })).await.is_err() {
                        return;
                    }
                }
            });
            Ok(Response::new(ReceiverStream::new(rx)))
        })
    }
}

async fn replica(name: &str, down: bool) -> Result<SocketAddr, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let svc = Replica {
        name: name.into(),
        down,
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    Ok(addr)
}

/// A tonic client call over any transport: `Greet`.
async fn greet<T>(transport: T, name: &str) -> Result<String, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<BoxError>,
    T::ResponseBody: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error: Into<BoxError>,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::from_error(e.into()))?;
    let path = http::uri::PathAndQuery::from_static("/greet.Greeter/Greet");
    let hello = Request::new(Hello { name: name.into() });
    let res = grpc
        .unary(hello, path, ProstCodec::<Hello, Greeting>::default())
        .await?;
    Ok(res.into_inner().text)
}

/// `Count`: opens the stream.
async fn count<T>(transport: T, name: &str) -> Result<tonic::Streaming<Greeting>, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<BoxError>,
    T::ResponseBody: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error: Into<BoxError>,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::from_error(e.into()))?;
    let path = http::uri::PathAndQuery::from_static("/greet.Greeter/Count");
    let hello = Request::new(Hello { name: name.into() });
    let res = grpc
        .server_streaming(hello, path, ProstCodec::<Hello, Greeting>::default())
        .await?;
    Ok(res.into_inner())
}

/// What the demo saw.
pub struct Demo {
    /// The unary answers, in order.
    pub greetings: Vec<String>,
    /// The stream's messages.
    pub counted: Vec<String>,
    /// Requests in flight on the streaming replica while the stream was open.
    pub in_flight_while_streaming: usize,
    /// The failing replica's breaker state at the end.
    pub bad_breaker: State,
    /// Retries the layer made.
    pub retries: u64,
    /// What a call to an empty pool got.
    pub empty_pool: Code,
}

/// Runs the demo: `calls` unary calls, then one stream.
pub async fn run(calls: usize) -> Result<Demo, BoxError> {
    let mut origins = Vec::new();
    for (name, down) in [
        ("replica-1", false),
        ("replica-2", false),
        ("replica-3", true),
    ] {
        origins.push(format!("http://{}", replica(name, down).await?));
    }
    // The classifier reads grpc-status; the retry layer takes it from the
    // balancer (one classifier for the stack).
    let lb = grpc::balance(&origins)?
        .picker(tower_lb::pick::RoundRobin::new())
        .circuit_breaker(
            CircuitBreakerConfig::builder()
                .minimum_calls(2)
                .failure_rate_threshold(50.0)
                .open_wait(Duration::from_secs(30))
                .build()?,
        )
        .build()?;
    let retry = RetryLayer::builder().build()?;
    let channel = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(retry.clone())
        .service(lb.clone());

    let mut greetings = Vec::new();
    for i in 0..calls {
        greetings.push(greet(channel.clone(), &format!("caller-{i}")).await?);
    }

    let mut stream = count(channel.clone(), "the stream").await?;
    let mut counted = Vec::new();
    let mut in_flight_while_streaming = 0;
    while let Some(msg) = stream.message().await? {
        if counted.is_empty() {
            in_flight_while_streaming = lb
                .handle()
                .endpoints()
                .iter()
                .map(|(_, s)| s.in_flight())
                .sum();
        }
        counted.push(msg.text);
    }

    let bad = lb
        .handle()
        .endpoints()
        .into_iter()
        .find(|(k, _)| k.to_string() == origins[2]);
    let bad_breaker = bad
        .and_then(|(_, s)| s.breaker().map(|b| b.state()))
        .unwrap_or(State::Closed);

    let empty = grpc::balance(Vec::<String>::new())?.build()?;
    let empty_pool = match greet(StatusLayer.layer(empty), "nobody").await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    };
    Ok(Demo {
        greetings,
        counted,
        in_flight_while_streaming,
        bad_breaker,
        retries: retry.stats().retries(),
        empty_pool,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let demo = run(6).await?;
    for g in &demo.greetings {
        println!("{g}");
    }
    for c in &demo.counted {
        println!("{c}");
    }
    println!(
        "in flight while the stream was open: {}; retries: {}; replica-3's breaker: {:?}; an empty pool answers {:?}",
        demo.in_flight_while_streaming, demo.retries, demo.bad_breaker, demo.empty_pool
    );
    Ok(())
}
