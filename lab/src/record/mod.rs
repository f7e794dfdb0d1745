//! Recording: collects one row's run, every latency, per-second buckets,
//! picks per backend and the time spent in `Balance::call` ([`Recorder`]),
//! with each request's [`outcome`] and the picker's part of the call
//! ([`timed`]).

pub mod outcome;
pub mod timed;

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use std::collections::{BTreeMap, BTreeSet};

use self::outcome::Outcome;
use crate::report::affinity::affinity;
use crate::report::{Latency, OpenStats, PickerReport, Second, round};

/// How one request went.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Its status, or why it has none; a success is an answer below 400
    /// whose body was read to its end.
    pub outcome: Outcome,
    /// Wall-clock ns of the service's `call`.
    pub call_ns: u64,
    /// The picker's part of it ([`timed`]).
    pub select_ns: u64,
    /// When the head arrived (the latency's end).
    pub done: Instant,
}

#[derive(Debug, Clone, Default)]
struct Bucket {
    requests: u64,
    errors: u64,
    latency_ns: u64,
    ok: u64,
    picks: Vec<u64>,
}

#[derive(Debug, Default)]
struct State {
    /// Latencies of successful requests, in nanoseconds.
    latencies: Vec<u64>,
    buckets: Vec<Bucket>,
    picks: Vec<u64>,
    errors: u64,
    /// Errors by status and kind ([`Outcome::key`]).
    errors_by: BTreeMap<String, u64>,
    /// With `[load] connections`: the backends each user's attempts
    /// reached.
    reached: BTreeMap<u32, BTreeSet<usize>>,
    /// Wall-clock ns in `Balance::call`, and in selection within it.
    call_ns: u128,
    select_ns: u128,
    calls: u64,
    /// Open loop: measured arrivals, those sent before the window ended,
    /// and every send's lag behind its intended time (ns).
    arrivals: u64,
    sent_in_window: u64,
    lags: Vec<u64>,
    /// Open loop: measured requests still unanswered when the drain ended.
    unfinished: u64,
}

/// Shared by the users and endpoints of one run.
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    end: Instant,
    state: Mutex<State>,
}

impl Recorder {
    /// A recorder for a run from `start` lasting `duration`, over `n` backends.
    pub fn new(start: Instant, duration: Duration, n: usize) -> Self {
        let secs = duration.as_secs_f64().ceil() as usize;
        let state = State {
            buckets: vec![
                Bucket {
                    picks: vec![0; n],
                    ..Bucket::default()
                };
                secs.max(1)
            ],
            picks: vec![0; n],
            ..State::default()
        };
        Self {
            start,
            end: start + duration,
            state: Mutex::new(state),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The second of `t` in the measured run; `None` during a warm-up
    /// (before `start`) and after the end.
    fn bucket(&self, t: Instant) -> Option<usize> {
        (t >= self.start && t < self.end)
            .then(|| t.saturating_duration_since(self.start).as_secs() as usize)
    }

    /// An attempt was dispatched to backend `idx` (counted at dispatch, so
    /// retries and failures count too).
    pub fn pick(&self, idx: usize) {
        let Some(b) = self.bucket(Instant::now()) else {
            return;
        };
        self.with(|s| {
            if let Some(p) = s.picks.get_mut(idx) {
                *p += 1;
            }
            if let Some(p) = s.buckets.get_mut(b).and_then(|b| b.picks.get_mut(idx)) {
                *p += 1;
            }
        });
    }

    /// An attempt of user `user` was dispatched to backend `idx` (with
    /// `[load] connections`).
    pub fn reached(&self, user: u32, idx: usize) {
        if self.bucket(Instant::now()).is_none() {
            return;
        }
        self.with(|s| {
            s.reached.entry(user).or_default().insert(idx);
        });
    }

    /// A request answered after `latency`, counted in the second of `at`
    /// (closed loop: when it was answered; open loop: when it was meant to
    /// be sent).
    pub fn complete(&self, at: Instant, latency: Duration, a: Sample) {
        let Some(b) = self.bucket(at) else {
            return;
        };
        let (ok, ns) = (a.outcome.ok(), latency.as_nanos() as u64);
        self.with(|s| {
            if let Some(k) = a.outcome.key() {
                *s.errors_by.entry(k).or_default() += 1;
            }
            s.call_ns += u128::from(a.call_ns);
            s.select_ns += u128::from(a.select_ns);
            s.calls += 1;
            if ok {
                s.latencies.push(ns);
            } else {
                s.errors += 1;
            }
            if let Some(b) = s.buckets.get_mut(b) {
                b.requests += 1;
                if ok {
                    b.ok += 1;
                    b.latency_ns += ns;
                } else {
                    b.errors += 1;
                }
            }
        });
    }

    /// Open loop: an arrival meant for `intended` was sent at `sent`.
    pub fn sent(&self, intended: Instant, sent: Instant) {
        if self.bucket(intended).is_none() {
            return;
        }
        let lag = sent.saturating_duration_since(intended).as_nanos() as u64;
        let in_window = sent < self.end;
        self.with(|s| {
            s.arrivals += 1;
            s.sent_in_window += u64::from(in_window);
            s.lags.push(lag);
        });
    }

    /// Open loop: a measured request meant for `intended` had no answer
    /// after `waited`. It counts in the latency figures at `waited`, a
    /// lower bound of its latency.
    pub fn unfinished(&self, intended: Instant, waited: Duration) {
        if self.bucket(intended).is_none() {
            return;
        }
        self.with(|s| {
            s.unfinished += 1;
            s.latencies.push(waited.as_nanos() as u64);
        });
    }

    /// Requests completed so far and their mean latency in ms (for progress).
    pub fn progress(&self) -> (u64, f64) {
        self.with(|s| {
            let n = s.latencies.len() as u64;
            let sum: u64 = s.latencies.iter().rev().take(2000).sum();
            let k = s.latencies.len().clamp(1, 2000);
            (n + s.errors, sum as f64 / k as f64 / 1e6)
        })
    }

    /// The run's numbers. The call's times go into the JSON only when
    /// `wall` (http mode): in `--sim` they are wall-clock noise in an
    /// otherwise exact run.
    pub fn finish(
        &self,
        picker: &str,
        weighted: bool,
        in_flight_end: Vec<usize>,
        wall: bool,
    ) -> PickerReport {
        self.with(|s| {
            let duration = self.end.saturating_duration_since(self.start).as_secs_f64();
            let latency_ms = s.latency();
            let requests = s.latencies.len() as u64 + s.errors;
            let open = s.open(duration);
            let (select_ns, rest_ns) = s.call_times();
            PickerReport {
                picker: picker.to_string(),
                weighted,
                requests,
                errors: s.errors,
                errors_by: s.errors_by.clone(),
                rps: round(requests as f64 / duration, 3),
                error_rate: if requests == 0 {
                    0.0
                } else {
                    round(s.errors as f64 / requests as f64, 6)
                },
                latency_ms,
                share: shares(&s.picks),
                picks: s.picks.clone(),
                in_flight_end,
                retries: None,
                not_replayable: None,
                ejections: None,
                breaker_opens: None,
                probes: None,
                select_ns: wall.then_some(round(select_ns, 1)),
                rest_ns: wall.then_some(round(rest_ns, 1)),
                select_ns_measured: select_ns,
                rest_ns_measured: rest_ns,
                p99_misses_ms: s.p99_misses(),
                timeline: s.timeline(),
                open,
                utilization: Vec::new(),
                util_max_mean: 0.0,
                rival: None,
                peer: None,
                route: None,
                fleet: None,
                membership: None,
                affinity: (!s.reached.is_empty()).then(|| affinity(&s.reached)),
            }
        })
    }
}

impl State {
    /// The successful requests' latency summary in ms (sorts the
    /// latencies).
    fn latency(&mut self) -> Latency {
        self.latencies.sort_unstable();
        let lat = &self.latencies;
        let ok = lat.len() as u64;
        let pct = |q: f64| {
            if lat.is_empty() {
                return 0.0;
            }
            let rank = ((q * ok as f64).ceil() as usize).clamp(1, lat.len());
            ms(lat[rank - 1] as f64)
        };
        let sum: u128 = lat.iter().map(|&x| u128::from(x)).sum();
        Latency {
            mean: if ok == 0 {
                0.0
            } else {
                ms(sum as f64 / ok as f64)
            },
            p50: pct(0.50),
            p95: pct(0.95),
            p99: pct(0.99),
            p999: pct(0.999),
            max: lat.last().map_or(0.0, |&x| ms(x as f64)),
        }
    }

    /// p99 over every request, a failure counting as a miss (infinite);
    /// after [`State::latency`], which sorts the latencies.
    fn p99_misses(&self) -> f64 {
        let (ok, all) = (
            self.latencies.len(),
            self.latencies.len() as u64 + self.errors,
        );
        if all == 0 {
            return 0.0;
        }
        let rank = ((0.99 * all as f64).ceil() as usize).max(1);
        match self.latencies.get(rank - 1) {
            Some(&ns) if rank <= ok => ms(ns as f64),
            _ => f64::INFINITY,
        }
    }

    /// Open loop: the arrival and send rates over `duration` seconds, the
    /// sends' lag and the unfinished requests; `None` in a closed loop.
    fn open(&mut self, duration: f64) -> Option<OpenStats> {
        if self.arrivals == 0 {
            return None;
        }
        self.lags.sort_unstable();
        let lags = &self.lags;
        let lag = |q: f64| {
            let rank = ((q * lags.len() as f64).ceil() as usize).clamp(1, lags.len());
            ms(lags[rank - 1] as f64)
        };
        Some(OpenStats {
            rate: round(self.arrivals as f64 / duration, 2),
            sent_rate: round(self.sent_in_window as f64 / duration, 2),
            lag_p99_ms: lag(0.99),
            lag_max_ms: lag(1.0),
            unfinished: self.unfinished,
        })
    }

    /// One entry per measured second: its requests, errors, mean latency
    /// and picks' shares.
    fn timeline(&self) -> Vec<Second> {
        self.buckets
            .iter()
            .enumerate()
            .map(|(t, b)| Second {
                t: t as u64,
                requests: b.requests,
                errors: b.errors,
                mean_ms: (b.ok > 0).then(|| ms(b.latency_ns as f64 / b.ok as f64)),
                share: shares(&b.picks),
            })
            .collect()
    }

    /// The mean ns per call spent in selection, and in the rest of
    /// `Balance::call` (less the timer readings' cost).
    fn call_times(&self) -> (f64, f64) {
        let per_call = |ns: u128| {
            if self.calls == 0 {
                0.0
            } else {
                ns as f64 / self.calls as f64
            }
        };
        let select_ns = per_call(self.select_ns);
        // The call's interval holds the selection's timer readings as
        // well: one reading's cost more than the selection's interval.
        let overhead = if self.calls == 0 {
            0.0
        } else {
            timed::overhead_ns() as f64
        };
        let rest_ns = (per_call(self.call_ns) - select_ns - 2.0 * overhead).max(0.0);
        (select_ns, rest_ns)
    }
}

fn ms(ns: f64) -> f64 {
    round(ns / 1e6, 3)
}

fn shares(picks: &[u64]) -> Vec<f64> {
    let total: u64 = picks.iter().sum();
    picks
        .iter()
        .map(|&p| {
            if total == 0 {
                0.0
            } else {
                round(p as f64 / total as f64, 5)
            }
        })
        .collect()
}
