//! The EWMA's stamp: when the last sample was taken, with flags in its
//! low byte (whether that sample failed, and the picks that passed the
//! failed endpoint over since).

/// The stamp's low bit: the last sample was a failure.
pub(super) const FAILED: u64 = 1;

/// The stamp's next bits, after a failure: how many picks drew the
/// endpoint and passed it over since (saturating at
/// [`PROBE_MISSES`](super::probe::PROBE_MISSES)).
pub(super) const MISS: u64 = 2;

/// The stamp's flag bits (the time keeps the rest: 256 ns of precision).
pub(super) const FLAGS: u64 = 0xFF;

/// The stamp's time.
pub(super) const TIME: u64 = !FLAGS;

/// The stamp of a sample taken at `now_ns`: rounded up, so that a read at
/// the same time sees no idleness at all.
#[inline(always)]
pub(super) fn stamp_of(now_ns: u64) -> u64 {
    now_ns.saturating_add(FLAGS) & TIME
}

#[inline(always)]
pub(super) fn misses(raw: u64) -> u64 {
    (raw & FLAGS) >> 1
}
