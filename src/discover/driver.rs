//! [`Driver`]: the guard of one spawned source task.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::JoinError;

use crate::task::TaskGuard;

/// How often a long-lived source (a watch, an xDS stream) checks whether
/// its balancer is still there while no update arrives: often enough that
/// a dropped balancer frees its connection within a second, rarely enough
/// to cost nothing.
pub const LIVENESS_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// A running discovery source. Dropping it stops the source (its task is
/// aborted); so does dropping the balancer and all its handles.
///
/// Like a `JoinHandle` it can be [aborted](Self::abort), asked whether it
/// [finished](Self::is_finished) and awaited; [`detach`](Self::detach) lets
/// the task outlive the guard.
#[must_use = "dropping a Driver stops its discovery source"]
#[derive(Debug)]
pub struct Driver {
    task: TaskGuard,
}

impl Driver {
    /// Spawns `source` on the current tokio runtime.
    pub(crate) fn spawn(source: impl Future<Output = ()> + Send + 'static) -> Self {
        Self {
            task: TaskGuard::new(tokio::spawn(source)),
        }
    }

    /// Stops the source now.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// True once the source has stopped (balancer gone, or aborted).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Lets the source run on without this guard, as a dropped
    /// `JoinHandle` would; it still stops when the balancer is dropped.
    pub fn detach(mut self) {
        self.task.detach();
    }
}

impl Future for Driver {
    type Output = Result<(), JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.task.poll(cx)
    }
}

/// True when only the source's own handle is left: every `Balance` and
/// every other `Handle` of the balancer is gone.
pub(crate) fn balancer_gone<K, S, P: crate::pick::Picker, C>(
    handle: &crate::balance::Handle<K, S, P, C>,
) -> bool {
    std::sync::Arc::strong_count(&handle.shared) == 1
}

/// Resolves once `handle`'s balancer is gone (every `Balance` and every
/// other `Handle` of it dropped), checking every [`LIVENESS_CHECK`]: a
/// long-lived source (a watch, a stream) selects on it beside its updates,
/// so that it ends with its balancer.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), tower_lb::ConfigError> {
/// # type Svc = tower::util::BoxCloneSyncService<(), (), std::convert::Infallible>;
/// let lb = tower_lb::Balance::<&str, Svc>::builder().build()?;
/// let handle = lb.handle();
/// let source = tokio::spawn(async move {
///     tower_lb::discover::until_gone(&handle).await; // select on it beside the updates
/// });
/// drop(lb);
/// source.await.unwrap(); // ended within a second of the balancer
/// # Ok(()) }
/// ```
pub async fn until_gone<K, S, P: crate::pick::Picker, C>(
    handle: &crate::balance::Handle<K, S, P, C>,
) {
    let mut tick = tokio::time::interval(LIVENESS_CHECK);
    loop {
        tick.tick().await;
        if balancer_gone(handle) {
            return;
        }
    }
}
