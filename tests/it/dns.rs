//! DNS discovery: a scripted resolver on tokio's paused clock, and the
//! system resolver once with `localhost`.
#![cfg(feature = "dns")]

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tower::service_fn;
use tower_lb::discover::Source;
use tower_lb::discover::dns::{self, Dns, Resolve, TokioResolver};
use tower_lb::http::{Origin, balance};
use tower_lb::{Balance, Handle, pick};

/// What the scripted resolver answers next.
#[derive(Clone)]
enum Answer {
    Addrs(Vec<SocketAddr>),
    Fail,
    Hang,
}

/// A resolver whose answer the test sets, counting calls.
#[derive(Clone)]
struct Scripted(Arc<Mutex<(Answer, usize)>>);

impl Scripted {
    fn new(answer: Answer) -> Self {
        Scripted(Arc::new(Mutex::new((answer, 0))))
    }

    fn set(&self, answer: Answer) {
        self.0.lock().unwrap().0 = answer;
    }

    fn calls(&self) -> usize {
        self.0.lock().unwrap().1
    }
}

impl Resolve for Scripted {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        assert_eq!((host, port), ("backend.internal", 8080));
        let answer = {
            let mut state = self.0.lock().unwrap();
            state.1 += 1;
            state.0.clone()
        };
        match answer {
            Answer::Addrs(addrs) => Ok(addrs),
            Answer::Fail => Err(io::Error::other("SERVFAIL")),
            Answer::Hang => std::future::pending().await,
        }
    }
}

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 8080))
}

type Svc = tower::util::ServiceFn<fn(u32) -> std::future::Ready<Result<u32, Infallible>>>;

fn svc() -> Svc {
    service_fn(|x| std::future::ready(Ok(x)))
}

fn lb() -> Balance<SocketAddr, Svc> {
    Balance::builder().build().unwrap()
}

/// The balancer's keys, sorted.
fn keys<S, P: pick::Picker, C>(handle: &Handle<SocketAddr, S, P, C>) -> Vec<SocketAddr> {
    let mut keys: Vec<_> = handle.endpoints().into_iter().map(|(k, _)| k).collect();
    keys.sort();
    keys
}

/// Lets the spawned driver run until it waits on the clock again.
async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

const INTERVAL: Duration = Duration::from_secs(5);

fn scripted_dns(resolver: Scripted) -> Dns<Scripted> {
    Dns::builder("backend.internal", 8080)
        .interval(INTERVAL)
        .timeout(Duration::from_secs(1))
        .resolver(resolver)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_changed_answer_inserts_and_removes_endpoints() {
    let resolver = Scripted::new(Answer::Addrs(vec![addr(2), addr(1), addr(2)]));
    let lb = lb();
    let handle = lb.handle();
    let dns = scripted_dns(resolver.clone());
    let stats = dns.stats();
    let task = dns.spawn(lb.handle(), |a| Some((a, svc())));

    settle().await;
    // Inserted in the resolver's order, repeats dropped.
    let in_order: Vec<SocketAddr> = handle.endpoints().into_iter().map(|(k, _)| k).collect();
    assert_eq!(in_order, [addr(2), addr(1)]);
    assert_eq!((stats.resolutions(), stats.endpoints()), (1, 2));
    let id_of = |a: SocketAddr| {
        let eps = handle.endpoints();
        eps.iter().find(|(k, _)| *k == a).map(|(_, s)| s.id())
    };
    let kept_id = id_of(addr(2));

    resolver.set(Answer::Addrs(vec![addr(2), addr(3), addr(3)]));
    tokio::time::advance(INTERVAL - Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(resolver.calls(), 1, "resolved again before the interval");
    tokio::time::advance(Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(resolver.calls(), 2);
    assert_eq!(keys(&handle), [addr(2), addr(3)]);
    assert_eq!(
        id_of(addr(2)),
        kept_id,
        "an unchanged address keeps its state"
    );
    assert_eq!((stats.resolutions(), stats.endpoints()), (2, 2));
    assert_eq!(stats.failures(), 0);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn failures_keep_the_last_good_set_and_are_counted() {
    let resolver = Scripted::new(Answer::Addrs(vec![addr(1), addr(2)]));
    let lb = lb();
    let handle = lb.handle();
    let dns = scripted_dns(resolver.clone());
    let stats = dns.stats();
    let task = dns.spawn(lb.handle(), |a| Some((a, svc())));
    settle().await;
    assert_eq!(keys(&handle), [addr(1), addr(2)]);

    // Rounds at t = 5 s (an error), 10 s (an empty answer) and 15 s (no
    // answer: the 1 s timeout fails it at 16 s).
    let unchanged = |failures: u64| {
        assert_eq!(stats.failures(), failures);
        assert_eq!(stats.resolutions(), 1);
        assert_eq!(stats.endpoints(), 2);
        assert_eq!(keys(&handle), [addr(1), addr(2)]);
    };
    resolver.set(Answer::Fail);
    tokio::time::advance(INTERVAL).await;
    settle().await;
    unchanged(1);
    resolver.set(Answer::Addrs(vec![]));
    tokio::time::advance(INTERVAL).await;
    settle().await;
    unchanged(2);
    resolver.set(Answer::Hang);
    tokio::time::advance(INTERVAL).await;
    settle().await;
    unchanged(2);
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    unchanged(3);
    assert_eq!(resolver.calls(), 4);

    // Recovery applies the next good answer.
    resolver.set(Answer::Addrs(vec![addr(3)]));
    tokio::time::advance(INTERVAL - Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(keys(&handle), [addr(3)]);
    assert_eq!(stats.resolutions(), 2);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn the_driver_stops_when_the_balancer_is_gone() {
    let resolver = Scripted::new(Answer::Addrs(vec![addr(1)]));
    let lb = lb();
    let dns = scripted_dns(resolver.clone());
    let task = dns.spawn(lb.handle(), |a| Some((a, svc())));
    settle().await;
    assert_eq!(resolver.calls(), 1);
    drop(lb);
    tokio::time::advance(INTERVAL).await;
    settle().await;
    assert!(task.is_finished());
    assert_eq!(resolver.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn origin_endpoints_feed_an_http_balancer() {
    let resolver = Scripted::new(Answer::Addrs(vec![
        addr(1),
        "[fd00::1]:8080".parse().unwrap(),
    ]));
    let client =
        service_fn(|_: http::Request<()>| async { Ok::<_, Infallible>(http::Response::new(())) });
    let lb = balance(client, Vec::<&str>::new())
        .unwrap()
        .build()
        .unwrap();
    let make = dns::origin_endpoints(client, "http").unwrap();
    let task = scripted_dns(resolver).spawn(lb.handle(), make);
    settle().await;
    let mut keys: Vec<String> = lb
        .handle()
        .endpoints()
        .iter()
        .map(|(k, _)| k.to_string())
        .collect();
    keys.sort();
    assert_eq!(keys, ["http://10.0.0.1:8080", "http://[fd00::1]:8080"]);
    assert!(
        lb.handle()
            .endpoints()
            .iter()
            .all(|(k, _)| *k == Origin::parse(k.as_str()).unwrap())
    );
    task.abort();
    assert_eq!(
        dns::origin_endpoints(client, "ftp")
            .err()
            .map(|e| e.field()),
        Some("authority")
    );
}

#[test]
fn bad_configuration_is_a_config_error() {
    let field = |b: dns::Builder| b.build().err().map(|e| e.field());
    assert_eq!(field(Dns::builder("", 80)), Some("dns.host"));
    assert_eq!(field(Dns::builder("h", 0)), Some("dns.port"));
    assert_eq!(
        field(Dns::builder("h", 80).interval(Duration::ZERO)),
        Some("dns.interval")
    );
    assert_eq!(
        field(Dns::builder("h", 80).timeout(Duration::ZERO)),
        Some("dns.timeout")
    );
    assert!(Dns::builder("h", 80).build().is_ok());
}

#[tokio::test]
async fn localhost_resolves_to_loopback_endpoints() {
    let direct = TokioResolver.resolve("localhost", 8080).await.unwrap();
    assert!(!direct.is_empty());
    assert!(
        direct
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8080),
        "{direct:?}"
    );

    let lb = lb();
    let dns = Dns::builder("localhost", 8080).build().unwrap();
    let stats = dns.stats();
    let task = dns.spawn(lb.handle(), |a| Some((a, svc())));
    // Real resolution on a blocking thread: wait for the first round.
    tokio::time::timeout(Duration::from_secs(30), async {
        while stats.resolutions() + stats.failures() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    task.abort();
    assert_eq!(stats.failures(), 0);
    let keys = keys(&lb.handle());
    assert!(!keys.is_empty());
    assert!(
        keys.iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8080),
        "{keys:?}"
    );
}
