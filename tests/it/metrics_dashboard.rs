//! The Grafana dashboard (`examples/grafana/tower-lb.json`) against the
//! real exposition: every metric and label its panels use is exported.
#![cfg(all(feature = "http", feature = "prometheus"))]

use std::collections::BTreeSet;

use crate::metrics::{failing_backend_run, parse};

/// Every metric a Grafana panel queries is in the exposition of the whole
/// stack (retry, breakers, ejection, metrics) with one failing backend.
#[tokio::test]
async fn dashboard_queries_name_exported_metrics() {
    let (_, text, _) = failing_backend_run(70).await;
    let exported: BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/grafana/tower-lb.json"
    ))
    .unwrap();
    let dash: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dash, &mut exprs);
    assert!(exprs.len() >= 10, "{exprs:?}");
    let mut queried = BTreeSet::new();
    for e in &exprs {
        for word in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("lb_") && !word.starts_with("lb_name") {
                queried.insert(word.to_owned());
            }
        }
    }
    // Label names are checked below, against the exposition's labels.
    let used = dashboard_labels(&dash);
    // These need reporting backends and adaptive limits: tests/it/orca_servers.rs
    // (`hyper_servers_reports_steer_picks_and_reach_the_exposition`).
    let elsewhere = [
        "lb_endpoint_load_utilization_ratio",
        "lb_endpoint_concurrency_limit",
    ];
    let there = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/orca_servers.rs");
    assert!(
        std::fs::read_to_string(there).is_ok_and(|t| t.contains(elsewhere[0])),
        "{there} must test {elsewhere:?}"
    );
    let missing: Vec<&String> = queried
        .iter()
        .filter(|q| !used.contains(q.as_str()) && !elsewhere.contains(&q.as_str()))
        .filter(|q| !exported.contains(q.as_str()))
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:?}\n{text}");
    // The dashboard covers every instrument family.
    for family in [
        "lb_requests_total",
        "lb_request_duration_seconds_bucket",
        "lb_picks_total",
        "lb_pick_duration_seconds_bucket",
        "lb_endpoint_in_flight",
        "lb_endpoint_health",
        "lb_endpoint_latency_ewma_seconds",
        "lb_retries_total",
        "lb_retry_budget_exhausted_total",
        "lb_hedges_total",
        "lb_breaker_state",
        "lb_breaker_transitions_total",
        "lb_outlier_ejections_total",
        "lb_panic_total",
        "lb_refusals_total",
    ] {
        assert!(queried.contains(family), "dashboard lacks {family}");
    }
    // Failures are shown by kind.
    assert!(
        exprs
            .iter()
            .any(|e| e.contains("lb_requests_total") && e.contains("by (lb_name, error_type)")),
        "the dashboard splits failures by kind"
    );
    // Every label a panel groups by, matches on or shows in its legend is
    // one the exposition has (a renamed attribute would leave a panel
    // empty without failing the names check above).
    let mut labels: BTreeSet<String> = parse(&text)
        .into_iter()
        .flat_map(|s| s.labels.into_keys())
        .collect();
    labels.insert("le".to_owned());
    let unknown: Vec<&String> = used.iter().filter(|l| !labels.contains(*l)).collect();
    assert!(unknown.is_empty(), "not exported: {unknown:?}\n{text}");
    for label in [
        "error_type",
        "lb_endpoint_state",
        "lb_breaker_state",
        "lb_outlier_reason",
    ] {
        assert!(used.contains(label), "the dashboard uses {label}");
    }
}

/// The label names a dashboard's queries and legends use: in `by (...)`,
/// in `{name="..."}` matchers, and in `{{name}}` legends.
fn dashboard_labels(dash: &serde_json::Value) -> BTreeSet<String> {
    let mut exprs = Vec::new();
    collect_exprs(dash, &mut exprs);
    let mut out = BTreeSet::new();
    let mut add = |list: &str| {
        for l in list.split(',').map(str::trim).filter(|l| !l.is_empty()) {
            out.insert(l.to_owned());
        }
    };
    for e in &exprs {
        for (_, rest) in e.match_indices("by (").map(|(i, _)| e.split_at(i + 4)) {
            add(rest.split(')').next().unwrap_or(""));
        }
        for part in e.split('{').skip(1) {
            let matchers = part.split('}').next().unwrap_or("");
            for m in matchers.split(',') {
                add(m.split(['=', '!']).next().unwrap_or(""));
            }
        }
    }
    let raw = dash.to_string();
    for legend in raw.split("{{").skip(1) {
        add(legend.split("}}").next().unwrap_or(""));
    }
    out
}

/// Every `expr` string anywhere in the dashboard.
fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}
