//! The HTTP gateway through real servers: a client talks to an axum
//! server on 127.0.0.1 that mounts `http::Gateway`, in front of real axum
//! upstreams. Headers (hop-by-hop, `Host`, `X-Forwarded-*`, trailers) and
//! error statuses here; bodies, retries and the wait for a pool's first
//! endpoints in `gateway_bodies.rs`.
#![cfg(feature = "http")]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body as AxumBody;
use axum::extract::{ConnectInfo, Request};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tower_lb::http::gateway::{self, HostPolicy, XForwarded};
use tower_lb::http::{self as lb_http, Gateway};

/// The gateway's upstream client.
pub type UpstreamClient = Client<HttpConnector, gateway::Body>;

/// What an upstream saw: its name, the URI, every header (values joined
/// with `|`) and the body's length.
pub type Seen = serde_json::Value;

/// Serves `router` on a free port of 127.0.0.1, with the peer's address
/// in each request (axum's `ConnectInfo`).
pub async fn serve(router: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// An upstream answering every request with what it saw, as JSON, with
/// `status`.
pub async fn echo(name: &'static str, status: StatusCode) -> SocketAddr {
    serve(
        Router::new().fallback(move |req: Request| async move {
            (status, seen(name, req).await.to_string())
        }),
    )
    .await
}

/// What `name` saw of `req`.
pub async fn seen(name: &str, req: Request) -> Seen {
    let (parts, body) = req.into_parts();
    let mut headers = BTreeMap::<String, String>::new();
    for (k, v) in &parts.headers {
        let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
        headers
            .entry(k.to_string())
            .and_modify(|all| *all = format!("{all}|{v}"))
            .or_insert(v);
    }
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    serde_json::json!({
        "name": name,
        "uri": parts.uri.to_string(),
        "headers": headers,
        "len": body.len(),
        "head": String::from_utf8_lossy(&body[..body.len().min(16)]),
    })
}

/// The upstream client: plain HTTP/1.
pub fn upstream_client() -> UpstreamClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Serves `gateway` under `/api` of an axum router; returns its address.
pub async fn mount<S>(gateway: Gateway<S>) -> SocketAddr
where
    Gateway<S>:
        tower::Service<Request, Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
    <Gateway<S> as tower::Service<Request>>::Response: axum::response::IntoResponse,
    <Gateway<S> as tower::Service<Request>>::Future: Send + 'static,
{
    serve(Router::new().nest_service("/api", gateway)).await
}

/// The peer's address as axum stores it.
pub fn axum_peer(ext: &http::Extensions) -> Option<SocketAddr> {
    ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

/// A client's answer: status, headers, body, trailers.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub trailers: Option<HeaderMap>,
}

impl Answer {
    pub fn json(&self) -> Seen {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// Sends `req` with a plain hyper client and reads the whole answer.
pub async fn send<B>(req: http::Request<B>) -> Answer
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let client = Client::builder(TokioExecutor::new()).build_http::<B>();
    let res = client.request(req).await.unwrap();
    let (parts, body) = res.into_parts();
    let collected = body.collect().await.unwrap();
    Answer {
        status: parts.status,
        headers: parts.headers,
        trailers: collected.trailers().cloned(),
        body: collected.to_bytes(),
    }
}

/// `GET http://{gw}{path}` with `headers`.
pub async fn get(gw: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = http::Request::get(format!("http://{gw}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    send(req.body(Full::new(Bytes::new())).unwrap()).await
}

#[tokio::test]
async fn forwards_with_the_clients_host_and_forwarded_headers() {
    let up = echo("a", StatusCode::OK).await;
    let lb = lb_http::balance(upstream_client(), [format!("http://{up}")])
        .unwrap()
        .build()
        .unwrap();
    let gateway = Gateway::builder(lb).peer_from(axum_peer).build().unwrap();
    let gw = mount(gateway).await;
    let answer = get(gw, "/api/users?id=7", &[("x-forwarded-for", "203.0.113.7")]).await;
    assert_eq!(answer.status, StatusCode::OK);
    let seen = answer.json();
    let h = &seen["headers"];
    assert_eq!(
        seen["uri"], "/users?id=7",
        "nested under /api: the prefix goes"
    );
    assert_eq!(h["host"], gw.to_string(), "the client's Host is kept");
    assert_eq!(h["x-forwarded-for"], "203.0.113.7, 127.0.0.1");
    assert_eq!(h["x-forwarded-host"], gw.to_string());
    assert_eq!(h["x-forwarded-proto"], "http");

    // At the edge: the client's entries are dropped.
    let lb = lb_http::balance(upstream_client(), [format!("http://{up}")])
        .unwrap()
        .build()
        .unwrap();
    let edge = Gateway::builder(lb)
        .peer_from(axum_peer)
        .x_forwarded(XForwarded::Replace)
        .build()
        .unwrap();
    let gw = mount(edge).await;
    let spoofed = [("x-forwarded-for", "6.6.6.6"), ("x-forwarded-host", "evil")];
    let seen = get(gw, "/api/", &spoofed).await.json();
    assert_eq!(seen["headers"]["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen["headers"]["x-forwarded-host"], gw.to_string());
}

#[tokio::test]
async fn host_is_the_replicas_or_a_fixed_name_when_asked() {
    let up = echo("a", StatusCode::OK).await;
    for (policy, want) in [
        (HostPolicy::Replica, up.to_string()),
        (
            HostPolicy::Set(HeaderValue::from_static("api.internal")),
            "api.internal".to_owned(),
        ),
    ] {
        let lb = lb_http::balance(upstream_client(), [format!("http://{up}")])
            .unwrap()
            .build()
            .unwrap();
        let gw = mount(Gateway::builder(lb).host(policy).build().unwrap()).await;
        let seen = get(gw, "/api/x", &[]).await.json();
        assert_eq!(seen["headers"]["host"], want.as_str());
        assert_eq!(seen["headers"]["x-forwarded-host"], gw.to_string());
    }
}

/// An upstream that answers with hop-by-hop fields of its own, an
/// end-to-end one, and a streamed body with a trailer it declares.
async fn hop_upstream() -> SocketAddr {
    serve(Router::new().fallback(|req: Request| async move {
        let seen = seen("hop", req).await.to_string();
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", HeaderValue::from_static("42"));
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from(seen))),
            Ok(Frame::trailers(trailers)),
        ];
        let body = StreamBody::new(futures_iter(frames));
        http::Response::builder()
            .header("connection", "x-up-private")
            .header("x-up-private", "1")
            .header("keep-alive", "timeout=5")
            .header("proxy-authenticate", "Basic")
            .header("trailer", "x-checksum")
            .header("x-end", "kept")
            .body(AxumBody::new(body))
            .unwrap()
    }))
    .await
}

/// A stream over `items`.
pub fn futures_iter<T: Unpin + Send + 'static>(
    items: Vec<T>,
) -> impl futures_core::Stream<Item = T> + Send + Unpin {
    tokio_stream::iter(items)
}

#[tokio::test]
async fn hop_by_hop_fields_stop_at_the_gateway_and_trailers_pass() {
    let up = hop_upstream().await;
    let lb = lb_http::balance(upstream_client(), [format!("http://{up}")])
        .unwrap()
        .build()
        .unwrap();
    let gw = mount(Gateway::new(lb)).await;
    let answer = get(
        gw,
        "/api/x",
        &[
            ("connection", "x-private, keep-alive"),
            ("x-private", "for the gateway"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic eA=="),
            ("proxy-connection", "keep-alive"),
            ("upgrade", "foo/1"),
            ("te", "trailers"),
            ("x-end", "kept"),
        ],
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let seen = serde_json::from_slice::<Seen>(&answer.body).unwrap();
    let up_headers = seen["headers"].as_object().unwrap();
    for gone in [
        "x-private",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "upgrade",
    ] {
        assert!(
            !up_headers.contains_key(gone),
            "{gone} reached the upstream: {seen}"
        );
    }
    assert_eq!(seen["headers"]["te"], "trailers");
    assert_eq!(seen["headers"]["x-end"], "kept");
    for gone in ["x-up-private", "keep-alive", "proxy-authenticate"] {
        assert!(
            answer.headers.get(gone).is_none(),
            "{gone} reached the client"
        );
    }
    assert_eq!(answer.headers["x-end"], "kept");
    let trailers = answer
        .trailers
        .expect("the upstream's trailers, over HTTP/1 twice");
    assert_eq!(trailers["x-checksum"], "42");
}

#[tokio::test]
async fn errors_are_answered_with_gateway_statuses() {
    // An empty pool, no wait: 503.
    let lb = lb_http::balance(upstream_client(), Vec::<String>::new())
        .unwrap()
        .build()
        .unwrap();
    let gw = mount(Gateway::new(lb)).await;
    let answer = get(gw, "/api/x", &[]).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.body, "no healthy upstream\n");

    // Nobody listens: 502.
    let dead = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let lb = lb_http::balance(upstream_client(), [format!("http://{dead}")])
        .unwrap()
        .build()
        .unwrap();
    let gw = mount(Gateway::new(lb)).await;
    assert_eq!(get(gw, "/api/x", &[]).await.status, StatusCode::BAD_GATEWAY);

    // Accepts and never answers, past the balancer's timeout: 504.
    let hole = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = hole.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = hole.accept().await {
            held.push(tcp);
        }
    });
    let lb = lb_http::balance(upstream_client(), [format!("http://{hole_addr}")])
        .unwrap()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let gw = mount(Gateway::new(lb)).await;
    let answer = get(gw, "/api/x", &[]).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(answer.body, "upstream timed out\n");
}
