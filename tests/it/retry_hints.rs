//! The retry layer's hint to avoid the endpoints a call tried: it reaches
//! a balancer through synchronous layers, and a layer that defers calls to
//! another task (tower's `Buffer`) loses it, which is counted and warned
//! about once per retried service (read through a `tracing` subscriber).

use std::future::{Ready, ready};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tower::buffer::Buffer;
use tower::{Layer, Service, ServiceExt};
use tower_lb::Balance;
use tower_lb::classify::ErrIsFailure;
use tower_lb::retry::{self, Backoff, Budget, RetryLayer};

/// Fails every call, noting which endpoint took it.
#[derive(Clone)]
struct Failing {
    id: usize,
    log: Arc<Mutex<Vec<(u32, usize)>>>,
}

impl Service<u32> for Failing {
    type Response = u32;
    type Error = std::io::Error;
    type Future = Ready<Result<u32, std::io::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: u32) -> Self::Future {
        self.log.lock().unwrap().push((req, self.id));
        ready(Err(std::io::Error::other("fails")))
    }
}

type Log = Arc<Mutex<Vec<(u32, usize)>>>;

fn balancer() -> (Balance<usize, Failing>, Log) {
    let log = Log::default();
    let mut b = Balance::builder();
    for id in 0..2 {
        let log = Arc::clone(&log);
        b = b.endpoint(id, Failing { id, log });
    }
    (b.build().unwrap(), log)
}

/// Two attempts per call, a budget that never refuses them.
fn layer() -> RetryLayer<retry::CloneRequest, ErrIsFailure> {
    RetryLayer::builder()
        .replay(retry::CloneRequest)
        .classify(ErrIsFailure)
        .max_attempts(2)
        .budget(Budget::new(Duration::from_secs(10), 1000, 1.0).unwrap())
        .backoff(Backoff::new(
            Duration::from_millis(1),
            Duration::from_millis(1),
        ))
        .build()
        .unwrap()
}

/// Counts the warnings of target `tower_lb` and keeps their messages.
#[derive(Default)]
struct Warnings {
    count: AtomicUsize,
    messages: Mutex<Vec<String>>,
}

struct Collect(Arc<Warnings>);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Collect {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN && meta.target() == "tower_lb" {
            let mut message = String::new();
            event.record(&mut Message(&mut message));
            self.0.count.fetch_add(1, Ordering::SeqCst);
            self.0.messages.lock().unwrap().push(message);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(start_paused = true)]
async fn a_retry_avoids_the_endpoint_it_tried_through_synchronous_layers() {
    let warnings = Arc::new(Warnings::default());
    let _sub = tracing::subscriber::set_default(Collect(Arc::clone(&warnings)));
    let (lb, log) = balancer();
    let mut svc = layer().layer(lb);
    for req in 0..20 {
        assert!(svc.ready().await.unwrap().call(req).await.is_err());
    }
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 40, "two attempts per call");
    for pair in log.chunks(2) {
        assert_eq!(pair[0].0, pair[1].0);
        assert_ne!(pair[0].1, pair[1].1, "the retry went back: {pair:?}");
    }
    assert_eq!(svc.stats().hints_lost(), 0);
    assert_eq!(warnings.count.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_buffer_between_retry_and_balancer_loses_the_hint_and_warns_once() {
    let warnings = Arc::new(Warnings::default());
    let _sub = tracing::subscriber::set_default(Collect(Arc::clone(&warnings)));
    let (lb, log) = balancer();
    let mut svc = layer().layer(Buffer::new(lb, 16));
    for req in 0..5 {
        assert!(svc.ready().await.unwrap().call(req).await.is_err());
    }
    assert_eq!(log.lock().unwrap().len(), 10, "two attempts per call");
    assert_eq!(svc.stats().hints_lost(), 5, "every retry's hint lost");
    assert_eq!(warnings.count.load(Ordering::SeqCst), 1, "warned once");
    {
        let messages = warnings.messages.lock().unwrap();
        assert!(messages[0].contains("Buffer"), "{messages:?}");
        assert!(messages[0].contains("hints_lost"), "{messages:?}");
    }
    // Another retried service (another balancer) warns once more.
    let (lb, _) = balancer();
    let mut other = layer().layer(Buffer::new(lb, 16));
    for req in 0..3 {
        assert!(other.ready().await.unwrap().call(req).await.is_err());
    }
    assert_eq!(other.stats().hints_lost(), 3);
    assert_eq!(warnings.count.load(Ordering::SeqCst), 2);
}
