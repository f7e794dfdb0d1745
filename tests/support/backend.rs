//! A hyper backend on 127.0.0.1 that tests can stop, restart on the same
//! port and switch between answers: 200, 503, no answer, a broken body.
//! It counts what it served and when it first served after a restart or
//! a switch back to 200.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// How a backend answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// 200 with its name.
    Ok = 0,
    /// 503.
    Unavailable = 1,
    /// No answer at all.
    Hang = 2,
    /// 200, a first chunk, then the connection breaks.
    BrokenBody = 3,
}

impl Mode {
    fn from_u8(v: u8) -> Mode {
        match v {
            1 => Mode::Unavailable,
            2 => Mode::Hang,
            3 => Mode::BrokenBody,
            _ => Mode::Ok,
        }
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

/// A running (or stopped) backend.
pub struct Backend {
    pub name: String,
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    served: Arc<AtomicU64>,
    /// When it first answered 200 since [`Backend::mark`].
    first_ok: Arc<Mutex<Option<Instant>>>,
    server: Mutex<Option<JoinHandle<()>>>,
}

impl Backend {
    /// Starts a backend on a free port of 127.0.0.1.
    pub async fn start(name: &str) -> Arc<Backend> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let addr = listener.local_addr().expect("an address");
        let b = Arc::new(Backend {
            name: name.to_owned(),
            addr,
            mode: Arc::new(AtomicU8::new(Mode::Ok as u8)),
            served: Arc::new(AtomicU64::new(0)),
            first_ok: Arc::new(Mutex::new(None)),
            server: Mutex::new(None),
        });
        b.serve(listener);
        b
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests answered 200 so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }

    pub fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    /// Forgets when it first answered 200: [`first_ok`](Self::first_ok)
    /// reports the first 200 after this.
    pub fn mark(&self) {
        *self.first_ok.lock().expect("not poisoned") = None;
    }

    /// The first 200 since the last [`mark`](Self::mark).
    pub fn first_ok(&self) -> Option<Instant> {
        *self.first_ok.lock().expect("not poisoned")
    }

    /// Stops listening and drops every connection: new connections are
    /// refused, calls in flight fail.
    pub fn stop(&self) {
        if let Some(task) = self.server.lock().expect("not poisoned").take() {
            task.abort();
        }
    }

    /// Listens again on the same port.
    pub async fn restart(&self) {
        // The port was ours a moment ago; another process taking it in
        // between is possible but unheard of on a test machine.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("cannot listen on {} again: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    fn serve(&self, listener: TcpListener) {
        let (mode, served, first_ok, name) = (
            self.mode.clone(),
            self.served.clone(),
            self.first_ok.clone(),
            Bytes::from(self.name.clone()),
        );
        let task = tokio::spawn(async move {
            // Aborting this task drops the set: every connection ends.
            let mut connections = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (mode, served, first_ok, name) =
                    (mode.clone(), served.clone(), first_ok.clone(), name.clone());
                let svc = service_fn(move |_req: hyper::Request<Incoming>| {
                    let m = Mode::from_u8(mode.load(Ordering::SeqCst));
                    if m == Mode::Ok {
                        served.fetch_add(1, Ordering::SeqCst);
                        first_ok
                            .lock()
                            .expect("not poisoned")
                            .get_or_insert_with(Instant::now);
                    }
                    let name = name.clone();
                    async move { Ok::<_, Infallible>(answer(m, name).await) }
                });
                connections.spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
            }
        });
        *self.server.lock().expect("not poisoned") = Some(task);
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn answer(mode: Mode, name: Bytes) -> hyper::Response<Body> {
    let full = |b: Bytes| Full::new(b).map_err(|never| match never {}).boxed();
    match mode {
        Mode::Ok => hyper::Response::new(full(name)),
        Mode::Unavailable => {
            let mut res = hyper::Response::new(full(Bytes::from_static(b"down")));
            *res.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
            res
        }
        Mode::Hang => std::future::pending().await,
        Mode::BrokenBody => {
            let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
                Ok(Frame::data(Bytes::from_static(b"par"))),
                Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
            ];
            hyper::Response::new(StreamBody::new(tokio_stream::iter(frames)).boxed())
        }
    }
}
