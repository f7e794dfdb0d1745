//! Prometheus text exposition (feature `prometheus`): an OpenTelemetry SDK
//! meter provider feeding a `prometheus` registry, and a `/metrics` answer
//! for hyper or axum.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::Balance;
//! use tower_lb::metrics::{Metrics, prometheus::Exporter};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let exporter = Exporter::new()?;
//! let replica = service_fn(|n: u32| async move { Ok::<_, Infallible>(n) });
//! let mut lb = Balance::builder()
//!     .endpoint("a", replica)
//!     .metrics(Metrics::new(&exporter.meter(), "users"))
//!     .build()?;
//! lb.ready().await?.call(1).await?;
//!
//! let text = exporter.render()?;
//! assert!(text.contains(r#"lb_requests_total{lb_algorithm="peak_ewma",lb_endpoint="a",lb_name="users""#));
//!
//! // In a hyper or axum handler: `http::Response<String>`, status 200 and
//! // the Prometheus text content type (500 if encoding failed).
//! let res = exporter.response();
//! assert_eq!(res.status(), 200);
//! # Ok(()) }
//! ```

use std::fmt;

use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use opentelemetry::metrics::{Meter, MeterProvider};
use opentelemetry_sdk::error::OTelSdkError;
use opentelemetry_sdk::metrics::SdkMeterProvider;

pub use prometheus::{Error, Registry, TEXT_FORMAT};

/// An SDK meter provider whose only reader is a Prometheus exporter writing
/// into a [`Registry`]. Cheap to clone (both halves are shared handles).
#[derive(Clone)]
pub struct Exporter {
    registry: Registry,
    provider: SdkMeterProvider,
}

impl Exporter {
    /// A new registry and the meter provider feeding it.
    ///
    /// # Errors
    ///
    /// The SDK's error if the exporter cannot be built (it registers a
    /// collector in the registry).
    pub fn new() -> Result<Self, OTelSdkError> {
        Self::with_registry(Registry::new())
    }

    /// The meter provider feeding `registry` (which may hold other
    /// collectors of the application).
    ///
    /// # Errors
    ///
    /// The SDK's error if the exporter cannot register with `registry`.
    pub fn with_registry(registry: Registry) -> Result<Self, OTelSdkError> {
        let reader = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .build()?;
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        Ok(Self { registry, provider })
    }

    /// A meter with scope [`SCOPE`](super::SCOPE), for
    /// [`Metrics::new`](super::Metrics::new).
    pub fn meter(&self) -> Meter {
        self.provider.meter(super::SCOPE)
    }

    /// The meter provider, for the application's own instruments (or to
    /// install it with `opentelemetry::global::set_meter_provider`).
    pub fn provider(&self) -> &SdkMeterProvider {
        &self.provider
    }

    /// The registry the exporter writes to.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Collects every instrument and renders the Prometheus text format.
    /// Runs the observable instruments' callbacks: O(endpoints) per balancer.
    ///
    /// # Errors
    ///
    /// The encoder's error (a metric family it cannot encode).
    pub fn render(&self) -> Result<String, Error> {
        render(&self.registry)
    }

    /// [`render`](Self::render) as a `/metrics` response.
    pub fn response(&self) -> Response<String> {
        response(&self.registry)
    }
}

impl fmt::Debug for Exporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exporter").finish_non_exhaustive()
    }
}

/// Gathers `registry` and renders the Prometheus text format.
///
/// # Errors
///
/// The encoder's error (a metric family it cannot encode).
pub fn render(registry: &Registry) -> Result<String, Error> {
    prometheus::TextEncoder::new().encode_to_string(&registry.gather())
}

/// A `/metrics` response: 200 with [`TEXT_FORMAT`] and the text of
/// [`render`], or 500 with the error's message. `http::Response<String>`
/// is what hyper serves (`String` is an `http_body::Body`) and what an
/// axum handler may return.
pub fn response(registry: &Registry) -> Response<String> {
    let (status, ctype, body) = match render(registry) {
        Ok(text) => (StatusCode::OK, TEXT_FORMAT, text),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            e.to_string(),
        ),
    };
    let mut res = Response::new(body);
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    res
}
