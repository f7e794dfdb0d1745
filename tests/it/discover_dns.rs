//! DNS discovery beyond A/AAAA on an interval: TTLs with floor and ceiling
//! (recorded answers on tokio's paused clock), SRV records, error events,
//! and hickory-resolver against a local DNS server speaking the protocol.
#![cfg(all(feature = "dns", feature = "dns-hickory"))]

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_resolver::proto::op::{Message, MessageType, OpCode};
use hickory_resolver::proto::rr::rdata::{A, SRV};
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};
use tower::{ServiceExt, service_fn};
use tower_lb::discover::Source;
use tower_lb::discover::dns::{
    self, Dns, HickoryResolver, Resolve, Resolved, SRV_TARGET_LABEL, SRV_ZERO_WEIGHT, SrvRecord,
    SrvResolved,
};
use tower_lb::{Balance, Handle, pick};

use crate::support::Capture;

type Svc = tower::util::ServiceFn<fn(u32) -> std::future::Ready<Result<u32, Infallible>>>;

fn svc() -> Svc {
    service_fn(|x| std::future::ready(Ok(x)))
}

/// Recorded answers: host name → (addresses, TTL) or an error; SRV records.
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<RecordedInner>>);

#[derive(Default)]
struct RecordedInner {
    ttl: Option<Duration>,
    fail: bool,
    srv: Vec<SrvRecord>,
    calls: usize,
}

fn ip(last: u8) -> std::net::IpAddr {
    Ipv4Addr::new(10, 0, 0, last).into()
}

impl Resolve for Recorded {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(self.lookup(host, port).await?.addrs)
    }

    async fn lookup(&self, host: &str, port: u16) -> io::Result<Resolved> {
        let mut s = self.0.lock().unwrap();
        s.calls += 1;
        if s.fail || host == "broken.internal." {
            return Err(io::Error::other("SERVFAIL from 10.0.0.53"));
        }
        let last = match host {
            "a.internal." => 1,
            "b.internal." => 2,
            _ => 9,
        };
        Ok(Resolved {
            addrs: vec![SocketAddr::new(ip(last), port)],
            ttl: s.ttl,
        })
    }

    async fn lookup_srv(&self, name: &str) -> io::Result<SrvResolved> {
        assert_eq!(name, "_http._tcp.backend.internal");
        Ok(SrvResolved {
            records: self.0.lock().unwrap().srv.clone(),
            ttl: Some(Duration::from_secs(60)),
        })
    }
}

async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

fn lb() -> Balance<SocketAddr, Svc> {
    Balance::builder().build().unwrap()
}

/// Advances the paused clock by `d` and lets the driver run.
async fn advance(d: Duration) {
    tokio::time::advance(d).await;
    settle().await;
}

#[tokio::test(start_paused = true)]
async fn the_ttl_decides_the_next_resolution_within_floor_and_ceiling() {
    let recorded = Recorded::default();
    let calls = || recorded.0.lock().unwrap().calls;
    let set_ttl = |s: u64| recorded.0.lock().unwrap().ttl = Some(Duration::from_secs(s));
    set_ttl(12);
    let lb = lb();
    let dns = Dns::builder("a.internal.", 80)
        .resolver(recorded.clone())
        .build()
        .unwrap();
    let _driver = dns.spawn(lb.handle(), |a| Some((a, svc())));
    settle().await;
    assert_eq!(calls(), 1);
    // TTL 12 s: not at the 5 s interval, at 12 s.
    advance(Duration::from_secs(11)).await;
    assert_eq!(calls(), 1, "asked again before the TTL ran out");
    set_ttl(1);
    advance(Duration::from_secs(1)).await;
    assert_eq!(calls(), 2);
    // TTL 1 s is floored to the 5 s default.
    set_ttl(3600);
    advance(Duration::from_secs(4)).await;
    assert_eq!(calls(), 2);
    advance(Duration::from_secs(1)).await;
    assert_eq!(calls(), 3);
    // TTL 1 h is capped at the 30 s default.
    advance(Duration::from_secs(29)).await;
    assert_eq!(calls(), 3);
    advance(Duration::from_secs(1)).await;
    assert_eq!(calls(), 4);
}

#[tokio::test(start_paused = true)]
async fn ttls_are_ignored_when_not_respected() {
    let recorded = Recorded::default();
    recorded.0.lock().unwrap().ttl = Some(Duration::from_secs(60));
    let lb = lb();
    let dns = Dns::builder("a.internal.", 80)
        .respect_ttl(false)
        .interval(Duration::from_secs(7))
        .resolver(recorded.clone())
        .build()
        .unwrap();
    let _driver = dns.spawn(lb.handle(), |a| Some((a, svc())));
    settle().await;
    advance(Duration::from_secs(7)).await;
    assert_eq!(recorded.0.lock().unwrap().calls, 2);
}

fn rec(priority: u16, weight: u16, port: u16, target: &str) -> SrvRecord {
    SrvRecord {
        priority,
        weight,
        port,
        target: target.into(),
    }
}

#[tokio::test(start_paused = true)]
async fn srv_records_give_ports_weights_and_priorities() {
    let recorded = Recorded::default();
    recorded.0.lock().unwrap().srv = vec![
        rec(20, 0, 9000, "b.internal."),
        rec(10, 5, 8080, "a.internal."),
        rec(10, 1, 8081, "broken.internal."),
        rec(10, 1, 0, "a.internal."),
    ];
    let lb = lb();
    let h: Handle<SocketAddr, Svc, pick::PeakEwma, _> = lb.handle();
    let dns = Dns::srv("_http._tcp.backend.internal")
        .resolver(recorded)
        .build()
        .unwrap();
    let stats = dns.stats();
    let _driver = dns.spawn(lb.handle(), |a| Some((a, svc())));
    settle().await;
    let eps = h.endpoints();
    let got: Vec<_> = eps
        .iter()
        .map(|(k, s)| (*k, s.weight(), s.meta().priority()))
        .collect();
    // Priority 10 before 20 and ranked 0, 1; the broken target left out;
    // port 0 dropped; weight 0 made small.
    assert_eq!(
        got,
        [
            (SocketAddr::new(ip(1), 8080), 5.0, 0),
            (SocketAddr::new(ip(2), 9000), SRV_ZERO_WEIGHT, 1)
        ]
    );
    assert_eq!(eps[0].1.meta().labels()[SRV_TARGET_LABEL], "a.internal.");
    assert_eq!((stats.updates(), stats.errors()), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_failure_keeps_serving_and_emits_one_event() {
    let (capture, _guard) = Capture::install();
    let recorded = Recorded::default();
    let lb = lb();
    let dns = Dns::builder("a.internal.", 80)
        .resolver(recorded.clone())
        .build()
        .unwrap();
    let stats = dns.stats();
    let _driver = dns.spawn(lb.handle(), |a| Some((a, svc())));
    settle().await;
    recorded.0.lock().unwrap().fail = true;
    advance(dns::DEFAULT_INTERVAL).await;
    assert_eq!(
        lb.clone().oneshot(7).await.unwrap(),
        7,
        "the last good set serves"
    );
    assert_eq!(lb.handle().len(), 1);
    let events = capture.events("dns");
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].error.contains("SERVFAIL"), "{events:?}");
    assert_eq!(stats.errors(), 1);
    assert!(stats.last_error().unwrap().contains("SERVFAIL"));
}

#[test]
fn bad_ttl_bounds_are_config_errors() {
    let field = |b: dns::Builder| b.build().err().map(|e| e.field());
    assert_eq!(
        field(Dns::builder("h", 1).min_ttl(Duration::ZERO)),
        Some("dns.min_ttl")
    );
    assert_eq!(
        field(
            Dns::builder("h", 1)
                .min_ttl(Duration::from_secs(9))
                .max_ttl(Duration::from_secs(8))
        ),
        Some("dns.max_ttl")
    );
    assert_eq!(field(Dns::srv("")), Some("dns.srv"));
    assert!(Dns::srv("_http._tcp.x").build().is_ok());
}

/// A DNS server on 127.0.0.1 answering A for `a.test.` (TTL 42) and SRV
/// for `_http._tcp.test.`.
async fn dns_server() -> SocketAddr {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, peer)) = sock.recv_from(&mut buf).await {
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut res = Message::response(query.metadata.id, OpCode::Query);
            res.metadata.message_type = MessageType::Response;
            res.metadata.recursion_desired = query.metadata.recursion_desired;
            res.metadata.recursion_available = true;
            res.metadata.authoritative = true;
            for q in &query.queries {
                res.add_query(q.clone());
                let name = q.name().clone();
                match (q.query_type(), name.to_ascii().as_str()) {
                    (RecordType::A, "a.test.") => {
                        res.add_answer(Record::from_rdata(
                            name,
                            42,
                            RData::A(A(Ipv4Addr::new(10, 1, 0, 1))),
                        ));
                    }
                    (RecordType::SRV, "_http._tcp.test.") => {
                        let target = Name::from_ascii("a.test.").unwrap();
                        res.add_answer(Record::from_rdata(
                            name,
                            42,
                            RData::SRV(SRV::new(10, 3, 8443, target)),
                        ));
                    }
                    _ => {}
                }
            }
            let _ = sock.send_to(&res.to_vec().unwrap(), peer).await;
        }
    });
    addr
}

#[tokio::test]
async fn hickory_reads_ttls_and_srv_records_from_a_real_server() {
    let server = dns_server().await;
    let resolver = HickoryResolver::with_name_servers(&[server]).unwrap();
    let found = resolver.lookup("a.test.", 80).await.unwrap();
    assert_eq!(found.addrs, ["10.1.0.1:80".parse::<SocketAddr>().unwrap()]);
    let ttl = found.ttl.unwrap();
    assert!(
        ttl <= Duration::from_secs(42) && ttl > Duration::from_secs(30),
        "{ttl:?}"
    );
    let srv = resolver.lookup_srv("_http._tcp.test.").await.unwrap();
    assert_eq!(srv.records, [rec(10, 3, 8443, "a.test.")]);

    // End to end: SRV then A, through the driver.
    let lb = lb();
    let dns = Dns::srv("_http._tcp.test.")
        .resolver(resolver)
        .build()
        .unwrap();
    let stats = dns.stats();
    let _driver = dns.spawn(lb.handle(), |a| Some((a, svc())));
    crate::support::eventually("srv applied", || stats.updates() == 1).await;
    let eps = lb.handle().endpoints();
    assert_eq!(eps[0].0, "10.1.0.1:8443".parse::<SocketAddr>().unwrap());
    assert_eq!(eps[0].1.weight(), 3.0);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_driver_stops_the_source() {
    let recorded = Recorded::default();
    let lb = lb();
    let dns = Dns::builder("a.internal.", 80)
        .resolver(recorded.clone())
        .build()
        .unwrap();
    let driver = dns.spawn(lb.handle(), |a| Some((a, svc())));
    settle().await;
    assert_eq!(recorded.0.lock().unwrap().calls, 1);
    drop(driver);
    advance(dns::DEFAULT_INTERVAL * 3).await;
    assert_eq!(
        recorded.0.lock().unwrap().calls,
        1,
        "no resolution after the guard is dropped"
    );
    assert_eq!(lb.handle().len(), 1, "the last set stays in the balancer");
}
