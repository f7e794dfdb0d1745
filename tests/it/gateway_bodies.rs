//! The HTTP gateway's bodies and pool through real servers: a retried
//! request replays its buffered body, a body past the bound is refused
//! before it reaches an upstream, a body that is not buffered streams
//! through as it is sent, and a request that arrives before DNS's first
//! answer waits for it.
#![cfg(all(feature = "http", feature = "dns"))]

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use tokio::sync::{Notify, mpsc, oneshot};
use tower::Layer;
use tower::util::MapRequestLayer;
use tower_lb::discover::dns::{Dns, Resolve};
use tower_lb::discover::{self, Source};
use tower_lb::http::{self as lb_http, Gateway};
use tower_lb::pick::RoundRobin;
use tower_lb::retry::RetryLayer;

use super::gateway::{echo, futures_iter, get, mount, seen, send, serve, upstream_client};

/// A request to the gateway at `gw` with `body`.
fn request<B>(gw: SocketAddr, method: Method, body: B) -> http::Request<B> {
    http::Request::builder()
        .method(method)
        .uri(format!("http://{gw}/api/upload"))
        .body(body)
        .unwrap()
}

/// `len` bytes of a repeating pattern.
fn payload(len: usize) -> Bytes {
    (0..len).map(|i| b"abcdefgh"[i % 8]).collect()
}

#[tokio::test]
async fn a_retried_put_replays_its_buffered_body() {
    // The failing upstream reads each body whole and records its length.
    let lens = Arc::new(Mutex::new(Vec::new()));
    let bad = {
        let lens = Arc::clone(&lens);
        serve(Router::new().fallback(move |req: Request| {
            let lens = Arc::clone(&lens);
            async move {
                let seen = seen("bad", req).await;
                lens.lock().unwrap().push(seen["len"].as_u64().unwrap());
                StatusCode::SERVICE_UNAVAILABLE
            }
        }))
        .await
    };
    let good = echo("good", StatusCode::OK).await;
    let lb = lb_http::balance(
        upstream_client(),
        [format!("http://{bad}"), format!("http://{good}")],
    )
    .unwrap()
    .picker(RoundRobin::new())
    .build()
    .unwrap();
    let retry = RetryLayer::builder().build().unwrap();
    let gw = mount(Gateway::new(retry.layer(lb))).await;
    let body = payload(100 * 1024);
    for _ in 0..2 {
        let answer = send(request(gw, Method::PUT, Full::new(body.clone()))).await;
        assert_eq!(answer.status, StatusCode::OK);
        let seen = answer.json();
        assert_eq!(
            (seen["name"].as_str(), seen["len"].as_u64()),
            (Some("good"), Some(102_400))
        );
        assert_eq!(seen["head"], "abcdefghabcdefgh");
    }
    // Round robin sent one of the two to the failing upstream first: its
    // retry carried the whole body again.
    assert!(retry.stats().retries() >= 1);
    assert_eq!(retry.stats().not_replayable(), 0);
    let lens = lens.lock().unwrap().clone();
    assert_eq!(lens.len() as u64, retry.stats().retries());
    assert!(lens.iter().all(|&n| n == 102_400), "{lens:?}");
}

#[tokio::test]
async fn a_body_past_the_bound_is_refused_and_one_not_buffered_is_not_bounded() {
    let count = Arc::new(Mutex::new(0u32));
    let up = {
        let count = Arc::clone(&count);
        serve(Router::new().fallback(move |req: Request| {
            *count.lock().unwrap() += 1;
            async move { seen("up", req).await.to_string() }
        }))
        .await
    };
    let lb = lb_http::balance(upstream_client(), [format!("http://{up}")])
        .unwrap()
        .build()
        .unwrap();
    let gw = mount(Gateway::builder(lb).max_body(64 * 1024).build().unwrap()).await;
    // With a Content-Length past the bound.
    let answer = send(request(gw, Method::PUT, Full::new(payload(64 * 1024 + 1)))).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(answer.body, "request body larger than 65536 bytes\n");
    // Chunked, without a length: refused once the bound is passed.
    let chunks: Vec<Result<Frame<Bytes>, io::Error>> = (0..5)
        .map(|_| Ok(Frame::data(payload(16 * 1024))))
        .collect();
    let answer = send(request(
        gw,
        Method::PUT,
        StreamBody::new(futures_iter(chunks)),
    ))
    .await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(*count.lock().unwrap(), 0, "neither reached the upstream");
    // At the bound it passes; a POST is streamed, whatever its length.
    let answer = send(request(gw, Method::PUT, Full::new(payload(64 * 1024)))).await;
    assert_eq!(answer.json()["len"], 64 * 1024);
    let answer = send(request(gw, Method::POST, Full::new(payload(3 << 20)))).await;
    assert_eq!(answer.json()["len"], 3 << 20);
}

#[tokio::test]
async fn a_post_body_streams_through_before_the_client_ends_it() {
    // The upstream says when the first chunk arrived, then reads the rest.
    let (first_tx, first_rx) = oneshot::channel::<Bytes>();
    let first_tx = Arc::new(Mutex::new(Some(first_tx)));
    let up = serve(Router::new().fallback(move |req: Request| {
        let first_tx = Arc::clone(&first_tx);
        async move {
            let mut body = req.into_body();
            let mut len = 0;
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    len += data.len();
                    if let Some(tx) = first_tx.lock().unwrap().take() {
                        let _ = tx.send(data);
                    }
                }
            }
            len.to_string()
        }
    }))
    .await;
    let lb = lb_http::balance(upstream_client(), [format!("http://{up}")])
        .unwrap()
        .build()
        .unwrap();
    let gw = mount(Gateway::new(lb)).await;
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, io::Error>>(1);
    let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    let answer = tokio::spawn(send(request(gw, Method::POST, body)));
    tx.send(Ok(Frame::data(Bytes::from_static(b"first"))))
        .await
        .unwrap();
    // Buffered, the first chunk would reach the upstream only after the
    // last: this would wait forever (bounded here, so it fails instead).
    let first = tokio::time::timeout(Duration::from_secs(30), first_rx).await;
    assert_eq!(
        first.expect("the first chunk streamed through").unwrap(),
        "first"
    );
    tx.send(Ok(Frame::data(Bytes::from_static(b"second"))))
        .await
        .unwrap();
    drop(tx);
    let answer = answer.await.unwrap();
    assert_eq!(
        (answer.status, answer.body),
        (StatusCode::OK, Bytes::from("11"))
    );
}

/// A resolver that answers `addr` once the test releases it.
#[derive(Clone)]
struct Released {
    addr: SocketAddr,
    release: Arc<Notify>,
}

impl Resolve for Released {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        assert_eq!((host, port), ("users.internal", 8080));
        self.release.notified().await;
        Ok(vec![self.addr])
    }
}

#[tokio::test]
async fn a_request_before_the_first_dns_answer_waits_for_it() {
    let up = echo("a", StatusCode::OK).await;
    let client = upstream_client();
    let lb = lb_http::balance(client.clone(), Vec::<String>::new())
        .unwrap()
        .build()
        .unwrap();
    let release = Arc::new(Notify::new());
    let resolver = Released {
        addr: up,
        release: Arc::clone(&release),
    };
    let _dns = Dns::builder("users.internal", 8080)
        .resolver(resolver)
        .build()
        .unwrap()
        .spawn(
            lb.handle(),
            discover::http_endpoints(client, "http").unwrap(),
        );
    let gateway = Gateway::builder(lb.clone())
        .wait_for_endpoints(&lb.handle(), Duration::from_secs(30))
        .build()
        .unwrap();
    // Says when a request reached the gateway. The test runtime has one
    // thread: by the time the test runs again, the gateway has found the
    // pool empty and waits.
    let arrived = Arc::new(Notify::new());
    let signal = Arc::clone(&arrived);
    let app = MapRequestLayer::new(move |req: Request| {
        signal.notify_one();
        req
    })
    .layer(gateway);
    let gw = serve(Router::new().nest_service("/api", app)).await;
    let answer = tokio::spawn(async move { get(gw, "/api/users", &[]).await });
    arrived.notified().await;
    assert!(lb.handle().is_empty());
    release.notify_one();
    let answer = answer.await.unwrap();
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["uri"], "/users");

    // No answer within the wait: 503.
    let empty = lb_http::balance(upstream_client(), Vec::<String>::new())
        .unwrap()
        .build()
        .unwrap();
    let gateway = Gateway::builder(empty.clone())
        .wait_for_endpoints(&empty.handle(), Duration::from_millis(50))
        .build()
        .unwrap();
    let gw = mount(gateway).await;
    let answer = get(gw, "/api/users", &[]).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.body, "no upstream endpoint yet\n");
}
