//! Health events: one `tracing` event per change with the documented
//! fields, the same sequence through the hook, refusals counted in the
//! Prometheus text. Paused clock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{ServiceExt, service_fn};
use tower_lb::breaker::{CircuitBreakerConfig, Jitter};
use tower_lb::health::{HealthChange, HealthEvent};
use tower_lb::metrics::Metrics;
use tower_lb::metrics::prometheus::Exporter;
use tower_lb::outlier::OutlierDetection;
use tower_lb::{Balance, pick};
use tracing::field::{Field, Visit};

type Svc = BoxCloneSyncService<(), &'static str, &'static str>;

/// Captures the fields of every event on target `tower_lb` emitted on the
/// thread that installed it, through the binary's one process-wide
/// subscriber (`support::route_events`).
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

impl Capture {
    fn install() -> Capture {
        let capture = Capture::default();
        let sink = capture.clone();
        // Installed for the rest of the test's thread.
        std::mem::forget(crate::support::route_events(move |event| {
            let mut fields = BTreeMap::new();
            fields.insert("level".to_string(), event.metadata().level().to_string());
            event.record(&mut Fields(&mut fields));
            sink.0.lock().unwrap().push(fields);
        }));
        capture
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

fn switchable(name: &'static str, bad: Arc<AtomicBool>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        let fail = bad.load(Ordering::Relaxed);
        async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if fail { Err(name) } else { Ok(name) }
        }
    }))
}

#[tokio::test(start_paused = true)]
async fn every_change_is_one_tracing_event_and_one_hook_call() {
    let capture = Capture::install();
    let hooked = Arc::new(Mutex::new(Vec::<HealthEvent>::new()));
    let sink = hooked.clone();
    let bad = Arc::new(AtomicBool::new(true));
    let lb = Balance::builder()
        .name("users")
        .labels(|k: &&str| format!("10.0.0.{k}:80"))
        .picker(pick::RoundRobin::new())
        .panic_threshold(0.0)
        .circuit_breaker(
            CircuitBreakerConfig::builder()
                .count_window(4)
                .minimum_calls(4)
                .open_wait(Duration::from_secs(1))
                .jitter(Jitter::None)
                .half_open_probes(1)
                .build()
                .unwrap(),
        )
        .outlier_detection(
            OutlierDetection::builder()
                .max_ejection_jitter(Duration::ZERO)
                .base_ejection_time(Duration::from_secs(3))
                .build()
                .unwrap(),
        )
        .on_health_change(move |e| sink.lock().unwrap().push(e.clone()))
        .endpoint("1", switchable("1", Arc::default()))
        .endpoint("2", switchable("2", Arc::default()))
        .endpoint("3", switchable("3", bad.clone()))
        .build()
        .unwrap();
    // "3" fails: its breaker opens after 4 calls; the breaker keeps it out,
    // so ejection (5 in a row) never fires.
    for _ in 0..12 {
        let _ = lb.clone().oneshot(()).await;
    }
    bad.store(false, Ordering::Relaxed);
    tokio::time::advance(Duration::from_secs(2)).await;
    for _ in 0..6 {
        let _ = lb.clone().oneshot(()).await;
    }
    lb.handle()
        .report_discovery_error("dns", &"lookup timed out");

    let hooked = hooked.lock().unwrap().clone();
    let changes: Vec<_> = hooked.iter().map(|e| e.change.clone()).collect();
    assert!(
        matches!(
            changes.as_slice(),
            [
                HealthChange::Breaker { .. },
                HealthChange::Breaker { .. },
                HealthChange::Breaker { .. },
                HealthChange::DiscoveryError { .. },
            ]
        ),
        "{hooked:#?}"
    );
    let moves: Vec<(&str, &str)> = changes.iter().map(|c| (c.from(), c.to())).collect();
    assert_eq!(
        moves,
        [
            ("closed", "open"),
            ("open", "half_open"),
            ("half_open", "closed"),
            ("", "")
        ]
    );
    assert!(hooked.iter().all(|e| &*e.balancer == "users"));
    assert_eq!(hooked[0].endpoint.as_deref(), Some("10.0.0.3:80"));
    assert_eq!(hooked[3].endpoint, None);

    // The same sequence, field for field, as tracing events.
    let logged = capture.0.lock().unwrap().clone();
    assert_eq!(logged.len(), hooked.len(), "{logged:#?}");
    for (log, ev) in logged.iter().zip(&hooked) {
        assert_eq!(log["balancer"], "users");
        assert_eq!(log["endpoint"], ev.endpoint.as_deref().unwrap_or(""));
        assert_eq!(log["from"], ev.change.from());
        assert_eq!(log["to"], ev.change.to());
        assert_eq!(log["reason"], ev.change.reason());
        let level = if ev.change.is_worse() { "WARN" } else { "INFO" };
        assert_eq!(log["level"], level);
    }
    assert_eq!(logged[0]["reason"], "failure_rate");
    assert_eq!(logged[3]["reason"], "dns: lookup timed out");
}

#[tokio::test(start_paused = true)]
async fn ejection_return_and_panic_are_events() {
    let hooked = Arc::new(Mutex::new(Vec::<HealthEvent>::new()));
    let sink = hooked.clone();
    let bad = Arc::new(AtomicBool::new(true));
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .panic_threshold(60.0)
        .outlier_detection(
            OutlierDetection::builder()
                .max_ejection_jitter(Duration::ZERO)
                .base_ejection_time(Duration::from_secs(3))
                .max_ejection_percent(50)
                .build()
                .unwrap(),
        )
        .on_health_change(move |e| sink.lock().unwrap().push(e.clone()))
        .endpoint("a", switchable("a", Arc::default()))
        .endpoint("b", switchable("b", bad.clone()))
        .build()
        .unwrap();
    for _ in 0..12 {
        let _ = lb.clone().oneshot(()).await;
    }
    bad.store(false, Ordering::Relaxed);
    tokio::time::advance(Duration::from_secs(4)).await;
    let _ = lb.clone().oneshot(()).await;
    let changes: Vec<_> = hooked
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.change.clone())
        .collect();
    // b is ejected (1 of 2 healthy is under 60%: panic), then returns.
    assert!(
        matches!(
            changes.as_slice(),
            [
                HealthChange::Ejected { .. },
                HealthChange::PanicEntered {
                    healthy: 1,
                    total: 2
                },
                HealthChange::Returned,
                HealthChange::PanicLeft {
                    healthy: 2,
                    total: 2
                },
            ]
        ),
        "{changes:#?}"
    );
    if let HealthChange::Ejected { duration, .. } = changes[0] {
        assert_eq!(duration, Duration::from_secs(3));
    }
}

#[tokio::test]
async fn refusals_are_counted_by_reason_in_the_prometheus_text() {
    let exporter = Exporter::new().unwrap();
    let empty: Balance<&'static str, Svc> = Balance::builder()
        .metrics(Metrics::new(&exporter.meter(), "empty"))
        .build()
        .unwrap();
    for _ in 0..3 {
        assert!(empty.clone().oneshot(()).await.is_err());
    }
    let text = exporter.render().unwrap();
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("lb_refusals_total") && l.contains("lb_refusal_reason=\"no_endpoints\"")
        })
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("lb_name=\"empty\""), "{line}");
    assert!(line.ends_with(" 3"), "{line}");
}
