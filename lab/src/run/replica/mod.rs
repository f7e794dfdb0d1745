//! A backend as its server runs it: the backend model as a tower service,
//! behind tower-lb's server layer ([`tower_lb::server::ServerLoad`]), which
//! counts its requests in flight, reports its load (ORCA) when the
//! scenario says `reports = true`, and answers load probes. The same stack
//! answers in-process calls (`--sim`) and HTTP requests (http mode).

pub mod body;
pub mod model;
pub mod precise;
pub mod slots;
pub mod timer;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};
use tower_lb::server::{ReportLoad, ServerLoad};

use self::body::LabBody;
use self::model::{Answer, Backend};
use super::message::{BACKEND_HEADER, EndpointError, LabResponse, backend_tag, stream_hold};

/// The backend model as a service.
#[derive(Clone)]
pub struct Replica {
    backend: Arc<Backend>,
    tag: http::HeaderValue,
}

/// A replica with tower-lb's server layer in front.
pub type Served = ReportLoad<Replica>;

/// Backend `i`'s server stack: the model behind a fresh `ServerLoad` (its
/// workers declared, reports on every answer when `reports`).
pub fn served(i: usize, backend: &Arc<Backend>) -> Served {
    let mut b = ServerLoad::builder().report_responses(backend.reports());
    if let Some(w) = backend.workers() {
        b = b.workers(w as u32);
    }
    // Workers were checked by the scenario (1..=u32::MAX); a bound past
    // the layer's (a million) falls back to undeclared.
    let load = b.build().unwrap_or_default();
    load.layer().layer(Replica {
        backend: backend.clone(),
        tag: backend_tag(i, backend.name()),
    })
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<LabResponse, EndpointError>> + Send>>;

impl<B> Service<http::Request<B>> for Replica {
    type Response = LabResponse;
    type Error = EndpointError;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), EndpointError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> BoxFuture {
        let (backend, tag) = (self.backend.clone(), self.tag.clone());
        let stream = stream_hold(&req);
        Box::pin(async move {
            match backend.serve(stream).await {
                // Down: an error makes hyper close the connection without
                // an answer, as a dead process would.
                (Answer::Down, _) => Err(EndpointError("connection closed".into())),
                (Answer::Status(s), hold) => {
                    let mut res = http::Response::new(LabBody::held(hold));
                    *res.status_mut() =
                        http::StatusCode::from_u16(s).map_err(|e| EndpointError(e.to_string()))?;
                    res.headers_mut().insert(BACKEND_HEADER, tag);
                    Ok(res)
                }
            }
        })
    }
}
