//! [`RetryLayer`] and its builder.

use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::budget::Budget;
use super::hedge::{Hedge, Hedger};
use super::policy::Replayable;
use super::stats::RetryStats;
use super::{Backoff, Retry};
use crate::classify::{ErrIsFailure, MAX_RETRY_AFTER};
use crate::error::{ConfigError, check_nonzero};

/// Default attempts per request, the first included: 3 (Envoy's `num_retries`
/// default of 1 is timid; Finagle and linkerd budgets make 2 retries safe).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Most attempts a builder accepts: 10. Beyond that retries only hide an
/// outage, and the budget would refuse them anyway.
pub const MAX_ATTEMPTS: u32 = 10;

/// Builds [`Retry`] services that share one configuration, one [`Budget`],
/// one hedge-latency window and one [`RetryStats`].
///
/// Cheap to clone (one `Arc`). See the [module docs](super) for the
/// behaviour.
pub struct RetryLayer<R = Replayable, C = ErrIsFailure> {
    pub(crate) shared: Arc<Shared<R, C>>,
}

impl<R, C> Clone for RetryLayer<R, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<R, C> std::fmt::Debug for RetryLayer<R, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryLayer")
            .field("max_attempts", &self.shared.max_attempts)
            .field("budget", &self.shared.budget)
            .finish_non_exhaustive()
    }
}

/// Configuration and shared state of one layer.
pub(crate) struct Shared<R, C> {
    pub(crate) replay: R,
    pub(crate) classify: C,
    pub(crate) max_attempts: u32,
    pub(crate) per_try_timeout: Option<Duration>,
    pub(crate) deadline: Option<Duration>,
    pub(crate) backoff: Backoff,
    pub(crate) max_retry_after: Duration,
    pub(crate) budget: Arc<Budget>,
    pub(crate) hedge: Option<Hedger>,
    pub(crate) stats: RetryStats,
}

impl RetryLayer {
    /// A builder with every default: 3 attempts, no per-try timeout, no
    /// deadline, backoff 25 ms..250 ms, the default [`Budget`], no hedging,
    /// idempotent [`Replayable`] requests, `Err` is a failure.
    pub fn builder() -> Builder {
        Builder {
            replay: Replayable::idempotent(),
            classify: ErrIsFailure,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            per_try_timeout: None,
            deadline: None,
            backoff: Backoff::default(),
            max_retry_after: MAX_RETRY_AFTER,
            budget: None,
            hedge: None,
        }
    }
}

impl<R, C> RetryLayer<R, C> {
    /// Counters of retries, hedges and budget exhaustions.
    pub fn stats(&self) -> &RetryStats {
        &self.shared.stats
    }

    /// The retry budget this layer's services share.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.shared.budget
    }
}

impl<S, R, C> Layer<S> for RetryLayer<R, C> {
    type Service = Retry<S, R, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Configures a [`RetryLayer`]; every setting is checked by
/// [`build`](Self::build).
#[derive(Debug, Clone)]
pub struct Builder<R = Replayable, C = ErrIsFailure> {
    replay: R,
    classify: C,
    max_attempts: u32,
    per_try_timeout: Option<Duration>,
    deadline: Option<Duration>,
    backoff: Backoff,
    max_retry_after: Duration,
    budget: Option<Arc<Budget>>,
    hedge: Option<Hedge>,
}

impl<C> Builder<Replayable, C> {
    /// Retries non-idempotent requests (POST, PATCH) too, if they can be
    /// copied. Only for backends that deduplicate.
    pub fn retry_non_idempotent(mut self) -> Self {
        self.replay = Replayable::any_method();
        self
    }
}

impl<R, C> Builder<R, C> {
    /// Attempts per request, the first and any hedge included (default
    /// [`DEFAULT_MAX_ATTEMPTS`]); 1 disables retries and hedging.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Cancels an attempt that runs longer than `timeout`, and retries it.
    pub fn per_try_timeout(mut self, timeout: Duration) -> Self {
        self.per_try_timeout = Some(timeout);
        self
    }

    /// Fails the whole request, retries and backoff included, once
    /// `deadline` has passed since it entered the layer.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The backoff between attempts (default [`Backoff::default`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The longest server `Retry-After` hint obeyed (default
    /// [`MAX_RETRY_AFTER`]): the wait before a retry is
    /// `max(backoff, min(retry_after, max_retry_after))`.
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// The retry budget (default [`Budget::default`]). Pass one `Arc` to
    /// several layers to make them share it.
    pub fn budget(mut self, budget: impl Into<Arc<Budget>>) -> Self {
        self.budget = Some(budget.into());
        self
    }

    /// Sends one extra attempt to another endpoint when the first has not
    /// answered after the hedge delay.
    pub fn hedge(mut self, hedge: Hedge) -> Self {
        self.hedge = Some(hedge);
        self
    }

    /// Which requests may be sent again and how to copy them (default:
    /// [`Replayable::idempotent`]).
    pub fn replay<R2>(self, replay: R2) -> Builder<R2, C> {
        Builder {
            replay,
            classify: self.classify,
            max_attempts: self.max_attempts,
            per_try_timeout: self.per_try_timeout,
            deadline: self.deadline,
            backoff: self.backoff,
            max_retry_after: self.max_retry_after,
            budget: self.budget,
            hedge: self.hedge,
        }
    }

    /// What counts as a failed attempt (default: `Err`). A hard failure
    /// (anything but [`Slow`](crate::classify::FailureKind::Slow)) is retried;
    /// its `retry_after()` is honoured.
    pub fn classify<C2>(self, classify: C2) -> Builder<R, C2> {
        Builder {
            replay: self.replay,
            classify,
            max_attempts: self.max_attempts,
            per_try_timeout: self.per_try_timeout,
            deadline: self.deadline,
            backoff: self.backoff,
            max_retry_after: self.max_retry_after,
            budget: self.budget,
            hedge: self.hedge,
        }
    }

    /// Checks the settings and builds the layer.
    ///
    /// # Errors
    /// `max_attempts` must be within 1 ..= [`MAX_ATTEMPTS`];
    /// `per_try_timeout` and `deadline` > 0; `max_retry_after` at most one
    /// hour; the hedge as in [`Hedge`]'s setters (`hedge.delay`,
    /// `hedge.percentile`, `hedge.min_delay`, `hedge.max_delay`,
    /// `hedge.min_samples`).
    pub fn build(self) -> Result<RetryLayer<R, C>, ConfigError> {
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(ConfigError::new(
                "max_attempts",
                self.max_attempts,
                "within 1 ..= 10",
            ));
        }
        if let Some(t) = self.per_try_timeout {
            check_nonzero("per_try_timeout", t)?;
        }
        if let Some(d) = self.deadline {
            check_nonzero("deadline", d)?;
        }
        if self.max_retry_after > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "max_retry_after",
                self.max_retry_after,
                "a duration of at most one hour",
            ));
        }
        let hedge = match self.hedge {
            Some(h) => Some(Hedger::new(h.validate()?)),
            None => None,
        };
        Ok(RetryLayer {
            shared: Arc::new(Shared {
                replay: self.replay,
                classify: self.classify,
                max_attempts: self.max_attempts,
                per_try_timeout: self.per_try_timeout,
                deadline: self.deadline,
                backoff: self.backoff,
                max_retry_after: self.max_retry_after,
                budget: self.budget.unwrap_or_default(),
                hedge,
                stats: RetryStats::default(),
            }),
        })
    }
}
