//! Shared by the tests in `tests/it/`: the balancer's `tracing` events
//! routed to the test that emitted them (a capture of the discovery
//! events), and waiting for a condition on the real clock.
#![allow(dead_code)]

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One `report_discovery_error` event: its `source` and `error` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub source: String,
    pub error: String,
}

/// The events on target `tower_lb` that carry a `source` field, emitted
/// on the thread that installed the capture (a current-thread test
/// runtime runs its drivers there).
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Reported>>>);

impl Capture {
    pub fn install() -> (Self, Installed) {
        let capture = Capture::default();
        let sink = capture.clone();
        let installed = route_events(move |event| {
            let mut fields = Fields::default();
            event.record(&mut fields);
            if let (Some(source), Some(error)) = (fields.source, fields.error) {
                sink.0.lock().unwrap().push(Reported { source, error });
            }
        });
        (capture, installed)
    }

    pub fn events(&self, source: &str) -> Vec<Reported> {
        let all = self.0.lock().unwrap();
        all.iter().filter(|r| r.source == source).cloned().collect()
    }
}

#[derive(Default)]
struct Fields {
    source: Option<String>,
    error: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "source" {
            self.source = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "source" => self.source = Some(format!("{value:?}").trim_matches('"').to_owned()),
            "error" => self.error = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

/// What a thread's events on target `tower_lb` are handed to.
type Sink = Box<dyn Fn(&Event<'_>)>;

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Uninstalls the thread's sink when dropped.
pub struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = SINK.try_with(|s| s.borrow_mut().take());
    }
}

/// Hands every event on target `tower_lb` emitted on this thread to `sink`
/// until the guard drops (the discovery captures here, the health events'
/// capture in `health_events.rs`).
///
/// One process-wide subscriber routes each event to its thread's sink:
/// scoped (`set_default`) subscribers race on tracing's callsite-interest
/// cache when tests of one binary run in parallel. The tests of many
/// areas share this binary, so the interest cache is rebuilt at each
/// install: a callsite first hit by another test while the subscriber was
/// being set keeps no stale "never".
pub fn route_events(sink: impl Fn(&Event<'_>) + 'static) -> Installed {
    static GLOBAL: Once = Once::new();
    GLOBAL.call_once(|| {
        let _ = tracing::subscriber::set_global_default(Router);
    });
    tracing::callsite::rebuild_interest_cache();
    SINK.with(|s| *s.borrow_mut() = Some(Box::new(sink)));
    Installed
}

#[derive(Clone, Copy)]
struct Router;

impl Subscriber for Router {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "tower_lb"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() != "tower_lb" {
            return;
        }
        let _ = SINK.try_with(|s| {
            if let Some(sink) = &*s.borrow() {
                sink(event);
            }
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Polls `cond` every 10 ms until it holds; panics with `what` after 20 s
/// (a bound for a loaded machine, never a timing assertion).
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for: {what}");
}
