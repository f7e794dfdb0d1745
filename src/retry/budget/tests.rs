//! The budget's rules, its window's rotation and its shards.

use std::sync::Arc;

use super::*;

#[test]
fn exact_for_every_ratio() {
    for (ratio, want) in [(0.6, 600), (0.2, 200), (0.5, 500), (1.0, 1000), (0.0, 0)] {
        let b = Budget::new(Duration::from_secs(10), 0, ratio).unwrap();
        for _ in 0..1000 {
            b.deposit();
        }
        let got = (0..2000).filter(|_| b.withdraw()).count();
        assert_eq!(got, want, "ratio {ratio}");
    }
    // A third: 333.333 retries per 1000 requests, never 500 or 1000.
    let b = Budget::new(Duration::from_secs(10), 0, 1.0 / 3.0).unwrap();
    for _ in 0..3000 {
        b.deposit();
    }
    assert_eq!((0..3000).filter(|_| b.withdraw()).count(), 999);
}

#[test]
fn floor_allows_min_per_sec_times_ttl() {
    let b = Budget::new(Duration::from_secs(10), 10, 0.2).unwrap();
    assert_eq!((0..1000).filter(|_| b.withdraw()).count(), 100);
    assert_eq!(b.balance(), 0.0);
}

#[tokio::test(start_paused = true)]
async fn deposits_and_withdrawals_expire_after_ttl() {
    let b = Budget::new(Duration::from_secs(10), 0, 1.0).unwrap();
    for _ in 0..10 {
        b.deposit();
    }
    assert_eq!(b.balance(), 10.0);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert!(b.withdraw());
    assert_eq!(b.balance(), 9.0);
    // The deposits (bucket 0) expire at 10 s; the withdrawal (bucket 5)
    // stays until 15 s.
    tokio::time::advance(Duration::from_millis(5001)).await;
    assert_eq!(b.balance(), -1.0);
    assert!(!b.withdraw());
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(b.balance(), 0.0);
    // A long idle gap clears everything.
    b.deposit();
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(b.balance(), 0.0);
}

/// The window as it was kept before `ends`: every operation converts
/// its reading and divides to find its bucket.
struct Reference {
    slots: [i64; BUCKETS],
    head: u64,
}

impl Reference {
    fn at(&mut self, b: &Budget, now: Instant) -> usize {
        let since = crate::time::nanos(now.saturating_duration_since(b.epoch));
        let idx = since / b.bucket_ns;
        if idx > self.head {
            for k in 0..(idx - self.head).min(BUCKETS as u64) {
                self.slots[((idx - k) % BUCKETS as u64) as usize] = 0;
            }
            self.head = idx;
        }
        (self.head % BUCKETS as u64) as usize
    }
}

proptest::proptest! {
    /// Rotating on `ends` keeps exactly the deposits and withdrawals
    /// the division did, at bucket edges (0, 1 ns either side of a
    /// multiple of the bucket) and across long gaps.
    #[test]
    fn rotating_at_the_bucket_end_matches_dividing(
        steps in proptest::collection::vec((0u8..6, 0u64..3_000_000_000, proptest::bool::ANY), 1..200),
    ) {
        let b = Budget::new(Duration::from_secs(10), 0, 0.5).unwrap();
        let mut r = Reference { slots: [0; BUCKETS], head: 0 };
        let mut t = 0u64;
        for (kind, ns, deposit) in steps {
            let bucket = b.bucket_ns;
            t = match kind {
                0 => t,
                1 => (t / bucket + 1) * bucket,
                2 => (t / bucket + 1) * bucket - 1,
                3 => (t / bucket + 1) * bucket + 1,
                4 => t + 50 * bucket + ns,
                _ => t + ns,
            };
            let now = b.epoch + Duration::from_nanos(t);
            let slot = r.at(&b, now);
            let unit = if deposit { b.deposit } else { -UNIT };
            r.slots[slot] += unit;
            let mut w = b.shards[0].lock();
            let slot = w.rotate(now, b.epoch, b.bucket_ns);
            w.slots[slot] += unit;
            let want: i64 = r.slots.iter().sum();
            let got = w.sum();
            proptest::prop_assert_eq!(got, want, "at {} ns", t);
        }
    }
}

#[test]
fn config_errors() {
    let ttl = Duration::from_secs(10);
    for (r, field) in [
        (
            Budget::new(Duration::from_millis(999), 1, 0.2),
            "budget.ttl",
        ),
        (Budget::new(Duration::from_secs(61), 1, 0.2), "budget.ttl"),
        (Budget::new(ttl, 1_000_001, 0.2), "budget.min_per_sec"),
        (Budget::new(ttl, 1, -0.1), "budget.ratio"),
        (Budget::new(ttl, 1, 1000.1), "budget.ratio"),
        (Budget::new(ttl, 1, f64::NAN), "budget.ratio"),
    ] {
        assert_eq!(r.unwrap_err().field(), field);
    }
    assert!(Budget::new(Duration::from_secs(60), 1_000_000, 1000.0).is_ok());
}

#[test]
fn shards_are_a_power_of_two_and_every_deposit_counts() {
    let b = Arc::new(Budget::new(Duration::from_secs(10), 0, 0.25).unwrap());
    let n = b.shards.len();
    assert!(n.is_power_of_two() && n <= MAX_SHARDS, "{n} shards");
    // Threads deposit at once, each into its own shard (or sharing one
    // when there are more threads than shards); the sum is exact.
    let threads: Vec<_> = (0..2 * MAX_SHARDS)
        .map(|_| {
            let b = Arc::clone(&b);
            std::thread::spawn(move || (0..1000).for_each(|_| b.deposit()))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let deposits = 2 * MAX_SHARDS * 1000;
    assert_eq!(b.balance(), deposits as f64 * 0.25);
    // Withdrawals draw on the sum, whichever shards it sits in.
    let allowed = (0..deposits).filter(|_| b.withdraw()).count();
    assert_eq!(allowed, deposits / 4);
    assert_eq!(b.balance(), 0.0);
    // Withdrawals see deposits in every shard, not only the thread's own.
    let last = &b.shards[n - 1];
    {
        let mut w = last.lock();
        let slot = w.rotate(Instant::now(), b.epoch, b.bucket_ns);
        w.slots[slot] += 3 * UNIT;
    }
    assert_eq!((0..5).filter(|_| b.withdraw()).count(), 3);
}

#[test]
fn concurrent_withdrawals_never_overdraw() {
    let b = Arc::new(Budget::new(Duration::from_secs(10), 0, 0.1).unwrap());
    for _ in 0..1000 {
        b.deposit();
    }
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                (0..100)
                    .map(|_| {
                        b.deposit();
                        usize::from(b.withdraw())
                    })
                    .sum::<usize>()
            })
        })
        .collect();
    let taken: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    // 1,800 deposits allow exactly 180 retries, however they interleave
    // (each thread deposits before it withdraws, so none starves).
    let left = b.balance();
    assert_eq!(taken as f64 + left, 180.0, "taken {taken}, left {left}");
    assert!(left < 1.0, "left {left}");
}
