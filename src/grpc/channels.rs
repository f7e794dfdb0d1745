//! [`Channels`]: each replica's tonic channel made from one template
//! `Endpoint`, the settings a tonic user already writes.

use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use ::http::Uri;
use ::http::uri::Scheme;
use hyper_util::client::legacy::connect::HttpConnector;
use tonic::transport::{Channel, Endpoint};
use tower_service::Service;

use super::Classifier;
use crate::balance::{Balance, Builder};
use crate::error::{ConfigError, current_runtime};
use crate::http::Origin;
use crate::pick::PeakEwma;

/// Makes one lazily connecting tonic [`Channel`] per replica from a
/// template [`Endpoint`]: every setting of the template applies to every
/// replica, and each replica contributes only where to connect.
///
/// The template's URI names the **service**, as a gRPC channel's target
/// does for all its subchannels:
///
/// * its scheme is every replica's (`https` means TLS with the template's
///   `tls_config`; a replica origin of another scheme is refused);
/// * its authority is every call's `:authority`, unless the template sets
///   its own `origin`;
/// * with TLS, its host is the name each replica's certificate must prove,
///   unless the `ClientTlsConfig` sets `domain_name`. So replicas dialled by
///   address (`https://10.0.3.7:8443`, as discovery finds them) are verified
///   for the service's name.
///
/// Each replica's channel is the template cloned and connected over a
/// connector that dials the replica's host and port, so everything tonic
/// keeps in the `Endpoint` applies as tonic applies it: `timeout`,
/// `connect_timeout`, HTTP/2 keep-alive (interval, timeout, while idle),
/// window and frame sizes, header limits, `concurrency_limit`,
/// `rate_limit`, `buffer_size`, `user_agent`, `origin`, `tls_config`,
/// `executor`. The TCP options tonic applies in its own connector are read
/// back from the template (`tcp_nodelay`, `tcp_keepalive` and its interval
/// and retries) and set on this one. One difference from a channel tonic
/// dials itself: tonic bounds a custom connector's whole connect with
/// `connect_timeout`, so the TLS handshake counts against it too.
///
/// **Not applied:** `local_address` (tonic has no getter for it) and a
/// `unix:` template's socket path (such a template's URI reads as
/// `http://tonic`).
///
/// Each replica has its own channel, so its own HTTP/2 connection; a host
/// name is resolved on every (re)connect, by the system resolver.
///
/// ```no_run
/// use std::time::Duration;
/// use tonic::transport::Endpoint;
/// use tower_lb::grpc::Channels;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let template = Endpoint::from_static("http://greeter")
///     .connect_timeout(Duration::from_secs(1))
///     .timeout(Duration::from_secs(5))
///     .http2_keep_alive_interval(Duration::from_secs(30))
///     .user_agent("checkout/1.4")?;
/// let channels = Channels::new(template)?;
/// let lb = channels.balance(["http://10.0.0.1:50051", "http://10.0.0.2:50051"])?.build()?;
/// // Discovery adds replicas through the same template:
/// // Dns::builder("greeter.internal", 50051).build()?.spawn(lb.handle(), channels.discovery());
/// # drop(lb); Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Channels {
    template: Endpoint,
    scheme: Scheme,
    tcp: Tcp,
}

/// The TCP options tonic sets in its own connector, read from the template.
#[derive(Debug, Clone, Copy)]
struct Tcp {
    nodelay: bool,
    keepalive: Option<Duration>,
    keepalive_interval: Option<Duration>,
    keepalive_retries: Option<u32>,
}

impl Channels {
    /// Channels made from `template`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `template` when its URI is not `http://` or
    /// `https://` with a host.
    pub fn new(template: Endpoint) -> Result<Self, ConfigError> {
        let uri = template.uri();
        let scheme = uri
            .scheme()
            .filter(|s| **s == Scheme::HTTP || **s == Scheme::HTTPS)
            .filter(|_| uri.host().is_some_and(|h| !h.is_empty()))
            .cloned()
            .ok_or_else(|| {
                ConfigError::new(
                    "template",
                    uri,
                    "an Endpoint whose URI is http:// or https:// with a host (the service)",
                )
            })?;
        let tcp = Tcp {
            nodelay: template.get_tcp_nodelay(),
            keepalive: template.get_tcp_keepalive(),
            keepalive_interval: template.get_tcp_keepalive_interval(),
            keepalive_retries: template.get_tcp_keepalive_retries(),
        };
        Ok(Self {
            template,
            scheme,
            tcp,
        })
    }

    /// The template.
    pub fn template(&self) -> &Endpoint {
        &self.template
    }

    /// The channel of the replica at `origin` (its host and port; its
    /// scheme must be the template's).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `origins` when the scheme differs from the
    /// template's, or `runtime` outside a tokio runtime (a channel spawns
    /// its worker at once).
    pub fn channel(&self, origin: &Origin) -> Result<Channel, ConfigError> {
        if *origin.scheme() != self.scheme {
            return Err(ConfigError::new(
                "origins",
                origin,
                "an origin with the template's scheme",
            ));
        }
        current_runtime(
            "runtime",
            "a call inside a tokio runtime (tonic channels spawn their worker)",
        )?;
        let dial = Dial::new(self.connector(), origin)?;
        Ok(self.template.connect_with_connector_lazy(dial))
    }

    /// A [`Builder`] with one channel per origin in `origins` (each
    /// replica's `scheme://host:port`), keyed and labelled by origin, with
    /// the gRPC [`Classifier`] and the default picker. An empty list is
    /// allowed (discovery fills it).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `origins` for an origin that does not parse,
    /// repeats an earlier one or has another scheme than the template, or
    /// `runtime` outside a tokio runtime.
    pub fn balance<I>(
        &self,
        origins: I,
    ) -> Result<Builder<Origin, Channel, PeakEwma, Classifier>, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        current_runtime(
            "runtime",
            "a call inside a tokio runtime (tonic channels spawn their worker)",
        )?;
        let origins = crate::http::origins(origins).map_err(|e| e.on_field("origins"))?;
        let mut b = Balance::builder()
            .classify(Classifier::new())
            .labels(Origin::to_string);
        for origin in origins {
            let channel = self.channel(&origin)?;
            b = b.endpoint(origin, channel);
        }
        Ok(b)
    }

    /// The maker for discovery sources (DNS, xDS, `tower-lb-kube`): each
    /// new address becomes the endpoint `scheme://ip:port` (the template's
    /// scheme), with a channel made from the template, the same key a
    /// [`balance`](Self::balance) list gives. An address no origin can be
    /// made of (port 0) or found outside a runtime is skipped.
    pub fn discovery(&self) -> impl FnMut(SocketAddr) -> Option<(Origin, Channel)> + use<> {
        let channels = self.clone();
        move |addr| {
            let origin = Origin::from_socket_addr(channels.scheme.as_str(), addr).ok()?;
            let channel = channels.channel(&origin).ok()?;
            Some((origin, channel))
        }
    }

    /// A TCP connector with the template's options.
    fn connector(&self) -> HttpConnector {
        let mut http = HttpConnector::new();
        http.set_nodelay(self.tcp.nodelay);
        http.set_keepalive(self.tcp.keepalive);
        http.set_keepalive_interval(self.tcp.keepalive_interval);
        http.set_keepalive_retries(self.tcp.keepalive_retries);
        http
    }
}

/// A connector that dials one replica's `host:port` whatever URI the
/// channel asks for (the template's). TLS, when the template's scheme is
/// `https`, is tonic's, on top of it.
#[derive(Debug, Clone)]
struct Dial {
    inner: HttpConnector,
    to: Uri,
}

impl Dial {
    fn new(inner: HttpConnector, origin: &Origin) -> Result<Self, ConfigError> {
        // `HttpConnector` takes the port from an `http://` URI only; an
        // `https://` origin without one means 443.
        let port = origin
            .port()
            .unwrap_or(if *origin.scheme() == Scheme::HTTPS {
                443
            } else {
                80
            });
        let to = format!("http://{}:{port}", origin.host())
            .parse()
            .map_err(|_| ConfigError::new("origins", origin, "a host and port tonic can dial"))?;
        Ok(Self { inner, to })
    }
}

impl Service<Uri> for Dial {
    type Response = <HttpConnector as Service<Uri>>::Response;
    type Error = <HttpConnector as Service<Uri>>::Error;
    type Future = <HttpConnector as Service<Uri>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, _template: Uri) -> Self::Future {
        self.inner.call(self.to.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_names_an_http_or_https_service() {
        let err = Channels::new(Endpoint::from_static("ftp://greeter")).unwrap_err();
        assert_eq!(err.field(), "template");
        let ok = Channels::new(Endpoint::from_static("https://api.internal")).unwrap();
        assert_eq!(ok.scheme, Scheme::HTTPS);
    }

    #[test]
    fn tcp_options_are_read_from_the_template() {
        let t = Endpoint::from_static("http://greeter")
            .tcp_nodelay(false)
            .tcp_keepalive(Some(Duration::from_secs(7)))
            .tcp_keepalive_interval(Some(Duration::from_secs(2)))
            .tcp_keepalive_retries(Some(4));
        let tcp = Channels::new(t).unwrap().tcp;
        assert!(!tcp.nodelay);
        assert_eq!(tcp.keepalive, Some(Duration::from_secs(7)));
        assert_eq!(tcp.keepalive_interval, Some(Duration::from_secs(2)));
        assert_eq!(tcp.keepalive_retries, Some(4));
    }

    #[test]
    fn replicas_are_dialled_at_their_host_and_port() {
        let dial = |o: &str| {
            Dial::new(HttpConnector::new(), &Origin::parse(o).unwrap())
                .unwrap()
                .to
        };
        assert_eq!(dial("http://10.0.0.1:50051"), "http://10.0.0.1:50051/");
        assert_eq!(
            dial("https://greeter-0.greeter"),
            "http://greeter-0.greeter:443/"
        );
        assert_eq!(dial("http://[::1]"), "http://[::1]:80/");
    }

    #[test]
    fn another_scheme_and_no_runtime_are_config_errors() {
        let channels = Channels::new(Endpoint::from_static("http://greeter")).unwrap();
        let https = Origin::parse("https://10.0.0.1:50051").unwrap();
        assert_eq!(channels.channel(&https).unwrap_err().field(), "origins");
        let http = Origin::parse("http://10.0.0.1:50051").unwrap();
        assert_eq!(channels.channel(&http).unwrap_err().field(), "runtime");
        assert!(channels.discovery()("10.0.0.1:50051".parse().unwrap()).is_none());
    }
}
