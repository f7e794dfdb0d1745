//! `helloworld.proto`, compiled in the build: the generated client
//! (`greeter_client::GreeterClient`) and server (`greeter_server`), as a
//! user's `mod helloworld { tonic::include_proto!("helloworld"); }` has
//! them, and [`Replica`]: a greeter on 127.0.0.1 with the standard health
//! service, recording what each call carried.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tower::util::MapRequestLayer;

tonic::include_proto!("helloworld");

/// The name the greeter's health is reported under.
pub const SERVICE: &str = "helloworld.Greeter";

/// What one `SayHello` carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The `:authority` of the call.
    pub authority: String,
    /// Its `user-agent` header (`-` without one).
    pub user_agent: String,
}

/// A running greeter replica.
pub struct Replica {
    /// Its address.
    pub addr: SocketAddr,
    /// `http://ADDR` (or `https://` over TLS).
    pub origin: String,
    /// Sets the health the replica reports (`helloworld.Greeter` and `""`
    /// start `SERVING`).
    pub health: HealthReporter,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Replica {
    /// Starts a greeter named `name` on 127.0.0.1, plain HTTP/2.
    ///
    /// # Errors
    ///
    /// When no local port can be bound.
    pub async fn start(name: &str) -> io::Result<Self> {
        Self::spawn(name, IpAddr::from([127, 0, 0, 1]), None).await
    }

    /// Starts a greeter named `name` on `ip` over TLS, presenting the
    /// certificate chain `cert_pem` with its key `key_pem`.
    ///
    /// # Errors
    ///
    /// When `ip` cannot be bound or tonic refuses the identity.
    pub async fn start_tls(
        name: &str,
        ip: IpAddr,
        cert_pem: &str,
        key_pem: &str,
    ) -> io::Result<Self> {
        // tonic's server takes rustls' process-wide provider, which the
        // tree's two (ring, aws-lc-rs for reqwest) leave undecided.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let identity = Identity::from_pem(cert_pem, key_pem);
        Self::spawn(name, ip, Some(ServerTlsConfig::new().identity(identity))).await
    }

    async fn spawn(name: &str, ip: IpAddr, tls: Option<ServerTlsConfig>) -> io::Result<Self> {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(SERVICE, ServingStatus::Serving)
            .await;
        let seen = Arc::default();
        let greeter = Greeter {
            name: name.to_owned(),
            seen: Arc::clone(&seen),
        };
        let mut server = Server::builder();
        if let Some(tls) = tls {
            server = server.tls_config(tls).map_err(io::Error::other)?;
        }
        let router = server
            .layer(MapRequestLayer::new(keep_authority))
            .add_service(health_service)
            .add_service(greeter_server::GreeterServer::new(greeter));
        tokio::spawn(router.serve_with_incoming(TcpListenerStream::new(listener)));
        Ok(Self {
            addr,
            origin: format!("{scheme}://{addr}"),
            health,
            seen,
        })
    }

    /// What each `SayHello` this replica answered carried, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Reports the greeter `NOT_SERVING` (or `SERVING` again).
    pub async fn set_serving(&self, serving: bool) {
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.health.set_service_status(SERVICE, status).await;
    }
}

/// A call's `:authority` (tonic's `Request` keeps no URI).
#[derive(Clone)]
struct Authority(String);

fn keep_authority(mut req: http::Request<tonic::body::Body>) -> http::Request<tonic::body::Body> {
    if let Some(a) = req.uri().authority() {
        let a = Authority(a.to_string());
        req.extensions_mut().insert(a);
    }
    req
}

/// The greeter: answers `"{name}: hello {request.name}"`.
struct Greeter {
    name: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

#[tonic::async_trait]
impl greeter_server::Greeter for Greeter {
    async fn say_hello(&self, req: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let header = |name: &str| {
            req.metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        let authority = req.extensions().get::<Authority>();
        let seen = Seen {
            authority: authority.map_or_else(|| "-".to_owned(), |a| a.0.clone()),
            user_agent: header("user-agent"),
        };
        if let Ok(mut all) = self.seen.lock() {
            all.push(seen);
        }
        let message = format!("{}: hello {}", self.name, req.get_ref().name);
        Ok(Response::new(HelloReply { message }))
    }
}
