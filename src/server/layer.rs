//! [`ServerLoadLayer`], [`ReportLoad`] and its [`ResponseFuture`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use super::{GRPC_PROBE_PATH, PROBE_HEADER, ServerLoad};
use crate::orca::HEADER;

/// Puts a [`ReportLoad`] around a server's service; see the [module
/// docs](super).
#[derive(Debug, Clone)]
pub struct ServerLoadLayer {
    pub(super) load: ServerLoad,
}

impl<S> Layer<S> for ServerLoadLayer {
    type Service = ReportLoad<S>;

    fn layer(&self, inner: S) -> ReportLoad<S> {
        ReportLoad {
            inner,
            load: self.load.clone(),
        }
    }
}

/// A server's service with its load counted and reported, and its probes
/// answered; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct ReportLoad<S> {
    inner: S,
    load: ServerLoad,
}

impl<S> ReportLoad<S> {
    /// The tracker this service reports.
    pub fn load(&self) -> &ServerLoad {
        &self.load
    }

    /// Whether `req` is a probe, and a gRPC one.
    fn probe<B>(&self, req: &Request<B>) -> Option<bool> {
        let path = req.uri().path();
        if path == GRPC_PROBE_PATH {
            return Some(true);
        }
        let by_path = self.load.inner.config.probe_path.as_deref() == Some(path);
        (by_path || req.headers().contains_key(PROBE_HEADER)).then_some(false)
    }
}

/// The report as a header value (TEXT form, always valid ASCII).
fn report_header(load: &ServerLoad) -> Option<HeaderValue> {
    HeaderValue::try_from(load.report().to_text()).ok()
}

impl<S, B, RB> Service<Request<B>> for ReportLoad<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: Default,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, RB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if let Some(grpc) = self.probe(&req) {
            let mut res = Response::new(RB::default());
            let h = res.headers_mut();
            if let Some(v) = report_header(&self.load) {
                h.insert(HEADER, v);
            }
            if grpc {
                // Trailers-only: the status in the head, no message.
                h.insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/grpc"),
                );
                h.insert("grpc-status", HeaderValue::from_static("0"));
            }
            return ResponseFuture {
                state: State::Probe { res: Some(res) },
            };
        }
        let level = self.load.start();
        let guard = Guard {
            load: self.load.clone(),
            level,
            start: Instant::now(),
            ended: false,
        };
        ResponseFuture {
            state: State::Call {
                fut: self.inner.call(req),
                guard: Some(guard),
            },
        }
    }
}

/// A request in flight: ended by its answer, or by the drop of its future.
struct Guard {
    load: ServerLoad,
    level: usize,
    start: Instant,
    ended: bool,
}

impl Guard {
    fn end(&mut self, failed: bool) {
        if !self.ended {
            self.ended = true;
            let elapsed = Instant::now().saturating_duration_since(self.start);
            self.load.end(self.level, elapsed, failed);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Dropped unanswered: the caller gave up; not an error of the
        // server's, and its latency is only a lower bound.
        self.end(false);
    }
}

pin_project! {
    /// The response future of [`ReportLoad`]: the service's answer with a
    /// report added, or a probe's answer.
    pub struct ResponseFuture<F, RB> {
        #[pin]
        state: State<F, RB>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, RB> {
        Call {
            #[pin]
            fut: F,
            guard: Option<Guard>,
        },
        Probe {
            res: Option<Response<RB>>,
        },
    }
}

impl<F, RB, E> Future for ResponseFuture<F, RB>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<RB>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Probe { res } => match res.take() {
                Some(r) => Poll::Ready(Ok(r)),
                None => Poll::Pending,
            },
            StateProj::Call { fut, guard } => {
                let out = ready!(fut.poll(cx));
                let Some(mut g) = guard.take() else {
                    return Poll::Ready(out);
                };
                let failed = out.as_ref().map_or(true, |r| r.status().is_server_error());
                g.end(failed);
                let load = &g.load;
                Poll::Ready(out.map(|mut r| {
                    if load.inner.config.report_responses
                        && let Some(v) = report_header(load)
                    {
                        r.headers_mut().insert(HEADER, v);
                    }
                    r
                }))
            }
        }
    }
}
