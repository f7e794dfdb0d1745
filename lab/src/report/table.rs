//! The terminal table of a [`Report`]: one row per picker, rival and peer,
//! then each row's extras (retries, ejections, open-loop arrivals), the
//! fleet block and the notes.

use std::fmt::Write as _;

use super::document::{MAX_LISTED, PickerReport, Report};

/// Rows printed as they finish: the heading and the column header first,
/// then one line per row, then [`Report::table_tail`]. A run of a dozen
/// rows takes minutes over HTTP; its first numbers show after one row.
pub struct Stream {
    widths: Widths,
}

impl Stream {
    /// Prints `r`'s heading and the column header, with room for row names
    /// of up to `name_width` characters.
    pub fn start(r: &Report, name_width: usize) -> Self {
        let mut out = String::new();
        r.heading(&mut out);
        let mut widths = Widths::new(r, &[]);
        widths.name = widths.name.max(name_width);
        widths.header(&mut out);
        print!("{out}");
        Self { widths }
    }

    /// Prints the line of `row`, a finished row of `r`.
    pub fn row(&self, r: &Report, row: &PickerReport) {
        let mut out = String::new();
        self.widths.row(row, &r.row_name(row), &mut out);
        print!("{out}");
    }
}

impl Report {
    /// The terminal table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        self.heading(&mut out);
        let names: Vec<String> = self.runs.iter().map(|r| self.row_name(r)).collect();
        let w = Widths::new(self, &names);
        w.header(&mut out);
        for (r, name) in self.runs.iter().zip(&names) {
            w.row(r, name, &mut out);
        }
        out.push_str(&self.table_tail());
        out
    }

    /// What follows the rows: each row's extras, the fleet block, the
    /// notes.
    pub fn table_tail(&self) -> String {
        let mut out = String::new();
        self.extras(&mut out);
        super::fleet_stats::table(self, &mut out);
        super::membership_stats::table(self, &mut out);
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }

    fn heading(&self, out: &mut String) {
        let load = match self.arrival_rate {
            Some(rate) => format!("open loop, {rate:.0} arrivals/s"),
            None => format!("{} users", self.users),
        };
        let _ = writeln!(
            out,
            "\n{} ({}, {load}, {} client balancer{}, {:.0} s per row, seed {})",
            self.scenario,
            self.mode,
            self.clients,
            if self.clients == 1 { "" } else { "s" },
            self.duration_s,
            self.seed
        );
        if !self.description.is_empty() {
            let _ = writeln!(out, "{}", self.description);
        }
        let names: Vec<&str> = self.backends.iter().map(|b| b.name.as_str()).collect();
        match names.as_slice() {
            [first, .., last] if names.len() > MAX_LISTED => {
                let _ = writeln!(out, "backends: {} ({first} to {last})", names.len());
            }
            _ => {
                let _ = writeln!(out, "backends: {}", names.join(", "));
            }
        }
        if self.hash_key != "x-forwarded-for" {
            let _ = writeln!(
                out,
                "hash pickers key on the users' connections ({}: source address and port, gateway address and port)",
                self.hash_key
            );
        }
        let mut proxies: Vec<String> = Vec::new();
        for p in self.runs.iter().filter_map(|r| r.peer.as_ref()) {
            let v = format!("{} {}", p.proxy, p.version);
            if !proxies.contains(&v) {
                proxies.push(v);
            }
        }
        for r in self.runs.iter().filter(|r| r.rival.is_some()) {
            let what = r.rival.as_deref().unwrap_or_default();
            let _ = writeln!(out, "{}: {what}", self.row_name(r));
        }
        if !proxies.is_empty() {
            let _ = writeln!(
                out,
                "peers: {} (keep-alive to the backends unless the row says keepalive=off; their share and in-flight as the backends counted them)",
                proxies.join(", ")
            );
        }
    }

    /// Errors by status and kind, retries (and failures not replayed),
    /// ejections and breaker openings, and the open loop's arrivals, one
    /// line per row that has any.
    fn extras(&self, out: &mut String) {
        let per_backend = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join("/");
        for r in &self.runs {
            let mut parts = Vec::new();
            if !r.errors_by.is_empty() {
                let split: Vec<String> = r
                    .errors_by
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                parts.push(format!("errors {}", split.join(", ")));
            }
            if let Some(a) = &r.affinity {
                parts.push(format!(
                    "{:.2} backends per user, {:.1}% of users on one backend",
                    a.backends_per_user,
                    a.one_backend * 100.0
                ));
            }
            if let Some(n) = r.retries {
                parts.push(format!("{n} retries"));
            }
            if let Some(n) = r.not_replayable.filter(|n| *n > 0) {
                parts.push(format!("{n} not replayed (non-idempotent)"));
            }
            if let Some(v) = &r.ejections {
                parts.push(format!("ejections {}", per_backend(v)));
            }
            if let Some(v) = &r.breaker_opens {
                parts.push(format!("breaker opens {}", per_backend(v)));
            }
            if let Some(p) = &r.probes {
                let per = p.sent as f64 / r.requests.max(1) as f64;
                let from = p.pooled as f64 / (p.pooled + p.fallback).max(1) as f64;
                parts.push(format!(
                    "probes {} sent ({per:.2} per request), {} answered, {} failed, {} dropped; {:.1}% of picks from their answers",
                    p.sent,
                    p.answered,
                    p.failed,
                    p.dropped,
                    from * 100.0
                ));
            }
            if let Some(o) = &r.open {
                parts.push(format!(
                    "arrivals {:.0}/s intended, {:.0}/s sent in the window, send lag p99 {:.2} ms (max {:.1}), {} unfinished",
                    o.rate, o.sent_rate, o.lag_p99_ms, o.lag_max_ms, o.unfinished
                ));
            }
            if !parts.is_empty() {
                let _ = writeln!(out, "{}: {}", self.row_name(r), parts.join(", "));
            }
        }
    }
}

/// Column widths of one table.
struct Widths {
    name: usize,
    share: usize,
    in_flight: usize,
    /// Past a dozen backends the per-backend columns give way to their
    /// spread (the JSON keeps every value).
    many: bool,
}

impl Widths {
    fn new(r: &Report, names: &[String]) -> Self {
        let many = r.backends.len() > MAX_LISTED;
        let n = r.backends.len();
        Self {
            name: names.iter().map(|n| n.chars().count()).fold(22, usize::max),
            share: if many { 15 } else { (n * 5).max(9) },
            in_flight: if many { 11 } else { (n * 4).max(9) },
            many,
        }
    }

    fn header(&self, out: &mut String) {
        let (nw, sw, fw) = (self.name, self.share, self.in_flight);
        let _ = writeln!(
            out,
            "{:<nw$} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>8}  {:<sw$}  {:<fw$}  {:>8} {:>8}",
            "picker",
            "RPS",
            "mean",
            "p50",
            "p95",
            "p99",
            "p99.9",
            "max",
            "err%",
            "util",
            "share %",
            "in-flight",
            "select",
            "rest"
        );
        let _ = writeln!(
            out,
            "{:<nw$} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>8}  {:<sw$}  {:<fw$}  {:>8} {:>8}",
            "",
            "",
            "ms",
            "ms",
            "ms",
            "ms",
            "ms",
            "ms",
            "",
            "max/mean",
            if self.many {
                "min-max/backend"
            } else {
                "per backend"
            },
            if self.many { "sum at end" } else { "at end" },
            "",
            "of call"
        );
    }

    fn row(&self, r: &PickerReport, name: &str, out: &mut String) {
        let (nw, sw, fw) = (self.name, self.share, self.in_flight);
        let (share, fl) = if self.many {
            let lo = r.share.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.share.iter().copied().fold(0.0, f64::max);
            let sum: usize = r.in_flight_end.iter().sum();
            (
                format!("{:.2}-{:.2}", lo * 100.0, hi * 100.0),
                sum.to_string(),
            )
        } else {
            let s: Vec<String> = r
                .share
                .iter()
                .map(|s| format!("{:.1}", s * 100.0))
                .collect();
            let f: Vec<String> = r.in_flight_end.iter().map(|n| n.to_string()).collect();
            (s.join("/"), f.join("/"))
        };
        // A proxy or a rival picks elsewhere: nothing to time here.
        let (select, rest) = if r.peer.is_some() || r.rival.is_some() {
            ("-".to_string(), "-".to_string())
        } else {
            (fmt_ns(r.select_ns_measured), fmt_ns(r.rest_ns_measured))
        };
        let l = &r.latency_ms;
        let _ = writeln!(
            out,
            "{:<nw$} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>6.2} {:>8.2}  {:<sw$}  {:<fw$}  {:>8} {:>8}",
            name,
            r.rps,
            l.mean,
            l.p50,
            l.p95,
            l.p99,
            l.p999,
            l.max,
            r.error_rate * 100.0,
            r.util_max_mean,
            share,
            fl,
            select,
            rest
        );
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1000.0 {
        format!("{:.1} µs", ns / 1000.0)
    } else {
        format!("{ns:.0} ns")
    }
}
