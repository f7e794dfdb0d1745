//! Time arithmetic that never panics: every `Instant + Duration` and every
//! duration-to-nanoseconds conversion in the crate goes through here.
//!
//! Configured durations are bounded when a builder validates them (see
//! [`MAX_DURATION`]); these helpers make the arithmetic safe anyway, so that
//! a clock near its end or a bound missed somewhere degrades to "very far in
//! the future" instead of a panic on the request path.

use std::time::Duration;

use tokio::time::Instant;

/// The longest duration any setting of this crate accepts: one year. Longer
/// timeouts, waits and ejections mean "never" in a running service; the
/// bound keeps every deadline representable on every platform's clock.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration in nanoseconds, saturating at `u64::MAX` (584 years).
#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `now + d`, or the latest instant the clock can represent near it when
/// that overflows (then `now + MAX_DURATION`, else `now`).
#[inline]
pub(crate) fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(MAX_DURATION))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_instead_of_panicking() {
        assert_eq!(nanos(Duration::MAX), u64::MAX);
        assert_eq!(nanos(Duration::from_nanos(7)), 7);
        let now = Instant::now();
        assert!(after(now, Duration::MAX) >= now);
        assert_eq!(
            after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }
}
