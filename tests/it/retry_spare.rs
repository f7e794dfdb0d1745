//! Which service each attempt of the retry layer runs on: the first on the
//! service the caller polled ready, later attempts and hedges on a clone of
//! the wrapped service made only when a call needs one.

use std::future::{Ready, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};
use tower_lb::classify::ErrIsFailure;
use tower_lb::retry::{self, Backoff, RetryLayer};

/// Counts its clones, refuses a call it was not polled ready for (the
/// `Service` contract), and fails the first `fail` calls it takes.
struct Strict {
    clones: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
    fail: usize,
    ready: bool,
}

impl Clone for Strict {
    fn clone(&self) -> Self {
        self.clones.fetch_add(1, Ordering::SeqCst);
        Self {
            clones: Arc::clone(&self.clones),
            calls: Arc::clone(&self.calls),
            fail: self.fail,
            ready: false,
        }
    }
}

impl Service<u32> for Strict {
    type Response = u32;
    type Error = &'static str;
    type Future = Ready<Result<u32, &'static str>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.ready = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: u32) -> Self::Future {
        assert!(self.ready, "called without being polled ready");
        self.ready = false;
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        ready(if n < self.fail { Err("fails") } else { Ok(req) })
    }
}

fn strict(fail: usize) -> (Strict, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let clones = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = Strict {
        clones: Arc::clone(&clones),
        calls: Arc::clone(&calls),
        fail,
        ready: false,
    };
    (svc, clones, calls)
}

fn layer() -> RetryLayer<retry::CloneRequest, ErrIsFailure> {
    RetryLayer::builder()
        .replay(retry::CloneRequest)
        .classify(ErrIsFailure)
        .backoff(Backoff::new(
            Duration::from_millis(1),
            Duration::from_millis(1),
        ))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn calls_that_answer_at_once_clone_nothing() {
    let (svc, clones, calls) = strict(0);
    let mut retried = layer().layer(svc);
    let made = clones.load(Ordering::SeqCst);
    assert_eq!(made, 1, "the layer keeps one clone to copy retries from");
    for i in 0..100 {
        let answer = retried.ready().await.unwrap().call(i).await.unwrap();
        assert_eq!(answer, i);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 100);
    assert_eq!(clones.load(Ordering::SeqCst), made, "no clone per call");
}

#[tokio::test(start_paused = true)]
async fn a_retry_runs_on_a_clone_polled_ready() {
    let (svc, clones, calls) = strict(2);
    let mut retried = layer().layer(svc);
    let made = clones.load(Ordering::SeqCst);
    let answer = retried.ready().await.unwrap().call(7).await.unwrap();
    assert_eq!(answer, 7);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "two failures, then the answer"
    );
    assert_eq!(
        clones.load(Ordering::SeqCst),
        made + 1,
        "one clone serves both retries of the call"
    );
    assert_eq!(retried.stats().retries(), 2);
    // Clones of the retry service share the spare: cloning one clones only
    // the inner service.
    let mut other = retried.clone();
    assert_eq!(clones.load(Ordering::SeqCst), made + 2);
    assert_eq!(other.ready().await.unwrap().call(8).await.unwrap(), 8);
    assert_eq!(clones.load(Ordering::SeqCst), made + 2);
}

#[test]
fn a_call_dropped_unpolled_made_its_first_attempt_and_nothing_more() {
    let (svc, clones, calls) = strict(usize::MAX);
    let mut retried = layer().layer(svc);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let fut = retried.ready().await.unwrap().call(1);
        // The first attempt was sent by `call`; the future never ran.
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        drop(fut);
    });
    assert_eq!(clones.load(Ordering::SeqCst), 1, "no retry, no clone");
}
