//! The whole HTTP exchange: response bodies hold their endpoint's slot
//! until they end, body errors are failures, request bodies are kept for
//! retries (real hyper servers on 127.0.0.1 where the protocol matters).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::http::{Classifier, Track};
use tower_lb::retry::RetryLayer;
use tower_lb::{Balance, pick};

type Stream = UnsyncBoxBody<Bytes, io::Error>;

/// A request body that streams `len` bytes of `byte` in 1 KiB chunks.
fn streaming(byte: u8, len: usize) -> Stream {
    let chunks: Vec<Result<Frame<Bytes>, io::Error>> = (0..len.div_ceil(1024))
        .map(|i| {
            let n = 1024.min(len - i * 1024);
            Ok(Frame::data(Bytes::from(vec![byte; n])))
        })
        .collect();
    StreamBody::new(Frames(chunks.into_iter())).boxed_unsync()
}

struct Frames<I>(I);

impl<I: Iterator + Unpin> futures_core::Stream for Frames<I> {
    type Item = I::Item;
    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<I::Item>> {
        Poll::Ready(self.get_mut().0.next())
    }
}

/// A hyper server whose `n`-th request (from 0) `answer` answers, after
/// reading the whole request body: `(status, bytes received)`.
async fn server(
    answer: impl Fn(usize) -> u16 + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let answer = Arc::new(answer);
    let counted = calls.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (answer, calls) = (answer.clone(), counted.clone());
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                let status = answer(n);
                async move {
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let sum: u64 = body.iter().map(|&b| u64::from(b)).sum();
                    let text = format!("{} {sum}", body.len());
                    let mut res = hyper::Response::new(Full::new(Bytes::from(text)));
                    *res.status_mut() = status.try_into().unwrap();
                    Ok::<_, Infallible>(res)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    (addr, calls)
}

/// A server that answers 200 with a 100-byte `Content-Length`, sends 10
/// bytes and hangs up.
async fn truncating() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut tcp, &mut buf).await;
                let head = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789";
                let _ = tcp.write_all(head).await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    addr
}

fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Stream> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Asserts the failures each endpoint of `lb` (keyed `http://{addr}`) has.
fn assert_failures<S, P: pick::Picker, C>(
    lb: &Balance<tower_lb::http::Origin, S, P, C>,
    want: &[(SocketAddr, u64)],
) {
    let failures: Vec<(String, u64)> = lb
        .handle()
        .endpoints()
        .into_iter()
        .map(|(k, s)| (k.to_string(), s.failures()))
        .collect();
    for (addr, n) in want {
        assert!(
            failures.contains(&(format!("http://{addr}"), *n)),
            "{failures:?}"
        );
    }
}

#[tokio::test]
async fn a_body_cut_midway_is_a_failure_of_its_endpoint() {
    let bad = truncating().await;
    let (good, _) = server(|_| 200).await;
    let lb = tower_lb::http::balance(
        client(),
        [format!("http://{bad}"), format!("http://{good}")],
    )
    .unwrap()
    .picker(pick::RoundRobin::new())
    .build()
    .unwrap();
    let mut body_errors = 0;
    for _ in 0..4 {
        let req = http::Request::get("/x").body(streaming(0, 0)).unwrap();
        let res = lb.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), 200, "both heads say 200");
        if res.into_body().collect().await.is_err() {
            body_errors += 1;
        }
    }
    assert_eq!(body_errors, 2);
    assert_failures(&lb, &[(bad, 2), (good, 0)]);
}

#[tokio::test]
async fn a_post_body_is_replayed_with_the_same_bytes_and_a_large_one_is_not() {
    let (addr, calls) = server(|n| if n == 0 { 503 } else { 200 }).await;
    let lb = tower_lb::http::balance(client(), [format!("http://{addr}")])
        .unwrap()
        .build()
        .unwrap();
    let retry = RetryLayer::builder()
        .retry_non_idempotent()
        .build()
        .unwrap();
    let svc = retry.layer(lb.clone());
    let req = http::Request::post("/upload")
        .body(streaming(7, 10 * 1024))
        .unwrap();
    let res = svc.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let got = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(got, format!("10240 {}", 7 * 10240), "the same bytes, twice");
    assert_eq!(
        (calls.load(Ordering::SeqCst), retry.stats().retries()),
        (2, 1)
    );

    // 1 MiB is past the 256 KiB buffer: sent once, answered as it was.
    let (addr, calls) = server(|_| 503).await;
    let lb = tower_lb::http::balance(client(), [format!("http://{addr}")])
        .unwrap()
        .build()
        .unwrap();
    let svc = retry.layer(lb);
    let req = http::Request::post("/upload")
        .body(streaming(1, 1024 * 1024))
        .unwrap();
    let res = svc.oneshot(req).await.unwrap();
    assert_eq!(res.status(), 503, "the call completes with its answer");
    let got = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(got, format!("1048576 {}", 1024 * 1024));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(retry.stats().not_replayable(), 1);
    assert_eq!(retry.stats().retries(), 1, "no new retry");
}

#[cfg(feature = "reqwest")]
#[tokio::test]
async fn a_retry_layer_over_reqwest_needs_no_replay_closure() {
    let (a, _) = server(|_| 503).await;
    let (b, _) = server(|_| 200).await;
    let client = reqwest::Client::new();
    let lb = tower_lb::http::balance(
        client.clone(),
        [format!("http://{a}"), format!("http://{b}")],
    )
    .unwrap()
    .picker(pick::RoundRobin::new())
    .build()
    .unwrap();
    let retry = RetryLayer::builder().build().unwrap();
    let mut svc = retry.layer(lb);
    let req = client.get("http://service.internal/x").build().unwrap();
    let res = svc.ready().await.unwrap().call(req).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(retry.stats().retries(), 1);
}

/// reqwest's bodies are tracked as hyper's are: a body cut midway is a
/// failure of its endpoint, and a body holds its slot until it is read
/// (or dropped), while the response keeps its URL and remote address.
#[cfg(feature = "reqwest")]
#[tokio::test]
async fn a_reqwest_body_holds_its_slot_and_a_cut_one_fails_its_endpoint() {
    let bad = truncating().await;
    let (good, _) = server(|_| 200).await;
    let client = reqwest::Client::new();
    let lb = tower_lb::http::balance(
        client.clone(),
        [format!("http://{bad}"), format!("http://{good}")],
    )
    .unwrap()
    .picker(pick::RoundRobin::new())
    .build()
    .unwrap();
    let in_flight = || -> usize {
        lb.handle()
            .endpoints()
            .iter()
            .map(|(_, s)| s.in_flight())
            .sum()
    };
    let mut body_errors = 0;
    for _ in 0..4 {
        let req = client.get("http://service.internal/x?q=1").build().unwrap();
        let res = lb.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), 200, "both heads say 200");
        assert_eq!(in_flight(), 1, "the unread body holds its slot");
        let addr = res.remote_addr().expect("the remote address is kept");
        assert_eq!(res.url().as_str(), format!("http://{addr}/x?q=1"));
        if res.bytes().await.is_err() {
            body_errors += 1;
        }
        assert_eq!(in_flight(), 0);
    }
    assert_eq!(body_errors, 2);
    assert_failures(&lb, &[(bad, 2), (good, 0)]);
    // Head-time tracking, as before body tracking: the slot ends with the
    // head.
    let heads = tower_lb::http::balance(client.clone(), [format!("http://{good}")])
        .unwrap()
        .classify(tower_lb::http::Classifier::new().track(Track::Headers))
        .build()
        .unwrap();
    let req = client.get("http://service.internal/x").build().unwrap();
    let res = heads.clone().oneshot(req).await.unwrap();
    let state = heads.handle().endpoints().pop().unwrap().1;
    assert_eq!(state.in_flight(), 0);
    assert_eq!(res.bytes().await.unwrap(), "0 0");
}

/// A response body that sends `chunks` chunks, one per poll after a yield.
struct Chunks(usize);

impl Body for Chunks {
    type Data = Bytes;
    type Error = io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if self.0 == 0 {
            return Poll::Ready(None);
        }
        self.0 -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
    }
}

/// 100,000 calls, each cancelled at a random point (before the head, in
/// the body, or never): every endpoint's in-flight count ends at zero.
#[tokio::test(start_paused = true)]
async fn random_cancellation_mid_body_leaves_every_count_at_zero() {
    let replica = service_fn(|req: http::Request<()>| async move {
        let delay = req.headers().get("x-delay").is_some();
        if delay {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok::<_, io::Error>(http::Response::new(Chunks(4)))
    });
    let lb = Balance::builder()
        .picker(pick::LeastInFlight::new())
        .classify(Classifier::new())
        .endpoint(0, replica)
        .endpoint(1, replica)
        .endpoint(2, replica)
        .build()
        .unwrap();
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..100_000 {
        let mut req = http::Request::new(());
        if rng.bool() {
            req.headers_mut()
                .insert("x-delay", http::HeaderValue::from_static("1"));
        }
        let fut = lb.clone().oneshot(req);
        match rng.u8(0..4) {
            // Dropped before the answer.
            0 => drop(fut),
            cut => {
                let res = match tokio::time::timeout(Duration::from_micros(500), fut).await {
                    Ok(res) => res.unwrap(),
                    Err(_) => continue,
                };
                let mut body = res.into_body();
                // Read `cut - 1` chunks (0: none), then drop or finish.
                for _ in 1..cut {
                    let _ = body.frame().await;
                }
                if rng.bool() {
                    let _ = body.collect().await;
                }
            }
        }
    }
    for (_, s) in lb.handle().endpoints() {
        assert_eq!(s.in_flight(), 0);
        assert_eq!(
            s.failures(),
            0,
            "a caller's drop is not the endpoint's fault"
        );
    }
}

/// Header-time tracking (the comparison option) releases at the head;
/// body tracking holds the slot while the body is open.
#[tokio::test(start_paused = true)]
async fn header_time_tracking_is_blind_to_open_bodies() {
    for (track, open) in [(Track::Headers, 0), (Track::Body, 1), (Track::WholeBody, 1)] {
        let replica = service_fn(|_: http::Request<()>| async {
            Ok::<_, io::Error>(http::Response::new(Chunks(2)))
        });
        let lb = Balance::builder()
            .classify(Classifier::new().track(track))
            .endpoint("a", replica)
            .build()
            .unwrap();
        let res = lb.clone().oneshot(http::Request::new(())).await.unwrap();
        let state = lb.handle().endpoints().pop().unwrap().1;
        assert_eq!(state.in_flight(), open, "{track:?}");
        let _ = res.into_body().collect().await;
        assert_eq!(state.in_flight(), 0, "{track:?}");
    }
}
