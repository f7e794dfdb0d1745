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

/// The events on target `tower_lb` that carry a `source` field, emitted
/// on the thread that installed the capture (a current-thread test
/// runtime runs its drivers there).
///
/// One process-wide subscriber routes each event to its thread's capture:
/// scoped (`set_default`) subscribers race on tracing's callsite-interest
/// cache when tests of one binary run in parallel.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Reported>>>);

thread_local! {
    static CURRENT: std::cell::RefCell<Option<Capture>> = const { std::cell::RefCell::new(None) };
}

/// Uninstalls the thread's capture when dropped.
pub struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

#[derive(Clone, Copy)]
struct Router;

impl Capture {
    pub fn install() -> (Self, Installed) {
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            let _ = tracing::subscriber::set_global_default(Router);
        });
        let capture = Capture::default();
        CURRENT.with(|c| *c.borrow_mut() = Some(capture.clone()));
        (capture, Installed)
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

impl Subscriber for Router {
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
            CURRENT.with(|c| {
                if let Some(capture) = &*c.borrow() {
                    capture.0.lock().unwrap().push(Reported { source, error });
                }
            });
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
