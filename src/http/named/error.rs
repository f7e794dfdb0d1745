//! [`ReplicaError`]: a replica's failure, naming the service and the address.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::http::ClassifyError;
use crate::outcome::FailureKind;

/// A boxed error from a replica's client.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;

/// The error of a [`Replica`](super::Replica): its client's error, with the
/// service's name and the replica's address, classified once.
///
/// Its message says which replica of which service failed and how:
///
/// ```text
/// cannot connect to `api.internal` at 10.0.3.7:8443: its TLS certificate was refused
/// (invalid peer certificate: certificate not valid for name "api.internal"; ...);
/// the replica must present a certificate for `api.internal` ...
/// ```
///
/// [`Classifier`](crate::http::Classifier) reads [`kind`](Self::kind): a
/// refused certificate, a refused or reset connection and every error the
/// client reports as a connect error are [`FailureKind::Connect`], so they
/// count toward that replica's health and no other's. The client's own
/// error is its [`source`](StdError::source) (downcast it to
/// `hyper_util::client::legacy::Error` or `reqwest::Error`), or take it
/// with [`into_inner`](Self::into_inner).
pub struct ReplicaError {
    addr: SocketAddr,
    server_name: Arc<str>,
    kind: FailureKind,
    source: BoxError,
}

impl ReplicaError {
    pub(crate) fn new(addr: SocketAddr, server_name: Arc<str>, error: impl Into<BoxError>) -> Self {
        let source = error.into();
        let kind = if certificate_error(&*source).is_some() {
            FailureKind::Connect
        } else {
            source.failure_kind()
        };
        Self {
            addr,
            server_name,
            kind,
            source,
        }
    }

    /// The replica's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The service's name (the TLS server name, and the host of `Host`).
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// What the failure says about the replica.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// True when no request reached the replica's application: the
    /// connection or the TLS handshake failed.
    pub fn is_connect(&self) -> bool {
        self.kind == FailureKind::Connect
    }

    /// The certificate error that refused the replica, if that is what
    /// failed (its certificate does not name the service, has expired, or
    /// does not chain to a trusted root).
    #[cfg(feature = "rustls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
    pub fn certificate_error(&self) -> Option<&rustls::Error> {
        certificate_error(&*self.source)
    }

    /// The client's error.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.source
    }

    /// Unwraps the client's error.
    pub fn into_inner(self) -> BoxError {
        self.source
    }
}

impl ClassifyError for ReplicaError {
    fn failure_kind(&self) -> FailureKind {
        self.kind
    }
}

/// `error`, then its causes; it looks inside `io::Error`s too, whose own
/// `source` skips the error they wrap (TLS errors travel that way).
fn chain<'a>(
    error: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(error), |&e| {
        let wrapped = e
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .map(|inner| inner as &(dyn StdError + 'static));
        wrapped.or_else(move || e.source())
    })
}

#[cfg(feature = "rustls")]
fn certificate_error<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    chain(error)
        .filter_map(|e| e.downcast_ref::<rustls::Error>())
        .find(|e| matches!(e, rustls::Error::InvalidCertificate(_)))
}

#[cfg(not(feature = "rustls"))]
fn certificate_error(_: &(dyn StdError + 'static)) -> Option<std::convert::Infallible> {
    None
}

impl fmt::Display for ReplicaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, addr) = (&*self.server_name, self.addr);
        if let Some(cert) = certificate_error(&*self.source) {
            return write!(
                f,
                "cannot connect to `{name}` at {addr}: its TLS certificate was refused ({cert}); \
                 the replica must present a certificate for `{name}` (a subjectAltName) that \
                 chains to a root of the client's TLS configuration"
            );
        }
        // The innermost cause says what happened; the client's own wrapper
        // ("client error (Connect)") stays available as `source`.
        let cause = chain(&*self.source).last().unwrap_or(&*self.source);
        match self.kind {
            FailureKind::Connect => write!(f, "cannot connect to `{name}` at {addr}: {cause}"),
            FailureKind::Timeout => write!(f, "request to `{name}` at {addr} timed out: {cause}"),
            _ => write!(f, "request to `{name}` at {addr} failed: {cause}"),
        }
    }
}

impl fmt::Debug for ReplicaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplicaError")
            .field("addr", &self.addr)
            .field("server_name", &self.server_name)
            .field("kind", &self.kind)
            .field("source", &self.source)
            .finish()
    }
}

impl StdError for ReplicaError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(source: impl Into<BoxError>) -> ReplicaError {
        ReplicaError::new(
            "10.0.3.7:8443".parse().unwrap(),
            "api.internal".into(),
            source,
        )
    }

    #[test]
    fn refused_is_a_connect_failure_naming_name_and_address() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let e = error(io::Error::other(refused));
        assert!(e.is_connect());
        let text = e.to_string();
        assert!(text.starts_with("cannot connect to `api.internal` at 10.0.3.7:8443: "));
        assert!(text.contains("refused"), "{text}");
    }

    #[test]
    fn other_errors_keep_their_kind_and_cause() {
        let e = error("stream closed");
        assert_eq!(e.kind(), FailureKind::Error);
        assert_eq!(
            e.to_string(),
            "request to `api.internal` at 10.0.3.7:8443 failed: stream closed"
        );
        let e = error(io::Error::from(io::ErrorKind::TimedOut));
        assert_eq!(e.kind(), FailureKind::Timeout);
        assert!(e.source().is_some());
    }

    #[cfg(feature = "rustls")]
    #[test]
    fn a_certificate_error_inside_io_errors_is_a_connect_failure() {
        let cert = rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName);
        let io = io::Error::new(io::ErrorKind::InvalidData, cert);
        let e = error(io::Error::other(io));
        assert!(e.is_connect());
        assert!(e.certificate_error().is_some());
        let text = e.to_string();
        assert!(text.contains("certificate for `api.internal`"), "{text}");
        assert!(text.contains("10.0.3.7:8443"), "{text}");
    }
}
