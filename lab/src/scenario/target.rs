//! `[target]`: the user's own replicas, named by URL, in place of the
//! lab's backends (`--target` sets the same from the command line). The
//! section says where the requests go and what they are; `[load]` says how
//! many (`vus` or `rate`, within [`MAX_USERS`] and [`MAX_RATE`]). Running
//! against them, the checks before any traffic and the flags are
//! [`crate::external`]'s.

use std::collections::BTreeMap;
use std::time::Duration;

use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;

use super::backend::BackendSpec;
use super::load::{MAX_BODY, Method};
use super::{PickerName, Scenario};

/// The most arrivals per second a run may send to someone's replicas (open
/// loop, `--rate`): a typo must not flood a service. A thousand a second
/// is what a small fleet serves without notice, and ten seconds of it
/// gives a p99 from 10,000 requests.
pub const MAX_RATE: f64 = 1000.0;

/// The most closed-loop users (`--users`): the published study's 100.
pub const MAX_USERS: u32 = 100;

/// The longest a row may send (warm-up included): ten minutes.
pub const MAX_DURATION: Duration = Duration::from_secs(600);

/// The most replicas one run names: far more than a table shows, few enough
/// that the checks before the run stay short.
pub const MAX_REPLICAS: usize = 256;

/// The request path when `[target]` or `--path` gives none.
pub const DEFAULT_PATH: &str = "/";

/// Request headers the lab sets itself (`host` comes from the URL, the
/// body's length from the body).
const OWN_HEADERS: [&str; 3] = ["host", "content-length", "transfer-encoding"];

fn root() -> String {
    DEFAULT_PATH.to_string()
}

/// `[target]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// The replicas: `http://HOST:PORT` each (`--target` replaces them).
    #[serde(default)]
    pub urls: Vec<String>,
    /// Every request's method (default `GET`).
    #[serde(default)]
    pub method: Method,
    /// Every request's path and query (default `/`).
    #[serde(default = "root")]
    pub path: String,
    /// Headers every request carries.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Every request's body (default empty).
    #[serde(default)]
    pub body: String,
}

impl Default for TargetSpec {
    fn default() -> Self {
        Self {
            urls: Vec::new(),
            method: Method::Get,
            path: root(),
            headers: BTreeMap::new(),
            body: String::new(),
        }
    }
}

/// One replica of a target, parsed from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// The URL as given.
    pub url: String,
    /// `host:port`: its name in the table.
    pub name: String,
    /// Where its requests go.
    pub authority: Authority,
}

/// Parses one replica's URL: `http://HOST[:PORT][/]`, nothing else (the
/// path is `[target] path` or `--path`, the same for every replica).
pub fn replica(url: &str) -> Result<Replica, String> {
    let hint = "write it as http://HOST:PORT";
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|e| format!("\"{url}\" is not a URL ({e}): {hint}"))?;
    match uri.scheme() {
        Some(s) if *s == Scheme::HTTP => {}
        Some(s) if *s == Scheme::HTTPS => {
            return Err(format!(
                "\"{url}\": https is not supported (the lab's client speaks plain HTTP/1.1): give the replicas' plain-HTTP address"
            ));
        }
        Some(s) => return Err(format!("\"{url}\": scheme \"{s}\" is not http: {hint}")),
        None => return Err(format!("\"{url}\" has no scheme: {hint}")),
    }
    let Some(auth) = uri.authority() else {
        return Err(format!("\"{url}\" has no host: {hint}"));
    };
    if auth.as_str().contains('@') {
        return Err(format!(
            "\"{url}\": a user or password in the URL is not supported: give credentials as a header"
        ));
    }
    if auth.host().is_empty() {
        return Err(format!("\"{url}\" has no host: {hint}"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(format!(
            "\"{url}\": give the path with --path (or [target] path), the same for every replica: {hint}"
        ));
    }
    let port = auth.port_u16().unwrap_or(80);
    if port == 0 {
        return Err(format!("\"{url}\": port 0 is not a port: {hint}"));
    }
    let name = format!("{}:{port}", auth.host());
    let authority = name
        .parse()
        .map_err(|e| format!("\"{url}\": {e}: {hint}"))?;
    Ok(Replica {
        url: url.trim().to_string(),
        name,
        authority,
    })
}

impl TargetSpec {
    /// Its replicas, parsed; an error names the URL (and a replica listed
    /// twice, or none).
    pub fn replicas(&self) -> Result<Vec<Replica>, String> {
        if self.urls.is_empty() {
            return Err(
                "no replica: give --target http://HOST:PORT[,...] or [target] urls".to_string(),
            );
        }
        if self.urls.len() > MAX_REPLICAS {
            return Err(format!("at most {MAX_REPLICAS} replicas"));
        }
        let mut out: Vec<Replica> = Vec::with_capacity(self.urls.len());
        for u in &self.urls {
            let r = replica(u)?;
            if let Some(same) = out.iter().find(|o| o.name == r.name) {
                return Err(format!(
                    "\"{}\" and \"{}\" are the same replica ({}): list each once",
                    same.url, r.url, r.name
                ));
            }
            out.push(r);
        }
        Ok(out)
    }

    /// The request's path and query.
    pub fn path_and_query(&self) -> Result<PathAndQuery, String> {
        if !self.path.starts_with('/') {
            return Err(format!("\"{}\" does not start with /", self.path));
        }
        self.path
            .parse()
            .map_err(|e| format!("\"{}\" is not a path: {e}", self.path))
    }

    /// The request's headers.
    pub fn header_map(&self) -> Result<HeaderMap, String> {
        let mut map = HeaderMap::new();
        for (k, v) in &self.headers {
            let name = HeaderName::from_bytes(k.trim().as_bytes())
                .map_err(|_| format!("\"{k}\" is not a header name"))?;
            if OWN_HEADERS.contains(&name.as_str()) {
                return Err(format!(
                    "\"{k}\" is set by the lab (host from the URL, length from the body)"
                ));
            }
            let value = HeaderValue::from_str(v.trim())
                .map_err(|_| format!("the value of \"{k}\" is not a header value"))?;
            map.append(name, value);
        }
        Ok(map)
    }

    /// Synthesized `[[backend]]`s, one per replica, named `host:port`:
    /// the rest of the lab counts and names backends; their service time
    /// and workers are not used (nothing is served here).
    pub fn backends(&self) -> Result<Vec<BackendSpec>, String> {
        self.replicas()?
            .iter()
            .map(|r| {
                let text = format!(
                    "name = {}\ndelay = \"0ms\"",
                    toml::Value::String(r.name.clone())
                );
                toml::from_str(&text).map_err(|e| format!("{}: {e}", r.url))
            })
            .collect()
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let err = |f: &str, p: String| Err((format!("target.{f}"), p));
        // None yet is checked before the run: `--target` may give them.
        if let (false, Err(p)) = (self.urls.is_empty(), self.replicas()) {
            return err("urls", p);
        }
        if let Err(p) = self.path_and_query() {
            return err("path", p);
        }
        if let Err(p) = self.header_map() {
            return err("headers", p);
        }
        if self.body.len() > MAX_BODY as usize {
            return err(
                "body",
                format!("{} bytes is more than {MAX_BODY}", self.body.len()),
            );
        }
        Ok(())
    }
}

impl Scenario {
    /// Points the scenario at `target`'s replicas: its backends become one
    /// per replica. An error names the field and the problem.
    pub fn aim(&mut self, target: TargetSpec) -> Result<(), (String, String)> {
        self.backends = target
            .backends()
            .map_err(|p| ("target.urls".to_string(), p))?;
        self.target = Some(target);
        self.validate()
    }

    /// What a scenario with `[target]` cannot have: what models the lab's
    /// own backends, and more traffic than the caps allow.
    pub(super) fn validate_target(&self) -> Result<(), (String, String)> {
        let Some(t) = &self.target else {
            return Ok(());
        };
        t.validate()?;
        let err = |f: &str, p: &str| Err((f.to_string(), p.to_string()));
        let models = "models the lab's own backends; a target's replicas are yours";
        if self.fleet.is_some() {
            return err("fleet", models);
        }
        if !self.resources.is_empty() {
            return err("resource", models);
        }
        if self.streams.is_some() {
            return err("streams", "streams need the lab's own backends");
        }
        if self.capacity.is_some() {
            return err("capacity", "--find-capacity does not run against a target");
        }
        if !self.peers.is_empty() {
            return err("peers", "the peers run in front of the lab's own backends");
        }
        let load = &self.load;
        if load.utilization.is_some() {
            return err(
                "load.utilization",
                "a target's capacity is unknown: give [load] rate (arrivals per second)",
            );
        }
        if !load.overhead.0.is_zero() {
            return err("load.overhead", "the hop to a real replica is real");
        }
        if load.method != Method::Get || load.body != 0 {
            return err(
                "load.method",
                "give a target's method and body in [target] (method, body)",
            );
        }
        self.validate_caps()
    }

    /// [`MAX_USERS`], [`MAX_RATE`] and [`MAX_DURATION`].
    fn validate_caps(&self) -> Result<(), (String, String)> {
        let err = |f: &str, p: String| Err((f.to_string(), p));
        if self.max_vus() > MAX_USERS {
            return err(
                "load.vus",
                format!(
                    "{} users: at most {MAX_USERS} against a target",
                    self.max_vus()
                ),
            );
        }
        if let Some(r) = self.load.rate.filter(|&r| r > MAX_RATE) {
            return err(
                "load.rate",
                format!("{r}/s: at most {MAX_RATE}/s against a target"),
            );
        }
        if self.duration.0 + self.load.warmup.0 > MAX_DURATION {
            return err(
                "duration",
                format!(
                    "{:?} (with the warm-up): at most {MAX_DURATION:?} per row against a target",
                    self.duration.0 + self.load.warmup.0
                ),
            );
        }
        Ok(())
    }
}

/// Whether `picker` sends requests of its own (load probes) beside the
/// traffic: `prequal`'s probes would add to what a target is sent, past
/// the caps.
pub fn probes(picker: PickerName) -> bool {
    use tower_lb::pick::Picker as _;
    match picker {
        PickerName::Crate(n) => tower_lb::pick::AnyPicker::by_name(n, tower_lb::http::ForwardedFor)
            .is_ok_and(|p| p.probe_pool().is_some()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_to_host_and_port() {
        let r = replica("http://10.0.0.5:8080").unwrap();
        assert_eq!(r.name, "10.0.0.5:8080");
        assert_eq!(
            replica("http://example.com/").unwrap().name,
            "example.com:80"
        );
        for bad in [
            "https://x:1",
            "10.0.0.5:8080",
            "ftp://x",
            "http://x:1/api",
            "http://u:p@x:1",
            "http://x:0",
            "http://",
            "",
        ] {
            assert!(replica(bad).is_err(), "{bad}");
        }
    }
}
