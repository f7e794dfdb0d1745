//! tower's own `Retry`, for the rivals' rows of a scenario whose tower-lb
//! rows retry (`[resilience.retry]`): same attempts, a `TpsBudget` with
//! tower-lb's (and Finagle's) defaults, tower's exponential backoff from
//! tower-lb's base and cap, and the same rule for what is retried (an
//! error, a 5xx or a 429, on an idempotent method unless
//! `non_idempotent`). With `per_try_timeout`, tower's `Timeout` under it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::Method;
use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
use tower::retry::budget::{Budget, TpsBudget};
use tower_lb::retry::{DEFAULT_BASE, DEFAULT_CAP, DEFAULT_MIN_PER_SEC, DEFAULT_RATIO, DEFAULT_TTL};

use super::Seeded;
use crate::run::message::{LabRequest, LabResponse};
use crate::scenario::RetrySpec;
use crate::scenario::random::Rng;

/// Jitter of tower's backoff: up to the whole base again (tower-lb's
/// "full jitter" draws within the base, tower adds up to `jitter × base`).
const JITTER: f64 = 1.0;

/// The retry policy of one client.
#[derive(Clone)]
pub struct Policy {
    budget: Arc<TpsBudget>,
    left: u32,
    first: bool,
    non_idempotent: bool,
    backoff: ExponentialBackoff<Seeded>,
    sent: Arc<AtomicU64>,
}

impl Policy {
    /// A client's policy for `spec`, its backoff jitter drawn from `seed`;
    /// `sent` counts the retries.
    pub fn new(spec: &RetrySpec, seed: u64, sent: Arc<AtomicU64>) -> Option<Self> {
        let maker =
            ExponentialBackoffMaker::new(DEFAULT_BASE, DEFAULT_CAP, JITTER, Seeded(Rng::new(seed)))
                .ok()?;
        Some(Self {
            budget: Arc::new(TpsBudget::new(
                DEFAULT_TTL,
                DEFAULT_MIN_PER_SEC,
                DEFAULT_RATIO as f32,
            )),
            left: spec.max_attempts.saturating_sub(1),
            first: true,
            non_idempotent: spec.non_idempotent,
            backoff: maker.clone().make_backoff(),
            sent,
        })
    }

    fn idempotent(&self, m: &Method) -> bool {
        self.non_idempotent || !matches!(*m, Method::POST | Method::PATCH)
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

impl<E> tower::retry::Policy<LabRequest, LabResponse, E> for Policy {
    type Future = Wait;

    fn retry(&mut self, req: &mut LabRequest, result: &mut Result<LabResponse, E>) -> Option<Wait> {
        if std::mem::replace(&mut self.first, false) {
            self.budget.deposit();
        }
        let failed = match result {
            Ok(r) => r.status().is_server_error() || r.status().as_u16() == 429,
            Err(_) => true,
        };
        if !failed || self.left == 0 || !self.idempotent(req.method()) {
            return None;
        }
        if !self.budget.withdraw() {
            return None;
        }
        self.left -= 1;
        self.sent.fetch_add(1, Ordering::Relaxed);
        Some(Box::pin(self.backoff.next_backoff()))
    }

    fn clone_request(&mut self, req: &LabRequest) -> Option<LabRequest> {
        Some(req.clone())
    }
}
