//! Load reports from real servers on 127.0.0.1: hyper servers sending the
//! `endpoint-load-metrics` header (TEXT and JSON), tonic servers sending
//! the `endpoint-load-metrics-bin` trailer (and a trailers-only head); the
//! balancer's picks follow the reports, and the Prometheus exposition
//! carries the reported utilization and the adaptive limits.
#![cfg(all(feature = "http", feature = "grpc", feature = "prometheus"))]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tower::{Service, ServiceExt};
use tower_lb::endpoint::{AdaptiveConcurrency, EndpointState};
use tower_lb::metrics::Metrics;
use tower_lb::metrics::prometheus::Exporter;
use tower_lb::pick::OrcaRoundRobin;

/// A58 weights at once (no blackout), recomputed every 100 ms.
fn picker() -> OrcaRoundRobin {
    OrcaRoundRobin::new()
        .blackout_period(Duration::ZERO)
        .weight_update_period(Duration::from_millis(100))
}

/// Shares of picks per endpoint key, from the balancer's own counts.
fn picks(states: &[(String, Arc<EndpointState>)]) -> BTreeMap<String, u64> {
    states.iter().map(|(k, s)| (k.clone(), s.picks())).collect()
}

fn share_delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, key: &str) -> f64 {
    let total: u64 = after.values().sum::<u64>() - before.values().sum::<u64>();
    (after[key] - before[key]) as f64 / total as f64
}

// ------------------------------------------------------------------ HTTP

/// A hyper server answering 200 with `report` in `endpoint-load-metrics`.
async fn reporting(report: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let svc = service_fn(move |_: hyper::Request<Incoming>| async move {
                let mut res = hyper::Response::new(Full::new(Bytes::from_static(b"ok")));
                res.headers_mut()
                    .insert("endpoint-load-metrics", report.parse().unwrap());
                Ok::<_, Infallible>(res)
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    format!("http://{addr}")
}

fn get() -> http::Request<Empty<Bytes>> {
    http::Request::get("/x").body(Empty::new()).unwrap()
}

#[tokio::test]
async fn hyper_servers_reports_steer_picks_and_reach_the_exposition() {
    // A58 weights 100/0.2 = 500, 100/0.4 = 250, 100/(0.8 + 20/100) = 100.
    let origins = vec![
        reporting("TEXT cpu_utilization=0.2, rps_fractional=100").await,
        reporting(r#"JSON {"cpuUtilization": 0.4, "rpsFractional": 100}"#).await,
        reporting(
            "TEXT application_utilization=0.8, cpu_utilization=0.1, rps_fractional=100, eps=20",
        )
        .await,
    ];
    let exporter = Exporter::new().unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let lb = tower_lb::http::balance(client, &origins)
        .unwrap()
        .picker(picker())
        .adaptive_concurrency(AdaptiveConcurrency::new())
        .metrics(Metrics::new(&exporter.meter(), "orca"))
        .build()
        .unwrap();
    let states = || -> Vec<(String, Arc<EndpointState>)> {
        lb.handle()
            .endpoints()
            .into_iter()
            .map(|(k, s)| (k.to_string(), s))
            .collect()
    };
    let call = || async {
        let res = lb.clone().oneshot(get()).await.unwrap();
        assert_eq!(res.status(), 200);
        res.into_body().collect().await.unwrap();
    };
    // Round robin until every endpoint has reported, then new weights at
    // the next update.
    for _ in 0..30 {
        call().await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let before = picks(&states());
    for _ in 0..850 {
        call().await;
    }
    let after = picks(&states());
    let want = [500.0 / 850.0, 250.0 / 850.0, 100.0 / 850.0];
    for (o, w) in origins.iter().zip(want) {
        let got = share_delta(&before, &after, o);
        assert!((got - w).abs() < 0.03, "{o}: {got} want {w}");
    }
    for (_, s) in states() {
        assert_eq!(s.load_reports(), s.picks(), "every answer reported");
        assert_eq!(
            (s.load_reports_malformed(), s.load_values_rejected()),
            (0, 0)
        );
    }

    // The exposition: utilization as reported (application before CPU),
    // and each endpoint's adaptive limit.
    let text = exporter.render().unwrap();
    let mut util = BTreeMap::new();
    let mut limit = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = series.split('{').next().unwrap();
        let Some(ep) = series
            .split("lb_endpoint=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
        else {
            continue;
        };
        let v: f64 = value.parse().unwrap();
        match name {
            "lb_endpoint_load_utilization_ratio" => util.insert(ep.to_string(), v),
            "lb_endpoint_concurrency_limit" => limit.insert(ep.to_string(), v),
            _ => None,
        };
    }
    let want_util: BTreeMap<String, f64> = origins.iter().cloned().zip([0.2, 0.4, 0.8]).collect();
    assert_eq!(util, want_util, "{text}");
    // One call at a time never reaches half the limit: it stays at the
    // initial 20 whatever the network's jitter.
    let want_limit: BTreeMap<String, f64> = origins.iter().map(|o| (o.clone(), 20.0)).collect();
    assert_eq!(limit, want_limit, "{text}");

    // The dashboard's panels query these two names.
    let dash = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/grafana/tower-lb.json"
    ))
    .unwrap();
    for name in [
        "lb_endpoint_load_utilization_ratio",
        "lb_endpoint_concurrency_limit",
    ] {
        assert!(dash.contains(name), "dashboard lacks {name}");
        assert!(text.contains(name), "exposition lacks {name}");
    }
}

// ------------------------------------------------------------------ gRPC

/// The one message type, both ways (prost derive, no protoc).
#[derive(Clone, PartialEq, prost::Message)]
struct Echo {
    #[prost(string, tag = "1")]
    text: String,
}

/// The fields of `xds.data.orca.v3.OrcaLoadReport` a server sends here.
#[derive(Clone, PartialEq, prost::Message)]
struct OrcaLoadReport {
    #[prost(double, tag = "1")]
    cpu_utilization: f64,
    #[prost(double, tag = "6")]
    rps_fractional: f64,
    #[prost(double, tag = "9")]
    application_utilization: f64,
}

fn report_bin(cpu: f64, rps: f64) -> MetadataValue<tonic::metadata::Binary> {
    let msg = OrcaLoadReport {
        cpu_utilization: cpu,
        rps_fractional: rps,
        application_utilization: 0.0,
    };
    MetadataValue::from_bytes(&prost::Message::encode_to_vec(&msg))
}

/// A tonic server for `/test.Echo/Say`: answers OK with the report in its
/// trailers, or (`fail`) a trailers-only RESOURCE_EXHAUSTED with the report
/// in its headers.
#[derive(Clone)]
struct Reporter {
    cpu: f64,
    fail: bool,
}

impl tonic::server::NamedService for Reporter {
    const NAME: &'static str = "test.Echo";
}

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<http::Request<tonic::body::Body>> for Reporter {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFut<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let me = self.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Echo, Echo>::default());
            let res = grpc.unary(Unary(me.clone()), req).await;
            if me.fail {
                return Ok(res);
            }
            // OK answers: the report joins grpc-status in the trailers.
            let mut md = MetadataMap::new();
            md.insert_bin("endpoint-load-metrics-bin", report_bin(me.cpu, 100.0));
            let extra = md.into_headers();
            Ok(res.map(|body| tonic::body::Body::new(WithTrailers { inner: body, extra })))
        })
    }
}

struct Unary(Reporter);

impl Service<tonic::Request<Echo>> for Unary {
    type Response = tonic::Response<Echo>;
    type Error = Status;
    type Future = BoxFut<Result<tonic::Response<Echo>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Echo>) -> Self::Future {
        let me = self.0.clone();
        Box::pin(async move {
            if me.fail {
                let mut md = MetadataMap::new();
                md.insert_bin("endpoint-load-metrics-bin", report_bin(me.cpu, 100.0));
                return Err(Status::with_metadata(Code::ResourceExhausted, "busy", md));
            }
            Ok(tonic::Response::new(req.into_inner()))
        })
    }
}

/// A body that adds `extra` to the trailers of `inner`.
struct WithTrailers {
    inner: tonic::body::Body,
    extra: http::HeaderMap,
}

impl hyper::body::Body for WithTrailers {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Status>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        Poll::Ready(frame.map(|f| {
            f.map(|f| match f.into_trailers() {
                Ok(mut t) => {
                    t.extend(self.extra.clone());
                    hyper::body::Frame::trailers(t)
                }
                Err(f) => f,
            })
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

async fn start(reporter: Reporter) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(reporter)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

async fn say<T>(transport: T) -> Result<Echo, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: hyper::body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut grpc = tonic::client::Grpc::new(transport);
    grpc.ready()
        .await
        .map_err(|e| Status::from_error(e.into()))?;
    let path = http::uri::PathAndQuery::from_static("/test.Echo/Say");
    let req = tonic::Request::new(Echo { text: "hi".into() });
    Ok(grpc
        .unary(req, path, ProstCodec::<Echo, Echo>::default())
        .await?
        .into_inner())
}

#[tokio::test]
async fn tonic_servers_trailer_reports_steer_picks() {
    // Weights 100/0.2 = 500 and 100/0.8 = 125: 80% and 20%.
    let a = start(Reporter {
        cpu: 0.2,
        fail: false,
    })
    .await;
    let b = start(Reporter {
        cpu: 0.8,
        fail: false,
    })
    .await;
    let lb = tower_lb::grpc::balance([&a, &b])
        .unwrap()
        .picker(picker())
        .build()
        .unwrap();
    let states = || -> Vec<(String, Arc<EndpointState>)> {
        lb.handle()
            .endpoints()
            .into_iter()
            .map(|(k, s)| (k.to_string(), s))
            .collect()
    };
    for _ in 0..20 {
        say(lb.clone()).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let before = picks(&states());
    for _ in 0..500 {
        say(lb.clone()).await.unwrap();
    }
    let after = picks(&states());
    let got = share_delta(&before, &after, &a);
    assert!((got - 0.8).abs() < 0.03, "{got}");
    let now = tokio::time::Instant::now();
    for (k, s) in states() {
        let want = if k == a { 0.2 } else { 0.8 };
        let r = s.reported_load(now).unwrap();
        assert_eq!(
            (r.cpu_utilization, r.rps_fractional),
            (Some(want), Some(100.0))
        );
        assert_eq!(s.load_reports(), s.picks());
    }
}

#[tokio::test]
async fn a_trailers_only_answer_reports_in_its_headers() {
    let c = start(Reporter {
        cpu: 0.95,
        fail: true,
    })
    .await;
    let lb = tower_lb::grpc::balance([&c]).unwrap().build().unwrap();
    let err = say(lb.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    let (_, s) = lb.handle().endpoints().remove(0);
    let r = s.reported_load(tokio::time::Instant::now()).unwrap();
    assert_eq!(r.cpu_utilization, Some(0.95));
    assert_eq!(s.load_reports(), 1);
}
