//! `[streams]`: a share of requests whose response body streams for a while,
//! holding a worker of its backend (the `streaming` scenario).

use serde::Deserialize;

use super::units::Dur;

/// `[streams]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Streams {
    /// Share of requests that are streams, 0 to 1.
    pub share: f64,
    /// How long a stream's body lasts after its head; its backend's worker
    /// stays busy meanwhile.
    pub hold: Dur,
    /// Each picker runs once per mode, in this order (default: body only).
    #[serde(default = "body_only")]
    pub tracking: Vec<Tracking>,
}

/// How the balancer tracks a call (`tower_lb::http::Track`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tracking {
    /// Until the body ends (the default).
    Body,
    /// Until the head: streams are invisible (the comparison).
    Headers,
}

fn body_only() -> Vec<Tracking> {
    vec![Tracking::Body]
}

impl Tracking {
    /// The crate's setting.
    pub fn track(self) -> tower_lb::http::Track {
        match self {
            Tracking::Body => tower_lb::http::Track::Body,
            Tracking::Headers => tower_lb::http::Track::Headers,
        }
    }

    /// A row's label: the picker's name, with `/headers` for the comparison.
    pub fn label(self, picker: &str) -> String {
        match self {
            Tracking::Body => picker.to_string(),
            Tracking::Headers => format!("{picker}/headers"),
        }
    }
}

impl Streams {
    /// Checks the table: `(field, problem)` on error.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(0.0..=1.0).contains(&self.share) {
            return Err((
                "streams.share".into(),
                format!("{} is not in 0..=1", self.share),
            ));
        }
        if self.hold.0.is_zero() || self.hold.0.as_millis() > u128::from(u32::MAX) {
            return Err((
                "streams.hold".into(),
                "must be > 0 and under 49 days".into(),
            ));
        }
        if self.tracking.is_empty() {
            return Err((
                "streams.tracking".into(),
                "list body, headers or both".into(),
            ));
        }
        Ok(())
    }

    /// The tracking modes of a run without `[streams]`.
    pub fn default_tracking() -> Vec<Tracking> {
        body_only()
    }
}
