//! The rows a scenario runs: each picker once per tracking mode, route-step
//! variant and adaptive-limits setting.

use super::Scenario;
use super::fleet::Variant;
use super::picker::PickerName;
use super::streams::Tracking;

/// One row: picker, tracking mode, route-step variant (`[fleet]`),
/// whether adaptive limits are on, and whether slow start is.
pub type RowSpec = (PickerName, Tracking, Option<Variant>, bool, bool);

impl Scenario {
    /// The rows for `pickers`, in table order: each picker once per
    /// tracking mode (the oracle needs none), once per route-step variant,
    /// and (`[resilience.adaptive_concurrency]`) with adaptive limits, or
    /// (`compare`) without and then with them; the same for
    /// `[resilience.slow_start]`.
    pub fn rows(&self, pickers: &[PickerName]) -> Vec<RowSpec> {
        let tracking = self.tracking();
        let variants = self.variants();
        let limits: &[bool] = match &self.resilience.adaptive_concurrency {
            None => &[false],
            Some(a) if a.compare => &[false, true],
            Some(_) => &[true],
        };
        let slow: &[bool] = match &self.resilience.slow_start {
            None => &[false],
            Some(s) if s.compare => &[false, true],
            Some(_) => &[true],
        };
        let mut rows = Vec::new();
        for &p in pickers {
            if let PickerName::Rival(_) = p {
                // Tracking modes, route variants, limits and slow start
                // are tower-lb's.
                rows.push((p, tracking[0], None, false, false));
                continue;
            }
            let modes = if p == PickerName::Oracle {
                &tracking[..1]
            } else {
                &tracking[..]
            };
            for &t in modes {
                for &v in &variants {
                    for &l in limits {
                        rows.extend(slow.iter().map(|&s| (p, t, v, l, s)));
                    }
                }
            }
        }
        rows
    }
}
