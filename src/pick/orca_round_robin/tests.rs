use std::time::Duration;

use tokio::time::{Instant, advance};

use super::*;
use crate::orca::LoadReport;
use crate::pick::testing::Fixture;

const SEC: Duration = Duration::from_secs(1);

/// Every endpoint `i` with `Some((rps, utilization))` reports now.
fn report(f: &Fixture, loads: &[Option<(f64, f64)>]) {
    let now_ns = f.model.nanos(Instant::now());
    for (s, load) in f.states.iter().zip(loads) {
        if let Some((rps, u)) = *load {
            let r = LoadReport::new()
                .with_rps_fractional(rps)
                .with_cpu_utilization(u);
            s.record_load(&r, now_ns);
        }
    }
}

fn shares(f: &Fixture, p: &OrcaRoundRobin, t: &WeightTable, n: usize) -> Vec<f64> {
    let mut c = vec![0usize; f.states.len()];
    for _ in 0..n {
        c[Pick::<()>::pick(p, &(), &f.cx(t)).unwrap()] += 1;
    }
    c.iter().map(|&k| k as f64 / n as f64).collect()
}

fn close(got: &[f64], want: &[f64]) -> bool {
    got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 0.01)
}

#[tokio::test(start_paused = true)]
async fn shares_follow_a58_weights_after_the_blackout() {
    let f = Fixture::new(&[1.0, 1.0, 1.0]);
    let p = OrcaRoundRobin::new();
    let t = p.table(&f.states);
    // Weights 600 and 200; the third reports nothing and gets the mean, 400.
    let loads = [Some((300.0, 0.5)), Some((100.0, 0.5)), None];
    report(&f, &loads);
    let s = shares(&f, &p, &t, 3000);
    assert!(close(&s, &[1.0 / 3.0; 3]), "blackout: round robin {s:?}");
    advance(DEFAULT_BLACKOUT).await;
    report(&f, &loads);
    let s = shares(&f, &p, &t, 12_000);
    assert!(close(&s, &[0.5, 1.0 / 6.0, 1.0 / 3.0]), "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn blackout_starts_at_the_first_report_of_a_stream() {
    let f = Fixture::new(&[1.0, 1.0]);
    let p = OrcaRoundRobin::new();
    let t = p.table(&f.states);
    let loads = [Some((300.0, 1.0)), Some((100.0, 1.0))];
    for _ in 0..9 {
        report(&f, &loads);
        advance(SEC).await;
    }
    // 9 s of reports: still in the blackout.
    assert!(close(&shares(&f, &p, &t, 2000), &[0.5, 0.5]));
    advance(SEC).await;
    report(&f, &loads);
    assert!(close(&shares(&f, &p, &t, 8000), &[0.75, 0.25]));
}

#[tokio::test(start_paused = true)]
async fn weights_expire_and_a_new_stream_waits_out_the_blackout() {
    let f = Fixture::new(&[1.0, 1.0]);
    let p = OrcaRoundRobin::new();
    let t = p.table(&f.states);
    let loads = [Some((300.0, 1.0)), Some((100.0, 1.0))];
    report(&f, &loads);
    advance(DEFAULT_BLACKOUT).await;
    report(&f, &loads);
    assert!(close(&shares(&f, &p, &t, 8000), &[0.75, 0.25]));
    // Silent past the expiry (3 min since the last report): equal weights.
    advance(crate::orca::DEFAULT_REPORT_EXPIRY).await;
    assert!(close(&shares(&f, &p, &t, 2000), &[0.5, 0.5]));
    // Reports again: a new stream, so the blackout applies again.
    report(&f, &loads);
    advance(SEC).await;
    assert!(close(&shares(&f, &p, &t, 2000), &[0.5, 0.5]));
    advance(DEFAULT_BLACKOUT).await;
    report(&f, &loads);
    assert!(close(&shares(&f, &p, &t, 8000), &[0.75, 0.25]));
}

#[tokio::test(start_paused = true)]
async fn weights_change_once_per_update_period() {
    let f = Fixture::new(&[1.0, 1.0]);
    let p = OrcaRoundRobin::new().blackout_period(Duration::ZERO);
    let t = p.table(&f.states);
    report(&f, &[Some((300.0, 1.0)), Some((100.0, 1.0))]);
    let _ = shares(&f, &p, &t, 1);
    assert_eq!((t.weight(0), t.weight(1)), (Some(65535), Some(21845)));
    report(&f, &[Some((100.0, 1.0)), Some((300.0, 1.0))]);
    assert!(close(&shares(&f, &p, &t, 8000), &[0.75, 0.25]), "not yet");
    advance(DEFAULT_WEIGHT_UPDATE_PERIOD).await;
    assert!(close(&shares(&f, &p, &t, 8000), &[0.25, 0.75]));
}

#[tokio::test(start_paused = true)]
async fn one_reporter_is_round_robin_and_ratios_are_bounded() {
    let f = Fixture::new(&[1.0, 1.0, 1.0]);
    let p = OrcaRoundRobin::new().blackout_period(Duration::ZERO);
    let t = p.table(&f.states);
    report(&f, &[Some((1000.0, 0.1)), None, None]);
    assert!(close(&shares(&f, &p, &t, 3000), &[1.0 / 3.0; 3]));
    // 10 000 against 1: the mean is 5000.5, the light one is raised to a
    // tenth of it and the silent one gets it.
    advance(SEC).await;
    report(&f, &[Some((1000.0, 0.1)), Some((1.0, 1.0)), None]);
    let _ = shares(&f, &p, &t, 1);
    let w: Vec<u16> = (0..3).filter_map(|i| t.weight(i)).collect();
    assert_eq!(w[0], 65535);
    let scaled = |x: f64| (x / 10_000.0 * 65535.0).round() as u16;
    assert_eq!(w[1], scaled(500.05), "{w:?}");
    assert_eq!(w[2], scaled(5000.5), "{w:?}");
}

#[tokio::test(start_paused = true)]
async fn the_schedule_is_smooth_and_skips_capped_endpoints() {
    let mut f = Fixture::new(&[1.0, 1.0, 1.0]);
    let p = OrcaRoundRobin::new().blackout_period(Duration::ZERO);
    let t = p.table(&f.states);
    report(
        &f,
        &[Some((200.0, 1.0)), Some((100.0, 1.0)), Some((100.0, 1.0))],
    );
    let seq: Vec<usize> = (0..400)
        .map(|_| Pick::<()>::pick(&p, &(), &f.cx(&t)).unwrap())
        .collect();
    let longest = seq
        .chunk_by(|a, b| a == b)
        .map(<[usize]>::len)
        .max()
        .unwrap_or(0);
    assert!(longest <= 2, "{seq:?}");
    f.cap = crate::admission::Cap::new(Some(1), false);
    let _busy = f.states[0].try_acquire(Some(1)).unwrap();
    assert!(close(&shares(&f, &p, &t, 4000), &[0.0, 0.5, 0.5]));
}

#[test]
fn bad_settings_name_their_field() {
    let field = |p: OrcaRoundRobin| p.validate().map_err(|e| e.field()).err();
    assert_eq!(field(OrcaRoundRobin::new()), None);
    for x in [f64::NAN, f64::INFINITY, -1.0] {
        assert_eq!(
            field(OrcaRoundRobin::new().error_penalty(x)),
            Some("error_penalty")
        );
    }
    assert_eq!(
        field(OrcaRoundRobin::new().blackout_period(Duration::MAX)),
        Some("blackout_period")
    );
    assert_eq!(
        field(OrcaRoundRobin::new().weight_update_period(Duration::MAX)),
        Some("weight_update_period")
    );
    assert_eq!(
        field(OrcaRoundRobin::new().weight_update_period(Duration::ZERO)),
        None
    );
}
