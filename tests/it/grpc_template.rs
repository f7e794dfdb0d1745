//! A user's tonic `Endpoint` as the template of every replica's channel, and
//! a client generated from `helloworld.proto` over the balanced stack,
//! against real tonic servers on 127.0.0.1 (and 127.0.0.2 for TLS by
//! address): the template's settings reach every replica, from a static
//! list and from discovery.
#![cfg(all(feature = "grpc", feature = "dns", feature = "rustls"))]

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use helloworld::greeter_client::GreeterClient;
use helloworld::{HelloRequest, Replica};
use tonic::Code;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use tower::{Layer, ServiceBuilder};
use tower_lb::discover::Source;
use tower_lb::discover::dns::{Dns, Resolve};
use tower_lb::grpc::{self, Channels, StatusLayer};
use tower_lb::pick;
use tower_lb::retry::RetryLayer;

use crate::grpc_server::{Reply, say, start};
use crate::https::https_client;

/// Waits on the real clock (sockets) until `done`, failing after 10 s.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The balancer's endpoint keys.
fn origins<P, C>(
    lb: &tower_lb::Balance<tower_lb::http::Origin, tonic::transport::Channel, P, C>,
) -> Vec<String>
where
    P: pick::Picker,
{
    lb.handle()
        .endpoints()
        .iter()
        .map(|(k, _)| k.to_string())
        .collect()
}

/// The replica names of `calls` answers from a generated client over `lb`.
async fn greet<T>(client: &mut GreeterClient<T>, calls: usize) -> Vec<String>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let mut names = Vec::new();
    for i in 0..calls {
        let hello = HelloRequest {
            name: format!("caller-{i}"),
        };
        let reply = client.say_hello(hello).await.expect("an answer");
        let message = reply.into_inner().message;
        assert!(
            message.ends_with(&format!(": hello caller-{i}")),
            "{message}"
        );
        names.extend(message.split(':').next().map(str::to_owned));
    }
    names
}

#[tokio::test]
async fn a_generated_client_over_the_stack_carries_the_templates_settings_to_every_replica() {
    let (a, b) = (
        Replica::start("a").await.unwrap(),
        Replica::start("b").await.unwrap(),
    );
    let template = Endpoint::from_static("http://greeter.test")
        .timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(Duration::from_secs(30))
        .user_agent("checkout/1.4")
        .unwrap();
    let lb = grpc::balance_with(template, [&a.origin, &b.origin])
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let stack = ServiceBuilder::new()
        .layer(StatusLayer)
        .layer(RetryLayer::builder().build().unwrap())
        .service(lb.clone());
    let mut client = GreeterClient::new(stack);
    assert_eq!(greet(&mut client, 4).await, ["a", "b", "a", "b"]);
    for replica in [&a, &b] {
        let seen = replica.seen();
        assert_eq!(seen.len(), 2);
        for call in seen {
            // The template's authority, not the replica's address; tonic
            // appends its own name to the template's user agent.
            assert_eq!(call.authority, "greeter.test");
            assert!(
                call.user_agent.starts_with("checkout/1.4 tonic/"),
                "{call:?}"
            );
        }
    }
    // Keyed by the replica's origin, as `grpc::balance` keys them.
    let mut keys = origins(&lb);
    keys.sort();
    let mut want = vec![a.origin.clone(), b.origin.clone()];
    want.sort();
    assert_eq!(keys, want);
}

#[tokio::test]
async fn the_templates_request_timeout_ends_a_call_that_hangs() {
    let hang = start("h", |_| Reply::Hang).await;
    let template = Endpoint::from_static("http://echo").timeout(Duration::from_millis(100));
    let lb = grpc::balance_with(template, [&hang.origin])
        .unwrap()
        .build()
        .unwrap();
    // Without the template's timeout this call never ends: the guard fails it.
    let guard = Duration::from_secs(10);
    let answer = tokio::time::timeout(guard, say(StatusLayer.layer(lb), "x")).await;
    let status = answer
        .expect("the template's timeout ends the call")
        .unwrap_err();
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    assert!(status.message().contains("Timeout expired"), "{status:?}");
    assert_eq!(hang.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_template_of_another_scheme_than_the_replicas_is_refused() {
    let err = grpc::balance_with(
        Endpoint::from_static("https://api.internal"),
        ["http://127.0.0.1:50051"],
    )
    .err()
    .unwrap();
    assert_eq!(err.field(), "origins");
    let err = grpc::balance_with(Endpoint::from_static("ftp://api.internal"), ["http://a:1"])
        .err()
        .unwrap();
    assert_eq!(err.field(), "template");
}

/// Answers every name with fixed addresses (the replicas' own ports).
struct Fixed(Vec<SocketAddr>);

impl Resolve for Fixed {
    async fn resolve(&self, _host: &str, _port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(self.0.clone())
    }
}

#[tokio::test]
async fn discovery_adds_replicas_through_the_template_verified_for_the_services_name() {
    let pki = https_client::Pki::new().unwrap();
    let (chain, key) = pki.identity_pem(https_client::SERVICE).unwrap();
    let mut replicas = Vec::new();
    for (name, ip) in [("one", [127, 0, 0, 1]), ("two", [127, 0, 0, 2])] {
        let r = Replica::start_tls(name, ip.into(), &chain, &key)
            .await
            .unwrap();
        replicas.push(r);
    }
    // The certificates name api.internal only, not the addresses: a call
    // succeeds only if the template's host is the name verified.
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pki.ca_pem()));
    let template = Endpoint::from_static("https://api.internal")
        .tls_config(tls)
        .unwrap()
        .user_agent("checkout/1.4")
        .unwrap();
    let channels = Channels::new(template).unwrap();
    let lb = channels
        .balance(Vec::<String>::new())
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let dns = Dns::builder("api.internal", 443)
        .resolver(Fixed(replicas.iter().map(|r| r.addr).collect()))
        .build()
        .unwrap();
    let _driver = dns.spawn(lb.handle(), channels.discovery());
    eventually("both replicas discovered", || lb.handle().len() == 2).await;

    let mut keys = origins(&lb);
    keys.sort();
    let mut want: Vec<String> = replicas.iter().map(|r| r.origin.clone()).collect();
    want.sort();
    assert_eq!(keys, want);
    let mut client = GreeterClient::new(StatusLayer.layer(lb));
    let mut names = greet(&mut client, 4).await;
    names.sort();
    assert_eq!(names, ["one", "one", "two", "two"]);
    for r in &replicas {
        for call in r.seen() {
            assert_eq!(call.authority, "api.internal");
            assert!(call.user_agent.starts_with("checkout/1.4 "), "{call:?}");
        }
    }
}
