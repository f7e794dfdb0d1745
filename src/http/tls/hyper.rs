//! [`HyperHttps`]: one hyper-util HTTPS client per replica.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::{Builder, Client};
use hyper_util::rt::TokioExecutor;

use super::{TlsConfig, check_https};
use crate::error::ConfigError;
use crate::http::{DialAddr, MakeClient, Origin, Target};

/// The hyper-util client of one HTTPS replica: hyper-rustls over a
/// [`DialAddr`], HTTPS only, HTTP/2 when the replica agrees to it by ALPN.
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub type HttpsClient<B> = Client<HttpsConnector<DialAddr>, B>;

/// The endpoint factory of HTTPS replicas over hyper-util (feature
/// `rustls`): per address, a [`Client`] of its own (its own pool) whose
/// connector dials that address and verifies the service's name.
///
/// What hyper-util needed: a connector with a fixed resolution
/// ([`DialAddr`]: the URI keeps the service's name, the socket goes to the
/// address), hyper-rustls with the server name pinned to the service's
/// name, and hyper-util's `http2` feature so that an `h2` ALPN answer
/// gives one multiplexed connection per replica.
///
/// `B` is the request body type, as for `Client<_, B>`.
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub struct HyperHttps<B> {
    tls: TlsConfig,
    builder: Builder,
    _body: PhantomData<fn(B)>,
}

impl<B> HyperHttps<B> {
    /// Clients with hyper-util's default settings on tokio.
    pub fn new(tls: TlsConfig) -> Self {
        Self::with_builder(tls, Client::builder(TokioExecutor::new()))
    }

    /// Clients built by `builder` (pool idle timeout, HTTP/2 settings).
    /// With [`TlsConfig::http2_only`], the builder is made HTTP/2-only too.
    pub fn with_builder(tls: TlsConfig, mut builder: Builder) -> Self {
        if tls.is_http2_only() {
            builder.http2_only(true);
        }
        Self {
            tls,
            builder,
            _body: PhantomData,
        }
    }
}

impl<B> MakeClient for HyperHttps<B>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    type Client = HttpsClient<B>;

    fn check(&self, service: &Origin) -> Result<(), ConfigError> {
        check_https(service).map(drop)
    }

    fn make_client(&self, target: &Target<'_>) -> Result<HttpsClient<B>, ConfigError> {
        let name = check_https(target.service)?;
        let connector = HttpsConnector::new(
            DialAddr::new(target.addr)?,
            Arc::clone(self.tls.rustls()),
            true,
            Arc::new(FixedServerNameResolver::new(name)),
        );
        Ok(self.builder.build(connector))
    }
}

impl<B> Clone for HyperHttps<B> {
    fn clone(&self) -> Self {
        Self::with_builder(self.tls.clone(), self.builder.clone())
    }
}

impl<B> fmt::Debug for HyperHttps<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HyperHttps")
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}
