//! The bodies a gateway passes on: [`Body`] upstream (buffered or
//! streamed), [`ResponseBody`] back to the client.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use pin_project_lite::pin_project;

use super::GatewayError;
use crate::retry::RequestBody;

/// The error type of the bodies a gateway passes on.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body on its way upstream: read whole (so a retry can send it
/// again) or streamed as the client sends it; see
/// [`Buffer`](super::Buffer).
///
/// This is the body type of the client under the gateway's balancer
/// (`Client::builder(..).build_http::<gateway::Body>()`). The retry layer
/// replays a buffered body from its bytes; a streamed one is sent once.
pub struct Body {
    kind: Kind,
}

enum Kind {
    Buffered(Buffered),
    Streamed(UnsyncBoxBody<Bytes, BoxError>),
}

/// A body read whole: its bytes and trailers, each sent once.
#[derive(Clone, Default)]
struct Buffered {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Buffered(b) => f
                .debug_struct("Body::Buffered")
                .field("len", &b.data.as_ref().map_or(0, Bytes::len))
                .finish(),
            Kind::Streamed(_) => f.write_str("Body::Streamed"),
        }
    }
}

impl Body {
    /// A body streamed from `body`, frame by frame.
    pub fn stream<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Self {
            kind: Kind::Streamed(body.map_err(Into::into).boxed_unsync()),
        }
    }

    /// An empty body.
    pub fn empty() -> Self {
        Self::from(Bytes::new())
    }

    /// Whether this body was read whole (a retry can replay it).
    pub fn is_buffered(&self) -> bool {
        matches!(self.kind, Kind::Buffered(_))
    }

    fn buffered(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        let data = (!data.is_empty()).then_some(data);
        Self {
            kind: Kind::Buffered(Buffered { data, trailers }),
        }
    }
}

impl Default for Body {
    fn default() -> Self {
        Self::empty()
    }
}

impl From<Bytes> for Body {
    fn from(data: Bytes) -> Self {
        Self::buffered(data, None)
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.kind {
            Kind::Buffered(b) => Poll::Ready(match (b.data.take(), b.trailers.take()) {
                (Some(data), trailers) => {
                    b.trailers = trailers;
                    Some(Ok(Frame::data(data)))
                }
                (None, Some(trailers)) => Some(Ok(Frame::trailers(trailers))),
                (None, None) => None,
            }),
            Kind::Streamed(s) => Pin::new(s).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Buffered(b) => b.data.is_none() && b.trailers.is_none(),
            Kind::Streamed(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Buffered(b) => {
                SizeHint::with_exact(b.data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Kind::Streamed(s) => s.size_hint(),
        }
    }
}

/// What the retry layer keeps of a gateway's request body: its bytes and
/// trailers when it was buffered (a streamed body cannot be kept).
pub struct Kept(Buffered);

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.0.data.as_ref().map_or(0, Bytes::len);
        f.debug_struct("Kept").field("len", &len).finish()
    }
}

impl RequestBody for Body {
    type Kept = Kept;

    /// A buffered body is kept whole, whatever the retry layer's limit (the
    /// gateway's [`max_body`](super::Builder::max_body) bounded it); a
    /// streamed one is not kept.
    fn keep(self, _limit: usize) -> (Self, Option<Kept>) {
        match self.kind {
            Kind::Buffered(b) => {
                let kept = Kept(b.clone());
                (
                    Self {
                        kind: Kind::Buffered(b),
                    },
                    Some(kept),
                )
            }
            streamed => (Self { kind: streamed }, None),
        }
    }

    fn copy(kept: &Kept) -> Option<Self> {
        Some(Self {
            kind: Kind::Buffered(kept.0.clone()),
        })
    }
}

/// Reads `body` whole, up to `limit` bytes.
///
/// # Errors
///
/// [`GatewayError::BodyTooLarge`] past the limit (at once when the body's
/// size hint, its `Content-Length`, already says so);
/// [`GatewayError::BodyRead`] when the body fails.
pub(crate) async fn read_whole<B>(body: B, limit: usize) -> Result<Body, GatewayError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if body.size_hint().lower() > limit as u64 {
        return Err(GatewayError::BodyTooLarge { limit });
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => {
            let trailers = collected.trailers().cloned();
            Ok(Body::buffered(collected.to_bytes(), trailers))
        }
        Err(e) if e.is::<LengthLimitError>() => Err(GatewayError::BodyTooLarge { limit }),
        Err(e) => Err(GatewayError::BodyRead(e.to_string())),
    }
}

pin_project! {
    /// A response body on its way back to the client: the upstream's, or
    /// the gateway's own short text for an error it answers itself.
    pub struct ResponseBody<B> {
        #[pin]
        inner: Either<B, Full<Bytes>>,
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = match &self.inner {
            Either::Left(_) => "upstream",
            Either::Right(_) => "gateway",
        };
        f.debug_struct("ResponseBody").field("from", &from).finish()
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn upstream(body: B) -> Self {
        Self {
            inner: Either::Left(body),
        }
    }

    pub(crate) fn text(text: String) -> Self {
        Self {
            inner: Either::Right(Full::new(Bytes::from(text))),
        }
    }
}

impl<B> http_body::Body for ResponseBody<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
