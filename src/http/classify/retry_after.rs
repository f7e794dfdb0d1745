//! `Retry-After`: delta-seconds or an HTTP-date.

use std::time::{Duration, SystemTime};

use http::HeaderValue;

/// Parses a `Retry-After` value, relative to `now` for the HTTP-date form.
///
/// Accepts delta-seconds (`"120"`) and an HTTP-date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`, or the obsolete RFC 850 and asctime
/// forms). A date in the past gives zero. The result is capped at `max`.
/// Anything else (negative, fractional, garbage) gives `None`.
pub fn parse_retry_after(value: &HeaderValue, now: SystemTime, max: Duration) -> Option<Duration> {
    let s = value.to_str().ok()?.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for a u64 is still "a very long time".
        let secs = s.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(max));
    }
    let at = httpdate::parse_http_date(s).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO).min(max))
}
