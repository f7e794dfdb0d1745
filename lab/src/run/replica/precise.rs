//! Sub-millisecond waits over real time: a service of 200 µs that takes
//! 200 µs, not "0 or 1 ms".
//!
//! tokio's timers tick in milliseconds ([`super::timer`]): fine for the
//! lab's 10 ms replicas, whose timers are corrected on average, but a LAN
//! replica answering in 200 µs would answer in 0 or 1 ms, a noise five
//! times its service time. Waits shorter than [`PRECISE_BELOW`] go to one
//! thread instead, which keeps the pending deadlines in a heap and sleeps
//! on a condition variable until the earliest (a futex wait with a
//! timeout, precise to the kernel's timer slack, 50 µs by default on
//! Linux). Its wake-ups run late by that slack and the wake-up itself, so
//! it measures how late it wakes and sleeps that much less: it tracks the
//! **median** lateness (a step earlier after a late wake-up, a step later
//! after an early one) and holds it at zero. The mean would be the wrong
//! target on a loaded machine: a few wake-ups milliseconds late would make
//! most services short. One wake-up per service and nothing spins: the
//! thread costs a few microseconds of CPU per request.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Services shorter than this wait on the precise thread over real time;
/// longer ones on tokio's timers (a millisecond tick is then at most a
/// fifth of the service time, and corrected on average by
/// [`super::timer`]).
pub const PRECISE_BELOW: Duration = Duration::from_millis(5);

/// How far each wake-up moves the next ones, ns: the median tracker's
/// step (a 50 µs slack is learned in 25 wake-ups).
const STEP_NS: i64 = 2_000;

/// The most the thread wakes early: above the timer slack and wake-up
/// cost measured on Linux (50–100 µs), and a bound on how short a service
/// can be made.
const MAX_EARLY: Duration = Duration::from_micros(200);

/// A pending wait: its deadline, its order of arrival (ties), and whom to
/// tell.
struct Entry {
    at: Instant,
    seq: u64,
    tx: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Pending {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

/// The thread's shared state.
#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    cv: Condvar,
}

/// The timer thread's state, started on first use.
fn shared() -> Option<&'static Shared> {
    static S: OnceLock<Option<&'static Shared>> = OnceLock::new();
    *S.get_or_init(|| {
        let s: &'static Shared = Box::leak(Box::default());
        std::thread::Builder::new()
            .name("lab-precise-timer".into())
            .spawn(move || run(s))
            .ok()
            .map(|_| s)
    })
}

fn run(s: &Shared) {
    let mut early_ns: i64 = 0;
    let mut g = s.pending.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let now = Instant::now();
        let early = Duration::from_nanos(early_ns.max(0) as u64);
        while g.heap.peek().is_some_and(|e| e.0.at <= now + early) {
            if let Some(Reverse(e)) = g.heap.pop() {
                let step = if now > e.at { STEP_NS } else { -STEP_NS };
                early_ns = (early_ns + step).clamp(0, MAX_EARLY.as_nanos() as i64);
                let _ = e.tx.send(());
            }
        }
        g = match g.heap.peek().map(|e| e.0.at) {
            None => s.cv.wait(g).unwrap_or_else(|p| p.into_inner()),
            Some(at) => {
                let wait = at.saturating_duration_since(now + early);
                s.cv.wait_timeout(g, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
    }
}

/// Waits `d` from now on the precise thread (on tokio's timer if the
/// thread could not start).
pub async fn sleep(d: Duration) {
    let at = Instant::now() + d;
    let Some(s) = shared() else {
        tokio::time::sleep(d).await;
        return;
    };
    let (tx, rx) = oneshot::channel();
    {
        let mut g = s.pending.lock().unwrap_or_else(|p| p.into_inner());
        let earliest = g.heap.peek().is_none_or(|e| at < e.0.at);
        let seq = g.seq;
        g.seq += 1;
        g.heap.push(Reverse(Entry { at, seq, tx }));
        if earliest {
            s.cv.notify_one();
        }
    }
    let _ = rx.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real time, so only what cannot fail on a loaded machine: every
    /// waiter is woken, and no wait is shorter than asked by more than
    /// the controller's bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waits_end_no_earlier_than_the_bound_and_all_wake() {
        let mut tasks = Vec::new();
        for k in 0..200u64 {
            let d = Duration::from_micros(100 + (k * 37) % 900);
            tasks.push(tokio::spawn(async move {
                let t = Instant::now();
                sleep(d).await;
                (d, t.elapsed())
            }));
        }
        for t in tasks {
            let (asked, took) = t.await.unwrap();
            assert!(took + MAX_EARLY >= asked, "{asked:?} took {took:?}");
        }
    }
}
