//! etcd discovery for [tower-lb](tower_lb): a balancer's endpoints follow
//! the keys under one prefix of an etcd v3 cluster, and replicas register
//! themselves there under leases.
//!
//! A crate of its own, as `tower-lb-kube` is, because its API names
//! [`etcd_client::Client`] (you build it, with your TLS, auth and
//! keep-alive settings), because etcd-client is pre-1.0 and its releases
//! break, and because its build compiles etcd's protobuf files with
//! `protoc`: none of that should reach tower-lb's users who do not use
//! etcd. It is written against tower-lb's public discovery API only
//! ([`Source`](tower_lb::discover::Source), [`Reconciler`](tower_lb::discover::Reconciler),
//! [`Stats`](tower_lb::discover::Stats), [`until_gone`](tower_lb::discover::until_gone)).
//!
//! # Registry format
//!
//! gRPC-go's etcd naming (`go.etcd.io/etcd/client/v3/naming/endpoints`,
//! the `etcd:///` resolver): each endpoint is one key under `target/`,
//! `target/<addr>` by convention, whose value is the JSON of gRPC-go's
//! `endpoints.Endpoint`, `{"Addr": "<ip:port>", "Metadata": ...}`. A
//! replica registered by gRPC-go's `endpoints.Manager` is read as it is;
//! [`Endpoint`] writes and reads the format.
//!
//! | value | endpoint in the balancer |
//! |---|---|
//! | `Addr` (`ip:port`, port > 0; host names are not resolved) | the address |
//! | `Metadata.weight` (number > 0; default 1) | weight |
//! | `Metadata.region`, `.zone`, `.sub_zone` (strings) | [`Locality`](tower_lb::endpoint::Locality) |
//! | `Metadata.priority` (integer, 0 the highest) | priority |
//! | `Metadata.draining` (`true`) | draining: no new picks, calls in flight finish |
//! | other string fields of `Metadata` | labels |
//! | `Metadata` absent, `null` or not an object (gRPC-go allows any JSON) | the defaults |
//! | the key deleted, or its lease expired | absent |
//!
//! A value that is not in this format (not JSON, no usable `Addr`, a
//! field of the wrong type) is skipped: the key has no endpoint (as if it
//! were deleted, whether the value came from a list or a watch), the skip
//! is counted in [`Stats::errors`](tower_lb::discover::Stats::errors) and
//! reported with its key and reason. Nothing a key holds can panic the
//! source. Two keys with one address give one endpoint (the first key in
//! key order).
//!
//! # Watching, and failures
//!
//! [`Etcd`] lists the prefix (one range read, applied as the whole set in
//! one update) and watches from the list's revision + 1, applying each
//! watch response's events as one update through a
//! [`Reconciler`](tower_lb::discover::Reconciler): an address seen before
//! keeps its endpoint and load model.
//!
//! * **A lost watch** (etcd restarted, the connection dropped, a list or
//!   watch that failed or took over [`request_timeout`](Builder::request_timeout))
//!   is counted as an error and retried after a backoff
//!   ([`DEFAULT_RECONNECT_BASE`] doubling to [`DEFAULT_RECONNECT_CAP`], full
//!   jitter, reset once a watch delivers), resuming the watch after the last
//!   event seen: etcd replays what changed meanwhile, so nothing is listed
//!   again.
//! * **A compacted revision** (etcd answers a resumed watch with
//!   `compact_revision`) is counted and re-lists at once; so does an etcd
//!   whose revision is behind what was read, or whose cluster id changed
//!   (a cluster rebuilt or restored, or another one).
//! * **While etcd is away the balancer keeps its last good set**:
//!   endpoints leave only when etcd says their key is gone, never because
//!   etcd cannot be reached.
//! * Every error is reported with
//!   [`Handle::report_discovery_error`](tower_lb::Handle::report_discovery_error)
//!   as source `"etcd"`.
//!
//! Two client settings are yours to choose, on the
//! [`ConnectOptions`](etcd_client::ConnectOptions) you connect with: gRPC
//! keep-alives ([`with_keep_alive`](etcd_client::ConnectOptions::with_keep_alive)),
//! so that a half-open connection (a partition with no reset) ends the
//! watch; and, for a cluster of several members,
//! [`with_require_leader`](etcd_client::ConnectOptions::with_require_leader),
//! so that a member cut off from its leader ends the watch instead of
//! going silent. Either way the source reconnects and resumes.
//!
//! ```no_run
//! use tower_lb::discover::{self, Source};
//! use tower_lb_etcd::Etcd;
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! # let client = tower::service_fn(|_: ::http::Request<()>| async {
//! #     Ok::<_, std::io::Error>(::http::Response::new(()))
//! # });
//! let etcd = etcd_client::Client::connect(["http://127.0.0.1:2379"], None).await?;
//! let lb = tower_lb::http::balance(client.clone(), Vec::<&str>::new())?.build()?;
//! let source = Etcd::builder(etcd, "services/cart").build()?;
//! let stats = source.stats();
//! let driver = source.spawn(lb.handle(), discover::http_endpoints(client, "http")?);
//! # drop((driver, stats)); Ok(()) }
//! ```
//!
//! # Registering a replica
//!
//! [`register`] writes a replica's key under a lease and keeps the lease
//! alive until the returned [`Registration`] is dropped (which revokes it:
//! the replica leaves every pool at once) or
//! [`let_expire`](Registration::let_expire)d; a replica that dies leaves
//! when its lease expires, within its TTL.
//!
//! # Running etcd locally
//!
//! With feature `local`, [`local::LocalEtcd`] starts the etcd binary
//! (Debian's `etcd-server`) on 127.0.0.1 with a temporary data directory,
//! and can kill and restart it: the crate's tests, and anything that wants
//! a real registry on one machine, use it.

mod register;
mod source;
mod value;
mod watch;

#[cfg(feature = "local")]
pub mod local;

/// The crate's README, compiled with the doc tests so its example cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;

pub use register::{MAX_TTL, RegisterError, Registration, register};
pub use source::{
    Builder, DEFAULT_RECONNECT_BASE, DEFAULT_RECONNECT_CAP, DEFAULT_REQUEST_TIMEOUT, Etcd,
    MAX_REQUEST_TIMEOUT,
};
pub use value::{Endpoint, Malformed};

/// Checks a target: a non-empty key prefix without a trailing `/`.
fn check_target(target: &str) -> Result<(), tower_lb::ConfigError> {
    if target.is_empty() || target.ends_with('/') {
        return Err(tower_lb::ConfigError::new(
            "etcd.target",
            target,
            "a non-empty key prefix without a trailing '/' (keys are read under target + '/')",
        ));
    }
    Ok(())
}
