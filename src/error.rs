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

/// Checks that a duration is not zero.
pub(crate) fn check_nonzero(
    field: &'static str,
    d: std::time::Duration,
) -> Result<std::time::Duration, ConfigError> {
    if d.is_zero() {
        Err(ConfigError::new(field, d, "a duration > 0"))
    } else {
        Ok(d)
    }
}

/// Why [`Balance`](crate::Balance) could not answer a request.
///
/// The balancer's own errors are returned at once, from the response future's
/// first poll: the balancer never waits for capacity to appear.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error<E> {
    /// The endpoint set is empty.
    NoEndpoints,
    /// Every endpoint that could take the request is at its in-flight cap.
    Overloaded,
    /// No endpoint is available (ejected, circuit open, or otherwise
    /// excluded), and none is merely at its cap.
    AllUnavailable,
    /// Too few endpoints are healthy (under the panic threshold) and the
    /// balancer is configured to fail fast rather than route over all.
    Panic,
    /// The picked endpoint's service failed.
    Inner(E),
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
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoEndpoints => f.write_str("no endpoints to balance over"),
            Error::Overloaded => f.write_str("every endpoint is at its in-flight cap"),
            Error::AllUnavailable => f.write_str("no endpoint is available"),
            Error::Panic => f.write_str("too few healthy endpoints (panic threshold)"),
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
