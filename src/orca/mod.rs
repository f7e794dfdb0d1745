//! Server-reported load: ORCA load reports (gRPC A51, Envoy), parsed into a
//! bounded [`LoadReport`] and fed into the endpoint model.
//!
//! A backend that knows its own load (CPU, queue, requests and errors per
//! second) can say so in every response. Independent client-side balancers
//! then see load that they did not send: the one thing a balancer counting
//! its own in-flight requests cannot know. The formats are ORCA's:
//!
//! * the `endpoint-load-metrics` header ([`HEADER`]), in TEXT form
//!   (`TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=120,
//!   eps=2, application_utilization=0.4, named_metrics.foo=1`; Envoy writes
//!   `key:value`, both are read), JSON form (`JSON {"cpuUtilization": 0.3,
//!   ...}`, proto3 JSON names or the proto field names) and BIN form (`BIN `
//!   and base64 of the protobuf, feature `grpc`);
//! * gRPC's `endpoint-load-metrics-bin` trailer ([`BIN_HEADER`]): the
//!   `xds.data.orca.v3.OrcaLoadReport` message, base64 on the wire (feature
//!   `grpc`; [`LoadReport::decode`] takes the decoded bytes).
//!
//! Parsing never panics and never trusts a value it cannot check: a value
//! that does not parse, is not finite or is out of its range (utilizations
//! below 0, memory above 1, negative rates), a duplicate, an unknown key or a
//! named metric past the bound ([`MAX_NAMED_METRICS`] names of at most
//! [`MAX_NAME_LEN`] bytes) is left out and counted in
//! [`LoadReport::rejected`]. Only a header that is not a report at all (an
//! unknown format, broken JSON, bad base64 or protobuf) is a [`ParseError`].
//! The TEXT and JSON parsers allocate nothing.
//!
//! A report reaches an endpoint's model from the response itself with the
//! HTTP classifier (`http::Classifier`: the header, hyper-util and reqwest
//! responses) and the gRPC classifier (`grpc::Classifier`: the trailer, or
//! the head of a trailers-only answer), or through
//! [`Handle::report_load`](crate::Handle::report_load) and
//! [`EndpointState::report_load`](crate::endpoint::EndpointState::report_load)
//! for any other transport. A header that is no report is counted
//! ([`EndpointState::load_reports_malformed`](crate::endpoint::EndpointState::load_reports_malformed)).
//! The model trusts utilizations up to [`MAX_UTILIZATION`] (past it a value
//! is left out and counted, so no report can lock an endpoint out), keeps
//! the last report, trusts it for a bounded time
//! ([`Builder::load_report_expiry`](crate::balance::Builder::load_report_expiry),
//! default [`DEFAULT_REPORT_EXPIRY`]) and feeds the pickers that read it:
//! [`OrcaRoundRobin`](crate::pick::OrcaRoundRobin) (A58's weights) and
//! [`PeakEwma::utilization`](crate::pick::PeakEwma::utilization).
//!
//! ```
//! use tower_lb::orca::LoadReport;
//!
//! let r = LoadReport::parse("TEXT cpu_utilization=0.3, rps_fractional=120, eps=2, named_metrics.foo=1")?;
//! assert_eq!(r.cpu_utilization(), Some(0.3));
//! assert_eq!(r.rps_fractional(), Some(120.0));
//! assert_eq!(r.named_metric("foo"), Some(1.0));
//! assert_eq!(r.utilization(), Some(0.3)); // no application utilization: CPU
//!
//! let r = LoadReport::parse("TEXT cpu_utilization=-1, eps=NaN, rps_fractional=10")?;
//! assert_eq!((r.cpu_utilization(), r.eps(), r.rejected()), (None, None, 2));
//! # Ok::<_, tower_lb::orca::ParseError>(())
//! ```

#[cfg(feature = "http")]
mod headers;
mod json;
mod named;
#[cfg(feature = "grpc")]
mod proto;
mod report;
mod text;

use std::fmt;
use std::time::Duration;

pub use named::{MAX_NAME_LEN, MAX_NAMED_METRICS, NamedMetrics};
pub use report::LoadReport;

/// The response header carrying a report in TEXT, JSON or BIN form.
pub const HEADER: &str = "endpoint-load-metrics";

/// The gRPC trailer (or header) carrying the binary report, base64 on the wire.
pub const BIN_HEADER: &str = "endpoint-load-metrics-bin";

/// The named metric of a server's requests in flight (RIF), as
/// [`server`](crate::server) reports it and probing pickers read it.
pub const RIF_METRIC: &str = "rif";

/// The named metric of the latency, in milliseconds, a request arriving now
/// can expect at the server's current RIF (Prequal's estimate: the median
/// of recent latencies at that RIF).
pub const LATENCY_METRIC: &str = "latency_ms";

/// How long the model trusts an endpoint's last report by default: 3
/// minutes, A58's `weight_expiration_period`. Past it, the endpoint counts
/// as reporting nothing (A58 weighs it at the mean; `PeakEwma` drops the
/// utilization term), and a new report starts a new stream (A58's blackout
/// applies again).
pub const DEFAULT_REPORT_EXPIRY: Duration = Duration::from_secs(180);

/// The largest CPU or application utilization the endpoint model trusts:
/// 4. ORCA lets utilization exceed 1 past a soft limit and sets no bound,
/// but [`PeakEwma::utilization`](crate::pick::PeakEwma::utilization)
/// charges an endpoint `floor × u` fading as `e^(−age/fade)`, so one
/// report keeps it from picks for about `fade × ln u`: 180 s (the report
/// expiry) for `1e308`, 13 s for `1e6`, 1.7 s for `10` (issue 30), and a
/// replica sending such values on every answer was out for good. Past 4 a
/// report outweighs any peer of the same speed with up to three calls per
/// unit of parallelism in flight, so a larger value changes no pick a true
/// one would not, and is usually a mistake (a percentage sent as a
/// fraction: `50` for 0.5). The model leaves such a value out like a
/// malformed one, counted in
/// [`EndpointState::load_values_rejected`](crate::endpoint::EndpointState::load_values_rejected):
/// the endpoint reads as unreported (its last trusted report ages as
/// usual), for every picker. A trusted report keeps its endpoint out at
/// most `fade × ln 4` (1.4 s at the default 1 s fade) against an idle peer
/// of the same speed (`tests/conformance/reports.rs`). [`LoadReport`] keeps
/// what the endpoint sent.
pub const MAX_UTILIZATION: f64 = 4.0;

/// Why a header value is not a load report at all. Bad values inside a
/// report are not errors: they are left out and counted
/// ([`LoadReport::rejected`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The value starts with none of `TEXT `, `JSON `, `BIN `.
    UnknownFormat,
    /// A JSON report that is not one JSON object.
    Json,
    /// A BIN report or binary trailer that is not base64 of an
    /// `OrcaLoadReport` message.
    Binary,
    /// A BIN report while the crate is built without feature `grpc`.
    BinaryUnsupported,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParseError::UnknownFormat => {
                "not an ORCA load report: expected a TEXT, JSON or BIN prefix"
            }
            ParseError::Json => "malformed JSON load report",
            ParseError::Binary => "malformed binary load report (base64 of OrcaLoadReport)",
            ParseError::BinaryUnsupported => "binary load reports need the `grpc` feature",
        })
    }
}

impl std::error::Error for ParseError {}

impl LoadReport {
    /// Parses an `endpoint-load-metrics` header value in any of its forms
    /// (`TEXT `, `JSON `, `BIN ` prefix).
    ///
    /// # Errors
    /// A [`ParseError`] when the value is not a report; bad values inside a
    /// report are counted in [`rejected`](Self::rejected) instead.
    pub fn parse(value: &str) -> Result<LoadReport, ParseError> {
        let value = value.trim_ascii_start();
        if let Some(rest) = value.strip_prefix("TEXT ") {
            Ok(text::parse(rest))
        } else if let Some(rest) = value.strip_prefix("JSON ") {
            json::parse(rest)
        } else if let Some(rest) = value.strip_prefix("BIN ") {
            Self::from_base64(rest.trim_ascii().as_bytes())
        } else {
            Err(ParseError::UnknownFormat)
        }
    }

    /// The report in TEXT form, as [`HEADER`] carries it
    /// (`TEXT cpu_utilization=0.3, named_metrics.rif=3`): every value set,
    /// in shortest round-trip decimals, so [`parse`](Self::parse) gives the
    /// same report back. One allocation.
    pub fn to_text(&self) -> String {
        let mut out = String::with_capacity(128);
        text::write(self, &mut out);
        out
    }

    /// Base64 of the binary message (a BIN header, the `-bin` trailer).
    #[cfg(feature = "grpc")]
    fn from_base64(text: &[u8]) -> Result<LoadReport, ParseError> {
        proto::from_base64(text)
    }

    #[cfg(not(feature = "grpc"))]
    fn from_base64(_: &[u8]) -> Result<LoadReport, ParseError> {
        Err(ParseError::BinaryUnsupported)
    }
}
