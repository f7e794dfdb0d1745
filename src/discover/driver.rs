//! [`Driver`]: the guard of one spawned source task.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::{JoinError, JoinHandle};

/// How often a long-lived source (a watch, an xDS stream) checks whether
/// its balancer is still there while no update arrives: often enough that
/// a dropped balancer frees its connection within a second, rarely enough
/// to cost nothing.
#[cfg(any(feature = "kube", feature = "xds"))]
pub(crate) const LIVENESS_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// A running discovery source. Dropping it stops the source (its task is
/// aborted); so does dropping the balancer and all its handles.
///
/// Like a `JoinHandle` it can be [aborted](Self::abort), asked whether it
/// [finished](Self::is_finished) and awaited; [`detach`](Self::detach) lets
/// the task outlive the guard.
#[must_use = "dropping a Driver stops its discovery source"]
#[derive(Debug)]
pub struct Driver {
    task: Option<JoinHandle<()>>,
}

impl Driver {
    /// Spawns `source` on the current tokio runtime.
    #[cfg_attr(
        not(any(feature = "dns", feature = "kube", feature = "xds")),
        allow(dead_code)
    )]
    pub(crate) fn spawn(source: impl Future<Output = ()> + Send + 'static) -> Self {
        Self {
            task: Some(tokio::spawn(source)),
        }
    }

    /// Stops the source now.
    pub fn abort(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }

    /// True once the source has stopped (balancer gone, or aborted).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Lets the source run on without this guard, as a dropped
    /// `JoinHandle` would; it still stops when the balancer is dropped.
    pub fn detach(mut self) {
        self.task.take();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.abort();
    }
}

impl Future for Driver {
    type Output = Result<(), JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.task {
            Some(task) => Pin::new(task).poll(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

/// True when only the source's own handle is left: every `Balance` and
/// every other `Handle` of the balancer is gone.
#[cfg(any(feature = "dns", feature = "kube", feature = "xds"))]
pub(crate) fn balancer_gone<K, S, P: crate::pick::Picker, C>(
    handle: &crate::Handle<K, S, P, C>,
) -> bool {
    std::sync::Arc::strong_count(&handle.shared) == 1
}

/// Resolves once the balancer is gone, checking every [`LIVENESS_CHECK`].
#[cfg(any(feature = "kube", feature = "xds"))]
pub(crate) async fn until_gone<K, S, P: crate::pick::Picker, C>(
    handle: &crate::Handle<K, S, P, C>,
) {
    let mut tick = tokio::time::interval(LIVENESS_CHECK);
    loop {
        tick.tick().await;
        if balancer_gone(handle) {
            return;
        }
    }
}
