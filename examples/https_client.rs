//! Balances HTTPS over two replicas of `api.internal`, dialled by address.
//!
//! `cargo run --example https_client`
//!
//! At start it makes a CA and a certificate for `api.internal` (rcgen) and
//! starts two TLS servers with it, on 127.0.0.1 and 127.0.0.2 (Linux routes
//! all of 127.0.0.0/8 to the loopback interface). The balancer gets the
//! service's name and the two addresses: each replica has its own client,
//! which dials its address and verifies the certificate for `api.internal`;
//! `Host` (HTTP/1) and `:authority` (HTTP/2) say `api.internal` too.

use std::convert::Infallible;
use std::error::Error;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tower::{Service, ServiceExt};
use tower_lb::http::tls::TlsConfig;
use tower_lb::pick;

type BoxError = Box<dyn Error + Send + Sync>;

/// The service's name: what the certificates and `Host` say.
pub const SERVICE: &str = "api.internal";

/// A private CA that signs server certificates.
pub struct Pki {
    ca: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_pem: String,
}

impl Pki {
    /// A new CA.
    pub fn new() -> Result<Self, BoxError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key)?;
        Ok(Self {
            ca_der: cert.der().clone(),
            ca_pem: cert.pem(),
            ca: Issuer::new(params, key),
        })
    }

    /// The CA certificate, for the client's roots.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A certificate chain for `name` signed by this CA and its key, in
    /// PEM (what tonic's `Identity::from_pem` takes).
    pub fn identity_pem(&self, name: &str) -> Result<(String, String), BoxError> {
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(vec![name.to_owned()])?.signed_by(&key, &self.ca)?;
        Ok((
            format!("{}{}", cert.pem(), self.ca_pem),
            key.serialize_pem(),
        ))
    }

    /// A server's TLS configuration with a certificate for `name` signed by
    /// this CA, offering ALPN `h2` and `http/1.1`.
    pub fn server_config(&self, name: &str) -> Result<Arc<ServerConfig>, BoxError> {
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(vec![name.to_owned()])?.signed_by(&key, &self.ca)?;
        let chain = vec![cert.der().clone(), self.ca_der.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A TLS server's connection counts.
#[derive(Debug, Clone, Default)]
pub struct Connections {
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
}

impl Connections {
    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections not yet closed.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// Counts a connection open until dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts a TLS server (HTTP/1 and HTTP/2) on `ip`, port chosen by the
/// system, answering with `handler`.
pub async fn serve<H, F>(
    ip: IpAddr,
    tls: Arc<ServerConfig>,
    handler: H,
) -> io::Result<(SocketAddr, Connections)>
where
    H: Fn(hyper::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = hyper::Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind((ip, 0)).await?;
    let addr = listener.local_addr()?;
    let conns = Connections::default();
    let counts = conns.clone();
    let acceptor = TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counts.accepted.fetch_add(1, Ordering::SeqCst);
            counts.open.fetch_add(1, Ordering::SeqCst);
            let open = Open(Arc::clone(&counts.open));
            let (acceptor, handler) = (acceptor.clone(), handler.clone());
            tokio::spawn(async move {
                let _open = open;
                // A client that refuses our certificate ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(move |req| {
                    let res = handler(req);
                    async move { Ok::<_, Infallible>(res.await) }
                });
                let builder = auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(tls), svc).await;
            });
        }
    });
    Ok((addr, conns))
}

/// The example's answer: which replica, and the name it was asked for.
async fn answer(replica: IpAddr, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    let host = req.headers().get("host").and_then(|h| h.to_str().ok());
    let name = host.or(req.uri().host()).unwrap_or("-");
    let text = format!("{replica} answered {:?} for {name}", req.version());
    hyper::Response::new(Full::new(Bytes::from(text)))
}

/// Starts the two replicas, sends `requests` requests through a
/// round-robin balancer over their addresses and returns the answers.
pub async fn run(requests: usize) -> Result<Vec<String>, BoxError> {
    let pki = Pki::new()?;
    let server_tls = pki.server_config(SERVICE)?;
    let mut addrs = Vec::new();
    for ip in [[127, 0, 0, 1], [127, 0, 0, 2]] {
        let ip = IpAddr::from(ip);
        let (addr, _) = serve(ip, server_tls.clone(), move |req| answer(ip, req)).await?;
        addrs.push(addr);
    }

    // The service's name and the replicas' addresses are separate inputs.
    let tls = TlsConfig::from_pem(pki.ca_pem().as_bytes())?;
    let replicas = tower_lb::http::https::<Empty<Bytes>>("https://api.internal", tls)?;
    let mut lb = replicas
        .balance(addrs)?
        .picker(pick::RoundRobin::new())
        .build()?;

    let mut answers = Vec::new();
    for i in 0..requests {
        let req = http::Request::get(format!("/hello?n={i}")).body(Empty::new())?;
        let res = lb.ready().await?.call(req).await?;
        let body = res.into_body().collect().await?.to_bytes();
        answers.push(String::from_utf8_lossy(&body).into_owned());
    }
    Ok(answers)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    for answer in run(4).await? {
        println!("{answer}");
    }
    Ok(())
}
