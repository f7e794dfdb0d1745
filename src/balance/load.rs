//! What a balancer learns from its endpoints beyond its own traffic: their
//! [load reports](crate::orca) and adaptive concurrency limits: the
//! builder's settings for them (set in `builder/setters.rs`) and the
//! [`Handle`] door for reports.

use std::borrow::Borrow;
use std::time::Duration;

use super::Handle;
use crate::error::{ConfigError, check_positive};
use crate::model::AdaptiveConcurrency;
use crate::orca::{DEFAULT_REPORT_EXPIRY, LoadReport};
use crate::pick::Picker;

/// The builder's settings for reported load and adaptive limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadSettings {
    pub(crate) report_expiry: Duration,
    pub(crate) adaptive: Option<AdaptiveConcurrency>,
    /// Each thread keeps its own lane of load and latency.
    pub(crate) per_thread: bool,
}

impl Default for LoadSettings {
    fn default() -> Self {
        Self {
            report_expiry: DEFAULT_REPORT_EXPIRY,
            adaptive: None,
            per_thread: false,
        }
    }
}

impl LoadSettings {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        check_positive("load_report_expiry", self.report_expiry)?;
        if let Some(a) = &self.adaptive {
            a.validate()?;
        }
        Ok(())
    }
}

impl<K: Eq, S, P: Picker, C> Handle<K, S, P, C> {
    /// Feeds a load report from endpoint `key` into its model, for
    /// transports the crate's classifiers do not read (any report source:
    /// a header, a trailer, an out-of-band stream). Returns false when the
    /// key is not in the set. O(n) in the endpoints (a scan of the current
    /// set); with the endpoint's state at hand (from
    /// [`endpoints`](Self::endpoints)),
    /// [`EndpointState::report_load`](crate::endpoint::EndpointState::report_load)
    /// is O(1).
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tower::service_fn;
    /// use tower_lb::{Balance, orca::LoadReport};
    ///
    /// let svc = service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
    /// let lb = Balance::builder().endpoint("a", svc).build()?;
    /// let report = LoadReport::parse("TEXT cpu_utilization=0.5, rps_fractional=100")?;
    /// assert!(lb.handle().report_load(&"a", &report));
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn report_load<Q>(&self, key: &Q, report: &LoadReport) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let set = self.shared.set.load();
        let Some(m) = set.members.iter().find(|m| m.entry.key.borrow() == key) else {
            return false;
        };
        m.state.report_load(report);
        true
    }
}
