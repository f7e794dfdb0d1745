//! tonic channels to replicas dialled by address, over TLS to the
//! service's name (features `grpc` and `rustls`).
//!
//! A tonic `Endpoint` per replica: its URI is the replica's address
//! (`https://10.0.3.7:8443`, where the connection goes), its
//! `tls_config(...).domain_name(name)` is the service's name (SNI and the
//! certificate check) and its `origin` is the service's origin (the
//! `:authority` of every call). [`TlsChannels`] is the endpoint factory for
//! [`Replicas`](crate::http::Replicas): one lazily connecting `Channel` per address, so each
//! replica keeps its own HTTP/2 connection.
//!
//! For gRPC balancers keyed by origin, with every tonic setting (timeouts,
//! keep-alive, limits) from one template, an `https://service` template
//! with its `tls_config` does the same: see [`Channels`](super::Channels).
//!
//! ```no_run
//! use tonic::transport::{Certificate, ClientTlsConfig};
//! use tower_lb::grpc::tls::TlsChannels;
//! use tower_lb::http::Replicas;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let ca = Certificate::from_pem(std::fs::read("ca.pem")?);
//! let tls = ClientTlsConfig::new().ca_certificate(ca);
//! let replicas = Replicas::new("https://api.internal", TlsChannels::new(tls))?;
//! let lb = replicas.balance(["10.0.3.7:8443".parse()?, "10.0.3.8:8443".parse()?])?.build()?;
//! // `lb` serves `http::Request<tonic::body::Body>`: hand it to a generated
//! // client (`MyServiceClient::new(lb)`) or to `tonic::client::Grpc::new(lb)`.
//! # drop(lb); Ok(()) }
//! ```

use std::net::SocketAddr;

use tonic::transport::{Channel, ClientTlsConfig, Endpoint, Uri};

use crate::error::ConfigError;
use crate::error::current_runtime;
use crate::http::tls::check_https;
use crate::http::{MakeClient, Origin, Target, server_name};

/// The tonic endpoint of the replica at `addr` of the service at `service`
/// (an `https://` origin): it dials `addr`, verifies `service`'s host with
/// `tls` (your roots, identity, timeout; its domain name is replaced), and
/// sends `service` as every call's `:authority`.
///
/// # Errors
///
/// A [`ConfigError`] naming `service` when it is not an `https://` origin
/// with a valid TLS server name, `addr` when tonic refuses the address, or
/// `tls` when tonic refuses the TLS settings.
pub fn tls_endpoint(
    service: &str,
    addr: SocketAddr,
    tls: ClientTlsConfig,
) -> Result<Endpoint, ConfigError> {
    let service = Origin::parse(service)?;
    check_https(&service)?;
    TlsChannels::new(tls).endpoint(&service, server_name(&service), addr)
}

/// The endpoint factory of gRPC replicas over tonic: per address, a lazily
/// connecting [`Channel`] of its own (see [`tls_endpoint`]).
///
/// What tonic needed: the channel's endpoint URI set to the address, the
/// TLS domain name and the `origin` set to the service (tonic's
/// `tls-ring` feature), and nothing else: tonic's channel already keeps one
/// HTTP/2 connection per endpoint.
///
/// Failures reach the balancer as [`ReplicaError`](crate::http::ReplicaError)s;
/// a refused certificate is a `Connect` failure of its replica. Other tonic
/// transport errors are classified from their I/O causes only (tonic's
/// error names no kind); gRPC status classification is not part of this
/// module.
#[derive(Debug, Clone)]
pub struct TlsChannels {
    tls: ClientTlsConfig,
}

impl TlsChannels {
    /// Channels with `tls` (its domain name is set per service).
    pub fn new(tls: ClientTlsConfig) -> Self {
        Self { tls }
    }

    fn endpoint(
        &self,
        service: &Origin,
        server_name: &str,
        addr: SocketAddr,
    ) -> Result<Endpoint, ConfigError> {
        let origin: Uri = service
            .as_str()
            .parse()
            .map_err(|_| ConfigError::new("service", service, "an `https://` origin"))?;
        Endpoint::from_shared(format!("https://{addr}"))
            .map_err(|e| ConfigError::new("addr", (addr, e), "an address tonic can dial"))?
            .origin(origin)
            .tls_config(self.tls.clone().domain_name(server_name))
            .map_err(|e| ConfigError::new("tls", e, "TLS settings tonic accepts"))
    }
}

impl MakeClient for TlsChannels {
    type Client = Channel;

    fn check(&self, service: &Origin) -> Result<(), ConfigError> {
        check_https(service).map(drop)
    }

    fn make_client(&self, target: &Target<'_>) -> Result<Channel, ConfigError> {
        let endpoint = self.endpoint(target.service, target.server_name, target.addr)?;
        // A channel spawns its worker task at once.
        current_runtime("runtime", "a tokio runtime: make tonic channels inside one")?;
        Ok(endpoint.connect_lazy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_dials_the_address_and_names_the_service() {
        let addr: SocketAddr = "10.0.3.7:8443".parse().unwrap();
        let e = tls_endpoint("https://api.internal", addr, ClientTlsConfig::new()).unwrap();
        assert_eq!(e.uri(), "https://10.0.3.7:8443/");
        let err = tls_endpoint("http://api.internal", addr, ClientTlsConfig::new()).unwrap_err();
        assert_eq!(err.field(), "service");
    }

    #[test]
    fn channels_need_a_runtime() {
        use crate::http::Replicas;
        let replicas = Replicas::new(
            "https://api.internal",
            TlsChannels::new(ClientTlsConfig::new()),
        )
        .unwrap();
        let err = replicas
            .replica("10.0.3.7:8443".parse().unwrap())
            .unwrap_err();
        assert_eq!(err.field(), "runtime");
    }
}
