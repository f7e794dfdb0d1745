//! Balancing over a Kubernetes Service's pods, run inside the cluster.
//!
//! The balancer follows the Service's EndpointSlices: ready pods take
//! traffic, terminating ones drain, zones become localities. Every second it
//! prints the endpoints and sends one request.
//!
//! ```text
//! kubectl -n shop run lb-demo --image=<your image with this example> \
//!     --overrides='{"spec":{"serviceAccountName":"lb-demo"}}' \
//!     -- kubernetes shop cart http
//! ```
//!
//! Arguments: namespace, Service name, port name (default `shop cart http`).
//! The pod's service account must be allowed to read the slices:
//!
//! ```yaml
//! apiVersion: v1
//! kind: ServiceAccount
//! metadata: { name: lb-demo, namespace: shop }
//! ---
//! apiVersion: rbac.authorization.k8s.io/v1
//! kind: Role
//! metadata: { name: endpointslice-reader, namespace: shop }
//! rules:
//!   - apiGroups: ["discovery.k8s.io"]
//!     resources: ["endpointslices"]
//!     verbs: ["get", "list", "watch"]
//! ---
//! apiVersion: rbac.authorization.k8s.io/v1
//! kind: RoleBinding
//! metadata: { name: lb-demo-reads-endpointslices, namespace: shop }
//! subjects:
//!   - kind: ServiceAccount
//!     name: lb-demo
//!     namespace: shop
//! roleRef:
//!   apiGroup: rbac.authorization.k8s.io
//!   kind: Role
//!   name: endpointslice-reader
//! ```
//!
//! In-cluster the API server is HTTPS: build your binary with kube's
//! `rustls-tls` feature (this crate leaves TLS to you) and a k8s-openapi
//! version feature. `kube::Client::try_default()` reads the service
//! account's token and CA, or `~/.kube/config` outside a cluster.

use std::time::Duration;

use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::ServiceExt;
use tower_lb::discover::{self, Source};
use tower_lb::http;
use tower_lb_kube::Kube;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let namespace = args.next().unwrap_or_else(|| "shop".into());
    let service = args.next().unwrap_or_else(|| "cart".into());
    let port = args.next().unwrap_or_else(|| "http".into());

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let lb = http::balance(client.clone(), Vec::<&str>::new())?.build()?;
    let kube = Kube::builder(
        kube::Client::try_default().await?,
        namespace,
        &*service,
        port,
    )
    .build()?;
    let stats = kube.stats();
    let _driver = kube.spawn(lb.handle(), discover::http_endpoints(client, "http")?);

    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        for (origin, state) in lb.handle().endpoints() {
            let zone = state.meta().locality().zone().to_owned();
            println!("{origin} zone={zone} draining={}", state.is_draining());
        }
        println!("updates={} errors={}", stats.updates(), stats.errors());
        let req = ::http::Request::get(format!("http://{service}/")).body(Empty::new())?;
        match lb.clone().oneshot(req).await {
            Ok(res) => println!("-> {}", res.status()),
            Err(e) => println!("-> {e}"),
        }
    }
}
