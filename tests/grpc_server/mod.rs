//! A tonic server for the tests, with hand-written prost messages (no
//! `protoc`): `/test.Echo/Say` (unary) and `/test.Echo/Stream` (server
//! streaming), whose answers a per-server script decides.
#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::metadata::MetadataMap;
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;
use tower::Service;

/// The one message type, both ways.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Echo {
    #[prost(string, tag = "1")]
    pub text: String,
}

/// What a server does with one call (`n`: calls it had before this one).
#[derive(Clone, Debug)]
pub enum Reply {
    /// Answers `"{server}:{text}"`.
    Ok,
    /// A trailers-only answer with this code, and optional pushback value.
    Fail(Code, Option<&'static str>),
    /// Streams: sends one message, waits `hold`, then ends with `end`.
    Stream { hold: Duration, end: Code },
    /// Never answers.
    Hang,
}

type Script = Arc<dyn Fn(usize) -> Reply + Send + Sync>;

/// The echo service, to add to a server of the test's own.
#[derive(Clone)]
pub struct Echoes {
    name: &'static str,
    script: Script,
    calls: Arc<AtomicUsize>,
    timeouts: Timeouts,
}

/// The `grpc-timeout` header of each call, in order (`None` without one).
pub type Timeouts = Arc<Mutex<Vec<Option<String>>>>;

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    pub calls: Arc<AtomicUsize>,
    pub timeouts: Timeouts,
    pub origin: String,
}

/// The echo service named `name`, whose calls follow `script`.
pub fn echoes(
    name: &'static str,
    script: impl Fn(usize) -> Reply + Send + Sync + 'static,
) -> Echoes {
    Echoes {
        name,
        script: Arc::new(script),
        calls: Arc::default(),
        timeouts: Timeouts::default(),
    }
}

/// Starts a server named `name` on 127.0.0.1 whose calls follow `script`.
pub async fn start(
    name: &'static str,
    script: impl Fn(usize) -> Reply + Send + Sync + 'static,
) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let timeouts = Timeouts::default();
    let svc = Echoes {
        name,
        script: Arc::new(script),
        calls: calls.clone(),
        timeouts: timeouts.clone(),
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    Server {
        addr,
        calls,
        timeouts,
        origin: format!("http://{addr}"),
    }
}

impl tonic::server::NamedService for Echoes {
    const NAME: &'static str = "test.Echo";
}

fn status(code: Code, pushback: Option<&'static str>) -> Status {
    let mut md = MetadataMap::new();
    if let Some(p) = pushback {
        md.insert("grpc-retry-pushback-ms", p.parse().unwrap());
    }
    Status::with_metadata(code, "scripted", md)
}

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<http::Request<tonic::body::Body>> for Echoes {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFut<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let me = self.clone();
        let n = me.calls.fetch_add(1, Ordering::SeqCst);
        me.timeouts.lock().unwrap().push(
            req.headers()
                .get("grpc-timeout")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        );
        let reply = (me.script)(n);
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Echo, Echo>::default());
            Ok(match req.uri().path() {
                "/test.Echo/Say" => {
                    grpc.unary(
                        Unary {
                            name: me.name,
                            reply,
                        },
                        req,
                    )
                    .await
                }
                _ => {
                    grpc.server_streaming(
                        Streaming {
                            name: me.name,
                            reply,
                        },
                        req,
                    )
                    .await
                }
            })
        })
    }
}

struct Unary {
    name: &'static str,
    reply: Reply,
}

impl Service<Request<Echo>> for Unary {
    type Response = Response<Echo>;
    type Error = Status;
    type Future = BoxFut<Result<Response<Echo>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Echo>) -> Self::Future {
        let (name, reply) = (self.name, self.reply.clone());
        Box::pin(async move {
            match reply {
                Reply::Fail(code, pushback) => Err(status(code, pushback)),
                Reply::Hang => std::future::pending().await,
                _ => Ok(Response::new(Echo {
                    text: format!("{name}:{}", req.into_inner().text),
                })),
            }
        })
    }
}

struct Streaming {
    name: &'static str,
    reply: Reply,
}

impl Service<Request<Echo>> for Streaming {
    type Response = Response<ReceiverStream<Result<Echo, Status>>>;
    type Error = Status;
    type Future = BoxFut<Result<Self::Response, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Echo>) -> Self::Future {
        let (name, reply) = (self.name, self.reply.clone());
        Box::pin(async move {
            let (hold, end) = match reply {
                Reply::Fail(code, pushback) => return Err(status(code, pushback)),
                Reply::Hang => std::future::pending().await,
                Reply::Ok => (Duration::ZERO, Code::Ok),
                Reply::Stream { hold, end } => (hold, end),
            };
            let (tx, rx) = mpsc::channel(4);
            let text = format!("{name}:{}", req.into_inner().text);
            tokio::spawn(async move {
                let _ = tx.send(Ok(Echo { text })).await;
                tokio::time::sleep(hold).await;
                if end != Code::Ok {
                    let _ = tx.send(Err(status(end, None))).await;
                }
            });
            Ok(Response::new(ReceiverStream::new(rx)))
        })
    }
}

/// A tonic client over any transport, calling `/test.Echo/Say`.
pub async fn say<T>(transport: T, text: &str) -> Result<String, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    say_with(transport, Request::new(Echo { text: text.into() })).await
}

/// As [`say`], with a request of the caller's (metadata, timeout).
pub async fn say_with<T>(transport: T, req: Request<Echo>) -> Result<String, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::from_error(e.into()))?;
    let path = http::uri::PathAndQuery::from_static("/test.Echo/Say");
    let res = grpc
        .unary(req, path, ProstCodec::<Echo, Echo>::default())
        .await?;
    Ok(res.into_inner().text)
}

/// Opens a server stream on `/test.Echo/Stream`.
pub async fn open_stream<T>(transport: T, text: &str) -> Result<tonic::Streaming<Echo>, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::from_error(e.into()))?;
    let path = http::uri::PathAndQuery::from_static("/test.Echo/Stream");
    let res = grpc
        .server_streaming(
            Request::new(Echo { text: text.into() }),
            path,
            ProstCodec::<Echo, Echo>::default(),
        )
        .await?;
    Ok(res.into_inner())
}
