//! [`NamedMetrics`]: a report's application metrics, bounded and inline.

use std::fmt;

/// At most this many named metrics are kept per report: 8. Reports carry a
/// handful (A51's examples have one or two); the bound keeps a report a
/// fixed-size value that parsing never allocates.
pub const MAX_NAMED_METRICS: usize = 8;

/// Longest metric name kept, in bytes: 32.
pub const MAX_NAME_LEN: usize = 32;

/// Up to [`MAX_NAMED_METRICS`] `(name, value)` pairs, each name at most
/// [`MAX_NAME_LEN`] bytes, stored inline in the order they were reported.
#[derive(Clone, Copy, PartialEq)]
pub struct NamedMetrics {
    names: [[u8; MAX_NAME_LEN]; MAX_NAMED_METRICS],
    lens: [u8; MAX_NAMED_METRICS],
    values: [f64; MAX_NAMED_METRICS],
    len: u8,
}

impl Default for NamedMetrics {
    fn default() -> Self {
        Self {
            names: [[0; MAX_NAME_LEN]; MAX_NAMED_METRICS],
            lens: [0; MAX_NAMED_METRICS],
            values: [0.0; MAX_NAMED_METRICS],
            len: 0,
        }
    }
}

impl NamedMetrics {
    /// Number of metrics kept.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True when no metric is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value of metric `name`, if kept.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Every `(name, value)`, in the order they were reported.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> + '_ {
        (0..self.len()).map(|i| {
            let name = &self.names[i][..usize::from(self.lens[i])];
            // Names are copied from `&str`s whole: always UTF-8.
            (
                std::str::from_utf8(name).unwrap_or_default(),
                self.values[i],
            )
        })
    }

    /// Keeps `(name, value)`; false (nothing kept) when the name is empty,
    /// too long, already present, or the set is full.
    pub(super) fn insert(&mut self, name: &str, value: f64) -> bool {
        let i = self.len();
        if name.is_empty()
            || name.len() > MAX_NAME_LEN
            || i >= MAX_NAMED_METRICS
            || self.get(name).is_some()
        {
            return false;
        }
        self.names[i][..name.len()].copy_from_slice(name.as_bytes());
        self.lens[i] = name.len() as u8;
        self.values[i] = value;
        self.len += 1;
        true
    }
}

impl fmt::Debug for NamedMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_count_and_length_first_name_wins() {
        let mut m = NamedMetrics::default();
        assert!(m.insert("a", 1.0));
        assert!(!m.insert("a", 2.0), "duplicate");
        assert!(!m.insert("", 2.0), "empty");
        assert!(!m.insert(&"x".repeat(MAX_NAME_LEN + 1), 2.0), "too long");
        assert!(m.insert(&"é".repeat(MAX_NAME_LEN / 2), 3.0));
        for i in 2..MAX_NAMED_METRICS {
            assert!(m.insert(&format!("m{i}"), i as f64));
        }
        assert!(!m.insert("full", 0.0));
        assert_eq!(m.len(), MAX_NAMED_METRICS);
        assert_eq!(m.get("a"), Some(1.0));
        assert_eq!(m.get(&"é".repeat(MAX_NAME_LEN / 2)), Some(3.0));
        assert_eq!(m.iter().nth(2), Some(("m2", 2.0)));
    }
}
