//! The rules for a pool left with slow answers and for servers that say
//! they fail.

use super::*;

#[test]
fn a_choice_slow_beside_the_fast_latency_is_no_choice() {
    // (latency ms, failure, fast latency ms, slow): slow past 2.5 times
    // the fast latency, weighed by failures; nothing known (0) is fast.
    let cases: &[(f64, f64, f64, bool)] = &[
        (40.0, 0.0, 5.0, true),
        (12.5, 0.0, 5.0, false),
        (12.6, 0.0, 5.0, true),
        (10.0, 0.0, 5.0, false),
        // 10 ms failing half its calls costs 40 ms.
        (10.0, 0.5, 5.0, true),
        (40.0, 0.0, 0.0, false),
    ];
    for &(ms, f, fast, want) in cases {
        let c = cand(0, 1.0, ms, f);
        assert_eq!(is_slow(&c, fast * 1e6), want, "{ms} ms, f {f}, fast {fast}");
    }
}

#[test]
fn a_pool_left_with_slow_answers_falls_back() {
    // (answers as (rif, latency ms), chosen): the recent answers say a fast
    // endpoint answers in 5 ms (their 0.25 quantile).
    type Case = (&'static [(f64, f64)], Option<u64>);
    let cases: &[Case] = &[
        // Only the slow class left: no choice, the fallback picks.
        (&[(0.0, 40.0), (1.0, 42.0)], None),
        // A fast one among them, hot but the least loaded of the hot: it
        // (the cold slow one is over four times its latency).
        (&[(0.0, 40.0), (1.0, 9.0), (2.0, 42.0)], Some(2)),
        // Queueing within the bound: the rule's choice stands.
        (&[(3.0, 12.0), (4.0, 11.0)], Some(1)),
    ];
    for &(answers, want) in cases {
        let p = pool(Prequal::new());
        // The history: 32 answers, a quarter at 5 ms or less.
        for k in 0..32u64 {
            let ms = if k % 4 == 0 { 5.0 } else { 40.0 };
            p.insert(answer(100 + k, 0.0, ms, 0));
        }
        for k in 100..132 {
            p.forget(k);
        }
        for (id, &(rif, ms)) in (1u64..).zip(answers) {
            p.insert(answer(id, rif, ms, 0));
        }
        let before = p.answers().len();
        assert_eq!(p.choose(0, any).map(|i| i as u64), want, "{answers:?}");
        if want.is_none() {
            assert_eq!(p.answers().len(), before, "nothing spent");
        }
    }
}

#[test]
fn answers_without_a_latency_leave_the_fast_latency_alone() {
    let p = pool(Prequal::new());
    for k in 0..16 {
        p.insert(answer(k, 0.0, 40.0, 0));
    }
    // Endpoints with no latency yet (0) do not make 40 ms look slow.
    for k in 16..64 {
        p.insert(answer(k, 0.0, 0.0, 0));
    }
    for k in 0..64 {
        p.forget(k);
    }
    p.insert(answer(1, 0.0, 40.0, 0));
    p.insert(answer(2, 1.0, 41.0, 0));
    assert_eq!(p.choose(0, any), Some(1));
}

#[test]
fn a_server_that_said_it_fails_stays_failing_through_its_quiet() {
    use super::failing::{Failing, HOLD_MIN_NS, HOLD_SPREAD_NS, hold_ns};
    const S: u64 = 1_000_000_000;
    // Endpoint 7's server said it fails at 0 s; hold until `h`.
    let h = hold_ns(7, 0);
    assert!((HOLD_MIN_NS..HOLD_MIN_NS + HOLD_SPREAD_NS).contains(&h));
    // Each case a run of answers as (endpoint, at ns, the server's word,
    // the share the pool keeps).
    type Word = (u64, u64, Option<f64>, f64);
    let table: Vec<Vec<Word>> = vec![
        // No word, never failing: nothing known, 0.
        vec![(7, 0, None, 0.0)],
        // Said it fails: that share; then no word within the hold: 1.
        vec![(7, 0, Some(1.0), 1.0), (7, h - 1, None, 1.0)],
        // No word after the hold: nothing known again.
        vec![(7, 0, Some(0.8), 0.8), (7, h, None, 0.0)],
        // It serves again (a word under the bound): forgotten at once.
        vec![
            (7, 0, Some(1.0), 1.0),
            (7, S / 10, Some(0.1), 0.1),
            (7, S / 5, None, 0.0),
        ],
        // Another endpoint's quiet is not 7's.
        vec![(7, 0, Some(1.0), 1.0), (8, S / 10, None, 0.0)],
    ];
    for answers in table {
        let mut f = Failing::EMPTY;
        for &(id, at, word, want) in &answers {
            assert_eq!(f.take(id, at, word, MAX_FAILURE), want, "{answers:?}");
        }
    }
    // Holds differ from endpoint to endpoint and time to time (the clients
    // of one fleet try again one at a time).
    let holds: std::collections::HashSet<u64> = (0..32).map(|k| hold_ns(7, k * S / 7)).collect();
    assert!(holds.len() > 16, "{holds:?}");
}

#[test]
fn the_pool_weighs_the_servers_word_on_failures() {
    // (endpoint 1's word, chosen): endpoint 1 is idle and fast, 2 busier.
    let cases: &[(Option<f64>, u64)] = &[(None, 1), (Some(0.0), 1), (Some(0.9), 2)];
    for &(word, want) in cases {
        let p = pool(Prequal::new());
        p.insert(Answer {
            failure: word,
            ..answer(1, 0.0, 1.0, 0)
        });
        p.insert(answer(2, 2.0, 3.0, 0));
        p.insert(answer(3, 3.0, 3.0, 0));
        assert_eq!(p.choose(0, any), Some(want as usize), "{word:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_choice_beats_a_fallback_whose_server_says_it_fails() {
    // (endpoint 0's server word, chosen): this balancer's own model has
    // endpoint 0 fastest (its fallback takes it); the pool holds only slow
    // answers of 1 and 2 beside a history of fast ones.
    let cases: &[(Option<f64>, usize)] = &[(None, 0), (Some(0.0), 0), (Some(1.0), 1)];
    for &(word, want) in cases {
        let f = Fixture::new(&[1.0; 3]);
        let now = f.model.nanos(tokio::time::Instant::now());
        for (i, ms) in [(0, 1), (1, 40), (2, 40)] {
            let ns = ms * 1_000_000;
            f.states[i].record(&Outcome::Success, ns, now, 1, 0);
        }
        let p = Prequal::new().max_uses(1000);
        let table = Picker::table(&p, &f.states);
        let at = now / 1_000_000;
        for k in 0..32u64 {
            let ms = if k % 4 == 0 { 5.0 } else { 40.0 };
            p.pool().insert(answer(100 + k, 0.0, ms, at));
        }
        for k in 100..132 {
            p.pool().forget(k);
        }
        // Endpoint 0 answered its probe with a word on failures, and left
        // the pool (a failed probe, or used).
        p.pool().insert(Answer {
            failure: word,
            ..answer(0, 0.0, 1.0, at)
        });
        p.pool().forget(0);
        p.pool().insert(answer(1, 0.0, 40.0, at));
        p.pool().insert(answer(2, 1.0, 41.0, at));
        let i = Pick::<()>::pick(&p, &(), &f.cx(&table));
        assert_eq!(i, Some(want), "{word:?}");
    }
}
