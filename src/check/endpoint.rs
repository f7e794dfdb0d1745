//! [`Check`]: how one endpoint is checked.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;

/// A health check's answer: `Ok` passes, `Err` says what failed.
pub type CheckFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Checks one endpoint, given its key and a clone of its service.
///
/// Implemented for closures `Fn(&K, S) -> Fut` where `Fut` resolves to
/// `Result<(), E: Display>`. A check that takes longer than the
/// configured timeout fails; one that panics fails too (and only that
/// check). (Named apart from the [load probes](crate::probe) of the
/// probing picker, which ask a replica how loaded it is.)
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot health-check endpoints keyed `{K}` with services `{S}`",
    note = "use `tower_lb::http::HttpCheck` for HTTP endpoints, `tower_lb::grpc::GrpcHealthCheck` for gRPC ones, or a closure `|key: &K, svc: S| async move {{ ... Ok::<(), E>(()) }}`"
)]
pub trait Check<K, S>: Send + Sync + 'static {
    /// Starts one check of the endpoint keyed `key`, through `service`.
    fn run(&self, key: &K, service: S) -> CheckFuture;
}

impl<K, S, F, Fut, E> Check<K, S> for F
where
    F: Fn(&K, S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display,
{
    fn run(&self, key: &K, service: S) -> CheckFuture {
        let fut = self(key, service);
        Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
    }
}

/// A health check from a function that takes the endpoint's key **by value**,
/// such as an `async fn`: an `async fn` that took `&K` would return a
/// future borrowing it, which the closure form above cannot name, and
/// rustc says only "one type is more general than the other". The key is
/// cloned for each check.
///
/// ```
/// use std::convert::Infallible;
/// use std::time::Duration;
/// use tower::util::BoxCloneSyncService;
/// use tower::{ServiceExt, service_fn};
/// use tower_lb::{Balance, check::{self, HealthCheck}};
///
/// type Svc = BoxCloneSyncService<u32, u32, Infallible>;
///
/// async fn ping(key: &'static str, svc: Svc) -> Result<(), String> {
///     let echo = svc.oneshot(7).await.map_err(|e| e.to_string())?;
///     if echo == 7 { Ok(()) } else { Err(format!("{key} echoed {echo}")) }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let replica = || Svc::new(service_fn(|req: u32| async move { Ok(req) }));
/// let lb = Balance::builder().endpoint("a", replica()).build()?;
/// let config = HealthCheck::builder().interval(Duration::from_secs(5)).build()?;
/// let checks = check::spawn(&lb, config, check::check_fn(ping))?;
/// # drop(checks); Ok(()) }
/// ```
pub fn check_fn<F>(f: F) -> CheckFn<F> {
    CheckFn(f)
}

/// A health check made by [`check_fn`].
#[derive(Debug, Clone, Copy)]
pub struct CheckFn<F>(F);

impl<K, S, F, Fut, E> Check<K, S> for CheckFn<F>
where
    K: Clone,
    F: Fn(K, S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display,
{
    fn run(&self, key: &K, service: S) -> CheckFuture {
        let fut = (self.0)(key.clone(), service);
        Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
    }
}

/// The old name of [`Check`]: a bound written with it still holds for
/// every check; implement [`Check`] (its method is `run`).
#[deprecated(
    since = "0.1.0",
    note = "renamed `check::Check` (method `run`), apart from the probing picker's load probes"
)]
pub trait Probe<K, S>: Check<K, S> {}

#[allow(deprecated)]
impl<K, S, T: Check<K, S>> Probe<K, S> for T {}

/// The old name of [`CheckFuture`].
#[deprecated(since = "0.1.0", note = "renamed `check::CheckFuture`")]
pub type ProbeFuture = CheckFuture;

/// The old name of [`CheckFn`].
#[deprecated(since = "0.1.0", note = "renamed `check::CheckFn`")]
pub type ProbeFn<F> = CheckFn<F>;

/// The old name of [`check_fn`].
#[deprecated(since = "0.1.0", note = "renamed `check::check_fn`")]
pub fn probe_fn<F>(f: F) -> CheckFn<F> {
    check_fn(f)
}
