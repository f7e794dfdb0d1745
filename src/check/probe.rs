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
