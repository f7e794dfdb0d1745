//! Typed errors: [`ConfigError`] for bad configuration, [`Error`] for a request
//! the balancer could not place.

use std::fmt;

/// A configuration value was rejected.
///
/// Every builder in this crate validates what it is given and returns this
/// error instead of panicking. The message names the field, the value and the
/// allowed range, e.g. ``invalid `weight` = NaN: must be a finite number > 0``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    value: String,
    allowed: &'static str,
}

impl ConfigError {
    /// Builds an error for `field`, holding the offending `value` and a
    /// description of what is `allowed`.
    pub fn new(field: &'static str, value: impl fmt::Debug, allowed: &'static str) -> Self {
        Self {
            field,
            value: format!("{value:?}"),
            allowed,
        }
    }

    /// The name of the rejected field, as it appears in the builder.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The rejected value, formatted with `Debug`.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The allowed range, in words.
    pub fn allowed(&self) -> &'static str {
        self.allowed
    }

    /// The same error reported on `field`: for an entry point that checks
    /// its input with a helper whose own field name is not the one its
    /// caller passed (`grpc::balance`'s `origins`).
    #[cfg(feature = "grpc")]
    pub(crate) fn on_field(mut self, field: &'static str) -> Self {
        self.field = field;
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid `{}` = {}: must be {}",
            self.field, self.value, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

/// Checks that a weight is finite and strictly positive.
pub(crate) fn check_weight(field: &'static str, w: f64) -> Result<f64, ConfigError> {
    if w.is_finite() && w > 0.0 {
        Ok(w)
    } else {
        Err(ConfigError::new(field, w, "a finite number > 0"))
    }
}

/// Checks that a duration is at most [`MAX_DURATION`](crate::time::MAX_DURATION)
/// (one year), the bound of every duration setting.
pub(crate) fn check_bounded(
    field: &'static str,
    d: std::time::Duration,
) -> Result<std::time::Duration, ConfigError> {
    if d > crate::time::MAX_DURATION {
        Err(ConfigError::new(field, d, "a duration of at most one year"))
    } else {
        Ok(d)
    }
}

/// The tokio runtime this is called from, or a [`ConfigError`] on `field`
/// whose expectation names what needs the runtime (`expected`).
pub(crate) fn current_runtime(
    field: &'static str,
    expected: &'static str,
) -> Result<tokio::runtime::Handle, ConfigError> {
    tokio::runtime::Handle::try_current()
        .map_err(|_| ConfigError::new(field, "no tokio runtime", expected))
}

/// Checks that a duration is not zero and at most one year.
pub(crate) fn check_positive(
    field: &'static str,
    d: std::time::Duration,
) -> Result<std::time::Duration, ConfigError> {
    if d.is_zero() {
        return Err(ConfigError::new(
            field,
            d,
            "a duration > 0 and at most one year",
        ));
    }
    check_bounded(field, d)
        .map_err(|_| ConfigError::new(field, d, "a duration > 0 and at most one year"))
}

/// Why [`Balance`](crate::Balance) could not answer a request.
///
/// The balancer's own errors are returned at once, from the response future's
/// first poll: the balancer never waits for capacity to appear.
/// [`refusal`](Self::refusal) names the reason of a refusal in one word, as
/// the `lb.refusals` metric counts it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error<E> {
    /// The endpoint set is empty.
    NoEndpoints,
    /// Every endpoint that could take the request is at its in-flight cap.
    Overloaded,
    /// No endpoint is available: each was refused by its circuit breaker,
    /// ejected, failing its active check (or, for a few, lost a race for its
    /// last slot). The details say how many for each reason and when the
    /// first breaker admits a probe.
    AllUnavailable(Unavailable),
    /// Too few endpoints are healthy (under the panic threshold) and the
    /// balancer is configured to fail fast rather than route over all.
    Panic,
    /// The call ran past the balancer's own
    /// [`timeout`](crate::balance::Builder::timeout); it counted as a
    /// `Timeout` failure of its endpoint.
    Timeout,
    /// The picked endpoint's service failed.
    Inner(E),
}

/// Why no endpoint was available, endpoint by endpoint (each counted once,
/// under its first reason in this order: capped, ejected, failing check,
/// breaker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unavailable {
    /// Endpoints at their in-flight cap.
    pub capped: usize,
    /// Endpoints ejected by outlier detection.
    pub ejected: usize,
    /// Endpoints failing their active health check.
    pub failing_checks: usize,
    /// Endpoints whose circuit breaker refused the call.
    pub breaker_open: usize,
    /// Endpoints that were available but lost a race for their last slot or
    /// probe, or were avoided by a retry.
    pub other: usize,
    /// The time until the first open breaker admits a probe, if any is
    /// open (kept here, not in the message, which stays the same for the
    /// same cause).
    pub retry_in: Option<std::time::Duration>,
}

impl Unavailable {
    /// The most common reason (ties: breaker, ejection, failing check).
    pub fn reason(&self) -> Refusal {
        if self.breaker_open >= self.ejected.max(self.failing_checks) && self.breaker_open > 0 {
            Refusal::BreakerOpen
        } else if self.ejected >= self.failing_checks && self.ejected > 0 {
            Refusal::Ejected
        } else if self.failing_checks > 0 {
            Refusal::FailingCheck
        } else if self.capped > 0 {
            Refusal::Overloaded
        } else {
            Refusal::BreakerOpen
        }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no endpoint is available ({} breaker open, {} ejected, {} failing checks, {} at cap",
            self.breaker_open, self.ejected, self.failing_checks, self.capped
        )?;
        if self.other > 0 {
            write!(f, ", {} busy", self.other)?;
        }
        // The time to the next probe stays in `retry_in`, out of the text:
        // one cause, one message, so refusals group by message.
        if self.retry_in.is_some() {
            f.write_str("; an open breaker admits a probe later")?;
        }
        f.write_str(")")
    }
}

/// A balancer refusal's reason, as the `reason` attribute of `lb.refusals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// [`Error::NoEndpoints`].
    NoEndpoints,
    /// [`Error::Overloaded`].
    Overloaded,
    /// [`Error::AllUnavailable`], mostly open breakers.
    BreakerOpen,
    /// [`Error::AllUnavailable`], mostly ejected endpoints.
    Ejected,
    /// [`Error::AllUnavailable`], mostly failing active checks.
    FailingCheck,
    /// [`Error::Panic`].
    Panic,
}

impl Refusal {
    /// Every reason, in the order of [`index`](Self::index).
    pub const ALL: [Refusal; 6] = [
        Refusal::NoEndpoints,
        Refusal::Overloaded,
        Refusal::BreakerOpen,
        Refusal::Ejected,
        Refusal::FailingCheck,
        Refusal::Panic,
    ];

    /// A stable snake-case name (`"breaker_open"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NoEndpoints => "no_endpoints",
            Refusal::Overloaded => "overloaded",
            Refusal::BreakerOpen => "breaker_open",
            Refusal::Ejected => "ejected",
            Refusal::FailingCheck => "failing_check",
            Refusal::Panic => "panic",
        }
    }

    /// Position in [`ALL`](Self::ALL).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl<E> Error<E> {
    /// The inner service's error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(e) => Some(e),
            _ => None,
        }
    }

    /// True for the errors the balancer raises itself (not the inner service's).
    pub fn is_balancer_error(&self) -> bool {
        !matches!(self, Error::Inner(_))
    }

    /// For a refusal (the balancer placed the call nowhere), its reason;
    /// `None` for a timeout and the inner service's errors.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            Error::NoEndpoints => Some(Refusal::NoEndpoints),
            Error::Overloaded => Some(Refusal::Overloaded),
            Error::AllUnavailable(u) => Some(u.reason()),
            Error::Panic => Some(Refusal::Panic),
            Error::Timeout | Error::Inner(_) => None,
        }
    }

    /// For a refusal by open breakers, the time until the first admits a
    /// probe: a caller may wait that long before trying again.
    pub fn retry_in(&self) -> Option<std::time::Duration> {
        match self {
            Error::AllUnavailable(u) => u.retry_in,
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoEndpoints => f.write_str("no endpoints to balance over"),
            Error::Overloaded => f.write_str("every endpoint is at its in-flight cap"),
            Error::AllUnavailable(u) => u.fmt(f),
            Error::Panic => f.write_str("too few healthy endpoints (panic threshold)"),
            Error::Timeout => f.write_str("the call timed out (the balancer's timeout)"),
            Error::Inner(e) => write!(f, "endpoint failed: {e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Inner(e) => Some(e),
            _ => None,
        }
    }
}
