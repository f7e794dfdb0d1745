use super::*;
use http::HeaderValue;

fn res(status: u16, retry_after: Option<&str>) -> Response<()> {
    let mut r = Response::new(());
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    if let Some(v) = retry_after {
        r.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
    }
    r
}

fn classify<F: ErrorHook<std::io::Error>>(c: &Classifier<F>, r: &Response<()>, ms: u64) -> Outcome {
    Classify::<_, std::io::Error>::classify(c, Ok(r), Duration::from_millis(ms))
}

#[test]
fn status_codes() {
    let c = Classifier::new();
    for s in [502, 503, 504] {
        assert_eq!(
            classify(&c, &res(s, None), 1),
            Outcome::Failure(FailureKind::Gateway { retry_after: None }),
            "{s}"
        );
    }
    assert_eq!(
        classify(&c, &res(429, None), 1),
        Outcome::Failure(FailureKind::Overloaded { retry_after: None })
    );
    for s in [500, 501, 505, 599] {
        assert_eq!(
            classify(&c, &res(s, None), 1),
            Outcome::Failure(FailureKind::Error),
            "{s}"
        );
    }
    for s in [100, 200, 204, 301, 304, 400, 401, 404, 409, 499] {
        assert_eq!(classify(&c, &res(s, None), 1), Outcome::Success, "{s}");
    }
}

#[test]
fn retry_after_seconds_and_cap() {
    let c = Classifier::new();
    assert_eq!(
        classify(&c, &res(429, Some("7")), 1),
        Outcome::Failure(FailureKind::Overloaded {
            retry_after: Some(Duration::from_secs(7))
        })
    );
    assert_eq!(
        classify(&c, &res(503, Some("86400")), 1),
        Outcome::Failure(FailureKind::Gateway {
            retry_after: Some(MAX_RETRY_AFTER)
        })
    );
    assert_eq!(
        classify(&c, &res(503, Some("99999999999999999999999")), 1),
        Outcome::Failure(FailureKind::Gateway {
            retry_after: Some(MAX_RETRY_AFTER)
        })
    );
    let c = c.max_retry_after(Duration::from_secs(3)).unwrap();
    assert_eq!(
        classify(&c, &res(503, Some("10")), 1),
        Outcome::Failure(FailureKind::Gateway {
            retry_after: Some(Duration::from_secs(3))
        })
    );
    for bad in ["-1", "1.5", "soon", ""] {
        assert_eq!(
            classify(&c, &res(503, Some(bad)), 1),
            Outcome::Failure(FailureKind::Gateway { retry_after: None }),
            "{bad:?}"
        );
    }
}

#[test]
fn retry_after_http_date() {
    let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
    let max = MAX_RETRY_AFTER;
    let v = |s: &str| HeaderValue::from_str(s).unwrap();
    assert_eq!(
        parse_retry_after(&v("Wed, 21 Oct 2015 07:28:12 GMT"), now, max),
        Some(Duration::from_secs(12))
    );
    // The obsolete RFC 850 form.
    assert_eq!(
        parse_retry_after(&v("Wednesday, 21-Oct-15 07:28:05 GMT"), now, max),
        Some(Duration::from_secs(5))
    );
    // In the past: retry now.
    assert_eq!(
        parse_retry_after(&v("Wed, 21 Oct 2015 07:00:00 GMT"), now, max),
        Some(Duration::ZERO)
    );
    // Far future: capped.
    assert_eq!(
        parse_retry_after(&v("Thu, 22 Oct 2015 07:28:00 GMT"), now, max),
        Some(max)
    );
    // A real response dated a minute ahead of the wall clock.
    let ahead = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
    let c = Classifier::new();
    assert_eq!(
        classify(&c, &res(503, Some(&ahead)), 1),
        Outcome::Failure(FailureKind::Gateway {
            retry_after: Some(MAX_RETRY_AFTER)
        })
    );
}

#[test]
fn slow_threshold() {
    let c = Classifier::new()
        .slow_threshold(Duration::from_millis(100))
        .unwrap();
    assert_eq!(classify(&c, &res(200, None), 100), Outcome::Success);
    assert_eq!(
        classify(&c, &res(200, None), 101),
        Outcome::Failure(FailureKind::Slow)
    );
    assert_eq!(
        classify(&c, &res(404, None), 101),
        Outcome::Failure(FailureKind::Slow)
    );
    // A hard failure stays what it is, however slow.
    assert_eq!(
        classify(&c, &res(500, None), 101),
        Outcome::Failure(FailureKind::Error)
    );
}

#[test]
fn config_errors() {
    let e = Classifier::new()
        .slow_threshold(Duration::ZERO)
        .unwrap_err();
    assert_eq!(e.field(), "slow_threshold");
    let e = Classifier::new()
        .max_retry_after(Duration::from_secs(3601))
        .unwrap_err();
    assert_eq!(e.field(), "max_retry_after");
}

#[test]
fn error_hooks() {
    use std::io;
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    let timed_out = io::Error::from(io::ErrorKind::TimedOut);
    let other = io::Error::other("boom");
    let c = Classifier::new();
    let with =
        |e: &io::Error| Classify::<Response<()>, io::Error>::classify(&c, Err(e), Duration::ZERO);
    assert_eq!(with(&refused), Outcome::Failure(FailureKind::Connect));
    assert_eq!(with(&timed_out), Outcome::Failure(FailureKind::Timeout));
    assert_eq!(with(&other), Outcome::Failure(FailureKind::Error));
    // Through a wrapper's source chain.
    let wrapped = crate::error::Error::Inner(io::Error::from(io::ErrorKind::ConnectionReset));
    assert_eq!(crate::classify::error_kind(&wrapped), FailureKind::Connect);
    // A closure hook.
    let custom = c.on_error(|_: &io::Error| FailureKind::Timeout);
    assert_eq!(
        Classify::<Response<()>, io::Error>::classify(&custom, Err(&other), Duration::ZERO),
        Outcome::Failure(FailureKind::Timeout)
    );
}
