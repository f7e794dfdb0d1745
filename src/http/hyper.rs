//! Glue for hyper-util's `legacy::Client`.
//!
//! `hyper_util::client::legacy::Client<C, B>` is already a
//! `Service<http::Request<B>>` and cheap to clone (one connection pool
//! behind an `Arc`), so it is the base client of [`balance`](super::balance)
//! as it is: every endpoint's [`SetOrigin`](super::SetOrigin) holds a clone
//! and all of them share the pool, keyed by the rewritten authority.
//!
//! What this file adds is classification: a connect error
//! (`legacy::Error::is_connect`: refused, unreachable, DNS failure in the
//! connector) is [`FailureKind::Connect`], an I/O timeout is
//! [`FailureKind::Timeout`], so [`Classifier`](super::Classifier) can tell
//! "the replica is down" from "the replica answered badly".

use crate::classify::{FailureKind, error_kind};

use super::classify::ClassifyError;

impl ClassifyError for ::hyper_util::client::legacy::Error {
    fn failure_kind(&self) -> FailureKind {
        if self.is_connect() {
            return FailureKind::Connect;
        }
        error_kind(self)
    }
}
