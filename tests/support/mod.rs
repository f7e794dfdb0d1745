//! Shared by the discovery tests: a capture of the balancer's discovery
//! events, and waiting for a condition on the real clock.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
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

/// A `tracing` subscriber keeping the events on target `tower_lb` that
/// carry a `source` field. Install with `tracing::subscriber::set_default`
/// on a current-thread runtime, so the drivers' events land on it.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Reported>>>);

impl Capture {
    pub fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let capture = Capture::default();
        let guard = tracing::subscriber::set_default(capture.clone());
        (capture, guard)
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

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
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
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let (Some(source), Some(error)) = (fields.source, fields.error) {
            self.0.lock().unwrap().push(Reported { source, error });
        }
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
