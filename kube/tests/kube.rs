//! Kubernetes discovery: the real kube client and watcher against a local
//! API server speaking the list and watch protocol for EndpointSlices.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tower::util::BoxCloneSyncService;
use tower::{ServiceExt, service_fn};
use tower_lb::discover::Source;
use tower_lb::{Balance, Handle, pick};
use tower_lb_kube::{Builder, HINTS_LABEL, Kube};

// tower-lb's test support, shared rather than copied: the discovery
// events' capture and the real-clock wait.
#[path = "../../tests/support/mod.rs"]
mod support;

use support::{Capture, eventually};

/// What the fake API server holds and how it misbehaves next.
#[derive(Default)]
struct State {
    slices: BTreeMap<String, Value>,
    rv: u64,
    history: Vec<(u64, Value)>,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
    fail_lists: usize,
    expire_next_watch: bool,
    lists: usize,
    watches_from: Vec<String>,
}

#[derive(Clone, Default)]
struct FakeApi(Arc<Mutex<State>>);

fn ep(ip: &str, ready: bool, serving: bool, terminating: bool) -> Value {
    json!({
        "addresses": [ip],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "zone": "z1",
        "hints": {"forZones": [{"name": "z1"}]},
    })
}

fn line(v: &Value) -> Bytes {
    Bytes::from(format!("{v}\n"))
}

impl FakeApi {
    fn object(name: &str, rv: u64, endpoints: &[Value]) -> Value {
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": name, "namespace": "shop", "resourceVersion": rv.to_string(),
                "labels": {"kubernetes.io/service-name": "cart"},
            },
            "addressType": "IPv4",
            "ports": [{"name": "metrics", "port": 9090}, {"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints,
        })
    }

    fn event(&self, kind: &str, name: &str, endpoints: &[Value], silent: bool) {
        let mut s = self.0.lock().unwrap();
        s.rv += 1;
        let obj = Self::object(name, s.rv, endpoints);
        if kind == "DELETED" {
            s.slices.remove(name);
        } else {
            s.slices.insert(name.to_owned(), obj.clone());
        }
        if silent {
            // Compacted away: only a re-list shows it.
            return;
        }
        let ev = json!({"type": kind, "object": obj});
        let rv = s.rv;
        s.history.push((rv, ev.clone()));
        s.watchers.retain(|w| w.send(line(&ev)).is_ok());
    }

    fn apply(&self, name: &str, endpoints: &[Value]) {
        let kind = if self.0.lock().unwrap().slices.contains_key(name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        self.event(kind, name, endpoints, false);
    }

    fn drop_watches(&self) {
        self.0.lock().unwrap().watchers.clear();
    }

    fn answer(&self, req: &Request<hyper::body::Incoming>) -> Response<BoxBody<Bytes, Infallible>> {
        assert_eq!(
            req.uri().path(),
            "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices"
        );
        let query = req.uri().query().unwrap_or("");
        assert!(
            query.contains("labelSelector=kubernetes.io%2Fservice-name%3Dcart"),
            "{query}"
        );
        let param = |k: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                .map(str::to_owned)
        };
        let mut s = self.0.lock().unwrap();
        if param("watch").as_deref() != Some("true") {
            s.lists += 1;
            if s.fail_lists > 0 {
                s.fail_lists -= 1;
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": "etcdserver: leader changed",
                    "reason": "InternalError", "code": 500});
                let mut res = Response::new(Full::new(line(&status)).boxed());
                *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                return res;
            }
            let list = json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList",
                "metadata": {"resourceVersion": s.rv.to_string()},
                "items": s.slices.values().collect::<Vec<_>>(),
            });
            return Response::new(Full::new(line(&list)).boxed());
        }
        let from = param("resourceVersion").unwrap_or_default();
        s.watches_from.push(from.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        if std::mem::take(&mut s.expire_next_watch) {
            let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                "metadata": {}, "status": "Failure", "message": "too old resource version",
                "reason": "Expired", "code": 410}});
            let _ = tx.send(line(&gone));
        } else {
            let from: u64 = from.parse().unwrap_or(0);
            for (_, ev) in s.history.iter().filter(|(rv, _)| *rv > from) {
                let _ = tx.send(line(ev));
            }
            s.watchers.push(tx);
        }
        let body = futures_util::stream::unfold(rx, |mut rx| async move {
            let chunk = rx.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(chunk)), rx))
        });
        Response::new(BodyExt::boxed(StreamBody::new(body)))
    }

    async fn serve(self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((io, _)) = listener.accept().await {
                let api = self.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let res = api.answer(&req);
                        async move { Ok::<_, Infallible>(res) }
                    });
                    let io = hyper_util::rt::TokioIo::new(io);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, svc)
                        .await;
                });
            }
        });
        addr
    }
}

type Svc = BoxCloneSyncService<(), SocketAddr, Infallible>;

/// A replica answering with its address; 10.0.0.1 waits while `hold` is set.
fn replica(addr: SocketAddr, hold: watch::Receiver<bool>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        let mut hold = hold.clone();
        async move {
            if addr.ip().to_string() == "10.0.0.1" {
                let _ = hold.wait_for(|h| !*h).await;
            }
            Ok(addr)
        }
    }))
}

fn a(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 8080))
}

fn members<P: pick::Picker, C>(h: &Handle<SocketAddr, Svc, P, C>) -> Vec<(SocketAddr, bool)> {
    let mut m: Vec<_> = h
        .endpoints()
        .iter()
        .map(|(k, s)| (*k, s.is_draining()))
        .collect();
    m.sort();
    m
}

#[tokio::test]
async fn the_balancer_follows_the_services_endpoint_slices() {
    let (capture, _guard) = Capture::install();
    let api = FakeApi::default();
    api.apply(
        "cart-a",
        &[
            ep("10.0.0.1", true, true, false),
            ep("10.0.0.2", true, true, false),
        ],
    );
    let url = format!("http://{}", api.clone().serve().await);
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();

    let lb: Balance<SocketAddr, Svc, pick::RoundRobin> = Balance::builder()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let h = lb.handle();
    let (hold, hold_rx) = watch::channel(false);
    let kube = Kube::builder(client, "shop", "cart", "http")
        .build()
        .unwrap();
    let stats = kube.stats();
    let _driver = kube.spawn(lb.handle(), move |addr| {
        Some((addr, replica(addr, hold_rx.clone())))
    });

    // The initial list; port chosen by name, zone and hints mapped.
    eventually("initial list", || {
        members(&h) == [(a(1), false), (a(2), false)]
    })
    .await;
    let eps = h.endpoints();
    assert_eq!(eps[0].1.meta().locality().zone(), "z1");
    assert_eq!(eps[0].1.meta().labels()[HINTS_LABEL], "z1");
    let one = eps.iter().find(|(k, _)| *k == a(1)).unwrap().1.clone();

    // A second slice is added.
    api.apply("cart-b", &[ep("10.0.0.3", true, true, false)]);
    eventually("slice added", || members(&h).len() == 3).await;

    // A pod turns not-ready: it leaves.
    api.apply(
        "cart-a",
        &[
            ep("10.0.0.1", true, true, false),
            ep("10.0.0.2", false, false, false),
        ],
    );
    eventually("not ready removed", || {
        members(&h) == [(a(1), false), (a(3), false)]
    })
    .await;

    // A call in flight on 10.0.0.1, then its pod terminates: it drains.
    hold.send_replace(true);
    let mut held = Vec::new();
    while one.in_flight() == 0 {
        held.push(tokio::spawn(lb.clone().oneshot(())));
        tokio::task::yield_now().await;
    }
    api.apply("cart-a", &[ep("10.0.0.1", false, true, true)]);
    eventually("terminating drains", || {
        members(&h) == [(a(1), true), (a(3), false)]
    })
    .await;
    let now = h.endpoints();
    assert!(
        Arc::ptr_eq(&now.iter().find(|(k, _)| *k == a(1)).unwrap().1, &one),
        "model kept"
    );
    for _ in 0..20 {
        assert_eq!(
            lb.clone().oneshot(()).await.unwrap(),
            a(3),
            "no new picks on a draining endpoint"
        );
    }
    assert_eq!(one.in_flight(), 1);
    hold.send_replace(false);
    for task in held {
        task.await.unwrap().unwrap();
    }
    assert_eq!(one.in_flight(), 0, "the call in flight finished");

    // The slice is deleted.
    api.event("DELETED", "cart-b", &[], false);
    eventually("slice deleted", || members(&h) == [(a(1), true)]).await;

    // The watch connection drops; the watcher resumes from its version and
    // sees what changed meanwhile, without a re-list.
    let lists = api.0.lock().unwrap().lists;
    api.drop_watches();
    api.apply("cart-c", &[ep("10.0.0.4", true, true, false)]);
    eventually("resumed watch", || {
        members(&h) == [(a(1), true), (a(4), false)]
    })
    .await;
    assert_eq!(api.0.lock().unwrap().lists, lists, "resumed, not re-listed");
    assert!(api.0.lock().unwrap().watches_from.len() >= 2);
    assert_eq!(capture.events("kube"), [], "a clean drop is no error");

    // 410 Gone forces a re-list, and the first re-list fails: both are
    // errors; the last good set keeps serving until the re-list succeeds.
    {
        let mut s = api.0.lock().unwrap();
        s.expire_next_watch = true;
        s.fail_lists = 1;
    }
    api.event(
        "MODIFIED",
        "cart-c",
        &[ep("10.0.0.5", true, true, false)],
        true,
    );
    api.drop_watches();
    eventually("two errors", || capture.events("kube").len() == 2).await;
    assert_eq!(
        lb.clone().oneshot(()).await.unwrap(),
        a(4),
        "the last good set serves"
    );
    eventually("re-listed", || members(&h) == [(a(1), true), (a(5), false)]).await;
    let events = capture.events("kube");
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(stats.errors(), 2);
    assert!(
        events
            .iter()
            .any(|e| e.error.contains("too old resource version")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e.error.contains("leader changed")),
        "{events:?}"
    );
    assert!(stats.last_error().is_some());
    assert_eq!((stats.endpoints(), stats.draining()), (2, 1));
}

#[test]
fn bad_configuration_is_a_config_error() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _enter = rt.enter();
    let client = || {
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap()
    };
    let field = |b: Builder| b.build().err().map(|e| e.field());
    assert_eq!(
        field(Kube::builder(client(), "", "s", "http")),
        Some("kube.namespace")
    );
    assert_eq!(
        field(Kube::builder(client(), "n", "", 80)),
        Some("kube.service")
    );
    assert_eq!(
        field(Kube::builder(client(), "n", "s", 0)),
        Some("kube.port")
    );
    assert!(Kube::builder(client(), "n", "s", 8080).build().is_ok());
}
