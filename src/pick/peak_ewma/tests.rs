use super::*;
use crate::pick::Picker;
use crate::pick::testing::Fixture;

#[test]
fn bad_config_is_rejected() {
    let field = |p: PeakEwma| p.validate().unwrap_err().field();
    assert_eq!(field(PeakEwma::new().choices(0)), "choices");
    assert_eq!(field(PeakEwma::new().choices(17)), "choices");
    assert_eq!(
        field(PeakEwma::new().spread_factor(f64::NAN)),
        "spread_factor"
    );
    assert_eq!(field(PeakEwma::new().spread_factor(-1.0)), "spread_factor");
    assert!(PeakEwma::new().choices(16).validate().is_ok());
    for d in [Duration::ZERO, Duration::MAX] {
        assert_eq!(
            field(PeakEwma::new().utilization_fade(d)),
            "utilization_fade"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn reported_utilization_raises_the_cost_and_fades() {
    use crate::orca::LoadReport;
    use crate::outcome::Outcome;
    let f = Fixture::new(&[1.0, 1.0]);
    let now_ns = || f.model.nanos(tokio::time::Instant::now());
    for s in &f.states {
        s.record(&Outcome::Success, 50_000_000, now_ns(), 1, 0);
    }
    let p = PeakEwma::new().utilization(true).spread_factor(0.0);
    assert_eq!(p.name(), "peak_ewma_orca");
    let busy = LoadReport::new().with_application_utilization(4.0);
    f.states[0].record_load(&busy, now_ns());
    let cx = f.cx(&());
    // 4x the floor against the estimate of 50 ms.
    assert!((p.cost(&cx, 0) / p.cost(&cx, 1) - 4.0).abs() < 1e-6);
    assert_eq!(PeakEwma::new().cost(&cx, 0), PeakEwma::new().cost(&cx, 1));
    assert_eq!(f.counts(&p, 100), [0, 100]);
    // Faded after 10 fade times: the floor is left (50 ms), while the
    // other endpoint's estimate decays with the 10 s latency τ.
    tokio::time::advance(DEFAULT_UTILIZATION_FADE * 10).await;
    let cx = f.cx(&());
    assert!((p.cost(&cx, 0) - 50e6).abs() < 1.0, "{}", p.cost(&cx, 0));
    assert!((p.cost(&cx, 1) - 50e6 * (-1.0f64).exp()).abs() < 1e3);
}

#[tokio::test(start_paused = true)]
async fn an_idle_reporter_keeps_its_floor_until_the_report_expires() {
    use crate::orca::{DEFAULT_REPORT_EXPIRY, LoadReport};
    use crate::outcome::Outcome;
    let f = Fixture::new(&[1.0]);
    let s = &f.states[0];
    s.record(&Outcome::Success, 300_000_000, 0, 1, 0);
    s.record_load(&LoadReport::new().with_cpu_utilization(0.1), 0);
    let p = PeakEwma::new().utilization(true).spread_factor(0.0);
    // 30 s idle: the estimate has decayed to 5% of 300 ms; the cost stays at the floor.
    tokio::time::advance(Duration::from_secs(30)).await;
    let cx = f.cx(&());
    assert!((p.cost(&cx, 0) - 300e6).abs() < 1.0, "{}", p.cost(&cx, 0));
    assert!(PeakEwma::new().spread_factor(0.0).cost(&cx, 0) < 20e6);
    tokio::time::advance(DEFAULT_REPORT_EXPIRY).await;
    let cx = f.cx(&());
    assert!(p.cost(&cx, 0) < 1e6, "expired: {}", p.cost(&cx, 0));
}

/// Endpoint 0 answered `history` (ms) at time 0; the others `peer_ms`
/// just before `at_ms`: the share of 300 picks endpoint 0 gets at `at_ms`.
async fn share_of_the_stale_one(n: usize, history: &[f64], peer_ms: f64, at_ms: u64) -> usize {
    use crate::outcome::Outcome;
    let f = Fixture::new(&vec![1.0; n]);
    let ns = |t: tokio::time::Instant| f.model.nanos(t);
    let start = tokio::time::Instant::now();
    for ms in history {
        f.states[0].record(&Outcome::Success, (ms * 1e6) as u64, ns(start), 1, 0);
    }
    tokio::time::advance(Duration::from_millis(at_ms)).await;
    let now = ns(tokio::time::Instant::now());
    for s in &f.states[1..] {
        s.record(&Outcome::Success, (peer_ms * 1e6) as u64, now, 1, 0);
    }
    f.counts(&PeakEwma::new(), 300)[0]
}

#[tokio::test(start_paused = true)]
async fn a_stale_idle_endpoint_is_tried_again_within_a_thousand_peer_latencies() {
    // (pool, its estimate ms, the peers' ms, ms later, tried again)
    let cases = [
        // A 5 ms hiccup among 100 µs peers (on a replica whose floor is
        // theirs): stale after 100 ms.
        (3, &[0.1, 5.0][..], 0.1, 50, false),
        (3, &[0.1, 5.0], 0.1, 100, true),
        (10, &[0.1, 5.0], 0.1, 100, true),
        // Ten times slower than a 10 ms pool: after 10 s.
        (3, &[10.0, 100.0], 10.0, 9_000, false),
        (3, &[10.0, 100.0], 10.0, 10_000, true),
        // A floor of 0 (within the clock's tick): 10 ms at least.
        (3, &[0.0, 1.0], 0.0, 9, false),
        (3, &[0.0, 1.0], 0.0, 10, true),
        // Slow from its first answers (a connection's set-up, say): too
        // few to tell, so tried again.
        (3, &[100.0; 3], 10.0, 10_000, true),
        // Eight answers, every one ten times slower: slow, not stale;
        // explored again only as the idle fade (10 s) brings its estimate
        // under the pool's, after ln 10 × 10 s.
        (3, &[100.0; 8], 10.0, 10_000, false),
        (3, &[100.0; 8], 10.0, 20_000, false),
        (3, &[100.0; 8], 10.0, 25_000, true),
        // A newcomer (no answer yet: its estimate is the 30 ms prior) is
        // tried at once, as an equal of the best, not after the prior fades.
        (3, &[][..], 5.0, 0, true),
        (10, &[], 1.0, 0, true),
        // Eight answers, its fastest within twice the pool's: tried.
        (
            3,
            &[20.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0],
            10.0,
            10_000,
            true,
        ),
    ];
    for (n, history, peer_ms, at_ms, tried) in cases {
        let got = share_of_the_stale_one(n, history, peer_ms, at_ms).await;
        assert_eq!(
            got > 0,
            tried,
            "{n} endpoints, {history:?} vs {peer_ms} ms after {at_ms} ms: {got} of 300"
        );
    }
}

#[test]
fn weights_dominate_between_identical_endpoints() {
    let f = Fixture::new(&[0.99, 0.005, 0.005]);
    let counts = f.counts(&PeakEwma::new(), 10_000);
    assert!(counts[0] >= 9_500, "{counts:?}");
}

/// Three endpoints answering `ms` with parallelism `p` learned (each
/// served `p` calls at once at its floor), `in_flight` calls each now:
/// which of them 100 picks choose.
fn chosen(ms: [f64; 3], p: usize, in_flight: [usize; 3], picker: PeakEwma) -> Vec<usize> {
    use crate::outcome::Outcome;
    let f = Fixture::new(&[1.0; 3]);
    for (s, (ms, n)) in f.states.iter().zip(ms.iter().zip(in_flight)) {
        s.record(&Outcome::Success, (ms * 1e6) as u64, 0, p, 0);
        for _ in 0..n {
            s.take_slot(None, 0);
        }
    }
    let counts = f.counts(&picker, 100);
    (0..3).filter(|&i| counts[i] > 0).collect()
}

#[test]
fn a_replica_is_credited_no_more_parallelism_than_the_load_spread() {
    // (estimates ms, learned p, in flight, chosen)
    let cases = [
        // A fifth faster, twice the others' load: credited p = 1 + 8/3,
        // not 8, so its load counts and the others take the call (with
        // p = 8 it would cost 0.8 · 12/8 = 1.2 against 10/8 = 1.25).
        ([0.8, 1.0, 1.0], 8, [4, 2, 2], vec![1, 2]),
        // Markedly faster (estimates more than 1.5 times apart are not
        // alike): latency decides, and it keeps the call despite its load.
        ([0.6, 1.0, 1.0], 8, [4, 2, 2], vec![0]),
        // Fewer calls in flight than candidates: no split to hold, the
        // formula as it was (credited 1 + 1/3, it would cost 1.4 against 1).
        ([0.8, 1.0, 1.0], 8, [1, 0, 0], vec![0]),
        // The load even: the fastest takes it.
        ([0.8, 1.0, 1.0], 8, [2, 2, 2], vec![0]),
        // Loaded beyond its learned parallelism, the credit does not bind
        // (the mean in flight is over p): the formula as it was.
        ([0.8, 1.0, 1.0], 2, [8, 4, 4], vec![1, 2]),
        ([0.5, 1.0, 1.0], 2, [8, 4, 4], vec![0]),
    ];
    for (ms, p, in_flight, want) in cases {
        let got = chosen(ms, p, in_flight, PeakEwma::new().spread_factor(0.0));
        assert_eq!(got, want, "{ms:?} ms, p = {p}, in flight {in_flight:?}");
    }
    // Alike by estimate but not by floor (it answered 0.3 ms once, 0.8
    // ms since: a faster replica, loaded): latency decides, as it was.
    let f = Fixture::new(&[1.0; 3]);
    for (s, (ms, n)) in f.states.iter().zip([(0.3, 4), (1.0, 2), (1.0, 2)]) {
        use crate::outcome::Outcome;
        s.record(&Outcome::Success, (ms * 1e6) as u64, 0, 8, 0);
        for _ in 0..n {
            s.take_slot(None, 0);
        }
    }
    f.states[0].record(&crate::outcome::Outcome::Success, 800_000, 0, 8, 0);
    let counts = f.counts(&PeakEwma::new().spread_factor(0.0), 100);
    assert_eq!(counts, [100, 0, 0], "unlike floors: the formula as it was");
    // Finagle's formula (p = 1) is unchanged: 0.8 · 5 = 4 against 3.
    let classic = PeakEwma::new().spread_factor(0.0).learn_parallelism(false);
    assert_eq!(chosen([0.8, 1.0, 1.0], 8, [4, 2, 2], classic), vec![1, 2]);
}

/// The picks that draw into arrays of two and three candidates
/// (`pick_of`) choose as the general path (`pick_any`) does, pick by pick,
/// whatever the pool's state: the same draws, the same costs, the same
/// winner. Two fixtures with one history and one seed, on a paused clock,
/// so that both read the same time.
#[test]
fn the_unrolled_picks_choose_as_the_general_path() {
    use crate::outcome::{FailureKind, Outcome};
    use crate::rng::RngSource;
    use proptest::prelude::*;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    // (endpoint, latency ns, outcome, calls left in flight)
    let history =
        proptest::collection::vec((0usize..32, 1u64..4_000_000, 0u8..4, 0usize..3), 0..60);
    proptest!(|(n in 4usize..32, k in 2usize..=3, seed: u64, gap_ms in 0u64..40, history in history)| {
        let (general, unrolled) = rt.block_on(async {
            let fixtures = [Fixture::new(&vec![1.0; n]), Fixture::new(&vec![1.0; n])];
            for f in &fixtures {
                for &(e, latency, kind, in_flight) in &history {
                    let outcome = match kind {
                        0 | 1 => Outcome::Success,
                        2 => Outcome::Failure(FailureKind::Error),
                        _ => Outcome::Failure(FailureKind::Timeout),
                    };
                    let s = &f.states[e % n];
                    s.record(&outcome, latency, 0, 1 + in_flight, 0);
                    for _ in 0..in_flight {
                        s.take_slot(None, 0);
                    }
                }
            }
            // Past the staleness bound (10 ms) in some cases.
            tokio::time::advance(Duration::from_millis(gap_ms)).await;
            let p = PeakEwma::new().choices(k);
            let [mut a, mut b] = fixtures;
            a.rng = RngSource::new(Some(seed));
            b.rng = RngSource::new(Some(seed));
            let general: Vec<_> = (0..50).map(|_| p.pick_any(&a.cx(&()), k)).collect();
            let unrolled: Vec<_> = (0..50)
                .map(|_| match k {
                    2 => p.pick_of::<2>(&b.cx(&())),
                    _ => p.pick_of::<3>(&b.cx(&())),
                })
                .collect();
            (general, unrolled)
        });
        prop_assert_eq!(general, unrolled);
    });
}
