//! [`LabBody`]: what a lab response carries. Most bodies are done at once; a
//! stream's body ends when its backend's hold ends, so the balancer's body
//! tracking can see it (the `streaming` scenario).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::Sleep;

use super::model::Hold;

/// A lab response body.
#[derive(Debug)]
pub enum LabBody {
    /// Nothing (more) to send.
    Done,
    /// A stream: one chunk when its hold ends, then the end.
    Stream {
        /// Wakes at the hold's end.
        sleep: Pin<Box<Sleep>>,
        /// The backend's worker, released with the body.
        hold: Option<Hold>,
    },
    /// A body from an HTTP backend, passed through.
    Http(Incoming),
}

/// An empty body: what a load probe's answer carries.
impl Default for LabBody {
    fn default() -> Self {
        LabBody::Done
    }
}

impl LabBody {
    /// A body for `hold` (`None`: done at once).
    pub fn held(hold: Option<Hold>) -> Self {
        match hold {
            Some(h) => LabBody::Stream {
                sleep: Box::pin(tokio::time::sleep_until(h.until)),
                hold: Some(h),
            },
            None => LabBody::Done,
        }
    }
}

impl Body for LabBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        match this {
            LabBody::Done => Poll::Ready(None),
            LabBody::Http(b) => Pin::new(b).poll_frame(cx),
            LabBody::Stream { sleep, hold } => {
                if hold.is_none() {
                    return Poll::Ready(None);
                }
                std::task::ready!(sleep.as_mut().poll(cx));
                *hold = None;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"streamed")))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            LabBody::Done => true,
            LabBody::Http(b) => b.is_end_stream(),
            LabBody::Stream { hold, .. } => hold.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            LabBody::Http(b) => b.size_hint(),
            _ => SizeHint::default(),
        }
    }
}
