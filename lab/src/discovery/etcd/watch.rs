//! Watching a row: its prefix in etcd (keys put and deleted, for the
//! rivals' `Discover` channels and the report's key times), and its
//! tower-lb balancers' pools (in, first request, out).

use std::net::SocketAddr;
use std::time::Duration;

use etcd_client::{Client, GetOptions, WatchOptions};
use tokio::time::Instant;
use tower_lb::Handle;
use tower_lb::http::Classifier;
use tower_lb::pick::Picker;

use super::replicas::Shared;
use crate::run::endpoint::Endpoint;

/// How often the pools are read: fine enough for figures in tens of
/// milliseconds, cheap beside the row's traffic.
pub const POLL: Duration = Duration::from_millis(5);

/// Lists `target`'s keys, then watches them, calling `on(addr, true)` for
/// each key put and `on(addr, false)` for each deleted, until etcd ends
/// the watch.
///
/// # Errors
///
/// etcd's, if the list or the watch failed.
pub async fn keys(
    client: Client,
    target: String,
    mut on: impl FnMut(SocketAddr, bool) + Send,
) -> Result<(), etcd_client::Error> {
    let prefix = format!("{target}/");
    let got = client
        .kv_client()
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await?;
    for kv in got.kvs() {
        if let Some(a) = addr(&prefix, kv.key()) {
            on(a, true);
        }
    }
    let from = got.header().map_or(0, |h| h.revision()) + 1;
    let options = WatchOptions::new().with_prefix().with_start_revision(from);
    let mut stream = client
        .watch_client()
        .watch(prefix.as_str(), Some(options))
        .await?;
    while let Some(response) = stream.message().await? {
        for kv in response.events().iter().filter_map(|e| e.kv()) {
            if let Some(a) = addr(&prefix, kv.key()) {
                // A deleted key's version is 0 (as tower-lb-etcd reads it).
                on(a, kv.version() != 0);
            }
        }
    }
    Ok(())
}

/// The address a key names: `prefix<addr>`.
fn addr(prefix: &str, key: &[u8]) -> Option<SocketAddr> {
    std::str::from_utf8(key)
        .ok()?
        .strip_prefix(prefix)?
        .parse()
        .ok()
}

/// Records, every [`POLL`], when each replica is in every balancer that
/// may have it (`expect[i]` of them), first picked, and in none after its
/// leave; runs until aborted.
pub async fn pools<P: Picker>(
    handles: Vec<Handle<usize, Endpoint, P, Classifier>>,
    expect: Vec<usize>,
    replicas: Shared,
) {
    let n = expect.len();
    loop {
        let mut have = vec![0usize; n];
        let mut picked = vec![false; n];
        for h in &handles {
            for (i, st) in h.endpoints() {
                if i < n {
                    have[i] += 1;
                    picked[i] |= st.picks() > 0;
                }
            }
        }
        let now = Instant::now();
        for (i, t) in replicas.times().iter().enumerate() {
            if t.registered.is_none() {
                continue;
            }
            if t.in_pool.is_none() && have[i] >= expect[i] && t.left.is_none() {
                replicas.edit(i, |t| t.in_pool = Some(now));
            }
            if t.first_pick.is_none() && picked[i] {
                replicas.edit(i, |t| t.first_pick = Some(now));
            }
            if t.left.is_some() && t.out_of_pool.is_none() && have[i] == 0 {
                replicas.edit(i, |t| t.out_of_pool = Some(now));
            }
        }
        tokio::time::sleep(POLL).await;
    }
}
