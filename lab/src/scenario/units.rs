//! Units a scenario is written in: durations with a unit (`"250ms"`) and
//! service-time distributions.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A duration written as a string with a unit: `"250ms"`, `"1.5s"`, `"3m"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_duration(s).map(Dur)
    }
}

/// Parses `"250ms"`, `"1.5s"`, `"3m"`, `"1h"`, `"500us"`, `"0"`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("negative duration \"{s}\": must be >= 0"));
    }
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "" => {
            return Err(format!(
                "duration \"{s}\" has no unit: write e.g. \"250ms\" or \"3s\""
            ));
        }
        u => {
            return Err(format!(
                "unknown unit \"{u}\" in duration \"{s}\": use ns, us, ms, s, m or h"
            ));
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{s}\" is not a duration: write e.g. \"250ms\" or \"1.5s\""))?;
    Duration::try_from_secs_f64(v * scale).map_err(|_| format!("duration \"{s}\" is out of range"))
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// A service time: fixed, or lognormal given its median and 99th percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DelaySpec {
    /// Always this long.
    Fixed(Duration),
    /// Lognormal with this median and p99.
    LogNormal {
        /// Median.
        median: Duration,
        /// 99th percentile (>= median).
        p99: Duration,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelayTable {
    dist: String,
    median: Dur,
    p99: Dur,
}

impl<'de> Deserialize<'de> for DelaySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DelaySpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a duration (\"50ms\") or { dist = \"lognormal\", median = \"50ms\", p99 = \"400ms\" }",
                )
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<DelaySpec, E> {
                parse_duration(s).map(DelaySpec::Fixed).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<DelaySpec, A::Error> {
                let t = DelayTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                if t.dist != "lognormal" {
                    return Err(de::Error::custom(format!(
                        "unknown dist \"{}\": the only distribution is \"lognormal\" (write a plain duration for a fixed delay)",
                        t.dist
                    )));
                }
                if t.median.0.is_zero() || t.p99 < t.median {
                    return Err(de::Error::custom("lognormal delay needs 0 < median <= p99"));
                }
                Ok(DelaySpec::LogNormal {
                    median: t.median.0,
                    p99: t.p99.0,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Display for DelaySpec {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            DelaySpec::Fixed(d) => write!(f, "{d:?}"),
            DelaySpec::LogNormal { median, p99 } => {
                write!(f, "lognormal(median {median:?}, p99 {p99:?})")
            }
        }
    }
}
