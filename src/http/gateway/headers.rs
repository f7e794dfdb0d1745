//! The headers a gateway rewrites: hop-by-hop fields out (RFC 9110
//! §7.6.1), then `Host` and `X-Forwarded-*` in.

use std::net::IpAddr;

use http::header::{
    CONNECTION, HOST, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRANSFER_ENCODING, UPGRADE,
};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::builder::{Config, HostPolicy, XForwarded};

/// `X-Forwarded-For`.
pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// `X-Forwarded-Host`.
pub(crate) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
/// `X-Forwarded-Proto`.
pub(crate) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Fields that describe one connection and are removed whether or not
/// `Connection` names them: RFC 9110 §7.6.1's list (`Connection`,
/// `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`,
/// `Upgrade`) and the proxy credentials of §11.7, meant for the proxy on
/// this hop (Go's `ReverseProxy` removes the same). `Trailer` is not
/// among them: RFC 9110 (§6.6.2) made it end-to-end, and hyper sends over
/// HTTP/1 only the trailer fields it declares.
pub(crate) const HOP_BY_HOP: [HeaderName; 8] = [
    CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    TE,
    TRANSFER_ENCODING,
    UPGRADE,
    PROXY_AUTHORIZATION,
    PROXY_AUTHENTICATE,
];

/// Whether a comma-separated field value lists `token` (case-insensitive).
fn lists(value: &HeaderValue, token: &str) -> bool {
    value
        .to_str()
        .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

/// Removes the hop-by-hop fields from `headers`: every field named in
/// `Connection`, then [`HOP_BY_HOP`]. Returns whether `TE` asked for
/// trailers (a request's `TE: trailers` is sent on: gRPC needs it, and
/// hyper sends trailers only to a client that asked for them).
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) -> bool {
    let te_trailers = headers.get_all(TE).iter().any(|v| lists(v, "trailers"));
    if headers.contains_key(CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    te_trailers
}

/// Rewrites a request's headers for its way upstream: hop-by-hop fields
/// out, then `Host` per the policy and `X-Forwarded-*`.
pub(crate) fn rewrite_request(parts: &mut Parts, config: &Config) {
    // The client's host, before anything is removed: `Host`, or for
    // HTTP/2 the URI's authority.
    let client_host = parts.headers.get(HOST).cloned().or_else(|| {
        let authority = parts.uri.authority()?.as_str();
        let host = authority.rsplit('@').next().unwrap_or(authority);
        HeaderValue::from_str(host).ok()
    });
    if strip_hop_by_hop(&mut parts.headers) {
        parts
            .headers
            .insert(TE, HeaderValue::from_static("trailers"));
    }
    let proto = parts
        .uri
        .scheme_str()
        .and_then(|s| HeaderValue::from_str(s).ok())
        .unwrap_or_else(|| config.proto.clone());
    let peer = config.peer.peer(&parts.extensions).map(|a| a.ip());
    let headers = &mut parts.headers;
    forward(headers, config.forwarded, peer, client_host.as_ref(), proto);
    match &config.host {
        HostPolicy::Keep => match client_host {
            Some(host) => headers.insert(HOST, host),
            None => headers.remove(HOST),
        },
        HostPolicy::Replica => headers.remove(HOST),
        HostPolicy::Set(host) => headers.insert(HOST, host.clone()),
    };
}

/// Writes `X-Forwarded-For`, `-Host` and `-Proto` as `mode` says.
fn forward(
    headers: &mut HeaderMap,
    mode: XForwarded,
    peer: Option<IpAddr>,
    host: Option<&HeaderValue>,
    proto: HeaderValue,
) {
    let earlier = match mode {
        XForwarded::Append => joined(headers, &X_FORWARDED_FOR),
        XForwarded::Replace => {
            for name in [&X_FORWARDED_FOR, &X_FORWARDED_HOST, &X_FORWARDED_PROTO] {
                headers.remove(name);
            }
            None
        }
    };
    let for_value = match (earlier, peer) {
        (Some(mut list), Some(ip)) => {
            list.extend_from_slice(b", ");
            list.extend_from_slice(ip.to_string().as_bytes());
            HeaderValue::from_bytes(&list).ok()
        }
        (Some(list), None) => HeaderValue::from_bytes(&list).ok(),
        (None, Some(ip)) => HeaderValue::from_str(&ip.to_string()).ok(),
        (None, None) => None,
    };
    headers.remove(&X_FORWARDED_FOR);
    if let Some(value) = for_value {
        headers.insert(X_FORWARDED_FOR, value);
    }
    if let Some(host) = host
        && !headers.contains_key(&X_FORWARDED_HOST)
    {
        headers.insert(X_FORWARDED_HOST, host.clone());
    }
    if !headers.contains_key(&X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, proto);
    }
}

/// Every line of `name`, joined with ", " into one list; `None` without
/// any.
fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
    let mut values = headers.get_all(name).iter();
    let mut list = values.next()?.as_bytes().to_vec();
    for v in values {
        list.extend_from_slice(b", ");
        list.extend_from_slice(v.as_bytes());
    }
    Some(list)
}

#[cfg(test)]
mod tests;
