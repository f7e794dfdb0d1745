//! The TEXT form: `key=value` (or Envoy's `key:value`) entries separated by
//! commas, after the `TEXT ` prefix.

use super::LoadReport;
use super::report::Field;

/// The prefix of a named metric's key.
const NAMED: &str = "named_metrics.";

/// Parses the entries after `TEXT `. Never fails: an entry without a
/// separator, with a value that is not a number, out of range, duplicated
/// or with an unknown key is left out and counted. Empty entries (`a=1,,`)
/// are skipped, as HTTP list syntax allows.
pub(super) fn parse(entries: &str) -> LoadReport {
    let mut report = LoadReport::new();
    for entry in entries.split(',') {
        let entry = entry.trim_ascii();
        if entry.is_empty() {
            continue;
        }
        // The first `=` or `:` (ASCII, so both sides stay UTF-8).
        let Some(at) = entry.bytes().position(|b| b == b'=' || b == b':') else {
            report.reject();
            continue;
        };
        let (key, value) = (&entry[..at], &entry[at + 1..]);
        let (key, value) = (key.trim_ascii(), value.trim_ascii());
        let Ok(v) = value.parse::<f64>() else {
            report.reject();
            continue;
        };
        if let Some(name) = key.strip_prefix(NAMED) {
            report.set_named(name, v);
        } else if let Some(field) = Field::named(key) {
            report.set(field, v);
        } else {
            report.reject();
        }
    }
    report
}

/// Writes `r` in the TEXT form `parse` reads (with its `TEXT ` prefix):
/// every field present, then the named metrics, in the order they were set.
/// Shortest round-trip decimals, so the text parses back to the same values.
pub(super) fn write(r: &LoadReport, out: &mut String) {
    use std::fmt::Write as _;
    out.push_str("TEXT ");
    let mut sep = "";
    let fields = [
        ("cpu_utilization", r.cpu_utilization()),
        ("mem_utilization", r.mem_utilization()),
        ("application_utilization", r.application_utilization()),
        ("rps_fractional", r.rps_fractional()),
        ("eps", r.eps()),
    ];
    for (key, v) in fields {
        if let Some(v) = v {
            let _ = write!(out, "{sep}{key}={v}");
            sep = ", ";
        }
    }
    for (name, v) in r.named_metrics().iter() {
        let _ = write!(out, "{sep}{NAMED}{name}={v}");
        sep = ", ";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_text_parses_back_to_the_same_report() {
        let r = LoadReport::new()
            .with_cpu_utilization(0.25)
            .with_application_utilization(1.5)
            .with_rps_fractional(120.5)
            .with_eps(0.1)
            .with_named_metric("rif", 3.0)
            .with_named_metric("latency_ms", 12.345);
        let text = r.to_text();
        assert!(text.starts_with("TEXT cpu_utilization=0.25, "), "{text}");
        assert_eq!(LoadReport::parse(&text), Ok(r));
        assert_eq!(LoadReport::new().to_text(), "TEXT ");
    }

    #[test]
    fn the_documented_example_gives_exact_values() {
        let r = parse(
            "cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=120, eps=2, \
             application_utilization=0.4, named_metrics.foo=1",
        );
        assert_eq!(r.cpu_utilization(), Some(0.3));
        assert_eq!(r.mem_utilization(), Some(0.8));
        assert_eq!(r.rps_fractional(), Some(120.0));
        assert_eq!(r.eps(), Some(2.0));
        assert_eq!(r.application_utilization(), Some(0.4));
        assert_eq!(r.named_metric("foo"), Some(1.0));
        assert_eq!(r.utilization(), Some(0.4));
        assert_eq!(r.rejected(), 0);
    }

    #[test]
    fn envoy_colons_and_spacing() {
        let r = parse(" cpu_utilization:0.5 ,rps_fractional : 10,,named_metrics.a.b:7");
        assert_eq!(r.cpu_utilization(), Some(0.5));
        assert_eq!(r.rps_fractional(), Some(10.0));
        assert_eq!(r.named_metric("a.b"), Some(7.0));
        assert_eq!(r.rejected(), 0);
    }

    #[test]
    fn bad_values_are_left_out_and_counted() {
        let cases: &[(&str, u32)] = &[
            ("cpu_utilization=-0.1", 1),
            ("mem_utilization=1.5", 1),
            ("eps=NaN, rps_fractional=inf", 2),
            ("cpu_utilization=abc", 1),
            ("cpu_utilization", 1),
            ("gpu_utilization=0.5", 1),
            ("cpu_utilization=0.2, cpu_utilization=0.9", 1),
            ("named_metrics.=1", 1),
            ("named_metrics.x=-inf", 1),
            ("", 0),
        ];
        for &(text, rejected) in cases {
            let r = parse(text);
            assert_eq!(r.rejected(), rejected, "{text}");
        }
        assert_eq!(
            parse("cpu_utilization=0.2, cpu_utilization=0.9").cpu_utilization(),
            Some(0.2)
        );
        // CPU may exceed 1 past a soft limit; memory may not.
        assert_eq!(parse("cpu_utilization=1.5").cpu_utilization(), Some(1.5));
        assert_eq!(parse("named_metrics.x=-3").named_metric("x"), Some(-3.0));
    }
}
