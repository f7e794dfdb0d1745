//! A channel-backed `tower::discover::Discover`: how the rival balancers
//! (tower's `p2c::Balance`) learn of replicas that join and leave, as a
//! discovery source would tell them.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tower::discover::Change;

/// The receiving end: a stream of changes, keyed by backend index.
pub struct Channel<S>(UnboundedReceiver<Change<usize, S>>);

impl<S> futures_core::Stream for Channel<S> {
    type Item = Result<Change<usize, S>, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().0.poll_recv(cx).map(|c| c.map(Ok))
    }
}

/// A sender of changes and the `Discover` stream that yields them.
pub fn channel<S>() -> (UnboundedSender<Change<usize, S>>, Channel<S>) {
    let (tx, rx) = unbounded_channel();
    (tx, Channel(rx))
}
