//! [`Probe`]: how one endpoint is checked.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;

/// A probe's answer: `Ok` passes, `Err` says what failed.
pub type ProbeFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Checks one endpoint, given its key and a clone of its service.
///
/// Implemented for closures `Fn(&K, S) -> Fut` where `Fut` resolves to
/// `Result<(), E: Display>`. A probe that takes longer than the check's
/// timeout fails; one that panics fails too (and only that probe).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot probe endpoints keyed `{K}` with services `{S}`",
    note = "use `tower_lb::http::HttpProbe` for HTTP endpoints, `tower_lb::grpc::GrpcHealthProbe` for gRPC ones, or a closure `|key: &K, svc: S| async move {{ ... Ok::<(), E>(()) }}`"
)]
pub trait Probe<K, S>: Send + Sync + 'static {
    /// Starts one probe.
    fn probe(&self, key: &K, service: S) -> ProbeFuture;
}

impl<K, S, F, Fut, E> Probe<K, S> for F
where
    F: Fn(&K, S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display,
{
    fn probe(&self, key: &K, service: S) -> ProbeFuture {
        let fut = self(key, service);
        Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
    }
}

/// A probe from a function that takes the endpoint's key **by value**,
/// such as an `async fn`: an `async fn` that took `&K` would return a
/// future borrowing it, which the closure form above cannot name, and
/// rustc says only "one type is more general than the other". The key is
/// cloned for each probe.
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
/// let checks = check::spawn(&lb, config, check::probe_fn(ping))?;
/// # drop(checks); Ok(()) }
/// ```
pub fn probe_fn<F>(f: F) -> ProbeFn<F> {
    ProbeFn(f)
}

/// A probe made by [`probe_fn`].
#[derive(Debug, Clone, Copy)]
pub struct ProbeFn<F>(F);

impl<K, S, F, Fut, E> Probe<K, S> for ProbeFn<F>
where
    K: Clone,
    F: Fn(K, S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display,
{
    fn probe(&self, key: &K, service: S) -> ProbeFuture {
        let fut = (self.0)(key.clone(), service);
        Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
    }
}
