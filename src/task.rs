//! The guard of one background task the crate spawns beside a balancer:
//! the health checks' driver ([`check::Checks`](crate::check::Checks)),
//! the load probes' ([`probe::Probes`](crate::probe::Probes)) and a
//! discovery source's ([`discover::Driver`](crate::discover::Driver)).
//! Each public guard wraps one [`TaskGuard`], so stopping, detaching and
//! asking whether the task finished behave the same everywhere.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::{JoinError, JoinHandle};

/// A spawned task, aborted when the guard is dropped unless detached.
#[derive(Debug)]
pub(crate) struct TaskGuard(Option<JoinHandle<()>>);

impl TaskGuard {
    pub(crate) fn new(task: JoinHandle<()>) -> Self {
        Self(Some(task))
    }

    /// Stops the task now (nothing once detached).
    pub(crate) fn abort(&self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }

    /// True once the task has stopped, or the guard let it go.
    pub(crate) fn is_finished(&self) -> bool {
        self.0.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Lets the task run on without the guard, as a dropped `JoinHandle`
    /// would.
    pub(crate) fn detach(&mut self) {
        self.0.take();
    }

    /// Waits for the task to end (at once once detached).
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), JoinError>> {
        match &mut self.0 {
            Some(task) => Pin::new(task).poll(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.abort();
    }
}
