//! The future's reading of the clock reaches the service below.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tower::{Layer, Service, ServiceExt};

use crate::classify::ErrIsFailure;
use crate::retry::{CloneRequest, RetryLayer};
use crate::scope;

/// The counter readings a service below the retry layer was handed: at
/// its call, then at each poll of its future.
type Seen = Arc<Mutex<Vec<Option<u64>>>>;

#[derive(Clone)]
struct Below(Seen);

/// Pending for the first `polls` polls (waking itself each time), then
/// ready.
struct Answer {
    seen: Seen,
    polls: u32,
}

impl Service<u64> for Below {
    type Response = u64;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: u64) -> Answer {
        self.0.lock().unwrap().push(scope::raw());
        Answer {
            seen: self.0.clone(),
            polls: req as u32,
        }
    }
}

impl Future for Answer {
    type Output = Result<u64, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.seen.lock().unwrap().push(scope::raw());
        if self.polls == 0 {
            return Poll::Ready(Ok(7));
        }
        self.polls -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Calls a retry layer over `Below` once, its future pending `polls`
/// times before it answers; returns what the service below was handed.
async fn readings_below(polls: u64) -> Vec<Option<u64>> {
    let seen = Seen::default();
    let layer = RetryLayer::builder()
        .replay(CloneRequest)
        .classify(ErrIsFailure)
        .build()
        .expect("valid config");
    let svc = layer.layer(Below(seen.clone()));
    assert_eq!(svc.oneshot(polls).await.unwrap(), 7);
    seen.lock().unwrap().clone()
}

/// On a running runtime the layer reads the counter, and the service
/// below gets each of its readings: a balancer there reads no clock of
/// its own. Each poll is a new reading, no earlier than the one before.
#[tokio::test]
async fn the_service_below_gets_the_layers_readings() {
    let seen = readings_below(2).await;
    assert_eq!(seen.len(), 4, "the call, then three polls: {seen:?}");
    let raws: Vec<u64> = seen
        .iter()
        .map(|r| r.expect("a reading of the counter"))
        .collect();
    assert!(raws.windows(2).all(|w| w[0] <= w[1]), "{raws:?}");
    // Outside the layer's call and poll, no reading is handed down.
    assert_eq!(scope::raw(), None);
}

/// On a paused runtime the layer reads tokio's clock, and hands down no
/// counter reading (the balancer below reads tokio's clock too).
#[tokio::test(start_paused = true)]
async fn on_a_paused_clock_no_counter_reading_is_handed_down() {
    assert_eq!(readings_below(1).await, vec![None; 3]);
}
