//! Reading a report from an `http::HeaderMap` (feature `http`): response
//! headers or trailers.

use http::{HeaderMap, HeaderName};

use super::{BIN_HEADER, HEADER, LoadReport, ParseError};

/// [`HEADER`] as a header name: a lookup by it hashes the name and does not
/// parse it.
pub(crate) static HEADER_NAME: HeaderName = HeaderName::from_static(HEADER);

/// [`BIN_HEADER`] as a header name.
pub(crate) static BIN_HEADER_NAME: HeaderName = HeaderName::from_static(BIN_HEADER);

impl LoadReport {
    /// The report in `headers` (response headers or gRPC trailers): the
    /// binary [`BIN_HEADER`] when present (base64; needs feature `grpc`),
    /// else [`HEADER`] in any form. `None` when neither is there.
    ///
    /// # Errors
    /// `Some(Err(_))` when the header is present but is not a report (see
    /// [`parse`](Self::parse)), also when its bytes are not text.
    pub fn from_headers(headers: &HeaderMap) -> Option<Result<LoadReport, ParseError>> {
        if let Some(v) = headers.get(&BIN_HEADER_NAME) {
            return Some(Self::from_base64(v.as_bytes()));
        }
        Self::from_text_header(headers)
    }

    /// The report in the [`HEADER`] of `headers`, in any form; `None`
    /// without one. The HTTP classifier's read: one lookup when absent.
    ///
    /// # Errors
    /// As [`from_headers`](Self::from_headers).
    #[inline]
    pub fn from_text_header(headers: &HeaderMap) -> Option<Result<LoadReport, ParseError>> {
        let v = headers.get(&HEADER_NAME)?;
        Some(
            v.to_str()
                .map_err(|_| ParseError::UnknownFormat)
                .and_then(Self::parse),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_text_header_and_prefers_the_binary_one() {
        let mut h = HeaderMap::new();
        assert_eq!(LoadReport::from_headers(&h), None);
        h.insert(HEADER, "TEXT cpu_utilization=0.25".parse().unwrap());
        let r = LoadReport::from_headers(&h).unwrap().unwrap();
        assert_eq!(r.cpu_utilization(), Some(0.25));
        h.insert(HEADER, "cpu_utilization=0.25".parse().unwrap());
        assert_eq!(
            LoadReport::from_headers(&h),
            Some(Err(ParseError::UnknownFormat))
        );
        h.insert(BIN_HEADER, "!!".parse().unwrap());
        let want = if cfg!(feature = "grpc") {
            ParseError::Binary
        } else {
            ParseError::BinaryUnsupported
        };
        assert_eq!(LoadReport::from_headers(&h), Some(Err(want)));
    }
}
