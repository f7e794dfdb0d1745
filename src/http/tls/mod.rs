//! HTTPS to replicas dialled by address (feature `rustls`).
//!
//! [`TlsConfig`] is the client's TLS settings (rustls with the *ring*
//! provider, TLS 1.2 and 1.3, ALPN `h2` then `http/1.1`); the factories
//! [`HyperHttps`] (hyper-util with hyper-rustls) and [`ReqwestHttps`]
//! (reqwest's rustls backend, with feature `reqwest`) make one client per
//! replica that dials the replica's address and verifies the *service's*
//! name. [`https`] puts the hyper-util pieces together:
//!
//! ```no_run
//! use http_body_util::Empty;
//! use tower::{Service, ServiceExt};
//! use tower_lb::http::{self, tls::TlsConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let tls = TlsConfig::from_pem(&std::fs::read("ca.pem")?)?;
//! let replicas = http::https::<Empty<bytes::Bytes>>("https://api.internal", tls)?;
//! let mut lb = replicas
//!     .balance(["10.0.3.7:8443".parse()?, "10.0.3.8:8443".parse()?])?
//!     .build()?;
//! // Dials 10.0.3.7 or 10.0.3.8; `Host`, `:authority` and SNI say api.internal,
//! // and the certificate must name api.internal.
//! let req = ::http::Request::get("/users?id=7").body(Empty::new())?;
//! let res = lb.ready().await?.call(req).await?;
//! println!("{}", res.status());
//! # Ok(()) }
//! ```
//!
//! **Why ring.** rustls needs a crypto provider. *ring* builds with the C
//! compiler alone, in about 9 s of a clean build on two cores; aws-lc-rs
//! (rustls' own default) compiles a large C library, about 60 s here, and
//! needs CMake for FIPS and NASM on some targets. Both are audited and
//! fast; this crate is embedded in other people's services, so the lighter
//! build wins. Build your own `rustls::ClientConfig` with aws-lc-rs (FIPS)
//! and pass it to [`TlsConfig::from_rustls`] if you need it. (With feature
//! `reqwest`, reqwest's own backend brings aws-lc-rs anyway: its
//! provider-less variant makes `reqwest::Client::new()` panic.)
//!
//! **A refused certificate** fails the request with a
//! [`ReplicaError`](super::ReplicaError) that names the service and the
//! replica's address, classified [`Connect`](crate::classify::FailureKind):
//! it counts against that replica's health only.

mod hyper;
#[cfg(feature = "reqwest")]
mod reqwest;

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

pub use self::hyper::{HttpsClient, HyperHttps};
#[cfg(feature = "reqwest")]
pub use self::reqwest::ReqwestHttps;
/// The rustls version this crate builds on, for [`TlsConfig::from_rustls`]
/// and [`TlsConfig::with_roots`].
pub use rustls;

use super::{Origin, Replicas};
use crate::error::ConfigError;

/// ALPN offered when the configuration names none: HTTP/2 first (one
/// multiplexed connection per replica), HTTP/1.1 for servers without it.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A client's TLS settings, shared by every replica's client (cloning is a
/// reference count).
///
/// Roots come from PEM ([`from_pem`](Self::from_pem)), a rustls
/// `RootCertStore` ([`with_roots`](Self::with_roots), e.g. filled from
/// `rustls-native-certs` or `webpki-roots` in your crate), or a whole
/// `rustls::ClientConfig` ([`from_rustls`](Self::from_rustls), for client
/// certificates or another provider).
#[derive(Clone)]
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub struct TlsConfig {
    config: Arc<ClientConfig>,
}

impl TlsConfig {
    /// Trusts the certificates in `pem` (one or more `CERTIFICATE` blocks,
    /// your CA's), with the *ring* provider and ALPN `h2`, `http/1.1`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `tls.roots` when `pem` holds no certificate
    /// or one that does not parse.
    pub fn from_pem(pem: &[u8]) -> Result<Self, ConfigError> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| ConfigError::new("tls.roots", e, PEM_ROOTS))?;
            roots
                .add(cert)
                .map_err(|e| ConfigError::new("tls.roots", e, PEM_ROOTS))?;
        }
        if roots.is_empty() {
            return Err(ConfigError::new("tls.roots", "no certificate", PEM_ROOTS));
        }
        Self::with_roots(roots)
    }

    /// Trusts `roots`, with the *ring* provider, TLS 1.2 and 1.3, and ALPN
    /// `h2`, `http/1.1`.
    ///
    /// # Errors
    ///
    /// None with *ring*'s default provider; a [`ConfigError`] naming
    /// `tls.versions` is kept for providers without TLS 1.2/1.3 suites.
    pub fn with_roots(roots: RootCertStore) -> Result<Self, ConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ConfigError::new("tls.versions", e, "TLS 1.2 or 1.3"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self::from_rustls(config))
    }

    /// Uses `config` as it is, except that ALPN `h2`, `http/1.1` is set when
    /// it offers no protocol (set `alpn_protocols` to `http/1.1` alone to
    /// keep replicas on HTTP/1).
    pub fn from_rustls(mut config: ClientConfig) -> Self {
        if config.alpn_protocols.is_empty() {
            config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        }
        Self {
            config: Arc::new(config),
        }
    }

    /// Offers ALPN `h2` only, for replicas known to speak HTTP/2: the
    /// factories then make their clients HTTP/2-only, so that even the
    /// requests that race the first handshake share one connection. (With
    /// `h2` and `http/1.1` offered, hyper-util learns the protocol from
    /// each handshake, and requests sent before the first one ends open
    /// connections of their own; after it, they all multiplex on one.)
    pub fn http2_only(self) -> Self {
        self.with_alpn(&[b"h2"])
    }

    /// Offers ALPN `http/1.1` only: replicas speak HTTP/1.1 over a pool of
    /// keep-alive connections.
    pub fn http1_only(self) -> Self {
        self.with_alpn(&[b"http/1.1"])
    }

    fn with_alpn(self, protocols: &[&[u8]]) -> Self {
        let mut config = ClientConfig::clone(&self.config);
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        Self {
            config: Arc::new(config),
        }
    }

    /// True when `h2` is the only protocol offered.
    pub(crate) fn is_http2_only(&self) -> bool {
        self.config.alpn_protocols == [b"h2"]
    }

    /// The rustls configuration.
    pub fn rustls(&self) -> &Arc<ClientConfig> {
        &self.config
    }
}

const PEM_ROOTS: &str = "one or more PEM `CERTIFICATE` blocks of trusted CAs";

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("alpn", &self.config.alpn_protocols)
            .finish_non_exhaustive()
    }
}

/// The replicas of `service` (an `https://` origin), each with its own
/// hyper-util client over [`HyperHttps`]: `Replicas::new(service,
/// HyperHttps::new(tls))`.
///
/// # Errors
///
/// As [`Replicas::new`]: `service` must be an `https://` origin whose host
/// is a valid TLS server name.
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub fn https<B>(service: &str, tls: TlsConfig) -> Result<Replicas<HyperHttps<B>>, ConfigError>
where
    HyperHttps<B>: super::MakeClient,
{
    Replicas::new(service, HyperHttps::new(tls))
}

/// Refuses a service that is not `https://` or whose host is no TLS server
/// name: the check of every TLS factory.
pub(crate) fn check_https(service: &Origin) -> Result<ServerName<'static>, ConfigError> {
    if service.scheme() != &::http::uri::Scheme::HTTPS {
        return Err(ConfigError::new(
            "service",
            service,
            "an `https://` origin (TLS replicas verify the service's name)",
        ));
    }
    ServerName::try_from(super::named::server_name(service).to_owned()).map_err(|_| {
        ConfigError::new(
            "service",
            service,
            "a host that is a DNS name or an IP address (the TLS server name)",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_errors_name_tls_roots() {
        assert_eq!(TlsConfig::from_pem(b"").unwrap_err().field(), "tls.roots");
        let junk = b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n";
        assert_eq!(TlsConfig::from_pem(junk).unwrap_err().field(), "tls.roots");
    }

    #[test]
    fn alpn_defaults_to_h2_then_http1() {
        let tls = TlsConfig::with_roots(RootCertStore::empty()).unwrap();
        assert_eq!(
            tls.rustls().alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(!tls.is_http2_only());
        let h2 = tls.clone().http2_only();
        assert!(h2.is_http2_only());
        assert_eq!(
            h2.http1_only().rustls().alpn_protocols,
            [b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn only_https_services() {
        let origin = Origin::parse("http://api.internal").unwrap();
        assert_eq!(check_https(&origin).unwrap_err().field(), "service");
        let origin = Origin::parse("https://api.internal:8443").unwrap();
        assert!(check_https(&origin).is_ok());
    }
}
