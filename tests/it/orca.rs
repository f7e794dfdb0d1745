//! Server-reported load (ORCA): parsing (known examples exactly, arbitrary
//! text never panics), A58's weights through a real balancer as a table,
//! blackout and expiry on the paused clock, the reports the HTTP classifier
//! reads, and `PeakEwma`'s utilization term.

use std::convert::Infallible;
use std::time::Duration;

use proptest::prelude::*;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::Balance;
use tower_lb::orca::{LoadReport, MAX_NAMED_METRICS, ParseError};
use tower_lb::pick::{OrcaRoundRobin, PeakEwma};

// ---------------------------------------------------------------- parsing

#[test]
fn the_issue_example_in_text_form_gives_exact_values() {
    let r = LoadReport::parse(
        "TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=120, eps=2, \
         application_utilization=0.4, named_metrics.foo=1",
    )
    .unwrap();
    assert_eq!(r.cpu_utilization(), Some(0.3));
    assert_eq!(r.mem_utilization(), Some(0.8));
    assert_eq!(r.rps_fractional(), Some(120.0));
    assert_eq!(r.eps(), Some(2.0));
    assert_eq!(r.application_utilization(), Some(0.4));
    assert_eq!(r.named_metric("foo"), Some(1.0));
    assert_eq!(r.utilization(), Some(0.4));
    assert_eq!(r.rejected(), 0);
}

#[test]
fn envoys_colon_form_and_the_json_form_give_the_same_report() {
    let text = LoadReport::parse("TEXT cpu_utilization:0.3,rps_fractional:120,eps:2").unwrap();
    let json = LoadReport::parse(r#"JSON {"cpuUtilization": 0.3, "rpsFractional": 120, "eps": 2}"#)
        .unwrap();
    let names =
        LoadReport::parse(r#"JSON {"cpu_utilization": "0.3", "rps_fractional": 120, "eps": 2}"#)
            .unwrap();
    assert_eq!(text, json);
    assert_eq!(json, names);
    let r = LoadReport::parse(
        r#"JSON {"applicationUtilization": 1.5, "namedMetrics": {"queue": 7, "gpu": 0.25}}"#,
    )
    .unwrap();
    assert_eq!(r.application_utilization(), Some(1.5));
    assert_eq!(r.named_metric("queue"), Some(7.0));
    assert_eq!(r.named_metric("gpu"), Some(0.25));
    assert_eq!(r.utilization(), Some(1.5));
}

#[test]
fn bad_values_are_left_out_and_counted() {
    // (header, cpu, mem, rps, eps, rejected)
    type Row = (
        &'static str,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        u32,
    );
    let table: &[Row] = &[
        ("TEXT cpu_utilization=-0.1", None, None, None, None, 1),
        ("TEXT mem_utilization=1.5", None, None, None, None, 1),
        (
            "TEXT cpu_utilization=NaN, eps=inf",
            None,
            None,
            None,
            None,
            2,
        ),
        (
            "TEXT rps_fractional=-5, eps=3",
            None,
            None,
            None,
            Some(3.0),
            1,
        ),
        (
            "TEXT cpu_utilization=0.5, cpu_utilization=0.9",
            Some(0.5),
            None,
            None,
            None,
            1,
        ),
        ("TEXT bogus=1, cpu_utilization", None, None, None, None, 2),
        (
            "TEXT cpu_utilization=abc, mem_utilization=0.5",
            None,
            Some(0.5),
            None,
            None,
            1,
        ),
        (
            "TEXT , ,cpu_utilization = 2.5 ,",
            Some(2.5),
            None,
            None,
            None,
            0,
        ),
        (
            r#"JSON {"cpuUtilization": "NaN", "rpsFractional": -1}"#,
            None,
            None,
            None,
            None,
            2,
        ),
        (
            r#"JSON {"cpuUtilization": 0.5, "eps": "Infinity"}"#,
            Some(0.5),
            None,
            None,
            None,
            1,
        ),
    ];
    for &(h, cpu, mem, rps, eps, rejected) in table {
        let r = LoadReport::parse(h).unwrap();
        assert_eq!(
            (
                r.cpu_utilization(),
                r.mem_utilization(),
                r.rps_fractional(),
                r.eps(),
                r.rejected()
            ),
            (cpu, mem, rps, eps, rejected),
            "{h}"
        );
    }
}

#[test]
fn values_that_are_no_report_are_errors() {
    for h in [
        "",
        "cpu_utilization=0.3",
        "text cpu_utilization=0.3",
        "XML <a/>",
    ] {
        assert_eq!(
            LoadReport::parse(h),
            Err(ParseError::UnknownFormat),
            "{h:?}"
        );
    }
    for h in [
        "JSON ",
        "JSON [1]",
        "JSON {\"cpuUtilization\": 0.3",
        "JSON {} trailing",
    ] {
        assert_eq!(LoadReport::parse(h), Err(ParseError::Json), "{h:?}");
    }
}

#[test]
fn named_metrics_are_bounded() {
    let many: Vec<String> = (0..MAX_NAMED_METRICS + 5)
        .map(|i| format!("named_metrics.m{i}={i}"))
        .collect();
    let r = LoadReport::parse(&format!("TEXT {}", many.join(","))).unwrap();
    assert_eq!(r.named_metrics().len(), MAX_NAMED_METRICS);
    assert_eq!(r.rejected(), 5);
}

/// A TEXT entry: a known key, a named metric or noise, and a value that
/// may be in range, out of range, non-finite or not a number.
fn entry() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("cpu_utilization".to_string()),
        Just("mem_utilization".to_string()),
        Just("application_utilization".to_string()),
        Just("rps_fractional".to_string()),
        Just("eps".to_string()),
        "named_metrics\\.[a-z]{1,8}",
        "[a-z_.]{0,12}",
    ];
    let value = prop_oneof![
        (-10.0f64..10.0).prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        // Printable noise without the entry separator.
        "[ -+\\--~]{0,6}",
    ];
    (key, prop_oneof![Just('='), Just(':')], value).prop_map(|(k, s, v)| format!("{k}{s}{v}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(s in any::<String>()) {
        let _ = LoadReport::parse(&s);
        let _ = LoadReport::parse(&format!("TEXT {s}"));
        let _ = LoadReport::parse(&format!("JSON {s}"));
        let _ = LoadReport::parse(&format!("BIN {s}"));
    }

    #[test]
    fn arbitrary_json_like_text_never_panics(s in "[{}\\[\\]\":,0-9a-zA-Z.eE+\\- \\\\]{0,64}") {
        let _ = LoadReport::parse(&format!("JSON {s}"));
    }

    /// Every value kept is in its range; every entry is kept or counted.
    #[test]
    fn kept_values_are_in_range_and_the_rest_counted(entries in prop::collection::vec(entry(), 0..12)) {
        let r = LoadReport::parse(&format!("TEXT {}", entries.join(", "))).unwrap();
        for v in [r.cpu_utilization(), r.application_utilization(), r.rps_fractional(), r.eps()]
            .into_iter()
            .flatten()
        {
            prop_assert!(v.is_finite() && v >= 0.0);
        }
        if let Some(m) = r.mem_utilization() {
            prop_assert!((0.0..=1.0).contains(&m));
        }
        let kept = [r.cpu_utilization(), r.mem_utilization(), r.application_utilization(),
            r.rps_fractional(), r.eps()].iter().filter(|v| v.is_some()).count()
            + r.named_metrics().len();
        prop_assert_eq!(kept + r.rejected() as usize, entries.len());
    }

    /// A report of in-range values always reads back exactly.
    #[test]
    fn in_range_values_read_back_exactly(cpu in 0.0f64..4.0, mem in 0.0f64..=1.0, rps in 0.0f64..1e6, eps in 0.0f64..1e3) {
        let r = LoadReport::parse(&format!(
            "TEXT cpu_utilization={cpu}, mem_utilization={mem}, rps_fractional={rps}, eps={eps}"
        )).unwrap();
        prop_assert_eq!(r.cpu_utilization(), Some(cpu));
        prop_assert_eq!(r.mem_utilization(), Some(mem));
        prop_assert_eq!(r.rps_fractional(), Some(rps));
        prop_assert_eq!(r.eps(), Some(eps));
        prop_assert_eq!(r.rejected(), 0);
    }
}

// ------------------------------------------------- A58 through a balancer

type Svc = tower::util::BoxCloneSyncService<(), usize, Infallible>;

fn endpoint(i: usize) -> Svc {
    tower::util::BoxCloneSyncService::new(service_fn(move |()| async move { Ok(i) }))
}

fn orca_lb(n: usize, picker: OrcaRoundRobin) -> Balance<usize, Svc, OrcaRoundRobin> {
    let mut b = Balance::builder().picker(picker);
    for i in 0..n {
        b = b.endpoint(i, endpoint(i));
    }
    b.build().unwrap()
}

fn text(u: f64, rps: f64, eps: f64) -> LoadReport {
    LoadReport::parse(&format!(
        "TEXT cpu_utilization={u}, rps_fractional={rps}, eps={eps}"
    ))
    .unwrap()
}

/// Shares of `n` calls per endpoint.
async fn shares<P>(lb: &mut Balance<usize, Svc, P>, endpoints: usize, n: usize) -> Vec<f64>
where
    P: tower_lb::pick::Picker + tower_lb::pick::Pick<()>,
{
    let mut counts = vec![0usize; endpoints];
    for _ in 0..n {
        let i = lb.ready().await.unwrap().call(()).await.unwrap();
        counts[i] += 1;
    }
    counts.iter().map(|&c| c as f64 / n as f64).collect()
}

fn close(got: &[f64], want: &[f64], tol: f64) -> bool {
    got.iter().zip(want).all(|(g, w)| (g - w).abs() <= tol)
}

/// A58: weight = rps / (utilization + eps/rps × penalty); endpoints
/// without a weight get the mean; weights within 10× of their mean.
#[tokio::test(start_paused = true)]
async fn a58_weights_as_a_table() {
    // (reports per endpoint: (utilization, rps, eps); penalty; shares)
    #[allow(clippy::type_complexity)]
    let table: &[(&[Option<(f64, f64, f64)>], f64, &[f64])] = &[
        // 200 : 100 : 50
        (
            &[
                Some((0.5, 100.0, 0.0)),
                Some((1.0, 100.0, 0.0)),
                Some((2.0, 100.0, 0.0)),
            ],
            1.0,
            &[4.0 / 7.0, 2.0 / 7.0, 1.0 / 7.0],
        ),
        // Errors: 100 / (0.5 + 50/100) = 100 against 200.
        (
            &[Some((0.5, 100.0, 50.0)), Some((0.5, 100.0, 0.0))],
            1.0,
            &[1.0 / 3.0, 2.0 / 3.0],
        ),
        // Penalty 0: errors are ignored.
        (
            &[Some((0.5, 100.0, 50.0)), Some((0.5, 100.0, 0.0))],
            0.0,
            &[0.5, 0.5],
        ),
        // Penalty 3: 100 / (0.5 + 1.5) = 50 against 200.
        (
            &[Some((0.5, 100.0, 50.0)), Some((0.5, 100.0, 0.0))],
            3.0,
            &[0.2, 0.8],
        ),
        // No report: the mean of 300 and 100 (200).
        (
            &[Some((0.5, 150.0, 0.0)), Some((0.5, 50.0, 0.0)), None],
            1.0,
            &[0.5, 1.0 / 6.0, 1.0 / 3.0],
        ),
        // One weight only: round robin.
        (&[Some((0.1, 100.0, 0.0)), None, None], 1.0, &[1.0 / 3.0; 3]),
        // Utilization 0 or rps 0 cannot weigh: the mean (here 100, 1000 → 550).
        (
            &[
                Some((1.0, 100.0, 0.0)),
                Some((0.1, 100.0, 0.0)),
                Some((0.0, 100.0, 0.0)),
            ],
            1.0,
            &[100.0 / 1650.0, 1000.0 / 1650.0, 550.0 / 1650.0],
        ),
    ];
    for (row, &(reports, penalty, want)) in table.iter().enumerate() {
        let n = reports.len();
        let picker = OrcaRoundRobin::new()
            .blackout_period(Duration::ZERO)
            .error_penalty(penalty);
        let mut lb = orca_lb(n, picker);
        for (i, r) in reports.iter().enumerate() {
            if let Some((u, rps, eps)) = *r {
                assert!(lb.handle().report_load(&i, &text(u, rps, eps)));
            }
        }
        let got = shares(&mut lb, n, 7000).await;
        assert!(close(&got, want, 0.01), "row {row}: {got:?} want {want:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn weights_are_kept_within_ten_times_their_mean() {
    // Weights 10000 and 1: the mean is ~5000, so the small one is raised to 500.
    let mut lb = orca_lb(2, OrcaRoundRobin::new().blackout_period(Duration::ZERO));
    lb.handle().report_load(&0, &text(0.01, 100.0, 0.0));
    lb.handle().report_load(&1, &text(1.0, 1.0, 0.0));
    let got = shares(&mut lb, 2, 10_500).await;
    let mean = (10_000.0 + 1.0) / 2.0;
    let small = mean / 10.0;
    let want = [10_000.0 / (10_000.0 + small), small / (10_000.0 + small)];
    assert!(close(&got, &want, 0.01), "{got:?} {want:?}");
}

#[tokio::test(start_paused = true)]
async fn blackout_then_weights_then_expiry_then_a_new_blackout() {
    let picker = OrcaRoundRobin::new()
        .blackout_period(Duration::from_secs(10))
        .weight_update_period(Duration::from_secs(1));
    let mut b = Balance::builder()
        .picker(picker)
        .load_report_expiry(Duration::from_secs(30));
    for i in 0..2 {
        b = b.endpoint(i, endpoint(i));
    }
    let mut lb = b.build().unwrap();
    let report = |lb: &Balance<usize, Svc, OrcaRoundRobin>| {
        lb.handle().report_load(&0, &text(0.25, 100.0, 0.0)); // 400
        lb.handle().report_load(&1, &text(1.0, 100.0, 0.0)); // 100
    };
    let weighted = [0.8, 0.2];
    let even = [0.5, 0.5];
    // t = 0..9 s: reports every second, still in the blackout.
    for _ in 0..9 {
        report(&lb);
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    let got = shares(&mut lb, 2, 1000).await;
    assert!(close(&got, &even, 0.01), "blackout: {got:?}");
    // t = 11 s: the stream has lasted 10 s.
    report(&lb);
    tokio::time::advance(Duration::from_secs(2)).await;
    report(&lb);
    let got = shares(&mut lb, 2, 1000).await;
    assert!(close(&got, &weighted, 0.01), "weighted: {got:?}");
    // No reports for 31 s: expired, round robin again.
    tokio::time::advance(Duration::from_secs(31)).await;
    let got = shares(&mut lb, 2, 1000).await;
    assert!(close(&got, &even, 0.01), "expired: {got:?}");
    // A new stream waits out a new blackout.
    report(&lb);
    tokio::time::advance(Duration::from_secs(5)).await;
    report(&lb);
    let got = shares(&mut lb, 2, 1000).await;
    assert!(close(&got, &even, 0.01), "second blackout: {got:?}");
    tokio::time::advance(Duration::from_secs(6)).await;
    report(&lb);
    let got = shares(&mut lb, 2, 1000).await;
    assert!(close(&got, &weighted, 0.01), "weighted again: {got:?}");
}

#[tokio::test(start_paused = true)]
async fn the_model_trusts_a_report_for_the_expiry_only() {
    let mut b = Balance::builder().load_report_expiry(Duration::from_secs(5));
    b = b.endpoint(0usize, endpoint(0));
    let lb = b.build().unwrap();
    let (_, state) = lb.handle().endpoints().remove(0);
    assert!(state.reported_load(tokio::time::Instant::now()).is_none());
    state.report_load(&text(0.7, 10.0, 1.0));
    tokio::time::advance(Duration::from_secs(4)).await;
    let r = state.reported_load(tokio::time::Instant::now()).unwrap();
    assert_eq!(
        (r.cpu_utilization, r.rps_fractional, r.eps),
        (Some(0.7), Some(10.0), Some(1.0))
    );
    assert_eq!(r.age, Duration::from_secs(4));
    assert_eq!(r.utilization(), Some(0.7));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(state.reported_load(tokio::time::Instant::now()).is_none());
    assert_eq!(state.load_reports(), 1);
}

// -------------------------------------------- the classifier reads reports

/// The HTTP classifier feeds a response's report to the endpoint that sent
/// it, counts a header that is no report, and reads nothing when off.
#[tokio::test(start_paused = true)]
async fn the_http_classifier_feeds_the_endpoint_that_answered() {
    let svc = service_fn(|h: &'static str| async move {
        let mut res = http::Response::new(());
        if !h.is_empty() {
            res.headers_mut()
                .insert(tower_lb::orca::HEADER, http::HeaderValue::from_static(h));
        }
        Ok::<_, std::io::Error>(res)
    });
    for (on, header, want_util, malformed) in [
        (
            true,
            "TEXT cpu_utilization=0.42, rps_fractional=10",
            Some(0.42),
            0,
        ),
        (
            true,
            r#"JSON {"applicationUtilization": 0.9, "cpuUtilization": 0.1}"#,
            Some(0.9),
            0,
        ),
        (true, "", None, 0),
        (true, "garbage", None, 1),
        (false, "TEXT cpu_utilization=0.42", None, 0),
    ] {
        let lb = Balance::builder()
            .classify(tower_lb::http::Classifier::new().load_reports(on))
            .endpoint(0usize, svc)
            .build()
            .unwrap();
        let res = lb.clone().oneshot(header).await.unwrap();
        drop(res);
        let (_, state) = lb.handle().endpoints().remove(0);
        let got = state
            .reported_load(tokio::time::Instant::now())
            .and_then(|r| r.utilization());
        assert_eq!(got, want_util, "{header}");
        assert_eq!(state.load_reports_malformed(), malformed, "{header}");
    }
}

// ------------------------------------------- PeakEwma's utilization term

/// Two endpoints with the same latency; one reports it is 3× over its
/// capacity. With the utilization term it loses its share; without, not.
#[tokio::test(start_paused = true)]
async fn peak_ewma_with_utilization_avoids_the_busy_reporter() {
    let slow = |i: usize| {
        tower::util::BoxCloneSyncService::new(service_fn(move |()| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, Infallible>(i)
        }))
    };
    for (on, busy_share_below) in [(true, 0.2), (false, 1.0)] {
        let mut lb = Balance::builder()
            .picker(PeakEwma::default().utilization(on))
            .endpoint(0usize, slow(0))
            .endpoint(1usize, slow(1))
            .build()
            .unwrap();
        // Both serve once, so both have a floor latency (the one not
        // picked first is tried once its default RTT has faded).
        let mut served = [false; 2];
        for _ in 0..1_000 {
            served[lb.ready().await.unwrap().call(()).await.unwrap()] = true;
            if served == [true; 2] {
                break;
            }
        }
        assert_eq!(served, [true; 2]);
        let mut counts = [0usize; 2];
        for _ in 0..400 {
            lb.handle()
                .report_load(&0, &LoadReport::new().with_application_utilization(3.0));
            let i = lb.ready().await.unwrap().call(()).await.unwrap();
            counts[i] += 1;
        }
        let busy = counts[0] as f64 / 400.0;
        assert!(busy < busy_share_below, "utilization {on}: {counts:?}");
        if !on {
            assert!(
                busy > 0.1,
                "without the term the reports change nothing: {counts:?}"
            );
        }
    }
}
