//! What the lab's users, endpoints and replicas exchange: the request and
//! response types, the error of a request that got no answer, and the
//! headers both sides read.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use super::replica::body::LabBody;

/// What a virtual user sends.
pub type LabRequest = http::Request<Full<Bytes>>;

/// What it gets back (the user reads the body to its end).
pub type LabResponse = http::Response<LabBody>;

/// The request header that makes a request a stream: its value is how long
/// the body streams, in milliseconds.
pub const STREAM_HEADER: &str = "x-lab-stream";

/// How long a request's body streams, if it is a stream.
pub fn stream_hold(req: &http::Request<impl Sized>) -> Option<Duration> {
    let ms: u64 = req
        .headers()
        .get(STREAM_HEADER)?
        .to_str()
        .ok()?
        .parse()
        .ok()?;
    Some(Duration::from_millis(ms))
}

/// A request that got no HTTP answer.
#[derive(Debug, Clone)]
pub struct EndpointError(pub String);

impl std::fmt::Display for EndpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EndpointError {}

/// The lab's errors say nothing more than "failed" to the HTTP classifier.
impl tower_lb::http::ClassifyError for EndpointError {}

/// The response header naming the backend that answered.
pub const BACKEND_HEADER: &str = "x-lab-backend";

/// The [`BACKEND_HEADER`] value of backend `i` named `name`: the name, or
/// `backend-<i+1>` when the name cannot be a header value.
pub fn backend_tag(i: usize, name: &str) -> http::HeaderValue {
    http::HeaderValue::from_str(name)
        .or_else(|_| http::HeaderValue::from_str(&format!("backend-{}", i + 1)))
        .unwrap_or_else(|_| http::HeaderValue::from_static("backend"))
}
