//! gRPC over tonic (feature `grpc`).
//!
//! So far: [`tls`] (with feature `rustls`), tonic endpoints per replica
//! address that verify the service's name.

#[cfg(feature = "rustls")]
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub mod tls;
