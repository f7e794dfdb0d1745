//! The registry format: what one key's value says about one endpoint.
//!
//! gRPC-go's etcd naming (`go.etcd.io/etcd/client/v3/naming/endpoints`,
//! etcd 3.1 and later) stores each endpoint as the JSON of its `Endpoint`
//! struct, `{"Addr": "10.0.0.7:8080", "Metadata": ...}`, under
//! `<target>/<addr>`. `Metadata` is any JSON there; this crate reads an
//! object's `weight`, `region`, `zone`, `sub_zone`, `priority` and
//! `draining`, and keeps its other string fields as labels.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use serde_json::{Map, Number, Value};
use tower_lb::discover::{Target, TargetState};
use tower_lb::endpoint::{EndpointMeta, Locality};

/// The `Metadata` fields this crate reads; any other string field is a label.
const WEIGHT: &str = "weight";
const REGION: &str = "region";
const ZONE: &str = "zone";
const SUB_ZONE: &str = "sub_zone";
const PRIORITY: &str = "priority";
const DRAINING: &str = "draining";
const KNOWN: [&str; 6] = [WEIGHT, REGION, ZONE, SUB_ZONE, PRIORITY, DRAINING];

/// One endpoint as the registry stores it: the value of one key under the
/// target's prefix. [`to_json`](Self::to_json) writes it (the
/// [registration](crate::register) does), [`from_json`](Self::from_json)
/// reads it (the [source](crate::Etcd) does).
///
/// ```
/// use tower_lb_etcd::Endpoint;
/// let e = Endpoint::new("10.0.0.7:8080".parse().unwrap())
///     .weight(2.0)
///     .zone("eu-west-1a")
///     .label("version", "v2");
/// // {"Addr":"10.0.0.7:8080","Metadata":{"version":"v2","weight":2.0,"zone":"eu-west-1a"}}
/// let json = e.to_json();
/// assert!(json.starts_with(br#"{"Addr":"10.0.0.7:8080","Metadata":{"#));
/// assert_eq!(Endpoint::from_json(&json).unwrap(), e);
/// // What gRPC-go's endpoint manager writes reads as weight 1, no locality.
/// let go = Endpoint::from_json(br#"{"Addr":"10.0.0.8:8080","Metadata":null}"#).unwrap();
/// assert_eq!(go, Endpoint::new("10.0.0.8:8080".parse().unwrap()));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    addr: SocketAddr,
    weight: f64,
    region: String,
    zone: String,
    sub_zone: String,
    priority: u32,
    draining: bool,
    labels: BTreeMap<String, String>,
}

/// Why a value was skipped: it is not an endpoint in the registry format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(String);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Malformed {}

fn malformed(why: impl Into<String>) -> Malformed {
    Malformed(why.into())
}

impl Endpoint {
    /// The endpoint at `addr`: weight 1, no locality, priority 0, serving,
    /// no labels.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            weight: 1.0,
            region: String::new(),
            zone: String::new(),
            sub_zone: String::new(),
            priority: 0,
            draining: false,
            labels: BTreeMap::new(),
        }
    }

    /// Sets the weight (written as given; a reader skips a value whose
    /// weight is not finite and > 0).
    pub fn weight(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// Sets the zone.
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = zone.into();
        self
    }

    /// Sets the region.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }

    /// Sets the sub-zone.
    pub fn sub_zone(mut self, sub_zone: impl Into<String>) -> Self {
        self.sub_zone = sub_zone.into();
        self
    }

    /// Sets the priority (0 is the highest).
    pub fn priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// Marks the endpoint draining: it stays in the balancers' pools and
    /// finishes its calls in flight, but takes no new picks.
    pub fn draining(mut self, draining: bool) -> Self {
        self.draining = draining;
        self
    }

    /// Adds a label (a key the format reads itself, such as `zone`, is
    /// not a label and is ignored here).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        if !KNOWN.contains(&key.as_str()) {
            self.labels.insert(key, value.into());
        }
        self
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint as a discovery target for tower-lb's reconciler.
    pub fn target(&self) -> Target<SocketAddr> {
        let mut meta = EndpointMeta::new()
            .with_locality(Locality::new(&self.region, &self.zone, &self.sub_zone))
            .with_priority(self.priority);
        for (k, v) in &self.labels {
            meta = meta.with_label(k, v);
        }
        let state = if self.draining {
            TargetState::Draining
        } else {
            TargetState::Serving
        };
        Target::new(self.addr)
            .with_weight(self.weight)
            .with_meta(meta)
            .with_state(state)
    }

    /// The value to store: `{"Addr": ..., "Metadata": {...}}`, with only
    /// the fields that differ from the defaults in `Metadata` (`null` when
    /// none does, as gRPC-go writes it).
    pub fn to_json(&self) -> Vec<u8> {
        let mut meta = Map::new();
        for (k, v) in &self.labels {
            meta.insert(k.clone(), Value::String(v.clone()));
        }
        if self.weight != 1.0 {
            // A weight that is not finite has no JSON number: written as a
            // string, which a reader refuses, as it would refuse the weight.
            let w = Number::from_f64(self.weight)
                .map_or_else(|| Value::String(self.weight.to_string()), Value::Number);
            meta.insert(WEIGHT.into(), w);
        }
        for (k, v) in [
            (REGION, &self.region),
            (ZONE, &self.zone),
            (SUB_ZONE, &self.sub_zone),
        ] {
            if !v.is_empty() {
                meta.insert(k.into(), Value::String(v.clone()));
            }
        }
        if self.priority != 0 {
            meta.insert(PRIORITY.into(), Value::from(self.priority));
        }
        if self.draining {
            meta.insert(DRAINING.into(), Value::Bool(true));
        }
        let mut value = Map::new();
        value.insert("Addr".into(), Value::String(self.addr.to_string()));
        let meta = if meta.is_empty() {
            Value::Null
        } else {
            Value::Object(meta)
        };
        value.insert("Metadata".into(), meta);
        Value::Object(value).to_string().into_bytes()
    }

    /// Reads a stored value.
    ///
    /// `Addr` and `Metadata` match case-insensitively, as Go's
    /// `encoding/json` (which gRPC-go reads them with) matches field names.
    /// `Metadata` that is absent, `null` or not an object gives the
    /// defaults; in an object, the fields this format reads must have their
    /// types, and string fields besides them become labels.
    ///
    /// # Errors
    ///
    /// [`Malformed`], saying why: not JSON, not an object, `Addr` missing
    /// or not an `ip:port` with a port other than 0 (host names are not
    /// resolved), `weight` not a finite number > 0, `priority` not an
    /// integer in `0..=u32::MAX`, `region`/`zone`/`sub_zone` not strings,
    /// `draining` not a boolean.
    pub fn from_json(value: &[u8]) -> Result<Self, Malformed> {
        let value: Value =
            serde_json::from_slice(value).map_err(|e| malformed(format!("not JSON: {e}")))?;
        let Value::Object(fields) = value else {
            return Err(malformed("not a JSON object"));
        };
        let field = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        };
        let addr = match field("Addr") {
            Some(Value::String(a)) => a
                .parse::<SocketAddr>()
                .ok()
                .filter(|a| a.port() != 0)
                .ok_or_else(|| {
                    malformed(format!("Addr {a:?} is not an ip:port with a port > 0"))
                })?,
            Some(_) => return Err(malformed("Addr is not a string")),
            None => return Err(malformed("no Addr")),
        };
        let mut endpoint = Endpoint::new(addr);
        if let Some(Value::Object(meta)) = field("Metadata") {
            endpoint.read_metadata(meta)?;
        }
        Ok(endpoint)
    }

    fn read_metadata(&mut self, meta: &Map<String, Value>) -> Result<(), Malformed> {
        for (key, value) in meta {
            match (key.as_str(), value) {
                (WEIGHT, v) => {
                    self.weight = v
                        .as_f64()
                        .filter(|w| w.is_finite() && *w > 0.0)
                        .ok_or_else(|| malformed(format!("weight {v} is not a number > 0")))?;
                }
                (PRIORITY, v) => {
                    self.priority =
                        v.as_u64()
                            .and_then(|p| u32::try_from(p).ok())
                            .ok_or_else(|| {
                                malformed(format!(
                                    "priority {v} is not an integer in 0..=4294967295"
                                ))
                            })?;
                }
                (DRAINING, Value::Bool(d)) => self.draining = *d,
                (DRAINING, v) => return Err(malformed(format!("draining {v} is not a boolean"))),
                (REGION | ZONE | SUB_ZONE, Value::String(s)) => {
                    let place = match key.as_str() {
                        REGION => &mut self.region,
                        ZONE => &mut self.zone,
                        _ => &mut self.sub_zone,
                    };
                    place.clone_from(s);
                }
                (REGION | ZONE | SUB_ZONE, v) => {
                    return Err(malformed(format!("{key} {v} is not a string")));
                }
                (_, Value::String(s)) => {
                    self.labels.insert(key.clone(), s.clone());
                }
                // Other JSON (numbers, lists) is the writer's business.
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(json: &str) -> Result<Endpoint, Malformed> {
        Endpoint::from_json(json.as_bytes())
    }

    #[test]
    fn the_grpc_go_value_reads_with_defaults() {
        let e = read(r#"{"Addr":"10.0.0.1:80","Metadata":"anything"}"#).unwrap();
        assert_eq!(e.target(), Target::new("10.0.0.1:80".parse().unwrap()));
        let e = read(r#"{"addr":"[::1]:80"}"#).unwrap();
        assert_eq!(e.addr(), "[::1]:80".parse().unwrap());
    }

    #[test]
    fn metadata_sets_weight_place_priority_state_and_labels() {
        let e = read(
            r#"{"Addr":"10.0.0.1:80","Metadata":{"weight":2.5,"region":"eu","zone":"eu-1a",
                "sub_zone":"r7","priority":1,"draining":true,"version":"v2","cores":8}}"#,
        )
        .unwrap();
        let t = e.target();
        assert_eq!(t.weight, 2.5);
        assert_eq!(*t.meta.locality(), Locality::new("eu", "eu-1a", "r7"));
        assert_eq!(t.meta.priority(), 1);
        assert_eq!(t.state, TargetState::Draining);
        assert_eq!(t.meta.labels().len(), 1, "only string fields are labels");
        assert_eq!(t.meta.labels()["version"], "v2");
    }

    #[test]
    fn malformed_values_say_why() {
        for (json, why) in [
            ("", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"Metadata":{}}"#, "no Addr"),
            (r#"{"Addr":7}"#, "not a string"),
            (r#"{"Addr":"cart.internal:80"}"#, "not an ip:port"),
            (r#"{"Addr":"10.0.0.1:0"}"#, "port > 0"),
            (
                r#"{"Addr":"10.0.0.1:80","Metadata":{"weight":0}}"#,
                "weight",
            ),
            (
                r#"{"Addr":"10.0.0.1:80","Metadata":{"weight":"2"}}"#,
                "weight",
            ),
            (
                r#"{"Addr":"10.0.0.1:80","Metadata":{"priority":-1}}"#,
                "priority",
            ),
            (
                r#"{"Addr":"10.0.0.1:80","Metadata":{"priority":5000000000}}"#,
                "priority",
            ),
            (r#"{"Addr":"10.0.0.1:80","Metadata":{"zone":3}}"#, "zone"),
            (
                r#"{"Addr":"10.0.0.1:80","Metadata":{"draining":"yes"}}"#,
                "draining",
            ),
        ] {
            let err = read(json).expect_err(json).to_string();
            assert!(err.contains(why), "{json}: {err}");
        }
    }

    proptest! {
        /// Whatever bytes a key holds, reading them never panics.
        #[test]
        fn any_bytes_read_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Endpoint::from_json(&bytes);
        }

        /// Whatever a key's JSON says, reading never panics, and an
        /// endpoint read has a port and a weight the balancer takes.
        #[test]
        fn any_json_reads_to_a_usable_endpoint_or_an_error(
            addr in "10\\.0\\.0\\.[0-9]{1,3}:[0-9]{1,6}|\\[::1\\]:[0-9]{1,5}|[a-z:.]{0,12}",
            weight in prop_oneof![any::<f64>().prop_map(Value::from), Just(Value::Null), "[a-z0-9]{0,3}".prop_map(Value::from)],
            priority in prop_oneof![any::<i64>().prop_map(Value::from), Just(Value::Bool(true))],
        ) {
            let json = serde_json::json!({"Addr": addr, "Metadata": {"weight": weight, "priority": priority}});
            if let Ok(e) = Endpoint::from_json(json.to_string().as_bytes()) {
                let t = e.target();
                prop_assert!(t.addr.port() != 0);
                prop_assert!(t.weight.is_finite() && t.weight > 0.0);
            }
        }

        /// What `to_json` writes, `from_json` reads back unchanged.
        #[test]
        fn written_values_read_back(
            port in 1u16..,
            weight in 0.001f64..1e6,
            zone in "[a-z0-9-]{0,8}",
            priority in any::<u32>(),
            draining in any::<bool>(),
            label in "[a-z]{1,6}",
        ) {
            let e = Endpoint::new(SocketAddr::from(([10, 1, 2, 3], port)))
                .weight(weight)
                .zone(zone)
                .priority(priority)
                .draining(draining)
                .label(label.clone(), "x");
            prop_assert_eq!(Endpoint::from_json(&e.to_json()), Ok(e));
        }
    }
}
