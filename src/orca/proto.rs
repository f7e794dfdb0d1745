//! The binary form (feature `grpc`): `xds.data.orca.v3.OrcaLoadReport` as
//! protobuf, decoded by prost; base64 in headers and trailers.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::report::Field;
use super::{LoadReport, ParseError};

/// The fields of `xds.data.orca.v3.OrcaLoadReport` this crate reads, at
/// their tags in `xds/data/orca/v3/orca_load_report.proto` (envoy-types does
/// not carry the `xds.data` protos). Other fields are skipped by prost.
#[derive(Clone, PartialEq, prost::Message)]
struct OrcaLoadReport {
    #[prost(double, tag = "1")]
    cpu_utilization: f64,
    #[prost(double, tag = "2")]
    mem_utilization: f64,
    #[prost(double, tag = "6")]
    rps_fractional: f64,
    #[prost(double, tag = "7")]
    eps: f64,
    #[prost(map = "string, double", tag = "8")]
    named_metrics: HashMap<String, f64>,
    #[prost(double, tag = "9")]
    application_utilization: f64,
}

/// gRPC's binary metadata is standard base64, sent unpadded and accepted
/// either way.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub(super) fn from_base64(text: &[u8]) -> Result<LoadReport, ParseError> {
    let bytes = BASE64.decode(text).map_err(|_| ParseError::Binary)?;
    LoadReport::decode(&bytes)
}

impl LoadReport {
    /// Decodes a binary `xds.data.orca.v3.OrcaLoadReport` (the
    /// `endpoint-load-metrics-bin` trailer after base64 decoding, as
    /// tonic's `MetadataMap::get_bin` gives it). Proto3 does not send
    /// zeros, so a field at 0 reads as absent. Named metrics past the bound
    /// are left out in the order the message has them.
    ///
    /// # Errors
    /// [`ParseError::Binary`] when the bytes are not that message.
    pub fn decode(bytes: &[u8]) -> Result<LoadReport, ParseError> {
        let msg =
            <OrcaLoadReport as prost::Message>::decode(bytes).map_err(|_| ParseError::Binary)?;
        let mut report = LoadReport::new();
        for (field, v) in [
            (Field::Cpu, msg.cpu_utilization),
            (Field::Mem, msg.mem_utilization),
            (Field::App, msg.application_utilization),
            (Field::Rps, msg.rps_fractional),
            (Field::Eps, msg.eps),
        ] {
            if v != 0.0 {
                report.set(field, v);
            }
        }
        let mut named: Vec<_> = msg.named_metrics.iter().collect();
        // Map order is unspecified: sort, so the same message keeps the
        // same metrics every time.
        named.sort_by(|a, b| a.0.cmp(b.0));
        for (name, &v) in named {
            report.set_named(name, v);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn message() -> OrcaLoadReport {
        OrcaLoadReport {
            cpu_utilization: 0.3,
            mem_utilization: 0.8,
            rps_fractional: 120.0,
            eps: 2.0,
            named_metrics: HashMap::from([("foo".to_string(), 1.0)]),
            application_utilization: 0.4,
        }
    }

    #[test]
    fn decodes_every_field_exactly() {
        let r = LoadReport::decode(&message().encode_to_vec()).unwrap();
        let text = super::super::text::parse(
            "cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=120, eps=2, \
             application_utilization=0.4, named_metrics.foo=1",
        );
        assert_eq!(r, text);
    }

    #[test]
    fn base64_with_or_without_padding_and_the_bin_prefix() {
        let bytes = message().encode_to_vec();
        let padded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let bare = padded.trim_end_matches('=');
        let want = LoadReport::decode(&bytes).unwrap();
        assert_eq!(from_base64(padded.as_bytes()).unwrap(), want);
        assert_eq!(from_base64(bare.as_bytes()).unwrap(), want);
        assert_eq!(LoadReport::parse(&format!("BIN {bare}")).unwrap(), want);
        assert_eq!(from_base64(b"%%%"), Err(ParseError::Binary));
        assert_eq!(LoadReport::decode(&[0xff, 0xff]), Err(ParseError::Binary));
    }

    #[test]
    fn out_of_range_fields_are_counted() {
        let mut m = message();
        m.mem_utilization = 2.0;
        m.cpu_utilization = f64::NAN;
        let r = LoadReport::decode(&m.encode_to_vec()).unwrap();
        assert_eq!((r.mem_utilization(), r.cpu_utilization()), (None, None));
        assert_eq!(r.rejected(), 2);
    }
}
