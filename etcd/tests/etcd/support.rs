//! What the etcd tests share: a real etcd (or a skip), a TCP gate that
//! cuts one client off etcd, the balancer they drive, and waits that
//! measure.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;
use tower::service_fn;
use tower::util::BoxCloneSyncService;
use tower_lb::retry::Backoff;
use tower_lb::{Balance, Handle, pick};
use tower_lb_etcd::local::LocalEtcd;
use tower_lb_etcd::{Builder, Etcd};

/// A replica that answers with its address.
pub type Svc = BoxCloneSyncService<(), SocketAddr, Infallible>;

/// The balancer the tests drive.
pub type Lb = Balance<SocketAddr, Svc, pick::RoundRobin>;

/// A real etcd, or `None` with a notice when the binary is missing and
/// `TOWER_LB_REQUIRE_ETCD` is not set (CI sets it: there a missing etcd
/// fails).
pub async fn etcd() -> Option<LocalEtcd> {
    if LocalEtcd::binary().is_none() {
        assert!(
            std::env::var_os("TOWER_LB_REQUIRE_ETCD").is_none(),
            "TOWER_LB_REQUIRE_ETCD is set but there is no etcd binary (apt-get install etcd-server)"
        );
        eprintln!("skipped: no etcd binary (apt-get install etcd-server to run this test)");
        return None;
    }
    Some(LocalEtcd::start().await.expect("etcd starts"))
}

/// A round-robin balancer with no endpoint, and the maker for its source.
pub fn balancer() -> (
    Lb,
    impl FnMut(SocketAddr) -> Option<(SocketAddr, Svc)> + Send + 'static,
) {
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .build()
        .expect("a valid balancer");
    let make = |addr: SocketAddr| {
        let svc = Svc::new(service_fn(move |()| async move { Ok(addr) }));
        Some((addr, svc))
    };
    (lb, make)
}

/// A source for `target` with quick reconnects, so the tests do not wait
/// on the production backoff.
pub fn source(client: etcd_client::Client, target: &str) -> Builder {
    Etcd::builder(client, target).reconnect_backoff(Backoff::new(
        Duration::from_millis(50),
        Duration::from_millis(200),
    ))
}

/// The balancer's members, sorted.
pub fn members<P: pick::Picker, C>(h: &Handle<SocketAddr, Svc, P, C>) -> Vec<SocketAddr> {
    let mut m: Vec<_> = h.endpoints().into_iter().map(|(k, _)| k).collect();
    m.sort();
    m
}

/// Polls `cond` every millisecond until it holds and returns how long that
/// took; panics with `what` after 20 s (a bound for a loaded machine,
/// never a timing assertion).
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for: {what}");
    start.elapsed()
}

/// Prints a measured figure for the report (`--nocapture` shows them).
pub fn figure(what: &str, took: Duration) {
    println!("figure: {what}: {:.1} ms", took.as_secs_f64() * 1e3);
}

/// `10.0.<i / 250>.<i % 250 + 1>:8080`, distinct for `i < 62,500`.
pub fn addr(i: usize) -> SocketAddr {
    let (hi, lo) = ((i / 250) as u8, (i % 250 + 1) as u8);
    SocketAddr::from(([10, 0, hi, lo], 8080))
}

/// A TCP relay to etcd that can cut every connection and refuse new ones
/// (each is accepted and closed at once) until opened again: one
/// client's view of etcd going away, while etcd and other clients go on.
pub struct Gate {
    addr: SocketAddr,
    open: Arc<AtomicBool>,
    relays: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl Gate {
    pub async fn start(upstream: &str) -> Gate {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .parse()
            .expect("etcd's address");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("its address");
        let open = Arc::new(AtomicBool::new(true));
        let relays = Arc::new(Mutex::new(Vec::new()));
        let (is_open, tasks) = (open.clone(), relays.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !is_open.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tasks.lock().unwrap().push(relay.abort_handle());
            }
        })
        .abort_handle();
        Gate {
            addr,
            open,
            relays,
            accept,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every relayed connection and refuses new ones.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for relay in self.relays.lock().unwrap().drain(..) {
            relay.abort();
        }
    }

    pub fn reopen(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
