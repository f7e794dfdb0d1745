//! [`ReqwestHttps`]: one `reqwest::Client` per HTTPS replica.

use std::fmt;
use std::sync::Arc;

use reqwest::ClientBuilder;

use super::{TlsConfig, check_https};
use crate::error::ConfigError;
use crate::http::{MakeClient, Origin, Target};

/// Adjusts each replica's `reqwest::ClientBuilder`.
type Configure = Arc<dyn Fn(ClientBuilder) -> ClientBuilder + Send + Sync>;

/// The endpoint factory of HTTPS replicas over reqwest (features `reqwest`
/// and `rustls`): per address, a `reqwest::Client` of its own (its own
/// pool) that resolves the service's name to that address only
/// (`ClientBuilder::resolve`) and verifies the certificate for the name.
///
/// What reqwest needed: `resolve(name, addr)` per client, so the URL and
/// `Host` keep the name; reqwest's rustls backend without a provider
/// (`rustls-no-provider`) fed a preconfigured `rustls::ClientConfig` (the
/// [`TlsConfig`], *ring*, ALPN `h2` + `http/1.1`), and its `http2` feature.
///
/// With [`TlsConfig::http2_only`], clients are HTTP/2-only too
/// (`http2_prior_knowledge`), so that a cold burst shares one connection.
///
/// reqwest dials the URL's port when the URL has one: name the service
/// without a port (`https://api.internal`) to dial each address's own
/// port; a service port that differs from an address's is refused.
#[derive(Clone)]
#[cfg_attr(docsrs, doc(cfg(all(feature = "reqwest", feature = "rustls"))))]
pub struct ReqwestHttps {
    tls: TlsConfig,
    configure: Option<Configure>,
}

impl ReqwestHttps {
    /// Clients with reqwest's defaults and `tls`.
    pub fn new(tls: TlsConfig) -> Self {
        Self {
            tls,
            configure: None,
        }
    }

    /// Applies `configure` to every replica's builder first (timeouts,
    /// default headers, pool settings); resolution, TLS and HTTPS-only are
    /// set after it.
    pub fn configure(
        mut self,
        configure: impl Fn(ClientBuilder) -> ClientBuilder + Send + Sync + 'static,
    ) -> Self {
        self.configure = Some(Arc::new(configure));
        self
    }
}

impl MakeClient for ReqwestHttps {
    type Client = reqwest::Client;

    fn check(&self, service: &Origin) -> Result<(), ConfigError> {
        check_https(service).map(drop)
    }

    fn make_client(&self, target: &Target<'_>) -> Result<reqwest::Client, ConfigError> {
        if target
            .service
            .port()
            .is_some_and(|p| p != target.addr.port())
        {
            return Err(ConfigError::new(
                "addr",
                target.addr,
                "the service's port (reqwest dials the URL's port: name the service \
                 without a port to dial each address's own)",
            ));
        }
        let builder = reqwest::Client::builder();
        let mut builder = match &self.configure {
            Some(configure) => configure(builder),
            None => builder,
        };
        if self.tls.is_http2_only() {
            builder = builder.http2_prior_knowledge();
        }
        builder
            .resolve(target.server_name, target.addr)
            .https_only(true)
            .tls_backend_preconfigured(rustls::ClientConfig::clone(self.tls.rustls()))
            .build()
            .map_err(|e| {
                ConfigError::new(
                    "reqwest",
                    e.to_string(),
                    "a client reqwest can build (with rustls 0.23 as its TLS backend)",
                )
            })
    }
}

impl fmt::Debug for ReqwestHttps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReqwestHttps")
            .field("tls", &self.tls)
            .field("configure", &self.configure.is_some())
            .finish()
    }
}
