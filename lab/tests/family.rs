//! The scenario family (issue 36): its cases are a pure function of the
//! family's name and seed, each one a scenario file that says what its
//! axes say; runs on several threads give the numbers of one; and the
//! quick subset holds the bounds at seed 1 in `--sim`:
//!
//! * the default (`peak_ewma`) and the probing picker (`prequal`) are never
//!   behind `tower_p2c`'s p99: worst ratio ≤ 1.0;
//! * the default's geometric-mean p99 is ≤ 2× the oracle's, the best
//!   picker's ≤ 1.5×;
//! * on identical replicas, for the default and every latency-aware
//!   picker: after the first second no replica under a tenth of its fair
//!   share for more than 1 s, and no 1 s window above twice it.
//!
//! Bounds today's pickers miss are `#[ignore]`d until the pickers' dynamics
//! land (issue 36, items 2-3); `cargo test -p tower-lb-lab --test family --
//! --ignored` runs them.

use std::sync::OnceLock;

use tower_lb_lab as lab;

use lab::family::axes::{Loop, Mix, Pattern, SLOW_FACTOR};
use lab::family::toml::{Resolved, resolve};
use lab::family::{self, Case, FamilyArgs, FamilyReport, default_pickers};
use lab::scenario::{DelaySpec, PickerName};

/// The default and the latency-aware pickers the share bounds hold for
/// (`least_response_time` is the published study's herd, kept as a
/// reference: it sends everything to the fastest replica by design).
const LATENCY_AWARE: &[&str] = &["peak_ewma", "p2c_peak_ewma", "peak_ewma_orca", "prequal"];

fn cases(name: &str, seed: u64) -> Vec<Case> {
    family::family(name, seed, &default_pickers(true))
        .expect("the family exists")
        .cases
}

fn resolved(name: &str, seed: u64) -> Vec<(Case, Resolved)> {
    let f = family::family(name, seed, &default_pickers(true)).unwrap();
    f.cases
        .iter()
        .map(|c| {
            let r = resolve(c, name, &default_pickers(true), f.budget, None)
                .unwrap_or_else(|e| panic!("{}: {e}", c.id));
            (c.clone(), r)
        })
        .collect()
}

#[test]
fn the_case_list_is_a_pure_function_of_the_name_and_the_family_seed() {
    assert_eq!(cases("all", 1), cases("all", 1));
    let (one, two) = (cases("generated", 1), cases("generated", 2));
    assert_eq!(one.len(), family::GENERATED);
    assert_eq!(two.len(), family::GENERATED);
    let same = one
        .iter()
        .zip(&two)
        .filter(|(a, b)| a.axes == b.axes)
        .count();
    assert_eq!(same, 0, "family seeds 1 and 2 share cases");
    // The fixed cases do not move with the seed.
    let fixed = |s| -> Vec<Case> {
        cases("all", s)
            .into_iter()
            .filter(|c| !c.id.starts_with('g'))
            .collect()
    };
    assert_eq!(fixed(1), fixed(2));
    assert_eq!(cases("named", 7), fixed(1));
    // Ids and names are unique within a family.
    let all = cases("all", 1);
    for (i, c) in all.iter().enumerate() {
        assert!(
            all[..i].iter().all(|o| o.id != c.id && o.name != c.name),
            "{c:?}"
        );
    }
    let e = family::family("everything", 1, &[]).unwrap_err();
    assert!(e.input && e.message.contains("quick"), "{}", e.message);
}

#[test]
fn generated_cases_cover_every_axis_within_its_range() {
    let mut mixes = [false; 3];
    let mut patterns = [false; 5];
    let (mut closed, mut open) = (false, false);
    for seed in 1..=3 {
        for c in cases("generated", seed) {
            let a = &c.axes;
            assert!((3..=100).contains(&a.replicas), "{c:?}");
            assert!((1..=50).contains(&a.clients), "{c:?}");
            assert!([1, 2, 4, 8, 16].contains(&a.workers), "{c:?}");
            let ms = a.scale.as_secs_f64() * 1e3;
            assert!((0.19..=101.0).contains(&ms), "{c:?}");
            mixes[match a.mix {
                Mix::Identical => 0,
                Mix::Lognormal { .. } => 1,
                Mix::TwoClasses { ratio, .. } => {
                    assert!((2.0..=10.0).contains(&ratio), "{c:?}");
                    2
                }
            }] = true;
            patterns[a.pattern as usize] = true;
            match a.load {
                Loop::Closed { users } => {
                    closed = true;
                    assert!(users >= a.clients, "{c:?}");
                }
                Loop::Open { utilization } => {
                    open = true;
                    assert!((0.5..=0.95).contains(&utilization), "{c:?}");
                }
                Loop::Rate { .. } => panic!("generated at a fixed rate: {c:?}"),
            }
        }
    }
    assert!(mixes.iter().all(|&m| m), "{mixes:?}");
    assert!(patterns.iter().all(|&p| p), "{patterns:?}");
    assert!(closed && open);
}

/// Each case's scenario has the fleet its axes describe.
#[test]
fn every_case_is_a_scenario_file_that_says_what_its_axes_say() {
    let mut all = resolved("all", 1);
    all.extend(resolved("generated", 2));
    all.extend(resolved("quick", 1));
    for (c, r) in &all {
        let (a, sc) = (&c.axes, &r.scenario);
        let id = &c.id;
        // The printed text is the scenario: parsed again, the same.
        let again = lab::scenario::Scenario::parse(&r.text, "printed").unwrap();
        assert_eq!(format!("{again:?}"), format!("{sc:?}"), "{id}");
        assert_eq!(sc.backends.len(), a.replicas as usize, "{id}");
        assert_eq!(sc.load.clients, a.clients, "{id}");
        assert!(
            sc.backends
                .iter()
                .all(|b| b.workers == Some(a.workers) && b.reports),
            "{id}"
        );
        assert_eq!(sc.load.warmup.0, lab::family::toml::WARMUP, "{id}");
        let d = sc.duration.0.as_secs();
        assert!((5..=60).contains(&d), "{id}: {d} s");
        match a.load {
            Loop::Closed { users } => {
                assert_eq!((sc.load.vus, sc.load.is_open()), (users, false), "{id}")
            }
            _ => assert!(sc.load.is_open() && sc.load.vus == 0, "{id}"),
        }
        let medians: Vec<f64> = sc
            .backends
            .iter()
            .filter(|b| b.events.is_empty())
            .map(|b| match b.delay {
                DelaySpec::Fixed(d) => {
                    assert_eq!(a.mix, Mix::Identical, "{id}");
                    d.as_secs_f64()
                }
                DelaySpec::LogNormal { median, .. } => median.as_secs_f64(),
            })
            .collect();
        let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
        let slowed = sc.backends.iter().filter(|b| b.slowdown.is_some()).count();
        let failing = sc.backends.iter().filter(|b| !b.events.is_empty()).count();
        let n = sc.backends.len();
        match a.pattern {
            Pattern::None => assert_eq!((slowed, failing), (0, 0), "{id}"),
            Pattern::Rotating => assert_eq!(slowed, n, "{id}"),
            Pattern::Antagonists => assert!(
                (n / 2..=n.div_ceil(2)).contains(&slowed),
                "{id}: {slowed} of {n}"
            ),
            Pattern::SlowReplica => {
                let grey: Vec<_> = sc.backends.iter().filter(|b| b.name == "grey").collect();
                assert_eq!(grey.len(), 1, "{id}");
                let m = match grey[0].delay {
                    DelaySpec::Fixed(d) | DelaySpec::LogNormal { median: d, .. } => d.as_secs_f64(),
                };
                assert!(
                    (m / lo - f64::from(SLOW_FACTOR)).abs() < 0.01,
                    "{id}: {m} against {lo}"
                );
            }
            Pattern::FailFast => {
                assert_eq!(failing, 1, "{id}");
                // An open loop runs at its utilization of the live replicas.
                if let Loop::Open { utilization } = a.load {
                    let live: Vec<_> = sc
                        .backends
                        .iter()
                        .filter(|b| b.events.is_empty())
                        .cloned()
                        .collect();
                    let cap = lab::scenario::capacity(&live).unwrap();
                    let rate = sc.load.rate.expect("a fail-fast open loop has a rate");
                    assert!(
                        (rate / cap - utilization).abs() < 0.01,
                        "{id}: {rate} of {cap}"
                    );
                }
            }
        }
        if let Mix::TwoClasses { ratio, .. } = a.mix
            && a.pattern != Pattern::SlowReplica
        {
            let hi = medians.iter().copied().fold(0.0, f64::max);
            assert!((hi / lo - ratio).abs() < 0.01, "{id}: {lo} {hi} {ratio}");
        }
        if let Loop::Open { utilization } = a.load
            && a.pattern != Pattern::FailFast
        {
            assert_eq!(sc.load.utilization, Some(utilization), "{id}");
        }
    }
}

/// `q01` and `q04` with three rows, on one thread and on two.
#[test]
fn runs_on_two_threads_give_the_numbers_of_one() {
    let run = |jobs| {
        let a = FamilyArgs {
            cases: Some(vec!["q01".into(), "q04".into()]),
            pickers: Some(
                ["peak_ewma", "tower_p2c", "oracle"]
                    .map(|p| p.parse::<PickerName>().unwrap())
                    .to_vec(),
            ),
            seeds: Some(vec![1, 2]),
            jobs,
            quiet: true,
            ..FamilyArgs::new("quick")
        };
        family::run(&a).unwrap().expect("a run, not a print")
    };
    let (one, two) = (run(1), run(2));
    assert_eq!((one.threads, two.threads), (1, 2));
    let figures = |r: &FamilyReport| serde_json::to_string(&r.rows).unwrap();
    assert_eq!(figures(&one), figures(&two));
    assert_eq!(one.rows.len(), 2);
    assert!(one.rows.iter().all(|rows| rows.len() == 3));
}

/// The quick subset at seed 1, every default row.
fn quick() -> &'static FamilyReport {
    static R: OnceLock<FamilyReport> = OnceLock::new();
    R.get_or_init(|| {
        let a = FamilyArgs {
            seeds: Some(vec![1]),
            quiet: true,
            ..FamilyArgs::new("quick")
        };
        family::run(&a).unwrap().expect("a run")
    })
}

fn worst_vs_tower(r: &FamilyReport, picker: &str) -> f64 {
    let card = r
        .card(picker)
        .unwrap_or_else(|| panic!("{picker} did not run\n{}", r.table()));
    card.vs_tower.as_ref().expect("tower_p2c ran").worst
}

#[test]
#[ignore = "issue 36: fails until the pickers' dynamics land"]
fn quick_default_never_behind_tower() {
    let r = quick();
    let w = worst_vs_tower(r, "peak_ewma");
    assert!(
        w <= 1.0,
        "peak_ewma's worst p99 / tower_p2c's: {w:.3}\n{}",
        r.table()
    );
}

#[test]
#[ignore = "issue 36: fails until the pickers' dynamics land"]
fn quick_probing_picker_never_behind_tower() {
    let r = quick();
    let w = worst_vs_tower(r, "prequal");
    assert!(
        w <= 1.0,
        "prequal's worst p99 / tower_p2c's: {w:.3}\n{}",
        r.table()
    );
}

#[test]
fn quick_default_within_twice_the_oracle() {
    let r = quick();
    let card = r.card("peak_ewma").expect("the default ran");
    let g = card.vs_oracle.as_ref().expect("the oracle ran").geomean;
    assert!(
        g <= 2.0,
        "peak_ewma's geomean p99 / oracle's: {g:.3}\n{}",
        r.table()
    );
}

#[test]
#[ignore = "issue 36: fails until the pickers' dynamics land"]
fn quick_best_within_one_and_a_half_times_the_oracle() {
    let r = quick();
    let (best, g) = r.best().expect("a best picker");
    assert!(
        g <= 1.5,
        "the best ({best}) at {g:.3} of the oracle\n{}",
        r.table()
    );
}

#[test]
#[ignore = "issue 36: fails until the pickers' dynamics land"]
fn quick_share_bounds_on_identical_replicas() {
    let r = quick();
    let measured = r.shares.iter().filter(|&&s| s).count();
    assert!(measured >= 4, "{measured} cases under the share bounds");
    for name in LATENCY_AWARE {
        let s = r
            .card(name)
            .and_then(|c| c.shares.as_ref())
            .unwrap_or_else(|| panic!("{name}\n{}", r.table()));
        assert!(
            s.starved_s <= 1 && s.max_mean <= 2.0,
            "{name}: starved {} s ({}), max/mean {:.2} ({})\n{}",
            s.starved_s,
            s.starved_case,
            s.max_mean,
            s.max_mean_case,
            r.table()
        );
    }
}
