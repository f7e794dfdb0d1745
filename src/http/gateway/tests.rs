use std::io;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use tokio::time::Instant;
use tower::{ServiceExt, service_fn};

use super::*;
use crate::Balance;
use crate::balance::WaitTimeout;
use crate::retry::{self, RequestBody};
use http_body::Body as _;

type Upstream = tower::util::ServiceFn<
    fn(Request<Body>) -> std::future::Ready<Result<Response<Full<Bytes>>, io::Error>>,
>;

/// An endpoint answering with its body's length and whether it was
/// buffered.
fn echo() -> Upstream {
    service_fn(|req: Request<Body>| {
        let text = format!(
            "{} {}",
            req.body().size_hint().lower(),
            req.body().is_buffered()
        );
        std::future::ready(Ok(Response::new(Full::new(Bytes::from(text)))))
    })
}

async fn text<B>(res: Response<ResponseBody<B>>) -> (StatusCode, String)
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn balancer_and_retry_errors_map_to_gateway_statuses() {
    type E = crate::Error<io::Error>;
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "connect");
    let refused = || io::Error::new(io::ErrorKind::ConnectionRefused, "connect");
    let unavailable = crate::Error::<io::Error>::AllUnavailable(crate::Unavailable::default());
    for (e, status) in [
        (E::NoEndpoints, 503),
        (E::Overloaded, 503),
        (unavailable, 503),
        (E::Panic, 503),
        (E::Timeout, 504),
        (E::Inner(refused()), 502),
        (E::Inner(timed_out()), 504),
    ] {
        assert_eq!(e.status().as_u16(), status, "{e}");
    }
    type R = retry::Error<E>;
    for (e, status) in [
        (R::Inner(E::NoEndpoints), 503),
        (
            R::AttemptsExhausted {
                attempts: 3,
                last: E::Inner(refused()),
            },
            502,
        ),
        (
            R::BudgetExhausted {
                attempts: 2,
                last: None,
            },
            504,
        ),
        (
            R::BudgetExhausted {
                attempts: 2,
                last: Some(E::Overloaded),
            },
            503,
        ),
        (R::TryTimeout { attempts: 3 }, 504),
        (
            R::DeadlineElapsed {
                attempts: 2,
                last: None,
            },
            504,
        ),
        (
            R::DeadlineElapsed {
                attempts: 2,
                last: Some(E::Inner(refused())),
            },
            502,
        ),
    ] {
        assert_eq!(e.status().as_u16(), status, "{e}");
    }
    let boxed: BoxError = Box::new(crate::Error::Inner(timed_out()));
    assert_eq!(
        boxed.status(),
        StatusCode::GATEWAY_TIMEOUT,
        "a source times out"
    );
    let boxed: BoxError = "no".into();
    assert_eq!(boxed.status(), StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn a_buffered_body_is_replayed_with_its_trailers_and_a_stream_is_not_kept() {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", "7".parse().unwrap());
    let frames: Vec<Result<_, io::Error>> = vec![
        Ok(Frame::data(Bytes::from_static(b"ab"))),
        Ok(Frame::data(Bytes::from_static(b"cd"))),
        Ok(Frame::trailers(trailers.clone())),
    ];
    let stream = StreamBody::new(tokio_stream_lite(frames));
    let body = body::read_whole(stream, 16).await.unwrap();
    assert_eq!(body.size_hint().exact(), Some(4));
    let (first, kept) = body.keep(0);
    let kept = kept.expect("a buffered body is kept, whatever the retry limit");
    for b in [
        first,
        Body::copy(&kept).unwrap(),
        Body::copy(&kept).unwrap(),
    ] {
        let collected = b.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(collected.to_bytes(), "abcd");
    }
    let (streamed, kept) = Body::stream(Full::new(Bytes::from_static(b"x"))).keep(1 << 20);
    assert!(kept.is_none() && !streamed.is_buffered());
}

/// A stream over `items` (tokio-stream's `iter`, which the library does
/// not depend on).
fn tokio_stream_lite<T: Unpin>(items: Vec<T>) -> impl futures_core::Stream<Item = T> + Unpin {
    struct Iter<T>(std::vec::IntoIter<T>);
    impl<T: Unpin> futures_core::Stream for Iter<T> {
        type Item = T;
        fn poll_next(mut self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<T>> {
            Poll::Ready(self.0.next())
        }
    }
    Iter(items.into_iter())
}

#[tokio::test]
async fn bodies_past_the_bound_are_refused_and_failing_ones_are_bad_requests() {
    // The size hint says so: refused before a byte is read.
    let declared = Full::new(Bytes::from(vec![0u8; 11]));
    let err = body::read_whole(declared, 10).await.unwrap_err();
    assert_eq!(err, GatewayError::BodyTooLarge { limit: 10 });
    // No size hint: refused once the bound is passed.
    let chunks: Vec<Result<_, io::Error>> = (0..4)
        .map(|_| Ok(Frame::data(Bytes::from_static(b"abc"))))
        .collect();
    let err = body::read_whole(StreamBody::new(tokio_stream_lite(chunks)), 10)
        .await
        .unwrap_err();
    assert_eq!(err.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let broken: Vec<Result<Frame<Bytes>, io::Error>> = vec![Err(io::Error::other("reset"))];
    let err = body::read_whole(StreamBody::new(tokio_stream_lite(broken)), 10)
        .await
        .unwrap_err();
    assert_eq!(err.status(), StatusCode::BAD_REQUEST);
    assert!(err.to_string().contains("reset"), "{err}");
}

#[tokio::test]
async fn idempotent_requests_are_buffered_and_others_stream() {
    let gateway = Gateway::new(echo());
    let req = |method: http::Method, body: &'static str| {
        Request::builder()
            .method(method)
            .uri("/x")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    };
    let res = gateway
        .clone()
        .oneshot(req(http::Method::PUT, "abc"))
        .await
        .unwrap();
    assert_eq!(text(res).await, (StatusCode::OK, "3 true".into()));
    let res = gateway
        .clone()
        .oneshot(req(http::Method::POST, "abc"))
        .await
        .unwrap();
    assert_eq!(text(res).await, (StatusCode::OK, "3 false".into()));
    let small = Gateway::builder(echo()).max_body(2).build().unwrap();
    let res = small
        .clone()
        .oneshot(req(http::Method::PUT, "abc"))
        .await
        .unwrap();
    assert_eq!(
        res.extensions().get(),
        Some(&GatewayError::BodyTooLarge { limit: 2 })
    );
    assert_eq!(text(res).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    // A body that is not buffered is not bounded.
    let res = small.oneshot(req(http::Method::POST, "abc")).await.unwrap();
    assert_eq!(text(res).await.0, StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn an_empty_pool_is_waited_for_within_the_bound() {
    let lb = Balance::builder().build().unwrap();
    let handle = lb.handle();
    let gateway = Gateway::builder(lb)
        .wait_for_endpoints(&handle, Duration::from_secs(5))
        .build()
        .unwrap();
    let get = || Request::get("/").body(Full::new(Bytes::new())).unwrap();

    // Nothing arrives: 503 once the wait is over, not before.
    let start = Instant::now();
    let res = gateway.clone().oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    let waited = WaitTimeout {
        waited: Duration::from_secs(5),
    };
    assert_eq!(
        res.extensions().get(),
        Some(&GatewayError::NoEndpoints(waited))
    );
    assert_eq!(text(res).await.0, StatusCode::SERVICE_UNAVAILABLE);

    // Discovery's first answer after 2 s: the request waited for it.
    let start = Instant::now();
    let discovery = handle.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        discovery.insert("10.0.0.1:80", echo());
    });
    let res = gateway.clone().oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(text(res).await, (StatusCode::OK, "0 true".into()));

    // Without a wait, an empty pool is a 503 at once.
    handle.remove(&"10.0.0.1:80");
    let res = Gateway::new(handle_lb(&gateway))
        .oneshot(get())
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(
        text(res).await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "no healthy upstream\n".into()
        )
    );
}

fn handle_lb<S: Clone>(gateway: &Gateway<S>) -> S {
    gateway.get_ref().clone()
}

#[test]
fn builder_extremes_are_config_errors() {
    let field = |b: Builder<Upstream>| b.build().err().map(|e| e.field());
    assert_eq!(
        field(Gateway::builder(echo()).max_body(usize::MAX)),
        Some("gateway.max_body")
    );
    assert!(
        Gateway::builder(echo())
            .max_body(retry::MAX_REPLAY_LIMIT)
            .build()
            .is_ok()
    );
    assert!(Gateway::builder(echo()).max_body(0).build().is_ok());
    let lb: Balance<&str, Upstream> = Balance::builder().build().unwrap();
    for bad in [
        Duration::ZERO,
        Duration::MAX,
        crate::time::MAX_DURATION + Duration::from_secs(1),
    ] {
        let b = Gateway::builder(echo()).wait_for_endpoints(&lb.handle(), bad);
        assert_eq!(field(b), Some("gateway.wait_for_endpoints"), "{bad:?}");
    }
}
