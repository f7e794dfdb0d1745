//! [`GrpcHealthCheck`]: an active health check over `grpc.health.v1`.

use std::sync::Arc;

use bytes::Bytes;
use http::uri::PathAndQuery;
use http_body::Body;
use tonic::client::{Grpc, GrpcService};
use tonic::codegen::StdError;
use tonic::{Code, Request, Status};
use tonic_prost::ProstCodec;

use crate::check::{Check, CheckFuture};

/// `grpc.health.v1.HealthCheckRequest`, written out with prost's derive
/// (two small messages do not warrant `protoc` at build time).
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse`; the `ServingStatus` enum is an
/// `int32` on the wire.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// `ServingStatus.SERVING`.
const SERVING: i32 = 1;

/// `ServingStatus`'s names, for the failure text.
fn status_name(status: i32) -> &'static str {
    match status {
        0 => "UNKNOWN",
        1 => "SERVING",
        2 => "NOT_SERVING",
        3 => "SERVICE_UNKNOWN",
        _ => "an unknown ServingStatus",
    }
}

const CHECK: &str = "/grpc.health.v1.Health/Check";
const WATCH: &str = "/grpc.health.v1.Health/Watch";

/// Which RPC of the health service a probe calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Check,
    Watch,
}

/// Probes an endpoint with the standard gRPC health service,
/// `grpc.health.v1.Health` (what `tonic-health`, grpc-go's and grpc-java's
/// health servers, Envoy's gRPC health checker and Kubernetes' `grpc`
/// probe speak), through the endpoint's own channel, and passes when the
/// named service is `SERVING`.
///
/// * [`check`](Self::check) calls the unary `Check`. An unknown service
///   fails with `NOT_FOUND`, which fails the probe.
/// * [`watch`](Self::watch) opens the server-streaming `Watch` and reads its
///   first message, the current status, then closes the stream. For
///   servers that serve `Watch` only (A17's client-side health checking
///   uses it); an unknown service answers `SERVICE_UNKNOWN`, which fails.
///   Each probe is one stream: the [driver](crate::check) keeps no stream
///   open between probes.
///
/// The service name is the one the server registered (`""`, the default,
/// is the whole server). Any other status, an error status, or no answer
/// within the check's timeout fails the probe, with the reason in the
/// health event. Cost: one RPC per probe over the endpoint's existing
/// channel (HTTP/2 stream, no new connection).
///
/// Works with any endpoint service tonic can call (`GrpcService`): the
/// `tonic::transport::Channel` of [`grpc::balance`](super::balance), or a
/// channel of your own.
///
/// ```no_run
/// use tower_lb::check::{self, HealthCheck};
/// use tower_lb::grpc::{self, GrpcHealthCheck};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let lb = grpc::balance(["http://10.0.0.1:50051", "http://10.0.0.2:50051"])?.build()?;
/// let probe = GrpcHealthCheck::check("helloworld.Greeter");
/// let checks = check::spawn(&lb, HealthCheck::default(), probe)?;
/// # checks.detach(); Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct GrpcHealthCheck {
    service: Arc<str>,
    method: Method,
}

impl GrpcHealthCheck {
    /// Probes with `Check` for `service` (`""` for the whole server).
    pub fn check(service: impl Into<String>) -> Self {
        Self {
            service: Arc::from(service.into()),
            method: Method::Check,
        }
    }

    /// Probes with `Watch` for `service`, reading the first status only.
    pub fn watch(service: impl Into<String>) -> Self {
        Self {
            service: Arc::from(service.into()),
            method: Method::Watch,
        }
    }

    /// The service name the probe asks about.
    pub fn service(&self) -> &str {
        &self.service
    }
}

impl<K, S> Check<K, S> for GrpcHealthCheck
where
    S: GrpcService<tonic::body::Body> + Send + 'static,
    S::Future: Send,
    S::Error: Into<StdError>,
    S::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <S::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    fn run(&self, _key: &K, service: S) -> CheckFuture {
        let request = HealthCheckRequest {
            service: self.service.to_string(),
        };
        let method = self.method;
        Box::pin(async move {
            let mut grpc = Grpc::new(service);
            grpc.ready()
                .await
                .map_err(|e| format!("channel not ready: {}", e.into()))?;
            let status = match method {
                Method::Check => check(&mut grpc, request).await,
                Method::Watch => watch(&mut grpc, request).await,
            }
            .map_err(|s| describe(method, &s))?;
            if status == SERVING {
                Ok(())
            } else {
                Err(format!("{method:?}: {}", status_name(status)))
            }
        })
    }
}

/// The status `Check` answered.
async fn check<S>(grpc: &mut Grpc<S>, request: HealthCheckRequest) -> Result<i32, Status>
where
    S: GrpcService<tonic::body::Body>,
    S::Error: Into<StdError>,
    S::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <S::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let codec = ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
    let path = PathAndQuery::from_static(CHECK);
    let answer = grpc.unary(Request::new(request), path, codec).await?;
    Ok(answer.into_inner().status)
}

/// The first status `Watch` sent; the stream is closed when it drops.
async fn watch<S>(grpc: &mut Grpc<S>, request: HealthCheckRequest) -> Result<i32, Status>
where
    S: GrpcService<tonic::body::Body>,
    S::Error: Into<StdError>,
    S::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <S::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let codec = ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
    let path = PathAndQuery::from_static(WATCH);
    let mut stream = grpc
        .server_streaming(Request::new(request), path, codec)
        .await?
        .into_inner();
    match stream.message().await? {
        Some(first) => Ok(first.status),
        None => Err(Status::new(
            Code::Unknown,
            "the stream ended without a status",
        )),
    }
}

/// A failed RPC as the health event shows it.
fn describe(method: Method, status: &Status) -> String {
    format!("{method:?}: {:?}: {}", status.code(), status.message())
}

/// The old name of [`GrpcHealthCheck`].
#[deprecated(since = "0.1.0", note = "renamed `grpc::GrpcHealthCheck`")]
pub type GrpcHealthProbe = GrpcHealthCheck;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_messages_match_the_proto_on_the_wire() {
        use prost::Message;
        // HealthCheckRequest{service: "a.B"}: field 1, length-delimited.
        let bytes = HealthCheckRequest {
            service: "a.B".into(),
        }
        .encode_to_vec();
        assert_eq!(bytes, [0x0a, 3, b'a', b'.', b'B']);
        // HealthCheckResponse{status: NOT_SERVING}: field 1, varint 2.
        let r = HealthCheckResponse::decode(&[0x08, 2][..]).map(|r| r.status);
        assert_eq!(r, Ok(2));
        assert_eq!(status_name(2), "NOT_SERVING");
        assert_eq!(status_name(9), "an unknown ServingStatus");
    }

    #[test]
    fn constructors_keep_the_service_name() {
        assert_eq!(GrpcHealthCheck::check("").service(), "");
        let p = GrpcHealthCheck::watch("helloworld.Greeter");
        assert_eq!(
            (p.service(), p.method),
            ("helloworld.Greeter", Method::Watch)
        );
    }
}
