//! [`Origin`]: one HTTP endpoint, parsed and validated once.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use ::http::HeaderValue;
use ::http::uri::{Authority, PathAndQuery, Scheme, Uri};

use crate::error::ConfigError;

/// What [`Origin::parse`] accepts, for the [`ConfigError`] message.
const ALLOWED: &str = "an absolute `http://` or `https://` URI with a host, an optional \
                       non-zero port, and no user info, path, query or fragment";

/// True when `authority` has no port, or a port in 1..=65535. (The `http`
/// crate's `Authority::port` reads an out-of-range port as no port at all.)
fn valid_port(authority: &str) -> bool {
    if authority.ends_with(']') {
        return true; // a bare IPv6 literal
    }
    match authority.rsplit_once(':') {
        None => true,
        Some((_, port)) => port.parse::<u16>().is_ok_and(|p| p != 0),
    }
}

/// An endpoint of an HTTP balancer: a scheme, a host and an optional port
/// (`http://10.0.0.1:8080`), validated once when it is parsed.
///
/// It is the key of the endpoint in [`Balance`](crate::Balance) (so
/// [`Handle::remove`](crate::Handle::remove) takes an `Origin`) and what
/// [`SetOrigin`](super::SetOrigin) writes into every request sent to it.
///
/// Equality, ordering and hashing use the canonical text: the scheme and host
/// lower-cased, the port as given (`http://a` and `http://a:80` are two
/// endpoints), no trailing slash. The hash is therefore stable across
/// processes, which hash pickers rely on. Cloning is cheap (reference
/// count; `Balance` clones an endpoint's service, and so its origin, per
/// request).
#[derive(Clone)]
pub struct Origin(Arc<Inner>);

struct Inner {
    scheme: Scheme,
    authority: Authority,
    host_header: HeaderValue,
    /// `scheme://authority/`, the URI of a request whose own URI could not
    /// be rebuilt (never happens; see `rewrite_uri`).
    base: Uri,
    text: String,
    #[cfg(feature = "reqwest")]
    url: ::reqwest::Url,
}

impl Origin {
    /// Parses and validates `http://host[:port]` or `https://host[:port]`
    /// (a trailing `/` is allowed). IPv6 hosts go in brackets
    /// (`http://[::1]:8080`).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field `authority` when the text is not
    /// an absolute URI, the scheme is neither `http` nor `https`, the host is
    /// empty, the port is 0, or there is user info, a path, a query or a
    /// fragment. With the `reqwest` feature, also when `reqwest::Url`
    /// rejects the host (an `xn--` label that is not valid punycode, for
    /// one), since every request to the origin would fail there.
    ///
    /// ```
    /// use tower_lb::http::Origin;
    ///
    /// let o = Origin::parse("http://10.0.0.1:8080")?;
    /// assert_eq!(o.as_str(), "http://10.0.0.1:8080");
    /// assert_eq!(o.port(), Some(8080));
    /// assert_eq!(Origin::parse("10.0.0.1:8080").unwrap_err().field(), "authority");
    /// # Ok::<(), tower_lb::ConfigError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let bad = || ConfigError::new("authority", text, ALLOWED);
        // `Uri` drops a fragment silently; an origin has none.
        if text.contains('#') {
            return Err(bad());
        }
        let uri: Uri = text.parse().map_err(|_| bad())?;
        let scheme = uri.scheme().ok_or_else(bad)?;
        if *scheme != Scheme::HTTP && *scheme != Scheme::HTTPS {
            return Err(bad());
        }
        let authority = uri.authority().ok_or_else(bad)?;
        let no_extras = uri.path() == "/" && uri.query().is_none();
        if !no_extras
            || authority.as_str().contains('@')
            || authority.host().is_empty()
            || !valid_port(authority.as_str())
        {
            return Err(bad());
        }
        let canonical = format!(
            "{}://{}",
            scheme.as_str().to_ascii_lowercase(),
            authority.as_str().to_ascii_lowercase()
        );
        let authority =
            Authority::try_from(&canonical[scheme.as_str().len() + 3..]).map_err(|_| bad())?;
        let host_header = HeaderValue::from_str(authority.as_str()).map_err(|_| bad())?;
        let base = Uri::from_parts({
            let mut parts = ::http::uri::Parts::default();
            parts.scheme = Some(scheme.clone());
            parts.authority = Some(authority.clone());
            parts.path_and_query = Some(PathAndQuery::from_static("/"));
            parts
        })
        .map_err(|_| bad())?;
        Ok(Self(Arc::new(Inner {
            scheme: scheme.clone(),
            authority,
            host_header,
            base,
            #[cfg(feature = "reqwest")]
            url: ::reqwest::Url::parse(&canonical).map_err(|_| bad())?,
            text: canonical,
        })))
    }

    /// The origin of a resolved address: `scheme://ip:port`, as DNS
    /// discovery produces them.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `authority` if `scheme` is neither `http`
    /// nor `https`, or the port is 0.
    pub fn from_socket_addr(scheme: &str, addr: SocketAddr) -> Result<Self, ConfigError> {
        Self::parse(&format!("{scheme}://{addr}"))
    }

    /// The scheme (`http` or `https`).
    pub fn scheme(&self) -> &Scheme {
        &self.0.scheme
    }

    /// The authority (`host` or `host:port`), lower-cased.
    pub fn authority(&self) -> &Authority {
        &self.0.authority
    }

    /// The host (for IPv6, with brackets).
    pub fn host(&self) -> &str {
        self.0.authority.host()
    }

    /// The port, if one was given.
    pub fn port(&self) -> Option<u16> {
        self.0.authority.port_u16()
    }

    /// The canonical text, `scheme://authority`.
    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// The authority as a `Host` header value.
    pub(crate) fn host_header(&self) -> &HeaderValue {
        &self.0.host_header
    }

    /// `uri` with this origin's scheme and authority; path and query kept
    /// (`/` when the URI had none).
    pub(crate) fn rewrite_uri(&self, uri: Uri) -> Uri {
        let mut parts = uri.into_parts();
        parts.scheme = Some(self.0.scheme.clone());
        parts.authority = Some(self.0.authority.clone());
        if parts.path_and_query.is_none() {
            parts.path_and_query = Some(PathAndQuery::from_static("/"));
        }
        // `from_parts` fails only when a scheme comes without an authority
        // or a path, and all three are set above; the fallback is never
        // taken but keeps this path free of panics.
        Uri::from_parts(parts).unwrap_or_else(|_| self.0.base.clone())
    }

    /// The origin as a URL, for rewriting `reqwest` requests.
    #[cfg(feature = "reqwest")]
    pub(crate) fn url(&self) -> &::reqwest::Url {
        &self.0.url
    }
}

impl FromStr for Origin {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Self::parse(s)
    }
}

impl TryFrom<&str> for Origin {
    type Error = ConfigError;

    fn try_from(s: &str) -> Result<Self, ConfigError> {
        Self::parse(s)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl fmt::Debug for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Origin({})", self.0.text)
    }
}

impl PartialEq for Origin {
    fn eq(&self, other: &Self) -> bool {
        self.0.text == other.0.text
    }
}

impl Eq for Origin {}

impl Hash for Origin {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.text.hash(state);
    }
}

impl PartialOrd for Origin {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Origin {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.text.cmp(&other.0.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form() {
        let o = Origin::parse("HTTP://Backend.Example:8080/").unwrap();
        assert_eq!(o.as_str(), "http://backend.example:8080");
        assert_eq!(o, Origin::parse("http://backend.example:8080").unwrap());
        assert_eq!(o.host(), "backend.example");
        let v6 = Origin::parse("https://[::1]:9443").unwrap();
        assert_eq!(v6.host(), "[::1]");
        assert_eq!(v6.port(), Some(9443));
        assert_eq!(Origin::parse("http://a").unwrap().port(), None);
    }

    #[test]
    fn rejects_everything_but_scheme_host_port() {
        for bad in [
            "",
            "10.0.0.1:8080",
            "/path",
            "ftp://a:1",
            "http://",
            "http://a:0",
            "http://user@a:1",
            "http://a:1/path",
            "http://a:1?q=1",
            "http://a:1#frag",
            "http://a:99999",
            "http://a b",
        ] {
            let err = Origin::parse(bad).expect_err(bad);
            assert_eq!(err.field(), "authority", "{bad}");
        }
    }

    /// The URL parser behind `reqwest` decodes `xn--` labels; one that is
    /// not punycode is refused when the origin is parsed, not at each call.
    #[cfg(feature = "reqwest")]
    #[test]
    fn a_host_reqwest_cannot_reach_is_refused() {
        let err = Origin::parse("http://a.xn--:1").unwrap_err();
        assert_eq!(err.field(), "authority");
        assert!(Origin::parse("http://a.xn--nxasmq6b:1").is_ok());
    }

    #[test]
    fn rewrite_keeps_path_and_query() {
        let o = Origin::parse("http://10.0.0.1:8080").unwrap();
        let uri: Uri = "http://svc.local/a/b?x=1&y=2".parse().unwrap();
        assert_eq!(o.rewrite_uri(uri), "http://10.0.0.1:8080/a/b?x=1&y=2");
        let rel: Uri = "/only/path?q".parse().unwrap();
        assert_eq!(o.rewrite_uri(rel), "http://10.0.0.1:8080/only/path?q");
        let bare: Uri = "svc.local:80".parse().unwrap();
        assert_eq!(o.rewrite_uri(bare), "http://10.0.0.1:8080/");
    }

    #[test]
    fn from_socket_addr() {
        let o = Origin::from_socket_addr("http", "[::1]:80".parse().unwrap()).unwrap();
        assert_eq!(o.as_str(), "http://[::1]:80");
        assert!(Origin::from_socket_addr("gopher", "1.2.3.4:5".parse().unwrap()).is_err());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Hosts every parser on the way accepts. A label starting with
        /// `xn--` is punycode, which the URL parser behind `reqwest`
        /// decodes and rejects when it is not valid; those have their own
        /// test.
        fn host() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-zA-Z][a-zA-Z0-9-]{0,20}(\\.[a-zA-Z][a-zA-Z0-9-]{0,10}){0,3}".prop_filter(
                    "punycode labels",
                    |h| !h
                        .split('.')
                        .any(|l| l.to_ascii_lowercase().starts_with("xn--"))
                ),
                any::<[u8; 4]>().prop_map(|o| std::net::Ipv4Addr::from(o).to_string()),
                any::<[u16; 8]>().prop_map(|s| format!("[{}]", std::net::Ipv6Addr::from(s))),
            ]
        }

        proptest! {
            /// Any scheme, host and port parse, and the canonical text
            /// parses back to an equal origin.
            #[test]
            fn parse_round_trips(https: bool, host in host(), port in 1u16..) {
                let scheme = if https { "https" } else { "http" };
                let o = Origin::parse(&format!("{scheme}://{host}:{port}")).unwrap();
                prop_assert_eq!(o.port(), Some(port));
                prop_assert_eq!(o.host(), host.to_ascii_lowercase());
                prop_assert_eq!(Origin::parse(o.as_str()).unwrap(), o);
            }

            /// A rewrite keeps any path and query and takes the origin's
            /// scheme and authority, whatever the request's URI was.
            #[test]
            fn rewrite_keeps_path_and_query(
                from in prop_oneof![Just(""), Just("http://svc.local"), Just("https://u@x:9")],
                path in "(/[a-zA-Z0-9._~%!$&'()*+,;=:@-]{0,12}){1,4}",
                query in proptest::option::of("[a-zA-Z0-9._~%!$&'()*+,;=:@/?-]{0,24}"),
            ) {
                let pq = match &query { Some(q) => format!("{path}?{q}"), None => path.clone() };
                let uri: Uri = format!("{from}{pq}").parse().unwrap();
                let o = Origin::parse("https://10.1.2.3:8443").unwrap();
                let out = o.rewrite_uri(uri);
                prop_assert_eq!(out.scheme_str(), Some("https"));
                prop_assert_eq!(out.authority().map(|a| a.as_str()), Some("10.1.2.3:8443"));
                prop_assert_eq!(out.path(), path.as_str());
                prop_assert_eq!(out.query(), query.as_deref());
            }
        }
    }
}
