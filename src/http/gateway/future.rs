//! [`ResponseFuture`]: a forwarded request, from its preparation to the
//! answer the client gets.

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tower::util::Oneshot;
use tower_service::Service;

use super::body::{Body, ResponseBody};
use super::error::{ErrorStatus, GatewayError};
use super::headers::strip_hop_by_hop;

/// The steps a request may wait on before it is sent: endpoints to
/// appear, its body to be read. Boxed, because they are async steps of
/// their own, taken only by requests that wait or carry a body to buffer;
/// the others go straight to [`State::Call`].
pub(crate) type Prepare = Pin<Box<dyn Future<Output = Result<Request<Body>, GatewayError>> + Send>>;

pin_project! {
    /// The response future of a [`Gateway`](super::Gateway): never fails;
    /// an error is an answer with its status (see [`GatewayError`]).
    pub struct ResponseFuture<S>
    where
        S: Service<Request<Body>>,
    {
        #[pin]
        state: State<S>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S>
    where
        S: Service<Request<Body>>,
    {
        Prepare {
            prepare: Prepare,
            upstream: Option<S>,
        },
        Call {
            #[pin]
            call: Oneshot<S, Request<Body>>,
        },
    }
}

impl<S: Service<Request<Body>>> ResponseFuture<S> {
    /// Sends `req` to `upstream` (when it is ready).
    pub(crate) fn call(upstream: S, req: Request<Body>) -> Self {
        Self {
            state: State::Call {
                call: Oneshot::new(upstream, req),
            },
        }
    }

    /// Runs `prepare`, then sends what it gives to `upstream`.
    pub(crate) fn prepare(upstream: S, prepare: Prepare) -> Self {
        Self {
            state: State::Prepare {
                prepare,
                upstream: Some(upstream),
            },
        }
    }
}

impl<S, RB> Future for ResponseFuture<S>
where
    S: Service<Request<Body>, Response = Response<RB>>,
    S::Error: ErrorStatus + Display,
{
    type Output = Result<Response<ResponseBody<RB>>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut state = self.as_mut().project().state;
            let next = match state.as_mut().project() {
                StateProj::Prepare { prepare, upstream } => {
                    let req = match ready!(prepare.as_mut().poll(cx)) {
                        Ok(req) => req,
                        Err(e) => return Poll::Ready(Ok(e.into_response())),
                    };
                    // Taken once: the state moves on to `Call` right here.
                    let Some(upstream) = upstream.take() else {
                        return Poll::Ready(Ok(GatewayError::Upstream {
                            status: http::StatusCode::INTERNAL_SERVER_ERROR,
                            message: "the gateway's future was polled after it finished".into(),
                        }
                        .into_response()));
                    };
                    State::Call {
                        call: Oneshot::new(upstream, req),
                    }
                }
                StateProj::Call { call } => {
                    return Poll::Ready(Ok(match ready!(call.poll(cx)) {
                        Ok(res) => answer(res),
                        Err(e) => GatewayError::upstream(&e).into_response(),
                    }));
                }
            };
            state.set(next);
        }
    }
}

/// The upstream's answer, its hop-by-hop fields removed.
fn answer<B>(res: Response<B>) -> Response<ResponseBody<B>> {
    let (mut parts, body) = res.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, ResponseBody::upstream(body))
}
