//! The traffic's plan, the requests it sends, the closed-loop virtual users
//! and the progress line: the same users drive a tower-lb balancer (a
//! picker's row), a rival balancer, or a plain client pointed at a proxy (a
//! peer's row). Open-loop arrivals are in [`super::arrivals`].

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::time::Instant;
use tower::{Service, ServiceExt};

use crate::record::outcome::Outcome;
use crate::record::timed;
use crate::record::{Recorder, Sample};
use crate::run::message::{LabRequest, STREAM_HEADER};
use crate::scenario::random::{Rng, sub_seed};
use crate::scenario::{ClientIps, Connections, OpenLoop, Scenario, Stage};

/// The shared plan of the traffic: closed-loop users, or open-loop
/// arrivals.
pub struct Plan {
    /// When the row starts (the warm-up's start).
    pub start: Instant,
    /// When the measured window starts (after the warm-up).
    pub measured: Instant,
    /// When it ends: no request is sent after it.
    pub end: Instant,
    /// The open loop, if the load is one.
    pub open: Option<OpenLoop>,
    vus: u32,
    stages: Vec<Stage>,
    think: Duration,
    ips: ClientIps,
    /// Seed of every random number of the traffic.
    pub seed: u64,
    /// `--sim`: open-loop arrivals fall on tokio's millisecond ticks.
    pub sim: bool,
    /// Share of requests that stream, and for how long (ms).
    streams: Option<(f64, u64)>,
    /// Every request's method and body.
    method: http::Method,
    body: Bytes,
    /// The users' connections, if the hash pickers key on them.
    connections: Option<Connections>,
}

impl Plan {
    /// The scenario's load, for a run from `start` to `end` (measured
    /// from `measured`), open loop when `open` says so.
    pub fn new(
        sc: &Scenario,
        (start, measured, end): (Instant, Instant, Instant),
        open: Option<OpenLoop>,
        seed: u64,
    ) -> Self {
        Self {
            start,
            measured,
            end,
            open,
            sim: false,
            vus: sc.load.vus,
            stages: sc.load.stages.clone(),
            think: sc.load.think.0,
            ips: sc.load.client_ips,
            seed,
            streams: sc
                .streams
                .as_ref()
                .map(|st| (st.share, st.hold.0.as_millis() as u64)),
            method: sc.load.method.http(),
            body: Bytes::from(vec![b'x'; sc.load.body as usize]),
            connections: sc.load.connections,
        }
    }

    /// In `--sim` (see [`super::arrivals`]).
    pub fn simulated(mut self, sim: bool) -> Self {
        self.sim = sim;
        self
    }

    fn active(&self, t: Duration) -> u32 {
        self.stages
            .iter()
            .take_while(|s| s.at.0 <= t)
            .last()
            .map_or(self.vus, |s| s.vus)
    }

    /// A request as the plan sends it: `GET /test` (or the scenario's
    /// method and body), the client IP in
    /// `X-Forwarded-For` (fresh, or `sticky`), and (with `[streams]`) a
    /// share of streams; with `[load] connections`, user `user`'s
    /// connection.
    pub fn request(&self, rng: &mut Rng, sticky: &str, user: u32) -> LabRequest {
        let ip = match self.ips {
            ClientIps::PerRequest => random_ip(rng),
            ClientIps::PerUser => sticky.to_string(),
        };
        let mut req = http::Request::new(Full::new(self.body.clone()));
        *req.uri_mut() = http::Uri::from_static("/test");
        *req.method_mut() = self.method.clone();
        if let Ok(v) = http::HeaderValue::from_str(&ip) {
            req.headers_mut().insert("x-forwarded-for", v);
        }
        if let Some(how) = self.connections {
            super::connections::stamp(&mut req, how, user, sticky, rng);
        }
        // Drawn only in scenarios with streams, so the others' random
        // sequences stay as they were.
        if let Some((share, hold_ms)) = self.streams
            && rng.unit() < share
        {
            req.headers_mut()
                .insert(STREAM_HEADER, http::HeaderValue::from(hold_ms));
        }
        req
    }

    fn next_change(&self, t: Duration) -> Instant {
        self.stages
            .iter()
            .find(|s| s.at.0 > t)
            .map_or(self.end, |s| (self.start + s.at.0).min(self.end))
    }
}

/// One closed-loop virtual user: request, wait for the answer, think, again.
pub async fn user<L, B>(u: usize, mut lb: L, plan: Arc<Plan>, rec: Arc<Recorder>)
where
    L: Service<LabRequest, Response = http::Response<B>>,
    L::Error: std::fmt::Display,
    B: hyper::body::Body,
{
    let mut rng = Rng::new(sub_seed(plan.seed, 10_000 + u as u64));
    let sticky_ip = random_ip(&mut rng);
    // Users start spread over one think time: with fixed delays, users
    // started in the same instant would stay in lockstep for the whole run.
    let spread = plan.think.max(Duration::from_millis(10));
    tokio::time::sleep(spread.mul_f64(rng.unit())).await;
    loop {
        let now = Instant::now();
        if now >= plan.end {
            return;
        }
        if u as u32 >= plan.active(now - plan.start) {
            tokio::time::sleep_until(plan.next_change(now - plan.start)).await;
            continue;
        }
        let req = plan.request(&mut rng, &sticky_ip, u as u32);
        let sent = Instant::now();
        let answer = send(&mut lb, req).await;
        if answer.done >= plan.end {
            return;
        }
        rec.complete(answer.done, answer.done - sent, answer);
        let ok = answer.outcome.ok();
        // A failure can be instant; never spin without time passing.
        let think = if ok {
            plan.think
        } else {
            plan.think.max(Duration::from_millis(1))
        };
        // No think time: send again at once. A zero sleep would wait for
        // tokio's next millisecond tick over real time (0-1 ms of idle
        // per request, as long as a LAN replica's service).
        if think.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(think).await;
        }
    }
}

/// Sends `req` through `svc` and reads the answer's body to its end.
pub async fn send<L, B>(svc: &mut L, req: LabRequest) -> Sample
where
    L: Service<LabRequest, Response = http::Response<B>>,
    L::Error: std::fmt::Display,
    B: hyper::body::Body,
{
    match svc.ready().await {
        Ok(svc) => {
            timed::reset();
            let t = std::time::Instant::now();
            let fut = svc.call(req);
            let call_ns = t.elapsed().as_nanos() as u64;
            let select_ns = timed::take();
            let (outcome, done) = match fut.await {
                Ok(r) => {
                    // The latency is the time to the head; then the body
                    // is read to its end (a stream's takes a while).
                    let done = Instant::now();
                    let status = Outcome::Status(r.status().as_u16());
                    if status.ok() && r.into_body().collect().await.is_err() {
                        (Outcome::Body, done)
                    } else {
                        (status, done)
                    }
                }
                Err(e) => (Outcome::of_error(&e.to_string()), Instant::now()),
            };
            Sample {
                outcome,
                call_ns,
                select_ns,
                done,
            }
        }
        Err(e) => Sample {
            outcome: Outcome::of_error(&e.to_string()),
            call_ns: 0,
            select_ns: 0,
            done: Instant::now(),
        },
    }
}

/// A random client IP.
pub fn random_ip(rng: &mut Rng) -> String {
    let x = rng.next_u64();
    format!(
        "{}.{}.{}.{}",
        10 + (x & 0x7f),
        (x >> 8) & 0xff,
        (x >> 16) & 0xff,
        1 + ((x >> 24) % 254)
    )
}

/// The progress line on stderr, redrawn every second until aborted.
pub async fn progress(
    label: String,
    (k, total): (usize, usize),
    start: Instant,
    duration: Duration,
    rec: Arc<Recorder>,
    sim: bool,
) {
    let secs = duration.as_secs_f64();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let t = start.elapsed().as_secs_f64().min(secs);
        let (reqs, mean) = rec.progress();
        eprint!(
            "\r[{k}/{total}] {label:<22} {:>5.0}/{:.0} s{}  {reqs:>8} requests  mean {mean:>6.1} ms   ",
            t,
            secs,
            if sim { " (simulated)" } else { "" },
        );
        let _ = std::io::stderr().flush();
    }
}
