//! Time arithmetic that never panics: every `Instant + Duration` and every
//! duration-to-nanoseconds conversion in the crate goes through here, and
//! `Epoch`, which turns the clock's readings into nanoseconds since a
//! fixed instant on the request path.
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

/// A fixed instant, and the readings of the clock after it as nanoseconds
/// since it: what the endpoint model and the breakers store their times as.
///
/// `Instant::saturating_duration_since` is two calls into the standard
/// library (about 55 instructions, with the `Duration` checks), and the
/// request path converts twice per call (at the pick and at the answer):
/// 110 of the default `Balance`'s roughly 950 instructions per request
/// (callgrind, `benches/interleaved.rs`, row `random`), 12-13 ns of its
/// time. An `Instant` is the monotonic clock's seconds and nanoseconds,
/// and its `Hash` writes exactly those two integers (on Unix a `timespec`,
/// on Windows a `Duration`): [`Fields`] reads them as they are written, in
/// a few instructions, with no unsafe code. Nothing documents that order,
/// so [`Epoch::new`] checks it against the slow path on two instants 1.25 s
/// apart, and an epoch whose check fails, or an instant whose seconds do
/// not fit (far deadlines), takes `saturating_duration_since` as before.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epoch {
    at: Instant,
    /// `at` in nanoseconds on the clock's own scale, when the fast reading
    /// checked out.
    raw: Option<u64>,
}

impl Epoch {
    /// The epoch `at`.
    pub(crate) fn new(at: Instant) -> Self {
        let raw = raw_nanos(at).filter(|&raw| {
            let later = at.checked_add(Duration::from_millis(1250));
            later.is_some_and(|l| {
                raw_nanos(l).and_then(|r| r.checked_sub(raw)) == Some(1_250_000_000)
            })
        });
        Self { at, raw }
    }

    /// The epoch itself.
    #[cfg(test)]
    pub(crate) fn instant(&self) -> Instant {
        self.at
    }

    /// The instant `ns` nanoseconds after the epoch (saturating): the
    /// inverse of [`nanos`](Self::nanos) for instants after the epoch.
    pub(crate) fn at(&self, ns: u64) -> Instant {
        after(self.at, Duration::from_nanos(ns))
    }

    /// Nanoseconds from the epoch to `t` (0 before it; saturating).
    #[inline(always)]
    pub(crate) fn nanos(&self, t: Instant) -> u64 {
        if let (Some(epoch), Some(t)) = (self.raw, raw_nanos(t)) {
            return t.saturating_sub(epoch);
        }
        nanos(t.saturating_duration_since(self.at))
    }
}

/// `now - start`, or zero when `start` is later: what
/// `now.saturating_duration_since(start)` gives, read through the clock's
/// fields as [`Epoch`] reads them: 22 instructions with the check below,
/// against 56 for the standard library's checked `timespec` arithmetic
/// through tokio's wrapper (callgrind, `benches/interleaved.rs`, `retry`). The retry layer measures every attempt with
/// it. The field order is checked once per process, as `Epoch::new` checks
/// it; where the check fails, or for far instants, the standard library's
/// subtraction is used.
#[inline]
pub(crate) fn elapsed(start: Instant, now: Instant) -> Duration {
    if *FIELDS_READ && let (Some(a), Some(b)) = (raw_nanos(start), raw_nanos(now)) {
        return Duration::from_nanos(b.saturating_sub(a));
    }
    now.saturating_duration_since(start)
}

/// Whether [`raw_nanos`] reads this platform's instants (see [`Epoch::new`]).
static FIELDS_READ: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| Epoch::new(Instant::now()).raw.is_some());

/// A `Hasher` that keeps the first two integers written to it: an
/// instant's seconds and nanoseconds (see [`Epoch`]).
#[derive(Default)]
struct Fields {
    ints: [u64; 2],
    written: usize,
    /// Something other than the integers was written.
    other: bool,
}

impl Fields {
    #[inline(always)]
    fn push(&mut self, v: u64) {
        match self.ints.get_mut(self.written) {
            Some(slot) => *slot = v,
            None => self.other = true,
        }
        self.written += 1;
    }
}

impl std::hash::Hasher for Fields {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {
        self.other = true;
    }
    #[inline(always)]
    fn write_u32(&mut self, v: u32) {
        self.push(u64::from(v));
    }
    #[inline(always)]
    fn write_u64(&mut self, v: u64) {
        self.push(v);
    }
    #[inline(always)]
    fn write_i64(&mut self, v: i64) {
        // A negative count of seconds becomes too large to convert.
        self.push(v as u64);
    }
}

/// `t` in nanoseconds on the clock's own scale, from the seconds and
/// nanoseconds its `Hash` writes; `None` when it writes anything else or
/// the seconds do not fit in a `u64` of nanoseconds.
#[inline(always)]
fn raw_nanos(t: Instant) -> Option<u64> {
    use std::hash::Hash;
    let mut f = Fields::default();
    t.hash(&mut f);
    let [secs, subsec] = f.ints;
    if f.written != 2 || f.other || subsec >= 1_000_000_000 {
        return None;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(subsec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_reading_agrees_with_the_standard_library() {
        let at = Instant::now();
        let epoch = Epoch::new(at);
        assert!(epoch.raw.is_some(), "the check failed on this platform");
        for ns in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            1_234_567_891,
            86_400_000_000_123,
        ] {
            let t = at + Duration::from_nanos(ns);
            assert_eq!(epoch.nanos(t), ns);
            assert_eq!(epoch.nanos(t), nanos(t.saturating_duration_since(at)));
        }
        // Before the epoch: zero, as `saturating_duration_since`.
        let later = Epoch::new(at + Duration::from_secs(3));
        assert_eq!(later.nanos(at), 0);
        // Seconds too large for nanoseconds in a u64: the slow path.
        let far = after(at, MAX_DURATION);
        assert_eq!(epoch.nanos(far), nanos(MAX_DURATION));
    }

    proptest::proptest! {
        /// `elapsed` is `saturating_duration_since`, in either order, also
        /// for instants too far for nanoseconds in a `u64`.
        #[test]
        fn elapsed_is_the_standard_librarys_difference(
            a in 0u64..1 << 62,
            b in 0u64..1 << 62,
            far in proptest::bool::ANY,
        ) {
            let at = Instant::now();
            let (start, now) = (at + Duration::from_nanos(a), at + Duration::from_nanos(b));
            // 600 years on: past the nanoseconds a `u64` holds (584 years).
            let now = if far { after(now, MAX_DURATION * 600) } else { now };
            proptest::prop_assert_eq!(elapsed(start, now), now.saturating_duration_since(start));
            proptest::prop_assert_eq!(elapsed(now, start), start.saturating_duration_since(now));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_fast_reading_follows_a_paused_clock() {
        let epoch = Epoch::new(Instant::now());
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(epoch.nanos(Instant::now()), 1_500_000_000);
    }

    #[test]
    fn a_hash_of_another_shape_is_refused() {
        use std::hash::Hasher;
        let mut f = Fields::default();
        f.write_u64(1);
        f.write_u32(2);
        f.write_u32(3);
        assert!(f.other, "a third integer");
        let mut f = Fields::default();
        f.write(&[1, 2]);
        assert!(f.other, "bytes");
    }

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
