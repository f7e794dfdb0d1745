//! [`RetryLayer`] and its builder.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tower_layer::Layer;

use super::budget::Budget;
use super::hedge::{Hedge, Hedger};
use super::replay::Replayable;
use super::service::Own;
use super::stats::{RetryStats, bump};
use super::{Backoff, Retry};
use crate::classify::{Classified, Inherit, MAX_RETRY_AFTER};
use crate::error::{ConfigError, check_positive};
use crate::health::{Events, HealthChange, HealthEvent};

/// Default attempts per request, the first included: 3 (Envoy's `num_retries`
/// default of 1 is timid; Finagle and linkerd budgets make 2 retries safe).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Most attempts a builder accepts: 10. Beyond that retries only hide an
/// outage, and the budget would refuse them anyway.
pub const MAX_ATTEMPTS: u32 = 10;

/// Builds [`Retry`] services that share one configuration, one [`Budget`],
/// one hedge-latency window and one [`RetryStats`].
///
/// Cheap to clone (two `Arc`s). See the [module docs](super) for the
/// behaviour.
///
/// `C` is the classifier, or [`Inherit`] (the default): the classifier of
/// the balancer the layer wraps, so that what counts against an endpoint is
/// what gets retried, set once.
pub struct RetryLayer<R = Replayable, C = Inherit> {
    pub(crate) shared: Arc<Shared<R>>,
    classify: Arc<C>,
}

impl<R, C> Clone for RetryLayer<R, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            classify: Arc::clone(&self.classify),
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
pub(crate) struct Shared<R> {
    pub(crate) replay: R,
    pub(crate) max_attempts: u32,
    pub(crate) per_try_timeout: Option<Duration>,
    pub(crate) deadline: Option<Duration>,
    pub(crate) backoff: Backoff,
    pub(crate) max_retry_after: Duration,
    pub(crate) budget: Arc<Budget>,
    pub(crate) hedge: Option<Hedger>,
    pub(crate) stats: RetryStats,
    /// The clock of each call and poll (see [`Clock`](crate::time::Clock)).
    pub(crate) clock: crate::time::Clock,
    events: Events,
    /// The budget refused the last withdrawal (an exhaustion episode).
    exhausted: AtomicBool,
}

impl<R> Shared<R> {
    /// Withdraws a retry or hedge from the budget; counts a refusal, and
    /// reports the start of an exhaustion episode (the first refusal after
    /// a grant) as a health event.
    pub(crate) fn withdraw(&self) -> bool {
        if self.budget.withdraw() {
            if self.exhausted.load(Ordering::Relaxed) {
                self.exhausted.store(false, Ordering::Relaxed);
            }
            return true;
        }
        bump(&self.stats.budget_exhausted);
        if !self.exhausted.swap(true, Ordering::Relaxed) {
            self.events.emit(None, HealthChange::BudgetExhausted);
        }
        false
    }
}

impl RetryLayer {
    /// A builder with every default: 3 attempts, no per-try timeout, no
    /// deadline, backoff 25 ms..250 ms, the default [`Budget`], no hedging,
    /// idempotent [`Replayable`] requests (and gRPC calls), the wrapped
    /// balancer's classifier ([`Inherit`]).
    pub fn builder() -> Builder {
        Builder {
            replay: Replayable::idempotent(),
            classify: Inherit,
            cfg: Settings {
                max_attempts: DEFAULT_MAX_ATTEMPTS,
                per_try_timeout: None,
                deadline: None,
                backoff: Backoff::default(),
                max_retry_after: MAX_RETRY_AFTER,
                budget: None,
                hedge: None,
                name: None,
                hook: None,
            },
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

    /// The delay after which a request is hedged now, with hedging on: the
    /// fixed delay, or the percentile's current estimate (its bounds before
    /// enough samples).
    pub fn hedge_delay(&self) -> Option<Duration> {
        self.shared.hedge.as_ref().map(Hedger::delay)
    }
}

impl<S: Clone, R, C: ClassifyWith<S>> Layer<S> for RetryLayer<R, C> {
    type Service = Retry<S, R, C::Classifier>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry {
            classify: C::classifier(&self.classify, &inner),
            owns: Own::lanes(Arc::clone(&self.shared), &inner),
            inner,
        }
    }
}

/// Where a retry layer's classifier comes from: a classifier given to
/// [`Builder::classify`] (any `Clone` type), or [`Inherit`], the wrapped
/// service's own ([`Classified`]).
#[diagnostic::on_unimplemented(
    message = "the retry layer cannot find a classifier for `{S}`",
    note = "the default (`Inherit`) takes the classifier of a `Balance` below it; over another service, give the layer one: `.classify(tower_lb::classify::ErrIsFailure)` or `.classify(tower_lb::http::Classifier::new())`"
)]
pub trait ClassifyWith<S> {
    /// The classifier the layer's services use.
    type Classifier;

    /// The classifier for a service over `inner`.
    fn classifier(&self, inner: &S) -> Self::Classifier;
}

impl<S: Classified> ClassifyWith<S> for Inherit {
    type Classifier = S::Classifier;

    fn classifier(&self, inner: &S) -> S::Classifier {
        inner.classifier()
    }
}

impl<S, C: Clone> ClassifyWith<S> for C {
    type Classifier = C;

    fn classifier(&self, _: &S) -> C {
        self.clone()
    }
}

/// Configures a [`RetryLayer`]. Setters never fail; every setting is
/// checked once, by [`build`](Self::build).
#[derive(Clone)]
#[must_use]
pub struct Builder<R = Replayable, C = Inherit> {
    replay: R,
    classify: C,
    cfg: Settings,
}

/// Everything a [`Builder`] holds besides its replay policy and classifier
/// (which change its type).
#[derive(Clone)]
struct Settings {
    max_attempts: u32,
    per_try_timeout: Option<Duration>,
    deadline: Option<Duration>,
    backoff: Backoff,
    max_retry_after: Duration,
    budget: Option<Arc<Budget>>,
    hedge: Option<Hedge>,
    name: Option<Arc<str>>,
    hook: Option<crate::health::Hook>,
}

impl<R: std::fmt::Debug, C> std::fmt::Debug for Builder<R, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("replay", &self.replay)
            .field("max_attempts", &self.cfg.max_attempts)
            .field("per_try_timeout", &self.cfg.per_try_timeout)
            .field("deadline", &self.cfg.deadline)
            .field("hedge", &self.cfg.hedge)
            .finish_non_exhaustive()
    }
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
        self.cfg.max_attempts = n;
        self
    }

    /// Cancels an attempt that runs longer than `timeout`, and retries it.
    /// A balancer below records the cancelled call as a `Timeout` failure
    /// of its endpoint (see [`balance::timed_out`](crate::balance::timed_out)).
    ///
    /// The layer keeps one timer per request, for this, the deadline, the
    /// next hedge and the backoff: made (boxed, one allocation) the first
    /// time the request waits on it, and never for a request whose first
    /// attempt answers at once.
    pub fn per_try_timeout(mut self, timeout: Duration) -> Self {
        self.cfg.per_try_timeout = Some(timeout);
        self
    }

    /// Fails the whole request, retries and backoff included, once
    /// `deadline` has passed since it entered the layer.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.cfg.deadline = Some(deadline);
        self
    }

    /// The backoff between attempts (default [`Backoff::default`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.cfg.backoff = backoff;
        self
    }

    /// The longest server `Retry-After` hint obeyed (default
    /// [`MAX_RETRY_AFTER`]): the wait before a retry is
    /// `max(backoff, min(retry_after, max_retry_after))`.
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.cfg.max_retry_after = max;
        self
    }

    /// The retry budget (default [`Budget::default`]). Pass one `Arc` to
    /// several layers to make them share it.
    pub fn budget(mut self, budget: impl Into<Arc<Budget>>) -> Self {
        self.cfg.budget = Some(budget.into());
        self
    }

    /// Sends one extra attempt to another endpoint when the first has not
    /// answered after the hedge delay.
    pub fn hedge(mut self, hedge: Hedge) -> Self {
        self.cfg.hedge = Some(hedge);
        self
    }

    /// Names the layer in its health events (default `"retry"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.cfg.name = Some(Arc::from(name.into()));
        self
    }

    /// Calls `hook` when the retry budget starts refusing retries (once per
    /// episode: the first refusal after a grant), with
    /// [`HealthChange::BudgetExhausted`]; the same is a `tracing` event on
    /// target `tower_lb`.
    pub fn on_health_change(mut self, hook: impl Fn(&HealthEvent) + Send + Sync + 'static) -> Self {
        self.cfg.hook = Some(Arc::new(hook));
        self
    }

    /// Which requests may be sent again and how to copy them (default:
    /// [`Replayable::idempotent`]).
    pub fn replay<R2>(self, replay: R2) -> Builder<R2, C> {
        Builder {
            replay,
            classify: self.classify,
            cfg: self.cfg,
        }
    }

    /// What counts as a failed attempt, and whether to retry it (default:
    /// [`Inherit`], the classifier of the balancer below, whose
    /// [`advise`](crate::classify::Classify::advise) says: hard failures
    /// are retried, honouring `Retry-After` and gRPC pushback). Needed only
    /// over a service that is not a [`Balance`](crate::Balance).
    pub fn classify<C2>(self, classify: C2) -> Builder<R, C2> {
        Builder {
            replay: self.replay,
            classify,
            cfg: self.cfg,
        }
    }

    /// Checks the settings and builds the layer.
    ///
    /// # Time
    /// Each call and poll reads the CPU's time-stamp counter, kept within
    /// microseconds of tokio's clock, as the balancer does (see
    /// [`balance::Builder::build`](crate::balance::Builder::build)); a
    /// layer built where tokio's clock is paused reads tokio's clock, so
    /// pause it before building. A balancer below takes each of the
    /// layer's readings instead of reading the counter itself, so a call
    /// through both reads the clock twice, as a balancer alone does.
    ///
    /// # Errors
    /// `max_attempts` must be within 1 ..= [`MAX_ATTEMPTS`];
    /// `per_try_timeout` and `deadline` > 0 and at most one year;
    /// `max_retry_after` at most one hour; the backoff as in
    /// [`Backoff::validate`] (`backoff.base`, `backoff.cap`); the hedge as in [`Hedge`]'s
    /// setters (`hedge.delay`, `hedge.percentile`, `hedge.min_delay`,
    /// `hedge.max_delay`, `hedge.min_samples`).
    pub fn build(self) -> Result<RetryLayer<R, C>, ConfigError> {
        let cfg = self.cfg;
        cfg.backoff.validate()?;
        if !(1..=MAX_ATTEMPTS).contains(&cfg.max_attempts) {
            return Err(ConfigError::new(
                "max_attempts",
                cfg.max_attempts,
                "within 1 ..= 10",
            ));
        }
        if let Some(t) = cfg.per_try_timeout {
            check_positive("per_try_timeout", t)?;
        }
        if let Some(d) = cfg.deadline {
            check_positive("deadline", d)?;
        }
        if cfg.max_retry_after > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "max_retry_after",
                cfg.max_retry_after,
                "a duration of at most one hour",
            ));
        }
        let hedge = match cfg.hedge {
            Some(h) => Some(Hedger::new(h.validate()?)),
            None => None,
        };
        Ok(RetryLayer {
            classify: Arc::new(self.classify),
            shared: Arc::new(Shared {
                replay: self.replay,
                max_attempts: cfg.max_attempts,
                per_try_timeout: cfg.per_try_timeout,
                deadline: cfg.deadline,
                backoff: cfg.backoff,
                max_retry_after: cfg.max_retry_after,
                budget: cfg.budget.unwrap_or_default(),
                hedge,
                stats: RetryStats::default(),
                clock: crate::time::Clock::detect(crate::time::Epoch::new(
                    tokio::time::Instant::now(),
                )),
                events: Events {
                    balancer: cfg.name.unwrap_or_else(|| Arc::from("retry")),
                    hook: cfg.hook,
                },
                exhausted: AtomicBool::new(false),
            }),
        })
    }
}
