//! Discovery: keep a balancer's endpoints in step with where a platform
//! says they are.
#[cfg(feature = "dns")]
pub mod dns;
