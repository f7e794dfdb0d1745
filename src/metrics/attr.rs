//! The attribute keys of the crate's instruments. `error.type` is
//! OpenTelemetry's (the semantic conventions' registry, stable); the
//! others are the crate's own, under its `lb.` namespace, each under the
//! instrument it qualifies (the conventions' naming rules: no bare
//! `state` or `reason` that another library's could clash with).

/// Which balancer: the name given to `Metrics::new`.
pub(crate) const NAME: &str = "lb.name";
/// The balancer's picker (`Picker::name`).
pub(crate) const ALGORITHM: &str = "lb.algorithm";
/// The endpoint's label: its key's `Display`, or `metrics_with`'s closure.
pub(crate) const ENDPOINT: &str = "lb.endpoint";
/// The endpoint's zone, for an endpoint with a zone or a priority.
pub(crate) const ZONE: &str = "lb.endpoint.zone";
/// The endpoint's priority level, for an endpoint with a zone or a priority.
pub(crate) const PRIORITY: &str = "lb.endpoint.priority";
/// The class of a failed call, absent on success (semantic conventions:
/// "If the request has completed successfully, instrumentations SHOULD NOT
/// set `error.type`"); the values are [`FailureKind::NAMES`](crate::classify::FailureKind::NAMES).
pub(crate) const ERROR_TYPE: &str = "error.type";
/// Why an endpoint cannot be picked, on `lb.endpoint.health`.
pub(crate) const ENDPOINT_STATE: &str = "lb.endpoint.state";
/// A breaker state, on `lb.breaker.state` and `lb.breaker.transitions`.
pub(crate) const BREAKER_STATE: &str = "lb.breaker.state";
/// The rule that ejected an endpoint, on `lb.outlier.ejections`.
pub(crate) const OUTLIER_REASON: &str = "lb.outlier.reason";
/// Why the balancer refused a call, on `lb.refusals`.
pub(crate) const REFUSAL_REASON: &str = "lb.refusal.reason";
/// A probe's result, on `lb.probes`.
pub(crate) const PROBE_RESULT: &str = "lb.probe.result";
/// Where a probing picker's pick came from, on `lb.probe.picks`.
pub(crate) const PROBE_SOURCE: &str = "lb.probe.source";
