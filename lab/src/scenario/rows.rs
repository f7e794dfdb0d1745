//! The rows a scenario runs: each picker once per tracking mode, route-step
//! variant, adaptive-limits setting and picker setting (`[picker.NAME]`).

use super::Scenario;
use super::fleet::Variant;
use super::picker::PickerName;
use super::streams::Tracking;
use super::tuning::Tuning;

/// One row: what runs and how.
#[derive(Debug, Clone)]
pub struct RowSpec {
    /// The picker (or rival, or oracle).
    pub picker: PickerName,
    /// How its balancers track a call.
    pub track: Tracking,
    /// The route-step variant (`[fleet]`).
    pub variant: Option<Variant>,
    /// Adaptive limits on.
    pub limited: bool,
    /// Slow start on.
    pub slow_start: bool,
    /// The picker's settings (`[picker.NAME]`, `--set`), if any.
    pub tuning: Option<Tuning>,
}

impl Scenario {
    /// The rows for `pickers`, in table order: each picker once per
    /// tracking mode (the oracle needs none), once per route-step variant,
    /// and (`[resilience.adaptive_concurrency]`) with adaptive limits, or
    /// (`compare`) without and then with them; the same for
    /// `[resilience.slow_start]`; and once per setting of `[picker.NAME]`.
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
            let row = |track, variant, limited, slow_start, tuning| RowSpec {
                picker: p,
                track,
                variant,
                limited,
                slow_start,
                tuning,
            };
            if let PickerName::Rival(_) = p {
                // Tracking modes, route variants, limits, slow start and
                // settings are tower-lb's.
                rows.push(row(tracking[0], None, false, false, None));
                continue;
            }
            let modes = if p == PickerName::Oracle {
                &tracking[..1]
            } else {
                &tracking[..]
            };
            let tunings: Vec<Option<Tuning>> = match self.tuning.get(p.as_str()) {
                Some(list) if !list.is_empty() => list.iter().cloned().map(Some).collect(),
                _ => vec![None],
            };
            for t in &tunings {
                for &m in modes {
                    for &v in &variants {
                        for &l in limits {
                            rows.extend(slow.iter().map(|&s| row(m, v, l, s, t.clone())));
                        }
                    }
                }
            }
        }
        rows
    }
}
