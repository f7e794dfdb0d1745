//! A channel-backed `tower::discover::Discover`: how the rival balancers
//! (tower's `p2c::Balance`) learn of replicas that join and leave, as a
//! discovery source would tell them. The channel carries the lab's plain
//! endpoints; each rival wraps an endpoint when its balancer polls the
//! insertion, as tower's `PeakEwmaDiscover`, loadpace's
//! `AdaptiveDiscovery` and tonic's discovery stream do ([`Wrapped`]), so a
//! replica that joins late starts its load estimate when it joins.

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

/// `Channel<S>` with each inserted service wrapped by `wrap(key, service)`
/// as it is polled: when the balancer discovers it.
pub struct Wrapped<S, F> {
    inner: Channel<S>,
    wrap: F,
}

impl<S, F> Wrapped<S, F> {
    /// `inner`'s changes, insertions wrapped by `wrap`.
    pub fn new(inner: Channel<S>, wrap: F) -> Self {
        Self { inner, wrap }
    }
}

impl<S, T, F> futures_core::Stream for Wrapped<S, F>
where
    F: FnMut(usize, S) -> T + Unpin,
{
    type Item = Result<Change<usize, T>, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.inner.0.poll_recv(cx).map(|c| {
            c.map(|change| {
                Ok(match change {
                    Change::Insert(k, s) => Change::Insert(k, (this.wrap)(k, s)),
                    Change::Remove(k) => Change::Remove(k),
                })
            })
        })
    }
}
