//! Open-loop arrivals: requests sent on a schedule drawn in advance, whether
//! or not earlier ones were answered, as independent callers send them.
//!
//! * Arrival times come from one seeded stream (Poisson gaps, or a fixed
//!   gap), and so do the client balancer each arrival goes to (uniformly at
//!   random) and its request: every row of a table sees the same arrivals.
//! * Each request's latency counts from its **intended** send time. Over
//!   HTTP the sender may wake late (tokio's timers tick in milliseconds, and
//!   two cores are shared with the backends): the lag is counted in the
//!   latency, and reported apart ([`crate::report::OpenStats`]).
//! * In `--sim` an arrival is meant for the first of tokio's millisecond
//!   ticks at or after its time (the timers can wake at nothing finer), so
//!   it is sent exactly when meant: a Poisson process binned in
//!   milliseconds, at the same rate.
//! * The measured window is the arrivals meant for it. After the last
//!   arrival the lab waits up to `drain` for their answers; a request still
//!   unanswered then is counted as unfinished, with the time it had waited
//!   as its latency (a lower bound), so a replica that swallows requests
//!   cannot hide them.

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::Service;

use super::users::{Plan, random_ip, send};
use crate::record::Recorder;
use crate::run::message::LabRequest;
use crate::scenario::random::{Rng, sub_seed};
use crate::scenario::{Arrivals, OpenLoop};

/// Counts a request as unfinished if it is dropped before its answer (the
/// drain's end aborts it).
struct Pending {
    rec: Arc<Recorder>,
    intended: Instant,
    answered: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.answered {
            let waited = Instant::now().saturating_duration_since(self.intended);
            self.rec.unfinished(self.intended, waited);
        }
    }
}

/// The first millisecond tick (counted from `start`, itself a tick) at or
/// after `t`.
fn on_tick(start: Instant, t: Instant) -> Instant {
    let ms = (t - start).as_nanos().div_ceil(1_000_000);
    start + std::time::Duration::from_millis(ms as u64)
}

/// Sends `open`'s arrivals from `plan.start` to `plan.end` through
/// `clients`, then waits up to `open.drain` for the answers.
pub async fn open_loop<S, B>(clients: Vec<S>, open: OpenLoop, plan: Arc<Plan>, rec: Arc<Recorder>)
where
    S: Service<LabRequest, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + std::fmt::Display,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Send,
{
    if clients.is_empty() {
        return;
    }
    let mut rng = Rng::new(sub_seed(plan.seed, 6000));
    // `client_ips = "per_user"`: one IP per client balancer.
    let sticky: Vec<String> = clients.iter().map(|_| random_ip(&mut rng)).collect();
    let gap = std::time::Duration::from_secs_f64(1.0 / open.rate);
    let mut tasks = JoinSet::new();
    // Uniform arrivals start with the run; a Poisson process's first
    // arrival comes after a gap like any other.
    let mut t = plan.start;
    let mut first = true;
    loop {
        t += match open.arrivals {
            Arrivals::Poisson => rng.exponential(gap),
            Arrivals::Uniform if first => std::time::Duration::ZERO,
            Arrivals::Uniform => gap,
        };
        first = false;
        if t >= plan.end {
            break;
        }
        let intended = if plan.sim { on_tick(plan.start, t) } else { t };
        if Instant::now() < intended {
            tokio::time::sleep_until(intended).await;
        }
        let c = rng.below(clients.len());
        // In an open loop each client balancer's arrivals are one "user".
        let req = plan.request(&mut rng, &sticky[c], c as u32);
        let mut svc = clients[c].clone();
        let rec = rec.clone();
        tasks.spawn(async move {
            let mut pending = Pending {
                rec: rec.clone(),
                intended,
                answered: false,
            };
            rec.sent(intended, Instant::now());
            let answer = send(&mut svc, req).await;
            pending.answered = true;
            rec.complete(intended, answer.done - intended, answer);
        });
        // Finished tasks are reaped as the run goes: the set stays as small
        // as the requests in flight.
        while tasks.try_join_next().is_some() {}
    }
    let _ = tokio::time::timeout_at(plan.end + open.drain, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    // What is left is unfinished: aborted, each counted by its `Pending`.
    tasks.shutdown().await;
}
