//! Which OpenTelemetry features each of the crate's metrics features asks
//! for, resolved by cargo from the lock file.

use std::collections::{BTreeMap, BTreeSet};

/// The OpenTelemetry features a build of tower-lb with `features` (and
/// nothing else) resolves, by package (`cargo tree` on the lock file).
fn otel_features(features: &str) -> BTreeMap<String, BTreeSet<String>> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "tower-lb",
            "--no-default-features",
        ])
        .args(["--features", features, "-e", "normal", "--prefix", "none"])
        .args(["-f", "{p} {f}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("opentelemetry")) {
        let mut words = line.split(' ');
        let package = words.next().unwrap_or_default().to_owned();
        let features = words.nth(1).unwrap_or_default();
        let set = m.entry(package).or_default();
        set.extend(
            features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_owned),
        );
    }
    m
}

/// Feature `metrics` asks nothing experimental of OpenTelemetry (the API
/// crate alone, no SDK); `metrics-bound` turns the bound instruments on in
/// the API and the SDK; `prometheus` brings the exporter, which turns on the
/// SDK's custom-reader switch itself, and still no bound instruments.
#[test]
fn the_metrics_feature_asks_for_no_experimental_switch() {
    let metrics = otel_features("metrics");
    let api = BTreeSet::from(["metrics".to_owned()]);
    assert_eq!(metrics, BTreeMap::from([("opentelemetry".to_owned(), api)]));

    let bound = otel_features("metrics-bound");
    for package in ["opentelemetry", "opentelemetry_sdk"] {
        assert!(
            bound[package].contains("experimental_metrics_bound_instruments"),
            "{package}: {bound:?}"
        );
    }

    let prometheus = otel_features("prometheus");
    let experimental: BTreeSet<&str> = prometheus
        .values()
        .flatten()
        .map(String::as_str)
        .filter(|f| f.starts_with("experimental"))
        .collect();
    assert_eq!(
        experimental,
        BTreeSet::from(["experimental_metrics_custom_reader"]),
        "{prometheus:?}"
    );
}
