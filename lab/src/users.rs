//! The closed-loop virtual users and the progress line: the same users
//! drive a tower-lb balancer (a picker's row) or a plain client pointed at
//! a proxy (a peer's row).

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use tokio::time::Instant;
use tower::{Service, ServiceExt};

use super::backend::{Rng, sub_seed};
use super::endpoint::{LabRequest, STREAM_HEADER};
use super::record::Recorder;
use super::scenario::{ClientIps, Scenario, Stage};
use super::timed;

/// The shared plan of the virtual users.
pub struct Plan {
    start: Instant,
    end: Instant,
    vus: u32,
    stages: Vec<Stage>,
    think: Duration,
    ips: ClientIps,
    seed: u64,
    /// Share of requests that stream, and for how long (ms).
    streams: Option<(f64, u64)>,
}

impl Plan {
    /// The scenario's load, for a run from `start` to `end`.
    pub fn new(sc: &Scenario, start: Instant, end: Instant, seed: u64) -> Self {
        Self {
            start,
            end,
            vus: sc.load.vus,
            stages: sc.load.stages.clone(),
            think: sc.load.think.0,
            ips: sc.load.client_ips,
            seed,
            streams: sc
                .streams
                .as_ref()
                .map(|st| (st.share, st.hold.0.as_millis() as u64)),
        }
    }

    fn active(&self, t: Duration) -> u32 {
        self.stages
            .iter()
            .take_while(|s| s.at.0 <= t)
            .last()
            .map_or(self.vus, |s| s.vus)
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
        let ip = match plan.ips {
            ClientIps::PerRequest => random_ip(&mut rng),
            ClientIps::PerUser => sticky_ip.clone(),
        };
        let mut req = http::Request::new(Empty::<Bytes>::new());
        *req.uri_mut() = http::Uri::from_static("/test");
        if let Ok(v) = http::HeaderValue::from_str(&ip) {
            req.headers_mut().insert("x-forwarded-for", v);
        }
        // Drawn only in scenarios with streams, so the others' random
        // sequences stay as they were.
        if let Some((share, hold_ms)) = plan.streams
            && rng.unit() < share
        {
            req.headers_mut()
                .insert(STREAM_HEADER, http::HeaderValue::from(hold_ms));
        }
        let sent = Instant::now();
        let (ok, call_ns, select_ns, done) = match lb.ready().await {
            Ok(svc) => {
                timed::reset();
                let t = std::time::Instant::now();
                let fut = svc.call(req);
                let call_ns = t.elapsed().as_nanos() as u64;
                let select_ns = timed::take();
                let (ok, done) = match fut.await {
                    Ok(r) => {
                        // The latency is the time to the head; then the
                        // body is read to its end (a stream's takes a while).
                        let done = Instant::now();
                        let good = !r.status().is_server_error();
                        (good && r.into_body().collect().await.is_ok(), done)
                    }
                    Err(_) => (false, Instant::now()),
                };
                (ok, call_ns, select_ns, done)
            }
            Err(_) => (false, 0, 0, Instant::now()),
        };
        if done >= plan.end {
            return;
        }
        rec.complete(done, done - sent, ok, call_ns, select_ns);
        // A failure can be instant; never spin without time passing.
        let think = if ok {
            plan.think
        } else {
            plan.think.max(Duration::from_millis(1))
        };
        tokio::time::sleep(think).await;
    }
}

fn random_ip(rng: &mut Rng) -> String {
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
