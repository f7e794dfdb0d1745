//! A toy xDS management server: state-of-the-world ADS serving
//! `ClusterLoadAssignment`s, pushing every change to every stream, and
//! recording what the clients sent (ACKs and NACKs). Also used by
//! `tests/it/discover_xds.rs`.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use envoy_types::pb::envoy::config::core::v3::{
    Address, HealthStatus, Locality, SocketAddress, address, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use futures_util::Stream;
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status, Streaming};

/// The EDS type URL.
pub const CLA: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

type Responses = mpsc::UnboundedSender<Result<DiscoveryResponse, Status>>;

#[derive(Default)]
struct Inner {
    version: u64,
    nonce: u64,
    resources: Vec<Any>,
    streams: Vec<Responses>,
    requests: Vec<DiscoveryRequest>,
}

impl Inner {
    fn response(&mut self) -> DiscoveryResponse {
        self.nonce += 1;
        DiscoveryResponse {
            version_info: self.version.to_string(),
            resources: self.resources.clone(),
            type_url: CLA.to_owned(),
            nonce: self.nonce.to_string(),
            ..Default::default()
        }
    }

    fn push(&mut self) {
        let streams = std::mem::take(&mut self.streams);
        for s in streams {
            let r = self.response();
            if s.send(Ok(r)).is_ok() {
                self.streams.push(s);
            }
        }
    }
}

/// The management server's state; clones share it.
#[derive(Clone, Default)]
pub struct ControlPlane(Arc<Mutex<Inner>>);

/// A running server; [`stop`](Self::stop) ends its streams and its listener.
pub struct Running {
    pub addr: SocketAddr,
    plane: ControlPlane,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Ends every stream with UNAVAILABLE and stops accepting.
    pub async fn stop(mut self) {
        {
            let mut inner = self.plane.0.lock().unwrap();
            for s in inner.streams.drain(..) {
                let _ = s.send(Err(Status::unavailable("management server restarting")));
            }
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl ControlPlane {
    /// Replaces the served assignments (all clusters) and pushes them.
    pub fn set(&self, assignments: &[ClusterLoadAssignment]) {
        self.set_raw(assignments.iter().map(encode).collect());
    }

    /// Serves these resources as they are (for invalid ones).
    pub fn set_raw(&self, resources: Vec<Any>) {
        let mut inner = self.0.lock().unwrap();
        inner.version += 1;
        inner.resources = resources;
        inner.push();
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<DiscoveryRequest> {
        self.0.lock().unwrap().requests.clone()
    }

    /// Serves ADS on `addr` (port 0 picks one).
    pub async fn serve(&self, addr: SocketAddr) -> std::io::Result<Running> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let svc = AggregatedDiscoveryServiceServer::new(self.clone());
        let task = tokio::spawn(async move {
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            let _ = tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Running {
            addr,
            plane: self.clone(),
            shutdown: Some(tx),
            task,
        })
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for ControlPlane {
    type StreamAggregatedResourcesStream = BoxStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = BoxStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let mut requests = request.into_inner();
        let (tx, rx) = mpsc::unbounded_channel();
        let plane = self.clone();
        tokio::spawn(async move {
            while let Ok(Some(req)) = requests.message().await {
                let mut inner = plane.0.lock().unwrap();
                let subscribe = req.response_nonce.is_empty();
                inner.requests.push(req);
                if subscribe {
                    // A new subscription gets the current state at once.
                    if !inner.resources.is_empty() {
                        let r = inner.response();
                        let _ = tx.send(Ok(r));
                    }
                    inner.streams.push(tx.clone());
                }
            }
        });
        let out = futures_util::stream::unfold(rx, |mut rx| async move {
            let next = rx.recv().await?;
            Some((next, rx))
        });
        Ok(Response::new(Box::pin(out)))
    }

    async fn delta_aggregated_resources(
        &self,
        _: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("state of the world only"))
    }
}

fn encode(cla: &ClusterLoadAssignment) -> Any {
    Any {
        type_url: CLA.to_owned(),
        value: cla.encode_to_vec(),
    }
}

/// One endpoint of an assignment.
pub fn endpoint(addr: SocketAddr, weight: u32, health: HealthStatus) -> LbEndpoint {
    let socket = SocketAddress {
        address: addr.ip().to_string(),
        port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(
            addr.port(),
        ))),
        ..Default::default()
    };
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(socket)),
            }),
            ..Default::default()
        })),
        health_status: health as i32,
        load_balancing_weight: Some(UInt32Value { value: weight }),
        ..Default::default()
    }
}

/// One locality of an assignment.
pub fn locality(
    zone: &str,
    priority: u32,
    weight: u32,
    endpoints: Vec<LbEndpoint>,
) -> LocalityLbEndpoints {
    LocalityLbEndpoints {
        locality: Some(Locality {
            region: "eu".to_owned(),
            zone: zone.to_owned(),
            sub_zone: String::new(),
        }),
        lb_endpoints: endpoints,
        load_balancing_weight: Some(UInt32Value { value: weight }),
        priority,
        ..Default::default()
    }
}

/// An assignment of `cluster`.
pub fn assignment(cluster: &str, localities: Vec<LocalityLbEndpoints>) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster.to_owned(),
        endpoints: localities,
        ..Default::default()
    }
}
