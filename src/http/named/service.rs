//! [`Replica`]: the endpoint service of one replica of a named service.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tower_service::Service;

use super::error::{BoxError, ReplicaError};
use crate::http::{Origin, OriginRequest, SetOrigin};

/// One replica of a named service: its own client `S`, which dials the
/// replica's address only, behind a [`SetOrigin`] that points every request
/// at the *service's* origin (`https://api.internal`).
///
/// So the request's URI authority, the `Host` header (HTTP/1) or
/// `:authority` (HTTP/2), and the TLS server name are the service's, and the
/// connection goes to [`addr`](Self::addr). Errors become [`ReplicaError`]s
/// naming both. Made by [`Replicas`](super::Replicas).
///
/// Cloning is what [`Balance`](crate::Balance) does per request: the
/// client's clone (for hyper-util and reqwest, a reference count on the one
/// pool of this replica) plus two more reference counts.
#[derive(Debug, Clone)]
pub struct Replica<S> {
    inner: SetOrigin<S>,
    addr: SocketAddr,
    server_name: Arc<str>,
}

impl<S> Replica<S> {
    pub(crate) fn new(client: S, service: Origin, server_name: Arc<str>, addr: SocketAddr) -> Self {
        Self {
            inner: SetOrigin::new(client, service),
            addr,
            server_name,
        }
    }

    /// The replica's address: where its connections go.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The service's origin, written into every request.
    pub fn service(&self) -> &Origin {
        self.inner.origin()
    }

    /// The name the replica must prove with its certificate.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// The replica's client.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }
}

impl<S, R> Service<R> for Replica<S>
where
    S: Service<R>,
    S::Error: Into<BoxError>,
    R: OriginRequest,
{
    type Response = S::Response;
    type Error = ReplicaError;
    type Future = ReplicaFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ReplicaError>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| ReplicaError::new(self.addr, Arc::clone(&self.server_name), e))
    }

    fn call(&mut self, req: R) -> Self::Future {
        ReplicaFuture {
            fut: self.inner.call(req),
            addr: self.addr,
            server_name: Arc::clone(&self.server_name),
        }
    }
}

pin_project! {
    /// The response future of [`Replica`]: the client's, with its error
    /// turned into a [`ReplicaError`].
    pub struct ReplicaFuture<F> {
        #[pin]
        fut: F,
        addr: SocketAddr,
        server_name: Arc<str>,
    }
}

impl<F, T, E> Future for ReplicaFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, ReplicaError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = ready!(this.fut.poll(cx));
        Poll::Ready(res.map_err(|e| ReplicaError::new(*this.addr, Arc::clone(this.server_name), e)))
    }
}
