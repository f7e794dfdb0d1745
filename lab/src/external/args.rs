//! The target's flags: `--target` and the request and load it sends
//! (`--users`, `--rate`, `--method`, `--path`, `--header`, `--body`).

use super::error::TargetError;
use crate::error::LabError;
use crate::scenario::Method;
use crate::scenario::target::{MAX_RATE, MAX_USERS, replica};

/// The flags this module reads (each takes a value).
pub const FLAGS: [&str; 7] = [
    "--target", "--users", "--rate", "--method", "--path", "--header", "--body",
];

/// The target's flags as given.
#[derive(Debug, Clone, Default)]
pub struct TargetArgs {
    /// `--target`'s URLs.
    pub urls: Option<Vec<String>>,
    /// `--users`.
    pub users: Option<u32>,
    /// `--rate`, arrivals per second.
    pub rate: Option<f64>,
    /// `--method`.
    pub method: Option<Method>,
    /// `--path`.
    pub path: Option<String>,
    /// `--header`s, in order.
    pub headers: Vec<(String, String)>,
    /// `--body`.
    pub body: Option<String>,
    /// Whether `--scenario` was given (without it, `--target` runs the
    /// target defaults).
    pub scenario: bool,
}

impl TargetArgs {
    /// Reads `flag` (one of [`FLAGS`]) with its value.
    ///
    /// # Errors
    ///
    /// An input error naming the flag and the value (a URL the lab cannot
    /// send to, users or a rate past the caps, an unknown method).
    pub fn set(&mut self, flag: &str, v: String) -> Result<(), LabError> {
        let bad = |p: String| LabError::input(format!("{flag}: {p}"));
        match flag {
            "--target" => {
                let urls: Vec<String> = v
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                if urls.is_empty() {
                    return Err(bad("list at least one URL (http://HOST:PORT)".into()));
                }
                for u in &urls {
                    replica(u).map_err(|problem| TargetError::BadUrl {
                        url: u.clone(),
                        problem,
                    })?;
                }
                self.urls = Some(urls);
            }
            "--users" => {
                let n: u32 = v
                    .parse()
                    .map_err(|_| bad(format!("\"{v}\" is not a whole number")))?;
                if !(1..=MAX_USERS).contains(&n) {
                    return Err(bad(format!("{n} is not in 1..={MAX_USERS}")));
                }
                self.users = Some(n);
            }
            "--rate" => self.rate = Some(rate(&v).map_err(bad)?),
            "--method" => self.method = Some(method(&v).map_err(bad)?),
            "--path" => self.path = Some(v),
            "--header" => {
                let Some((k, val)) = v.split_once(':') else {
                    return Err(bad(format!("\"{v}\": write it as 'NAME: VALUE'")));
                };
                self.headers
                    .push((k.trim().to_string(), val.trim().to_string()));
            }
            "--body" => self.body = Some(v),
            _ => return Err(bad("not a target flag".into())),
        }
        Ok(())
    }

    /// The request and load flags given (those that need a target).
    pub fn given(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let flags = [
            ("--users", self.users.is_some()),
            ("--rate", self.rate.is_some()),
            ("--method", self.method.is_some()),
            ("--path", self.path.is_some()),
            ("--header", !self.headers.is_empty()),
            ("--body", self.body.is_some()),
        ];
        for (f, on) in flags {
            if on {
                out.push(f);
            }
        }
        out
    }
}

/// `--rate`'s arrivals per second: `R` or `R/s`, in (0, [`MAX_RATE`]].
fn rate(v: &str) -> Result<f64, String> {
    let num = v.trim().strip_suffix("/s").unwrap_or(v.trim());
    let r: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("\"{v}\" is not a rate (arrivals per second, e.g. 50 or 50/s)"))?;
    if !(r.is_finite() && r > 0.0 && r <= MAX_RATE) {
        return Err(format!(
            "{v} is not in (0, {MAX_RATE}] per second (the cap against a target)"
        ));
    }
    Ok(r)
}

/// `--method`'s method, in any case.
fn method(v: &str) -> Result<Method, String> {
    Ok(match v.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "POST" => Method::Post,
        "PATCH" => Method::Patch,
        _ => return Err(format!("\"{v}\": give GET, PUT, DELETE, POST or PATCH")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_methods() {
        assert_eq!(rate("50").unwrap(), 50.0);
        assert_eq!(rate("50/s").unwrap(), 50.0);
        for bad in ["0", "-1", "1001", "NaN", "inf", "x", "1e9"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
        assert_eq!(method("post").unwrap(), Method::Post);
        assert!(method("TRACE").is_err());
    }
}
