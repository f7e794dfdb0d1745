//! The balanced stack's errors as `reqwest_middleware::Error`.
//!
//! The chain's own error comes back unchanged, so middleware above (such
//! as `reqwest-retry`, which retries a `reqwest::Error` that is a connect
//! error or a timeout) judge it as they would without the balancer. What
//! the balancer or the retry layer decided on their own is a middleware
//! error, with the typed error inside (`downcast_ref` on the
//! `anyhow::Error`) and the last attempt's error as its source.

use std::error::Error as StdError;

/// `Inner` is the chain's error as it was; a refusal is
/// `Error::Middleware` holding the balancer's [`Error`](crate::Error).
impl<E> From<crate::Error<E>> for reqwest_middleware::Error
where
    E: Into<reqwest_middleware::Error> + StdError + Send + Sync + 'static,
{
    fn from(error: crate::Error<E>) -> Self {
        match error {
            crate::Error::Inner(e) => e.into(),
            refused => reqwest_middleware::Error::middleware(refused),
        }
    }
}

/// `Inner` (a first attempt that failed and was not retried) is converted
/// as the inner error is; every other verdict (attempts or budget
/// exhausted, a per-try timeout, the deadline) is `Error::Middleware`
/// holding the retry layer's [`Error`](crate::retry::Error).
impl<E> From<crate::retry::Error<E>> for reqwest_middleware::Error
where
    E: Into<reqwest_middleware::Error> + StdError + Send + Sync + 'static,
{
    fn from(error: crate::retry::Error<E>) -> Self {
        match error {
            crate::retry::Error::Inner(e) => e.into(),
            verdict => reqwest_middleware::Error::middleware(verdict),
        }
    }
}

#[cfg(test)]
mod tests {
    type Chain = reqwest_middleware::Error;

    fn chain_error() -> Chain {
        Chain::middleware(std::io::Error::other("downstream"))
    }

    #[test]
    fn the_chains_error_comes_back_as_it_was() {
        let e: Chain = crate::Error::Inner(chain_error()).into();
        assert_eq!(e.to_string(), "downstream");
        let e: Chain = crate::retry::Error::Inner(crate::Error::Inner(chain_error())).into();
        assert_eq!(e.to_string(), "downstream");
    }

    #[test]
    fn refusals_and_verdicts_are_typed_middleware_errors() {
        let Chain::Middleware(e) = Chain::from(crate::Error::<Chain>::NoEndpoints) else {
            panic!("a refusal is a middleware error");
        };
        assert!(matches!(
            e.downcast_ref::<crate::Error<Chain>>(),
            Some(crate::Error::NoEndpoints)
        ));
        let verdict = crate::retry::Error::AttemptsExhausted {
            attempts: 3,
            last: crate::Error::Inner(chain_error()),
        };
        let Chain::Middleware(e) = Chain::from(verdict) else {
            panic!("a verdict is a middleware error");
        };
        let typed = e.downcast_ref::<crate::retry::Error<crate::Error<Chain>>>();
        assert_eq!(typed.map(|e| e.attempts()), Some(3));
        assert!(e.to_string().contains("downstream"), "{e}");
    }
}
