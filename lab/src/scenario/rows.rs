//! The rows a scenario runs: each picker once per tracking mode, route-step
//! variant and adaptive-limits setting.

use super::{PickerName, Scenario, Tracking, Variant};

/// One row: picker, tracking mode, route-step variant (`[fleet]`), and
/// whether adaptive limits are on.
pub type Row = (PickerName, Tracking, Option<Variant>, bool);

impl Scenario {
    /// The rows for `pickers`, in table order: each picker once per
    /// tracking mode (the oracle needs none), once per route-step variant,
    /// and (`[resilience.adaptive_concurrency]`) with adaptive limits, or
    /// (`compare`) without and then with them.
    pub fn rows(&self, pickers: &[PickerName]) -> Vec<Row> {
        let tracking = self.tracking();
        let variants = self.variants();
        let limits: &[bool] = match &self.resilience.adaptive_concurrency {
            None => &[false],
            Some(a) if a.compare => &[false, true],
            Some(_) => &[true],
        };
        let mut rows = Vec::new();
        for &p in pickers {
            if let PickerName::Rival(_) = p {
                // Tracking modes, route variants and limits are tower-lb's.
                rows.push((p, tracking[0], None, false));
                continue;
            }
            let modes = if p == PickerName::Oracle {
                &tracking[..1]
            } else {
                &tracking[..]
            };
            for &t in modes {
                for &v in &variants {
                    rows.extend(limits.iter().map(|&l| (p, t, v, l)));
                }
            }
        }
        rows
    }
}
