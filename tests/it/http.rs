//! The HTTP integrations against real hyper servers on 127.0.0.1.
#![cfg(feature = "http")]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::header::HOST;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};
use tower_lb::classify::{Classify, FailureKind, Outcome};
use tower_lb::http::{Classifier, HostHeader, Origin, SetOrigin, balance};
use tower_lb::{Balance, Error, pick};

#[allow(dead_code)]
#[path = "../../examples/hyper_client.rs"]
mod hyper_client;

type HyperClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

/// What an echo backend received.
#[derive(Debug)]
struct Echo(HashMap<String, String>);

impl Echo {
    fn parse(body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        let fields = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Echo(fields)
    }

    fn get(&self, field: &str) -> &str {
        self.0.get(field).map_or("<missing>", String::as_str)
    }
}

/// Starts a backend that echoes its name, the method, URI, `Host` and
/// `x-trace` it received. `/status/N` answers with status N and
/// `Retry-After: 3`.
async fn echo_backend(name: &str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let name = name.to_owned();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let name = name.clone();
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let header = |h: &str| {
                    req.headers()
                        .get(h)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-")
                        .to_owned()
                };
                let body = format!(
                    "backend={name}\nmethod={}\nuri={}\nhost={}\nx-trace={}\n",
                    req.method(),
                    req.uri(),
                    header("host"),
                    header("x-trace"),
                );
                let mut res = hyper::Response::new(Full::new(Bytes::from(body)));
                if let Some(code) = req.uri().path().strip_prefix("/status/") {
                    *res.status_mut() = code.parse().unwrap();
                    res.headers_mut()
                        .insert("retry-after", http::HeaderValue::from_static("3"));
                }
                async move { Ok::<_, Infallible>(res) }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    addr
}

/// Three echo backends and their origins.
async fn backends() -> (Vec<SocketAddr>, Vec<String>) {
    let mut addrs = Vec::new();
    for name in ["b0", "b1", "b2"] {
        addrs.push(echo_backend(name).await);
    }
    let origins = addrs.iter().map(|a| format!("http://{a}")).collect();
    (addrs, origins)
}

/// A port nothing listens on.
async fn dead_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

fn hyper_client() -> HyperClient {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn send<S, B>(lb: &mut S, req: http::Request<Empty<Bytes>>) -> Echo
where
    S: Service<http::Request<Empty<Bytes>>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: hyper::body::Body,
    B::Error: std::fmt::Debug,
{
    let res = lb.ready().await.unwrap().call(req).await.unwrap();
    Echo::parse(&res.into_body().collect().await.unwrap().to_bytes())
}

#[tokio::test]
async fn hyper_reaches_every_endpoint_with_path_query_and_headers() {
    let (addrs, origins) = backends().await;
    let mut lb = balance(hyper_client(), &origins)
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let mut seen = HashMap::new();
    for i in 0..6 {
        let req = http::Request::post(format!("http://my-service/api/v1/items?page={i}&sort=asc"))
            .header("x-trace", format!("trace-{i}"))
            .body(Empty::new())
            .unwrap();
        let echo = send(&mut lb, req).await;
        assert_eq!(echo.get("method"), "POST");
        assert_eq!(echo.get("uri"), format!("/api/v1/items?page={i}&sort=asc"));
        assert_eq!(echo.get("x-trace"), format!("trace-{i}"));
        let backend = echo.get("backend").to_owned();
        let idx: usize = backend[1..].parse().unwrap();
        // No Host header was set: the client derives it from the endpoint.
        assert_eq!(echo.get("host"), addrs[idx].to_string());
        *seen.entry(backend).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.values().all(|&n| n == 2), "{seen:?}");
}

#[tokio::test]
async fn the_http_layer_wraps_a_hyper_client_in_a_balancer() {
    let (_, origins) = backends().await;
    let layer = tower_lb::http::layer_builder()
        .picker(pick::RoundRobin::new())
        .layer(
            tower_lb::http::origins(&origins).unwrap(),
            tower_lb::http::ToOrigin,
        )
        .unwrap();
    let mut lb = tower::ServiceBuilder::new()
        .layer(layer)
        .service(hyper_client());
    let mut seen = Vec::new();
    for _ in 0..3 {
        let req = http::Request::get("/x").body(Empty::new()).unwrap();
        seen.push(send(&mut lb, req).await.get("backend").to_owned());
    }
    assert_eq!(seen, ["b0", "b1", "b2"]);
    // The default form, as a one-liner.
    let lb = tower::ServiceBuilder::new()
        .layer(tower_lb::http::layer(&origins).unwrap())
        .service(hyper_client());
    assert_eq!(lb.handle().len(), 3);
}

#[tokio::test]
async fn hyper_origin_form_request_gets_the_endpoint_host() {
    let (addrs, origins) = backends().await;
    let mut lb = balance(hyper_client(), &origins[..1])
        .unwrap()
        .build()
        .unwrap();
    let req = http::Request::get("/only/path?x=1")
        .body(Empty::new())
        .unwrap();
    let echo = send(&mut lb, req).await;
    assert_eq!(echo.get("uri"), "/only/path?x=1");
    assert_eq!(echo.get("host"), addrs[0].to_string());
}

#[tokio::test]
async fn hyper_keeps_an_explicit_host() {
    let (_, origins) = backends().await;
    let mut lb = balance(hyper_client(), &origins).unwrap().build().unwrap();
    for _ in 0..3 {
        let req = http::Request::get("http://my-service/x")
            .header(HOST, "vhost.example")
            .body(Empty::new())
            .unwrap();
        assert_eq!(send(&mut lb, req).await.get("host"), "vhost.example");
    }
}

/// A balancer whose endpoints use `host` for the `Host` header.
fn with_host_policy(
    client: HyperClient,
    origins: &[String],
    host: HostHeader,
) -> Balance<Origin, SetOrigin<HyperClient>, pick::RoundRobin, Classifier> {
    let mut builder = Balance::builder()
        .picker(pick::RoundRobin::new())
        .classify(Classifier::default());
    for text in origins {
        let origin = Origin::parse(text).unwrap();
        let svc = SetOrigin::new(client.clone(), origin.clone()).host_header(host);
        builder = builder.endpoint(origin, svc);
    }
    builder.build().unwrap()
}

#[tokio::test]
async fn host_header_endpoint_replaces_an_explicit_host() {
    let (addrs, origins) = backends().await;
    let mut lb = with_host_policy(hyper_client(), &origins, HostHeader::Endpoint);
    for _ in 0..3 {
        let req = http::Request::get("/x")
            .header(HOST, "vhost.example")
            .body(Empty::new())
            .unwrap();
        let echo = send(&mut lb, req).await;
        let idx: usize = echo.get("backend")[1..].parse().unwrap();
        assert_eq!(echo.get("host"), addrs[idx].to_string());
    }
}

#[tokio::test]
async fn host_header_original_sends_the_logical_name() {
    let (_, origins) = backends().await;
    let mut lb = with_host_policy(hyper_client(), &origins, HostHeader::Original);
    let req = http::Request::get("http://api.internal:8000/x?y")
        .body(Empty::new())
        .unwrap();
    let echo = send(&mut lb, req).await;
    assert_eq!(echo.get("host"), "api.internal:8000");
    assert_eq!(echo.get("uri"), "/x?y");
    // An explicit Host still wins.
    let req = http::Request::get("http://api.internal/x")
        .header(HOST, "vhost.example")
        .body(Empty::new())
        .unwrap();
    assert_eq!(send(&mut lb, req).await.get("host"), "vhost.example");
}

#[test]
fn bad_authorities_are_config_errors_naming_authority() {
    let client = hyper_client();
    for bad in [
        "10.0.0.1:8080",
        "ftp://10.0.0.1:21",
        "http://10.0.0.1:8080/path",
        "http://10.0.0.1:8080?q=1",
        "http://user:pw@10.0.0.1:8080",
        "http://10.0.0.1:0",
        "http://",
        "not a uri",
    ] {
        let Err(err) = balance(client.clone(), ["http://127.0.0.1:1", bad]) else {
            panic!("{bad} was accepted");
        };
        assert_eq!(err.field(), "authority", "{bad}");
        assert!(err.to_string().contains("authority"), "{err}");
    }
    let Err(dup) = balance(client, ["http://a:1", "HTTP://A:1/"]) else {
        panic!("a duplicate was accepted");
    };
    assert_eq!(dup.field(), "authority");
}

#[tokio::test]
async fn hyper_connect_error_is_a_connect_failure_of_the_endpoint() {
    let dead = dead_port().await;
    let client = hyper_client();
    let req = http::Request::get(format!("http://{dead}/"))
        .body(Empty::new())
        .unwrap();
    let err = client.clone().oneshot(req).await.unwrap_err();
    let outcome = Classify::<http::Response<Incoming>, _>::classify(
        &Classifier::default(),
        Err(&err),
        std::time::Duration::ZERO,
    );
    assert_eq!(outcome, Outcome::Failure(FailureKind::Connect));

    let mut lb = balance(client, [format!("http://{dead}")])
        .unwrap()
        .build()
        .unwrap();
    let req = http::Request::get("/").body(Empty::new()).unwrap();
    let err = lb.ready().await.unwrap().call(req).await.unwrap_err();
    assert!(
        matches!(err, Error::Inner(ref e) if e.is_connect()),
        "{err:?}"
    );
    let (_, state) = &lb.handle().endpoints()[0];
    assert_eq!(state.failures(), 1);
    assert_eq!(state.in_flight(), 0);
}

#[tokio::test]
async fn gateway_answers_fail_the_endpoint_and_4xx_do_not() {
    let (_, origins) = backends().await;
    let mut lb = balance(hyper_client(), &origins[..1])
        .unwrap()
        .build()
        .unwrap();
    let state = lb.handle().endpoints()[0].1.clone();
    for (path, failures) in [
        ("/ok", 0),
        ("/status/404", 0),
        ("/status/503", 1),
        ("/status/429", 2),
    ] {
        let req = http::Request::get(path).body(Empty::new()).unwrap();
        let res = lb.ready().await.unwrap().call(req).await.unwrap();
        drop(res);
        assert_eq!(state.failures(), failures, "{path}");
    }
    assert_eq!(state.requests(), 4);
}

/// An axum gateway that forwards every request through a Maglev balancer
/// keyed by the incoming connection (axum's `ConnectInfo`, read with
/// `Connection::peer_from`) to eight echo backends; returns its address.
async fn connection_hash_gateway() -> SocketAddr {
    use axum::extract::{ConnectInfo, Request};
    use tower_lb::http::Connection;
    let mut origins = Vec::new();
    for i in 0..8 {
        origins.push(format!("http://{}", echo_backend(&format!("b{i}")).await));
    }
    let key = Connection::peer_from(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0));
    let lb = balance(hyper_client(), &origins)
        .unwrap()
        .picker(pick::Maglev::new(key))
        .build()
        .unwrap();
    let app = axum::Router::new().fallback(move |req: Request| {
        let lb = lb.clone();
        async move {
            // The parts (with axum's `ConnectInfo` among the extensions) go
            // upstream; the body is empty in this test.
            let (parts, _) = req.into_parts();
            let res = lb
                .oneshot(http::Request::from_parts(parts, Empty::new()))
                .await;
            let body = res.unwrap().into_body().collect().await.unwrap().to_bytes();
            axum::body::Body::from(body)
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Azure's 5-tuple effect through a real axum gateway: the requests of one
/// kept-alive connection all reach one backend, while a new connection per
/// request (a new source port each) spreads like round robin.
#[tokio::test]
async fn the_connection_key_keeps_a_connection_and_spreads_new_ones() {
    let gw = connection_hash_gateway().await;
    let get = |client: &HyperClient| {
        let req = http::Request::get(format!("http://{gw}/x"))
            .body(Empty::new())
            .unwrap();
        let res = client.request(req);
        async move {
            let body = res
                .await
                .unwrap()
                .into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes();
            Echo::parse(&body).get("backend").to_owned()
        }
    };
    let kept = hyper_client();
    let mut one_connection = std::collections::HashSet::new();
    for _ in 0..20 {
        one_connection.insert(get(&kept).await);
    }
    assert_eq!(one_connection.len(), 1, "{one_connection:?}");
    let mut new_connections = std::collections::HashSet::new();
    for _ in 0..24 {
        new_connections.insert(get(&hyper_client()).await);
    }
    // 24 uniform draws over 8 backends land on at most 3 of them with
    // probability below 1e-8.
    assert!(new_connections.len() >= 4, "{new_connections:?}");
}

#[tokio::test]
async fn hyper_client_example_answers_from_every_backend() {
    let answers = hyper_client::run(6).await.unwrap();
    assert_eq!(answers.len(), 6);
    for (i, answer) in answers.iter().enumerate() {
        let backend = i % 3 + 1;
        assert_eq!(*answer, format!("backend-{backend} answered /hello?n={i}"));
    }
}

#[cfg(feature = "reqwest")]
mod reqwest_tests {
    use super::*;

    async fn send(
        lb: &mut Balance<Origin, SetOrigin<reqwest::Client>, pick::RoundRobin, Classifier>,
        req: reqwest::Request,
    ) -> Echo {
        let res = lb.ready().await.unwrap().call(req).await.unwrap();
        Echo::parse(&res.bytes().await.unwrap())
    }

    fn lb(
        client: &reqwest::Client,
        origins: &[String],
    ) -> Balance<Origin, SetOrigin<reqwest::Client>, pick::RoundRobin, Classifier> {
        balance(client.clone(), origins)
            .unwrap()
            .picker(pick::RoundRobin::new())
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn reqwest_reaches_every_endpoint_with_path_query_and_headers() {
        let (addrs, origins) = backends().await;
        let client = reqwest::Client::new();
        let mut lb = lb(&client, &origins);
        let mut seen = HashMap::new();
        for i in 0..6 {
            let req = client
                .put(format!("http://my-service/api/items/{i}?q=a%20b&n={i}"))
                .header("x-trace", format!("trace-{i}"))
                .build()
                .unwrap();
            let echo = send(&mut lb, req).await;
            assert_eq!(echo.get("method"), "PUT");
            assert_eq!(echo.get("uri"), format!("/api/items/{i}?q=a%20b&n={i}"));
            assert_eq!(echo.get("x-trace"), format!("trace-{i}"));
            let backend = echo.get("backend").to_owned();
            let idx: usize = backend[1..].parse().unwrap();
            assert_eq!(echo.get("host"), addrs[idx].to_string());
            *seen.entry(backend).or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(seen.values().all(|&n| n == 2), "{seen:?}");
    }

    #[tokio::test]
    async fn reqwest_keeps_an_explicit_host() {
        let (_, origins) = backends().await;
        let client = reqwest::Client::new();
        let mut lb = lb(&client, &origins);
        for _ in 0..3 {
            let req = client
                .get("http://my-service/x")
                .header(HOST, "vhost.example")
                .build()
                .unwrap();
            assert_eq!(send(&mut lb, req).await.get("host"), "vhost.example");
        }
    }

    #[tokio::test]
    async fn reqwest_connect_error_is_a_connect_failure_of_the_endpoint() {
        let dead = dead_port().await;
        let client = reqwest::Client::new();
        let mut lb = lb(&client, &[format!("http://{dead}")]);
        let req = client.get("http://my-service/").build().unwrap();
        let err = lb.ready().await.unwrap().call(req).await.unwrap_err();
        let Error::Inner(inner) = err else {
            panic!("expected the client's error, got {err:?}");
        };
        let outcome = Classify::<reqwest::Response, _>::classify(
            &Classifier::default(),
            Err(&inner),
            std::time::Duration::ZERO,
        );
        assert_eq!(outcome, Outcome::Failure(FailureKind::Connect));
        assert_eq!(lb.handle().endpoints()[0].1.failures(), 1);
    }
}
