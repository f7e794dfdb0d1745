//! The lab against the user's own replicas (issue 38, item 6): hyper
//! servers started here on 127.0.0.1 (not the lab's replicas) stand in for
//! them. A run reaches every server and the servers count what the lab
//! counts; a dead replica, or one that answers an error, is refused before
//! any traffic; a `[target]` file sends its request as written; flags that
//! make no sense against a target, bad URLs and loads past the caps are
//! refused with their name.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use tower_lb_lab as lab;

use lab::external::{TargetError, Why, check};
use lab::scenario::target::TargetSpec;

/// One request as a server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    uri: String,
    token: Option<String>,
    body: String,
}

/// What one test server saw.
#[derive(Default)]
struct Log {
    count: AtomicU64,
    seen: Mutex<Vec<Seen>>,
}

/// Test servers on 127.0.0.1, each answering every request with `status`,
/// on a thread of their own (the lab starts its own runtimes) until
/// dropped.
struct Servers {
    addrs: Vec<SocketAddr>,
    logs: Vec<Arc<Log>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Servers {
    fn start(n: usize, status: u16) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let mut started = Vec::new();
                for _ in 0..n {
                    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                    let log = Arc::new(Log::default());
                    started.push((l.local_addr().expect("addr"), log.clone()));
                    tokio::spawn(serve(l, log, status));
                }
                tx.send(started).expect("the test waits");
                let _ = stopped.await;
            });
        });
        let started = rx.recv().expect("the servers start");
        Self {
            addrs: started.iter().map(|(a, _)| *a).collect(),
            logs: started.into_iter().map(|(_, l)| l).collect(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn urls(&self) -> Vec<String> {
        self.addrs.iter().map(|a| format!("http://{a}")).collect()
    }

    fn counts(&self) -> Vec<u64> {
        self.logs
            .iter()
            .map(|l| l.count.load(Ordering::SeqCst))
            .collect()
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(l: TcpListener, log: Arc<Log>, status: u16) {
    loop {
        let Ok((stream, _)) = l.accept().await else {
            continue;
        };
        let log = log.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let log = log.clone();
                async move {
                    let method = req.method().to_string();
                    let uri = req.uri().to_string();
                    let token = req
                        .headers()
                        .get("x-token")
                        .and_then(|v| v.to_str().ok())
                        .map(String::from);
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                        .unwrap_or_default();
                    log.count.fetch_add(1, Ordering::SeqCst);
                    log.seen.lock().unwrap().push(Seen {
                        method,
                        uri,
                        token,
                        body,
                    });
                    let mut res = hyper::Response::new(Full::new(Bytes::from_static(b"ok")));
                    *res.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                    Ok::<_, Infallible>(res)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// A port nothing listens on (bound, then closed).
fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Runs the lab with `args` (and `--quiet --report none`).
fn lab_run(args: &[&str]) -> Result<Vec<lab::report::Report>, lab::error::LabError> {
    let mut a = strings(args);
    a.extend(strings(&["--quiet", "--report", "none"]));
    lab::cli(&a)
}

#[test]
fn two_pickers_reach_every_server_and_the_servers_count_what_the_lab_counts() {
    let servers = Servers::start(3, 200);
    let urls = servers.urls().join(",");
    // Open loop: every arrival of the window is sent and answered (the
    // drain waits for it), so the servers' counts are exact.
    let reports = lab_run(&[
        "--target",
        &urls,
        "--pickers",
        "peak_ewma,round_robin",
        "--rate",
        "150",
        "--duration",
        "1s",
    ])
    .expect("the run succeeds");
    let [report] = reports.as_slice() else {
        panic!("one report: {}", reports.len());
    };
    let names: Vec<String> = servers.addrs.iter().map(|a| a.to_string()).collect();
    let backends: Vec<&str> = report.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(backends, names, "the backends are named host:port");
    assert_eq!(report.runs.len(), 2, "{}", report.table());
    let mut sent = 0;
    for r in &report.runs {
        assert_eq!(r.share.len(), 3, "{}", report.table());
        assert!(
            r.picks.iter().all(|&p| p > 0),
            "{}: every server takes a share: {:?}",
            r.picker,
            r.picks
        );
        assert_eq!(r.errors, 0, "{}", report.table());
        assert!(r.requests > 0);
        assert!(r.utilization.is_empty(), "utilization is not measured");
        sent += r.requests;
    }
    // One check per server, then the two rows' requests.
    let counted: u64 = servers.counts().iter().map(|c| c - 1).sum();
    assert_eq!(counted, sent, "{:?}\n{}", servers.counts(), report.table());
    let table = report.table();
    assert!(
        table.contains(&format!("backends: {}", names.join(", "))),
        "{table}"
    );
}

#[test]
fn closed_loop_users_and_a_rival_reach_every_server() {
    let servers = Servers::start(3, 200);
    let urls = servers.urls().join(",");
    let reports = lab_run(&[
        "--target",
        &urls,
        "--pickers",
        "least_in_flight,tower_p2c",
        "--users",
        "3",
        "--duration",
        "1s",
    ])
    .expect("the run succeeds");
    let report = &reports[0];
    assert_eq!(report.users, 3);
    assert_eq!(report.runs.len(), 2, "{}", report.table());
    let mut done = 0;
    for r in &report.runs {
        assert!(
            r.picks.iter().all(|&p| p > 0),
            "{}: {:?}",
            r.picker,
            r.picks
        );
        assert_eq!(r.errors, 0);
        done += r.requests;
    }
    let rival = &report.runs[1];
    assert!(rival.rival.is_some(), "tower_p2c runs as a rival");
    assert!(
        rival.in_flight_end.is_empty(),
        "a rival's in-flight is unknown"
    );
    // A closed loop's last requests may be cut off at the row's end: the
    // servers saw at least what the lab recorded.
    let counted: u64 = servers.counts().iter().map(|c| c - 1).sum();
    assert!(counted >= done, "{counted} < {done}");
    // The users share at most MAX_RATE sends a second: one slot per
    // millisecond, so a second's row sends at most 1,001 per picker.
    let cap = lab::external::MAX_RATE as u64 + 1;
    assert!(counted <= 2 * cap, "{counted} sent in two 1 s rows");
}

#[tokio::test]
async fn a_dead_replica_fails_the_check_by_name() {
    let servers = Servers::start(2, 200);
    let dead = dead_url();
    let mut urls = servers.urls();
    urls.insert(1, dead.clone());
    let spec = TargetSpec {
        urls,
        ..TargetSpec::default()
    };
    let err = check::reach(&spec, check::CHECK_TIMEOUT)
        .await
        .expect_err("refused");
    let TargetError::Unreachable { failed, of, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*of, 3);
    assert_eq!(failed.len(), 1, "{err}");
    assert_eq!(failed[0].url, dead);
    assert!(matches!(failed[0].why, Why::Connect(_)), "{err:?}");
    assert!(err.to_string().contains(&dead), "{err}");
    // A URL that cannot be sent to is named before anything is sent.
    let spec = TargetSpec {
        urls: vec![servers.urls()[0].clone(), "https://127.0.0.1:1".into()],
        ..TargetSpec::default()
    };
    let err = check::reach(&spec, check::CHECK_TIMEOUT)
        .await
        .expect_err("refused");
    let TargetError::BadUrl { url, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(url, "https://127.0.0.1:1");
    assert_eq!(servers.counts(), [1, 1], "one check each, the first time");
}

#[test]
fn a_dead_replica_refuses_the_run_before_any_traffic() {
    let servers = Servers::start(2, 200);
    let dead = dead_url();
    let urls = format!("{},{dead}", servers.urls().join(","));
    let err = lab_run(&["--target", &urls, "--duration", "1s"]).expect_err("refused");
    assert_eq!(err.exit_code(), 2);
    assert!(err.message.contains(&dead), "{err}");
    assert!(err.message.contains("nothing was sent"), "{err}");
    assert_eq!(servers.counts(), [1, 1], "only the checks reached them");
    // The binary says so too, with exit status 2.
    let out = Command::new(env!("CARGO_BIN_EXE_tower-lb-lab"))
        .args(["--target", &dead, "--quiet", "--report", "none"])
        .output()
        .expect("the lab runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&dead), "{stderr}");
}

#[test]
fn a_replica_answering_errors_refuses_the_run() {
    let servers = Servers::start(1, 503);
    let url = servers.urls().join(",");
    let err = lab_run(&["--target", &url, "--path", "/health"]).expect_err("refused");
    assert_eq!(err.exit_code(), 2);
    assert!(err.message.contains("answered 503"), "{err}");
    assert!(err.message.contains("GET /health"), "{err}");
    assert_eq!(servers.counts(), [1]);
}

#[test]
fn a_target_file_sends_its_request_as_written() {
    let servers = Servers::start(2, 200);
    let urls: Vec<String> = servers.urls().iter().map(|u| format!("{u:?}")).collect();
    let text = format!(
        r#"
name = "mine"
duration = "1s"
pickers = ["round_robin"]

[load]
rate = 40

[target]
urls = [{}]
method = "POST"
path = "/orders?dry_run=1"
headers = {{ x-token = "abc" }}
body = "{{\"id\": 7}}"
"#,
        urls.join(", ")
    );
    let dir = std::env::temp_dir().join(format!("tower-lb-target-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mine.toml");
    std::fs::write(&file, text).unwrap();
    let reports = lab_run(&["--scenario", file.to_str().unwrap()]).expect("the run succeeds");
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(reports[0].scenario, "mine");
    for log in &servers.logs {
        let seen = log.seen.lock().unwrap();
        assert!(seen.len() > 1, "the check and the traffic: {seen:?}");
        for s in seen.iter() {
            assert_eq!(s.method, "POST");
            assert_eq!(s.uri, "/orders?dry_run=1");
            assert_eq!(s.token.as_deref(), Some("abc"));
            assert_eq!(s.body, r#"{"id": 7}"#);
        }
    }
}

#[test]
fn flags_that_make_no_sense_against_a_target_are_refused_first() {
    // The URL is dead: each refusal comes before the check would fail.
    let dead = dead_url();
    let cases: &[(&[&str], &str)] = &[
        (&["--sim"], "--sim"),
        (&["--peers", "nginx"], "--peers"),
        (&["--find-capacity"], "--find-capacity"),
        (&["--utilization", "0.5"], "--utilization"),
        (&["--pickers", "prequal"], "prequal sends load probes"),
        (&["--users", "4", "--rate", "10"], "--users and --rate"),
        (
            &["--scenario", "steady-capacity"],
            "runs the lab's own backends",
        ),
        (&["--duration", "11m"], "at most 600s"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["--target", dead.as_str()];
        args.extend_from_slice(extra);
        let err = lab_run(&args).expect_err("refused");
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        assert!(err.message.contains(want), "{args:?}: {err}");
        assert!(!err.message.contains("nothing was sent"), "{args:?}: {err}");
    }
    let family = lab::cli(&strings(&["--family", "--target", &dead])).expect_err("refused");
    assert!(family.message.contains("\"--target\""), "{family}");
}

#[test]
fn bad_urls_caps_and_request_flags_without_a_target_are_refused() {
    let parse = |a: &[&str]| lab::args::parse(&strings(a)).map(|_| ());
    for (url, want) in [
        ("https://10.0.0.5:8443", "https is not supported"),
        ("10.0.0.5:8080", "no scheme"),
        ("http://10.0.0.5:8080/api", "--path"),
        ("ftp://10.0.0.5", "not http"),
        ("http://u:p@10.0.0.5:80", "header"),
        (",", "at least one URL"),
    ] {
        let err = parse(&["--target", url]).expect_err(url);
        assert_eq!(err.exit_code(), 2);
        assert!(err.message.starts_with("--target: "), "{url}: {err}");
        assert!(err.message.contains(want), "{url}: {err}");
    }
    for (args, want) in [
        (&["--rate", "1001"][..], "1000"),
        (&["--rate", "0"][..], "1000"),
        (&["--rate", "NaN"][..], "1000"),
        (&["--users", "101"][..], "1..=100"),
        (&["--users", "0"][..], "1..=100"),
        (&["--method", "TRACE"][..], "GET"),
        (&["--header", "no-colon"][..], "NAME: VALUE"),
    ] {
        let err = parse(args).expect_err(args[0]);
        assert!(err.message.starts_with(args[0]), "{args:?}: {err}");
        assert!(err.message.contains(want), "{args:?}: {err}");
    }
    assert!(parse(&["--rate", "1000/s"]).is_ok());
    // The request and load flags need a target.
    let err = lab_run(&["--sim", "--users", "4"]).expect_err("refused");
    assert!(err.message.starts_with("--users: only against"), "{err}");
    // The same caps hold in a file, and duplicate replicas are named.
    let sc = |load: &str, urls: &str| {
        let text = format!(
            "name = \"t\"\nduration = \"1s\"\npickers = [\"round_robin\"]\n[load]\n{load}\n[target]\nurls = [{urls}]\n"
        );
        lab::scenario::Scenario::parse(&text, "t.toml").map(|_| ())
    };
    let one = "\"http://127.0.0.1:9\"";
    assert!(sc("vus = 8", one).is_ok());
    let err = sc("rate = 5000", one).unwrap_err();
    assert!(err.message.contains("`load.rate`"), "{err}");
    let err = sc("vus = 500", one).unwrap_err();
    assert!(err.message.contains("`load.vus`"), "{err}");
    let err = sc("utilization = 0.5", one).unwrap_err();
    assert!(err.message.contains("`load.utilization`"), "{err}");
    let twice = "\"http://127.0.0.1:9\", \"http://127.0.0.1:9/\"";
    let err = sc("vus = 8", twice).unwrap_err();
    assert!(err.message.contains("the same replica"), "{err}");
    let with_backend = format!(
        "name = \"t\"\nduration = \"1s\"\npickers = [\"round_robin\"]\n[load]\nvus = 1\n[target]\nurls = [{one}]\n[[backend]]\nname = \"a\"\ndelay = \"1ms\"\n"
    );
    let err = lab::scenario::Scenario::parse(&with_backend, "t.toml").unwrap_err();
    assert!(err.message.contains("remove the [[backend]]"), "{err}");
}
