//! [`Replicas`]: a named service over replicas dialled by address.

mod connect;
mod error;
mod service;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

pub use connect::DialAddr;
pub use error::ReplicaError;
pub use service::{Replica, ReplicaFuture};

use super::{Classifier, Origin};
use crate::balance::Builder;
use crate::error::ConfigError;
use crate::pick::PeakEwma;

/// The balancer builder [`Replicas::balance`] returns: replicas keyed by
/// address, the HTTP [`Classifier`], the default picker until you set one.
pub type ReplicasBuilder<S> = Builder<SocketAddr, Replica<S>, PeakEwma, Classifier>;

/// What a [`MakeClient`] is asked to serve: one replica of one service.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Target<'a> {
    /// The service's origin, as every request will name it
    /// (`https://api.internal`).
    pub service: &'a Origin,
    /// The service's host without brackets: the TLS server name.
    pub server_name: &'a str,
    /// The replica's address: the only one its client may dial.
    pub addr: SocketAddr,
}

/// The endpoint factory of [`Replicas`]: makes the client of one replica,
/// which must connect to [`Target::addr`] only (and, over TLS, verify
/// [`Target::server_name`]).
///
/// Implemented for closures `Fn(&Target) -> Result<S, ConfigError>`.
pub trait MakeClient {
    /// The client of one replica.
    type Client;

    /// Refuses a service this factory cannot serve (an `http://` origin
    /// for a TLS factory, a name that is no valid TLS server name), once,
    /// in [`Replicas::new`]. The default accepts every origin.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field and what it allows.
    fn check(&self, service: &Origin) -> Result<(), ConfigError> {
        let _ = service;
        Ok(())
    }

    /// Makes the client of `target`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when no client can be made for this address (port
    /// 0, say, or a client builder's own error).
    fn make_client(&self, target: &Target<'_>) -> Result<Self::Client, ConfigError>;
}

impl<F, S> MakeClient for F
where
    F: Fn(&Target<'_>) -> Result<S, ConfigError>,
{
    type Client = S;

    fn make_client(&self, target: &Target<'_>) -> Result<S, ConfigError> {
        self(target)
    }
}

/// The replicas of one named service: dial each replica's address, speak to
/// the service's name, one client (one connection pool) per replica. Turns
/// addresses into [`Replica`] endpoints, for a balancer's initial set
/// ([`balance`](Self::balance)) and for discovery
/// ([`discovery`](Self::discovery)).
///
/// Discovery (DNS, Kubernetes, xDS) yields addresses, `10.0.3.7:8443`, while
/// certificates and virtual hosts name the service, `api.internal`.
/// `Replicas` keeps the two apart: the service's origin is one input, the
/// addresses another, and a [`MakeClient`] (the endpoint factory) builds
/// each replica its own client that connects to that address only. Every
/// request is rewritten to the service's origin, so:
///
/// * the URI authority, the `Host` header (HTTP/1) and `:authority`
///   (HTTP/2) are the service's (`api.internal`);
/// * the TLS server name (SNI and certificate check) is the service's name
///   (Envoy's `auto_sni`, Finagle's TLS hostname, a gRPC channel's
///   authority);
/// * each replica has its own pool: HTTP/1 keep-alive and HTTP/2
///   multiplexing stay per replica, and so do its connections' load.
///
/// **Removal closes the pool.** A [`Replica`] owns its client; when the
/// balancer drops the replica (removed from the set and its last in-flight
/// request done), the client and its pool drop and hyper closes the
/// connections. One caveat from [`Balance`](crate::Balance): a clone that
/// sits idle keeps the endpoint set it last saw until its next call or its
/// drop, and with it the removed replicas' clients.
///
/// Makers: [`HyperHttps`](crate::http::tls::HyperHttps) and
/// [`ReqwestHttps`](crate::http::tls::ReqwestHttps) (feature `rustls`),
/// `grpc::tls::TlsChannels` (features `grpc` + `rustls`), or any closure
/// `Fn(&Target) -> Result<S, ConfigError>` (build a client on
/// [`DialAddr`]).
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Service, ServiceExt, service_fn};
/// use tower_lb::http::{Replicas, Target};
/// use tower_lb::pick;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A stand-in client per replica: answers with its address and the URI.
/// let make = |t: &Target<'_>| {
///     let addr = t.addr;
///     Ok(service_fn(move |req: http::Request<()>| async move {
///         Ok::<_, Infallible>(http::Response::new(format!("{addr} {}", req.uri())))
///     }))
/// };
/// let replicas = Replicas::new("http://api.internal", make)?;
/// let mut lb = replicas
///     .balance(["10.0.3.7:8080".parse()?, "10.0.3.8:8080".parse()?])?
///     .picker(pick::RoundRobin::new())
///     .build()?;
/// let req = http::Request::get("/users?id=7").body(())?;
/// let res = lb.ready().await?.call(req).await?;
/// assert_eq!(res.into_body().into_inner(), "10.0.3.7:8080 http://api.internal/users?id=7");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Replicas<M> {
    service: Origin,
    server_name: Arc<str>,
    make: M,
}

impl<M: MakeClient> Replicas<M> {
    /// The replicas of the service at `service` (`https://api.internal`,
    /// or with a port: `https://api.internal:8443`), whose clients `make`
    /// builds. The service's port goes into `Host` and `:authority` only;
    /// each replica is dialled at its own address and port.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `authority` when `service` is not a valid
    /// origin ([`Origin::parse`]), or the error of
    /// [`make.check`](MakeClient::check).
    pub fn new(service: &str, make: M) -> Result<Self, ConfigError> {
        let service = Origin::parse(service)?;
        make.check(&service)?;
        let server_name = server_name(&service).into();
        Ok(Self {
            service,
            server_name,
            make,
        })
    }

    /// The service's origin.
    pub fn service(&self) -> &Origin {
        &self.service
    }

    /// The service's name: the TLS server name of every replica.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// The endpoint of the replica at `addr`, with a new client of its own.
    ///
    /// # Errors
    ///
    /// The factory's error ([`MakeClient::make_client`]).
    pub fn replica(&self, addr: SocketAddr) -> Result<Replica<M::Client>, ConfigError> {
        let target = Target {
            service: &self.service,
            server_name: &self.server_name,
            addr,
        };
        let client = self.make.make_client(&target)?;
        Ok(Replica::new(
            client,
            self.service.clone(),
            Arc::clone(&self.server_name),
            addr,
        ))
    }

    /// A balancer builder with one [`Replica`] per address, keyed by
    /// address, with the HTTP [`Classifier`] and the default picker (set
    /// another on the builder). An empty list is allowed.
    ///
    /// Keys are `SocketAddr`s, so [`Handle::remove`](crate::Handle::remove)
    /// takes the address discovery reported gone. (Hash pickers hash a
    /// `SocketAddr` in native byte order: balancers on machines of other
    /// architectures place it elsewhere.)
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `addr` for an address listed twice, or the
    /// factory's error for the first address it refuses.
    pub fn balance<I>(&self, addrs: I) -> Result<ReplicasBuilder<M::Client>, ConfigError>
    where
        I: IntoIterator<Item = SocketAddr>,
    {
        let mut seen = HashSet::new();
        let mut builder = crate::balance::Balance::builder().classify(Classifier::default());
        for addr in addrs {
            if !seen.insert(addr) {
                return Err(ConfigError::new("addr", addr, "each address listed once"));
            }
            builder = builder.endpoint(addr, self.replica(addr)?);
        }
        Ok(builder)
    }

    /// The endpoint factory for discovery drivers (the `make` of
    /// [`Source::run`](crate::discover::Source::run) of [`Dns`](crate::discover::dns::Dns) with feature `dns`): each new
    /// address becomes `(addr, replica)`. An address the factory refuses
    /// (port 0, say) is skipped.
    pub fn discovery(
        &self,
    ) -> impl FnMut(SocketAddr) -> Option<(SocketAddr, Replica<M::Client>)> + use<M>
    where
        M: Clone,
    {
        let replicas = self.clone();
        move |addr| Some((addr, replicas.replica(addr).ok()?))
    }
}

/// The host of `origin` without IPv6 brackets: the name a TLS server
/// proves.
pub(crate) fn server_name(origin: &Origin) -> &str {
    let host = origin.host();
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(_: &Target<'_>) -> Result<(), ConfigError> {
        Ok(())
    }

    #[test]
    fn server_name_is_the_host_without_port_or_brackets() {
        let r = Replicas::new("https://API.internal:8443", echo).unwrap();
        assert_eq!(r.server_name(), "api.internal");
        assert_eq!(r.service().as_str(), "https://api.internal:8443");
        let v6 = Replicas::new("https://[::1]:8443", echo).unwrap();
        assert_eq!(v6.server_name(), "::1");
        assert!(Replicas::new("api.internal", echo).is_err());
    }

    #[test]
    fn a_repeated_address_is_a_config_error() {
        let r = Replicas::new("http://api.internal", echo).unwrap();
        let a: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let err = r.balance([a, a]).err().unwrap();
        assert_eq!(err.field(), "addr");
    }
}
