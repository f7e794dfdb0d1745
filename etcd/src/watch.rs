//! The list-then-watch loop: list the prefix, watch from the list's
//! revision, resume after a lost watch, re-list when the revision is gone.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Duration;

use etcd_client::{GetOptions, KeyValue, WatchOptions, WatchResponse};
use tower_lb::Handle;
use tower_lb::discover::{Reconciler, Target, until_gone};
use tower_lb::pick::Picker;

use crate::source::Etcd;
use crate::value::{Endpoint, Malformed};

/// The source's name in health events and `Stats`.
const SOURCE: &str = "etcd";

/// Why a session (one list or resume, and the watch after it) ended.
#[derive(Debug)]
enum Failure {
    /// A request failed (etcd away, the connection lost, an error status).
    Etcd(&'static str, etcd_client::Error),
    /// A request took longer than the request timeout.
    TimedOut(&'static str, Duration),
    /// etcd ended the watch stream.
    Closed,
    /// etcd cancelled the watch for a reason other than compaction.
    Canceled(String),
    /// The revision to resume from was compacted away: re-list.
    Compacted { resume: i64, compacted: i64 },
    /// etcd is not the store that was read (a new or restored cluster):
    /// its cluster id changed, or its revision went backwards. Re-list.
    Replaced(String),
}

impl Failure {
    /// Whether the failure calls for a fresh list rather than a resumed
    /// watch; a re-list is not delayed.
    fn relist(&self) -> bool {
        matches!(self, Failure::Compacted { .. } | Failure::Replaced(_))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Etcd(what, e) => write!(f, "{what} failed: {e}"),
            Failure::TimedOut(what, t) => write!(f, "{what} timed out after {t:?}"),
            Failure::Closed => f.write_str("etcd closed the watch stream"),
            Failure::Canceled(why) => write!(f, "etcd cancelled the watch: {why}"),
            Failure::Compacted { resume, compacted } => write!(
                f,
                "revision {resume} was compacted (compacted up to {compacted}): re-listing"
            ),
            Failure::Replaced(why) => write!(f, "{why} (a new or restored cluster): re-listing"),
        }
    }
}

/// A value that was skipped.
struct Skipped<'a>(&'a [u8], Malformed);

impl fmt::Display for Skipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = String::from_utf8_lossy(self.0);
        write!(f, "skipped the value of {key:?}: {}", self.1)
    }
}

/// The source's state across sessions: the last good view of the prefix.
pub(crate) struct Watcher<K, M> {
    etcd: Etcd,
    sync: Reconciler<SocketAddr, K, M>,
    /// Each key's endpoint (keys whose value is malformed are absent).
    keys: BTreeMap<Vec<u8>, Target<SocketAddr>>,
    /// The store revision everything in `keys` is as of; `None` until a
    /// list succeeds, and after a compaction.
    revision: Option<i64>,
    /// The id of the cluster the list read (0 until then).
    cluster: u64,
}

impl<K, M> Watcher<K, M>
where
    K: Hash + Eq + Clone,
{
    pub(crate) fn new(etcd: Etcd, make: M) -> Self {
        Self {
            etcd,
            sync: Reconciler::new(make),
            keys: BTreeMap::new(),
            revision: None,
            cluster: 0,
        }
    }

    /// Runs sessions until the balancer is gone; between failed sessions
    /// it backs off, keeping the last good set in the balancer.
    pub(crate) async fn run<S, P: Picker, C>(mut self, handle: Handle<K, S, P, C>)
    where
        M: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let mut retry = 0u32;
        let mut relisted = false;
        loop {
            let mut delivered = false;
            let failure = tokio::select! {
                f = self.session(&handle, &mut delivered) => f,
                () = until_gone(&handle) => return,
            };
            self.etcd.stats.error(&handle, SOURCE, &failure);
            if delivered {
                retry = 0;
            }
            if failure.relist() {
                self.revision = None;
                // A re-list goes at once, unless the last one was a re-list
                // too: a store that keeps refusing is not hammered.
                if !std::mem::replace(&mut relisted, true) {
                    continue;
                }
            } else {
                relisted = false;
            }
            let delay = self.etcd.backoff.delay(retry);
            retry = retry.saturating_add(1);
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = until_gone(&handle) => return,
            }
        }
    }

    /// Lists if needed, then watches until something fails. Sets
    /// `delivered` once the list or the watch delivered anything.
    async fn session<S, P: Picker, C>(
        &mut self,
        handle: &Handle<K, S, P, C>,
        delivered: &mut bool,
    ) -> Failure
    where
        M: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let resume = match self.revision {
            Some(revision) => revision,
            None => match self.list(handle).await {
                Ok(revision) => {
                    *delivered = true;
                    revision
                }
                Err(failure) => return failure,
            },
        };
        let mut client = self.etcd.client.watch_client();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(resume + 1);
        let prefix = self.etcd.prefix.clone();
        let opened = bounded(self.etcd.request_timeout, "opening the watch", async {
            let mut stream = client.watch(prefix, Some(options)).await?;
            // The first answer says whether the watch was created.
            let first = stream.message().await?;
            Ok((stream, first))
        });
        let (mut stream, mut next) = match opened.await {
            Ok(opened) => opened,
            Err(failure) => return failure,
        };
        loop {
            match next {
                Some(response) => {
                    if let Err(failure) = self.on_response(handle, &response, resume) {
                        return failure;
                    }
                    *delivered = true;
                }
                None => return Failure::Closed,
            }
            next = match stream.message().await {
                Ok(next) => next,
                Err(e) => return Failure::Etcd("the watch", e),
            };
        }
    }

    /// Lists every key under the prefix and applies the result as the
    /// whole set; returns the revision it is as of.
    async fn list<S, P: Picker, C>(&mut self, handle: &Handle<K, S, P, C>) -> Result<i64, Failure>
    where
        M: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let mut kv = self.etcd.client.kv_client();
        let prefix = self.etcd.prefix.clone();
        let got = bounded(self.etcd.request_timeout, "the list", async move {
            kv.get(prefix, Some(GetOptions::new().with_prefix())).await
        })
        .await?;
        let revision = got.header().map_or(0, |h| h.revision());
        self.cluster = got.header().map_or(0, |h| h.cluster_id());
        self.keys.clear();
        for kv in got.kvs() {
            self.put(handle, kv);
        }
        self.apply(handle);
        self.revision = Some(revision);
        Ok(revision)
    }

    /// One watch response: its events applied as one update.
    fn on_response<S, P: Picker, C>(
        &mut self,
        handle: &Handle<K, S, P, C>,
        response: &WatchResponse,
        resume: i64,
    ) -> Result<(), Failure>
    where
        M: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        if response.compact_revision() != 0 {
            return Err(Failure::Compacted {
                resume: resume + 1,
                compacted: response.compact_revision(),
            });
        }
        if response.canceled() {
            return Err(Failure::Canceled(response.cancel_reason().to_owned()));
        }
        if response.created()
            && let Some(header) = response.header()
        {
            if self.cluster != 0 && header.cluster_id() != self.cluster {
                let (now, was) = (header.cluster_id(), self.cluster);
                return Err(Failure::Replaced(format!(
                    "etcd's cluster id is {now:x}, the list read {was:x}"
                )));
            }
            if header.revision() < resume {
                let now = header.revision();
                return Err(Failure::Replaced(format!(
                    "etcd is at revision {now}, before {resume} already read"
                )));
            }
        }
        if response.events().is_empty() {
            return Ok(());
        }
        let mut last = resume;
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            last = last.max(kv.mod_revision());
            // A deleted key's version is 0 (etcd's mvcc resets it on
            // deletion), and only a deleted key's. Read that rather than
            // `event_type`, which panics on a type it does not know.
            if kv.version() == 0 {
                self.keys.remove(kv.key());
            } else {
                self.put(handle, kv);
            }
        }
        self.apply(handle);
        // Resume after the last event seen, as etcd's Go client does: a
        // response's header can be ahead of events still to come when the
        // watch is catching up.
        self.revision = Some(self.revision.unwrap_or(resume).max(last));
        Ok(())
    }

    /// Records a key's new value; a malformed one is counted and leaves
    /// the key without an endpoint, as a list would.
    fn put<S, P: Picker, C>(&mut self, handle: &Handle<K, S, P, C>, kv: &KeyValue) {
        match Endpoint::from_json(kv.value()) {
            Ok(endpoint) => {
                self.keys.insert(kv.key().to_vec(), endpoint.target());
            }
            Err(why) => {
                self.keys.remove(kv.key());
                self.etcd
                    .stats
                    .error(handle, SOURCE, &Skipped(kv.key(), why));
            }
        }
    }

    fn apply<S, P: Picker, C>(&mut self, handle: &Handle<K, S, P, C>)
    where
        M: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let targets: Vec<Target<SocketAddr>> = self.keys.values().cloned().collect();
        self.etcd.stats.applied(&self.sync.apply(handle, &targets));
    }
}

/// `request`, failing as `what` after `timeout`.
async fn bounded<T>(
    timeout: Duration,
    what: &'static str,
    request: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(e)) => Err(Failure::Etcd(what, e)),
        Err(_) => Err(Failure::TimedOut(what, timeout)),
    }
}
