use std::time::Duration;

use super::*;
use crate::outcome::{FailureKind, Outcome};
use crate::pick::testing::Fixture;

fn cand(index: usize, rif: f64, latency_ms: f64, failure: f64) -> Candidate {
    Candidate {
        slot: index,
        index,
        rif,
        latency_ns: latency_ms * 1e6,
        failure,
        own_ns: f64::INFINITY,
    }
}

#[test]
fn what_this_balancer_saw_vetoes_a_candidate() {
    // (candidates as (rif, latency ms, own model's ms), chosen): the hot-
    // cold rule among those the own model expects within twice the best.
    type Case = (&'static [(f64, f64, f64)], Option<usize>);
    let cases: [Case; 4] = [
        // The probe says 1 is fastest and cold; this balancer saw it slow.
        (
            &[(3.0, 10.0, 10.0), (1.0, 5.0, 50.0), (2.0, 8.0, 12.0)],
            Some(2),
        ),
        // Within twice the best: no veto, the rule as before.
        (
            &[(3.0, 10.0, 10.0), (1.0, 5.0, 19.0), (2.0, 8.0, 12.0)],
            Some(1),
        ),
        // Nothing known (+∞) vetoes nothing.
        (
            &[(3.0, 10.0, f64::INFINITY), (1.0, 5.0, f64::INFINITY)],
            Some(1),
        ),
        // Known beside unknown: the unknown is not vetoed either.
        (&[(3.0, 10.0, 10.0), (1.0, 5.0, f64::INFINITY)], Some(1)),
    ];
    for (cs, want) in cases {
        let cs: Vec<Candidate> = cs
            .iter()
            .enumerate()
            .map(|(i, &(r, l, own))| Candidate {
                own_ns: own * 1e6,
                ..cand(i, r, l, 0.0)
            })
            .collect();
        assert_eq!(hot_cold(&cs, 2.0), want, "{cs:?}");
    }
}

#[test]
fn the_hot_cold_rule_table() {
    // (candidates as (rif, latency ms, failure), quantile, chosen position)
    type Case = (&'static [(f64, f64, f64)], f64, Option<usize>);
    let cases: &[Case] = &[
        (&[], 0.84, None),
        // One candidate: it.
        (&[(9.0, 90.0, 0.0)], 0.84, Some(0)),
        // All cold (equal RIF): the fastest.
        (
            &[(1.0, 30.0, 0.0), (1.0, 10.0, 0.0), (1.0, 20.0, 0.0)],
            0.84,
            Some(1),
        ),
        // The fastest is hot (RIF above the quantile): the fastest cold
        // one. RIFs 1, 1, 2, 9: at 0.5 the threshold is 1, at 0.67 it is 2.
        (
            &[
                (1.0, 30.0, 0.0),
                (9.0, 5.0, 0.0),
                (2.0, 20.0, 0.0),
                (1.0, 25.0, 0.0),
            ],
            0.5,
            Some(3),
        ),
        (
            &[
                (1.0, 30.0, 0.0),
                (9.0, 5.0, 0.0),
                (2.0, 20.0, 0.0),
                (1.0, 25.0, 0.0),
            ],
            0.67,
            Some(2),
        ),
        // Quantile 0: only the least loaded are cold.
        (
            &[(3.0, 10.0, 0.0), (1.0, 15.0, 0.0), (2.0, 8.0, 0.0)],
            0.0,
            Some(1),
        ),
        // Quantile 1: everything is cold, the fastest wins.
        (
            &[(3.0, 10.0, 0.0), (1.0, 50.0, 0.0), (7.0, 1.0, 0.0)],
            1.0,
            Some(2),
        ),
        // Failures weigh the latency: 10 ms failing half its calls costs
        // 40 ms; 30 ms wins.
        (&[(1.0, 10.0, 0.5), (1.0, 30.0, 0.0)], 0.84, Some(1)),
        // Ties go to the earlier (older) answer.
        (&[(1.0, 10.0, 0.0), (1.0, 10.0, 0.0)], 0.84, Some(0)),
        // A grey replica: cold (everyone avoids it) but expected to take
        // more than four times the least loaded hot one: that one instead.
        (
            &[(0.0, 130.0, 0.0), (4.0, 20.0, 0.0), (3.0, 30.0, 0.0)],
            0.0,
            Some(2),
        ),
        // Within four times, the cold one still wins.
        (
            &[(0.0, 120.0, 0.0), (4.0, 20.0, 0.0), (3.0, 30.0, 0.0)],
            0.0,
            Some(0),
        ),
    ];
    // A threshold from a history where every candidate is hot: the lowest
    // RIF, weighed by failures.
    let hot = [
        cand(0, 9.0, 1.0, 0.0),
        cand(1, 5.0, 50.0, 0.0),
        cand(2, 4.0, 50.0, 0.5),
    ];
    assert_eq!(hot_cold(&hot, 2.0), Some(1), "4 RIF failing half costs 16");
    for &(cs, q, want) in cases {
        let cs: Vec<Candidate> = cs
            .iter()
            .enumerate()
            .map(|(i, &(r, l, f))| cand(i, r, l, f))
            .collect();
        let mut rifs: Vec<f64> = cs.iter().map(|c| c.rif).collect();
        let threshold = quantile(&mut rifs, q);
        assert_eq!(hot_cold(&cs, threshold), want, "{cs:?} at q = {q}");
    }
}

fn answer(id: u64, rif: f64, latency_ms: f64, at_ms: u64) -> Answer {
    Answer {
        id,
        hint: id as usize,
        rif,
        latency_ns: latency_ms * 1e6,
        at_ns: at_ms * 1_000_000,
        own: 0,
        uses: 0,
        failure: None,
    }
}

fn pool(s: Prequal) -> Arc<ProbePool> {
    Arc::clone(s.pool())
}

#[test]
fn answers_replace_their_endpoints_and_the_oldest_when_full() {
    let p = pool(Prequal::new().pool_size(3));
    p.insert(answer(1, 1.0, 10.0, 0));
    p.insert(answer(2, 1.0, 10.0, 1));
    p.insert(answer(1, 5.0, 10.0, 2));
    let ids: Vec<u64> = p.answers().iter().map(|a| a.id).collect();
    assert_eq!(ids, [2, 1], "the newer answer of 1 replaced the older");
    p.insert(answer(3, 1.0, 10.0, 3));
    p.insert(answer(4, 1.0, 10.0, 4));
    let ids: Vec<u64> = p.answers().iter().map(|a| a.id).collect();
    assert_eq!(ids, [1, 3, 4], "full: the oldest left");
    p.forget(3);
    let ids: Vec<u64> = p.answers().iter().map(|a| a.id).collect();
    assert_eq!(ids, [1, 4]);
}

/// Everything usable, no failures, nothing of ours in flight.
fn any(a: &Answer) -> Option<(usize, f64, u32, f64)> {
    Some((a.id as usize, 0.0, 0, f64::INFINITY))
}

#[test]
fn old_answers_are_dropped_and_each_pick_removes_one_more() {
    let p = pool(
        Prequal::new()
            .max_age(Duration::from_millis(100))
            .max_uses(10),
    );
    for (id, at) in [(1, 0), (2, 50), (3, 60), (4, 70), (5, 80)] {
        p.insert(answer(id, id as f64, 10.0 * id as f64, at));
    }
    // At 120 ms answer 1 (from 0 ms) is too old; 2 is the fastest cold
    // (RIFs 2, 3, 4, 5: at the default quantile, 0.6, the threshold is 3).
    assert_eq!(p.choose(120_000_000, any), Some(2));
    // The pick counted its own request into 2's RIF, and removed the
    // oldest left (2 itself: the removal alternates, oldest first).
    let ids: Vec<u64> = p.answers().iter().map(|a| a.id).collect();
    assert_eq!(ids, [3, 4, 5]);
    // Next the worst goes: 5, the hottest (RIF above the 0.84 quantile).
    assert_eq!(p.choose(120_000_000, any), Some(3));
    let left: Vec<(u64, f64)> = p.answers().iter().map(|a| (a.id, a.rif)).collect();
    assert_eq!(left, [(3, 4.0), (4, 4.0)]);
    // Nothing usable: no choice, and nothing else changes.
    assert_eq!(p.choose(120_000_000, |_| None), None);
    assert_eq!(p.answers().len(), 2);
    // Everything too old: gone.
    assert_eq!(p.choose(500_000_000, any), None);
    assert!(p.answers().is_empty());
}

#[test]
fn a_single_use_answer_leaves_with_its_pick() {
    let p = pool(Prequal::new());
    p.insert(answer(7, 0.0, 1.0, 0));
    p.insert(answer(8, 5.0, 9.0, 0));
    p.insert(answer(9, 5.0, 9.0, 0));
    assert_eq!(p.choose(0, any), Some(7));
    let ids: Vec<u64> = p.answers().iter().map(|a| a.id).collect();
    assert_eq!(ids, [9], "7 used once and gone; 8 the oldest left, removed");
}

#[test]
fn our_own_requests_that_finished_leave_an_answers_rif() {
    let p = pool(Prequal::new());
    // Answered while two of our requests were in flight on endpoint 1
    // (the server counted them): RIF 2.
    p.insert(Answer {
        own: 2,
        ..answer(1, 2.0, 1.0, 0)
    });
    p.insert(answer(2, 1.0, 3.0, 0));
    // Both have finished since: endpoint 1 is idle, and the fastest.
    let now_ours = |a: &Answer| Some((a.id as usize, 0.0, 0, f64::INFINITY));
    assert_eq!(p.choose(0, now_ours), Some(1));
    // Had they not, it would be hot (threshold 1: RIFs 2 and 1).
    let p = pool(Prequal::new());
    p.insert(Answer {
        own: 2,
        ..answer(1, 2.0, 1.0, 0)
    });
    p.insert(answer(2, 1.0, 3.0, 0));
    let still = |a: &Answer| {
        Some((
            a.id as usize,
            0.0,
            if a.id == 1 { 2 } else { 0 },
            f64::INFINITY,
        ))
    };
    assert_eq!(p.choose(0, still), Some(2));
}

#[test]
fn one_answer_is_no_choice() {
    let p = pool(Prequal::new().max_uses(10));
    p.insert(answer(7, 0.0, 1.0, 0));
    assert_eq!(
        p.choose(0, any),
        None,
        "a pick of the only answer is random"
    );
    assert_eq!(p.answers().len(), 1, "and it stays for the next pick");
}

#[test]
fn picks_owe_their_probes_and_fractions_accumulate() {
    let p = Prequal::new().probes_per_request(0.5);
    let pool = Arc::clone(p.pool());
    let f = Fixture::new(&[1.0, 1.0]);
    let table = Picker::table(&p, &f.states);
    for _ in 0..5 {
        Pick::<()>::pick(&p, &(), &f.cx(&table));
    }
    assert_eq!(pool.take_owed(), 2, "five half probes: two whole");
    Pick::<()>::pick(&p, &(), &f.cx(&table));
    assert_eq!(pool.take_owed(), 1, "the half left over counts");
    assert_eq!(pool.take_owed(), 0);
}

#[tokio::test(start_paused = true)]
async fn picks_come_from_the_pool_and_fall_back_without_it() {
    let f = Fixture::new(&[1.0; 4]);
    let p = Prequal::new().max_uses(1000);
    let table = Picker::table(&p, &f.states);
    let now_ns = f.model.nanos(tokio::time::Instant::now());
    // Empty pool: the fallback (PeakEwma) picks, and it is counted.
    assert!(Pick::<()>::pick(&p, &(), &f.cx(&table)).is_some());
    assert_eq!(p.counts().fallback, 1);
    // Endpoint 2 answered idle and fast; endpoint 1 busy.
    p.pool().insert(Answer {
        hint: 2,
        ..answer(2, 0.0, 5.0, 0)
    });
    p.pool().insert(Answer {
        hint: 1,
        ..answer(1, 8.0, 5.0, 0)
    });
    let _ = now_ns;
    assert_eq!(Pick::<()>::pick(&p, &(), &f.cx(&table)), Some(2));
    assert_eq!(p.counts().pooled, 1);
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_answers_probes_but_fails_requests_gets_no_pick_from_the_pool() {
    let f = Fixture::new(&[1.0; 3]);
    let now_ns = |f: &Fixture| f.model.nanos(tokio::time::Instant::now());
    // Endpoint 0 fails every call, in 1 ms, for 2 s.
    for _ in 0..20 {
        tokio::time::advance(Duration::from_millis(100)).await;
        let failed = Outcome::Failure(FailureKind::Error);
        f.states[0].record(&failed, 1_000_000, now_ns(&f), 1, 0);
    }
    let p = Prequal::new().max_uses(1000);
    let table = Picker::table(&p, &f.states);
    let at = now_ns(&f) / 1_000_000;
    for _ in 0..10 {
        // Its probes say it is idle and fast; endpoints 1 and 2 are busier
        // and slower.
        p.pool().insert(answer(0, 0.0, 1.0, at));
        p.pool().insert(answer(1, 3.0, 20.0, at));
        p.pool().insert(answer(2, 3.0, 30.0, at));
        let i = Pick::<()>::pick(&p, &(), &f.cx(&table));
        assert_eq!(i, Some(1), "the failing replica is passed over");
    }
    assert_eq!(p.counts().pooled, 10);
}

#[test]
fn bad_settings_are_named() {
    let field = |p: Prequal| p.validate().unwrap_err().field();
    assert_eq!(
        field(Prequal::new().probes_per_request(0.0)),
        "probes_per_request"
    );
    assert_eq!(
        field(Prequal::new().probes_per_request(17.0)),
        "probes_per_request"
    );
    assert_eq!(
        field(Prequal::new().probes_per_request(f64::NAN)),
        "probes_per_request"
    );
    assert_eq!(field(Prequal::new().rif_quantile(1.5)), "rif_quantile");
    assert_eq!(field(Prequal::new().rif_quantile(f64::NAN)), "rif_quantile");
    assert_eq!(field(Prequal::new().pool_size(0)), "pool_size");
    assert_eq!(field(Prequal::new().pool_size(MAX_POOL + 1)), "pool_size");
    assert_eq!(field(Prequal::new().max_age(Duration::ZERO)), "max_age");
    assert_eq!(field(Prequal::new().max_age(Duration::MAX)), "max_age");
    assert_eq!(
        field(Prequal::new().probe_timeout(Duration::ZERO)),
        "probe_timeout"
    );
    assert_eq!(field(Prequal::new().max_uses(0)), "max_uses");
    assert_eq!(
        field(Prequal::new().max_probes_in_flight(0)),
        "max_probes_in_flight"
    );
    for r in [0.0, -1.0, f64::INFINITY, f64::NAN] {
        assert_eq!(
            field(Prequal::new().max_probes_per_second(r)),
            "max_probes_per_second"
        );
    }
    assert!(Prequal::new().validate().is_ok());
    // A clone gets a pool of its own.
    let p = Prequal::new();
    assert!(!Arc::ptr_eq(p.pool(), p.clone().pool()));
}

mod slow;
