//! The state-of-the-world ADS stream: subscribe, apply, ACK or NACK,
//! reconnect.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hash;
use std::net::SocketAddr;

use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::rpc;
use prost::Message;
use tokio::sync::mpsc;

use super::assignment::{self, Invalid};
use super::{CLUSTER_LOAD_ASSIGNMENT, Xds};
use crate::balance::Handle;
use crate::discover::{Reconciler, Target, until_gone};
use crate::pick::Picker;

/// google.rpc.Code INVALID_ARGUMENT, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

/// Each subscribed cluster's targets in one response.
type Updates = Vec<(String, Vec<Target<SocketAddr>>)>;

/// Why a stream ended, or a response was refused.
#[derive(Debug)]
enum Failure {
    Connect(tonic::transport::Error),
    Stream(tonic::Status),
    Closed,
    Rejected(Invalid),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Connect(e) => write!(f, "connecting to the management server: {e}"),
            Failure::Stream(s) => write!(f, "ADS stream failed: {} ({:?})", s.message(), s.code()),
            Failure::Closed => f.write_str("the management server closed the ADS stream"),
            Failure::Rejected(e) => write!(f, "rejected (NACK): {e}"),
        }
    }
}

/// The client's state across streams: what was last accepted.
pub(super) struct Client<A, M> {
    xds: Xds,
    sync: Reconciler<SocketAddr, A, M>,
    /// The last good targets of each cluster.
    assigned: BTreeMap<String, Vec<Target<SocketAddr>>>,
    /// The version of the last accepted response.
    version: String,
}

impl<K, M> Client<K, M>
where
    K: Hash + Eq + Clone,
{
    pub(super) fn new(xds: Xds, make: M) -> Self {
        Self {
            xds,
            sync: Reconciler::new(make),
            assigned: BTreeMap::new(),
            version: String::new(),
        }
    }

    pub(super) async fn run<S, P: Picker, C>(mut self, handle: Handle<K, S, P, C>)
    where
        M: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let mut retry = 0u32;
        loop {
            let mut answered = false;
            let failure = tokio::select! {
                f = self.stream(&handle, &mut answered) => f,
                () = until_gone(&handle) => return,
            };
            self.xds.stats.error(&handle, "xds", &failure);
            if answered {
                retry = 0;
            }
            let delay = self.xds.backoff.delay(retry);
            retry = retry.saturating_add(1);
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = until_gone(&handle) => return,
            }
        }
    }

    fn request(&self, nonce: &str, error: Option<&Invalid>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: self.version.clone(),
            node: Some(self.xds.node.clone()),
            resource_names: self.xds.clusters.clone(),
            type_url: CLUSTER_LOAD_ASSIGNMENT.to_owned(),
            response_nonce: nonce.to_owned(),
            error_detail: error.map(|e| rpc::Status {
                code: INVALID_ARGUMENT,
                message: e.to_string(),
                details: Vec::new(),
            }),
            ..Default::default()
        }
    }

    /// One stream, until it fails. Sets `answered` once a response came.
    async fn stream<S, P: Picker, C>(
        &mut self,
        handle: &Handle<K, S, P, C>,
        answered: &mut bool,
    ) -> Failure
    where
        M: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let channel = match self.xds.endpoint.connect().await {
            Ok(channel) => channel,
            Err(e) => return Failure::Connect(e),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        // The subscription, with the last accepted version so a control
        // plane can tell a resumed client from a new one.
        let _ = tx.send(self.request("", None));
        let requests = futures_util::stream::unfold(rx, |mut rx| async move {
            let next = rx.recv().await?;
            Some((next, rx))
        });
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let mut responses = match client.stream_aggregated_resources(requests).await {
            Ok(r) => r.into_inner(),
            Err(status) => return Failure::Stream(status),
        };
        loop {
            let response = match responses.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return Failure::Closed,
                Err(status) => return Failure::Stream(status),
            };
            *answered = true;
            if response.type_url != CLUSTER_LOAD_ASSIGNMENT {
                continue;
            }
            let reply = match self.accept(&response) {
                Ok(updates) => {
                    self.assigned.extend(updates);
                    let desired: Vec<Target<SocketAddr>> = (self.xds.clusters.iter())
                        .filter_map(|c| self.assigned.get(c))
                        .flatten()
                        .cloned()
                        .collect();
                    self.xds.stats.applied(&self.sync.apply(handle, &desired));
                    self.version = response.version_info.clone();
                    self.request(&response.nonce, None)
                }
                Err(invalid) => {
                    let nack = self.request(&response.nonce, Some(&invalid));
                    self.xds
                        .stats
                        .error(handle, "xds", &Failure::Rejected(invalid));
                    nack
                }
            };
            if tx.send(reply).is_err() {
                return Failure::Closed;
            }
        }
    }

    /// The response's assignments for subscribed clusters, all valid, or
    /// the first reason one is not.
    fn accept(&self, response: &DiscoveryResponse) -> Result<Updates, Invalid> {
        let mut updates = Vec::with_capacity(response.resources.len());
        for any in &response.resources {
            if any.type_url != CLUSTER_LOAD_ASSIGNMENT {
                return Err(Invalid(format!(
                    "a resource of type {:?} in an EDS response",
                    any.type_url
                )));
            }
            let cla = ClusterLoadAssignment::decode(any.value.as_slice())
                .map_err(|e| Invalid(format!("undecodable ClusterLoadAssignment: {e}")))?;
            if self.xds.clusters.contains(&cla.cluster_name) {
                updates.push((cla.cluster_name.clone(), assignment::targets(&cla)?));
            }
        }
        Ok(updates)
    }
}
