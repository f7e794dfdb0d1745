//! HTTPS to replicas dialled by address, against real TLS servers on
//! 127.0.0.1 and 127.0.0.2 with certificates made here (rcgen): the name is
//! verified, `Host`/`:authority` carry it, each replica has its own pool,
//! and a wrong certificate fails only its replica.
#![cfg(feature = "rustls")]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use tokio::sync::watch;
use tower::{Service, ServiceExt};
use tower_lb::classify::{Classify, FailureKind, Outcome};
use tower_lb::http::tls::{HttpsClient, HyperHttps, TlsConfig};
use tower_lb::http::{self, Classifier, MakeClient, Replica, ReplicaError, Replicas};
use tower_lb::{Balance, Error, pick};

#[allow(dead_code)]
#[path = "../../examples/https_client.rs"]
pub(crate) mod https_client;

use https_client::{Connections, Pki, SERVICE, serve};

const ONE: [u8; 4] = [127, 0, 0, 1];
const TWO: [u8; 4] = [127, 0, 0, 2];

type Body = Empty<Bytes>;
type HyperLb = Lb<HttpsClient<Body>>;

/// Holds `/hold` requests until released, counting the ones waiting.
#[derive(Clone)]
struct Gate {
    arrived: Arc<AtomicUsize>,
    open: Arc<watch::Sender<bool>>,
}

impl Gate {
    fn new() -> Self {
        Self {
            arrived: Arc::default(),
            open: Arc::new(watch::channel(false).0),
        }
    }

    async fn pass(&self) {
        let mut open = self.open.subscribe();
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let _ = open.wait_for(|&o| o).await;
    }

    fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }

    fn release(&self) {
        self.open.send_replace(true);
    }
}

/// A replica: its address, connection counts and gate.
struct Backend {
    addr: SocketAddr,
    conns: Connections,
    gate: Gate,
}

/// Starts a replica on `ip` whose certificate names `cert_name`. It answers
/// with what it saw, one `key=value` per line; `/hold` waits at the gate.
async fn backend(pki: &Pki, ip: [u8; 4], cert_name: &str) -> Backend {
    let ip = IpAddr::from(ip);
    let gate = Gate::new();
    let g = gate.clone();
    let handler = move |req: hyper::Request<Incoming>| {
        let g = g.clone();
        async move {
            if req.uri().path() == "/hold" {
                g.pass().await;
            }
            let host = req.headers().get("host").and_then(|h| h.to_str().ok());
            let text = format!(
                "replica={ip}\nversion={:?}\nhost={}\nauthority={}\npath={}\n",
                req.version(),
                host.unwrap_or("-"),
                req.uri().authority().map_or("-", |a| a.as_str()),
                req.uri().path_and_query().map_or("-", |p| p.as_str()),
            );
            hyper::Response::new(Full::new(Bytes::from(text)))
        }
    };
    let tls = pki.server_config(cert_name).unwrap();
    let (addr, conns) = serve(ip, tls, handler).await.unwrap();
    Backend { addr, conns, gate }
}

/// What a replica saw.
struct Seen(HashMap<String, String>);

impl Seen {
    fn parse(body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        let fields = text.lines().filter_map(|l| l.split_once('='));
        Seen(fields.map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
    }

    fn get(&self, field: &str) -> &str {
        self.0.get(field).map_or("<missing>", String::as_str)
    }
}

fn tls(pki: &Pki) -> TlsConfig {
    TlsConfig::from_pem(pki.ca_pem().as_bytes()).unwrap()
}

/// The same roots, offering HTTP/1.1 only (through `from_rustls`).
fn tls_http1(pki: &Pki) -> TlsConfig {
    let mut config = (**tls(pki).rustls()).clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsConfig::from_rustls(config)
}

/// `N` requests held at `backend` at once through clones of `lb`: all in
/// flight, counted as `N`, over one connection; then released.
async fn burst(lb: &HyperLb, backend: &Backend, n: usize) {
    let state = lb.handle().endpoints()[0].1.clone();
    let before = state.requests();
    let calls: Vec<_> = (0..n)
        .map(|_| {
            let mut lb = lb.clone();
            tokio::spawn(async move {
                get(&mut lb, "/hold")
                    .await
                    .map(|s| s.get("version").to_owned())
            })
        })
        .collect();
    eventually("every request at the replica", || {
        backend.gate.arrived() == n
    })
    .await;
    assert_eq!(state.in_flight(), n);
    assert_eq!(backend.conns.accepted(), 1);
    backend.gate.release();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), "HTTP/2.0");
    }
    assert_eq!(state.in_flight(), 0);
    assert_eq!(state.requests() - before, n as u64);
    assert_eq!(backend.conns.accepted(), 1);
}

fn hyper_lb(tls: TlsConfig, addrs: &[SocketAddr]) -> HyperLb {
    round_robin(HyperHttps::new(tls), addrs)
}

async fn get<S, B>(lb: &mut S, path: &str) -> Result<Seen, S::Error>
where
    S: Service<::http::Request<Body>, Response = ::http::Response<B>>,
    B: hyper::body::Body,
    B::Error: std::fmt::Debug,
{
    let req = ::http::Request::get(path).body(Empty::new()).unwrap();
    let res = lb.ready().await?.call(req).await?;
    Ok(Seen::parse(
        &res.into_body().collect().await.unwrap().to_bytes(),
    ))
}

/// Waits until `done` holds, failing after a generous bound.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let wait = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .is_err()
    {
        panic!("gave up waiting for {what}");
    }
}

/// One client type behind the balancer: how to build it over the replicas'
/// addresses and send a `GET`.
trait Via {
    /// The client of one replica.
    type Client;

    fn lb(pki: &Pki, addrs: &[SocketAddr]) -> Lb<Self::Client>;

    async fn get(lb: &mut Lb<Self::Client>, path: &str) -> Result<Seen, Error<ReplicaError>>;
}

type Lb<S> = Balance<SocketAddr, Replica<S>, pick::RoundRobin, Classifier>;

/// A round-robin balancer over `addrs` with `make`.
fn round_robin<M: MakeClient>(make: M, addrs: &[SocketAddr]) -> Lb<M::Client> {
    Replicas::new("https://api.internal", make)
        .unwrap()
        .balance(addrs.iter().copied())
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap()
}

struct Hyper;

impl Via for Hyper {
    type Client = HttpsClient<Body>;

    fn lb(pki: &Pki, addrs: &[SocketAddr]) -> Lb<Self::Client> {
        round_robin(HyperHttps::new(tls(pki)), addrs)
    }

    async fn get(lb: &mut Lb<Self::Client>, path: &str) -> Result<Seen, Error<ReplicaError>> {
        get(lb, path).await
    }
}

/// Over HTTP/2 (ALPN), requests reach both replicas by address; the
/// certificate is verified for the service's name and `:authority` is it;
/// each replica keeps its one connection.
async fn reaches_both_replicas_with_the_service_name<V: Via>() {
    let pki = Pki::new().unwrap();
    let (one, two) = (
        backend(&pki, ONE, SERVICE).await,
        backend(&pki, TWO, SERVICE).await,
    );
    let mut lb = V::lb(&pki, &[one.addr, two.addr]);
    let mut replicas = Vec::new();
    for i in 0..4 {
        let seen = V::get(&mut lb, &format!("/items?n={i}")).await.unwrap();
        assert_eq!(seen.get("version"), "HTTP/2.0");
        assert_eq!(seen.get("authority"), SERVICE);
        assert_eq!(seen.get("path"), format!("/items?n={i}"));
        replicas.push(seen.get("replica").to_owned());
    }
    assert_eq!(
        replicas,
        ["127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2"]
    );
    assert_eq!((one.conns.accepted(), two.conns.accepted()), (1, 1));
}

/// A replica whose certificate names another service is refused with an
/// error naming the service and its address, a `Connect` failure counted
/// on that replica only.
async fn refuses_a_certificate_for_another_name<V: Via>() {
    let pki = Pki::new().unwrap();
    let good = backend(&pki, ONE, SERVICE).await;
    let bad = backend(&pki, TWO, "other.internal").await;
    let mut lb = V::lb(&pki, &[good.addr, bad.addr]);
    let mut refused = Vec::new();
    for _ in 0..4 {
        match V::get(&mut lb, "/x").await {
            Ok(seen) => assert_eq!(seen.get("replica"), "127.0.0.1"),
            Err(Error::Inner(e)) => refused.push(e),
            Err(e) => panic!("a balancer error: {e}"),
        }
    }
    assert_eq!(refused.len(), 2);
    let e = &refused[0];
    assert_eq!((e.addr(), e.server_name()), (bad.addr, SERVICE));
    assert!(e.is_connect() && e.certificate_error().is_some(), "{e:?}");
    let text = e.to_string();
    let names = text.contains("`api.internal`") && text.contains(&bad.addr.to_string());
    assert!(names && text.contains("certificate"), "{text}");
    let classify = |e| {
        Classify::<::http::Response<()>, _>::classify(
            &Classifier::default(),
            Err(e),
            Duration::ZERO,
        )
    };
    assert_eq!(classify(e), Outcome::Failure(FailureKind::Connect));

    let states: HashMap<_, _> = lb.handle().endpoints().into_iter().collect();
    assert_eq!(
        (states[&bad.addr].failures(), states[&bad.addr].requests()),
        (2, 2)
    );
    assert_eq!(
        (states[&good.addr].failures(), states[&good.addr].requests()),
        (0, 2)
    );
    // The handshake was tried, and no request reached the replica.
    assert!(bad.conns.accepted() >= 1);
}

#[tokio::test]
async fn hyper_reaches_both_replicas_by_address_with_the_service_name() {
    reaches_both_replicas_with_the_service_name::<Hyper>().await;
}

#[tokio::test]
async fn hyper_refuses_a_certificate_for_another_name_on_that_replica_only() {
    refuses_a_certificate_for_another_name::<Hyper>().await;
}

#[tokio::test]
async fn hyper_http1_sends_the_service_name_as_host() {
    let pki = Pki::new().unwrap();
    let (one, two) = (
        backend(&pki, ONE, SERVICE).await,
        backend(&pki, TWO, SERVICE).await,
    );
    let mut lb = hyper_lb(tls_http1(&pki), &[one.addr, two.addr]);
    let mut replicas = Vec::new();
    for _ in 0..4 {
        let seen = get(&mut lb, "/x").await.unwrap();
        assert_eq!(seen.get("version"), "HTTP/1.1");
        assert_eq!(seen.get("host"), SERVICE);
        replicas.push(seen.get("replica").to_owned());
    }
    assert_eq!(
        replicas,
        ["127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2"]
    );
    // Keep-alive per replica: sequential requests reuse one connection each.
    assert_eq!((one.conns.accepted(), two.conns.accepted()), (1, 1));
}

#[tokio::test]
async fn http2_requests_share_one_connection_and_count_in_flight() {
    let pki = Pki::new().unwrap();
    let one = backend(&pki, ONE, SERVICE).await;
    let lb = hyper_lb(tls(&pki), &[one.addr]);
    // Offering h2 and http/1.1, the protocol is known after the first
    // handshake; from then on every request multiplexes on its connection.
    get(&mut lb.clone(), "/warm").await.unwrap();
    burst(&lb, &one, 32).await;
}

#[tokio::test]
async fn http2_only_shares_one_connection_from_the_first_request() {
    let pki = Pki::new().unwrap();
    let one = backend(&pki, ONE, SERVICE).await;
    let lb = hyper_lb(tls(&pki).http2_only(), &[one.addr]);
    burst(&lb, &one, 32).await;
}

/// Removes a replica while a request to it is in flight: its connection
/// serves that request, then closes; the other replica's stays open.
async fn removal_closes_the_pool_after_the_last_request(http1: bool) {
    let pki = Pki::new().unwrap();
    let (stay, go) = (
        backend(&pki, ONE, SERVICE).await,
        backend(&pki, TWO, SERVICE).await,
    );
    let tls = if http1 { tls_http1(&pki) } else { tls(&pki) };
    let replicas = Replicas::new("https://api.internal", HyperHttps::<Body>::new(tls)).unwrap();
    // The leaving replica alone first, so that the held request lands on it.
    let mut lb = replicas
        .balance([go.addr])
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let handle = lb.handle();
    let go_state = handle.endpoints()[0].1.clone();
    let held = {
        let mut lb = lb.clone();
        tokio::spawn(async move {
            get(&mut lb, "/hold")
                .await
                .map(|s| s.get("replica").to_owned())
        })
    };
    eventually("the held request at the replica", || go.gate.arrived() == 1).await;

    handle.insert(stay.addr, replicas.replica(stay.addr).unwrap());
    assert!(handle.remove(&go.addr));
    // New requests go to the replica that stays (and `lb` drops its view of
    // the old set).
    assert_eq!(
        get(&mut lb, "/x").await.unwrap().get("replica"),
        "127.0.0.1"
    );
    assert_eq!(go_state.in_flight(), 1);
    assert_eq!(go.conns.open(), 1);

    go.gate.release();
    assert_eq!(held.await.unwrap().unwrap(), "127.0.0.2");
    eventually("the removed replica's connection to close", || {
        go.conns.open() == 0
    })
    .await;
    assert_eq!(go_state.in_flight(), 0);
    assert_eq!(go.conns.accepted(), 1);
    // The other replica's pool is untouched.
    assert_eq!(
        get(&mut lb, "/x").await.unwrap().get("replica"),
        "127.0.0.1"
    );
    assert_eq!((stay.conns.accepted(), stay.conns.open()), (1, 1));
}

#[tokio::test]
async fn a_removed_replica_closes_its_http2_connection_after_its_last_request() {
    removal_closes_the_pool_after_the_last_request(false).await;
}

#[tokio::test]
async fn a_removed_replica_closes_its_http1_connection_after_its_last_request() {
    removal_closes_the_pool_after_the_last_request(true).await;
}

/// Discovery feeds addresses; the replicas' factory makes their clients.
#[cfg(feature = "dns")]
#[tokio::test]
async fn dns_discovery_feeds_addresses_to_https_replicas() {
    use tower_lb::discover::Source;
    use tower_lb::discover::dns::{Dns, Resolve};

    /// Answers with the replicas' addresses, whatever the name.
    struct Fixed(Vec<SocketAddr>);

    impl Resolve for Fixed {
        async fn resolve(&self, _: &str, _: u16) -> std::io::Result<Vec<SocketAddr>> {
            Ok(self.0.clone())
        }
    }

    let pki = Pki::new().unwrap();
    let (one, two) = (
        backend(&pki, ONE, SERVICE).await,
        backend(&pki, TWO, SERVICE).await,
    );
    let replicas = http::https::<Body>("https://api.internal", tls(&pki)).unwrap();
    let mut lb = replicas
        .balance([])
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let dns = Dns::builder(SERVICE, 443)
        .resolver(Fixed(vec![one.addr, two.addr]))
        .build()
        .unwrap();
    let task = dns.spawn(lb.handle(), replicas.discovery());
    let handle = lb.handle();
    eventually("both replicas discovered", || handle.len() == 2).await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let answer = get(&mut lb, "/x").await.unwrap();
        assert_eq!(answer.get("authority"), SERVICE);
        seen.push(answer.get("replica").to_owned());
    }
    seen.sort();
    assert_eq!(seen, ["127.0.0.1", "127.0.0.2"]);
    task.abort();
}

#[test]
fn tls_replicas_refuse_plain_http_services() {
    let pki = Pki::new().unwrap();
    let err = http::https::<Body>("http://api.internal", tls(&pki)).unwrap_err();
    assert_eq!(err.field(), "service");
}

#[tokio::test]
async fn https_client_example_answers_from_both_replicas() {
    let answers = https_client::run(4).await.unwrap();
    let want: Vec<String> = ["127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2"]
        .iter()
        .map(|ip| format!("{ip} answered HTTP/2.0 for api.internal"))
        .collect();
    assert_eq!(answers, want);
}

#[cfg(feature = "reqwest")]
mod reqwest_replicas {
    use super::*;
    use tower_lb::http::tls::ReqwestHttps;

    struct Reqwest;

    impl Via for Reqwest {
        type Client = reqwest::Client;

        fn lb(pki: &Pki, addrs: &[SocketAddr]) -> Lb<Self::Client> {
            round_robin(ReqwestHttps::new(tls(pki)), addrs)
        }

        async fn get(lb: &mut Lb<Self::Client>, path: &str) -> Result<Seen, Error<ReplicaError>> {
            // Any URL: the replica rewrites it to the service's origin.
            let url = format!("https://anything.example{path}").parse().unwrap();
            let req = reqwest::Request::new(reqwest::Method::GET, url);
            let res = lb.ready().await?.call(req).await?;
            Ok(Seen::parse(&res.bytes().await.unwrap()))
        }
    }

    #[tokio::test]
    async fn reqwest_reaches_both_replicas_by_address_with_the_service_name() {
        reaches_both_replicas_with_the_service_name::<Reqwest>().await;
    }

    #[tokio::test]
    async fn reqwest_refuses_a_certificate_for_another_name_on_that_replica_only() {
        refuses_a_certificate_for_another_name::<Reqwest>().await;
    }

    #[test]
    fn reqwest_refuses_a_service_port_other_than_the_address_port() {
        let pki = Pki::new().unwrap();
        let replicas = Replicas::new("https://api.internal:8443", ReqwestHttps::new(tls(&pki)));
        let replicas = replicas.unwrap();
        let err = replicas
            .replica("127.0.0.1:9443".parse().unwrap())
            .unwrap_err();
        assert_eq!(err.field(), "addr");
        assert!(replicas.replica("127.0.0.1:8443".parse().unwrap()).is_ok());
    }
}

#[cfg(feature = "grpc")]
mod tonic_replicas {
    use super::*;
    use tonic::transport::{Certificate, Channel, ClientTlsConfig};
    use tower_lb::grpc::tls::TlsChannels;

    struct Tonic;

    impl Via for Tonic {
        type Client = Channel;

        fn lb(pki: &Pki, addrs: &[SocketAddr]) -> Lb<Self::Client> {
            let ca = Certificate::from_pem(pki.ca_pem());
            round_robin(
                TlsChannels::new(ClientTlsConfig::new().ca_certificate(ca)),
                addrs,
            )
        }

        async fn get(lb: &mut Lb<Self::Client>, path: &str) -> Result<Seen, Error<ReplicaError>> {
            let req = ::http::Request::get(path).body(tonic::body::Body::empty());
            let res = lb.ready().await?.call(req.unwrap()).await?;
            Ok(Seen::parse(
                &res.into_body().collect().await.unwrap().to_bytes(),
            ))
        }
    }

    #[tokio::test]
    async fn tonic_reaches_both_replicas_by_address_with_the_service_authority() {
        reaches_both_replicas_with_the_service_name::<Tonic>().await;
    }

    #[tokio::test]
    async fn tonic_refuses_a_certificate_for_another_name_on_that_replica_only() {
        refuses_a_certificate_for_another_name::<Tonic>().await;
    }
}
